"""RotaryEmbedding (a rope: inverse frequencies, tables), apply_rotary, and
freqs (Meta's precompute_freqs_cis as cos/sin tables)."""
import functools
import math
import numbers
import sys

import numpy as np

from . import _ropeattn
from ._arrays import (OTHER, array4, as_array, as_bshd, check_shape, dtype_code, flag, index_copy,
                      input_view, maps, not_masked)
from ._ropeattn import ArgumentError, DtypeError

# ra_rope_type and ra_layout (ropeattn.h), by Hugging Face's names.
ROPE_TYPES = {"default": 0, "linear": 1, "dynamic": 2, "yarn": 3, "llama3": 4, "longrope": 5}
LAYOUTS = {"interleaved": 0, "half": 1}
# ra_rope_axial: how a 2-D rope shares its pairs and frequencies between rows
# and columns (docs/ROPE.md "2-D RoPE").
AXIAL = {None: 0, "alternate": 1, "shared": 2}
# ra_rope_config's fields given by keyword: Hugging Face's rope_scaling keys
# (but "truncate", the opposite of yarn_no_truncate) and a few of its config's.
FIELDS = {"factor", "original_max_position_embeddings", "max_position_embeddings", "seq_len",
          "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
          "low_freq_factor", "high_freq_factor", "short_factor", "long_factor", "rotary_dim",
          "table_size", "mrope_section", "mrope_interleaved"}
TABLE_SIZE = 4096  # ra_rope_config_default's table_size
MAX_POSITION = 2 ** 32  # RA_MAX_POSITION: positions are in [0, 2^32]
# The keys checked here, each named in its own message as the command line
# names a --rope-parameters key: numbers finite and never subnormal (as the
# library takes them), 0 allowed where transformers reads it as "not given".
POSITIVE = {"theta", "factor", "attention_factor", "low_freq_factor", "high_freq_factor"}
NON_NEGATIVE = {"beta_fast", "beta_slow", "mscale", "mscale_all_dim"}
LENGTHS = {"original_max_position_embeddings", "max_position_embeddings", "seq_len"}
FACTOR_LISTS = {"short_factor", "long_factor"}
# whole numbers >= 0 (0: the library's default), never a bool or a float the
# extension would truncate
COUNTS = {"rotary_dim", "table_size"}
# The types whose frequencies depend on the sequence's length L (transformers'
# dynamic_rope_update), and the length past which they scale.
BY_LENGTH = {"dynamic": "max_position_embeddings",
             "longrope": "original_max_position_embeddings"}


