"""ropeattn.torch: CPU tensors in and out, and autograd, against PyTorch's own
float64 autograd of the reference formulas (transformers' rotate_half RoPE;
causal GQA softmax attention with its masks).  Skipped where PyTorch is not
installed (Debian: python3-torch; bash scripts/install-deps.sh installs it)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ropeattn  # noqa: E402
import ropeattn.torch as rt  # noqa: E402
import reference as ref  # noqa: E402

GEN = torch.Generator().manual_seed(2121)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=GEN).to(dtype)


def ref_rope(x, positions, inv_freq):
    """x * cos + rotate_half(x) * sin in float64, x [B, S, H, D]."""
    angles = positions[..., None].double() * torch.as_tensor(inv_freq, dtype=torch.float64)
    emb = torch.cat((angles, angles), -1)
    cos, sin = emb.cos()[..., None, :], emb.sin()[..., None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos + rotated * sin


def ref_attention(q, k, v, window=None, chunk=None, sinks=None, softcap=None, scale=None,
                  padding_mask=None, cu_seqlens=None):
    """Causal GQA attention in the inputs' dtype (float64 here), masks as the C API's."""
    b, s, h, d = q.shape
    rep = h // k.shape[2]
    k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)
    logits = torch.einsum("bihd,bjhd->bhij", q, k) * (scale or 1 / math.sqrt(d))
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    seen = (j <= i).expand(b, 1, s, s).clone()
    if window:
        seen &= j > i - window
    real = torch.ones(b, s, dtype=torch.bool) if padding_mask is None else \
        torch.as_tensor(padding_mask) != 0
    if chunk:
        lead = real.int().argmax(1)[:, None, None, None]
        seen &= torch.div(j - lead, chunk, rounding_mode="floor") == \
            torch.div(i - lead, chunk, rounding_mode="floor")
    seen &= real[:, None, None, :]
    if cu_seqlens is not None:
        doc = torch.searchsorted(torch.as_tensor(cu_seqlens)[1:], torch.arange(s), right=True)
        seen &= doc[:, None] == doc[None, :]
    logits = logits.masked_fill(~seen, -math.inf)
    if sinks is not None:
        sink = sinks[None, :, None, None].expand(b, h, s, 1)
        p = torch.softmax(torch.cat((logits, sink), -1), -1)[..., :-1]
    else:
        p = torch.softmax(logits, -1).nan_to_num(0.0)
    out = torch.einsum("bhij,bjhd->bihd", p, v)
    return out * real[:, :, None, None]


def grads(fn, inputs, dy):
    """(y, dL/d inputs) of L = sum(fn(*inputs) * dy)."""
    inputs = [t.detach().requires_grad_(True) for t in inputs]
    y = fn(*inputs)
    (y * dy).sum().backward()
    return y.detach(), [t.grad for t in inputs]


def close(got, want, rel):
    """max |got - want| within rel of max |want|."""
    got, want = got.double(), want.double()
    return float((got - want).abs().max()) <= rel * float(want.abs().max())


def test_rope_forward_and_backward_against_float64_autograd():
    rope = ropeattn.RotaryEmbedding(16, theta=10000.0)
    x = randn(2, 9, 3, 16)
    positions = torch.arange(9).repeat(2, 1) + torch.tensor([[0], [5]])
    dy = randn(2, 9, 3, 16)
    y, (dx,) = grads(lambda t: rt.apply_rotary(t, positions.numpy(), rope=rope), [x], dy)
    y64, (dx64,) = grads(lambda t: ref_rope(t, positions, rope.inv_freq), [x.double()],
                         dy.double())
    # one float32 rotation each way: a few ulp of the values
    assert y.dtype == torch.float32 and close(y, y64, 1e-6) and close(dx, dx64, 1e-6)


def test_rope_half_precision_and_strided():
    rope = ropeattn.RotaryEmbedding(16)
    fused = randn(2, 7, 6, 16)
    x = fused[:, :, 2:5]  # heads sliced from a fused array: read in place
    want = ref_rope(x.double(), torch.arange(7).repeat(2, 1), rope.inv_freq)
    assert close(rt.apply_rotary(x, rope=rope), want, 1e-6)
    for dtype, rel in ((torch.float16, 2e-3), (torch.bfloat16, 1e-2)):  # one rounding
        xh = x.to(dtype).requires_grad_(True)
        y = rt.apply_rotary(xh, rope=rope)
        assert y.dtype == dtype and close(y, want, rel)
        y.sum().backward()
        assert xh.grad.dtype == dtype


MASKS = [dict(), dict(window=4), dict(softcap=2.0, scale=0.3), dict(chunk=5),
         dict(padding_mask=np.array([[0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
                                     [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]], np.uint8)),
         dict(cu_seqlens=np.array([0, 4, 13])), dict(window=3, softcap=5.0, chunk=6)]


@pytest.mark.parametrize("masks", MASKS, ids=[",".join(m) or "causal" for m in MASKS])
def test_attention_gradients_against_float64_autograd(masks):
    q, k, v = randn(2, 13, 4, 16), randn(2, 13, 2, 16), randn(2, 13, 2, 16)
    dy = randn(2, 13, 4, 16)
    y, g = grads(lambda a, b, c: rt.attention(a, b, c, **masks), [q, k, v], dy)
    y64, g64 = grads(lambda a, b, c: ref_attention(a, b, c, **masks),
                     [q.double(), k.double(), v.double()], dy.double())
    # float32 softmax and sums over <= 13 keys of 16 features: ~1e-6 of the
    # largest value; 1e-5 is far below a wrong mask's or formula's error
    assert close(y, y64, 1e-5)
    for name, got, want in zip("qkv", g, g64):
        assert got.dtype == torch.float32 and close(got, want, 1e-5), name


def test_attention_sinks_gradient():
    q, k, v = randn(1, 11, 4, 8), randn(1, 11, 2, 8), randn(1, 11, 2, 8)
    sinks, dy = randn(4), randn(1, 11, 4, 8)
    y, g = grads(lambda a, b, c, s: rt.attention(a, b, c, sinks=s, window=5), [q, k, v, sinks],
                 dy)
    y64, g64 = grads(lambda a, b, c, s: ref_attention(a, b, c, sinks=s, window=5),
                     [t.double() for t in (q, k, v, sinks)], dy.double())
    assert close(y, y64, 1e-5)
    for name, got, want in zip(("q", "k", "v", "sinks"), g, g64):
        assert close(got, want, 1e-5), name


def test_attention_half_keys_values():
    q, k, v = randn(1, 9, 4, 16), randn(1, 9, 2, 16), randn(1, 9, 2, 16)
    for dtype in (torch.float16, torch.bfloat16):
        kh, vh = k.to(dtype), v.to(dtype)
        y, g = grads(lambda a, b, c: rt.attention(a, b, c), [q, kh, vh], torch.ones(1, 9, 4, 16))
        y64, g64 = grads(ref_attention, [q.double(), kh.double(), vh.double()],
                         torch.ones(1, 9, 4, 16, dtype=torch.float64))
        assert close(y, y64, 1e-5) and close(g[0], g64[0], 1e-5)
        # dk, dv computed in float32, rounded once to the inputs' dtype
        assert g[1].dtype == dtype and close(g[1], g64[1], 1e-2) and close(g[2], g64[2], 1e-2)


def test_attention_bfloat16_queries_keys_values():
    """A bfloat16 model's q, k and v as they come: the output and the
    gradients come back in bfloat16 (a bf16 model's o_proj takes it), each
    within its rounding of float64 autograd's on the same values (the
    forward within the bf16 units' 2^-9 max|v|, plus its rounding to
    bfloat16, 2^-9 of itself)."""
    q, k, v = randn(1, 9, 4, 16), randn(1, 9, 2, 16), randn(1, 9, 2, 16)
    qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
    y, g = grads(lambda a, b, c: rt.attention(a, b, c), [qb, kb, vb], torch.ones(1, 9, 4, 16))
    y64, g64 = grads(ref_attention, [qb.double(), kb.double(), vb.double()],
                     torch.ones(1, 9, 4, 16, dtype=torch.float64))
    bound = 2 ** -9 * (vb.abs().max().item() + y64.abs().max().item()) + 1e-5
    assert y.dtype == torch.bfloat16 and (y.double() - y64).abs().max().item() <= bound
    for got, want in zip(g, g64):
        assert got.dtype == torch.bfloat16 and close(got, want, 1e-2)


def test_gradcheck_of_the_float32_functions():
    """torch.autograd.gradcheck on the library's float32 functions: the
    backward against central differences of the forward itself (step 1e-2,
    tolerances for float32 sums at that step)."""
    q, k, v = randn(1, 6, 2, 4), randn(1, 6, 1, 4), randn(1, 6, 1, 4)
    for t in (q, k, v):
        t.requires_grad_(True)
    with pytest.warns(UserWarning):  # gradcheck wants float64; these are float32
        assert torch.autograd.gradcheck(lambda a, b, c: rt.attention(a, b, c, window=3),
                                        (q, k, v), eps=1e-2, atol=2e-3, rtol=2e-2)
        rope = ropeattn.RotaryEmbedding(4)
        assert torch.autograd.gradcheck(lambda a: rt.apply_rotary(a, 3, rope=rope), (q,),
                                        eps=1e-2, atol=2e-3, rtol=2e-2)


def test_no_copies(monkeypatch):
    """The library reads the tensors' own memory and the result is a tensor
    over the array it wrote: the arrays it is given share the inputs'
    memory, and the output's data pointer is the written array's."""
    seen = {}
    forward = rt.attention_forward

    def spy(q, k, v, **kw):
        out, lse = forward(q, k, v, **kw)
        seen.update(q=q, k=k, v=v, out=out)
        return out, lse

    monkeypatch.setattr(rt, "attention_forward", spy)
    fused = randn(1, 5, 4, 8)  # q, k, v as heads of one fused tensor: strided views
    q, k, v = fused[:, :, :2], fused[:, :, 2:3], fused[:, :, 3:]
    out = rt.attention(q, k, v)
    for name, t in (("q", q), ("k", k), ("v", v)):
        assert np.shares_memory(seen[name], fused.numpy()), name
    assert out.data_ptr() == seen["out"].__array_interface__["data"][0]


def test_output_changed_in_place_before_backward():
    q, k, v = (randn(1, 5, 2, 8).requires_grad_(True), randn(1, 5, 1, 8), randn(1, 5, 1, 8))
    out = rt.attention(q, k, v)
    out.mul_(3)  # the backward reads the forward's output: PyTorch must refuse
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_second_derivative_refused():
    q = randn(1, 5, 2, 8).requires_grad_(True)
    k, v = randn(1, 5, 1, 8), randn(1, 5, 1, 8)
    (dq,) = torch.autograd.grad(rt.attention(q, k, v).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError):  # once_differentiable: never a silent zero
        torch.autograd.grad((dq * dq).sum(), q)


def test_bad_tensors():
    q, k, v = randn(1, 5, 2, 8), randn(1, 5, 1, 8), randn(1, 5, 1, 8)
    with pytest.raises(ropeattn.DtypeError):
        rt.attention(q.double(), k, v)
    with pytest.raises(ropeattn.DtypeError):
        rt.attention(q, k, v.half())
    with pytest.raises(ropeattn.DtypeError):
        rt.attention(q.numpy(), k, v)
    with pytest.raises(ropeattn.ArgumentError):
        rt.attention(q, k[:, :4], v)
    with pytest.raises(ropeattn.DtypeError):
        rt.apply_rotary(q.to(torch.int32), rope=ropeattn.RotaryEmbedding(8))
    if hasattr(torch, "device") and torch.device("meta").type == "meta":
        with pytest.raises(ropeattn.ArgumentError):  # not a CPU tensor
            rt.attention(q.to("meta"), k, v)
    # numpy.ma arrays where arrays are taken: np.array dropped the mask
    masked = np.ma.masked_array([1, 1, 1, 1, 0], mask=[0, 0, 0, 0, 1])
    with pytest.raises(ropeattn.DtypeError, match="^padding_mask: a masked array"):
        rt.attention(q, k, v, padding_mask=masked[None])
    with pytest.raises(ropeattn.DtypeError, match="^positions: a masked array"):
        rt.apply_rotary(q, masked, rope=ropeattn.RotaryEmbedding(8))
    with pytest.raises(ropeattn.DtypeError, match="^attn_mask: a masked array"):
        rt.attention(q, k, v, attn_mask=np.ma.masked_array(np.ones((5, 5), bool)))
    with pytest.raises(ropeattn.ArgumentError, match="q: expected a dense tensor"):
        rt.attention(q.to_sparse(), k, v)  # a TypeError from numpy(), naming nothing
    # a negated view (its memory holds -q): numpy() raised RuntimeError
    negated = torch._neg_view(-q)
    assert negated.is_neg()
    torch.testing.assert_close(rt.attention(negated, k, v), rt.attention(q, k, v), rtol=0, atol=0)


def test_drop_in_rotary_pos_emb_uses_the_library(monkeypatch):
    """cos, sin from RotaryEmbeddingModule equal transformers' tables, and
    apply_rotary_pos_emb then rotates q [B, H, S, D] and k in the library;
    plain tables fall back to transformers' formula."""
    rope = ropeattn.RotaryEmbedding(16, theta=10000.0)
    q, k = randn(2, 4, 9, 16), randn(2, 2, 9, 16)
    pos = torch.arange(9).repeat(2, 1) + torch.tensor([[0], [3]])
    cos, sin = rt.RotaryEmbeddingModule(rope)(q, pos)
    angles = pos[..., None].double() * torch.as_tensor(rope.inv_freq)
    assert close(cos, torch.cat((angles, angles), -1).cos(), 1e-6)
    calls = []
    real = rt.apply_rotary
    monkeypatch.setattr(rt, "apply_rotary", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    qr, kr = rt.apply_rotary_pos_emb(q, k, cos, sin)
    assert len(calls) == 2
    want_q = ref_rope(q.transpose(1, 2).double(), pos, rope.inv_freq).transpose(1, 2)
    assert qr.shape == q.shape and close(qr, want_q, 1e-6)
    plain_q, _ = rt.apply_rotary_pos_emb(q, k, cos.clone(), sin.clone())  # unmarked
    assert len(calls) == 2 and close(plain_q, want_q, 1e-6)


def test_drop_in_rotary_pos_emb_unsqueeze_dim():
    """unsqueeze_dim as transformers' formula reads it: -3 is 1 (q [B, H,
    S, D]), -2 is 2 ([B, S, H, D]); any other broadcasts the tables some
    other way, and takes the formula (it read [B, S, H, D]: heads rotated
    as positions where H = S)."""
    rope = ropeattn.RotaryEmbedding(16, theta=10000.0)
    q, k = randn(1, 4, 4, 16), randn(1, 4, 4, 16)
    cos, sin = rt.RotaryEmbeddingModule(rope)(q, torch.arange(3, 7)[None])
    for dim in (1, -3, 2, -2, 0, -4):
        x, y = (q, k) if dim in (1, -3) else (q.transpose(1, 2), k.transpose(1, 2))
        got = rt.apply_rotary_pos_emb(x, y, cos, sin, unsqueeze_dim=dim)
        want = rt.apply_rotary_pos_emb(x, y, cos.clone(), sin.clone(), unsqueeze_dim=dim)
        assert close(got[0], want[0], 1e-6) and close(got[1], want[1], 1e-6), dim


def test_drop_in_rotary_pos_emb_tables_out_of_place():
    """The module's cos and sin given swapped, or one of them twice: what
    transformers' formula computes with them (the library rotated by the
    positions' angles, as if they were in their places)."""
    rope = ropeattn.RotaryEmbedding(16, theta=10000.0)
    q, k = randn(1, 4, 5, 16), randn(1, 2, 5, 16)
    cos, sin = rt.RotaryEmbeddingModule(rope)(q, torch.arange(5)[None])
    for c, s in ((sin, cos), (cos, cos), (sin, sin)):
        got = rt.apply_rotary_pos_emb(q, k, c, s)
        want = rt.apply_rotary_pos_emb(q, k, c.clone(), s.clone())
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_drop_in_rotary_pos_emb_mixed_dtypes():
    """q or k of another dtype than the tables: transformers' own numbers and
    dtypes (computed in the promoted dtype, the tables rounded to theirs)."""
    rope = ropeattn.RotaryEmbedding(16, theta=10000.0)
    q, k = randn(1, 4, 5, 16), randn(1, 2, 5, 16).to(torch.bfloat16)
    pos = torch.arange(5)[None]
    for x in (q, k):
        cos, sin = rt.RotaryEmbeddingModule(rope)(x, pos)
        qr, kr = rt.apply_rotary_pos_emb(q, k, cos, sin)
        wq, wk = rt.apply_rotary_pos_emb(q, k, cos.clone(), sin.clone())  # unmarked
        want = tuple(torch.promote_types(t.dtype, x.dtype) for t in (q, k))
        assert (qr.dtype, kr.dtype) == (wq.dtype, wk.dtype) == want
        assert torch.equal(qr, wq) and torch.equal(kr, wk)


def test_drop_in_dropout_needs_the_module_training():
    q, k, v = randn(1, 4, 6, 16), randn(1, 2, 6, 16), randn(1, 2, 6, 16)
    with pytest.raises(ropeattn.UnsupportedError, match="dropout=0.5 with a module of no"):
        rt.eager_attention_forward(None, q, k, v, None, scaling=0.25, dropout=0.5)
    out, _ = rt.eager_attention_forward(None, q, k, v, None, scaling=0.25)
    assert out.shape == (1, 6, 4, 16)


def test_drop_in_attention_interface():
    q, k, v = randn(1, 4, 10, 16), randn(1, 2, 10, 16), randn(1, 2, 10, 16)  # [B, H, S, D]
    sinks = randn(4)
    module = torch.nn.Module().eval()
    for kw in (dict(), dict(sliding_window=3), dict(softcap=2.0), dict(s_aux=sinks)):
        out, weights = rt.eager_attention_forward(module, q, k, v, None, scaling=0.25, **kw)
        want = ref_attention(q.transpose(1, 2).double(), k.transpose(1, 2).double(),
                             v.transpose(1, 2).double(), window=kw.get("sliding_window"),
                             softcap=kw.get("softcap"), scale=0.25,
                             sinks=None if "s_aux" not in kw else sinks.double())
        assert weights is None and out.shape == (1, 10, 4, 16) and close(out, want, 1e-5), kw
    causal = torch.full((10, 10), -math.inf).triu(1)[None, None]
    out, _ = rt.eager_attention_forward(module, q, k, v, causal, scaling=0.25)
    assert close(out, rt.eager_attention_forward(module, q, k, v, None, scaling=0.25)[0], 0)
    padded = causal.clone()
    padded[..., 0] = -math.inf  # key 0 is padding: not the plain causal mask, given whole
    out, _ = rt.eager_attention_forward(module, q, k, v, padded, scaling=0.25)
    padding = np.ones((1, 10), np.uint8)
    padding[0, 0] = 0  # query 0 sees no key: a zero row in both
    want = ref_attention(*(t.transpose(1, 2).double() for t in (q, k, v)), scale=0.25,
                         padding_mask=padding)
    assert close(out, want, 1e-5)


def test_drop_in_rotary_position_ids_of_one_row_and_cache_position():
    """position_ids [1, S], transformers' default, serve every batch row;
    cache_position [S] stands for them when position_ids is None."""
    rope = ropeattn.RotaryEmbedding(16, theta=10000.0)
    q, k = randn(3, 4, 7, 16), randn(3, 2, 7, 16)
    pos = torch.arange(5, 12)
    want_q = ref_rope(q.transpose(1, 2).double(), pos.expand(3, -1),
                      rope.inv_freq).transpose(1, 2)
    for tables in (rt.RotaryEmbeddingModule(rope)(q, pos[None]),
                   rt.RotaryEmbeddingModule(rope)(q, cache_position=pos)):
        assert tables[0].shape == (1, 7, 16)
        qr, kr = rt.apply_rotary_pos_emb(q, k, *tables, context=ropeattn.Context(2))
        assert close(qr, want_q, 1e-6) and kr.shape == k.shape


def test_drop_in_attention_dtype_and_context():
    """bfloat16 q, k, v give bfloat16 out (a bf16 model's o_proj takes it),
    the gradients in bfloat16; float32 stays float32; a context gives the
    same bits."""
    q, k, v = randn(2, 4, 6, 16), randn(2, 2, 6, 16), randn(2, 2, 6, 16)
    module = torch.nn.Module().eval()
    qb, kb, vb = (t.to(torch.bfloat16).requires_grad_() for t in (q, k, v))
    out, _ = rt.eager_attention_forward(module, qb, kb, vb, None, scaling=0.25)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 6, 4, 16)
    out.float().sum().backward()
    assert qb.grad.dtype == kb.grad.dtype == vb.grad.dtype == torch.bfloat16
    one, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.25,
                                        context=ropeattn.Context(1))
    two, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.25,
                                        context=ropeattn.Context(2))
    assert one.dtype == torch.float32 and torch.equal(one, two)


