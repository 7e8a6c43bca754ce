"""attention against the float64 reference."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import ropeattn
import reference as ref

RNG = np.random.default_rng(2121)

# Softmax and sums in float32 over at most 40 keys of D <= 32 features from
# N(0, 1) inputs: logits to ~1e-6, outputs (weighted means of v, |v| < 6) to
# a few 1e-6; 2e-5 leaves room without hiding a wrong mask (those are 1e-2).
ATOL = 2e-5


def randn32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def qkv(b=2, s=13, h=4, hkv=2, d=16):
    return (RNG.standard_normal((b, s, h, d)).astype(np.float32),
            RNG.standard_normal((b, s, hkv, d)).astype(np.float32),
            RNG.standard_normal((b, s, hkv, d)).astype(np.float32))


@pytest.mark.parametrize("h,hkv", [(4, 4), (4, 2), (8, 1)])
def test_causal_gqa(h, hkv):
    q, k, v = qkv(h=h, hkv=hkv)
    out = ropeattn.attention(q, k, v)
    assert out.dtype == np.float32 and out.shape == q.shape and out.flags.c_contiguous
    np.testing.assert_allclose(out, ref.attention(q, k, v), rtol=0, atol=ATOL)


def test_window_softcap_sinks_scale():
    q, k, v = qkv(s=40, d=32)
    sinks = RNG.standard_normal(4).astype(np.float32)
    for kw in [dict(window=5), dict(softcap=2.0), dict(sinks=sinks), dict(scale=0.3),
               dict(window=3, softcap=5.0, sinks=sinks, scale=1 / math.sqrt(8))]:
        np.testing.assert_allclose(ropeattn.attention(q, k, v, **kw),
                                   ref.attention(q, k, v, **kw), rtol=0, atol=ATOL)


def test_chunk_padding_documents():
    q, k, v = qkv(s=24)
    left = np.ones((2, 24), np.uint8)
    left[0, :5] = 0  # row 0 left-padded by 5, row 1 right-padded by 3
    left[1, 21:] = 0
    for kw in [dict(chunk=7), dict(padding_mask=left), dict(chunk=4, padding_mask=left),
               dict(cu_seqlens=[0, 6, 7, 24]), dict(window=3, cu_seqlens=np.array([0, 10, 24]))]:
        got = ropeattn.attention(q, k, v, **kw)
        np.testing.assert_allclose(got, ref.attention(q, k, v, **kw), rtol=0, atol=ATOL,
                                   err_msg=str(kw))
    # padding queries give zero rows
    got = ropeattn.attention(q, k, v, padding_mask=left)
    assert not got[0, :5].any() and not got[1, 21:].any()
    with pytest.raises(ropeattn.ArgumentError):
        ropeattn.attention(q, k, v, padding_mask=left[:, :5])
    with pytest.raises(ropeattn.ArgumentError):
        ropeattn.attention(q, k, v, padding_mask=left * 2)
    for ragged in (dict(padding_mask=[[1] * 30, [1] * 29]), dict(cu_seqlens=[0, [6], 30])):
        with pytest.raises(ropeattn.ArgumentError, match="not an array"):
            ropeattn.attention(q, k, v, **ragged)
    with pytest.raises(ropeattn.ArgumentError, match="positions: not an array"):
        ropeattn.RotaryEmbedding(8).cos_sin([[0, 1], [2]])
    with pytest.raises(ropeattn.ArgumentError, match="positions: not an array"):
        ropeattn.apply_rotary(q[..., :8], [[0, 1], [2]], rope=ropeattn.RotaryEmbedding(8))
    with pytest.raises(ropeattn.ArgumentError):  # the library's check: must end at S
        ropeattn.attention(q, k, v, cu_seqlens=[0, 6, 20])


def test_out_reused():
    q, k, v = qkv()
    out = np.full(q.shape, np.nan, np.float32)
    assert ropeattn.attention(q, k, v, out=out) is out
    np.testing.assert_allclose(out, ref.attention(q, k, v), rtol=0, atol=ATOL)
    with pytest.raises(ropeattn.ArgumentError):
        ropeattn.attention(q, k, v, out=out[:, :-1])
    with pytest.raises(ropeattn.ArgumentError):  # out over q: the library refuses
        ropeattn.attention(q, k, v, out=q)


def test_bfloat16_keys_and_values():
    q, k, v = qkv()
    kb, vb = ref.to_bf16(k), ref.to_bf16(v)
    # widened exactly to float32: the same tolerance, against the bf16 values
    np.testing.assert_allclose(ropeattn.attention(q, kb, vb, dtype="bfloat16"),
                               ref.attention(q, ref.from_bf16(kb), ref.from_bf16(vb)),
                               rtol=0, atol=ATOL)


def test_float16_keys_and_values():
    q, k, v = qkv()
    k16, v16 = k.astype(np.float16), v.astype(np.float16)
    # widened exactly to float32: the same tolerance, against the f16 values
    np.testing.assert_allclose(ropeattn.attention(q, k16, v16), ref.attention(q, k16, v16),
                               rtol=0, atol=ATOL)


def test_half_queries():
    """q in float16 or bfloat16 (with float32 or 16-bit k, v): widened
    exactly, so forward and backward are the float32 ones on the widened
    values, to the bit -- but for all-bfloat16 inputs on a CPU with
    bfloat16 units, whose forward rounds P to bfloat16 (2^-8 max|v|) and
    whose backward rounds P, dS and dout (ra_attention_backward's bounds
    are per element; here checked against 2^-5 max|grad|, 7e-3 seen over
    20 seeds).  Elsewhere bfloat16 k and v on the short path (13 queries:
    the decode kernel) are widened in pairs, even and odd elements in
    lanes of their own, once D holds two vectors (16 on avx2, 32 on
    avx512): the same float32 products summed in another order, so the
    forward is within float32 rounding, 2^-20 max|v| (2.4e-7 of 3.9 seen
    on avx2 and base), not to the bit."""
    q, k, v = qkv()
    dout = RNG.standard_normal(q.shape).astype(np.float32)
    for qh, name in ((q.astype(np.float16), None), (ref.to_bf16(q), "bfloat16")):
        qw = qh.astype(np.float32) if name is None else ref.from_bf16(qh)
        for kv in ((k, v), (ref.to_bf16(k), ref.to_bf16(v))):
            kw, vw = ((ref.from_bf16(a) for a in kv) if kv[0].dtype == np.uint16 else kv)
            dtype = "bfloat16" if name or kv[0].dtype == np.uint16 else None
            out, lse = ropeattn.attention_forward(qh, *kv, dtype=dtype)
            want, want_lse = ropeattn.attention_forward(qw, kw, vw)
            units = name and kv[0].dtype == np.uint16 and ropeattn.simd() in ("amx", "avx512bf16")
            if units:
                np.testing.assert_allclose(out, want, rtol=0,
                                           atol=2 ** -9 * np.abs(vw).max() + ATOL)
            elif kv[0].dtype == np.uint16:
                np.testing.assert_allclose(out, want, rtol=0, atol=2 ** -20 * np.abs(vw).max())
                np.testing.assert_allclose(lse, want_lse, rtol=2 ** -20, atol=0)
            else:
                assert np.array_equal(out, want) and np.array_equal(lse, want_lse)
            got = ropeattn.attention_backward(dout, qh, *kv, out, lse, dtype=dtype)
            grads = ropeattn.attention_backward(dout, qw, kw, vw, out, lse)
            for g, w in zip(got[:3], grads[:3]):
                assert g.dtype == np.float32
                if units:
                    np.testing.assert_allclose(g, w, rtol=0, atol=2 ** -5 * np.abs(w).max())
                else:
                    assert np.array_equal(g, w)


def test_strided_fused_qkv():
    b, s, h, hkv, d = 2, 9, 4, 2, 16
    fused = RNG.standard_normal((b, s, h + 2 * hkv, d)).astype(np.float32)
    q, k, v = fused[:, :, :h], fused[:, :, h:h + hkv], fused[:, :, h + hkv:]
    want = ref.attention(q, k, v)
    np.testing.assert_allclose(ropeattn.attention(q, k, v), want, atol=ATOL)
    # head-major k and v (as a KV cache stores them), transposed views
    kh = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    vh = np.ascontiguousarray(v.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(ropeattn.attention(q, kh, vh), want, atol=ATOL)
    # reversed features: copied first
    np.testing.assert_allclose(ropeattn.attention(q[..., ::-1], k[..., ::-1], v),
                               ref.attention(q[..., ::-1], k[..., ::-1], v), atol=ATOL)


def test_dropout_is_seeded():
    q, k, v = qkv()
    a = ropeattn.attention(q, k, v, dropout_p=0.5, seed=7)
    assert np.array_equal(a, ropeattn.attention(q, k, v, dropout_p=0.5, seed=7))
    assert not np.array_equal(a, ropeattn.attention(q, k, v, dropout_p=0.5, seed=8))
    assert not np.allclose(a, ropeattn.attention(q, k, v))


def test_context_gives_the_same_bits():
    q, k, v = qkv(s=128, d=64)
    with ropeattn.Context(threads=2) as ctx:
        np.testing.assert_array_equal(ropeattn.attention(q, k, v, context=ctx),
                                      ropeattn.attention(q, k, v))


def test_bad_inputs():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="float32"):
        ropeattn.attention(q.astype(np.float64), k, v)
    with pytest.raises(TypeError, match="float32 or float16"):
        ropeattn.attention(q, k.astype(np.int32), v.astype(np.int32))
    with pytest.raises(TypeError, match="dtype"):
        ropeattn.attention(q, k, v.astype(np.float16))
    with pytest.raises(TypeError, match="ndarray"):
        ropeattn.attention(q, k.tolist(), v)
    with pytest.raises(ValueError, match="4 dimensions"):
        ropeattn.attention(q[0], k, v)
    with pytest.raises(ValueError, match="multiple"):
        ropeattn.attention(np.concatenate((q, q[:, :, :1]), 2), k, v)
    with pytest.raises(ValueError, match="shape"):
        ropeattn.attention(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="differ"):
        ropeattn.attention(q, k, v[..., :8])
    with pytest.raises(ValueError, match="window"):
        ropeattn.attention(q, k, v, window=0)
    with pytest.raises(ValueError, match="softcap"):
        ropeattn.attention(q, k, v, softcap=-1.0)
    with pytest.raises(ValueError, match="sinks"):
        ropeattn.attention(q, k, v, sinks=np.zeros(3))
    with pytest.raises(ValueError) as e:  # the library's check: sinks must be finite
        ropeattn.attention(q, k, v, sinks=np.array([0, np.inf, 0, 0]))
    assert e.value.status is not None and "ra_attention" in str(e.value)
    with pytest.raises(ValueError, match="dropout"):
        ropeattn.attention(q, k, v, dropout_p=1.0)
    for p in ("0.1", False, None, np.array([0.1, 0.2])):  # a TypeError naming no argument;
        with pytest.raises(ValueError, match="dropout_p"):  # False ran as 0
            ropeattn.attention(q, k, v, dropout_p=p)
    for seed in (True, False):  # a bool ran as seed 1 or 0
        with pytest.raises(ValueError, match="seed"):
            ropeattn.attention(q, k, v, seed=seed)
    for option in ("window", "chunk"):  # past int64: an OverflowError naming no argument
        with pytest.raises(ValueError, match=f"{option}: 1180591620717411303424"):
            ropeattn.attention(q, k, v, **{option: 2 ** 70})
    with pytest.raises(ValueError, match="cu_seqlens: 18446744073709551615 is beyond int64"):
        ropeattn.attention(q, k, v, cu_seqlens=np.array([0, 2 ** 64 - 1], np.uint64))
    with pytest.raises(ValueError, match="q_start"):
        sys.modules["ropeattn.attention"].attention_block_forward(q, k, v, 2 ** 63, 0, 13)
    with pytest.raises(TypeError, match="Context"):
        ropeattn.attention(q, k, v, context=1)
    for causal in (None, "no", 0):  # None read as False: no causal mask, silently
        with pytest.raises(ValueError, match="causal: expected True or False"):
            ropeattn.attention(q, k, v, causal=causal)
    np.testing.assert_array_equal(ropeattn.attention(q, k, v, causal=np.False_),
                                  ropeattn.attention(q, k, v, causal=False))
    for dtype in ("float16", "bf16", "bfloat16"):  # naming no array of q, k, v: ignored
        with pytest.raises(TypeError, match="dtype"):
            ropeattn.attention(q, k, v, dtype=dtype)


def test_forward_backward_pair_bad_input():
    q, k, v = qkv()
    out, lse = ropeattn.attention_forward(q, k, v, window=4)
    assert lse.shape == (2, 4, 13) and lse.dtype == np.float32
    np.testing.assert_allclose(out, ref.attention(q, k, v, window=4), rtol=0, atol=ATOL)
    dout = np.ones_like(out)
    dq, dk, dv, dsinks = ropeattn.attention_backward(dout, q, k, v, out, lse, window=4)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert dsinks is None
    with pytest.raises(ropeattn.ArgumentError):  # lse of the wrong shape
        ropeattn.attention_backward(dout, q, k, v, out, lse[:, :2], window=4)
    with pytest.raises(ropeattn.ArgumentError):  # lse not float32
        ropeattn.attention_backward(dout, q, k, v, out, lse.astype(np.float64), window=4)
    with pytest.raises(ropeattn.ArgumentError):  # dout not q's shape
        ropeattn.attention_backward(dout[:, :5], q, k, v, out, lse, window=4)
    with pytest.raises(ropeattn.DtypeError):
        ropeattn.attention_backward(dout.astype(np.float16), q, k, v, out, lse, window=4)
    with pytest.raises(ropeattn.ArgumentError):  # dropout_p out of range
        ropeattn.attention_forward(q, k, v, dropout_p=1.0)


def test_shape_bhsd():
    """shape="bhsd": q [B, H, S, D], k, v [B, Hkv, S, D] read in place (a
    transposed view), out, dq, dk, dv in that order too; the same numbers
    as the [B, S, H, D] call."""
    q, k, v = randn32(2, 11, 4, 16), randn32(2, 11, 2, 16), randn32(2, 11, 2, 16)
    qt, kt, vt = (np.ascontiguousarray(a.transpose(0, 2, 1, 3)) for a in (q, k, v))
    kw = dict(padding_mask=np.ones((2, 11), np.uint8), cu_seqlens=np.array([0, 5, 11]),
              sinks=np.zeros(4, np.float32))
    want = ropeattn.attention(q, k, v, **kw)
    got = ropeattn.attention(qt, kt, vt, shape="bhsd", **kw)
    assert got.shape == (2, 4, 11, 16)
    np.testing.assert_array_equal(got.transpose(0, 2, 1, 3), want)
    out, lse = ropeattn.attention_forward(q, k, v)
    out_t, lse_t = ropeattn.attention_forward(qt, kt, vt, shape="bhsd")
    np.testing.assert_array_equal(out_t.transpose(0, 2, 1, 3), out)
    np.testing.assert_array_equal(lse_t, lse)
    dout = randn32(2, 11, 4, 16)
    grads = ropeattn.attention_backward(dout, q, k, v, out, lse)
    grads_t = ropeattn.attention_backward(np.ascontiguousarray(dout.transpose(0, 2, 1, 3)),
                                          qt, kt, vt, out_t, lse_t, shape="bhsd")
    for g, gt in zip(grads[:3], grads_t[:3]):
        np.testing.assert_array_equal(gt.transpose(0, 2, 1, 3), g)


def test_shape_mix_up_refused_where_the_shapes_tell():
    """[B, H, S, D] arrays given as [B, S, H, D] (or the reverse) are
    refused, naming shape=, where the shapes tell: a mask, sinks or
    cu_seqlens fits the other order only.  q and k alone cannot tell since
    k may have another length than q (cross attention): [B, H, S, D] q and
    k read as [B, S, H, D] have as many heads, S each."""
    q = randn32(1, 4, 12, 16)  # [B, H, S, D] with H == Hkv: only the options tell
    for kw in (dict(padding_mask=np.ones((1, 12))), dict(sinks=np.zeros(4)),
               dict(cu_seqlens=np.array([0, 12]))):
        with pytest.raises(ropeattn.ArgumentError, match='pass shape="bhsd"'):
            ropeattn.attention(q, q, q, **kw)
    with pytest.raises(ropeattn.ArgumentError, match="shape"):
        ropeattn.attention(q, q, q, shape="bsd")
    with pytest.raises(ropeattn.ArgumentError) as e:  # fits neither: no hint
        ropeattn.attention(q, randn32(1, 5, 3, 8), randn32(1, 5, 3, 8))
    assert "pass shape" not in str(e.value)


@pytest.mark.parametrize("sinks", [np.full(4, 1 + 1j), np.ones(4, bool), np.array(["1"] * 4),
                                   np.array([None] * 4)])
def test_sinks_of_real_numbers_only(sinks):
    """sinks of complex numbers lost their imaginary part (a ComplexWarning
    and numbers), bools counted as 1.0: each a DtypeError naming sinks."""
    q, k, v = qkv(1, 6)
    with pytest.raises(ropeattn.DtypeError, match="^sinks: expected real numbers"):
        ropeattn.attention(q, k, v, sinks=sinks)


def test_masked_arrays_are_refused():
    """A numpy.ma array's mask was dropped and its masked entries computed
    with: q, k, v, attn_mask, positions, each a DtypeError naming it."""
    q, k, v = qkv(1, 6)
    masked = np.ma.masked_array(q, mask=np.zeros(q.shape, bool))
    masked[0, 2] = np.ma.masked
    with pytest.raises(ropeattn.DtypeError, match="^q: a masked array"):
        ropeattn.attention(masked, k, v)
    with pytest.raises(ropeattn.DtypeError, match="^x: a masked array"):
        ropeattn.apply_rotary(masked)
    with pytest.raises(ropeattn.DtypeError, match="^attn_mask: a masked array"):
        ropeattn.attention(q, k, v, causal=False,
                           attn_mask=np.ma.masked_array(np.ones((6, 6), bool)))
    with pytest.raises(ropeattn.DtypeError, match="^positions: a masked array"):
        ropeattn.apply_rotary(q, np.ma.masked_array(np.arange(6)))
    # vision_windows' grid_thw and longrope's factors: windows for a masked
    # image, a masked factor read (np.asarray dropped the mask)
    grid = np.ma.masked_array([[1, 4, 4], [1, 8, 8]], mask=[[0, 0, 0], [1, 1, 1]])
    with pytest.raises(ropeattn.DtypeError, match="^grid_thw: a masked array"):
        ropeattn.vision_windows(Path(__file__).resolve().parents[2] / "tests" / "hf" /
                                "qwen2_5_vl_multimodal", grid)
    with pytest.raises(ropeattn.ArgumentError, match="grid_thw: 9223372036854775808"):
        ropeattn.vision_windows(Path(__file__).resolve().parents[2] / "tests" / "hf" /
                                "qwen2_5_vl_multimodal", np.array([[2 ** 63, 4, 4]], np.uint64))
    factors = np.ma.masked_array([1.0, 2.0], mask=[0, 1])
    with pytest.raises(ropeattn.DtypeError, match="^short_factor: a masked array"):
        ropeattn.RotaryEmbedding(4, rope_type="longrope", short_factor=factors,
                                 long_factor=[1.0, 1.0], original_max_position_embeddings=8)
