/* attention.c — ra_attention, ra_attention_forward_lse, ra_attention_backward
 * and the block calls (ra_attention_block_lse, ra_attention_block_backward)
 * on strided views, their options as arguments. */
#include "ext.h"

/* A C-contiguous, aligned array of n elements of type `type` (NPY_*), or 0
 * with ValueError naming it; None gives *p = NULL.  writable: for an output. */
static int contiguous(PyObject *obj, int type, npy_intp n, int writable, const char *name,
                      void **p)
{
    *p = NULL;
    if (obj == Py_None) return 1;
    PyArrayObject *a = (PyArrayObject *)obj;
    if (!PyArray_Check(obj) || PyArray_TYPE(a) != type || !PyArray_ISCARRAY_RO(a) ||
        PyArray_SIZE(a) != n || (writable && !PyArray_ISWRITEABLE(a))) {
        PyErr_Format(ra_ext_value_error, "%s: expected a C-contiguous, aligned%s array of %zd "
                     "elements of the right dtype", name, writable ? ", writable" : "",
                     (Py_ssize_t)n);
        return 0;
    }
    *p = PyArray_DATA(a);
    return 1;
}

/* The options' arrays, for q's [B, S, H, D] and a sequence of seq tokens
 * (S, or a block's): sinks float32 [H], dsinks float32 [H] (written; None:
 * not computed), padding_mask uint8 [B, seq], cu_seqlens int64
 * [n_documents + 1]; each None or C-contiguous. */
static int option_arrays(ra_attention_options *o, const ra_tensor *q, int64_t seq,
                         PyObject *sinks, PyObject *dsinks, PyObject *padding,
                         PyObject *documents)
{
    void *p;
    if (!contiguous(sinks, NPY_FLOAT32, (npy_intp)q->shape[2], 0, "sinks", &p)) return 0;
    o->sinks = p;
    if (!contiguous(dsinks, NPY_FLOAT32, (npy_intp)q->shape[2], 1, "dsinks", &p)) return 0;
    o->dsinks = p;
    if (!contiguous(padding, NPY_UINT8, (npy_intp)(q->shape[0] * seq), 0, "padding_mask", &p))
        return 0;
    o->padding_mask = p;
    if (documents == Py_None) return 1;
    if (!PyArray_Check(documents) || PyArray_SIZE((PyArrayObject *)documents) < 2) {
        PyErr_SetString(ra_ext_value_error, "cu_seqlens: expected int64 [n_documents + 1]");
        return 0;
    }
    o->n_documents = (int64_t)PyArray_SIZE((PyArrayObject *)documents) - 1;
    if (!contiguous(documents, NPY_INT64, (npy_intp)o->n_documents + 1, 0, "cu_seqlens", &p))
        return 0;
    o->cu_seqlens = p;
    return 1;
}

/* The options every attention function ends its arguments with, from
 * args[first:]: scale, softcap, window, chunk (0 for none, as
 * ra_attention_options has them), sinks, padding_mask, cu_seqlens (None or
 * arrays: option_arrays), dropout, seed, non_causal, and optionally the
 * pair (attn_mask, its ra_dtype), a 4-D array (ra_ext_mask_tensor).  (The pair:
 * a call of 20 arguments or more no longer takes its tuple from Python's
 * free list, and measured memory grows for the first thousand calls.) */
typedef struct options {
    ra_attention_options o;
    PyObject *sinks, *padding, *documents;
    ra_tensor mask; /* o.attn_mask points here */
} options;

static int parse_options(PyObject *args, Py_ssize_t first, const char *name, options *opt)
{
    opt->o = ra_attention_options_init();
    unsigned long long seed;
    float dropout;
    PyObject *tail = PyTuple_GetSlice(args, first, PyTuple_GET_SIZE(args));
    if (!tail) return 0;
    char format[64];
    PyObject *mask = Py_None;
    int mask_dtype = 0;
    snprintf(format, sizeof format, "ddLLOOOfKp|(Oi):%s", name);
    int ok = PyArg_ParseTuple(tail, format, &opt->o.scale, &opt->o.softcap, &opt->o.window,
                              &opt->o.chunk, &opt->sinks, &opt->padding, &opt->documents,
                              &dropout, &seed, &opt->o.non_causal, &mask, &mask_dtype);
    Py_DECREF(tail);
    opt->o.dropout = dropout;
    opt->o.seed = (uint64_t)seed;
    if (!ok || mask == Py_None) return ok;
    if (!ra_ext_mask_tensor(mask, mask_dtype, &opt->mask)) return 0;
    opt->o.attn_mask = &opt->mask;
    return 1;
}