def test_drop_in_decoding_and_narrower_values():
    """One query after cached keys (attention_mask None, the query the last
    token), three queries over those keys (top-left, as transformers'
    sdpa reads is_causal), and value's head_dim smaller than the query's
    (latent attention: zero-padded, exact)."""
    q, k, v = randn(2, 4, 1, 16), randn(2, 2, 9, 16), randn(2, 2, 9, 8)
    module = torch.nn.Module().eval()
    out, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.25, sliding_window=4)
    full_q = torch.cat((randn(2, 4, 8, 16), q), 2).transpose(1, 2).double()
    want = ref_attention(full_q, k.transpose(1, 2).double(), v.transpose(1, 2).double(),
                         window=4, scale=0.25)[:, -1:]
    assert out.shape == (2, 1, 4, 8) and close(out, want, 1e-5)
    # 1 < Sq < Sk: transformers' sdpa reading, top-left (query i sees keys
    # j <= i): the first rows of the whole causal attention
    q3 = randn(2, 4, 3, 16)
    out, _ = rt.eager_attention_forward(module, q3, k, v, None, scaling=0.25)
    full_q = torch.cat((q3, randn(2, 4, 6, 16)), 2).transpose(1, 2).double()
    want = ref_attention(full_q, k.transpose(1, 2).double(), v.transpose(1, 2).double(),
                         scale=0.25)[:, :3]
    assert out.shape == (2, 3, 4, 8) and close(out, want, 1e-5)
    with pytest.raises(ropeattn.UnsupportedError, match="sliding_window=2 with"):
        rt.eager_attention_forward(module, q3, k, v, None, scaling=0.25, sliding_window=2)


