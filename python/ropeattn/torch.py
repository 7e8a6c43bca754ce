"""ropeattn.torch: RoPE and attention on PyTorch CPU tensors, with autograd.

    import ropeattn.torch as rt
    y = rt.apply_rotary(x, positions, rope=rope)   # x [B, S, H, D]; differentiable
    out = rt.attention(q, k, v, window=..., ...)   # differentiable in q, k, v and sinks
    out = rt.attention_block(q, k, v, q_start, k_start, seq, ...)  # q, k at positions
    out, _ = rt.eager_attention_forward(module, query, key, value, mask)  # transformers'

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
made contiguous first.  The library computes in float32 and rounds once:
attention's output is in q's dtype (bfloat16 in, bfloat16 out), each
gradient in its input's dtype.  The backward passes are not differentiable again
(once_differentiable: a second derivative raises).  context=None runs on
PyTorch's thread count (torch.get_num_threads()): a default Context of
that many threads, shared by the process's calls (one finding it busy
runs on its calling thread alone); the same bits for any count.
"""
import numbers
import typing

import numpy as np
import torch

from . import _ropeattn
from ._ropeattn import ArgumentError, DtypeError, UnsupportedError
from .attention import (attention_backward, attention_block_backward,
                        attention_block_forward, attention_forward)
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
    """attention_forward (block None) or attention_block_forward (block
    (q_start, k_start, seq)) and their backwards; out in q's dtype."""

    @staticmethod
    def forward(ctx, q, k, v, sinks, options, block, context):
        kinds = (torch.float32, torch.float16, torch.bfloat16)
        qv, q_dtype = _view(q, "q", kinds)
        kv_, dtype = _view(k, "k", kinds)
        vv, _ = _view(v, "v", kinds)
        if v.dtype != k.dtype:
            raise DtypeError(f"v: expected k's dtype {k.dtype}, got {v.dtype}")
        dtype = dtype or q_dtype  # "bfloat16" when q or k, v hold bfloat16 bits
        sv = None if sinks is None else _view(sinks, "sinks")[0]
        if block is None:
            out, lse = attention_forward(qv, kv_, vv, sinks=sv, context=context, dtype=dtype,
                                         **options)
        else:
            out, lse = attention_block_forward(qv, kv_, vv, *block, sinks=sv, context=context,
                                               dtype=dtype, **options)
        out = torch.from_numpy(out)
        ctx.saved = (lse, options, block, context, dtype)
        if q.dtype == torch.float32:
            ctx.save_for_backward(q, k, v, sinks, out)  # out: in-place changes are caught
            return out
        ctx.save_for_backward(q, k, v, sinks)
        ctx.out = out  # float32, the backward's; the caller gets q's dtype
        return out.to(q.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        q, k, v, sinks, *out = ctx.saved_tensors
        out = (out[0] if out else ctx.out).numpy()
        lse, options, block, context, dtype = ctx.saved
        args = (_view(grad.float().contiguous(), "grad")[0], _view(q, "q", (q.dtype,))[0],
                _view(k, "k", (k.dtype,))[0], _view(v, "v", (v.dtype,))[0], out, lse)
        sv = None if sinks is None else _view(sinks, "sinks")[0]
        if block is None:
            dq, dk, dv, dsinks = attention_backward(*args, sinks=sv, context=context,
                                                    dtype=dtype, **options)
        else:
            dq, dk, dv, dsinks = attention_block_backward(*args, *block, sinks=sv,
                                                          context=context, dtype=dtype,
                                                          **options)
        return (torch.from_numpy(dq).to(q.dtype), torch.from_numpy(dk).to(k.dtype),
                torch.from_numpy(dv).to(v.dtype),
                None if dsinks is None else torch.from_numpy(dsinks), None, None, None)


def _options(causal, window, chunk, softcap, scale, padding_mask, cu_seqlens, dropout_p, seed,
             shape):
    """attention's keywords as the NumPy functions take them, the arrays
    copied (what the backward reads again)."""
    return dict(causal=causal, window=window, chunk=chunk, softcap=softcap, scale=scale,
                padding_mask=_copy(padding_mask), cu_seqlens=_copy(cu_seqlens),
                dropout_p=dropout_p, seed=seed, shape=shape)


def attention(q, k, v, causal=True, window=None, chunk=None, sinks=None, softcap=None,
              scale=None, padding_mask=None, cu_seqlens=None, dropout_p=0.0, seed=0,
              context=None, shape="bshd"):
    """ropeattn.attention on CPU tensors: q [B, S, H, D], k, v [B, S, Hkv,
    D] (shape="bhsd": [B, H, S, D] and [B, Hkv, S, D]), each float32,
    float16 or bfloat16 (k and v alike), sinks None or float32 [H];
    returns out [B, S, H, D] in q's order and dtype (computed in float32,
    rounded once: bfloat16 q gives bfloat16 out), differentiable in q, k,
    v and sinks (the library's backward, each gradient in its input's
    dtype; dropout's masks regenerated from seed).  padding_mask [B, S]
    and cu_seqlens [n + 1] may be tensors or arrays."""
    options = _options(causal, window, chunk, softcap, scale, padding_mask, cu_seqlens,
                       dropout_p, seed, shape)
    return _Attention.apply(q, k, v, sinks, options, None, _context(context))


def attention_block(q, k, v, q_start, k_start, seq, causal=True, window=None, chunk=None,
                    sinks=None, softcap=None, scale=None, padding_mask=None, cu_seqlens=None,
                    dropout_p=0.0, seed=0, context=None, shape="bshd"):
    """attention for queries and keys at given positions of a sequence of
    seq tokens (ropeattn.attention_block_forward, ra_attention_block_lse):
    q [B, Sq, H, D] at positions q_start.., k, v [B, Sk, Hkv, D] at
    k_start..; padding_mask [B, seq] and cu_seqlens indexed by position.
    Decoding (Sq = 1 after Sk - 1 cached tokens: q_start = Sk - 1,
    k_start = 0, seq = Sk), chunked prefill, and a sliding-window cache
    holding the last tokens (k_start > 0).  Output, dtypes and gradients as
    attention's."""
    options = _options(causal, window, chunk, softcap, scale, padding_mask, cu_seqlens,
                       dropout_p, seed, shape)
    return _Attention.apply(q, k, v, sinks, options, (q_start, k_start, seq),
                            _context(context))


# ---- drop-in replacements for transformers-style code -------------------


class RotaryEmbeddingModule(torch.nn.Module):
    """A drop-in for a transformers model's rotary_emb module: forward(x,
    position_ids) returns (cos, sin) [B, S, D] in x's dtype, as
    transformers' rotary embeddings do (the library's tables, attention
    factor included), and marks them so that apply_rotary_pos_emb below
    rotates q and k in the library by the positions they came from.
    position_ids [B, S], or [1, S] for every batch row (transformers'
    default: cos and sin [1, S, D]); with position_ids None, cache_position
    [S] stands for them, as transformers' models make position_ids from it.
      rope: a ropeattn.RotaryEmbedding (layout "half", as Hugging Face's
      checkpoints pair features)."""

    def __init__(self, rope):
        super().__init__()
        if not isinstance(rope, RotaryEmbedding):
            raise TypeError(f"rope: expected a ropeattn.RotaryEmbedding, got {type(rope)}")
        self.rope = rope

    @torch.no_grad()
    def forward(self, x, position_ids=None, cache_position=None):
        if position_ids is None:
            if cache_position is None:
                raise ArgumentError("RotaryEmbeddingModule: give position_ids or cache_position")
            position_ids = cache_position[None]
        positions = _copy(position_ids)  # the tables' positions, whatever position_ids becomes
        cos, sin = self.rope.cos_sin(positions)
        cos = torch.from_numpy(cos).to(x.dtype)
        sin = torch.from_numpy(sin).to(x.dtype)
        cos.ropeattn_positions = sin.ropeattn_positions = (self.rope, positions)
        return cos, sin


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, context=None):
    """transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    q [B, H, S, D] and k [B, Hkv, S, D] (unsqueeze_dim 2: [B, S, heads, D]).
    When cos and sin come from ropeattn.torch.RotaryEmbeddingModule, q and
    k are rotated by the library at those positions (strided views,
    autograd through RoPE's backward; positions [1, S] serve every batch
    row); other tables are applied as transformers does, q * cos +
    rotate_half(q) * sin, in PyTorch.  position_ids: ignored, as by
    transformers (the tables carry the positions)."""
    marked = getattr(cos, "ropeattn_positions", None)
    if marked is None:
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    rope, positions = marked
    if positions.ndim == 2 and positions.shape[0] == 1:
        positions = positions[0]  # [S]: the same in every batch row
    if unsqueeze_dim == 1:  # [B, heads, S, D], read as such
        return (apply_rotary(q, positions, rope=rope, context=context, shape="bhsd"),
                apply_rotary(k, positions, rope=rope, context=context, shape="bhsd"))
    return (apply_rotary(q, positions, rope=rope, context=context),
            apply_rotary(k, positions, rope=rope, context=context))


