"""RotaryEmbedding and apply_rotary against the float64 references."""
import numpy as np
import pytest

import ropeattn
import reference as ref

RNG = np.random.default_rng(21)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# inv_freq is computed in double on both sides: only the last bits differ.
INV_FREQ_RTOL = 1e-12
# cos/sin: float32 tables whose angles are within 1e-6 of exact math
# (ropeattn.h), then rounded to float32 (6e-8 relative).
TABLE_ATOL = 2e-6
# apply_rotary in float32 on N(0, 1) inputs (|x| < 6): float32 table
# entries and a product, a product and a sum each rounded once: a few
# ulp of |x|, well under 1e-5.
F32_ATOL = 1e-5


def test_default_inv_freq_and_tables():
    rope = ropeattn.RotaryEmbedding(64, theta=500000.0)
    np.testing.assert_allclose(rope.inv_freq, ref.inv_freq_default(64, 500000.0),
                               rtol=INV_FREQ_RTOL)
    assert rope.inv_freq.dtype == np.float64 and rope.attention_factor == 1.0
    pos = np.array([0, 1, 7, 4095, 4096, 100000, 2**32])
    cos, sin = rope.cos_sin(pos)
    assert cos.dtype == np.float32 and cos.shape == (len(pos), 64)
    angles = pos[:, None].astype(np.float64) * rope.inv_freq
    emb = np.concatenate((angles, angles), -1)  # torch.cat((freqs, freqs), -1)
    np.testing.assert_allclose(cos, np.cos(emb), rtol=0, atol=TABLE_ATOL)
    np.testing.assert_allclose(sin, np.sin(emb), rtol=0, atol=TABLE_ATOL)
    # position ids of any shape, as HF's [B, S]
    cos2, _ = rope.cos_sin(pos.reshape(7, 1))
    assert cos2.shape == (7, 1, 64) and np.array_equal(cos2.reshape(7, 64), cos)


def test_interleaved_tables_repeat_each_angle():
    rope = ropeattn.RotaryEmbedding(8, layout="interleaved")
    cos, sin = rope.cos_sin(np.arange(5))
    angles = np.arange(5)[:, None] * ref.inv_freq_default(8)
    np.testing.assert_allclose(cos[:, 0::2], np.cos(angles), atol=TABLE_ATOL)
    np.testing.assert_array_equal(cos[:, 0::2], cos[:, 1::2])
    np.testing.assert_allclose(sin[:, 1::2], np.sin(angles), atol=TABLE_ATOL)


def test_read_only():
    """Attributes set after the rope was made no longer described the
    library's rope: layout "interleaved" on a half rope gave cos_sin's
    tables interleaved while apply_rotary rotated halves."""
    rope = ropeattn.RotaryEmbedding(16)
    for name, value in (("layout", "interleaved"), ("seq_len", 10), ("theta", 5.0)):
        with pytest.raises(AttributeError, match=f"read-only: {name}"):
            setattr(rope, name, value)
    assert rope.layout == "half" and rope.seq_len is None and rope.theta == 10000.0


def test_yarn_truncate_none_is_no_truncation():
    """truncate None is not "not given": transformers' get("truncate", True)
    finds it and `if truncate:` does not truncate (it was truncated here,
    0.11 off in inv_freq)."""
    yarn = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64,
                beta_fast=3.3, beta_slow=1.7)
    inv = {t: ropeattn.RotaryEmbedding(16, **yarn, truncate=t).inv_freq
           for t in (None, False, True)}
    np.testing.assert_array_equal(inv[None], inv[False])
    assert np.abs(inv[None] - inv[True]).max() > 0.1