def test_attention_block_forward_and_backward():
    """ropeattn.torch.attention_block: queries at positions 5.. over keys
    at 2.. (a window cache's last tokens), padding; the values and
    gradients of the same rows of the whole attention."""
    s = 9
    q, k, v = randn(2, s, 4, 8), randn(2, s, 2, 8), randn(2, s, 2, 8)
    sinks = randn(4)
    pad = torch.ones(2, s, dtype=torch.int64)
    pad[1, :3] = 0
    dy = randn(2, s - 5, 4, 8)
    y, g = grads(lambda a, b, c, d: rt.attention_block(a, b, c, 5, 2, s, window=3, sinks=d,
                                                       padding_mask=pad),
                 [q[:, 5:], k[:, 2:], v[:, 2:], sinks], dy)

    def whole(a, b, c, d):
        qq = torch.cat((q[:, :5].double(), a), 1)
        kk, vv = torch.cat((k[:, :2].double(), b), 1), torch.cat((v[:, :2].double(), c), 1)
        return ref_attention(qq, kk, vv, window=3, sinks=d, padding_mask=pad)[:, 5:]
    y64, g64 = grads(whole, [t.double() for t in (q[:, 5:], k[:, 2:], v[:, 2:], sinks)],
                     dy.double())
    assert close(y, y64, 1e-5)
    for got, want in zip(g, g64):
        assert close(got, want, 1e-5)


