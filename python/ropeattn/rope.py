"""RotaryEmbedding (a rope: inverse frequencies, tables), apply_rotary, and
freqs (Meta's precompute_freqs_cis as cos/sin tables)."""
import functools
import numbers

import numpy as np

from . import _ropeattn
from ._arrays import array4, c_array, dtype_code, input_view, maps
from ._ropeattn import ArgumentError, DtypeError

# ra_rope_type and ra_layout (ropeattn.h), by Hugging Face's names.
ROPE_TYPES = {"default": 0, "linear": 1, "dynamic": 2, "yarn": 3, "llama3": 4, "longrope": 5}
LAYOUTS = {"interleaved": 0, "half": 1}
# ra_rope_config's fields given by keyword: Hugging Face's rope_scaling keys
# (but "truncate", the opposite of yarn_no_truncate) and a few of its config's.
FIELDS = {"factor", "original_max_position_embeddings", "max_position_embeddings", "seq_len",
          "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
          "low_freq_factor", "high_freq_factor", "short_factor", "long_factor", "rotary_dim",
          "table_size", "mrope_section", "mrope_interleaved"}


class RotaryEmbedding:
    """RoPE's frequencies for one head size, as Hugging Face's rotary
    embedding (modeling_rope_utils) computes them, in double.

    RotaryEmbedding(head_dim, theta=10000.0, rope_type="default",
                    layout="half", **scaling)

    rope_type: "default", "linear", "dynamic", "yarn", "llama3" or
      "longrope" (a rope_scaling dict's "rope_type", or its older "type").
    layout: "half" pairs features (i, i + D/2) as Hugging Face's rotate_half;
      "interleaved" pairs (2i, 2i + 1) as Meta's LLaMA code.
    scaling: a rope_scaling dict's keys: factor,
      original_max_position_embeddings, low_freq_factor, high_freq_factor
      (llama3), beta_fast, beta_slow, mscale, mscale_all_dim,
      attention_factor, truncate (yarn), short_factor, long_factor
      (longrope); and max_position_embeddings, seq_len (dynamic, longrope),
      rotary_dim (partial rotary: int(head_dim * partial_rotary_factor)),
      table_size (rows precomputed, 4096 unless given); M-RoPE's
      mrope_section [t, h, w] (pairs per position component, summing to
      rotary_dim / 2; Qwen2-VL's rope_scaling type "mrope" is the default
      type with them) and mrope_interleaved (Qwen3-VL's arrangement): then
      positions may be 3-D, [3, ...] (temporal, height, width).

    A RotaryEmbedding is read-only: any number of threads may use it.
    """

    def __init__(self, head_dim, theta=10000.0, rope_type="default", layout="half", **scaling):
        if "type" in scaling:  # older rope_scaling dicts
            rope_type = scaling.pop("type")
        if rope_type == "mrope":  # Qwen2-VL's first configs: default, in sections
            rope_type = "default"
        if rope_type not in ROPE_TYPES:
            raise ArgumentError(f"rope_type: expected one of {', '.join(ROPE_TYPES)}, "
                                f"got {rope_type!r}")
        if layout not in LAYOUTS:
            raise ArgumentError(f'layout: expected "half" or "interleaved", got {layout!r}')
        fields = {}
        for key, value in scaling.items():
            if value is None:  # transformers' "not given", as 0 is the library's
                continue
            if key == "truncate":
                fields["yarn_no_truncate"] = not value
            elif key in FIELDS:
                fields[key] = value
            else:
                raise TypeError(f"RotaryEmbedding: unknown keyword {key!r}")
        self._rope = _ropeattn.Rope(head_dim, type=ROPE_TYPES[rope_type],
                                    layout=LAYOUTS[layout], theta=float(theta), **fields)
        config = self._rope.config
        self.head_dim = config["head_dim"]
        self.rotary_dim = config["rotary_dim"]
        self.theta = config["theta"]
        self.rope_type = rope_type
        self.layout = layout
        self.mrope_section = tuple(config["mrope_section"])  # (0, 0, 0): none
        self.mrope_interleaved = config["mrope_interleaved"]

    @property
    def inv_freq(self):
        """float64 [rotary_dim / 2]: theta_i, the inverse frequencies."""
        return self._rope.inv_freq()

    @property
    def attention_factor(self):
        """The factor on every cos and sin: 1.0 but for yarn and longrope."""
        return self._rope.attention_factor

    def cos_sin(self, positions):
        """cos, sin as Hugging Face's rotary embedding returns them, attention
        factor applied, float32 of shape positions.shape + (rotary_dim,):
        layout "half" repeats the rotary_dim/2 angles twice along the last
        axis (torch.cat((freqs, freqs), -1)); "interleaved" repeats each
        angle in place (2i, 2i + 1).  Angles are formed in double: within
        1e-6 of exact math up to position 2^32.
          positions: integers of any shape, each in [0, 2^32]; with
            mrope_section, [3, ...] are 3-D positions (temporal, height,
            width) and the result has shape positions.shape[1:] +
            (rotary_dim,): each pair's angle from its section's component,
            as transformers puts cos and sin together"""
        pos = np.asarray(positions)
        if pos.dtype.kind not in "iu":
            raise DtypeError(f"positions: expected integers, got {pos.dtype}")
        if any(self.mrope_section) and pos.ndim >= 2 and pos.shape[0] == 3:
            cos, sin = self._rope.table_mrope(pos.astype(np.int64).reshape(3, -1))
            pos = pos[0]
        else:
            cos, sin = self._rope.table(pos.astype(np.int64).reshape(-1))
        if self.layout == "half":
            cos, sin = np.concatenate((cos, cos), -1), np.concatenate((sin, sin), -1)
        else:
            cos, sin = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
        shape = pos.shape + (self.rotary_dim,)
        return cos.reshape(shape), sin.reshape(shape)

    def __repr__(self):
        return (f"RotaryEmbedding(head_dim={self.head_dim}, theta={self.theta}, "
                f"rope_type={self.rope_type!r}, layout={self.layout!r}, "
                f"rotary_dim={self.rotary_dim})")


