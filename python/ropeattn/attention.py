"""attention: grouped-query attention (ra_attention), causal or not, keys
of any length, SDPA's attn_mask; its forward with the log-sum-exp and its
backward (ra_attention_forward_lse, ra_attention_backward), and one block
of a longer causal attention, queries and keys at given positions
(ra_attention_block_lse, ra_attention_block_backward): decoding and
chunked prefill."""
import numbers

import numpy as np

from . import _ropeattn
from ._arrays import (BF16, F16, F32, OTHER, array4, as_array, as_bshd, attn_mask, c_array,
                      check_shape, dtype_code, flag, index_copy, input_view, maps)
from ._arrays import padding_mask as _padding_mask
from ._ropeattn import ArgumentError, DtypeError, UnsupportedError


def _positive(value, name, kind):
    if value is None:
        return 0
    if not isinstance(value, kind) or isinstance(value, bool) or not value > 0:
        raise ArgumentError(f"{name}: expected a positive number or None, got {value!r}")
    if isinstance(value, numbers.Integral) and value >= 2 ** 63:  # an OverflowError unnamed
        raise ArgumentError(f"{name}: {value} is beyond int64 (2^63 - 1)")
    return value


def _shape_problem(q, k, v, sinks, padding_mask, cu_seqlens, block):
    """What q's [B, Sq, H, D], k's and v's [B, Sk, Hkv, D] shapes (tuples)
    and the options' say against each other, or None.  Sk is free (the
    library aligns the causal diagonal bottom-right); the masks' arrays
    span q's Sq, or with block (q_start, k_start, seq) the sequence of seq
    tokens."""
    b, s, h, d = q
    if k != v:
        return f"k, v: shapes differ, {k} and {v}"
    if k[0] != b or k[3] != d:
        return f"k: expected shape ({b}, Sk, Hkv, {d}) for q {q}, got {k}"
    if block is not None:
        s = block[2]
    if h % k[2]:
        return f"q has {h} heads, not a multiple of k's {k[2]}"
    if sinks is not None and sinks.shape != (h,):
        return f"sinks: expected shape ({h},), got {sinks.shape}"
    if padding_mask is not None and np.shape(padding_mask) not in \
            ((b, s),) + (((s,),) if b == 1 else ()):
        return f"padding_mask: expected shape ({b}, {s}), got {np.shape(padding_mask)}"
    if cu_seqlens is not None and cu_seqlens[-1] != s:
        return f"cu_seqlens: ends at {cu_seqlens[-1]}, not at the sequence's length {s}"
    return None


def _block(q_start, k_start, seq):
    """(q_start, k_start, seq) as the block calls take them: whole numbers,
    the starts >= 0, seq >= 0 (the library checks them against the rows)."""
    for value, name in ((q_start, "q_start"), (k_start, "k_start"), (seq, "seq")):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or \
                not 0 <= value < 2 ** 63:
            raise ArgumentError(f"{name}: expected a whole number >= 0 (int64), got {value!r}")
    return int(q_start), int(k_start), int(seq)


def _check_shapes(q, k, v, shape, *options):
    """Refuses shapes that do not fit together as [B, S, heads, D] arrays;
    where they would as the other shape's, the message says so: evidence
    of a [B, H, S, D] array given as [B, S, H, D] (or the reverse)."""
    problem = _shape_problem(q.shape, k.shape, v.shape, *options)
    if problem is None:
        return
    swap = tuple((a.shape[0], a.shape[2], a.shape[1], a.shape[3]) for a in (q, k, v))
    if shape == "bhsd":
        problem += " (q, k, v as [B, S, heads, D] from shape=\"bhsd\")"
    if _shape_problem(*swap, *options) is None:
        other = OTHER[shape]
        problem += (f'; they fit as {"[B, H, S, D]" if other == "bhsd" else "[B, S, H, D]"}: '
                    f'pass shape="{other}"')
    raise ArgumentError(problem)


