"""ropeattn.torch.scaled_dot_product_attention against PyTorch's own SDPA
(torch 2.x, the math backend, in float64: forward and gradients of query,
key and value), over L == S, L < S, L > S, GQA, broadcast heads and
batches, masks of each kind, is_causal, scale and Ev != E; each refusal by
name.  Where PyTorch has no SDPA (Debian's torch 1.13) the reference is its
documented formula (F.scaled_dot_product_attention's docstring, a row that
sees no key giving zeros as 2.5+'s), itself checked against SDPA where it
exists.  Tolerances: float32 within 1e-5 of the largest value (float32 sums
of a few dozen terms, rounded once); float16 / bfloat16 inputs are
compared with float64 of the same rounded values, within the output's one
rounding and the bf16 units' 2^-8 max|v| (2e-3 float16, 1e-2 bfloat16 of
the largest value)."""
import math

import pytest

torch = pytest.importorskip("torch")
import ropeattn  # noqa: E402
import ropeattn.torch as rt  # noqa: E402

F = torch.nn.functional
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
GEN = torch.Generator().manual_seed(1111)


def randn(*shape, dtype=torch.float32):
    return torch.randn(shape, generator=GEN).to(dtype)


def formula(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    """SDPA's documented formula (its docstring's), a row that sees no key
    giving zeros (SDPA 2.5+'s)."""
    L, S = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    seen = torch.ones(L, S, dtype=torch.bool)
    bias = torch.zeros(L, S, dtype=q.dtype)
    if is_causal:
        seen = seen.tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            seen = seen & attn_mask
        else:
            bias = bias + attn_mask.to(q.dtype)
            seen = seen & (attn_mask != -math.inf)
    if enable_gqa:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], -3)
    logits = (q @ k.transpose(-2, -1) * scale + bias).masked_fill(~seen, -math.inf)
    some = seen.expand(logits.shape).any(-1, keepdim=True)
    p = torch.softmax(logits.masked_fill(~some, 0.0), -1) * some
    return p @ v


def reference(q, k, v, **kw):
    """PyTorch's SDPA (math backend) where it exists, else formula()."""
    if not HAS_SDPA:
        return formula(q, k, v, **kw)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, **kw)


def grads(fn, inputs, dy, **kw):
    """(y, [dL/d input]) of L = sum(fn(*inputs, **kw) * dy)."""
    inputs = [t.detach().requires_grad_(True) for t in inputs]
    y = fn(*inputs, **kw)
    (y * dy).sum().backward()
    return y.detach(), [t.grad for t in inputs]


def close(got, want, rel):
    """max |got - want| within rel of max |want|."""
    got, want = got.double(), want.double()
    return float((got - want).abs().max()) <= rel * float(want.abs().max())


