"""attention beyond causal decoders (issue 43): causal=False, keys of another
length than the queries (the causal diagonal bottom-right) and SDPA's
attn_mask, against the float64 reference (reference.attention_masked)."""
import sys

import numpy as np
import pytest

import ropeattn
import reference as ref

ra_attention = sys.modules["ropeattn.attention"]  # the module: ropeattn.attention is the function

RNG = np.random.default_rng(4343)

# As test_attention's: float32 softmax and sums over at most 40 keys of
# D <= 32 features from N(0, 1) inputs are good to a few 1e-6; a wrong mask
# or alignment is off by 1e-2 or more.
ATOL = 2e-5


def randn32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def qkv(b=2, sq=11, sk=11, h=4, hkv=2, d=16):
    return randn32(b, sq, h, d), randn32(b, sk, hkv, d), randn32(b, sk, hkv, d)


def check(q, k, v, **kw):
    """attention and attention_forward against the reference; returns out."""
    want, want_lse = ref.attention_masked(q, k, v, **{a: b for a, b in kw.items()
                                                      if a != "dtype"})
    out = ropeattn.attention(q, k, v, **kw)
    np.testing.assert_allclose(out, want, rtol=0, atol=ATOL, err_msg=str(list(kw)))
    out2, lse = ropeattn.attention_forward(q, k, v, **kw)
    np.testing.assert_array_equal(out2, out)
    seen = np.isfinite(want_lse)
    assert (np.isfinite(lse) == seen).all()
    np.testing.assert_allclose(lse[seen], want_lse[seen], rtol=0, atol=ATOL)
    return out


@pytest.mark.parametrize("sq,sk", [(11, 11), (5, 17), (17, 5), (1, 9)])
@pytest.mark.parametrize("causal", [True, False])
def test_causal_or_not_and_key_lengths(sq, sk, causal):
    """Sk != Sq: the causal diagonal bottom-right (query i sees keys
    j <= i + Sk - Sq); with Sq > Sk the first Sq - Sk queries see nothing:
    zero rows, lse -inf."""
    q, k, v = qkv(sq=sq, sk=sk)
    out = check(q, k, v, causal=causal)
    if causal and sq > sk:
        assert not out[:, :sq - sk].any()


@pytest.mark.parametrize("causal", [True, False])
def test_window_softcap_sinks_scale(causal):
    q, k, v = qkv(sq=23, sk=29, d=32)
    sinks = randn32(4)
    for kw in [dict(window=4), dict(softcap=2.0, scale=0.3), dict(sinks=sinks),
               dict(window=3, softcap=5.0, sinks=sinks)]:
        check(q, k, v, causal=causal, **kw)


# SDPA's broadcastable attn_mask shapes for [B, H, Sq, Sk] = [2, 4, 7, 9]
MASK_SHAPES = [(7, 9), (2, 1, 7, 9), (1, 4, 1, 9), (4, 7, 9), (1, 9), (9,), (2, 4, 7, 9),
               (7, 1), ()]


@pytest.mark.parametrize("shape", MASK_SHAPES, ids=str)
@pytest.mark.parametrize("causal", [True, False])
def test_bool_mask_shapes(shape, causal):
    q, k, v = qkv(sq=7, sk=9)
    mask = RNG.random(shape) < 0.7
    check(q, k, v, causal=causal, attn_mask=mask)
    check(q, k, v, causal=causal, attn_mask=mask, window=3, sinks=randn32(4))


@pytest.mark.parametrize("shape", MASK_SHAPES, ids=str)
def test_additive_mask_shapes_and_dtypes(shape):
    q, k, v = qkv(sq=7, sk=9)
    bias = RNG.standard_normal(shape)
    bias = np.where(RNG.random(shape) < 0.3, -np.inf, bias)
    for m in (bias.astype(np.float32), bias.astype(np.float16)):
        check(q, k, v, causal=False, attn_mask=m)
    bits = ref.to_bf16(bias.astype(np.float32))  # bfloat16 bits: dtype="bfloat16" names them
    got = ropeattn.attention(q, k, v, causal=False, attn_mask=bits, dtype="bfloat16")
    want, _ = ref.attention_masked(q, k, v, causal=False, attn_mask=ref.from_bf16(bits))
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_fully_masked_rows_are_zero_and_huge_negative_rows_average():
    """A row masked all through (bool False, or -inf) gives zeros and lse
    -inf; finfo.min (transformers' additive mask) is finite: the row
    averages v, as SDPA does."""
    q, k, v = qkv(b=1, sq=5, sk=6)
    mask = np.ones((5, 6), bool)
    mask[2] = False
    out, lse = ropeattn.attention_forward(q, k, v, causal=False, attn_mask=mask)
    assert not out[0, 2].any() and np.isneginf(lse[0, :, 2]).all()
    additive = np.where(mask, 0, -np.inf).astype(np.float32)
    np.testing.assert_array_equal(ropeattn.attention(q, k, v, causal=False,
                                                     attn_mask=additive), out)
    lowest = np.where(mask, 0, np.finfo(np.float32).min).astype(np.float32)
    got = ropeattn.attention(q, k, v, causal=False, attn_mask=lowest)
    mean = np.repeat(v, 2, axis=2).astype(np.float64).mean(1)  # [B, H, D]
    np.testing.assert_allclose(got[0, 2], mean[0], rtol=0, atol=ATOL)
    check(q, k, v, causal=False, attn_mask=lowest)


