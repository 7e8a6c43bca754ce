"""attention: causal grouped-query attention (ra_attention)."""
import numbers

import numpy as np

from . import _ropeattn
from ._arrays import F16, F32, array4, dtype_code, input_view
from ._ropeattn import ArgumentError, DtypeError, UnsupportedError


def _positive(value, name, kind):
    if value is None:
        return 0
    if not isinstance(value, kind) or isinstance(value, bool) or not value > 0:
        raise ArgumentError(f"{name}: expected a positive number or None, got {value!r}")
    return value


def attention(q, k, v, causal=True, window=None, sinks=None, softcap=None, scale=None,
              dropout_p=0.0, seed=0, context=None):
    """out = softmax(scale * q k^T + mask) v per query head, query head h
    reading key/value head h // (H // Hkv) (GQA, no copy of k or v).

      q: float32 [B, S, H, D]; k, v: [B, S, Hkv, D], float32 or float16
         (widened to float32); any non-negative strides with the last axis
         contiguous are read in place (e.g. heads of a fused QKV array),
         others copied first.
      causal: query i sees keys j <= i.  The library has no bidirectional
         attention: causal=False raises UnsupportedError
         (a NotImplementedError).
      window: W: query i sees keys i - W < j <= i (W keys, its own included).
      sinks: [H] logits, one per query head, added to every softmax's
         denominator (gpt-oss): p_j = e^s_j / (sum_k e^s_k + e^sinks[h]).
      softcap: c: logits become c * tanh(s / c) (Gemma 2).
      scale: the logit scale, 1 / sqrt(D) when None.
      dropout_p, seed: dropout on the probabilities as in training, from a
         counter-based generator keyed by seed (the same for any threads).
      context: a ropeattn.Context, or None (the calling thread alone).
    Returns out: float32 [B, S, H, D], C-contiguous.  Softmax and sums in
    float32.  The GIL is released while the kernel runs.
    """
    if not causal:
        raise UnsupportedError("attention: causal=False: ropeattn's attention is causal only")
    q, k, v = array4(q, "q"), array4(k, "k"), array4(v, "v")
    dtype_code(q, "q", allowed=(F32,))
    kv = dtype_code(k, "k", allowed=(F32, F16))
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
    softcap = _positive(softcap, "softcap", numbers.Real)
    scale = _positive(scale, "scale", numbers.Real)
    if sinks is not None:
        sinks = np.ascontiguousarray(sinks, dtype=np.float32)
        if sinks.shape != (h,):
            raise ArgumentError(f"sinks: expected shape ({h},), got {sinks.shape}")
    if not 0.0 <= dropout_p < 1.0:
        raise ArgumentError(f"dropout_p: expected a probability in [0, 1), got {dropout_p!r}")
    if not isinstance(seed, numbers.Integral) or not 0 <= seed < 2 ** 64:
        raise ArgumentError(f"seed: expected an integer in [0, 2^64), got {seed!r}")
    out = np.empty(q.shape, np.float32)
    _ropeattn.attention(context, out, input_view(q), input_view(k), input_view(v), kv,
                        float(scale), float(softcap), int(window), sinks, float(dropout_p),
                        int(seed))
    return out


__all__ = ["attention"]
