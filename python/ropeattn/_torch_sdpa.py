"""ropeattn.torch.scaled_dot_product_attention: PyTorch's SDPA signature and
semantics (torch 2.15's), run by the library through ropeattn.torch's
attention and attention_block, differentiable in query, key and value.
Imported by ropeattn.torch (its last line), which it reads."""
import math
import numbers

import torch

from ._ropeattn import ArgumentError, DtypeError, UnsupportedError
from .torch import _context, _mask, _seed, attention, attention_block


def _flag(value, name):
    """SDPA's bool arguments: a Python bool only (torch raises TypeError for
    1, numpy.bool_ or a string)."""
    if not isinstance(value, bool):
        raise TypeError(f"scaled_dot_product_attention(): argument '{name}' must be bool, "
                        f"not {type(value).__name__}")
    return value


def _heads(query, key, value, enable_gqa):
    """(query, key, value) of one batch B and heads H (query) and Hkv (key
    and value, H % Hkv == 0) as SDPA broadcasts them: batches of 1 expand
    (views); enable_gqa=False broadcasts heads of 1 (key and value of one
    head are GQA's Hkv = 1, no expansion); enable_gqa=True repeats key's
    and value's heads, which must divide query's."""
    try:
        b = torch.broadcast_shapes(query.shape[:1], key.shape[:1], value.shape[:1])[0]
        if not enable_gqa:
            h = torch.broadcast_shapes(query.shape[1:2], key.shape[1:2], value.shape[1:2])[0]
    except RuntimeError as e:
        raise ArgumentError(f"query, key, value: batch and heads {tuple(query.shape[:2])}, "
                            f"{tuple(key.shape[:2])}, {tuple(value.shape[:2])} do not "
                            f"broadcast ({e})") from None
    hk, hv = key.shape[1], value.shape[1]
    if enable_gqa:
        h = query.shape[1]
        if h % hk or h % hv:
            raise ArgumentError(f"enable_gqa: key's {hk} and value's {hv} heads must divide "
                                f"query's {h}")
        if hk != hv:
            raise UnsupportedError(f"enable_gqa: key's {hk} and value's {hv} heads differ: "
                                   f"ropeattn's GQA needs one head count for both")
    elif hk != hv or hk not in (1, h):  # one of them broadcast: expand both
        key, value = key.expand(b, h, *key.shape[2:]), value.expand(b, h, *value.shape[2:])
    return (query.expand(b, h, *query.shape[2:]), key.expand(b, key.shape[1], *key.shape[2:]),
            value.expand(b, value.shape[1], *value.shape[2:]))


