"""ropeattn.torch: RoPE and attention on PyTorch CPU tensors, with autograd.

    import ropeattn.torch as rt
    y = rt.apply_rotary(x, positions, rope=rope)   # x [B, S, H, D]; differentiable
    out = rt.attention(q, k, v, window=..., ...)   # differentiable in q, k, v and sinks
    out = rt.attention_block(q, k, v, q_start, k_start, seq, ...)  # q, k at positions
    out, _ = rt.eager_attention_forward(module, query, key, value, mask)  # transformers'
    out = rt.scaled_dot_product_attention(query, key, value, ...)  # PyTorch's SDPA's

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
gradient in its input's dtype.  RoPE's backward is differentiable again
(exactly: RoPE is linear); attention's is not: with create_graph=True,
differentiating its gradients (a double backward, a gradient penalty)
raises UnsupportedError, never a silent zero.  context=None runs on
PyTorch's thread count (torch.get_num_threads()): a default Context of
that many threads, shared by the process's calls (one finding it busy
runs on its calling thread alone); the same bits for any count.
"""
import numbers
import typing

import numpy as np
import torch

from . import _ropeattn
from ._arrays import not_masked
from ._ropeattn import ArgumentError, DtypeError, UnsupportedError
from .attention import (attention_backward, attention_block_backward,
                        attention_block_forward, attention_forward)
from .rope import RotaryEmbedding
from .rope import apply_rotary as _apply_rotary

_DTYPES = {torch.float32: None, torch.float16: None, torch.bfloat16: "bfloat16"}


def _view(t, name, allowed=(torch.float32,)):
    """(NumPy view of t's memory, dtype keyword): no copy, but of a
    negated view (torch._neg_view's: its memory holds -t), whose values
    are resolved first.  t must be a dense CPU tensor of an allowed dtype
    (an input: the library never writes it)."""
    if not isinstance(t, torch.Tensor):
        raise DtypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ArgumentError(f"{name}: expected a CPU tensor, got one on {t.device}")
    if t.layout != torch.strided:  # numpy() raised a TypeError naming no argument
        raise ArgumentError(f"{name}: expected a dense tensor, got layout {t.layout}: "
                            f"pass {name}.to_dense()")
    if t.dtype not in allowed:
        raise DtypeError(f"{name}: expected {' or '.join(str(d) for d in allowed)}, "
                         f"got {t.dtype}")
    t = t.detach().resolve_neg()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), "bfloat16"
    return t.numpy(), None


def _copy(a, name):
    """A NumPy copy of a tensor, array or list (positions, masks): what a
    backward reads again, kept apart from the caller's, which may change in
    place meanwhile.  None and ints as they are; a numpy.ma array refused
    naming it (np.array dropped its mask)."""
    if a is None or isinstance(a, numbers.Integral):
        return a
    if isinstance(a, torch.Tensor):  # np.array(a) warned under NumPy 2 (__array__'s copy=)
        return a.detach().cpu().resolve_neg().numpy().copy()
    return np.array(not_masked(a, name))


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
    def backward(ctx, grad):
        # the rotation by -angle, itself differentiable (the rotation back):
        # double backward and create_graph are exact, RoPE being linear in x
        positions, rope, inverse, context, shape = ctx.args
        dx = _Rotary.apply(grad.contiguous(), positions, rope, not inverse, context, shape)
        return dx, None, None, None, None, None


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
    return _Rotary.apply(x, _copy(positions, "positions"), rope, inverse, _context(context), shape)


_MASK_DTYPES = (torch.bool, torch.float32, torch.float16, torch.bfloat16)


def _mask(attn_mask):
    """attn_mask as attention() takes it: a tensor (bool, or additive
    float32, float16, bfloat16) that is neither on another device nor
    requiring a gradient (the library gives none: returning None for it
    would be silently wrong), or an array-like (copied, as the backward
    reads it again)."""
    if attn_mask is None or not isinstance(attn_mask, torch.Tensor):
        return _copy(attn_mask, "attn_mask")
    if attn_mask.requires_grad:
        raise ArgumentError("attn_mask: requires_grad=True, but ropeattn's backward gives no "
                            "gradient for the mask (a constant); pass attn_mask.detach(), or "
                            "use PyTorch's scaled_dot_product_attention for a learned bias")
    if attn_mask.dtype not in _MASK_DTYPES:
        hint = " (0/1 integers: attn_mask.bool(), True = may attend)" \
            if not attn_mask.is_floating_point() else ""
        raise DtypeError(f"attn_mask: expected torch.bool (True: may attend) or additive "
                         f"float32, float16 or bfloat16, got {attn_mask.dtype}{hint}")
    return attn_mask