def test_rope_keywords_checked_whatever_was_cached():
    """apply_rotary's rope keywords are checked as RotaryEmbedding's on
    every call: its cache of ropes by keywords served theta=True the rope
    made for theta=1 (and rotary_dim=8.0 that of 8), equal values as
    Python compares them, where a fresh call refused them."""
    x = randn(1, 4, 2, 16)
    ropeattn.apply_rotary(x, theta=1)
    ropeattn.apply_rotary(x, rotary_dim=8)
    ropeattn.apply_rotary(x, mrope_section=(4, 2, 2), mrope_interleaved=True)
    with pytest.raises(ropeattn.ArgumentError, match="theta"):
        ropeattn.apply_rotary(x, theta=True)
    with pytest.raises(ropeattn.ArgumentError, match="rotary_dim"):
        ropeattn.apply_rotary(x, rotary_dim=8.0)
    with pytest.raises(ropeattn.ArgumentError, match="mrope_interleaved"):
        ropeattn.apply_rotary(x, mrope_section=(4, 2, 2), mrope_interleaved=1)
    with pytest.raises(ropeattn.ArgumentError, match="mrope_section"):
        ropeattn.apply_rotary(x, mrope_section=(4.0, 2, 2), mrope_interleaved=True)
    np.testing.assert_array_equal(ropeattn.apply_rotary(x, theta=1.0),
                                  ropeattn.apply_rotary(x, theta=1))


def test_names_and_flags_of_other_types_are_named():
    """truncate is True, False or None, as config.json's true, false or
    null (its truth was taken: "false" and NaN truncated, [] did not);
    rope_type, layout and axial of other types are ArgumentErrors naming
    them (a list raised TypeError 'unhashable type')."""
    yarn = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64)
    for truncate in ("false", float("nan"), [], 1):
        with pytest.raises(ropeattn.ArgumentError, match="^truncate: expected True, False or None"):
            ropeattn.RotaryEmbedding(16, **yarn, truncate=truncate)
    np.testing.assert_array_equal(
        ropeattn.RotaryEmbedding(16, **yarn, truncate=np.False_).inv_freq,
        ropeattn.RotaryEmbedding(16, **yarn, truncate=False).inv_freq)
    for key in ("rope_type", "layout", "axial"):
        for value in (["half"], np.array(["half", "x"]), {}):
            with pytest.raises(ropeattn.ArgumentError, match=f"^{key}: expected"):
                ropeattn.RotaryEmbedding(16, **{key: value})


def test_integers_past_int64_are_named():
    """head_dim, rotary_dim, table_size, mrope_section and freqs' sizes
    past int64 are ArgumentErrors naming them (an OverflowError named
    none); head_dim True or 8.0 likewise (True ran as 1)."""
    big = 2 ** 70
    for make, named in ((lambda: ropeattn.RotaryEmbedding(big), "head_dim"),
                        (lambda: ropeattn.RotaryEmbedding(True), "head_dim"),
                        (lambda: ropeattn.RotaryEmbedding(8.0), "head_dim"),
                        (lambda: ropeattn.RotaryEmbedding(8, rotary_dim=big), "rotary_dim"),
                        (lambda: ropeattn.RotaryEmbedding(8, table_size=big), "table_size"),
                        (lambda: ropeattn.RotaryEmbedding(8, mrope_section=[big, 0, 0]),
                         "mrope_section"),
                        (lambda: ropeattn.freqs(big, 4), "head_dim"),
                        (lambda: ropeattn.freqs(8, big), "end")):
        with pytest.raises(ropeattn.ArgumentError, match=named):
            make()


def test_rope_type_wins_over_older_type():
    """A rope_scaling dict with both keys: transformers reads rope_type
    (rope_parameters.get("rope_type", rope_parameters.get("type"))); the
    older "type" is read only without it.  {"rope_type": "yarn", "type":
    "linear"} ran as linear here (the keyword "type" replaced rope_type)."""
    scaling = dict(factor=4.0, original_max_position_embeddings=32)
    yarn = ropeattn.RotaryEmbedding(16, rope_type="yarn", **scaling)
    both = ropeattn.RotaryEmbedding(16, **{"rope_type": "yarn", "type": "linear"}, **scaling)
    assert both.rope_type == "yarn"
    np.testing.assert_array_equal(both.inv_freq, yarn.inv_freq)
    assert both.attention_factor == yarn.attention_factor
    assert ropeattn.RotaryEmbedding(16, type="yarn", **scaling).rope_type == "yarn"
    assert ropeattn.RotaryEmbedding(16, rope_type="default", type="yarn").rope_type == "default"
    assert ropeattn.RotaryEmbedding(16).rope_type == "default"