class _Call:
    """attention's arguments, checked, as the extension takes them."""

    def __init__(self, q, k, v, causal, window, chunk, sinks, softcap, scale, padding_mask,
                 cu_seqlens, dropout_p, seed, dtype, shape, mask=None, block=None):
        self.shape = check_shape(shape)
        q, k, v = (as_bshd(array4(a, name), shape) for a, name in ((q, "q"), (k, "k"), (v, "v")))
        # dtype="bfloat16" names the bits of q's or k's and v's uint16 arrays
        # (or attn_mask's); the other may be float32 or float16
        if dtype is not None and (dtype != "bfloat16" or np.uint16 not in
                                  (q.dtype, k.dtype, getattr(mask, "dtype", None))):
            raise DtypeError(f'dtype: {dtype!r} names no array: dtype="bfloat16" names the '
                             f'bits of q, k and v or attn_mask held as uint16, got q '
                             f'{q.dtype}, k {k.dtype}')
        causal = flag(causal, "causal")
        self.qd = dtype_code(q, "q", dtype if q.dtype == np.uint16 else None)
        self.kv = dtype_code(k, "k", dtype if k.dtype == np.uint16 else None)
        if v.dtype != k.dtype:
            raise DtypeError(f"v: expected k's dtype {k.dtype}, got {v.dtype}")
        if sinks is not None:
            sinks = as_array(sinks, "sinks")
            if sinks.dtype.kind not in "fiu":  # complex lost its imaginary part, bools counted
                raise DtypeError(f"sinks: expected real numbers [H], got {sinks.dtype}")
            sinks = c_array(sinks, np.float32)
        if cu_seqlens is not None:
            docs = as_array(cu_seqlens, "cu_seqlens")
            if docs.ndim != 1 or docs.size < 2 or docs.dtype.kind not in "iu":
                raise ArgumentError("cu_seqlens: expected integers [n_documents + 1]")
            cu_seqlens = index_copy(docs, "cu_seqlens")
        if padding_mask is not None:
            padding_mask = as_array(padding_mask, "padding_mask")
        _check_shapes(q, k, v, shape, sinks, padding_mask, cu_seqlens, block)
        b, s = q.shape[0], q.shape[1] if block is None else block[2]
        if padding_mask is not None:
            padding_mask = _padding_mask(padding_mask, b, s, "padding_mask")
        if not isinstance(dropout_p, numbers.Real) or isinstance(dropout_p, bool) or \
                not 0.0 <= dropout_p < 1.0:
            raise ArgumentError(f"dropout_p: expected a probability in [0, 1), "
                                f"got {dropout_p!r}")
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or \
                not 0 <= seed < 2 ** 64:  # a bool ran as seed 0 or 1
            raise ArgumentError(f"seed: expected an integer in [0, 2^64), got {seed!r}")
        self.q, self.k, self.v = input_view(q), input_view(k), input_view(v)
        self.sinks = sinks
        if mask is not None:
            mask, mask_dtype = attn_mask(mask, (q.shape[0], q.shape[2], q.shape[1],
                                                k.shape[1]), dtype)
        # the options after the arrays, in the extension's order
        self.options = (float(_positive(scale, "scale", numbers.Real)),
                        float(_positive(softcap, "softcap", numbers.Real)),
                        int(_positive(window, "window", numbers.Integral)),
                        int(_positive(chunk, "chunk", numbers.Integral)), sinks, padding_mask,
                        cu_seqlens, float(dropout_p), int(seed), not causal) + \
            (() if mask is None else ((mask, mask_dtype),))


def _output(out, shape, name):
    """out, checked as a float32 array of shape the library writes in place;
    a new one when None."""
    if out is None:
        return np.empty(shape, np.float32)
    if not isinstance(out, np.ndarray) or out.shape != tuple(shape) or out.dtype != np.float32:
        raise ArgumentError(f"{name}: expected a float32 array of shape {tuple(shape)}")
    if not maps(out):
        raise ArgumentError(f"{name}: strides must be non-negative whole elements with the "
                            f"last axis contiguous, and the array aligned")
    return out