def test_drop_in_bad_input():
    with pytest.raises(TypeError):  # a rope object is required
        rt.RotaryEmbeddingModule(16)
    # Gemma 3's rotary_emb(x, position_ids, layer_type): the third was read as
    # cache_position, and every layer type got the one rope's tables
    module = rt.RotaryEmbeddingModule(ropeattn.RotaryEmbedding(8))
    with pytest.raises(ropeattn.UnsupportedError, match="layer_type='sliding_attention'"):
        module(randn(1, 6, 8), torch.arange(6)[None], "sliding_attention")
    # interleaved tables: the library would rotate pairs (2i, 2i + 1), transformers'
    # formula (tables changed, another dtype) pairs (i, i + D/2)
    with pytest.raises(ropeattn.ArgumentError, match='layout="half"'):
        rt.RotaryEmbeddingModule(ropeattn.RotaryEmbedding(16, layout="interleaved"))
    q, k, v = randn(1, 4, 6, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    module = torch.nn.Module()
    with pytest.raises(ropeattn.UnsupportedError):  # a mask of the wrong shape
        rt.eager_attention_forward(module, q, k, v, torch.zeros(1, 1, 5, 5), scaling=0.3)
    with pytest.raises(ropeattn.DtypeError):
        rt.eager_attention_forward(module, q.double(), k, v, None, scaling=0.3)
    for s_aux in (0.5, [0.0] * 4, np.zeros(4, np.float32)):  # AttributeError: no .float()
        with pytest.raises(ropeattn.ArgumentError, match="^s_aux: expected a tensor"):
            rt.eager_attention_forward(module, q, k, v, None, s_aux=s_aux)


def test_arguments_changed_in_place_before_backward():
    """positions, padding_mask and cu_seqlens changed in place between
    forward and backward: the backward uses the values of the forward (its
    own copies, as PyTorch's ops save what they need)."""
    rope = ropeattn.RotaryEmbedding(8)
    x, dy = randn(1, 6, 2, 8), randn(1, 6, 2, 8)
    for positions in (torch.arange(6) + 3, np.arange(6) + 3):
        _, (want,) = grads(lambda t: rt.apply_rotary(t, positions, rope=rope), [x], dy)
        xg = x.clone().requires_grad_(True)
        y = rt.apply_rotary(xg, positions, rope=rope)
        positions[:] = 40  # in place, after the forward
        (y * dy).sum().backward()
        assert torch.equal(xg.grad, want), type(positions)
    q, k, v = randn(1, 8, 2, 8), randn(1, 8, 1, 8), randn(1, 8, 1, 8)
    dy = randn(1, 8, 2, 8)
    cases = (("padding_mask", torch.tensor([[0, 1, 1, 1, 1, 1, 1, 1]]), 0),
             ("padding_mask", np.array([[0, 1, 1, 1, 1, 1, 1, 1]], np.uint8), 0),
             ("cu_seqlens", torch.tensor([0, 3, 8]), 5),
             ("cu_seqlens", np.array([0, 3, 8]), 5))
    for name, value, changed in cases:
        _, want = grads(lambda a, b, c: rt.attention(a, b, c, **{name: value}), [q, k, v], dy)
        inputs = [t.clone().requires_grad_(True) for t in (q, k, v)]
        y = rt.attention(*inputs, **{name: value})
        value[..., 1] = changed
        (y * dy).sum().backward()
        for t, w in zip(inputs, want):
            assert torch.equal(t.grad, w), (name, type(value))
    # RotaryEmbeddingModule's tables carry the positions they were made at
    pos = torch.arange(6)[None] + 3
    cos, sin = rt.RotaryEmbeddingModule(rope)(x, pos)
    pos[:] = 40
    y, _ = rt.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=2)
    assert close(y, ref_rope(x.double(), torch.arange(6)[None] + 3, rope.inv_freq), 1e-6)