/* The arguments before the options, args[:n] (n of the format's). */
static PyObject *head(PyObject *args, Py_ssize_t n, const char *name)
{
    if (PyTuple_GET_SIZE(args) < n) {
        PyErr_Format(PyExc_TypeError, "%s: expected at least %zd arguments", name, n);
        return NULL;
    }
    return PyTuple_GetSlice(args, 0, n);
}

/* The lse array: float32 [B, H, S] of q's [B, S, H, D], C-contiguous;
 * None gives NULL (writable: for a forward's). */
static int lse_array(PyObject *obj, const ra_tensor *q, int writable, void **lse)
{
    return contiguous(obj, NPY_FLOAT32, (npy_intp)(q->shape[0] * q->shape[2] * q->shape[1]),
                      writable, "lse", lse);
}

/* Runs a forward (ra_attention, ra_attention_forward_lse when lse, or
 * ra_attention_block_lse when block) with the GIL released. */
static PyObject *run_forward(ra_ext_context *c, const ra_tensor *out, float *lse,
                             const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                             const int64_t *block, const ra_attention_options *o)
{
    ra_status st;
    const char *call = block ? "ra_attention_block_lse"
                       : lse ? "ra_attention_forward_lse" : "ra_attention";
    Py_BEGIN_ALLOW_THREADS
    ra_context *ctx = ra_ext_context_acquire(c);
    st = block ? ra_attention_block_lse(ctx, out, lse, q, k, v, block[0], block[1], block[2], o)
         : lse ? ra_attention_forward_lse(ctx, out, lse, q, k, v, o)
               : ra_attention(ctx, out, q, k, v, o);
    ra_ext_context_release(c, ctx);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) return ra_ext_raise(st, call);
    Py_RETURN_NONE;
}

/* attention(context, out, lse, q, k, v, q_dtype, kv_dtype, <options>):
 *   q: [B, Sq, H, D] of the ra_dtype q_dtype   out: float32 [B, Sq, H, D]
 *   k, v: [B, Sk, Hkv, D] of the ra_dtype kv_dtype
 *   lse: None (ra_attention) or float32 [B, H, S] (ra_attention_forward_lse)
 * attention_block(context, out, lse, q, k, v, q_dtype, kv_dtype, q_start,
 *                 k_start, seq, <options>): ra_attention_block_lse, k and v
 *   [B, Sk, Hkv, D], lse required, padding_mask [B, seq].
 * <options>: parse_options's. */
static PyObject *forward(PyObject *args, int block)
{
    const char *name = block ? "attention_block" : "attention";
    PyObject *context, *lse_obj;
    PyArrayObject *out, *q, *k, *v;
    int q_dtype, kv_dtype;
    long long a = 0, b = 0, n = 0; /* q_start, k_start, seq */
    Py_ssize_t n_head = block ? 11 : 8;
    PyObject *h = head(args, n_head, name);
    if (!h) return NULL;
    /* the plain call's format stops before the block's three: those pointers go unused */
    int ok = PyArg_ParseTuple(h, block ? "OO!OO!O!O!iiLLL" : "OO!OO!O!O!ii", &context,
                              &PyArray_Type, &out, &lse_obj, &PyArray_Type, &q, &PyArray_Type,
                              &k, &PyArray_Type, &v, &q_dtype, &kv_dtype, &a, &b, &n);
    Py_DECREF(h);
    options opt;
    if (!ok || !parse_options(args, n_head, name, &opt)) return NULL;
    const int64_t where[3] = {a, b, n};
    ra_ext_context *c;
    ra_tensor tout, tq, tk, tv;
    void *lse;
    if (!ra_ext_get_context(context, &c) || !ra_ext_tensor(q, q_dtype, 0, "q", &tq) ||
        !ra_ext_tensor(k, kv_dtype, 0, "k", &tk) || !ra_ext_tensor(v, kv_dtype, 0, "v", &tv) ||
        !ra_ext_tensor(out, RA_F32, 1, "out", &tout) ||
        !option_arrays(&opt.o, &tq, block ? (int64_t)n : tq.shape[1], opt.sinks, Py_None,
                       opt.padding, opt.documents) ||
        !lse_array(lse_obj, &tq, 1, &lse))
        return NULL;
    if (block && !lse) {
        PyErr_SetString(ra_ext_value_error, "lse: a block's forward writes it");
        return NULL;
    }
    return run_forward(c, &tout, lse, &tq, &tk, &tv, block ? where : NULL, &opt.o);
}