@pytest.mark.parametrize("kind", ["linear", "llama3", "yarn", "dynamic"])
def test_scaled_types(kind):
    d, theta = 64, 10000.0
    if kind == "linear":
        rope = ropeattn.RotaryEmbedding(d, theta, "linear", factor=4.0)
        inv, af = ref.inv_freq_default(d, theta) / 4.0, 1.0
    elif kind == "llama3":
        scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
        rope = ropeattn.RotaryEmbedding(d, theta, **scaling)  # HF's dict as it is
        inv, af = ref.inv_freq_llama3(d, theta, 8.0, 1.0, 4.0, 8192), 1.0
    elif kind == "yarn":
        scaling = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
                   "attention_factor": None, "beta_fast": 32.0, "beta_slow": 1.0}
        rope = ropeattn.RotaryEmbedding(d, theta, **scaling)  # None: not given
        inv, af = ref.yarn(d, theta, 4.0, 4096)
    else:  # dynamic: the default frequencies up to the original length
        rope = ropeattn.RotaryEmbedding(d, theta, "dynamic", factor=2.0,
                                        max_position_embeddings=2048)
        inv, af = ref.inv_freq_default(d, theta), 1.0
    np.testing.assert_allclose(rope.inv_freq, inv, rtol=INV_FREQ_RTOL)
    assert rope.attention_factor == pytest.approx(af, rel=1e-12)
    x = randn(2, 6, 3, d)
    pos = np.array([0, 5, 17, 300, 4000, 9000])
    if kind == "dynamic":  # this call's length, 9001, scales the base
        inv = ref.inv_freq_dynamic(d, theta, 2.0, 2048, 9001)
    # yarn's factor 1.139 scales cos and sin: |x| up to ~7.
    np.testing.assert_allclose(ropeattn.apply_rotary(x, pos, rope=rope),
                               ref.rope_half(x, pos, inv, af), rtol=0, atol=2 * F32_ATOL)


def test_longrope_and_partial_rotary():
    short, long_ = [1.0] * 4, [2.0] * 4
    rope = ropeattn.RotaryEmbedding(16, rope_type="longrope", rotary_dim=8,
                                    short_factor=short, long_factor=long_,
                                    original_max_position_embeddings=4096,
                                    max_position_embeddings=4096)
    np.testing.assert_allclose(rope.inv_freq, ref.inv_freq_default(8), rtol=INV_FREQ_RTOL)
    x = randn(1, 4, 2, 16)
    y = ropeattn.apply_rotary(x, rope=rope)
    np.testing.assert_array_equal(y[..., 8:], x[..., 8:])  # features past rotary_dim
    np.testing.assert_allclose(y[..., :8], ref.rope_half(x[..., :8], np.arange(4),
                                                         ref.inv_freq_default(8)),
                               atol=F32_ATOL)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_positions(layout):
    b, s, h, d = 3, 7, 4, 32
    x = randn(b, s, h, d)
    inv = ref.inv_freq_default(d)
    want = ref.rope_half if layout == "half" else ref.rope_interleaved
    cases = [(None, np.arange(s)), (100, 100 + np.arange(s)),
             (np.array([3, 1, 4, 1, 5, 9, 2]),) * 2,
             (RNG.integers(0, 2**32, (b, s)),) * 2]
    for positions, expect in cases:
        y = ropeattn.apply_rotary(x, positions, layout=layout)
        assert y.dtype == np.float32 and y.shape == x.shape and y.flags.c_contiguous
        np.testing.assert_allclose(y, want(x, expect, inv), rtol=0, atol=F32_ATOL)