class _Attention(torch.autograd.Function):
    """attention_forward (block None) or attention_block_forward (block
    (q_start, k_start, seq)) and their backwards; out in q's dtype.  mask:
    None, an array (a copy) or a tensor that gets no gradient, read in
    place (saved: changing it in place before backward() is an error)."""

    @staticmethod
    def forward(ctx, q, k, v, sinks, mask, options, block, context):
        kinds = (torch.float32, torch.float16, torch.bfloat16)
        qv, q_dtype = _view(q, "q", kinds)
        kv_, dtype = _view(k, "k", kinds)
        vv, _ = _view(v, "v", kinds)
        if v.dtype != k.dtype:
            raise DtypeError(f"v: expected k's dtype {k.dtype}, got {v.dtype}")
        mv, mask_dtype = _view(mask, "attn_mask", _MASK_DTYPES) \
            if isinstance(mask, torch.Tensor) else (mask, None)
        # "bfloat16" when q, k and v or the mask hold bfloat16 bits
        dtype = dtype or q_dtype or mask_dtype
        sv = None if sinks is None else _view(sinks, "sinks")[0]
        if block is None:
            out, lse = attention_forward(qv, kv_, vv, sinks=sv, context=context, dtype=dtype,
                                         attn_mask=mv, **options)
        else:
            out, lse = attention_block_forward(qv, kv_, vv, *block, sinks=sv, context=context,
                                               dtype=dtype, **options)
        out = torch.from_numpy(out)
        tensor_mask = mask if isinstance(mask, torch.Tensor) else None
        ctx.saved = (lse, options, block, context, dtype, None if tensor_mask is not None
                     else mask)
        if q.dtype == torch.float32:
            # out: in-place changes are caught
            ctx.save_for_backward(q, k, v, sinks, tensor_mask, out)
            return out
        ctx.save_for_backward(q, k, v, sinks, tensor_mask)
        ctx.out = out  # float32, the backward's; the caller gets q's dtype
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, grad):
        with torch.no_grad():
            grads = _Attention._gradients(ctx, grad)
        q, k, v, sinks = ctx.saved_tensors[:4]
        if torch.is_grad_enabled():  # create_graph: differentiating these must raise
            grads = _NotTwice.apply(len(grads), *grads, grad, q, k, v, sinks)
        return (*grads, None, None, None, None)

    @staticmethod
    def _gradients(ctx, grad):
        """(dq, dk, dv, dsinks or None) from the library's backward."""
        q, k, v, sinks, mask, *out = ctx.saved_tensors
        out = (out[0] if out else ctx.out).numpy()
        lse, options, block, context, dtype, array_mask = ctx.saved
        mv = array_mask if mask is None else _view(mask, "attn_mask", _MASK_DTYPES)[0]
        args = (_view(grad.float().contiguous(), "grad")[0], _view(q, "q", (q.dtype,))[0],
                _view(k, "k", (k.dtype,))[0], _view(v, "v", (v.dtype,))[0], out, lse)
        sv = None if sinks is None else _view(sinks, "sinks")[0]
        if block is None:
            dq, dk, dv, dsinks = attention_backward(*args, sinks=sv, context=context,
                                                    dtype=dtype, attn_mask=mv, **options)
        else:
            dq, dk, dv, dsinks = attention_block_backward(*args, *block, sinks=sv,
                                                          context=context, dtype=dtype,
                                                          **options)
        return (torch.from_numpy(dq).to(q.dtype), torch.from_numpy(dk).to(k.dtype),
                torch.from_numpy(dv).to(v.dtype),
                None if dsinks is None else torch.from_numpy(dsinks))


class _NotTwice(torch.autograd.Function):
    """Attention's gradients as they are, joined in the graph to what they
    depend on (the forward's inputs and the incoming gradient): with
    create_graph, differentiating them raises UnsupportedError.
    once_differentiable joined them to nothing when the incoming gradient
    needed none (autograd.grad of a loss's sum), so a gradient penalty
    took them as constants, a silently wrong second derivative."""

    @staticmethod
    def forward(ctx, n, *tensors):
        return tuple(None if t is None else t.detach() for t in tensors[:n])

    @staticmethod
    def backward(ctx, *grads):
        raise UnsupportedError("ropeattn.torch.attention's backward is not differentiable: "
                               "a derivative of its gradients (create_graph=True, double "
                               "backward, a gradient penalty) is refused; use PyTorch's "
                               "scaled_dot_product_attention for those")


