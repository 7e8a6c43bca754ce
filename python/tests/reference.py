"""Float64 references the tests compare ropeattn with, written from Hugging
Face's modeling_rope_utils and rotary code, and the attention's definition.
Shapes: x [B, S, H, D]; q [B, S, H, D]; k, v [B, S, Hkv, D]."""
import math

import numpy as np


def inv_freq_default(d, theta=10000.0):
    # inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2) / dim))
    return 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)


def inv_freq_llama3(d, theta, factor, low_freq_factor, high_freq_factor,
                    original_max_position_embeddings):
    inv_freq = inv_freq_default(d, theta)
    old = original_max_position_embeddings
    low_freq_wavelen, high_freq_wavelen = old / low_freq_factor, old / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * llama / factor + smooth * llama
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(medium, smoothed, llama)


def yarn(d, theta, factor, original_max_position_embeddings, beta_fast=32, beta_slow=1):
    """(inv_freq, attention_factor) of _compute_yarn_parameters, truncate=True."""
    def correction_dim(rotations):
        return (d * math.log(original_max_position_embeddings / (rotations * 2 * math.pi))
                / (2 * math.log(theta)))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp
    pos_freqs = theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    inv_freq = (1 / (factor * pos_freqs) * (1 - extrapolation_factor)
                + 1 / pos_freqs * extrapolation_factor)
    return inv_freq, 0.1 * math.log(factor) + 1.0


def inv_freq_dynamic(d, theta, factor, max_position_embeddings, seq_len):
    """_compute_dynamic_ntk_parameters for the length L = max(seq_len,
    max_position_embeddings): the base grows past the original length."""
    length = max(seq_len, max_position_embeddings)
    base = theta * (factor * length / max_position_embeddings - (factor - 1)) ** (d / (d - 2))
    return inv_freq_default(d, base)


def longrope(d, theta, short_factor, long_factor, original_max_position_embeddings,
             max_position_embeddings, seq_len):
    """(inv_freq, attention_factor) of _compute_longrope_parameters (factor
    max / original) with longrope_frequency_update's choice: the long
    factors once seq_len exceeds the original length."""
    original = original_max_position_embeddings
    factor = max_position_embeddings / original
    attention_factor = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = np.asarray(long_factor if seq_len > original else short_factor, np.float64)
    return 1.0 / (ext * theta ** (np.arange(0, d, 2, dtype=np.float64) / d)), attention_factor


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate((-x[..., half:], x[..., :half]), -1)


def rope_half(x, pos, inv_freq, attention_factor=1.0):
    """q * cos + rotate_half(q) * sin; pos [S] or [B, S]."""
    angles = np.asarray(pos, np.float64)[..., None] * inv_freq  # [(B,) S, D/2]
    emb = np.concatenate((angles, angles), -1)
    cos, sin = np.cos(emb) * attention_factor, np.sin(emb) * attention_factor
    if cos.ndim == 2:
        cos, sin = cos[None], sin[None]
    x = x.astype(np.float64)
    return x * cos[:, :, None] + rotate_half(x) * sin[:, :, None]