def test_inverse_is_the_transpose():
    x = randn(2, 5, 2, 16)
    y = ropeattn.apply_rotary(x, 7)
    np.testing.assert_allclose(ropeattn.apply_rotary(y, 7, inverse=True), x, atol=F32_ATOL)
    # R^T x: the rotation by -angle.
    angles = (7 + np.arange(5))[:, None] * ref.inv_freq_default(16)
    emb = np.concatenate((angles, angles), -1)[None, :, None]
    want = x * np.cos(emb) - ref.rotate_half(x.astype(np.float64)) * np.sin(emb)
    np.testing.assert_allclose(ropeattn.apply_rotary(x, 7, inverse=True), want,
                               atol=F32_ATOL)


def test_float16_and_bfloat16():
    x = randn(2, 4, 3, 16)
    pos = np.arange(4)
    inv = ref.inv_freq_default(16)
    x16 = x.astype(np.float16)
    y16 = ropeattn.apply_rotary(x16, pos)
    assert y16.dtype == np.float16
    # float32 compute, one rounding to float16: half an f16 ulp, 2^-11 relative.
    np.testing.assert_allclose(y16.astype(np.float64), ref.rope_half(x16, pos, inv),
                               rtol=2**-10, atol=1e-3)
    xb = ref.to_bf16(x)
    yb = ropeattn.apply_rotary(xb, pos, dtype="bfloat16")
    assert yb.dtype == np.uint16
    # one rounding to bfloat16 (8 significant bits): 2^-8 relative.
    np.testing.assert_allclose(ref.from_bf16(yb), ref.rope_half(ref.from_bf16(xb), pos, inv),
                               rtol=2**-8, atol=1e-2)


def test_strided_views_and_in_place():
    b, s, h, d = 2, 6, 3, 16
    inv = ref.inv_freq_default(d)
    # head-major storage read as [B, S, H, D]: transposed, read in place
    head_major = randn(b, h, s, d)
    x = head_major.transpose(0, 2, 1, 3)
    assert not x.flags.c_contiguous
    want = ref.rope_half(x, np.arange(s), inv)
    np.testing.assert_allclose(ropeattn.apply_rotary(x), want, atol=F32_ATOL)
    # q inside a fused QKV buffer, rotated in place: k and v untouched
    qkv = randn(b, s, 3 * h, d)
    before = qkv.copy()
    q = qkv[:, :, :h]
    want = ref.rope_half(q, np.arange(s), inv)
    assert ropeattn.apply_rotary(q, out=q) is q
    np.testing.assert_allclose(qkv[:, :, :h], want, atol=F32_ATOL)
    np.testing.assert_array_equal(qkv[:, :, h:], before[:, :, h:])
    # an input the library cannot read in place (reversed features) is copied
    r = randn(b, s, h, d)[..., ::-1]
    np.testing.assert_allclose(ropeattn.apply_rotary(r), ref.rope_half(r, np.arange(s), inv),
                               atol=F32_ATOL)
    # ... but such an output is refused, and left as it was
    with pytest.raises(ropeattn.ArgumentError, match="strides"):
        ropeattn.apply_rotary(r.copy(), out=r)
    # an explicit out array
    out = np.zeros_like(head_major).transpose(0, 2, 1, 3)
    assert ropeattn.apply_rotary(x, out=out) is out
    np.testing.assert_allclose(out, ref.rope_half(x, np.arange(s), inv), atol=F32_ATOL)


def test_context():
    x = randn(2, 64, 8, 64)
    with ropeattn.Context(threads=2) as ctx:
        assert ctx.threads == 2
        y = ropeattn.apply_rotary(x, context=ctx)
    assert ctx.closed
    np.testing.assert_array_equal(y, ropeattn.apply_rotary(x))  # same bits, any threads
    with pytest.raises(ropeattn.Error, match="closed"):
        ropeattn.apply_rotary(x, context=ctx)