PyObject *ra_ext_attention(PyObject *self, PyObject *args)
{
    (void)self;
    return forward(args, 0);
}

PyObject *ra_ext_attention_block(PyObject *self, PyObject *args)
{
    (void)self;
    return forward(args, 1);
}

/* attention_backward(context, dq, dk, dv, dsinks, dout, q, k, v, out, lse,
 *                    q_dtype, kv_dtype, <options>):
 *   dq, dout, out: float32 and q (q_dtype) [B, Sq, H, D]; dk, dv float32 and k, v (kv_dtype)
 *   [B, Sk, Hkv, D]; lse float32 [B, H, Sq] from the forward; dsinks None or
 *   float32 [H] (written, with sinks); the options as attention's.
 * attention_block_backward(context, dq, dk, dv, dsinks, dout, q, k, v, out,
 *                          lse, q_dtype, kv_dtype, q_start, k_start, seq,
 *                          <options>): ra_attention_block_backward, adding
 *   into dq, dk, dv; dsinks must be None (the caller sums it). */
static PyObject *backward(PyObject *args, int block)
{
    const char *name = block ? "attention_block_backward" : "attention_backward";
    PyObject *context, *dsinks, *lse_obj;
    PyArrayObject *dq, *dk, *dv, *dout, *q, *k, *v, *out;
    int q_dtype, kv_dtype;
    long long a = 0, b = 0, n = 0;
    Py_ssize_t n_head = block ? 16 : 13;
    PyObject *h = head(args, n_head, name);
    if (!h) return NULL;
    int ok = PyArg_ParseTuple(h, block ? "OO!O!O!OO!O!O!O!O!OiiLLL" : "OO!O!O!OO!O!O!O!O!Oii",
                              &context, &PyArray_Type, &dq, &PyArray_Type, &dk, &PyArray_Type,
                              &dv, &dsinks, &PyArray_Type, &dout, &PyArray_Type, &q,
                              &PyArray_Type, &k, &PyArray_Type, &v, &PyArray_Type, &out,
                              &lse_obj, &q_dtype, &kv_dtype, &a, &b, &n);
    Py_DECREF(h);
    options opt;
    if (!ok || !parse_options(args, n_head, name, &opt)) return NULL;
    ra_ext_context *c;
    ra_tensor tdq, tdk, tdv, tdout, tq, tk, tv, tout;
    void *lse;
    if (!ra_ext_get_context(context, &c) || !ra_ext_tensor(q, q_dtype, 0, "q", &tq) ||
        !ra_ext_tensor(k, kv_dtype, 0, "k", &tk) || !ra_ext_tensor(v, kv_dtype, 0, "v", &tv) ||
        !ra_ext_tensor(out, RA_F32, 0, "out", &tout) ||
        !ra_ext_tensor(dout, RA_F32, 0, "dout", &tdout) ||
        !ra_ext_tensor(dq, RA_F32, 1, "dq", &tdq) || !ra_ext_tensor(dk, RA_F32, 1, "dk", &tdk) ||
        !ra_ext_tensor(dv, RA_F32, 1, "dv", &tdv) ||
        !option_arrays(&opt.o, &tq, block ? (int64_t)n : tq.shape[1], opt.sinks, dsinks,
                       opt.padding, opt.documents))
        return NULL;
    if (lse_obj == Py_None) {
        PyErr_SetString(ra_ext_value_error, "lse: the forward's log-sum-exp is needed");
        return NULL;
    }
    if (!lse_array(lse_obj, &tq, 0, &lse)) return NULL;
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    ra_context *ctx = ra_ext_context_acquire(c);
    st = block ? ra_attention_block_backward(ctx, &tdq, &tdk, &tdv, &tdout, &tq, &tk, &tv, &tout,
                                             lse, a, b, n, &opt.o)
               : ra_attention_backward(ctx, &tdq, &tdk, &tdv, &tdout, &tq, &tk, &tv, &tout, lse,
                                       &opt.o);
    ra_ext_context_release(c, ctx);
    Py_END_ALLOW_THREADS
    if (st != RA_OK)
        return ra_ext_raise(st, block ? "ra_attention_block_backward" : "ra_attention_backward");
    Py_RETURN_NONE;
}

PyObject *ra_ext_attention_backward(PyObject *self, PyObject *args)
{
    (void)self;
    return backward(args, 0);
}

PyObject *ra_ext_attention_block_backward(PyObject *self, PyObject *args)
{
    (void)self;
    return backward(args, 1);
}