# ---- the attention interface's function ---------------------------------

class Block(typing.NamedTuple):
    """One library call of an attention-interface call, in the library's
    terms: its batch rows (a slice of B), the positions of its first query
    and key in a sequence of seq tokens, and the masks (ropeattn.attention's
    meanings; padding_mask [rows, seq], cu_seqlens ending at seq)."""
    rows: slice
    q_start: int
    k_start: int
    seq: int
    window: typing.Optional[int] = None
    chunk: typing.Optional[int] = None
    padding_mask: typing.Optional[np.ndarray] = None
    cu_seqlens: typing.Optional[np.ndarray] = None


def _is_causal(mask, sq, sk):
    """Whether a 4-D tensor mask [B, 1, S, S] is the plain causal one:
    boolean True where j <= i, or additive 0 there and below -1e30
    elsewhere."""
    if mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[-2:] != (sq, sk) or sq != sk:
        return False
    future = torch.ones(sq, sk, dtype=torch.bool).triu(1)
    if mask.dtype == torch.bool:
        return bool(mask[..., ~future].all() and not mask[..., future].any())
    return bool((mask[..., ~future] == 0).all() and (mask[..., future] < -1e30).all())


def _plain_blocks(attention_mask, sq, sk, b, window):
    """The call for attention_mask None or a tensor: the queries are the
    last sq of sk causal tokens, window the sliding_window argument (as
    transformers' flash path reads them); None with 1 < sq < sk is refused
    (transformers' sdpa reads it top-left aligned, its flash path
    bottom-right)."""
    if attention_mask is not None and not _is_causal(attention_mask, sq, sk):
        raise UnsupportedError(
            f"attention_mask: a {tuple(attention_mask.shape)} {attention_mask.dtype} mask "
            f"that is not the plain causal one (padding, or another pattern): the drop-in "
            f"takes None, the causal mask, or the masks of ropeattn.transformers' "
            f'attn_implementation="ropeattn"')
    if sq != sk and sq != 1:
        raise UnsupportedError(f"attention_mask: None for {sq} queries over {sk} keys: where "
                               f"the queries sit is ambiguous (use ropeattn.transformers)")
    return [Block(slice(0, b), sk - sq, 0, sk, window)]