def test_bad_inputs():
    x = randn(1, 4, 2, 8)
    with pytest.raises(ropeattn.DtypeError, match="float32"):
        ropeattn.apply_rotary(x.astype(np.float64))
    with pytest.raises(TypeError, match="bfloat16"):
        ropeattn.apply_rotary(x.view(np.uint16)[..., :8])
    with pytest.raises(TypeError, match="ndarray"):
        ropeattn.apply_rotary(x.tolist())
    with pytest.raises(ValueError, match="4 dimensions"):
        ropeattn.apply_rotary(x[0])
    with pytest.raises(ValueError, match="negative"):
        ropeattn.apply_rotary(x, np.array([0, 1, -2, 3]))
    with pytest.raises(ValueError, match="negative"):
        ropeattn.apply_rotary(x, -1)
    for inverse in (None, "yes", 1):  # "yes" was read as True, None as False
        with pytest.raises(ValueError, match="inverse: expected True or False"):
            ropeattn.apply_rotary(x, inverse=inverse)
    with pytest.raises(ValueError, match="shape"):
        ropeattn.apply_rotary(x, np.arange(5))
    with pytest.raises(ValueError) as e:  # past RA_MAX_POSITION: the library's message
        ropeattn.apply_rotary(x, 2**32)
    assert e.value.status is not None and "ra_rope_apply" in str(e.value)
    with pytest.raises(ValueError, match="head_dim"):
        ropeattn.apply_rotary(x, rope=ropeattn.RotaryEmbedding(16))
    with pytest.raises(ropeattn.Error, match="odd"):
        ropeattn.apply_rotary(randn(1, 4, 2, 7))
    with pytest.raises(ValueError, match="rope_type"):
        ropeattn.RotaryEmbedding(8, rope_type="nope")
    with pytest.raises(TypeError, match="unknown keyword"):
        ropeattn.RotaryEmbedding(8, fator=2.0)
    with pytest.raises(ValueError, match="theta"):
        ropeattn.RotaryEmbedding(8, theta=-1.0)
    with pytest.raises(ValueError):  # llama3 without its parameters
        ropeattn.RotaryEmbedding(8, rope_type="llama3")
    with pytest.raises(ValueError, match="read-only"):
        ro = x.copy()
        ro.flags.writeable = False
        ropeattn.apply_rotary(ro, out=ro)
    with pytest.raises(ValueError, match="out"):
        ropeattn.apply_rotary(x, out=np.empty((1, 4, 2, 8), np.float16))
    with pytest.raises(ValueError):  # out overlapping x but not x itself
        buf = randn(1, 5, 2, 8)
        ropeattn.apply_rotary(buf[:, :4], out=buf[:, 1:])


D16_LONG = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]


def by_length_ropes(**length):
    """A dynamic and a longrope rope of head_dim 16, original length 16 (the
    issue's case), with their float64 references for a length L."""
    dynamic = ropeattn.RotaryEmbedding(16, rope_type="dynamic", factor=2.0,
                                       max_position_embeddings=16, **length)
    longrope = ropeattn.RotaryEmbedding(16, rope_type="longrope", short_factor=[1.0] * 8,
                                        long_factor=D16_LONG,
                                        original_max_position_embeddings=16,
                                        max_position_embeddings=64, **length)
    return ((dynamic, lambda L: (ref.inv_freq_dynamic(16, 10000.0, 2.0, 16, L), 1.0)),
            (longrope, lambda L: ref.longrope(16, 10000.0, [1.0] * 8, D16_LONG, 16, 64, L)))