def attention(q, k, v, causal=True, window=None, chunk=None, sinks=None, softcap=None,
              scale=None, padding_mask=None, cu_seqlens=None, dropout_p=0.0, seed=0,
              out=None, context=None, dtype=None, shape="bshd", attn_mask=None):
    """out = softmax(scale * q k^T + mask) v per query head, query head h
    reading key/value head h // (H // Hkv) (GQA, no copy of k or v).

      q: [B, Sq, H, D]; k, v: [B, Sk, Hkv, D] (Sk of any length: cross
         attention, or Sq new tokens after Sk - Sq earlier ones); each
         float32, float16, or
         bfloat16 bits in uint16 arrays with dtype="bfloat16" (widened to
         float32 exactly; with all three bfloat16 on a CPU with AMX-BF16 or
         AVX512-BF16, both products run on its bf16 units, the
         probabilities rounded to bfloat16 before P v: within 2^-8 max|v|
         of the float32 result, as the C library states); any non-negative strides with the last axis contiguous
         are read in place (e.g. heads of a fused QKV array), others copied
         first.
      causal: query i sees keys j <= i + Sk - Sq (the diagonal aligned
         bottom-right, as flash-attn and SDPA's causal_lower_right: the last
         query sees every key; j <= i when Sq = Sk).  PyTorch's
         is_causal=True with Sq != Sk is top-left aligned instead: give
         that one as an attn_mask.  causal=False: every query may see every
         key (encoders), the other masks still applying.
      window: W: query i sees keys i' - W < j <= i' (W keys, its own
         included), i' = i + Sk - Sq; without causal both ways,
         |i' - j| < W.
      chunk: C: query i sees keys of its own chunk of C tokens, counted from
         the row's first real token (Llama 4).
      sinks: [H] logits, one per query head, added to every softmax's
         denominator (gpt-oss): p_j = e^s_j / (sum_k e^s_k + e^sinks[h]).
      softcap: c: logits become c * tanh(s / c) (Gemma 2).
      scale: the logit scale, 1 / sqrt(D) when None.
      padding_mask: [B, S] of 0 and 1, 1 = a real token (Hugging Face's
         attention_mask): padding keys are never seen, and a padding
         query's output row is 0.  padding_mask, cu_seqlens and chunk
         name one sequence: with Sq != Sk the library refuses them
         (UnsupportedError); give attn_mask instead.
      cu_seqlens: [n + 1] integers, 0 = c[0] < ... < c[n] = S: packed
         documents, the same in every batch row; no token sees another
         document's.
      dropout_p, seed: dropout on the probabilities as in training, from a
         counter-based generator keyed by seed (the same for any threads).
      out: a float32 [B, S, H, D] array to write (reused across calls, no
         fresh memory), not overlapping q, k or v; None: a new array.
      context: a ropeattn.Context, or None: the default Context, one
         thread per processor this process may run on, shared (a call
         finding it busy runs on its calling thread alone); Context(1) for
         one thread.  The same bits for any count.
      shape: "bshd", q [B, S, H, D], k, v [B, S, Hkv, D]; or "bhsd", q
         [B, H, S, D], k, v [B, Hkv, S, D] (PyTorch's and transformers'
         order; read in place, out in that order too).  Shapes that fit
         only the other order are refused, naming it; q, k, v of equal
         head counts fit both, and the order cannot be told from them.
      attn_mask: PyTorch SDPA's attn_mask, any shape that broadcasts to
         [B, H, Sq, Sk] (0-D to 4-D, e.g. [Sq, Sk], [B, 1, Sq, Sk]; always
         in that order, whatever shape= says), read in place (broadcast
         through zero strides, no copy; arrays of negative or odd strides
         are copied): bool, True = may attend; or additive float32,
         float16, or bfloat16 bits (uint16 with dtype="bfloat16"), added
         to the logits after scale and softcap, each value finite or -inf
         (NaN or +inf: ArgumentError naming the index).  Integer and
         float64 masks are refused (DtypeError): .astype(bool) or
         .astype(np.float32) says which is meant.  It combines with every
         other mask (a key is seen when all allow it) and with sinks.
    A query that sees no key (all masked, by any combination) gives a zero
    output row (lse -inf; with sinks the sink) and zero gradients, as
    PyTorch 2.5+'s SDPA; a row whose additive values are finite but huge
    negative (transformers' finfo.min) is not fully masked and averages v,
    as SDPA does.  The mask gets no gradient.
    Returns out.  Softmax and sums in float32.  The GIL is released while
    the kernel runs.
    """
    call = _Call(q, k, v, causal, window, chunk, sinks, softcap, scale, padding_mask,
                 cu_seqlens, dropout_p, seed, dtype, shape, attn_mask)
    out = _output(out, as_bshd(call.q, shape).shape, "out")
    _ropeattn.attention(context, as_bshd(out, shape), None, call.q, call.k, call.v, call.qd,
                        call.kv, *call.options)
    return out


