"""ropeattn.torch: RoPE and attention on PyTorch CPU tensors, with autograd.

    import ropeattn.torch as rt
    y = rt.apply_rotary(x, positions, rope=rope)   # x [B, S, H, D]; differentiable
    out = rt.attention(q, k, v, window=..., ...)   # differentiable in q, k, v and sinks

Inputs go to the library without copies: a CPU tensor shares its memory
with the NumPy view the library reads (strided views included; bfloat16
through its bits), and each result is a tensor over the array the library
wrote.  The backward passes call the library's: RoPE's is the rotation by
-angle (ra_rope_apply, RA_INVERSE), attention's is ra_attention_backward
(recomputing the probabilities from the forward's log-sum-exp and reading
its output: changing that output in place before backward() is an error,
as for PyTorch's own functions).  positions, padding_mask and cu_seqlens
are copied at the forward (small integer arrays), so the backward reads
the values the forward did, whatever the caller does to them meanwhile.
A non-contiguous incoming gradient is
made contiguous first.  The library computes in float32: inputs are
float32 (k and v may also be float16 or bfloat16), gradients float32, cast
to each input's dtype.  The backward passes are not differentiable again
(once_differentiable: a second derivative raises).  context=None runs on
PyTorch's thread count (torch.get_num_threads()): a default Context of
that many threads, shared by the process's calls (one finding it busy
runs on its calling thread alone); the same bits for any count.
"""
import numbers

import numpy as np
import torch

from . import _ropeattn
from ._ropeattn import ArgumentError, DtypeError, UnsupportedError
from .attention import attention_backward, attention_forward
from .rope import RotaryEmbedding
from .rope import apply_rotary as _apply_rotary

_DTYPES = {torch.float32: None, torch.float16: None, torch.bfloat16: "bfloat16"}


def _view(t, name, allowed=(torch.float32,)):
    """(NumPy view of t's memory, dtype keyword): no copy.  t must be a CPU
    tensor of an allowed dtype."""
    if not isinstance(t, torch.Tensor):
        raise DtypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ArgumentError(f"{name}: expected a CPU tensor, got one on {t.device}")
    if t.dtype not in allowed:
        raise DtypeError(f"{name}: expected {' or '.join(str(d) for d in allowed)}, "
                         f"got {t.dtype}")
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), "bfloat16"
    return t.numpy(), None


def _copy(a):
    """A NumPy copy of a tensor, array or list (positions, masks): what a
    backward reads again, kept apart from the caller's, which may change in
    place meanwhile.  None and ints as they are."""
    if a is None or isinstance(a, numbers.Integral):
        return a
    return np.array(a.detach().cpu() if isinstance(a, torch.Tensor) else a)


def _context(context):
    """context, or for None the shared default Context of PyTorch's thread
    count (torch.get_num_threads(), read at each call)."""
    return _ropeattn.default_context(torch.get_num_threads()) if context is None else context


def _tensor(a, dtype):
    """A tensor over the NumPy array a (no copy), as dtype (bfloat16: a holds its bits)."""
    if dtype == torch.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class _Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, positions, rope, inverse, context, shape):
        xv, dtype = _view(x, "x", tuple(_DTYPES))
        out = _apply_rotary(xv, positions, rope=rope, inverse=inverse, context=context,
                            dtype=dtype, shape=shape)
        ctx.args = (positions, rope, inverse, context, shape)
        return _tensor(out, x.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        positions, rope, inverse, context, shape = ctx.args
        gv, dtype = _view(grad.contiguous(), "grad", tuple(_DTYPES))
        dx = _apply_rotary(gv, positions, rope=rope, inverse=not inverse, context=context,
                           dtype=dtype, shape=shape)
        return _tensor(dx, grad.dtype), None, None, None, None, None


def apply_rotary(x, positions=None, rope=None, inverse=False, context=None, shape="bshd",
                 **rope_kwargs):
    """ropeattn.apply_rotary on a CPU tensor x [B, S, heads, D] (or [B,
    heads, S, D] with shape="bhsd"; float32, float16 or bfloat16),
    differentiable in x: its backward rotates the gradient by -angle.
    Returns a new tensor in x's order; x is read in place."""
    if rope is None:
        rope = RotaryEmbedding(x.shape[-1], **rope_kwargs)
    elif rope_kwargs:
        raise TypeError("apply_rotary: give rope= or rope keywords, not both")
    return _Rotary.apply(x, _copy(positions), rope, bool(inverse), _context(context), shape)


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, sinks, options, context):
        kinds = (torch.float32, torch.float16, torch.bfloat16)
        qv, q_dtype = _view(q, "q", kinds)
        kv_, dtype = _view(k, "k", kinds)
        vv, _ = _view(v, "v", kinds)
        if v.dtype != k.dtype:
            raise DtypeError(f"v: expected k's dtype {k.dtype}, got {v.dtype}")
        dtype = dtype or q_dtype  # "bfloat16" when q or k, v hold bfloat16 bits
        sv = None if sinks is None else _view(sinks, "sinks")[0]
        out, lse = attention_forward(qv, kv_, vv, sinks=sv, context=context, dtype=dtype,
                                     **options)
        out = torch.from_numpy(out)
        ctx.save_for_backward(q, k, v, sinks, out)  # out: in-place changes are caught
        ctx.saved = (lse, options, context, dtype)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        q, k, v, sinks, out = ctx.saved_tensors
        out = out.numpy()
        lse, options, context, dtype = ctx.saved
        kv_, _ = _view(k, "k", (k.dtype,))
        sv = None if sinks is None else _view(sinks, "sinks")[0]
        dq, dk, dv, dsinks = attention_backward(
            _view(grad.contiguous(), "grad")[0], _view(q, "q", (q.dtype,))[0], kv_,
            _view(v, "v", (v.dtype,))[0], out, lse, sinks=sv, context=context, dtype=dtype,
            **options)
        to = k.dtype
        return (torch.from_numpy(dq).to(q.dtype), torch.from_numpy(dk).to(to),
                torch.from_numpy(dv).to(to),
                None if dsinks is None else torch.from_numpy(dsinks), None, None)