@pytest.mark.parametrize("kind", [0, 1], ids=["dynamic", "longrope"])
def test_dynamic_and_longrope_take_the_length_from_the_positions(kind):
    """Without seq_len, the length is the call's largest position + 1, as
    transformers' dynamic_rope_update takes it: positions 0..99 past
    max_position_embeddings 16 scale the frequencies (4.9 off unscaled)."""
    rope, want = by_length_ropes()[kind]
    x = randn(2, 100, 2, 16)
    pairs = np.array([[3, 7], [0, 40]])
    # (x, positions as given, as [B, S], the call's length)
    for xs, positions, pos, length in ((x, None, np.arange(100), 100),
                                       (x[:, :10], 90, 90 + np.arange(10), 100),
                                       (x[:, :10], np.arange(10), np.arange(10), 10),
                                       (x[:, :2], pairs, pairs, 41)):
        inv, af = want(length)
        np.testing.assert_allclose(ropeattn.apply_rotary(xs, positions, rope=rope),
                                   ref.rope_half(xs, pos, inv, af), atol=2 * F32_ATOL)
        cos, sin = rope.cos_sin(pos)
        angles = pos[..., None] * inv
        np.testing.assert_allclose(cos, af * np.cos(np.concatenate((angles, angles), -1)),
                                   atol=TABLE_ATOL)
    # the rope's own inv_freq and attention factor: those of the original length
    inv, af = want(16)
    np.testing.assert_allclose(rope.inv_freq, inv, rtol=INV_FREQ_RTOL)
    assert rope.seq_len is None and rope.attention_factor == pytest.approx(af, rel=1e-12)


@pytest.mark.parametrize("kind", [0, 1], ids=["dynamic", "longrope"])
def test_dynamic_and_longrope_with_seq_len_refuse_positions_past_it(kind):
    rope, want = by_length_ropes(seq_len=50)[kind]
    x = randn(1, 50, 2, 16)
    inv, af = want(50)
    np.testing.assert_allclose(ropeattn.apply_rotary(x, rope=rope),
                               ref.rope_half(x, np.arange(50), inv, af), atol=2 * F32_ATOL)
    for call in (lambda: ropeattn.apply_rotary(x, 1, rope=rope),
                 lambda: ropeattn.apply_rotary(x[:, :2], np.array([0, 50]), rope=rope),
                 lambda: rope.cos_sin(np.arange(100))):
        with pytest.raises(ropeattn.ArgumentError, match="seq_len 50"):
            call()


@pytest.mark.parametrize("kind", [0, 1], ids=["dynamic", "longrope"])
def test_dynamic_and_longrope_refuse_positions_past_2_32_naming_them(kind):
    """A position past 2^32 is the position's error, as for the other
    types (a uint64 2^63 raised OverflowError making a rope for its length)."""
    rope, _ = by_length_ropes()[kind]
    for pos in (np.array([0, 2 ** 63], np.uint64), np.array([0, 2 ** 40])):
        with pytest.raises(ropeattn.ArgumentError, match="position"):
            rope.cos_sin(pos)
        with pytest.raises(ropeattn.ArgumentError, match="position"):
            ropeattn.apply_rotary(randn(1, 2, 1, 16), pos, rope=rope)


def test_unsigned_positions_past_int64_named_by_their_value():
    """uint64 positions of 2^63 and more are refused by their own value (cast
    to int64 they read negative: the message named -9223372036854775803), a
    start past 2^32 by its own (an OverflowError for 2^63 and more)."""
    rope = ropeattn.RotaryEmbedding(16)
    big = 2 ** 63 + 5
    for call in (rope.cos_sin, lambda p: ropeattn.apply_rotary(randn(1, 2, 1, 16), p, rope=rope)):
        with pytest.raises(ropeattn.ArgumentError, match=f"positions: {big} is beyond"):
            call(np.array([1, big], np.uint64))
    with pytest.raises(ropeattn.ArgumentError, match=f"start {big} is beyond"):
        ropeattn.apply_rotary(randn(1, 2, 1, 16), big, rope=rope)
    assert rope.cos_sin(np.array([3], np.uint64))[0].shape == (1, 16)


@pytest.mark.parametrize("key,value,kw", [
    ("low_freq_factor", 1e-320, {}), ("high_freq_factor", 0.0, {}), ("factor", -8.0, {}),
    ("factor", float("nan"), {}), ("original_max_position_embeddings", 0, {}),
    ("theta", 1e-320, {})])
