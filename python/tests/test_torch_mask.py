"""ropeattn.torch.attention beyond causal decoders (issue 43): causal=False,
keys of another length (the causal diagonal bottom-right) and SDPA's
attn_mask, forward and gradients against PyTorch's float64 autograd of the
reference formula (torch 1.13 has no SDPA: tests/hf_e2e/test_sdpa_mask.py compares with SDPA
itself in the transformers venv)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ropeattn  # noqa: E402
import ropeattn.torch as rt  # noqa: E402

GEN = torch.Generator().manual_seed(4343)


def randn(*shape, dtype=torch.float32):
    return torch.randn(shape, generator=GEN).to(dtype)


def ref_attention(q, k, v, causal=True, attn_mask=None, window=None, sinks=None, softcap=None,
                  scale=None):
    """GQA attention in the inputs' dtype (float64 here) as issue 43's C API
    states it: query i at key row i + Sk - Sq; fully masked rows 0."""
    b, sq, h, d = q.shape
    sk = k.shape[1]
    rep = h // k.shape[2]
    k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)
    logits = torch.einsum("bihd,bjhd->bhij", q, k) * (scale or 1 / math.sqrt(d))
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    i, j = torch.arange(sq)[:, None] + sk - sq, torch.arange(sk)[None, :]
    seen = torch.ones(b, h, sq, sk, dtype=torch.bool)
    if causal:
        seen &= j <= i
    if window:
        seen &= (j > i - window) if causal else ((i - j).abs() < window)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            seen &= attn_mask
        else:
            logits = logits + attn_mask.double()
            seen &= attn_mask != -math.inf
    logits = logits.masked_fill(~seen, -math.inf)
    some = seen.any(-1, keepdim=True)
    logits = torch.where(some, logits, torch.zeros(()).double())  # no NaN through softmax
    if sinks is not None:
        sink = sinks[None, :, None, None].expand(b, h, sq, 1)
        p = torch.softmax(torch.cat((logits, sink), -1), -1)[..., :-1]
    else:
        p = torch.softmax(logits, -1)
    p = p * some  # fully masked rows: zeros
    return torch.einsum("bhij,bjhd->bihd", p, v)


def close(got, want, rel):
    """max |got - want| within rel of max |want|."""
    got, want = got.double(), want.double()
    return float((got - want).abs().max()) <= rel * float(want.abs().max())


def grads(fn, inputs, dy):
    """(y, dL/d inputs) of L = sum(fn(*inputs) * dy)."""
    inputs = [t.detach().requires_grad_(True) for t in inputs]
    y = fn(*inputs)
    (y * dy).sum().backward()
    return y.detach(), [t.grad for t in inputs]


def bool_mask(*shape):
    return torch.rand(shape, generator=GEN) < 0.7


def additive_mask(*shape):
    m = randn(*shape)
    return m.masked_fill(torch.rand(shape, generator=GEN) < 0.3, -math.inf)


CASES = [
    dict(causal=False),
    dict(causal=False, window=3),
    dict(causal=True, sk=17),  # a prefill of 9 queries after 8 tokens: bottom-right
    dict(causal=True, sk=5),  # more queries than keys: the first 4 rows see nothing
    dict(causal=False, sk=17, mask=(9, 17)),
    dict(causal=False, mask=(2, 1, 9, 9)),
    dict(causal=True, mask=(1, 4, 1, 9)),
    dict(causal=False, mask=(4, 9, 9), softcap=4.0, scale=0.2),
    dict(causal=False, sk=13, mask=(13,), sinks=True),
    dict(causal=False, mask=(2, 4, 9, 9), additive=True),
    dict(causal=True, sk=12, mask=(9, 12), additive=True, sinks=True),
    dict(causal=False, mask=(), additive=True),
]


def inputs_of(case):
    """(q, k, v, sinks or None, mask or None, the rest of case)."""
    case = dict(case)
    sk = case.pop("sk", 9)
    mask_shape, additive = case.pop("mask", None), case.pop("additive", False)
    q, k, v = randn(2, 9, 4, 16), randn(2, sk, 2, 16), randn(2, sk, 2, 16)
    sinks = randn(4) if case.pop("sinks", False) else None
    mask = None if mask_shape is None else \
        (additive_mask if additive else bool_mask)(*mask_shape)
    return q, k, v, sinks, mask, case


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_forward_against_float64(case):
    q, k, v, sinks, mask, case = inputs_of(case)
    y = rt.attention(q, k, v, sinks=sinks, attn_mask=mask, **case)
    y64 = ref_attention(q.double(), k.double(), v.double(),
                        sinks=None if sinks is None else sinks.double(), attn_mask=mask, **case)
    # as test_torch's: float32 softmax and sums over <= 17 keys of 16
    # features, ~1e-6 of the largest value; a wrong mask is off by 1e-2
    assert y.dtype == torch.float32 and close(y, y64, 1e-5)
    if case.get("causal") and k.shape[1] < q.shape[1]:
        assert not y[:, :q.shape[1] - k.shape[1]].any()  # rows that see no key: zeros


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_gradients_against_float64_autograd(case):
    q, k, v, sinks, mask, case = inputs_of(case)
    dy = randn(2, 9, 4, 16)
    inputs = [q, k, v] + ([] if sinks is None else [sinks])

    def ours(a, b, c, s=None):
        return rt.attention(a, b, c, sinks=s, attn_mask=mask, **case)

    def theirs(a, b, c, s=None):
        return ref_attention(a, b, c, sinks=s, attn_mask=mask, **case)
    y, g = grads(ours, inputs, dy)
    y64, g64 = grads(theirs, [t.double() for t in inputs], dy.double())
    # as test_torch's: float32 softmax and sums over <= 17 keys of 16
    # features, ~1e-6 of the largest value; a wrong mask is off by 1e-2
    assert close(y, y64, 1e-5)
    for name, got, want in zip(("q", "k", "v", "sinks"), g, g64):
        assert got.dtype == torch.float32 and close(got, want, 1e-5), name


def test_mask_dtypes_and_expanded_views():
    """bool, float32, float16 and bfloat16 masks, and an expand()ed one
    (zero strides, read in place) give the float32 mask's result."""
    q, k, v = randn(2, 7, 4, 16), randn(2, 9, 2, 16), randn(2, 9, 2, 16)
    bias = additive_mask(7, 9).to(torch.bfloat16).float()  # exact in every dtype below
    want = rt.attention(q, k, v, causal=False, attn_mask=bias)
    for dtype in (torch.float16, torch.bfloat16):
        got = rt.attention(q, k, v, causal=False, attn_mask=bias.to(dtype))
        assert torch.equal(got, want), dtype
    got = rt.attention(q, k, v, causal=False, attn_mask=bias.expand(2, 4, 7, 9))
    assert torch.equal(got, want)
    allowed = bias != -math.inf
    assert torch.equal(rt.attention(q, k, v, causal=False, attn_mask=allowed),
                       rt.attention(q, k, v, causal=False,
                                    attn_mask=torch.zeros(7, 9).masked_fill(~allowed,
                                                                            -math.inf)))
    strided = torch.zeros(9, 7).masked_fill(~allowed.T, -math.inf).T  # transposed view
    assert torch.equal(rt.attention(q, k, v, causal=False, attn_mask=strided),
                       rt.attention(q, k, v, causal=False, attn_mask=strided.contiguous()))