def test_dynamic_rope_module_takes_the_length_from_position_ids():
    """RotaryEmbeddingModule and apply_rotary with a dynamic rope made
    without seq_len: position_ids 0..99 past max_position_embeddings 16
    scale the base as transformers' dynamic_rope_update does."""
    rope = ropeattn.RotaryEmbedding(16, rope_type="dynamic", factor=2.0,
                                    max_position_embeddings=16)
    inv = ref.inv_freq_dynamic(16, 10000.0, 2.0, 16, 100)
    pos = torch.arange(100)[None]
    x = randn(1, 100, 2, 16)
    cos, sin = rt.RotaryEmbeddingModule(rope)(x, pos)
    angles = pos[..., None].double() * torch.as_tensor(inv)
    assert close(cos, torch.cat((angles, angles), -1).cos(), 1e-6)
    want = ref_rope(x.double(), pos, inv)
    assert close(rt.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=2)[0], want, 1e-6)
    assert close(rt.apply_rotary(x, pos, rope=rope), want, 1e-6)


def test_default_context_is_pytorchs_thread_count(monkeypatch):
    """context=None: the shared default Context of torch.get_num_threads()
    threads, read at each call; the same bits as one thread."""
    asked = []
    real = ropeattn._ropeattn.default_context
    monkeypatch.setattr(ropeattn._ropeattn, "default_context",
                        lambda n=0: asked.append(n) or real(n))
    q, k = randn(1, 9, 4, 16).requires_grad_(True), randn(1, 9, 2, 16)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        y = rt.attention(rt.apply_rotary(q, rope=ropeattn.RotaryEmbedding(16)), k, k)
        y.sum().backward()
    finally:
        torch.set_num_threads(threads)
    assert asked == [3, 3]
    with ropeattn.Context(1) as one:
        q1 = q.detach().requires_grad_(True)
        y1 = rt.attention(rt.apply_rotary(q1, rope=ropeattn.RotaryEmbedding(16), context=one),
                          k, k, context=one)
        y1.sum().backward()
    assert torch.equal(y, y1) and torch.equal(q.grad, q1.grad)