def test_llama3_keys_named_in_messages(key, value, kw):
    """A bad key is refused in its own name, as the command line names a
    --rope-parameters key, not in the library's wording (>= DBL_MIN)."""
    scaling = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=8192)
    scaling[key] = value
    with pytest.raises(ropeattn.ArgumentError) as e:
        ropeattn.RotaryEmbedding(16, **scaling)
    assert str(e.value).startswith(f"{key}: expected") and "DBL_MIN" not in str(e.value)


@pytest.mark.parametrize("kw,key", [
    (dict(rope_type="linear", factor=1e-320), "factor"),
    (dict(rope_type="yarn", factor=2.0, max_position_embeddings=16, beta_fast=-1.0),
     "beta_fast"),
    (dict(rope_type="yarn", factor=2.0, max_position_embeddings=16, attention_factor=0.0),
     "attention_factor"),
    (dict(rope_type="yarn", factor=2.0, max_position_embeddings=16, mscale=float("inf")),
     "mscale"),
    (dict(rope_type="dynamic", factor=2.0, max_position_embeddings=-3),
     "max_position_embeddings"),
    (dict(rope_type="dynamic", factor=2.0, max_position_embeddings=16, seq_len=0), "seq_len"),
    (dict(rope_type="longrope", short_factor=[1.0] * 8, long_factor=[1.0] * 7 + [1e-320],
          original_max_position_embeddings=16, max_position_embeddings=32),
     r"long_factor\[7\]"),
    # an int past int64 raised OverflowError, a nested list "object too deep"
    (dict(rope_type="dynamic", factor=2.0, max_position_embeddings=2 ** 70),
     "max_position_embeddings"),
    (dict(rope_type="longrope", short_factor=[[1.0] * 4] * 2, long_factor=[1.0] * 8,
          original_max_position_embeddings=16, max_position_embeddings=32), "short_factor")])
def test_rope_keys_named_in_messages(kw, key):
    with pytest.raises(ropeattn.ArgumentError, match=f"^{key}: expected"):
        ropeattn.RotaryEmbedding(16, **kw)


def test_shape_bhsd():
    x = randn(2, 3, 9, 16)  # [B, H, S, D]
    pos = np.arange(9) + 4
    y = ropeattn.apply_rotary(x, pos, shape="bhsd")
    assert y.shape == x.shape
    want = ropeattn.apply_rotary(np.ascontiguousarray(x.transpose(0, 2, 1, 3)), pos)
    np.testing.assert_array_equal(y.transpose(0, 2, 1, 3), want)
    assert ropeattn.apply_rotary(x, pos, out=x, shape="bhsd") is x
    np.testing.assert_array_equal(x, y)
    # positions [S] that fit only the other order: refused, naming shape=
    with pytest.raises(ropeattn.ArgumentError, match='pass shape="bhsd"'):
        ropeattn.apply_rotary(x, pos)
    with pytest.raises(ropeattn.ArgumentError, match='pass shape="bshd"'):
        ropeattn.apply_rotary(x.transpose(0, 2, 1, 3), np.zeros((2, 9), np.int64),
                              shape="bhsd")