def attention_forward(q, k, v, causal=True, window=None, chunk=None, sinks=None, softcap=None,
                      scale=None, padding_mask=None, cu_seqlens=None, dropout_p=0.0, seed=0,
                      context=None, dtype=None, shape="bshd", attn_mask=None):
    """attention's forward for training: (out, lse), out float32 [B, Sq, H,
    D] (or [B, H, Sq, D] with shape="bhsd") as attention() gives it, lse
    float32 [B, H, Sq] the log-sum-exp of each query row's scaled
    (soft-capped, masked) logits, sink included; -inf for a query that sees
    no key (a padding query, a fully masked row).
    attention_backward takes both."""
    call = _Call(q, k, v, causal, window, chunk, sinks, softcap, scale, padding_mask,
                 cu_seqlens, dropout_p, seed, dtype, shape, attn_mask)
    b, s, h, _ = call.q.shape
    out = np.empty(as_bshd(call.q, shape).shape, np.float32)
    lse = np.empty((b, h, s), np.float32)
    _ropeattn.attention(context, as_bshd(out, shape), lse, call.q, call.k, call.v, call.qd,
                        call.kv, *call.options)
    return out, lse


def _gradient_inputs(call, dout, out, lse, shape):
    """dout and out checked as float32 arrays of q's shape (as given), as
    [B, S, H, D] views the library reads, and lse as float32 [B, H, S]."""
    q_shape = as_bshd(call.q, shape).shape  # as given
    dout = array4(dout, "dout")
    dtype_code(dout, "dout", allowed=(F32,))
    out = array4(out, "out")
    dtype_code(out, "out", allowed=(F32,))
    if dout.shape != q_shape or out.shape != q_shape:
        raise ArgumentError(f"dout, out: expected q's shape {q_shape}, "
                            f"got {dout.shape} and {out.shape}")
    b, s, h, _ = call.q.shape
    lse = as_array(lse, "lse")
    if lse.shape != (b, h, s) or lse.dtype != np.float32:
        raise ArgumentError(f"lse: expected float32 of shape ({b}, {h}, {s}) from "
                            f"attention_forward")
    return input_view(as_bshd(dout, shape)), input_view(as_bshd(out, shape)), c_array(lse)


def attention_backward(dout, q, k, v, out, lse, causal=True, window=None, chunk=None,
                       sinks=None, softcap=None, scale=None, padding_mask=None,
                       cu_seqlens=None, dropout_p=0.0, seed=0, context=None, dtype=None,
                       shape="bshd", attn_mask=None):
    """The backward of out = attention(q, k, v, ...) with the same keywords:
    given dout = dL/dout [B, S, H, D] and the forward's out and lse
    (attention_forward), returns (dq, dk, dv, dsinks): float32 arrays of
    q's, k's and v's shapes, and dL/dsinks [H] when sinks are given (else
    None).  Dropout's masks are regenerated from seed.  attn_mask, the same
    as the forward's, gets no gradient (the library gives none); rows that
    saw no key give zero gradients."""
    call = _Call(q, k, v, causal, window, chunk, sinks, softcap, scale, padding_mask,
                 cu_seqlens, dropout_p, seed, dtype, shape, attn_mask)
    dout, out, lse = _gradient_inputs(call, dout, out, lse, shape)
    h = call.q.shape[2]
    # each gradient in its input's order
    dq, dk, dv = (np.empty(as_bshd(a, shape).shape, np.float32)
                  for a in (call.q, call.k, call.v))
    dsinks = None if call.sinks is None else np.empty(h, np.float32)
    _ropeattn.attention_backward(context, *(as_bshd(a, shape) for a in (dq, dk, dv)), dsinks,
                                 dout, call.q, call.k, call.v, out, lse, call.qd, call.kv,
                                 *call.options)
    return dq, dk, dv, dsinks


