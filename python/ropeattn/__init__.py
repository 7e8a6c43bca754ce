"""ropeattn: rotary position embedding (RoPE) and causal grouped-query
attention on NumPy arrays, through the ropeattn C library.

Shapes: B batch, S tokens, H query heads, Hkv key/value heads (H % Hkv == 0),
D head_dim.

    RotaryEmbedding(head_dim, theta=10000.0, rope_type=None, layout="half", ...)
        .inv_freq, .attention_factor, .cos_sin(positions)
    apply_rotary(x [B, S, H, D], positions=None, rope=None, inverse=False, out=None,
                 shape="bshd")   (shape="bhsd": x [B, H, S, D])
    attention(q [B, S, H, D], k, v [B, S, Hkv, D], causal=True, window=None, chunk=None,
              sinks=None, softcap=None, scale=None, padding_mask=None, cu_seqlens=None,
              dropout_p=0.0, seed=0, out=None, shape="bshd")
    attention_forward(q, k, v, ...) -> out, lse [B, H, S]
    attention_backward(dout, q, k, v, out, lse, ...) -> dq, dk, dv, dsinks
    freqs(head_dim, end, theta=10000.0) -> cos, sin [end, head_dim // 2]
    vision_positions(model, grids, spatial_merge_size=1) -> (row, column) [N, 2]
    vision_windows(config, grid_thw) -> window_index, cu_window_seqlens, positions,
        patch_index (Qwen2.5-VL's window attention)
    Layer.from_pretrained(path, layer=N, context=None, **options)
        layer(x [B, S, dim], positions=None, attention_mask=None, cache=None)
        .config, .tensor_names
    KVCache(layer, batch, capacity, dtype="float32", window=False)
        len(cache), .length(b), .reset()
    KVPool(layer, n_pages, page_size=16, dtype="float32")
        .add(), .fork(id), .free(id); layer(x, pool=pool, ids=[...], n_new=[...])
    Context(threads=N)   (context=None: a shared default, one thread per processor)
    Error (ArgumentError (CacheFullError), DtypeError, UnsupportedError,
           OutOfMemoryError, FileError, FormatError, NotFoundError)
    simd(), __version__
"""
from . import _ropeattn
from ._ropeattn import (ArgumentError, CacheFullError, Context, DtypeError, Error, FileError,
                        FormatError, NotFoundError, OutOfMemoryError, UnsupportedError)
from .attention import attention, attention_backward, attention_forward
from .layer import KVCache, KVPool, Layer
from .rope import RotaryEmbedding, apply_rotary, freqs, vision_positions
from .vision import VisionWindows, vision_windows

__version__ = _ropeattn.library_version()
if __version__ != _ropeattn.HEADER_VERSION:
    raise ImportError(f"ropeattn: the C library is version {__version__} but the extension "
                      f"was compiled against the header of {_ropeattn.HEADER_VERSION}; "
                      f"rebuild it (make python, or pip install ./python again)")


def simd():
    """The SIMD kernels the library chose for this CPU: "amx", "avx512bf16",
    "avx512", "avx2", "sse2" or "neon" (RA_FORCE_ISA in the environment caps
    the choice)."""
    return _ropeattn.simd()


__all__ = ["ArgumentError", "CacheFullError", "Context", "DtypeError", "Error", "FileError",
           "FormatError", "KVCache", "KVPool", "Layer", "NotFoundError", "OutOfMemoryError",
           "RotaryEmbedding", "UnsupportedError", "apply_rotary", "attention",
           "attention_backward", "attention_forward", "freqs", "simd", "vision_positions",
           "VisionWindows", "vision_windows"]