def test_by_length_ropes_are_freed_without_the_garbage_collector():
    """The ropes a dynamic rope makes for the calls' lengths go with it:
    they were kept by an lru_cache of a bound method, a cycle holding
    every table until the garbage collector ran (tens of MB in a loop)."""
    import gc
    import weakref
    gc.disable()
    try:
        rope = ropeattn.RotaryEmbedding(16, rope_type="dynamic", factor=2.0,
                                        max_position_embeddings=16)
        x = randn(1, 40, 1, 16)
        for n in range(20, 40):
            ropeattn.apply_rotary(x[:, :n], rope=rope)
        gone = weakref.ref(rope)
        del rope
        assert gone() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("kw", [dict(mrope_section=[2.5, 2.5, 3]),  # truncated: (2, 2, 3)
                                dict(mrope_section=[2.9, 2.9, 2.2]),
                                dict(mrope_section=["2", "3", "3"]),
                                dict(mrope_section=[True, 3, 4]),  # read as (1, 3, 4)
                                dict(mrope_section=[2, 2, 2, 2]),
                                dict(mrope_section=[2, 3, 3], mrope_interleaved="no"),
                                dict(mrope_section=(4, 2, 2), mrope_interleaved=1),
                                dict(rotary_dim=8.0), dict(rotary_dim=True),
                                dict(table_size=True), dict(table_size=64.5)])
def test_rope_integer_and_flag_keys_are_refused_in_their_names(kw):
    """mrope_section, mrope_interleaved, rotary_dim and table_size: a float
    was truncated ([2.5, 2.5, 4] ran as (2, 2, 4)), a bool counted as 1 and
    a string's truth taken ("no" interleaved), where each is an error
    naming the key."""
    key = list(kw)[-1]
    with pytest.raises(ropeattn.ArgumentError, match=f"^{key}: "):
        ropeattn.RotaryEmbedding(16, **kw)


def test_rope_integer_keys_of_numpy_integers():
    rope = ropeattn.RotaryEmbedding(16, mrope_section=np.array([2, 3, 3], np.uint64),
                                    mrope_interleaved=np.bool_(False), rotary_dim=np.int64(16),
                                    table_size=np.int32(64))
    assert rope.mrope_section == (2, 3, 3) and rope.rotary_dim == 16
    np.testing.assert_array_equal(rope.inv_freq, ropeattn.RotaryEmbedding(16).inv_freq)


@pytest.mark.parametrize("offset", [0, 8, 56])
def test_out_over_the_positions(offset):
    """apply_rotary(x, ids, out=out) with ids an int64 view of out's
    memory: the kernel read back rotated bits as positions and crashed
    (segmentation fault).  The package hands the library a copy of the
    positions (the rotation of the ids as given), and ra_rope_apply
    refuses an out over them, writing nothing."""
    s = 8
    x = randn(1, s, 1, 16)
    out = np.zeros((1, s, 1, 16), np.float32)
    ids = out.reshape(-1).view(np.int64)[offset:offset + s]  # out's 512 bytes: 64 int64
    ids[:] = np.arange(s)
    want = ropeattn.apply_rotary(x, ids.copy())
    before = out.copy()
    rope = ropeattn.RotaryEmbedding(16)
    with pytest.raises(ropeattn.ArgumentError, match="out overlaps the positions' ids"):
        ropeattn._ropeattn.rope_apply(rope._rope, None, out, x, 0, 0, ids[None], False)
    np.testing.assert_array_equal(out, before)
    np.testing.assert_array_equal(ropeattn.apply_rotary(x, ids, out=out), want)


def test_indices_handed_to_the_library_are_copies(monkeypatch):
    """Positions and cu_seqlens, which the library checks and then reads
    again while the GIL is released, are copies: the caller's own int64
    array went in, and another thread changing it in between made the
    kernels read rows past the checks."""
    seen = []
    for name in ("rope_apply", "attention"):
        real = getattr(ropeattn._ropeattn, name)
        monkeypatch.setattr(ropeattn._ropeattn, name,
                            lambda *a, real=real, **k: seen.append(a) or real(*a, **k))
    x = randn(1, 8, 2, 16)
    ids = np.arange(8, dtype=np.int64)[None].copy()  # C-contiguous int64 [B, S]: was passed as is
    ropeattn.apply_rotary(x, ids)
    assert not np.shares_memory(seen[-1][6], ids)
    cu = np.array([0, 3, 8], np.int64)
    ropeattn.attention(x, x, x, cu_seqlens=cu)
    assert not np.shares_memory(seen[-1][14], cu) and np.array_equal(seen[-1][14], cu)