@functools.lru_cache(maxsize=16)
def _cached_rope(head_dim, items):
    return RotaryEmbedding(head_dim, **dict(items))


def _positions(positions, b, s, mrope=False):
    """(start, ids): ids None or C-contiguous int64 [B, S]; with mrope (a
    rope with sections) also [3, B, S] from 3-D positions [3, S] or
    [3, B, S]."""
    if positions is None:
        return 0, None
    if type(positions) is int or (isinstance(positions, numbers.Integral) and
                                  not isinstance(positions, bool)):
        if positions < 0:
            raise ArgumentError(f"positions: start {positions} is negative")
        return int(positions), None
    ids = np.asarray(positions)
    if ids.dtype.kind not in "iu":
        raise DtypeError(f"positions: expected an int, or integers [S] or [B, S], "
                         f"got {ids.dtype}")
    three = ids.shape == (3, b, s) or (ids.shape == (3, s) and b != 3)
    if mrope and b == 3 and ids.shape == (3, s):
        raise ArgumentError(f"positions: shape {ids.shape} with batch 3 is 3-D positions or "
                            f"a row per sequence: give [3, 3, {s}] or [{s}]")
    if three and not mrope:
        raise ArgumentError(f"positions: shape {ids.shape} holds 3-D positions (temporal, "
                            f"height, width), which need a rope with mrope_section")
    if three:
        if ids.size and ids.min() < 0:
            raise ArgumentError(f"positions: {ids.min()} is negative")
        full = ids[:, None, :] if ids.ndim == 2 else ids
        return 0, c_array(np.broadcast_to(full, (3, b, s)), np.int64)
    if ids.shape not in ((s,), (b, s)):
        raise ArgumentError(f"positions: expected shape ({s},) or ({b}, {s}), got {ids.shape}")
    if ids.size and ids.min() < 0:
        raise ArgumentError(f"positions: {ids.min()} is negative")
    return 0, c_array(np.broadcast_to(ids, (b, s)), np.int64)