_REFUSED_KWARGS = {
    "output_attentions": "output_attentions (the library returns no attention weights)",
    "position_bias": "position_bias (a learned additive bias, T5-style)",
    "cache": "a paged cache (continuous batching)",
    "encoder_hidden_states": "cross attention",
}


def _check_call(module, query, key, value, kwargs):
    """Refuses what the library would not compute as transformers does,
    naming it."""
    if kwargs.get("is_causal", getattr(module, "is_causal", True)) is False:
        raise UnsupportedError("is_causal=False: bidirectional attention is not in ropeattn")
    for name, feature in _REFUSED_KWARGS.items():
        if kwargs.get(name) not in (None, False):
            raise UnsupportedError(f"{name}: {feature} is not supported by ropeattn")
    if key.shape[-1] != query.shape[-1] or value.shape[-1] > query.shape[-1]:
        raise UnsupportedError(f"head_dim: query {query.shape[-1]}, key {key.shape[-1]}, "
                               f"value {value.shape[-1]}: ropeattn needs one for q and k, "
                               f"and v's no larger")


def _seed(p):
    """A dropout seed drawn from PyTorch's generator (torch.manual_seed
    repeats it); 0 without dropout."""
    return int(torch.randint(0, 2 ** 62, ())) if p > 0 else 0