def attention_block_forward(q, k, v, q_start, k_start, seq, causal=True, window=None,
                            chunk=None, sinks=None, softcap=None, scale=None,
                            padding_mask=None, cu_seqlens=None, dropout_p=0.0, seed=0,
                            context=None, dtype=None, shape="bshd"):
    """One block of a longer causal attention (ra_attention_block_lse):
    query row i is the token at position q_start + i, key row j the one at
    k_start + j, of a sequence of seq tokens; query i sees key j when
    k_start + j <= q_start + i and the masks allow (window, chunk counted
    from each row's leading padding, padding_mask and cu_seqlens indexed by
    position: [B, seq] and [n + 1] ending at seq).  A decode step is q_start
    = seq - 1, k_start = 0; a sliding-window cache holding the last Sk
    tokens has k_start = seq - Sk.  Returns (out, lse) as
    attention_forward's: out float32 [B, Sq, H, D] (or "bhsd"), lse
    [B, H, Sq], 0 and -inf for a row that sees no key (sinks: the sink).
      q: [B, Sq, H, D]; k, v: [B, Sk, Hkv, D]; the rest as attention's."""
    block = _block(q_start, k_start, seq)
    call = _Call(q, k, v, causal, window, chunk, sinks, softcap, scale, padding_mask,
                 cu_seqlens, dropout_p, seed, dtype, shape, block=block)
    b, s, h, _ = call.q.shape
    out = np.empty(as_bshd(call.q, shape).shape, np.float32)
    lse = np.empty((b, h, s), np.float32)
    _ropeattn.attention_block(context, as_bshd(out, shape), lse, call.q, call.k, call.v,
                              call.qd, call.kv, *block, *call.options)
    return out, lse


def _dsinks(sinks, dout, out, lse):
    """dL/dsinks [H] = -sum over b, i of e^(sinks[h] - lse) rowsum(dout *
    out), as ra_attention_backward forms it; rows that see nothing (lse
    -inf, out 0) add 0.  dout, out [B, Sq, H, D]; lse [B, H, Sq]."""
    delta = np.einsum("bihd,bihd->bhi", dout, out, dtype=np.float64)
    seen = np.isfinite(lse)
    p_sink = np.exp(np.where(seen, sinks[None, :, None] - lse, -np.inf), dtype=np.float64)
    return (-(p_sink * delta).sum((0, 2))).astype(np.float32)


def attention_block_backward(dout, q, k, v, out, lse, q_start, k_start, seq, causal=True,
                             window=None, chunk=None, sinks=None, softcap=None, scale=None,
                             padding_mask=None, cu_seqlens=None, dropout_p=0.0, seed=0,
                             context=None, dtype=None, shape="bshd"):
    """The backward of attention_block_forward with the same arguments
    (ra_attention_block_backward, one block alone): given dout [B, Sq, H,
    D] and the forward's out and lse, returns (dq, dk, dv, dsinks) as
    attention_backward's (dsinks summed here: the library leaves it to the
    caller)."""
    block = _block(q_start, k_start, seq)
    call = _Call(q, k, v, causal, window, chunk, sinks, softcap, scale, padding_mask,
                 cu_seqlens, dropout_p, seed, dtype, shape, block=block)
    dout, out, lse = _gradient_inputs(call, dout, out, lse, shape)
    dq, dk, dv = (np.zeros(as_bshd(a, shape).shape, np.float32)  # accumulated into
                  for a in (call.q, call.k, call.v))
    _ropeattn.attention_block_backward(context, *(as_bshd(a, shape) for a in (dq, dk, dv)),
                                       None, dout, call.q, call.k, call.v, out, lse, call.qd,
                                       call.kv, *block, *call.options)
    dsinks = None if call.sinks is None else _dsinks(call.sinks, dout, out, lse)
    return dq, dk, dv, dsinks


__all__ = ["attention", "attention_backward", "attention_block_backward",
           "attention_block_forward", "attention_forward"]