def _options(causal, window, chunk, softcap, scale, padding_mask, cu_seqlens, dropout_p, seed,
             shape):
    """attention's keywords as the NumPy functions take them, the arrays
    copied (what the backward reads again)."""
    return dict(causal=causal, window=window, chunk=chunk, softcap=softcap, scale=scale,
                padding_mask=_copy(padding_mask, "padding_mask"),
                cu_seqlens=_copy(cu_seqlens, "cu_seqlens"),
                dropout_p=dropout_p, seed=seed, shape=shape)


def attention(q, k, v, causal=True, window=None, chunk=None, sinks=None, softcap=None,
              scale=None, padding_mask=None, cu_seqlens=None, dropout_p=0.0, seed=0,
              context=None, shape="bshd", attn_mask=None):
    """ropeattn.attention on CPU tensors: q [B, Sq, H, D], k, v [B, Sk,
    Hkv, D] (shape="bhsd": [B, H, Sq, D] and [B, Hkv, Sk, D]), each
    float32, float16 or bfloat16 (k and v alike), sinks None or float32
    [H]; returns out [B, Sq, H, D] in q's order and dtype (computed in
    float32, rounded once: bfloat16 q gives bfloat16 out), differentiable
    in q, k, v and sinks (the library's backward, each gradient in its
    input's dtype; dropout's masks regenerated from seed).  padding_mask
    [B, S] and cu_seqlens [n + 1] may be tensors or arrays.
      causal: as ropeattn.attention's: with Sq != Sk the diagonal is
         aligned bottom-right (SDPA's is_causal=True is top-left there);
         causal=False for encoders.
      attn_mask: SDPA's attn_mask, broadcastable to [B, H, Sq, Sk]
         (whatever shape= says): a torch.bool tensor (True: may attend) or
         an additive float32, float16 or bfloat16 one, read in place
         (expanded views through their zero strides), any dtype of q's;
         a tensor changed in place before backward() is an error, as for
         PyTorch's own functions.  The mask gets no gradient: one with
         requires_grad=True is refused (ArgumentError).  A query row that
         sees no key gives zeros and zero gradients (SDPA 2.5+'s)."""
    options = _options(causal, window, chunk, softcap, scale, padding_mask, cu_seqlens,
                       dropout_p, seed, shape)
    return _Attention.apply(q, k, v, sinks, _mask(attn_mask), options, None, _context(context))


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
    return _Attention.apply(q, k, v, sinks, None, options, (q_start, k_start, seq),
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
    [S] (by keyword) stands for them, as transformers' models make
    position_ids from it.  A layer_type (Gemma 3's rotary_emb(x,
    position_ids, layer_type): a rope per layer type) is refused
    (UnsupportedError): the module holds one rope.
      rope: a ropeattn.RotaryEmbedding of layout "half", as Hugging Face's
      checkpoints pair features and apply_rotary_pos_emb's rotate_half
      reads the tables (ArgumentError for "interleaved": the library would
      rotate other pairs than transformers' formula does with the same
      tables)."""

    def __init__(self, rope):
        super().__init__()
        if not isinstance(rope, RotaryEmbedding):
            raise TypeError(f"rope: expected a ropeattn.RotaryEmbedding, got {type(rope)}")
        if rope.layout != "half":
            raise ArgumentError(f'rope: layout {rope.layout!r}, but transformers\' '
                                f'apply_rotary_pos_emb pairs features (i, i + D/2) '
                                f'(rotate_half): make the rope with layout="half"')
        self.rope = rope

    @torch.no_grad()
    def forward(self, x, position_ids=None, layer_type=None, *, cache_position=None):
        if layer_type is not None:
            raise UnsupportedError(f"layer_type={layer_type!r}: the model has a rope per "
                                   f"layer type, RotaryEmbeddingModule one rope")
        if position_ids is None:
            if cache_position is None:
                raise ArgumentError("RotaryEmbeddingModule: give position_ids or cache_position")
            position_ids = cache_position[None]
        positions = _copy(position_ids, "position_ids")  # the tables' positions, whatever position_ids becomes
        cos, sin = self.rope.cos_sin(positions)
        cos = torch.from_numpy(cos).to(x.dtype)
        sin = torch.from_numpy(sin).to(x.dtype)
        # the versions: a table changed in place afterwards is no longer the rope's;
        # the ids: cos and sin swapped, or one given twice, are not the pair
        cos.ropeattn_positions = sin.ropeattn_positions = (self.rope, positions, cos._version,
                                                           sin._version, id(cos), id(sin))
        return cos, sin


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def _marked(cos, sin):
    """(rope, positions) of tables made together by RotaryEmbeddingModule,
    in their places and unchanged since; None for any other tables."""
    marked = getattr(cos, "ropeattn_positions", None)
    if marked is None or getattr(sin, "ropeattn_positions", None) is not marked or \
            (cos._version, sin._version, id(cos), id(sin)) != marked[2:]:
        return None
    return marked[:2]


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, context=None):
    """transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    q [B, H, S, D] and k [B, Hkv, S, D] (unsqueeze_dim 2: [B, S, heads, D]).
    When cos and sin come from ropeattn.torch.RotaryEmbeddingModule, q and
    k are rotated by the library at those positions (strided views,
    autograd through RoPE's backward; positions [1, S] serve every batch
    row); other tables are applied as transformers does, q * cos +
    rotate_half(q) * sin, in PyTorch (tables changed in place, or a cos and
    sin not made together, included; and an unsqueeze_dim but 1, 2, -3, -2,
    which broadcasts the tables otherwise).  position_ids: ignored, as by
    transformers (the tables carry the positions).  A q or k of another
    dtype than the tables' takes transformers' formula too: it computes in
    the promoted dtype with the tables as rounded to theirs."""
    marked = _marked(cos, sin)
    # cos [B, S, D] unsqueezed at 1 (or -3): q [B, heads, S, D]; at 2 (-2): [B, S, heads, D]
    shape = {1: "bhsd", -3: "bhsd", 2: "bshd", -2: "bshd"}.get(unsqueeze_dim)
    if marked is None or shape is None or not q.dtype == k.dtype == cos.dtype:
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    rope, positions = marked
    if positions.ndim == 2 and positions.shape[0] == 1:
        positions = positions[0]  # [S]: the same in every batch row
    return (apply_rotary(q, positions, rope=rope, context=context, shape=shape),
            apply_rotary(k, positions, rope=rope, context=context, shape=shape))


# ---- the attention interface's function ---------------------------------

class Block(typing.NamedTuple):
    """One library call of an attention-interface call, in the library's
    terms: its batch rows (a slice of B), the positions of its first query
    and key in a sequence of seq tokens, and the masks (ropeattn.attention's
    meanings; padding_mask [rows, seq], cu_seqlens ending at seq).  A mask
    the library's structured masks do not form goes whole: causal False
    and attn_mask transformers' own [B or 1, 1 or H, Sq, Sk] (boolean or
    additive), the queries and keys those of the call."""
    rows: slice
    q_start: int
    k_start: int
    seq: int
    window: typing.Optional[int] = None
    chunk: typing.Optional[int] = None
    padding_mask: typing.Optional[np.ndarray] = None
    cu_seqlens: typing.Optional[np.ndarray] = None
    causal: bool = True
    attn_mask: typing.Optional[torch.Tensor] = None


class Mask:
    """The mask of one create_*_mask call under "ropeattn", for every layer
    that receives it: the positions of the call's first query (q_offset) and
    key (kv_offset, past a sliding-window cache's evicted tokens), kv_length,
    the 2-D padding mask (bool [B, >= kv_offset + kv_length] or None), the
    local size transformers gave (a sliding window or chunk), and
    transformers' boolean mask [B, 1, Sq, Sk] (True: seen; or a 4-D mask
    passed as it is, _tensor_mask), and given, the mask to hand the library
    whole (attn_mask) when its structured masks form no equal one (None:
    allowed).  Layers of one kind share a Mask: the Blocks found for a
    layer's arguments are kept while allowed is unchanged (its version: a
    mask changed in place is looked at afresh)."""

    def __init__(self, q_offset, kv_offset, kv_length, padding, local_size, allowed,
                 given=None):
        self.q_offset, self.kv_offset, self.kv_length = q_offset, kv_offset, kv_length
        self.padding, self.local_size, self.allowed = padding, local_size, allowed
        self.given = allowed if given is None else given
        self._found, self._version = {}, allowed._version

    def ropeattn_blocks(self, query, key, sliding_window, module, kwargs):
        """The Blocks (ropeattn.torch.Block) of one layer's call whose masks
        equal transformers' on every real query row (the library's causal,
        window, chunk, padding and document masks), or else one Block
        with transformers' whole mask as attn_mask (bidirectional image
        tokens, a bias, a mask per head)."""
        b, sq, sk = query.shape[0], query.shape[2], key.shape[2]
        if (sq, sk) != tuple(self.allowed.shape[-2:]) or b != self.allowed.shape[0]:
            raise UnsupportedError(f"attention_mask: made for {tuple(self.allowed.shape)} "
                                   f"but the layer has {b} rows, {sq} queries, {sk} keys")
        position_ids = kwargs.get("position_ids")
        hints = (sliding_window, position_ids is not None)
        if self.allowed._version != self._version:  # changed in place since
            self._found, self._version = {}, self.allowed._version
        if hints not in self._found:
            self._found[hints] = self._find(b, sq, sk, sliding_window, position_ids)
        return self._found[hints]

    def _find(self, b, sq, sk, sliding_window, position_ids):
        grid = _Grid(self, b, sq, sk)
        # sliding_window 0: none (the mask holds what transformers computes)
        locals_ = [(sliding_window or None, None), (self.local_size, None),
                   (None, self.local_size), (None, None)]
        documents = [None] + ([] if position_ids is None else
                              [d for d in [_documents(position_ids, b, sq, sk, grid.seq)]
                               if d is not None])
        for window, chunk in dict.fromkeys(locals_):
            for docs in documents:
                if grid.matches(self.allowed[:, 0], window, chunk, docs):
                    return grid.blocks(window, chunk, docs)
        return [Block(slice(0, b), 0, 0, sk, causal=False, attn_mask=self.given)]


class _Grid:
    """A call's query and key positions in a sequence of seq tokens, its
    padding as the library takes it, and the library's masks over them."""

    def __init__(self, mask, b, sq, sk):
        self.q_pos = mask.q_offset + torch.arange(sq)
        self.k_pos = mask.kv_offset + torch.arange(sk)
        need = max(mask.q_offset + sq, mask.kv_offset + sk)
        if mask.padding is None:
            self.real = torch.ones(b, need, dtype=torch.bool)
        else:
            if mask.padding.shape[-1] < mask.q_offset + sq:
                raise UnsupportedError(f"attention_mask: {mask.padding.shape[-1]} tokens, "
                                       f"fewer than the queries reach ({mask.q_offset + sq})")
            # keys past the 2-D mask are padding, as transformers pads it (a static cache)
            self.real = torch.nn.functional.pad(
                mask.padding.bool(), (0, max(0, need - mask.padding.shape[-1])))
        self.b, self.seq = b, self.real.shape[-1]

    def seen(self, window, chunk, docs):
        """The library's mask [B, Sq, Sk] (True: seen) for these options;
        docs: per-row document ids [B, seq] or None."""
        q, k = self.q_pos[:, None], self.k_pos[None, :]
        seen = (k <= q)[None] & self.real[:, self.k_pos][:, None, :]
        if window:
            seen = seen & (k > q - window)[None]
        if chunk:
            lead = (self.real.cumsum(-1) == 0).sum(-1)[:, None, None]
            seen = seen & (torch.div(k - lead, chunk, rounding_mode="floor") ==
                           torch.div(q - lead, chunk, rounding_mode="floor"))
        if docs is not None:
            seen = seen & (docs[:, self.q_pos][:, :, None] == docs[:, self.k_pos][:, None, :])
        return seen

    def matches(self, allowed, window, chunk, docs):
        """Whether the library's mask equals allowed [B, Sq, Sk] on every
        real query row (padding rows give 0)."""
        differ = self.seen(window, chunk, docs) ^ allowed
        return not bool((differ & self.real[:, self.q_pos][:, :, None]).any())

    def blocks(self, window, chunk, docs):
        """The Blocks for these options: one, or one per batch row when the
        rows' documents differ."""
        padding = None if bool(self.real.all()) else self.real.to(torch.uint8).numpy()
        q_start, k_start = int(self.q_pos[0]), int(self.k_pos[0])
        if docs is None or bool((docs == docs[:1]).all()):
            return [Block(slice(0, self.b), q_start, k_start, self.seq, window, chunk, padding,
                          None if docs is None else _cu_seqlens(docs[0]))]
        return [Block(slice(r, r + 1), q_start, k_start, self.seq, window, chunk,
                      None if padding is None else padding[r:r + 1], _cu_seqlens(docs[r]))
                for r in range(self.b)]


