"""quickstart.py: ropeattn from Python, checked against NumPy.

    make python && PYTHONPATH=python /usr/bin/python3 python/examples/quickstart.py

Rotates q and k of a small GQA batch with Llama 3.1's rope (as its
config.json's rope_scaling gives it), runs causal attention with a sliding
window, and compares both with float64 NumPy written the way transformers
writes them (q * cos + rotate_half(q) * sin; softmax(q k^T / sqrt(D) + mask) v).
Prints each check and "python: ok: 2 of 2 checks passed"; exits 1 otherwise.
"""
import sys

import numpy as np

import ropeattn

B, S, H, HKV, D, WINDOW = 2, 16, 8, 2, 64, 8


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate((-x[..., half:], x[..., :half]), -1)


def reference_attention(q, k, v, window):
    """float64 causal GQA attention, key j seen by query i when i - window < j <= i."""
    rep = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, rep, axis=2), np.repeat(v, rep, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(q.shape[-1])
    i, j = np.arange(q.shape[1])[:, None], np.arange(q.shape[1])[None, :]
    s = np.where((j <= i) & (j > i - window), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bjhd->bihd", p / p.sum(-1, keepdims=True), v)


def main():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, S, H, D), dtype=np.float32)
    k = rng.standard_normal((B, S, HKV, D), dtype=np.float32)
    v = rng.standard_normal((B, S, HKV, D), dtype=np.float32)

    rope = ropeattn.RotaryEmbedding(D, theta=500000.0, rope_type="llama3", factor=8.0,
                                    low_freq_factor=1.0, high_freq_factor=4.0,
                                    original_max_position_embeddings=8192)
    cos, sin = rope.cos_sin(np.arange(S))  # [S, D] each, as transformers returns them
    cos, sin = cos[None, :, None, :].astype(np.float64), sin[None, :, None, :].astype(np.float64)
    q_ref = q * cos + rotate_half(q.astype(np.float64)) * sin
    k_ref = k * cos + rotate_half(k.astype(np.float64)) * sin

    with ropeattn.Context(threads=2) as ctx:
        ropeattn.apply_rotary(q, rope=rope, out=q, context=ctx)  # in place, positions 0..S-1
        ropeattn.apply_rotary(k, rope=rope, out=k, context=ctx)
        out = ropeattn.attention(q, k, v, window=WINDOW, context=ctx)  # [B, S, H, D]

    checks = [  # name, error relative to max|reference|, limit (float32 compute)
        ("apply_rotary (llama3 rope) = q cos + rotate_half(q) sin",
         np.abs(q - q_ref).max() / np.abs(q_ref).max(), 1e-6),
        (f"attention (causal, GQA, window {WINDOW}) = float64 NumPy",
         np.abs(out - reference_attention(q_ref, k_ref, v, WINDOW)).max() / np.abs(out).max(),
         1e-5),
    ]
    print(f"ropeattn {ropeattn.__version__} from Python (simd {ropeattn.simd()}), "
          f"q {q.shape}, k and v {k.shape}")
    passed = 0
    for name, error, limit in checks:
        ok = error <= limit
        passed += ok
        print(f"  {'ok' if ok else 'FAIL':5s} {name:58s} {error:.1e} (limit {limit:g})")
    print(f"python: {'ok' if passed == len(checks) else 'FAILED'}: "
          f"{passed} of {len(checks)} checks passed")
    return 0 if passed == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
