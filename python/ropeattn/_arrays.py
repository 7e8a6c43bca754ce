"""Argument checks shared by the functions: arrays of [B, S, heads, D], their
dtypes as the library numbers them, and the copy made of an input whose
strides the library cannot take."""
import numpy as np

from ._ropeattn import ArgumentError, DtypeError
# maps(a): whether the library can read a in place: aligned, strides
# non-negative whole elements, the last axis contiguous (in C: it sits on
# every call's path).
from ._ropeattn import maps

# ra_dtype: RA_F32, RA_F16, RA_BF16, RA_BOOL (ropeattn.h; RA_BOOL: attn_mask only).
F32, F16, BF16, BOOL = 0, 1, 2, 24
NAMES = {F32: "float32", F16: "float16", BF16: 'uint16 with dtype="bfloat16"'}
CODES = {np.dtype(np.float32): F32, np.dtype(np.float16): F16}


def dtype_code(a, name, dtype=None, allowed=(F32, F16, BF16)):
    """The ra_dtype of array a: float32, float16, or bfloat16 when dtype is
    "bfloat16" and a holds its bits as uint16."""
    if dtype == "bfloat16" and BF16 in allowed:
        if a.dtype != np.uint16:
            raise DtypeError(f'{name}: dtype="bfloat16" takes a uint16 array of bfloat16 '
                             f'bits, got {a.dtype}')
        return BF16
    if dtype is not None:
        raise DtypeError(f'{name}: dtype= takes only "bfloat16", got {dtype!r}')
    code = CODES.get(a.dtype)
    if code not in allowed:
        hint = ' (bfloat16 bits? pass dtype="bfloat16")' if a.dtype == np.uint16 else ""
        raise DtypeError(f"{name}: expected {' or '.join(NAMES[c] for c in allowed)} "
                         f"(native byte order), got {a.dtype}{hint}")
    return code


