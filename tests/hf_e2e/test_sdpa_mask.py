"""ropeattn.torch.attention beyond causal decoders (issue 43) against
PyTorch's own scaled_dot_product_attention, forward and gradients:
causal=False, keys of another length than the queries, and attn_mask
(bool and additive, SDPA's broadcastable shapes).  SDPA runs in float64 on
the same inputs (its math path, the reference); ropeattn in float32.  Its
is_causal=True with Sq != Sk is top-left aligned, ropeattn's bottom-right
(flash-attn's): that case is compared with an explicit SDPA mask.  Needs
torch 2.5+ (fully masked rows give zeros there):

    .venv-hf/bin/python -m pytest -q tests/hf_e2e/test_sdpa_mask.py
"""
import math

import pytest

torch = pytest.importorskip("torch")
import ropeattn  # noqa: E402
import ropeattn.torch as rt  # noqa: E402

F = torch.nn.functional
GEN = torch.Generator().manual_seed(4343)
# float32 softmax and sums over <= 17 keys of 16 features against float64:
# ~1e-6 of the largest value; a wrong mask or alignment is off by 1e-2
REL = 1e-5


def randn(*shape):
    return torch.randn(shape, generator=GEN)


def close(got, want, rel=REL):
    got, want = got.double(), want.double()
    return float((got - want).abs().max()) <= rel * float(want.abs().max())


def sdpa(q, k, v, **kw):
    """SDPA on [B, H, S, D] with k, v repeated to H heads (GQA)."""
    rep = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1),
                                          v.repeat_interleave(rep, 1), **kw)


def check(q, k, v, ours, theirs):
    """ropeattn on float32 inputs against SDPA on float64 ones: out and the
    gradients of sum(out * dy)."""
    dy = randn(*q.shape)
    results = []
    for fn, dtype in ((ours, torch.float32), (theirs, torch.float64)):
        inputs = [t.detach().to(dtype).requires_grad_(True) for t in (q, k, v)]
        y = fn(*inputs)
        (y * dy.to(dtype)).sum().backward()
        results.append((y.detach(), [t.grad for t in inputs]))
    (y, g), (y64, g64) = results
    assert close(y, y64)
    for name, got, want in zip("qkv", g, g64):
        assert close(got, want), name


def bottom_right(sq, sk):
    return torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq)


@pytest.mark.parametrize("sq,sk", [(9, 9), (5, 17), (1, 9), (12, 12)])
def test_non_causal(sq, sk):
    q, k, v = randn(2, 4, sq, 16), randn(2, 2, sk, 16), randn(2, 2, sk, 16)
    check(q, k, v, lambda a, b, c: rt.attention(a, b, c, causal=False, shape="bhsd"),
          lambda a, b, c: sdpa(a, b, c))


@pytest.mark.parametrize("sq,sk", [(9, 9), (5, 17), (1, 9)])
def test_causal_bottom_right(sq, sk):
    """Sq == Sk: SDPA's is_causal; else its explicit bottom-right mask."""
    q, k, v = randn(2, 4, sq, 16), randn(2, 2, sk, 16), randn(2, 2, sk, 16)
    kw = dict(is_causal=True) if sq == sk else dict(attn_mask=bottom_right(sq, sk))
    check(q, k, v, lambda a, b, c: rt.attention(a, b, c, shape="bhsd"),
          lambda a, b, c: sdpa(a, b, c, **kw))


MASK_SHAPES = [(7, 9), (2, 1, 7, 9), (1, 4, 1, 9), (4, 7, 9), (9,), (2, 4, 7, 9)]