def test_shape_bhsd():
    """shape="bhsd" tensors ([B, H, S, D]): the same values and gradients
    as their [B, S, H, D] transposes."""
    q, k, v = randn(1, 4, 9, 16), randn(1, 2, 9, 16), randn(1, 2, 9, 16)
    dy = randn(1, 4, 9, 16)
    rope = ropeattn.RotaryEmbedding(16)

    def bhsd(a, b, c):
        return rt.attention(rt.apply_rotary(a, 3, rope=rope, shape="bhsd"), b, c, shape="bhsd")

    def bshd(a, b, c):
        t = [x.transpose(1, 2) for x in (a, b, c)]
        return rt.attention(rt.apply_rotary(t[0], 3, rope=rope), t[1], t[2]).transpose(1, 2)

    y, g = grads(bhsd, [q, k, v], dy)
    y2, g2 = grads(bshd, [q, k, v], dy)
    assert y.shape == q.shape and torch.equal(y, y2)
    assert all(torch.equal(a, b) for a, b in zip(g, g2))
    with pytest.raises(ropeattn.ArgumentError, match='pass shape="bhsd"'):  # sinks tell
        rt.attention(q, k, v, sinks=torch.zeros(4))


def test_drop_in_a_4d_mask_wins_over_sliding_window():
    """A 4-D mask passed by the caller is what transformers' eager and sdpa
    paths apply, sliding_window or not (a sliding layer of Mistral given
    the full causal mask sees every earlier key): the window applied
    instead gave other numbers with no error.  A mask that is the
    windowed causal one gives the window; boolean masks are read as
    sdpa's (True: seen)."""
    q, k, v = randn(2, 4, 8, 16), randn(2, 2, 8, 16), randn(2, 2, 8, 16)
    module = torch.nn.Module().eval()
    i, j = torch.arange(8)[:, None], torch.arange(8)[None, :]
    wide = ref_attention(*(t.transpose(1, 2).double() for t in (q, k, v)), scale=0.25)
    narrow = ref_attention(*(t.transpose(1, 2).double() for t in (q, k, v)), window=3,
                           scale=0.25)
    for seen, want in (((j <= i), wide), ((j <= i) & (j > i - 3), narrow)):
        for mask in (seen[None, None], torch.zeros(8, 8).masked_fill(~seen, -math.inf)[None, None],
                     torch.zeros(2, 1, 8, 8).masked_fill(~seen, torch.finfo(torch.float32).min)):
            out, _ = rt.eager_attention_forward(module, q, k, v, mask, scaling=0.25,
                                                sliding_window=3)
            assert close(out, want, 1e-5)