def test_mask_is_read_in_place(monkeypatch):
    """Broadcast masks reach the library as zero-stride views of the
    caller's memory, strided ones as they are: no copy."""
    seen = []
    real = ra_attention._ropeattn.attention

    def spy(*args):
        seen.append(args[-1][0])  # the pair (attn_mask, its dtype) last
        return real(*args)

    monkeypatch.setattr(ra_attention._ropeattn, "attention", spy)
    q, k, v = qkv(sq=7, sk=9)
    base = RNG.random((7, 18)) < 0.5
    mask = base[:, ::2]  # every other column: strided
    out = ropeattn.attention(q, k, v, causal=False, attn_mask=mask)
    assert np.shares_memory(seen[-1], base) and seen[-1].strides[:2] == (0, 0)
    np.testing.assert_array_equal(
        out, ropeattn.attention(q, k, v, causal=False, attn_mask=np.ascontiguousarray(mask)))
    transposed = (RNG.random((9, 7)) < 0.5).T  # [Sq, Sk] read column-major
    ropeattn.attention(q, k, v, causal=False, attn_mask=transposed)
    assert np.shares_memory(seen[-1], transposed)
    flipped = base[::-1, ::-2]  # negative strides: copied, the same values
    check(q, k, v, causal=False, attn_mask=flipped)
    assert not np.shares_memory(seen[-1], base)


def test_shape_bhsd_with_mask():
    q, k, v = qkv(sq=7, sk=9)
    mask = RNG.random((2, 1, 7, 9)) < 0.6  # [B, H, Sq, Sk] whatever shape= says
    t = [np.ascontiguousarray(a.transpose(0, 2, 1, 3)) for a in (q, k, v)]
    got = ropeattn.attention(*t, causal=False, attn_mask=mask, shape="bhsd")
    np.testing.assert_array_equal(got.transpose(0, 2, 1, 3),
                                  ropeattn.attention(q, k, v, causal=False, attn_mask=mask))


def test_backward_shapes_and_masked_rows():
    """attention_backward with a mask and Sk != Sq: gradients of k's and
    v's shapes, zero for a fully masked query row (its dq) and for keys no
    query sees (their dk, dv).  Values: tests/test_torch_mask.py."""
    q, k, v = qkv(sq=5, sk=8)
    mask = np.ones((5, 8), bool)
    mask[1] = False
    mask[:, 6] = False
    out, lse = ropeattn.attention_forward(q, k, v, causal=False, attn_mask=mask)
    dq, dk, dv, _ = ropeattn.attention_backward(randn32(*q.shape), q, k, v, out, lse,
                                                causal=False, attn_mask=mask)
    assert dq.shape == q.shape and dk.shape == dv.shape == k.shape
    assert not dq[:, 1].any() and not dk[:, 6].any() and not dv[:, 6].any()


def test_bad_masks():
    q, k, v = qkv(sq=7, sk=9)
    with pytest.raises(TypeError, match=r"attn_mask.*int64.*astype\(bool\)"):
        ropeattn.attention(q, k, v, attn_mask=np.ones((7, 9), np.int64))
    with pytest.raises(TypeError, match="attn_mask.*float64"):
        ropeattn.attention(q, k, v, attn_mask=np.zeros((7, 9)))
    with pytest.raises(TypeError, match='attn_mask.*dtype="bfloat16"'):
        ropeattn.attention(q, k, v, attn_mask=np.zeros((7, 9), np.uint16))
    with pytest.raises(ValueError, match=r"attn_mask: shape \(7, 8\) does not broadcast"):
        ropeattn.attention(q, k, v, attn_mask=np.ones((7, 8), bool))
    with pytest.raises(ValueError, match="attn_mask: shape"):
        ropeattn.attention(q, k, v, attn_mask=np.ones((3, 7, 9), bool))  # H is 4
    with pytest.raises(ValueError, match="attn_mask: 5 dimensions"):
        ropeattn.attention(q, k, v, attn_mask=np.ones((1, 2, 4, 7, 9), bool))
    for bad in (np.nan, np.inf):  # the library's check, naming the element
        m = np.zeros((7, 9), np.float32)
        m[3, 4] = bad
        with pytest.raises(ValueError, match="attn_mask") as e:
            ropeattn.attention(q, k, v, attn_mask=m)
        assert e.value.status is not None
    with pytest.raises(ValueError, match="attn_mask"):
        ropeattn.attention(q, k, v, attn_mask=[[1, 2], [3]])  # ragged: not an array
    assert not ropeattn.attention(q, k, v, attn_mask=np.array(False)).any()  # 0-D


def test_what_the_library_refuses():
    """padding_mask, cu_seqlens, chunk with Sq != Sk, and the block calls
    with causal=False or attn_mask: UnsupportedError (a NotImplementedError)."""
    q, k, v = qkv(sq=5, sk=8)
    for kw in (dict(chunk=3), dict(cu_seqlens=[0, 2, 5])):
        with pytest.raises(NotImplementedError):
            ropeattn.attention(q, k, v, **kw)
    q, k, v = qkv(sq=1, sk=8)
    with pytest.raises(NotImplementedError):
        ra_attention.attention_block_forward(q, k, v, 7, 0, 8, causal=False)


def test_no_reference_or_memory_growth_with_masks():
    """The mask's path (a broadcast view, the pair the extension takes)
    keeps no reference and no memory per call."""
    import tracemalloc
    q, k, v = qkv(sq=4, sk=6)
    mask = RNG.random((4, 6)) < 0.5
    refs = [sys.getrefcount(a) for a in (q, k, v, mask)]

    def calls():
        ropeattn.attention(q, k, v, causal=False, attn_mask=mask)
        ropeattn.attention_forward(q, k, v, attn_mask=mask[None, None])
    for _ in range(100):
        calls()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(1000):
        calls()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert [sys.getrefcount(a) for a in (q, k, v, mask)] == refs
    assert grown < 16384, grown  # one small object per call would be > 50 kB