def rope_interleaved(x, pos, inv_freq):
    """Pairs (2i, 2i + 1): (a cos - b sin, a sin + b cos)."""
    angles = np.asarray(pos, np.float64)[..., None] * inv_freq
    if angles.ndim == 2:
        angles = angles[None]
    cos, sin = np.cos(angles)[:, :, None], np.sin(angles)[:, :, None]
    x = x.astype(np.float64)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def attention(q, k, v, window=None, sinks=None, softcap=None, scale=None, chunk=None,
              padding_mask=None, cu_seqlens=None):
    """Causal softmax(q k^T * scale) v with k, v repeated per group (GQA);
    window W: i - W < j <= i; softcap c: c * tanh(s / c); sinks [H]: one
    extra logit per head in every row's denominator; chunk C: i and j in the
    same chunk of C counted from the row's first real token; padding_mask
    [B, S] (1 = real): padding keys unseen, padding queries' rows 0;
    cu_seqlens: i and j in the same packed document."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    b_len, s_len, h, d = q.shape
    rep = h // k.shape[2]
    k, v = np.repeat(k, rep, axis=2), np.repeat(v, rep, axis=2)
    scale = 1 / math.sqrt(d) if scale is None else scale
    s = np.einsum("bihd,bjhd->bhij", q, k) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    i, j = np.indices((s_len, s_len))
    seen = np.broadcast_to(j <= i, (b_len, 1, s_len, s_len)).copy()
    if window:
        seen &= j > i - window
    real = np.ones((b_len, s_len), bool) if padding_mask is None else np.asarray(padding_mask) != 0
    if chunk:
        lead = np.argmax(real, axis=1)[:, None, None, None]  # leading padding tokens
        seen &= (j - lead) // chunk == (i - lead) // chunk
    seen &= real[:, None, None, :]
    if cu_seqlens is not None:
        doc = np.searchsorted(np.asarray(cu_seqlens)[1:], np.arange(s_len), side="right")
        seen &= doc[:, None] == doc[None, :]
    s = np.where(seen, s, -np.inf)
    m = s.max(-1, keepdims=True)
    if sinks is not None:
        m = np.maximum(m, np.asarray(sinks, np.float64)[None, :, None, None])
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    den = e.sum(-1, keepdims=True)
    if sinks is not None:
        den = den + np.exp(np.asarray(sinks, np.float64)[None, :, None, None] - m)
    out = np.einsum("bhij,bjhd->bihd", np.divide(e, den, out=np.zeros_like(e), where=den > 0), v)
    return np.where(real[:, :, None, None], out, 0.0)


def attention_masked(q, k, v, causal=True, attn_mask=None, window=None, sinks=None,
                     softcap=None, scale=None):
    """(out [B, Sq, H, D], lse [B, H, Sq]) in float64 as issue 43's API
    states it: q [B, Sq, H, D], k, v [B, Sk, Hkv, D]; query i stands at key
    row i' = i + Sk - Sq (bottom-right); causal: j <= i'; window W: i' - W
    < j (causal) or |i' - j| < W (not); attn_mask broadcast to [B, H, Sq,
    Sk], bool (True: may attend) or additive (added after scale and
    softcap).  A row that sees no key: out 0, lse -inf (sinks: the sink)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    b, sq, h, d = q.shape
    sk = k.shape[1]
    rep = h // k.shape[2]
    k, v = np.repeat(k, rep, axis=2), np.repeat(v, rep, axis=2)
    scale = 1 / math.sqrt(d) if scale is None else scale
    s = np.einsum("bihd,bjhd->bhij", q, k) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    i, j = np.indices((sq, sk))
    i = i + sk - sq
    seen = np.ones((b, h, sq, sk), bool)
    if causal:
        seen &= j <= i
    if window:
        seen &= (j > i - window) if causal else (np.abs(i - j) < window)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.dtype == np.bool_:
            seen &= np.broadcast_to(m, seen.shape)
        else:
            s = s + np.broadcast_to(m.astype(np.float64), seen.shape)
            seen &= np.broadcast_to(m != -np.inf, seen.shape)
    s = np.where(seen, s, -np.inf)
    m = s.max(-1, keepdims=True)
    if sinks is not None:
        m = np.maximum(m, np.asarray(sinks, np.float64)[None, :, None, None])
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    den = e.sum(-1, keepdims=True)
    if sinks is not None:
        den = den + np.exp(np.asarray(sinks, np.float64)[None, :, None, None] - m)
    p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    with np.errstate(divide="ignore"):
        lse = np.where(den > 0, np.log(den) + m, -np.inf)[..., 0]
    return np.einsum("bhij,bjhd->bihd", p, v), lse


def to_bf16(x):
    """float32 -> bfloat16 bits (uint16), rounding to nearest even."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)