def test_drop_in_refuses_what_it_does_not_know():
    """Keyword arguments the function does not know, holding a value, are
    refused by name (MiniMax M3's block_indices and DeepSeek V3.2's
    indices select keys for sparse attention: swallowed, the attention was
    dense, with no error); None and transformers' bookkeeping pass."""
    q, k, v = randn(1, 4, 6, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    module = torch.nn.Module().eval()
    for name in ("indices", "block_indices", "sinks", "head_mask"):
        with pytest.raises(ropeattn.UnsupportedError, match=name):
            rt.eager_attention_forward(module, q, k, v, None, scaling=0.3,
                                       **{name: torch.zeros(1, 6, 2, dtype=torch.int32)})
    want, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.3)
    out, _ = rt.eager_attention_forward(module, q, k, v, None, scaling=0.3, indices=None,
                                        position_ids=torch.arange(6)[None], use_cache=True,
                                        output_attentions=False, output_router_logits=False,
                                        cu_seq_lens_q=None, is_causal=True)
    assert torch.equal(out, want)


def test_drop_in_rotary_tables_changed_or_mixed():
    """Tables changed in place after RotaryEmbeddingModule made them (cos *=
    2), or a sin that is not the module's beside its cos, are applied as
    transformers applies them: the library rotated by the marked positions,
    ignoring the change (0.5 relative off, no error)."""
    rope = ropeattn.RotaryEmbedding(8, theta=10000.0)
    module = rt.RotaryEmbeddingModule(rope)
    q, k = randn(2, 4, 5, 8), randn(2, 2, 5, 8)
    pos = torch.arange(3, 8)[None]

    def formula(cos, sin):
        cos, sin = cos.unsqueeze(1).double(), sin.unsqueeze(1).double()
        return [x.double() * cos + rt._rotate_half(x.double()) * sin for x in (q, k)]
    cos, sin = module(q, pos)
    cos.mul_(2.0)
    for tables in ((cos, sin), module(q, pos)[:1] + (sin,), (module(q, pos)[0], sin.clone())):
        got = rt.apply_rotary_pos_emb(q, k, *tables)
        for g, w in zip(got, formula(*tables)):
            assert close(g, w, 1e-6)


