"""attention: causal grouped-query attention (ra_attention)."""
import numbers

import numpy as np

from . import _ropeattn
from ._arrays import BF16, F16, F32, array4, dtype_code, input_view, maps
from ._ropeattn import ArgumentError, DtypeError, UnsupportedError


def _positive(value, name, kind):
    if value is None:
        return 0
    if not isinstance(value, kind) or isinstance(value, bool) or not value > 0:
        raise ArgumentError(f"{name}: expected a positive number or None, got {value!r}")
    return value


def attention(q, k, v, causal=True, window=None, chunk=None, sinks=None, softcap=None,
              scale=None, padding_mask=None, cu_seqlens=None, dropout_p=0.0, seed=0,
              out=None, context=None, dtype=None):
    """out = softmax(scale * q k^T + mask) v per query head, query head h
    reading key/value head h // (H // Hkv) (GQA, no copy of k or v).

      q: float32 [B, S, H, D]; k, v: [B, S, Hkv, D], float32, float16, or
         bfloat16 bits in uint16 arrays with dtype="bfloat16" (widened to
         float32); any non-negative strides with the last axis contiguous
         are read in place (e.g. heads of a fused QKV array), others copied
         first.
      causal: query i sees keys j <= i.  The library has no bidirectional
         attention: causal=False raises UnsupportedError
         (a NotImplementedError).
      window: W: query i sees keys i - W < j <= i (W keys, its own included).
      chunk: C: query i sees keys of its own chunk of C tokens, counted from
         the row's first real token (Llama 4).
      sinks: [H] logits, one per query head, added to every softmax's
         denominator (gpt-oss): p_j = e^s_j / (sum_k e^s_k + e^sinks[h]).
      softcap: c: logits become c * tanh(s / c) (Gemma 2).
      scale: the logit scale, 1 / sqrt(D) when None.
      padding_mask: [B, S] of 0 and 1, 1 = a real token (Hugging Face's
         attention_mask): padding keys are never seen, and a padding
         query's output row is 0.
      cu_seqlens: [n + 1] integers, 0 = c[0] < ... < c[n] = S: packed
         documents, the same in every batch row; no token sees another
         document's.
      dropout_p, seed: dropout on the probabilities as in training, from a
         counter-based generator keyed by seed (the same for any threads).
      out: a float32 [B, S, H, D] array to write (reused across calls, no
         fresh memory), not overlapping q, k or v; None: a new array.
      context: a ropeattn.Context, or None (the calling thread alone).
    Returns out.  Softmax and sums in float32.  The GIL is released while
    the kernel runs.
    """
    if not causal:
        raise UnsupportedError("attention: causal=False: ropeattn's attention is causal only")
    q, k, v = array4(q, "q"), array4(k, "k"), array4(v, "v")
    dtype_code(q, "q", allowed=(F32,))
    kv = dtype_code(k, "k", dtype, allowed=(F32, F16, BF16))
    if v.dtype != k.dtype:
        raise DtypeError(f"v: expected k's dtype {k.dtype}, got {v.dtype}")
    b, s, h, d = q.shape
    if k.shape != v.shape:
        raise ArgumentError(f"k, v: shapes differ, {k.shape} and {v.shape}")
    if k.shape[:2] != (b, s) or k.shape[3] != d:
        raise ArgumentError(f"k: expected shape ({b}, {s}, Hkv, {d}) for q {q.shape}, "
                            f"got {k.shape}")
    if h % k.shape[2]:
        raise ArgumentError(f"q has {h} heads, not a multiple of k's {k.shape[2]}")
    window = _positive(window, "window", numbers.Integral)
    chunk = _positive(chunk, "chunk", numbers.Integral)
    softcap = _positive(softcap, "softcap", numbers.Real)
    scale = _positive(scale, "scale", numbers.Real)
    if sinks is not None:
        sinks = np.ascontiguousarray(sinks, dtype=np.float32)
        if sinks.shape != (h,):
            raise ArgumentError(f"sinks: expected shape ({h},), got {sinks.shape}")
    if padding_mask is not None:
        mask = np.asarray(padding_mask)
        if mask.shape != (b, s) or mask.dtype.kind not in "biu" or not np.isin(mask, (0, 1)).all():
            raise ArgumentError(f"padding_mask: expected 0 and 1 of shape ({b}, {s})")
        padding_mask = np.ascontiguousarray(mask, dtype=np.uint8)
    if cu_seqlens is not None:
        docs = np.asarray(cu_seqlens)
        if docs.ndim != 1 or docs.size < 2 or docs.dtype.kind not in "iu":
            raise ArgumentError("cu_seqlens: expected integers [n_documents + 1]")
        cu_seqlens = np.ascontiguousarray(docs, dtype=np.int64)
    if not 0.0 <= dropout_p < 1.0:
        raise ArgumentError(f"dropout_p: expected a probability in [0, 1), got {dropout_p!r}")
    if not isinstance(seed, numbers.Integral) or not 0 <= seed < 2 ** 64:
        raise ArgumentError(f"seed: expected an integer in [0, 2^64), got {seed!r}")
    if out is None:
        out = np.empty(q.shape, np.float32)
    elif not isinstance(out, np.ndarray) or out.shape != q.shape or out.dtype != np.float32:
        raise ArgumentError(f"out: expected a float32 array of shape {q.shape}")
    elif not maps(out):
        raise ArgumentError("out: strides must be non-negative whole elements with the last "
                            "axis contiguous, and the array aligned")
    _ropeattn.attention(context, out, input_view(q), input_view(k), input_view(v), kv,
                        float(scale), float(softcap), int(window), int(chunk), sinks,
                        padding_mask, cu_seqlens, float(dropout_p), int(seed))
    return out


__all__ = ["attention"]