def _documents(position_ids, b, sq, sk, seq):
    """Document ids [B, seq] where position_ids [B or 1, S] restart (each
    step other than +1 begins a document: transformers'
    find_packed_sequence_indices), for a call of every token (sq = sk =
    seq); None otherwise or when there is one document per row."""
    if position_ids.dim() != 2 or position_ids.shape[-1] != sq or not sq == sk == seq:
        return None
    pos = position_ids.expand(b, -1)
    steps = torch.diff(pos, prepend=pos[:, :1] - 1, dim=-1)
    docs = (steps != 1).cumsum(-1)
    return docs if bool((docs[:, -1] > 0).any()) else None


def _cu_seqlens(docs):
    """cu_seqlens [n + 1] of one row's document ids [seq]."""
    starts = (torch.diff(docs) != 0).nonzero()[:, 0] + 1
    return torch.cat((torch.zeros(1, dtype=torch.long), starts,
                      torch.tensor([docs.shape[0]]))).numpy()


def _whole(mask, b):
    """The one Block that hands the library transformers' whole mask
    (attn_mask, no causal mask of its own)."""
    return [Block(slice(0, b), 0, 0, mask.shape[-1], causal=False, attn_mask=mask)]


def _checked_tensor(attention_mask, b, h, sq, sk):
    """A 4-D tensor mask [B or 1, 1 or H, Sq, Sk], boolean or floating
    point, detached, on the CPU; UnsupportedError naming attention_mask
    for another, and for one requiring a gradient (a learned bias: the
    library gives the mask none, where transformers' eager path does)."""
    if attention_mask.dim() != 4 or attention_mask.shape[0] not in (1, b) or \
            attention_mask.shape[1] not in (1, h) or attention_mask.shape[-2:] != (sq, sk):
        raise UnsupportedError(f"attention_mask: a {tuple(attention_mask.shape)} mask for "
                               f"{b} rows, {h} heads, {sq} queries and {sk} keys: expected "
                               f"({b}, 1, {sq}, {sk})")
    if attention_mask.dtype != torch.bool and not attention_mask.is_floating_point():
        raise UnsupportedError(f"attention_mask: a {attention_mask.dtype} mask: expected "
                               f"boolean (True: seen) or additive floating point")
    if attention_mask.requires_grad:
        raise UnsupportedError("attention_mask: requires_grad=True, but ropeattn gives no "
                               "gradient for the mask (a constant); pass "
                               "attention_mask.detach(), or use eager or sdpa for a learned "
                               "bias")
    return attention_mask.detach().cpu()