def test_fully_masked_rows_give_zeros_and_zero_gradients():
    q, k, v = randn(1, 5, 2, 8), randn(1, 6, 2, 8), randn(1, 6, 2, 8)
    mask = torch.ones(5, 6, dtype=torch.bool)
    mask[3] = False
    y, (dq, dk, dv) = grads(lambda a, b, c: rt.attention(a, b, c, causal=False, attn_mask=mask),
                            [q, k, v], randn(1, 5, 2, 8))
    assert not y[0, 3].any() and not dq[0, 3].any()


def test_mask_requiring_grad_is_refused():
    q, k, v = randn(1, 5, 2, 8), randn(1, 5, 2, 8), randn(1, 5, 2, 8)
    bias = torch.zeros(5, 5, requires_grad=True)
    with pytest.raises(ValueError, match="attn_mask: requires_grad=True"):
        rt.attention(q, k, v, causal=False, attn_mask=bias)
    rt.attention(q, k, v, causal=False, attn_mask=bias.detach())


def test_drop_in_mask_requiring_grad_is_refused():
    """A 4-D bias requiring a gradient given to the attention interface's
    function: transformers' eager path gives it one, the library none
    (it was detached silently)."""
    q, k, v = randn(1, 4, 6, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    module = torch.nn.Module().eval()
    bias = torch.zeros(1, 1, 6, 6, requires_grad=True)
    for causal in (True, False):
        module.is_causal = causal
        with pytest.raises(ropeattn.UnsupportedError, match="attention_mask: requires_grad"):
            rt.eager_attention_forward(module, q, k, v, bias, scaling=0.3)
        rt.eager_attention_forward(module, q, k, v, bias.detach(), scaling=0.3)


def test_mask_changed_in_place_before_backward():
    q = randn(1, 5, 2, 8).requires_grad_(True)
    mask = torch.ones(5, 5, dtype=torch.bool)
    y = rt.attention(q, q.detach(), q.detach(), causal=False, attn_mask=mask)
    mask[0, 0] = False
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_bad_masks():
    q, k, v = randn(1, 5, 2, 8), randn(1, 6, 2, 8), randn(1, 6, 2, 8)
    with pytest.raises(TypeError, match=r"attn_mask.*torch.int64.*\.bool\(\)"):
        rt.attention(q, k, v, attn_mask=torch.ones(5, 6, dtype=torch.long))
    with pytest.raises(TypeError, match="attn_mask.*float64"):
        rt.attention(q, k, v, attn_mask=torch.zeros(5, 6, dtype=torch.float64))
    with pytest.raises(ValueError, match="attn_mask: shape"):
        rt.attention(q, k, v, attn_mask=torch.ones(5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="attn_mask: 5 dimensions"):
        rt.attention(q, k, v, attn_mask=torch.ones(1, 1, 2, 5, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="attn_mask"):
        rt.attention(q, k, v, attn_mask=torch.full((5, 6), math.nan))
    numpy_mask = np.ones((5, 6), bool)  # an array: copied, as the backward reads it
    assert torch.equal(rt.attention(q, k, v, causal=False, attn_mask=numpy_mask),
                       rt.attention(q, k, v, causal=False))


def test_drop_in_is_causal_false_and_none_defer_to_the_module():
    """is_causal=None means the module's is_causal, as in transformers'
    sdpa path: a bidirectional module (is_causal False) runs without the
    causal mask; is_causal=False wins over a causal module."""
    q, k, v = randn(1, 4, 6, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    t = [x.transpose(1, 2).double() for x in (q, k, v)]
    bidirectional = ref_attention(*t, causal=False, scale=0.3)
    module = torch.nn.Module().eval()
    module.is_causal = False
    for kw in (dict(), dict(is_causal=None), dict(is_causal=0)):
        out, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.3, **kw)
        assert close(out, bidirectional, 1e-5)
    module.is_causal = True
    out, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.3, is_causal=False)
    assert close(out, bidirectional, 1e-5)
    out, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.3, is_causal=None)
    assert close(out, ref_attention(*t, scale=0.3), 1e-5)
    module.is_causal = False  # ModernBERT's local layers: sliding_window both ways
    out, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.3, sliding_window=2)
    assert close(out, ref_attention(*t, causal=False, window=2, scale=0.3), 1e-5)