@pytest.mark.parametrize("shape", MASK_SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_attn_mask(shape, kind):
    q, k, v = randn(2, 4, 7, 16), randn(2, 2, 9, 16), randn(2, 2, 9, 16)
    keep = torch.rand(shape, generator=GEN) < 0.7
    mask = keep if kind == "bool" else randn(*shape).masked_fill(~keep, -math.inf)

    def theirs(a, b, c):  # SDPA takes no 1-D mask: broadcast it first
        m = mask if mask.dtype == torch.bool else mask.to(a.dtype)
        return sdpa(a, b, c, attn_mask=m.expand(2, 4, 7, 9))
    check(q, k, v, lambda a, b, c: rt.attention(a, b, c, causal=False, attn_mask=mask,
                                                shape="bhsd"), theirs)
    # with ropeattn's own causal mask: SDPA's mask and the bottom-right one
    both_masks = (bottom_right(7, 9) & keep) if kind == "bool" else \
        mask.masked_fill(~bottom_right(7, 9), -math.inf)
    check(q, k, v, lambda a, b, c: rt.attention(a, b, c, attn_mask=mask, shape="bhsd"),
          lambda a, b, c: sdpa(a, b, c, attn_mask=(both_masks if kind == "bool" else
                                                   both_masks.to(a.dtype)).expand(2, 4, 7, 9)))


def test_fully_masked_rows_and_transformers_lowest():
    """A row masked through gives zeros (SDPA 2.5+ too); finfo.min rows
    average v in both."""
    q, k, v = randn(1, 2, 5, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    keep = torch.ones(5, 6, dtype=torch.bool)
    keep[2] = False
    got = rt.attention(q, k, v, causal=False, attn_mask=keep, shape="bhsd")
    want = sdpa(q.double(), k.double(), v.double(), attn_mask=keep)
    assert not got[0, :, 2].any() and close(got, want)
    lowest = torch.zeros(5, 6).masked_fill(~keep, torch.finfo(torch.float32).min)
    got = rt.attention(q, k, v, causal=False, attn_mask=lowest, shape="bhsd")
    assert close(got, sdpa(q, k, v, attn_mask=lowest), 1e-5)


def test_half_precision_masks_and_scale():
    q, k, v = randn(2, 4, 7, 16), randn(2, 4, 9, 16), randn(2, 4, 9, 16)
    bias = randn(1, 1, 7, 9).to(torch.bfloat16)
    for mask in (bias, bias.half()):
        check(q, k, v, lambda a, b, c: rt.attention(a, b, c, causal=False, attn_mask=mask,
                                                    scale=0.3, shape="bhsd"),
              lambda a, b, c: sdpa(a, b, c, attn_mask=mask.to(a.dtype), scale=0.3))


class CausalModule(torch.nn.Module):
    """What transformers' attention functions read of a decoder's module."""
    is_causal = True
    num_key_value_groups = 2


@pytest.mark.parametrize("sq,sk", [(3, 9), (9, 4), (6, 7), (1, 9), (9, 9)])
def test_interface_causal_without_mask_as_sdpa(sq, sk):
    """The attention-interface function on a causal module, attention_mask
    None, against transformers' own sdpa_attention_forward (is_causal for
    Sq > 1, PyTorch's top-left diagonal; one query sees every key) on
    float64 inputs, as above."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    module = CausalModule().eval()
    q, k, v = randn(2, 4, sq, 16), randn(2, 2, sk, 16), randn(2, 2, sk, 16)

    def call(fn):  # out [B, Sq, H, D] as [B, H, Sq, D], check's order
        return lambda a, b, c: fn(module, a, b, c, None, scaling=0.3)[0].transpose(1, 2)
    check(q, k, v, call(rt.eager_attention_forward), call(sdpa_attention_forward))


def test_interface_causal_without_mask_window_refused():
    """A sliding_window that would hide keys of a top-left call: sdpa
    ignores it, flash aligns it bottom-right; refused, never guessed."""
    q, k, v = randn(1, 4, 5, 16), randn(1, 2, 9, 16), randn(1, 2, 9, 16)
    module = CausalModule().eval()
    with pytest.raises(ropeattn.UnsupportedError, match="sliding_window=4 with"):
        rt.eager_attention_forward(module, q, k, v, None, sliding_window=4)
    got = rt.eager_attention_forward(module, q, k, v, None, sliding_window=5)[0]
    assert torch.equal(got, rt.eager_attention_forward(module, q, k, v, None)[0])