def flag(value, name):
    """value, True or False (Python's or NumPy's), as a bool; ArgumentError
    naming it for anything else, whose truth would decide silently (None
    reads as False, "no" as True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def not_masked(value, name):
    """value, unless a NumPy masked array: its mask would be dropped and the
    masked entries computed with (DtypeError naming it)."""
    if isinstance(value, np.ma.MaskedArray):
        raise DtypeError(f"{name}: a masked array (numpy.ma), whose mask the library would "
                         f"ignore: pass np.ma.filled(a, value) or a.data")
    return value


def as_array(value, name):
    """np.asarray(value), an ArgumentError naming it where NumPy cannot make
    one array of it (ragged lists), or a masked array (not_masked)."""
    not_masked(value, name)
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as e:
        raise ArgumentError(f"{name}: not an array: {e}") from None


def array4(a, name):
    """a as an ndarray of 4 dimensions [B, S, heads, D] with no empty axis."""
    if not isinstance(a, np.ndarray):
        raise DtypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
    not_masked(a, name)
    if a.ndim != 4:
        raise ArgumentError(f"{name}: expected 4 dimensions [B, S, heads, D], "
                            f"got shape {a.shape}")
    if 0 in a.shape:
        raise ArgumentError(f"{name}: an empty axis in shape {a.shape}")
    return a


# The order of a 4-D array's axes: "bshd", [B, S, heads, D], the library's,
# or "bhsd", [B, heads, S, D], as PyTorch's scaled_dot_product_attention and
# transformers' attention take q, k and v, read through a transposed view.
SHAPES = ("bshd", "bhsd")
OTHER = {"bshd": "bhsd", "bhsd": "bshd"}


def check_shape(shape):
    if shape not in SHAPES:
        raise ArgumentError(f'shape: expected "bshd" or "bhsd", got {shape!r}')
    return shape


def as_bshd(a, shape):
    """a as [B, S, heads, D]: itself for shape "bshd", for "bhsd" the
    transposed view of a [B, heads, S, D] array (no copy; also the way
    back)."""
    return a if shape == "bshd" else a.transpose(0, 2, 1, 3)


def c_array(a, dtype=None):
    """a as a C-contiguous, aligned array (of dtype): itself when it is one,
    else a copy.  np.ascontiguousarray alone keeps an unaligned array (one
    from np.frombuffer at an odd offset) as it is."""
    return np.require(a, dtype, ("C", "A"))


def index_copy(a, name):
    """a as a new C-contiguous int64 array: indices (positions, cu_seqlens,
    sequence ids) that the library checks and then reads again while the GIL
    is released, so never the caller's memory, which another thread could
    change in between (past the checks: rows out of range).  Unsigned
    values past int64 are an ArgumentError naming name and the value (cast,
    they read negative: the library named -1 for 2^64 - 1)."""
    if a.dtype.kind == "u" and a.size and int(a.max()) >= 2 ** 63:
        raise ArgumentError(f"{name}: {int(a.max())} is beyond int64 (2^63 - 1)")
    return np.array(a, dtype=np.int64, order="C", copy=True)


def input_view(a):
    """a itself when the library can read it in place, else a C-contiguous,
    aligned copy."""
    return a if maps(a) else c_array(a)


def padding_mask(mask, b, s, name):
    """A [B, S] mask of 0 (padding) and 1 (token), bools or integers ([S]
    when B is 1), as C-contiguous uint8."""
    m = as_array(mask, name)
    if m.dtype != np.bool_ and m.dtype.kind not in "iu":
        raise DtypeError(f"{name}: expected integers or bools, got {m.dtype}")
    if m.shape not in ((b, s),) + (((s,),) if b == 1 else ()):
        raise ArgumentError(f"{name}: expected shape ({b}, {s}), got {m.shape}")
    if m.size and (m.min() < 0 or m.max() > 1):
        raise ArgumentError(f"{name}: expected 0 (padding) and 1 (token) only")
    return c_array(m.reshape(b, s), np.uint8)


def attn_mask(mask, shape4, dtype, name="attn_mask"):
    """PyTorch SDPA's attn_mask as the library reads it: (a 4-D view
    [B, H, Sq, Sk] of shape4, ra_dtype).  mask: 0 to 4 dimensions,
    broadcastable to shape4 as NumPy (and SDPA) broadcast, an extent of 1
    or a missing leading axis repeating; bool (True: may attend) or
    additive float32, float16, or bfloat16 bits in uint16 with
    dtype="bfloat16".  Read in place through np.broadcast_to's zero
    strides; copied only when its strides are negative or not whole
    elements, or it is unaligned.  Integers and float64 are refused
    (SDPA takes bool or the queries' float dtype): mask.astype(bool) or
    .astype(np.float32) says which conversion is meant."""
    m = as_array(mask, name)
    if m.dtype == np.bool_:
        code = BOOL
    elif m.dtype == np.uint16 and dtype == "bfloat16":
        code = BF16
    elif m.dtype in CODES:
        code = CODES[m.dtype]
    else:
        hint = {"i": " (0/1 integers: mask.astype(bool), True = may attend)",
                "u": " (0/1 integers: mask.astype(bool), True = may attend)",
                "f": " (float64: .astype(np.float32); values past float32's range become "
                     "-inf there)"}.get(m.dtype.kind, "")
        if m.dtype == np.uint16:
            hint = ' (bfloat16 bits? pass dtype="bfloat16")'
        raise DtypeError(f"{name}: expected bool (True: may attend) or additive float32, "
                         f"float16 or bfloat16, got {m.dtype}{hint}")
    if m.ndim > 4:
        raise ArgumentError(f"{name}: {m.ndim} dimensions {m.shape}: at most 4, broadcast to "
                            f"[B, H, Sq, Sk] = {tuple(shape4)}")
    try:
        view = np.broadcast_to(m, shape4)
    except ValueError:
        raise ArgumentError(f"{name}: shape {m.shape} does not broadcast to [B, H, Sq, Sk] = "
                            f"{tuple(shape4)}") from None
    if not view.flags.aligned or any(s < 0 or s % view.itemsize
                                     for n, s in zip(view.shape, view.strides) if n > 1):
        view = np.broadcast_to(c_array(m), shape4)
    return view, code