def _tensor_mask(attention_mask, b, h, sq, sk):
    """The Mask or Blocks of a 4-D tensor mask [B or 1, 1 or H, Sq, Sk]
    passed as it is (by the caller, by transformers' generate, or built by
    an eager mask function), boolean True where seen (sdpa's reading) or
    additive (eager's and sdpa's).  One [B or 1, 1, Sq, Sk] of only 0 and
    -inf or at most half the dtype's lowest is a Mask, the queries the last
    Sq of Sk tokens: the library's structured masks where they equal it,
    else the tensor whole; any other (a bias, a mask per head) goes whole
    (attn_mask, what SDPA computes with it).  What it holds wins over the
    sliding_window argument, as in transformers' eager and sdpa.  Integer
    masks (neither reading) are refused."""
    given = _checked_tensor(attention_mask, b, h, sq, sk)
    if given.shape[1] != 1:
        return _whole(given, b)
    seen = given
    if given.dtype != torch.bool:
        seen = given == 0
        hidden = given <= torch.finfo(given.dtype).min / 2
        if not bool((seen | hidden).all()):
            return _whole(given, b)
    return Mask(sk - sq, 0, sk, None, None, seen.expand(b, 1, sq, sk), given)


def _plain_blocks(sq, sk, b, window, causal):
    """The call for attention_mask None.  Not causal: every query sees
    every key, window both ways (|i + Sk - Sq - j| < window: flash's
    (window - 1, window - 1), ModernBERT's sliding_window).  Causal, as
    transformers' sdpa path reads it (is_causal for Sq > 1, PyTorch's
    top-left diagonal: query i sees keys j <= i; one query sees every key):
    with Sq = Sk or Sq = 1 the queries are the last Sq of Sk tokens, window
    the sliding_window argument (as transformers' flash path reads it;
    sdpa's ignores it); with 1 < Sq != Sk the queries and keys both start at
    position 0 (the library's block call over max(Sq, Sk) positions, not
    its bottom-right alignment), and a window that would hide a key there
    (sliding_window < Sq) is refused: sdpa ignores it, flash aligns it
    bottom-right."""
    if not causal:
        return [Block(slice(0, b), 0, 0, sk, window, causal=False)]
    if sq == sk or sq == 1:
        return [Block(slice(0, b), sk - sq, 0, sk, window)]
    if window is not None and window < sq:
        raise UnsupportedError(f"sliding_window={window} with attention_mask None and {sq} "
                               f"queries over {sk} keys: transformers' sdpa path ignores it "
                               f"(queries and keys aligned top-left), its flash path aligns "
                               f"them bottom-right; give the mask")
    return [Block(slice(0, b), 0, 0, max(sq, sk))]