def _check_number(value, key, zero_allowed):
    """value, a real number: finite and >= DBL_MIN (or 0 when allowed)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ArgumentError(f"{key}: expected a number, got {value!r}")
    if not (math.isfinite(value) and (value >= sys.float_info.min or
                                      (zero_allowed and value == 0))):
        kind = "a number >= 0" if zero_allowed else "a positive number"
        subnormal = " (subnormal)" if 0 < abs(value) < sys.float_info.min else ""
        raise ArgumentError(f"{key}: expected {kind}, got {value!r}{subnormal}")


def _check_key(key, value):
    """A rope keyword's value, refused in the key's own name."""
    if key in POSITIVE or key in NON_NEGATIVE:
        _check_number(value, key, key in NON_NEGATIVE)
    elif key in LENGTHS:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or \
                not 1 <= value < 2 ** 63:
            raise ArgumentError(f"{key}: expected a positive integer (int64), got {value!r}")
    elif key in COUNTS:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or \
                not 0 <= value < 2 ** 63:
            raise ArgumentError(f"{key}: expected an integer >= 0 (int64), got {value!r}")
    elif key == "mrope_section":
        section = tuple(value) if isinstance(value, (tuple, list, np.ndarray)) else (value,)
        if len(section) != 3 or not all(isinstance(v, numbers.Integral) and
                                        not isinstance(v, bool) and 0 <= v < 2 ** 63
                                        for v in section):
            raise ArgumentError(f"mrope_section: expected 3 integers >= 0 (pairs of the "
                                f"temporal, height and width components), got {value!r}")
    elif key == "mrope_interleaved":
        flag(value, key)
    elif key in FACTOR_LISTS:
        factors = np.asarray(not_masked(value, key), dtype=object)
        if factors.ndim != 1:
            raise ArgumentError(f"{key}: expected a list of numbers, got shape {factors.shape}")
        for i, factor in enumerate(factors):
            _check_number(factor, f"{key}[{i}]", False)


class RotaryEmbedding:
    """RoPE's frequencies for one head size, as Hugging Face's rotary
    embedding (modeling_rope_utils) computes them, in double.

    RotaryEmbedding(head_dim, theta=10000.0, rope_type=None,
                    layout="half", **scaling)

    rope_type: "default", "linear", "dynamic", "yarn", "llama3" or
      "longrope" (a rope_scaling dict's "rope_type", or its older "type"
      where rope_type is None; given both, rope_type wins, as transformers
      reads them); None and no "type": "default".
    layout: "half" pairs features (i, i + D/2) as Hugging Face's rotate_half;
      "interleaved" pairs (2i, 2i + 1) as Meta's LLaMA code.
    scaling: a rope_scaling dict's keys: factor,
      original_max_position_embeddings, low_freq_factor, high_freq_factor
      (llama3), beta_fast, beta_slow, mscale, mscale_all_dim,
      attention_factor, truncate (yarn), short_factor, long_factor
      (longrope); and max_position_embeddings, seq_len (dynamic, longrope:
      see below),
      rotary_dim (partial rotary: int(head_dim * partial_rotary_factor)),
      table_size (rows precomputed, 4096 unless given); M-RoPE's
      mrope_section [t, h, w] (pairs per position component, summing to
      rotary_dim / 2; Qwen2-VL's rope_scaling type "mrope" is the default
      type with them) and mrope_interleaved (Qwen3-VL's arrangement): then
      positions may be 3-D, [3, ...] (temporal, height, width).

    axial: 2-D RoPE of vision encoders, positions (row, column), [..., 2]:
      "alternate" (Pixtral: rows the even frequencies of theta^(-2k/d), columns
      the odd), "shared" (Qwen2-VL, Qwen2.5-VL's vision encoder; with
      axial_column_first=True and layout="interleaved", Llama 4's vision
      model: each axis a rope of dim d/2); None (the default) a 1-D rope.
      The default type only; rotary_dim a multiple of 4.

    Each key is checked in its own name (ArgumentError "factor: expected a
    positive number, got ..."): numbers finite and not subnormal, lengths
    positive integers, rotary_dim and table_size integers >= 0,
    mrope_section 3 integers >= 0 and mrope_interleaved True or False
    (never a float truncated, a bool counted or a string's truth taken).

    dynamic and longrope scale by the sequence's length L.  Without
    seq_len, L is each call's largest position + 1, as transformers'
    dynamic_rope_update takes it from position_ids: past
    max_position_embeddings (dynamic) or original_max_position_embeddings
    (longrope) the call rotates by L's frequencies (dynamic: the NTK base
    for L; longrope: the long factors), else by the original ones.  Each
    call stands alone, where transformers' dynamic module keeps the
    largest L it has seen until a call falls back within the original
    length.  With seq_len, L is fixed and a position past seq_len - 1 is
    refused (ArgumentError naming seq_len).  inv_freq and attention_factor
    are those of seq_len, or of the original length.

    A RotaryEmbedding is read-only (setting an attribute raises
    AttributeError: the library's rope keeps what it was made with, so a
    changed layout, seq_len or section would no longer describe it): any
    number of threads may use it.
    """

    def __init__(self, head_dim, theta=10000.0, rope_type=None, layout="half", axial=None,
                 axial_column_first=False, **scaling):
        older = scaling.pop("type", None)  # older rope_scaling dicts' key
        if rope_type is None:  # transformers: rope_type, else type, else "default"
            rope_type = "default" if older is None else older
        # str first: a list or an array raised TypeError (unhashable) or compared elementwise
        if isinstance(rope_type, str) and rope_type == "mrope":
            rope_type = "default"  # Qwen2-VL's first configs: default, in sections
        if not isinstance(rope_type, str) or rope_type not in ROPE_TYPES:
            raise ArgumentError(f"rope_type: expected one of {', '.join(ROPE_TYPES)}, "
                                f"got {rope_type!r}")
        if not isinstance(layout, str) or layout not in LAYOUTS:
            raise ArgumentError(f'layout: expected "half" or "interleaved", got {layout!r}')
        if not (axial is None or isinstance(axial, str)) or axial not in AXIAL:
            raise ArgumentError(f'axial: expected None, "alternate" or "shared", got {axial!r}')
        if not isinstance(axial_column_first, bool):
            raise ArgumentError(f"axial_column_first: expected a bool, got {axial_column_first!r}")
        if not isinstance(head_dim, numbers.Integral) or isinstance(head_dim, bool) or \
                not 1 <= head_dim < 2 ** 63:  # True ran as 1, 2^70 raised OverflowError
            raise ArgumentError(f"head_dim: expected a positive integer (int64), "
                                f"got {head_dim!r}")
        _check_key("theta", theta)
        fields = {}
        for key, value in scaling.items():
            if key == "truncate":  # None too: transformers' `if truncate:`, no truncation
                if value is not None and not isinstance(value, (bool, np.bool_)):
                    # its truth was taken ("false", NaN truncated; [] did not), where
                    # config.json's truncate must be true, false or null
                    raise ArgumentError(f"truncate: expected True, False or None, got {value!r}")
                fields["yarn_no_truncate"] = not value
            elif value is None:  # transformers' "not given", as 0 is the library's
                continue
            elif key in FIELDS:
                _check_key(key, value)
                fields[key] = ([int(v) for v in value] if key == "mrope_section" else
                               int(value) if key in COUNTS else value)
            else:
                raise TypeError(f"RotaryEmbedding: unknown keyword {key!r}")
        self._rope = _ropeattn.Rope(head_dim, type=ROPE_TYPES[rope_type],
                                    layout=LAYOUTS[layout], theta=float(theta),
                                    axial=AXIAL[axial], axial_column_first=axial_column_first,
                                    **fields)
        # what a rope for another length is made of (_at)
        self._made_of = (head_dim, theta, rope_type, layout,
                         {k: v for k, v in scaling.items() if v is not None})
        self.seq_len = fields.get("seq_len")  # None: from each call's positions
        self._original = fields.get(BY_LENGTH.get(rope_type))  # None: not by length
        # the last ropes made for other lengths, {(length, table): rope}; a
        # dict, not an lru_cache of a bound method, which would make a cycle
        # holding every table until the garbage collector runs
        self._lengths = {}
        config = self._rope.config
        self.head_dim = config["head_dim"]
        self.rotary_dim = config["rotary_dim"]
        self.theta = config["theta"]
        self.rope_type = rope_type
        self.layout = layout
        self.mrope_section = tuple(config["mrope_section"])  # (0, 0, 0): none
        self.mrope_interleaved = config["mrope_interleaved"]
        self.axial = axial
        self.axial_column_first = config["axial_column_first"]
        self._made = True

    def __setattr__(self, name, value):
        if getattr(self, "_made", False):
            raise AttributeError(f"RotaryEmbedding is read-only: {name} (make another rope)")
        object.__setattr__(self, name, value)

    def _at(self, largest, n_tokens):
        """The rope a call uses whose largest position is largest() (-1 for
        none; called only for the ropes that depend on it) over n_tokens
        tokens: self, but for a dynamic or longrope rope
        made without seq_len whose call goes past the original length, the
        rope transformers' dynamic_rope_update recomputes for the call's
        length L = largest + 1 (dynamic: the base for L; longrope: the long
        factors, the same attention factor).  Made with seq_len, such a rope
        refuses positions past it rather than rotate by another length's
        frequencies."""
        if self._original is None:
            return self
        length = int(largest()) + 1
        if self.seq_len is not None:
            if length > self.seq_len:
                raise ArgumentError(
                    f"positions: the largest is {length - 1}, past seq_len {self.seq_len} "
                    f"that this {self.rope_type} rope was made for (its frequencies are "
                    f"length {self.seq_len}'s): make it with seq_len >= {length}, or "
                    f"without seq_len to take the length from each call's positions")
            return self
        if length <= self._original or length > MAX_POSITION + 1:
            return self  # past 2^32: the library refuses the position, naming it
        # A table of L rows costs about what L / 2 tokens' angles computed on
        # the fly do: worth it for a prefill, not for a step of generation.
        return self._for_length(length, 2 * n_tokens >= length)

    def _for_length(self, length, table):
        """The rope made for length (with a table of its rows when table,
        else of one), kept among the last 4 made."""
        rope = self._lengths.get((length, table))
        if rope is None:
            head_dim, theta, rope_type, layout, fields = self._made_of
            rows = min(fields.get("table_size", TABLE_SIZE), length) if table else 1
            rope = RotaryEmbedding(head_dim, theta, rope_type, layout,
                                   **dict(fields, seq_len=length, table_size=rows))
            for old in list(self._lengths)[:-3]:  # the oldest out; safe for threads
                self._lengths.pop(old, None)
            self._lengths[(length, table)] = rope
        return rope

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
            as transformers puts cos and sin together; with axial, [..., 2]
            are (row, column) positions and the result has shape
            positions.shape[:-1] + (rotary_dim,) (transformers' vision cos,
            sin [N, D]; Llama 4's freqs_ci as cos, sin, each angle twice in
            place with layout "interleaved")"""
        pos = as_array(positions, "positions")
        if pos.dtype.kind not in "iu":
            raise DtypeError(f"positions: expected integers, got {pos.dtype}")
        _within_int64(pos)
        if self.axial:
            if pos.ndim < 1 or pos.shape[-1] != 2:
                raise ArgumentError(f"positions: a 2-D rope takes (row, column) positions "
                                    f"[..., 2], got shape {pos.shape}")
            if pos.size == 0:
                cos = sin = np.zeros((0, self.rotary_dim // 2), np.float32)
            else:
                cos, sin = self._rope.table_axial(pos.astype(np.int64).reshape(-1, 2))
            pos = pos[..., 0]
            return self._spread(cos, sin, pos.shape)
        three = any(self.mrope_section) and pos.ndim >= 2 and pos.shape[0] == 3
        rope = self._at(lambda: pos.max() if pos.size else -1,
                        pos.size // (3 if three else 1))._rope
        if three:
            cos, sin = rope.table_mrope(pos.astype(np.int64).reshape(3, -1))
            pos = pos[0]
        else:
            cos, sin = rope.table(pos.astype(np.int64).reshape(-1))
        return self._spread(cos, sin, pos.shape)

    def _spread(self, cos, sin, shape):
        """[n, rotary_dim / 2] tables as [*shape, rotary_dim] in the layout's
        pairing: [c, c] (half) or each entry twice in place (interleaved)."""
        if self.layout == "half":
            cos, sin = np.concatenate((cos, cos), -1), np.concatenate((sin, sin), -1)
        else:
            cos, sin = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
        shape = tuple(shape) + (self.rotary_dim,)
        return cos.reshape(shape), sin.reshape(shape)

    def __repr__(self):
        axial = f", axial={self.axial!r}" if self.axial else ""
        if self.axial_column_first:
            axial += ", axial_column_first=True"
        return (f"RotaryEmbedding(head_dim={self.head_dim}, theta={self.theta}, "
                f"rope_type={self.rope_type!r}, layout={self.layout!r}, "
                f"rotary_dim={self.rotary_dim}{axial})")


def _typed(value):
    """value's type with value, a tuple's elements' each: a cache key that
    equal values of other types (True and 1, 8.0 and 8) do not share."""
    if isinstance(value, tuple):
        return tuple, tuple(_typed(v) for v in value)
    return type(value), value


@functools.lru_cache(maxsize=16)
def _cached_rope(head_dim, items):
    """RotaryEmbedding(head_dim, **keywords), items the keywords as sorted
    (key, _typed(value), value) triples: a value equal to a cached rope's
    but refused by RotaryEmbedding (theta=True beside 1, rotary_dim=8.0
    beside 8, mrope_section (4.0, 2, 2)) is checked, not served that
    rope."""
    return RotaryEmbedding(head_dim, **{key: value for key, _, value in items})


def _within_int64(ids):
    """Refuses unsigned ids past int64's range by their own value (cast to
    int64, as the library reads them, they would read negative)."""
    if ids.dtype.kind == "u" and ids.size and int(ids.max()) >= 2 ** 63:  # as Python ints
        raise ArgumentError(f"positions: {int(ids.max())} is beyond {MAX_POSITION} (2^32)")


def _axial_positions(positions, b, s):
    """C-contiguous int64 [B, S, 2] from a 2-D rope's (row, column)
    positions [S, 2] or [B, S, 2]."""
    if positions is None or isinstance(positions, numbers.Integral):
        raise ArgumentError(f"positions: a 2-D (axial) rope takes (row, column) positions "
                            f"[S, 2] or [B, S, 2], got {positions!r}")
    ids = as_array(positions, "positions")
    if ids.dtype.kind not in "iu":
        raise DtypeError(f"positions: expected integers [S, 2] or [B, S, 2], got {ids.dtype}")
    _within_int64(ids)
    if ids.shape not in ((s, 2), (b, s, 2)):
        raise ArgumentError(f"positions: a 2-D rope takes (row, column) positions "
                            f"({s}, 2) or ({b}, {s}, 2), got {ids.shape}")
    if ids.size and ids.min() < 0:
        raise ArgumentError(f"positions: {ids.min()} is negative")
    return index_copy(np.broadcast_to(ids, (b, s, 2)), "positions")


def _positions(positions, b, s, mrope=False, axial=False):
    """(start, ids): ids None or C-contiguous int64 [B, S]; with mrope (a
    rope with sections) also [3, B, S] from 3-D positions [3, S] or
    [3, B, S]; with axial (a 2-D rope) [B, S, 2] from (row, column)
    positions [S, 2] or [B, S, 2], and nothing else."""
    if axial:
        return 0, _axial_positions(positions, b, s)
    if positions is None:
        return 0, None
    if type(positions) is int or (isinstance(positions, numbers.Integral) and
                                  not isinstance(positions, bool)):
        if positions < 0:
            raise ArgumentError(f"positions: start {positions} is negative")
        if positions > MAX_POSITION:
            raise ArgumentError(f"positions: start {positions} is beyond {MAX_POSITION} (2^32)")
        return int(positions), None
    ids = as_array(positions, "positions")
    if ids.dtype.kind not in "iu":
        raise DtypeError(f"positions: expected an int, or integers [S] or [B, S], "
                         f"got {ids.dtype}")
    _within_int64(ids)
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
        return 0, index_copy(np.broadcast_to(full, (3, b, s)), "positions")
    if ids.shape not in ((s,), (b, s)):
        raise ArgumentError(f"positions: expected shape ({s},) or ({b}, {s}), got {ids.shape}")
    if ids.size and ids.min() < 0:
        raise ArgumentError(f"positions: {ids.min()} is negative")
    return 0, index_copy(np.broadcast_to(ids, (b, s)), "positions")


def _positions_of(positions, x, shape, mrope, axial=False):
    """_positions for x [B, S, heads, D] (read in the order shape names):
    positions that do not fit its S but fit its heads' axis are evidence
    of the other order, and the message names it."""
    b, s, h = x.shape[:3]
    try:
        return _positions(positions, b, s, mrope, axial)
    except ArgumentError as e:
        if positions is None or isinstance(positions, numbers.Integral):
            raise
        try:
            _positions(positions, b, h, mrope, axial)
        except ArgumentError:
            raise e from None
        other = OTHER[shape]
        order = "[B, H, S, D]" if other == "bhsd" else "[B, S, H, D]"
        raise ArgumentError(f'{e}, as x is read with shape="{shape}"; they fit x as {order}: '
                            f'pass shape="{other}"') from None


def apply_rotary(x, positions=None, rope=None, inverse=False, out=None, context=None,
                 dtype=None, shape="bshd", **rope_kwargs):
    """Rotates every head of x by its token's position (RoPE); returns the
    result (out, when given).

      x: [B, S, heads, D], float32, float16, or bfloat16 as a uint16 array
         with dtype="bfloat16" (its bits: the top half of a float32).
      positions: None (0 .. S-1), an int (start .. start+S-1), or integers
         [S] (the same in every batch row) or [B, S] (position ids); with a
         rope with mrope_section also 3-D positions [3, S] or [3, B, S]
         (Qwen2-VL's position_ids: temporal, height, width); with a 2-D
         rope (axial) (row, column) positions [S, 2] or [B, S, 2] alone
         (transformers' vision position_ids [N, 2]).
      rope: a RotaryEmbedding with head_dim D; or None, to build one from
         rope_kwargs (RotaryEmbedding's keywords; theta 10000, the default
         type and the half layout unless given).
      inverse: rotate by -angle, the transpose: RoPE's backward.
      out: an array of x's shape and dtype to write; out=x rotates in place.
         None: a new C-contiguous array.
      shape: "bshd", x [B, S, heads, D]; or "bhsd", x [B, heads, S, D]
         (transformers' q and k; read in place, out in that order too).
         Positions that fit only the other order's S are refused, naming
         it; with positions None or an int, x's order cannot be told.
      context: a ropeattn.Context, or None: the default Context, one
         thread per processor this process may run on, shared (a call
         finding it busy runs on its calling thread alone); Context(1) for
         one thread.  The same bits for any count.

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
            rope = _cached_rope(x.shape[3], tuple(sorted((key, _typed(value), value) for
                                                         key, value in rope_kwargs.items())))
        except TypeError:  # unhashable values (longrope's lists)
            rope = RotaryEmbedding(x.shape[3], **rope_kwargs)
    elif rope_kwargs:
        raise TypeError(f"apply_rotary: give rope= or rope keywords, not both "
                        f"({', '.join(rope_kwargs)})")
    elif not isinstance(rope, RotaryEmbedding):
        raise TypeError(f"rope: expected a RotaryEmbedding, got {type(rope).__name__}")
    if rope.head_dim != x.shape[3]:
        raise ArgumentError(f"x: head_dim {x.shape[3]} but the rope's is {rope.head_dim}")
    start, ids = _positions_of(positions, as_bshd(x, check_shape(shape)), shape,
                               any(rope.mrope_section), bool(rope.axial))
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
    b, s = as_bshd(x, shape).shape[:2]
    rope = rope._at(lambda: start + s - 1 if ids is None else ids.max(), b * s)
    _ropeattn.rope_apply(rope._rope, context, as_bshd(out, shape), as_bshd(src, shape), code,
                         start, ids, flag(inverse, "inverse"))
    return out


VISION_MODELS = ("pixtral", "qwen2_vl", "llama4")


def _grid(entry, n, model):
    """A grid entry: n positive integers."""
    values = tuple(entry) if isinstance(entry, (tuple, list, np.ndarray)) else (entry,)
    if len(values) != n or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                   and v > 0 for v in values):
        shape = "(t, h, w)" if n == 3 else "(h, w)"
        raise ArgumentError(f"grids: {model} takes {shape} of positive integers, got {entry!r}")
    return tuple(int(v) for v in values)


def vision_positions(model, grids, spatial_merge_size=1):
    """(row, column) positions, int64 [N, 2], of the patches of one or more
    images packed one after another, as each vision encoder lays them out
    (docs/ROPE.md "2-D RoPE"), for apply_rotary with its 2-D rope:

      "pixtral": grids [(h, w), ...]: each image's h x w patches row-major
        from (0, 0) (PixtralVisionModel.forward's meshgrid).
      "qwen2_vl" (Qwen2-VL, Qwen2.5-VL): grids [(t, h, w), ...], grid_thw:
        each image's patches in spatial_merge_size x spatial_merge_size
        blocks, block-major, its t frames alike
        (vision_utils.get_vision_position_ids); h and w multiples of
        spatial_merge_size.
      "llama4": grids [(h, w), ...] (the image_size / patch_size square):
        patch p at (p // w + 1, p % w + 1), then the CLS token at (0, 0),
        whose frequencies Llama4VisionRotaryEmbedding zeroes."""
    if model not in VISION_MODELS:
        raise ArgumentError(f"model: expected one of {', '.join(VISION_MODELS)}, got {model!r}")
    merge = spatial_merge_size
    if not isinstance(merge, numbers.Integral) or isinstance(merge, bool) or merge < 1 or \
            (model != "qwen2_vl" and merge != 1):
        raise ArgumentError(f"spatial_merge_size: expected a positive integer (qwen2_vl) or 1, "
                            f"got {merge!r}")
    out = []
    for entry in grids:
        if model == "qwen2_vl":
            t, h, w = _grid(entry, 3, model)
            if h % merge or w % merge:
                raise ArgumentError(f"grids: ({t}, {h}, {w}): h and w must be multiples of "
                                    f"spatial_merge_size {merge}")
            rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
            shape = (h // merge, merge, w // merge, merge)
            rows = rows.reshape(shape).transpose(0, 2, 1, 3).reshape(-1)
            cols = cols.reshape(shape).transpose(0, 2, 1, 3).reshape(-1)
            out.append(np.tile(np.stack([rows, cols], -1), (t, 1)))
            continue
        h, w = _grid(entry, 2, model)
        rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        grid = np.stack([rows.reshape(-1), cols.reshape(-1)], -1)
        if model == "llama4":
            grid = np.concatenate([grid + 1, np.zeros((1, 2), grid.dtype)])
        out.append(grid)
    if not out:
        return np.zeros((0, 2), np.int64)
    return np.ascontiguousarray(np.concatenate(out), dtype=np.int64)


def freqs(head_dim, end, theta=10000.0):
    """Meta's LLaMA reference code's precompute_freqs_cis(head_dim, end,
    theta) as two real tables (ra_precompute_freqs):

      cos[m, i] = cos(m * theta ** (-2 i / head_dim)),  sin[m, i] = sin(...)
      for m in [0, end), i in [0, head_dim // 2)

    Returns (cos, sin), float32 [end, head_dim // 2]: the real and imaginary
    parts of freqs_cis.  The angle is formed in double and rounded once, so
    every entry is within 1e-6 of exact math up to position 2^32 (the
    reference code forms it in float32 and drifts with m).  head_dim even
    and >= 2, end in [0, 2^32 + 1], theta finite and > 0, not subnormal
    (else ArgumentError, with the library's message)."""
    for value, name in ((head_dim, "head_dim"), (end, "end")):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or \
                not -2 ** 63 <= value < 2 ** 63:
            raise ArgumentError(f"{name}: expected an integer (int64), got {value!r}")
    if not isinstance(theta, numbers.Real) or isinstance(theta, bool):
        raise ArgumentError(f"theta: expected a number, got {theta!r}")
    if end == 0:  # an empty table, once the library accepts head_dim and theta
        cos, sin = _ropeattn.precompute_freqs(int(head_dim), 1, float(theta))
        return cos[:0].copy(), sin[:0].copy()
    return _ropeattn.precompute_freqs(int(head_dim), int(end), float(theta))


__all__ = ["RotaryEmbedding", "apply_rotary", "freqs", "vision_positions"]