def test_second_derivative_through_attention_raises_in_a_gradient_penalty():
    """A gradient penalty (dq * dq).sum() + something else of q: the
    attention's gradients were taken as constants (once_differentiable joins
    them to nothing when the incoming gradient needs none), so the penalty's
    gradient was that of the other term alone, silently (all ones here)."""
    q = randn(1, 5, 2, 8).requires_grad_(True)
    k, v = randn(1, 5, 1, 8).requires_grad_(True), randn(1, 5, 1, 8)
    (dq, dk) = torch.autograd.grad(rt.attention(q, k, v).sum(), (q, k), create_graph=True)
    for target in (q, k):
        with pytest.raises(ropeattn.UnsupportedError, match="not differentiable"):
            torch.autograd.grad((dq * dq).sum() + (dk * dk).sum() + q.sum() + k.sum(), target,
                                retain_graph=True)
    # without create_graph nothing changes: the first derivative as before
    (dq1,) = torch.autograd.grad(rt.attention(q, k, v).sum(), q)
    assert torch.equal(dq1, dq.detach())


def test_rope_second_derivative_against_float64_autograd():
    """RoPE's backward is itself differentiable (the rotation back): a
    gradient penalty through it equals float64 autograd of the formula; it
    was taken as a constant (the penalty's gradient all ones)."""
    rope = ropeattn.RotaryEmbedding(8, theta=10000.0)
    x = randn(2, 5, 3, 8)
    pos = torch.arange(5).expand(2, 5)

    def penalty_gradient(fn, x):
        x = x.detach().requires_grad_(True)
        (dx,) = torch.autograd.grad((fn(x) ** 2).sum(), x, create_graph=True)
        (g,) = torch.autograd.grad((dx * dx).sum() + x.sum(), x)
        return g

    want = penalty_gradient(lambda t: ref_rope(t, pos, rope.inv_freq), x.double())
    got = penalty_gradient(lambda t: rt.apply_rotary(t, rope=rope), x)
    assert close(got, want, 1e-5)
    assert not torch.equal(got, torch.ones_like(got))