_REFUSED_KWARGS = {
    "output_attentions": "output_attentions (the library returns no attention weights)",
    "position_bias": "position_bias (a learned additive bias, T5-style)",
    "cache": "a paged cache (continuous batching)",
    "encoder_hidden_states": "encoder_hidden_states (states to project into keys: the function "
                             "takes cross attention's keys and values)",
}

# keywords transformers passes that change nothing here: what the masks
# carry (position_ids, read by a Mask; flash attention's packing, which its
# eager path ignores too), flash-attn's deterministic (ModernBERT's: the
# library's results are deterministic anyway), and its bookkeeping.  Any other keyword holding
# a value is refused: it may change the result (sparse attention's key
# indices, another form of sinks).
_KNOWN_KWARGS = {"position_ids", "is_causal", "use_cache", "output_hidden_states",
                 "output_router_logits", "num_items_in_batch", "cu_seq_lens_q",
                 "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx", "deterministic",
                 *_REFUSED_KWARGS}



def _check_call(module, query, key, value, dropout, kwargs):
    """Refuses what the library would not compute as transformers does,
    naming it; returns whether the call is causal (is_causal, or when None
    the module's, as transformers' sdpa path reads it)."""
    is_causal = kwargs.get("is_causal")
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    if isinstance(is_causal, torch.Tensor) and is_causal.dtype == torch.bool and \
            is_causal.dim() == 0:
        is_causal = bool(is_causal)  # torch.jit tracing's
    if not (isinstance(is_causal, (bool, np.bool_)) or
            (isinstance(is_causal, numbers.Integral) and is_causal in (0, 1))):
        # its truth would decide ("no" ran causal); SDPA raises
        raise UnsupportedError(f"is_causal: expected True, False or None, got {is_causal!r}")
    for name, feature in _REFUSED_KWARGS.items():
        if kwargs.get(name) is not None and kwargs[name] is not False:  # a tensor: no ==
            raise UnsupportedError(f"{name}: {feature} is not supported by ropeattn")
    for name in sorted(kwargs.keys() - _KNOWN_KWARGS):
        if kwargs[name] is not None:
            raise UnsupportedError(f"{name}: an argument ropeattn does not know, which may "
                                   f"change the result (e.g. sparse attention's key indices)")
    batches = {query.shape[0], key.shape[0], value.shape[0]} - {1}
    if len(batches) > 1:
        raise UnsupportedError(f"query, key, value: batches {query.shape[0]}, {key.shape[0]} "
                               f"and {value.shape[0]} do not broadcast")
    if not isinstance(dropout, numbers.Real) or isinstance(dropout, bool) or \
            not 0 <= dropout <= 1:  # F.dropout's range; NaN and -0.1 were read as 0
        raise UnsupportedError(f"dropout: expected a probability in [0, 1], got {dropout!r}")
    if key.shape[-1] != query.shape[-1] or value.shape[-1] > query.shape[-1]:
        raise UnsupportedError(f"head_dim: query {query.shape[-1]}, key {key.shape[-1]}, "
                               f"value {value.shape[-1]}: ropeattn needs one for q and k, "
                               f"and v's no larger")
    return bool(is_causal)


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
    and s_aux (gpt-oss's sinks).  Causal unless is_causal (or, when it is
    None, module.is_causal) is False: encoders (ModernBERT, ESM-2) and
    cross attention (keys of any length: T5Gemma, Moonshine), which get
    transformers' mask whole as attn_mask, or with attention_mask None
    every key, sliding_window both ways (|i - j| < sliding_window).
    attention_mask: None (causal as transformers' sdpa reads it: one
    query, or Sq = Sk, sliding_window applied; 1 < Sq != Sk top-left
    aligned, query i seeing keys j <= i; _plain_blocks), a 4-D tensor
    mask [B or 1, 1 or H, Sq, Sk] (boolean, True: seen, or additive;
    _tensor_mask), or a mask of
    ropeattn.transformers' (padding, caches, sliding windows, chunks,
    packed sequences, each checked against transformers' own mask).  A
    mask the library's structured masks (causal, window, chunk, padding,
    documents) do not form exactly (bidirectional image tokens, a bias, a
    mask per head) goes to the library whole, as attn_mask: what SDPA
    computes with it, in float32 (it wins over sliding_window, as in
    transformers' eager and sdpa).  Anything else raises UnsupportedError
    naming it: an integer mask, a mask requiring grad, output_attentions, position_bias,
    encoder_hidden_states, and a keyword argument it does not know holding anything
    but None (sparse attention's indices, block_indices).  context: a ropeattn.Context, or
    None (torch.get_num_threads() threads)."""
    causal = _check_call(module, query, key, value, dropout, kwargs)
    # SDPA's and eager's matmuls broadcast a batch of 1 (learned queries)
    b = max(query.shape[0], key.shape[0], value.shape[0])
    query, key, value = (t.expand(b, *t.shape[1:]) for t in (query, key, value))
    h, sq, sk = query.shape[1], query.shape[2], key.shape[2]
    attention_mask = getattr(attention_mask, "ropeattn_mask", attention_mask)
    if not causal and isinstance(attention_mask, Mask):
        attention_mask = attention_mask.given
    if attention_mask is None:
        blocks = _plain_blocks(sq, sk, b, sliding_window, causal)
    elif not causal and isinstance(attention_mask, torch.Tensor):
        blocks = _whole(_checked_tensor(attention_mask, b, h, sq, sk), b)
    elif isinstance(attention_mask, torch.Tensor):
        blocks = _tensor_mask(attention_mask, b, h, sq, sk)
        if isinstance(blocks, Mask):
            blocks = blocks.ropeattn_blocks(query, key, sliding_window, module, kwargs)
    elif hasattr(attention_mask, "ropeattn_blocks"):
        blocks = attention_mask.ropeattn_blocks(query, key, sliding_window, module, kwargs)
    else:
        raise UnsupportedError(f"attention_mask: a {type(attention_mask).__name__}: expected "
                               f"None, a 4-D tensor or a ropeattn.transformers mask")
    dv = value.shape[-1]
    if dv < query.shape[-1]:
        value = torch.nn.functional.pad(value, (0, query.shape[-1] - dv))
    if dropout > 0 and not hasattr(module, "training"):
        raise UnsupportedError(f"dropout={dropout} with a module of no `training` "
                               f"({type(module).__name__}): whether it applies is "
                               f"module.training")
    p = dropout if dropout > 0 and module.training else 0.0
    if s_aux is not None and not isinstance(s_aux, torch.Tensor):  # AttributeError: no .float
        raise ArgumentError(f"s_aux: expected a tensor of sink logits [H], got "
                            f"{type(s_aux).__name__}")
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
    if not blk.causal:
        return attention(q, k, v, causal=False, attn_mask=blk.attn_mask, **options)
    whole = blk.q_start == blk.k_start == 0 and q.shape[1] == k.shape[1] == blk.seq
    if whole:
        return attention(q, k, v, **options)
    return attention_block(q, k, v, blk.q_start, blk.k_start, blk.seq, **options)


__all__ = ["Block", "RotaryEmbeddingModule", "apply_rotary", "apply_rotary_pos_emb",
           "attention", "attention_block", "eager_attention_forward"]

# PyTorch's SDPA signature and semantics (its own file; it reads the above)
from ._torch_sdpa import scaled_dot_product_attention  # noqa: E402
__all__.append("scaled_dot_product_attention")