def eager_attention_forward(module, query, key, value, attention_mask, scaling=None,
                            dropout=0.0, sliding_window=None, softcap=None, s_aux=None,
                            context=None, **kwargs):
    """transformers' attention-interface function (eager_attention_forward's
    signature), and ropeattn.transformers' backend: query [B, H, Sq, D],
    key and value [B, Hkv, Sk, D] (not repeated; value's head_dim may be
    smaller: zero-padded, as transformers' flash path does) → (attn_output
    [B, Sq, H, Dv] in query's dtype, None), causal attention by the library
    with scaling, dropout (when module.training; masks from the library's
    generator, seeded from PyTorch's), sliding_window, softcap (Gemma 2)
    and s_aux (gpt-oss's sinks).  attention_mask: None or the plain causal
    mask (the queries the last Sq of the Sk tokens), or a mask of
    ropeattn.transformers' (padding, caches, sliding windows, chunks, packed
    sequences, each checked against transformers' own mask).  Anything else
    raises UnsupportedError naming it: another mask, is_causal False,
    output_attentions, position_bias, cross attention.  context: a
    ropeattn.Context, or None (torch.get_num_threads() threads)."""
    _check_call(module, query, key, value, kwargs)
    b, sq, sk = query.shape[0], query.shape[2], key.shape[2]
    if hasattr(attention_mask, "ropeattn_blocks"):
        blocks = attention_mask.ropeattn_blocks(query, key, sliding_window, module, kwargs)
    else:
        blocks = _plain_blocks(attention_mask, sq, sk, b, sliding_window)
    dv = value.shape[-1]
    if dv < query.shape[-1]:
        value = torch.nn.functional.pad(value, (0, query.shape[-1] - dv))
    p = dropout if getattr(module, "training", False) else 0.0
    sinks = None if s_aux is None else s_aux.float()  # exact: a model's dtype widened
    outs = [_attend_block(query, key, value, blk, scaling, p, softcap, sinks, context)
            for blk in blocks]
    out = outs[0] if len(outs) == 1 else torch.cat(outs)
    return out[..., :dv], None


def _attend_block(query, key, value, blk, scale, p, softcap, sinks, context):
    """One Block's rows through the library: [rows, Sq, H, D] out."""
    q, k, v = (t[blk.rows].transpose(1, 2) for t in (query, key, value))
    options = dict(window=blk.window, chunk=blk.chunk, sinks=sinks, softcap=softcap,
                   scale=scale, padding_mask=blk.padding_mask, cu_seqlens=blk.cu_seqlens,
                   dropout_p=p, seed=_seed(p), context=context)
    whole = blk.q_start == blk.k_start == 0 and q.shape[1] == k.shape[1] == blk.seq
    if whole:
        return attention(q, k, v, **options)
    return attention_block(q, k, v, blk.q_start, blk.k_start, blk.seq, **options)


__all__ = ["Block", "RotaryEmbeddingModule", "apply_rotary", "apply_rotary_pos_emb",
           "attention", "attention_block", "eager_attention_forward"]