def _checked(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """SDPA's checks (torch's errors, as ropeattn's exception classes) and
    ropeattn's refusals, each naming the argument."""
    _flag(is_causal, "is_causal")
    _flag(enable_gqa, "enable_gqa")
    for t, name in ((query, "query"), (key, "key"), (value, "value")):
        if not isinstance(t, torch.Tensor):
            raise DtypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise UnsupportedError(f"{name}: a {t.dim()}-D tensor: ropeattn's "
                                   f"scaled_dot_product_attention takes [B, H, L, E] (4-D) "
                                   f"only (SDPA's other leading dimensions are not supported)")
        if 0 in t.shape:
            raise UnsupportedError(f"{name}: an empty axis in shape {tuple(t.shape)}: not "
                                   f"supported by ropeattn (SDPA gives an empty or zero "
                                   f"output)")
    if not query.dtype == key.dtype == value.dtype:
        raise DtypeError(f"query, key, value: expected one dtype, got {query.dtype}, "
                         f"{key.dtype} and {value.dtype}")
    if query.dtype == torch.float64:
        raise DtypeError("query: float64 is not supported by ropeattn (it computes in "
                         "float32); use float32, float16 or bfloat16, or PyTorch's SDPA")
    if key.shape[-1] != query.shape[-1]:
        raise ArgumentError(f"key: head dim {key.shape[-1]}, expected query's "
                            f"{query.shape[-1]}")
    if attn_mask is not None:
        if is_causal:
            raise ArgumentError("attn_mask: an explicit attn_mask must not be set with "
                                "is_causal=True (as SDPA)")
        if not isinstance(attn_mask, torch.Tensor):
            raise DtypeError(f"attn_mask: expected a torch.Tensor, got "
                             f"{type(attn_mask).__name__}")
        if attn_mask.dim() < 2:
            raise ArgumentError(f"attn_mask: a {attn_mask.dim()}-D mask: expected [..., L, S] "
                                f"(2-D to 4-D; SDPA raises for fewer dimensions)")
        if attn_mask.dtype not in (torch.bool, torch.float32, query.dtype):
            raise DtypeError(f"attn_mask: expected bool, float32 or query's dtype "
                             f"{query.dtype} (as SDPA), got {attn_mask.dtype}")
    if not isinstance(dropout_p, numbers.Real) or isinstance(dropout_p, bool) or \
            not 0 <= dropout_p <= 1:
        raise ArgumentError(f"dropout_p: expected a probability in [0, 1], got {dropout_p!r}")
    if dropout_p == 1:
        raise UnsupportedError("dropout_p=1.0 (every probability dropped: SDPA's output is "
                               "zeros) is not supported by ropeattn")
    if scale is not None and (not isinstance(scale, numbers.Real) or isinstance(scale, bool)
                              or not math.isfinite(scale) or scale == 0):
        raise UnsupportedError(f"scale: {scale!r}: ropeattn takes a finite non-zero scale "
                               f"or None")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, *, scale=None, enable_gqa=False,
                                 context=None):
    """torch.nn.functional.scaled_dot_product_attention (torch 2.15's
    semantics) by the library: query [B, H, L, E], key [B, Hkv, S, E],
    value [B, Hkv, S, Ev] CPU tensors of one dtype (float32, float16 or
    bfloat16) → [B, H, L, Ev] in query's dtype, differentiable in query,
    key and value.  As SDPA: not causal by default; is_causal=True is
    top-left aligned (query i sees keys j <= i, also when L != S); attn_mask
    (not with is_causal) bool (True: may attend) or additive (float32 or
    query's dtype), broadcast to [B, H, L, S]; scale 1/sqrt(E) when None;
    enable_gqa=False broadcasts batches and heads of 1 (other head counts
    must be equal), True repeats key's and value's heads (dividing H);
    dropout_p applied whenever > 0 (SDPA's "always"), its masks from the
    library's generator seeded from PyTorch's (torch.manual_seed repeats
    them; not PyTorch's masks); a query row that sees no key (a bool row
    all False, an additive row all -inf) gives zeros and zero gradients, as
    torch 2.15's SDPA on the CPU.  Refused, naming them: other than 4-D
    tensors, an empty axis, float64, key and value head counts that differ under
    enable_gqa, dropout_p=1, scale 0, NaN or infinite, an attn_mask
    requiring grad (the library gives the mask none), an additive mask
    holding NaN or +inf.  context: a ropeattn.Context, or None
    (torch.get_num_threads() threads)."""
    _checked(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    mask = _mask(attn_mask)
    query, key, value = _heads(query, key, value, enable_gqa)
    e, ev = query.shape[-1], value.shape[-1]
    scale = 1 / math.sqrt(e) if scale is None else float(scale)
    if scale < 0:  # scale * q k^T = |scale| * (-q) k^T, exactly
        query, scale = -query, -scale
    if ev < e:  # zero columns of v: zero columns of out, sliced off
        value = torch.nn.functional.pad(value, (0, e - ev))
    elif ev > e:  # zero columns of q and k add nothing to q k^T
        query, key = (torch.nn.functional.pad(t, (0, ev - e)) for t in (query, key))
    p = float(dropout_p)
    options = dict(scale=scale, dropout_p=p, seed=_seed(p), context=_context(context),
                   shape="bhsd")
    l, s = query.shape[2], key.shape[2]
    if not is_causal:
        out = attention(query, key, value, causal=False, attn_mask=mask, **options)
    elif l == s:
        out = attention(query, key, value, **options)
    else:  # top-left: queries and keys both from position 0
        out = attention_block(query, key, value, 0, 0, max(l, s), **options)
    return out[..., :ev]