def apply_rotary(x, positions=None, rope=None, inverse=False, out=None, context=None,
                 dtype=None, **rope_kwargs):
    """Rotates every head of x by its token's position (RoPE); returns the
    result (out, when given).

      x: [B, S, heads, D], float32, float16, or bfloat16 as a uint16 array
         with dtype="bfloat16" (its bits: the top half of a float32).
      positions: None (0 .. S-1), an int (start .. start+S-1), or integers
         [S] (the same in every batch row) or [B, S] (position ids); with a
         rope with mrope_section also 3-D positions [3, S] or [3, B, S]
         (Qwen2-VL's position_ids: temporal, height, width).
      rope: a RotaryEmbedding with head_dim D; or None, to build one from
         rope_kwargs (RotaryEmbedding's keywords; theta 10000, the default
         type and the half layout unless given).
      inverse: rotate by -angle, the transpose: RoPE's backward.
      out: an array of x's shape and dtype to write; out=x rotates in place.
         None: a new C-contiguous array.
      context: a ropeattn.Context, or None (the calling thread alone).

    Computed in float32, rounded once to the dtype.  x is read in place when
    its strides are non-negative whole elements with the last axis
    contiguous (transposed or sliced views qualify); otherwise it is copied
    first.  out must be such a view (else ArgumentError).  The GIL is
    released while the kernel runs.
    """
    x = array4(x, "x")
    code = dtype_code(x, "x", dtype)
    if rope is None:
        try:
            rope = _cached_rope(x.shape[3], tuple(sorted(rope_kwargs.items())))
        except TypeError:  # unhashable values (longrope's lists)
            rope = RotaryEmbedding(x.shape[3], **rope_kwargs)
    elif rope_kwargs:
        raise TypeError(f"apply_rotary: give rope= or rope keywords, not both "
                        f"({', '.join(rope_kwargs)})")
    elif not isinstance(rope, RotaryEmbedding):
        raise TypeError(f"rope: expected a RotaryEmbedding, got {type(rope).__name__}")
    if rope.head_dim != x.shape[3]:
        raise ArgumentError(f"x: head_dim {x.shape[3]} but the rope's is {rope.head_dim}")
    start, ids = _positions(positions, x.shape[0], x.shape[1], any(rope.mrope_section))
    if out is None:
        out = np.empty(x.shape, x.dtype)
    elif out is not x:
        array4(out, "out")
        if out.shape != x.shape or out.dtype != x.dtype:
            raise ArgumentError(f"out: expected shape {x.shape} and dtype {x.dtype}, "
                                f"got {out.shape} {out.dtype}")
        if not maps(out):
            raise ArgumentError("out: strides must be non-negative whole elements with "
                                "the last axis contiguous, and the array aligned")
    src = x if out is x else input_view(x)
    _ropeattn.rope_apply(rope._rope, context, out, src, code, start, ids, bool(inverse))
    return out


def freqs(head_dim, end, theta=10000.0):
    """Meta's LLaMA reference code's precompute_freqs_cis(head_dim, end,
    theta) as two real tables (ra_precompute_freqs):

      cos[m, i] = cos(m * theta ** (-2 i / head_dim)),  sin[m, i] = sin(...)
      for m in [0, end), i in [0, head_dim // 2)

    Returns (cos, sin), float32 [end, head_dim // 2]: the real and imaginary
    parts of freqs_cis.  The angle is formed in double and rounded once, so
    every entry is within 1e-6 of exact math up to position 2^32 (the
    reference code forms it in float32 and drifts with m).  head_dim even
    and >= 2, end in [0, 2^32 + 1], theta finite and > 0 (else
    ArgumentError, with the library's message)."""
    for value, name in ((head_dim, "head_dim"), (end, "end")):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise ArgumentError(f"{name}: expected an integer, got {value!r}")
    if not isinstance(theta, numbers.Real) or isinstance(theta, bool):
        raise ArgumentError(f"theta: expected a number, got {theta!r}")
    if end == 0:  # an empty table, once the library accepts head_dim and theta
        cos, sin = _ropeattn.precompute_freqs(int(head_dim), 1, float(theta))
        return cos[:0].copy(), sin[:0].copy()
    return _ropeattn.precompute_freqs(int(head_dim), int(end), float(theta))


__all__ = ["RotaryEmbedding", "apply_rotary", "freqs"]