def test_drop_in_sliding_window_0_with_a_mask():
    """sliding_window=0 beside a 4-D mask: transformers' eager and sdpa
    paths compute what the mask says; it was taken as the library's window
    0 and refused (ArgumentError)."""
    q, k, v = randn(1, 4, 6, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    module = torch.nn.Module().eval()
    causal = torch.ones(6, 6, dtype=torch.bool).tril()[None, None]
    out, _ = rt.eager_attention_forward(module, q, k, v, causal, scaling=0.3, sliding_window=0)
    want = ref_attention(*(x.transpose(1, 2).double() for x in (q, k, v)), scale=0.3)
    assert close(out, want, 1e-5)


def test_drop_in_4d_masks_the_library_does_not_form_go_whole():
    """4-D masks that are not the library's causal, window, padding or
    document masks (a bias, a mask per head, a padding key, a
    bidirectional block) reach it whole as attn_mask: SDPA's numbers, not
    a refusal; an integer mask (neither sdpa's boolean nor eager's
    additive) is refused by name."""
    q, k, v = randn(1, 4, 6, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    t = [x.transpose(1, 2).double() for x in (q, k, v)]
    module = torch.nn.Module().eval()
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    causal = torch.zeros(1, 1, 6, 6).masked_fill(j > i, -math.inf)
    padded = causal.clone()
    padded[..., 0] = -math.inf
    image = (j <= i) | ((i >= 2) & (i < 4) & (j >= 2) & (j < 4))  # tokens 2, 3 both ways
    for mask in (causal + 0.5 * (j <= i), causal.expand(1, 4, 6, 6) + randn(1, 4, 1, 6),
                 padded, image[None, None]):
        out, _ = rt.eager_attention_forward(module, q, k, v, mask, scaling=0.3)
        want = ref_attention(*t, causal=False, attn_mask=mask, scale=0.3)
        assert close(out, want, 1e-5)
    with pytest.raises(ropeattn.UnsupportedError, match="attention_mask"):
        rt.eager_attention_forward(module, q, k, v, (j <= i).long()[None, None], scaling=0.3)


def test_drop_in_is_causal_and_dropout_that_would_decide_by_truth_are_refused():
    """is_causal "no" ran causal (its truth), dropout -0.1 or NaN ran as 0
    (eager's F.dropout and SDPA raise for them): each an UnsupportedError
    naming it."""
    q, k, v = randn(1, 4, 6, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    module = torch.nn.Module().eval()
    for value in ("no", "False", 2, torch.tensor([True, False])):
        with pytest.raises(ropeattn.UnsupportedError, match="^is_causal: "):
            rt.eager_attention_forward(module, q, k, v, None, scaling=0.3, is_causal=value)
    for value in (-0.1, math.nan, 1.5, True, "0.1"):
        with pytest.raises(ropeattn.UnsupportedError, match="^dropout: "):
            rt.eager_attention_forward(module, q, k, v, None, scaling=0.3, dropout=value)
    out, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.3,
                                        is_causal=torch.tensor(False))
    t = [x.transpose(1, 2).double() for x in (q, k, v)]
    assert close(out, ref_attention(*t, causal=False, scale=0.3), 1e-5)


@pytest.mark.parametrize("batches", [(1, 3), (3, 1)])
def test_drop_in_a_batch_of_one_broadcasts_as_sdpa(batches):
    """Queries of batch 1 over keys of batch 3 (learned queries), or the
    reverse: SDPA's and eager's matmuls broadcast the batch; the library
    call took key row 0 alone and returned a batch of 1, silently."""
    bq, bk = batches
    q, k, v = randn(bq, 4, 5, 8), randn(bk, 2, 5, 8), randn(bk, 2, 5, 8)
    module = torch.nn.Module().eval()
    want = ref_attention(*(x.expand(3, -1, -1, -1).transpose(1, 2).double() for x in (q, k, v)),
                         scale=0.3)
    out, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.3)
    assert out.shape == (3, 5, 4, 8) and close(out, want, 1e-5)
    with pytest.raises(ropeattn.UnsupportedError, match="do not broadcast"):
        rt.eager_attention_forward(module, randn(2, 4, 5, 8), k.expand(3, -1, -1, -1), v,
                                   None, scaling=0.3)