def attention(q, k, v, causal=True, window=None, chunk=None, sinks=None, softcap=None,
              scale=None, padding_mask=None, cu_seqlens=None, dropout_p=0.0, seed=0,
              context=None, shape="bshd"):
    """ropeattn.attention on CPU tensors: q [B, S, H, D], k, v [B, S, Hkv,
    D] (shape="bhsd": [B, H, S, D] and [B, Hkv, S, D]), each float32,
    float16 or bfloat16 (k and v alike), sinks None or float32 [H];
    returns out float32 in q's order, differentiable in q, k, v and sinks
    (the library's backward; dropout's masks regenerated from seed).
    padding_mask [B, S] and cu_seqlens [n + 1] may be tensors or arrays."""
    options = dict(causal=causal, window=window, chunk=chunk, softcap=softcap, scale=scale,
                   padding_mask=_copy(padding_mask), cu_seqlens=_copy(cu_seqlens),
                   dropout_p=dropout_p, seed=seed, shape=shape)
    return _Attention.apply(q, k, v, sinks, options, _context(context))


# ---- drop-in replacements for transformers-style code -------------------


class RotaryEmbeddingModule(torch.nn.Module):
    """A drop-in for a transformers model's rotary_emb module: forward(x,
    position_ids [B, S]) returns (cos, sin) [B, S, D] in x's dtype, as
    transformers' rotary embeddings do (the library's tables, attention
    factor included), and marks them so that apply_rotary_pos_emb below
    rotates q and k in the library by the positions they came from.
      rope: a ropeattn.RotaryEmbedding (layout "half", as Hugging Face's
      checkpoints pair features)."""

    def __init__(self, rope):
        super().__init__()
        if not isinstance(rope, RotaryEmbedding):
            raise TypeError(f"rope: expected a ropeattn.RotaryEmbedding, got {type(rope)}")
        self.rope = rope

    @torch.no_grad()
    def forward(self, x, position_ids):
        positions = _copy(position_ids)  # the tables' positions, whatever position_ids becomes
        cos, sin = self.rope.cos_sin(positions)
        cos = torch.from_numpy(cos).to(x.dtype)
        sin = torch.from_numpy(sin).to(x.dtype)
        cos.ropeattn_positions = sin.ropeattn_positions = (self.rope, positions)
        return cos, sin


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    """transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    q [B, H, S, D] and k [B, Hkv, S, D] (unsqueeze_dim 2: [B, S, heads, D]).
    When cos and sin come from ropeattn.torch.RotaryEmbeddingModule, q and k are
    rotated by the library at those positions (strided views, autograd
    through RoPE's backward); other tables are applied as transformers
    does, q * cos + rotate_half(q) * sin, in PyTorch."""
    marked = getattr(cos, "ropeattn_positions", None)
    if marked is None:
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    rope, positions = marked
    if unsqueeze_dim == 1:  # [B, heads, S, D] as [B, S, heads, D] views, and back
        return (apply_rotary(q.transpose(1, 2), positions, rope=rope).transpose(1, 2),
                apply_rotary(k.transpose(1, 2), positions, rope=rope).transpose(1, 2))
    return apply_rotary(q, positions, rope=rope), apply_rotary(k, positions, rope=rope)


def _causal(mask, s):
    """Whether a transformers additive mask [B, 1, S, S] is the plain causal
    one (0 where j <= i, far below any logit where j > i)."""
    if mask.dim() != 4 or mask.shape[-2:] != (s, s) or mask.shape[1] != 1:
        return False
    future = torch.ones(s, s, dtype=torch.bool).triu(1)
    return bool((mask[..., ~future] == 0).all() and (mask[..., future] < -1e30).all())


def eager_attention_forward(module, query, key, value, attention_mask, scaling=None,
                            dropout=0.0, sliding_window=None, softcap=None, s_aux=None,
                            **kwargs):
    """transformers' attention-interface function (eager_attention_forward's
    signature): query [B, H, S, D], key and value [B, Hkv, S, D] (not
    repeated) → (attn_output [B, S, H, D], None), causal attention by the
    library with the kwargs the models pass: scaling, dropout (when
    module.training), sliding_window, softcap (Gemma 2), s_aux (gpt-oss's
    sinks).  attention_mask must be None or the plain causal mask; others
    (padding) raise UnsupportedError."""
    s = query.shape[2]
    if attention_mask is not None and not _causal(attention_mask, s):
        raise UnsupportedError("eager_attention_forward: attention_mask is not the plain "
                               "causal mask (padding?): not supported by this drop-in")
    training = getattr(module, "training", False)
    out = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                    window=sliding_window, sinks=s_aux, softcap=softcap, scale=scaling,
                    dropout_p=dropout if training else 0.0)
    return out, None


__all__ = ["RotaryEmbeddingModule", "apply_rotary", "apply_rotary_pos_emb", "attention",
           "eager_attention_forward"]