def masks(b, h, L, S):
    """The attn_mask kinds: bool [L, S] with a row seeing no key, bool
    [B, 1, L, S], additive float32 [B, H, L, S] with -inf entries and a row
    all -inf, additive [1, S] (keys hidden by a huge finite value)."""
    seen = torch.rand(L, S, generator=GEN) < 0.7
    seen[:, 0] = True
    seen[L // 2] = False
    per_row = torch.rand(b, 1, L, S, generator=GEN) < 0.6
    bias = randn(b, h, L, S)
    bias[torch.rand(b, h, L, S, generator=GEN) < 0.3] = -math.inf
    bias[:, :, 0] = -math.inf
    keys = torch.zeros(1, S)
    keys[0, S // 2:] = torch.finfo(torch.float32).min
    return {"bool": seen, "bool-batch": per_row, "additive": bias, "keys": keys}


# (B, H, Hkv, L, S, E, Ev, enable_gqa)
SHAPES = [(2, 4, 4, 7, 7, 16, 16, False),      # L == S
          (2, 4, 4, 5, 9, 16, 16, False),      # L < S
          (1, 4, 4, 9, 5, 16, 16, False),      # L > S
          (2, 6, 2, 7, 11, 8, 8, True),        # GQA
          (2, 6, 2, 9, 4, 8, 8, True),         # GQA, L > S
          (2, 4, 1, 6, 6, 16, 16, False),      # key/value heads of 1 broadcast
          (1, 2, 2, 5, 8, 16, 8, False),       # Ev < E
          (1, 2, 2, 5, 8, 8, 24, False)]       # Ev > E


def check(q, k, v, rel=1e-5, grad_rel=1e-5, **kw):
    """Forward and gradients of ropeattn's against the float64 reference."""
    dy = randn(*q.shape[:-1], v.shape[-1])
    y, g = grads(rt.scaled_dot_product_attention, [q, k, v], dy, **kw)
    mask = kw.get("attn_mask")
    kw64 = kw if mask is None or mask.dtype == torch.bool else dict(kw, attn_mask=mask.double())
    y64, g64 = grads(reference, [t.double() for t in (q, k, v)], dy.double(), **kw64)
    assert y.dtype == q.dtype and y.shape == y64.shape, kw
    assert close(y, y64, rel), kw
    for name, got, want in zip("qkv", g, g64):
        assert got.dtype == q.dtype and got.shape == want.shape, (name, kw)
        assert close(got, want, grad_rel), (name, kw)


@pytest.mark.parametrize("b,h,hkv,L,S,e,ev,gqa", SHAPES)
def test_against_sdpa_float32(b, h, hkv, L, S, e, ev, gqa):
    q, k, v = randn(b, h, L, e), randn(b, hkv, S, e), randn(b, hkv, S, ev)
    for kw in ({}, {"is_causal": True}, {"scale": 0.3}, {"scale": -0.5, "is_causal": True}):
        check(q, k, v, enable_gqa=gqa, **kw)
    for name, mask in masks(b, h, L, S).items():
        check(q, k, v, enable_gqa=gqa, attn_mask=mask)


def test_half_dtypes():
    """float16 and bfloat16 in, the same dtype out and in the gradients."""
    for dtype, rel in ((torch.float16, 2e-3), (torch.bfloat16, 1e-2)):
        q, k, v = (randn(*s, dtype=dtype) for s in ((2, 6, 7, 16), (2, 2, 9, 16), (2, 2, 9, 16)))
        check(q, k, v, rel, 2 * rel, enable_gqa=True)
        check(q, k, v, rel, 2 * rel, enable_gqa=True, is_causal=True)
        mask = masks(2, 6, 7, 9)["additive"].to(dtype)
        check(q, k, v, rel, 2 * rel, enable_gqa=True, attn_mask=mask)


def test_batch_of_one_and_query_head_of_one_broadcast():
    """SDPA's matmuls broadcast a batch or heads of 1 (enable_gqa False)."""
    check(randn(1, 4, 5, 8), randn(2, 4, 6, 8), randn(2, 4, 6, 8))
    check(randn(2, 1, 5, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8))
    check(randn(2, 4, 5, 8), randn(2, 4, 6, 8), randn(2, 1, 6, 8))


def test_no_key_rows_give_zeros_as_sdpa():
    """A bool row all False and an additive row all -inf: zeros and zero
    gradients, as torch 2.15's CPU SDPA (checked against it above)."""
    q, k, v = randn(1, 2, 4, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    seen = torch.ones(4, 6, dtype=torch.bool)
    seen[2] = False
    bias = torch.zeros(4, 6)
    bias[2] = -math.inf
    for mask in (seen, bias):
        qq = q.clone().requires_grad_()
        out = rt.scaled_dot_product_attention(qq, k, v, attn_mask=mask)
        out.sum().backward()
        assert bool((out[:, :, 2] == 0).all()) and bool((qq.grad[:, :, 2] == 0).all())
        assert bool(out[:, :, :2].ne(0).any())


def test_causal_is_top_left():
    """is_causal with L != S: query i sees keys j <= i (SDPA's), not the
    library's bottom-right alignment (ropeattn.torch.attention's)."""
    q, k, v = randn(1, 2, 3, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    out = rt.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert close(out, formula(q.double(), k.double(), v.double(), is_causal=True), 1e-5)
    bottom_right = rt.attention(q, k, v, shape="bhsd")
    assert not close(out, bottom_right, 1e-2)


@pytest.mark.skipif(not HAS_SDPA, reason="PyTorch without scaled_dot_product_attention")
def test_formula_is_sdpa():
    """The fallback reference equals SDPA where SDPA exists."""
    q, k, v = randn(2, 6, 7, 8).double(), randn(2, 2, 9, 8).double(), randn(2, 2, 9, 8).double()
    for mask in masks(2, 6, 7, 9).values():
        assert close(formula(q, k, v, attn_mask=mask, enable_gqa=True),
                     reference(q, k, v, attn_mask=mask, enable_gqa=True), 1e-12)
    assert close(formula(q, k, v, is_causal=True, enable_gqa=True),
                 reference(q, k, v, is_causal=True, enable_gqa=True), 1e-12)


def test_dropout_from_torch_generator():
    """dropout_p > 0 applies (SDPA's always): two calls differ,
    torch.manual_seed repeats a call, and the expected output is kept
    (inverted dropout: the mean over many draws nears the undropped)."""
    q, k, v = randn(1, 2, 4, 8), randn(1, 2, 16, 8), randn(1, 2, 16, 8)
    torch.manual_seed(5)
    a = rt.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    b = rt.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    torch.manual_seed(5)
    again = rt.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    assert not torch.equal(a, b) and torch.equal(a, again)
    plain = rt.scaled_dot_product_attention(q, k, v)
    mean = sum(rt.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
               for _ in range(400)) / 400
    assert close(mean, plain, 0.1)


def test_refusals_and_sdpa_errors_name_the_argument():
    q, k, v = randn(1, 4, 5, 8), randn(1, 2, 5, 8), randn(1, 2, 5, 8)
    sdpa = rt.scaled_dot_product_attention
    cases = [
        (ropeattn.UnsupportedError, "^query: a 3-D", (q[0], k[0], v[0]), {}),
        (ropeattn.ArgumentError, "do not broadcast", (q, k, v), {}),  # GQA without the flag
        (ropeattn.UnsupportedError, "^key: an empty axis", (q, k[:, :, :0], v[:, :, :0]), {}),
        (ropeattn.UnsupportedError, "^query: an empty axis", (q[..., :0], k[..., :0], v), {}),
        (ropeattn.ArgumentError, "^attn_mask: a 1-D mask", (q, q, q),
         {"attn_mask": torch.ones(5, dtype=torch.bool)}),
        (ropeattn.ArgumentError, "^attn_mask: 5 dimensions", (q, q, q),
         {"attn_mask": torch.ones(1, 1, 1, 5, 5, dtype=torch.bool)}),
        (ropeattn.ArgumentError, "^enable_gqa: key's 3", (q, randn(1, 3, 5, 8),
                                                          randn(1, 3, 5, 8)),
         {"enable_gqa": True}),
        (ropeattn.UnsupportedError, "^enable_gqa: key's 2 and value's 1", (q, k, v[:, :1]),
         {"enable_gqa": True}),
        (ropeattn.ArgumentError, "^attn_mask: an explicit", (q, q, q),
         {"attn_mask": torch.ones(5, 5, dtype=torch.bool), "is_causal": True}),
        (ropeattn.DtypeError, "^query, key, value: expected one dtype", (q, q.half(), q), {}),
        (ropeattn.DtypeError, "^query: float64", (q.double(), q.double(), q.double()), {}),
        (ropeattn.ArgumentError, "^key: head dim 6", (q, q[..., :6], q), {}),
        (ropeattn.DtypeError, "^attn_mask: expected bool, float32", (q, q, q),
         {"attn_mask": torch.zeros(5, 5, dtype=torch.float16)}),
        (ropeattn.DtypeError, "^attn_mask: expected bool, float32", (q, q, q),
         {"attn_mask": torch.zeros(5, 5, dtype=torch.int64)}),
        (ropeattn.ArgumentError, "^attn_mask: requires_grad", (q, q, q),
         {"attn_mask": torch.zeros(5, 5, requires_grad=True)}),
        (ropeattn.ArgumentError, "^dropout_p: expected", (q, q, q), {"dropout_p": 1.5}),
        (ropeattn.ArgumentError, "^dropout_p: expected", (q, q, q), {"dropout_p": -0.1}),
        (ropeattn.ArgumentError, "^dropout_p: expected", (q, q, q), {"dropout_p": math.nan}),
        (ropeattn.UnsupportedError, "^dropout_p=1.0", (q, q, q), {"dropout_p": 1.0}),
        (ropeattn.UnsupportedError, "^scale: 0.0", (q, q, q), {"scale": 0.0}),
        (ropeattn.UnsupportedError, "^scale: nan", (q, q, q), {"scale": math.nan}),
        (TypeError, "argument 'is_causal' must be bool", (q, q, q), {"is_causal": 1}),
        (TypeError, "argument 'enable_gqa' must be bool", (q, k, v), {"enable_gqa": "yes"}),
    ]
    for error, match, args, kw in cases:
        with pytest.raises(error, match=match):
            sdpa(*args, **kw)
    with pytest.raises(TypeError):  # scale is keyword-only, as SDPA's
        sdpa(q, q, q, None, 0.0, False, 0.5)
    mask = torch.zeros(5, 5)
    mask[0, 0] = math.nan
    with pytest.raises(ropeattn.ArgumentError, match=r"attn_mask\[0, 0, 0, 0\] is nan"):
        sdpa(q, q, q, attn_mask=mask)
