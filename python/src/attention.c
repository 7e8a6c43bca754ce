/* attention.c — ra_attention, ra_attention_forward_lse and
 * ra_attention_backward on strided views, their options as arguments. */
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

/* The options' arrays, for q's [B, S, H, D]: sinks float32 [H], dsinks
 * float32 [H] (written; None: not computed), padding_mask uint8 [B, S],
 * cu_seqlens int64 [n_documents + 1]; each None or C-contiguous. */
static int option_arrays(ra_attention_options *o, const ra_tensor *q, PyObject *sinks,
                         PyObject *dsinks, PyObject *padding, PyObject *documents)
{
    void *p;
    if (!contiguous(sinks, NPY_FLOAT32, (npy_intp)q->shape[2], 0, "sinks", &p)) return 0;
    o->sinks = p;
    if (!contiguous(dsinks, NPY_FLOAT32, (npy_intp)q->shape[2], 1, "dsinks", &p)) return 0;
    o->dsinks = p;
    if (!contiguous(padding, NPY_UINT8, (npy_intp)(q->shape[0] * q->shape[1]), 0,
                    "padding_mask", &p))
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

/* attention(context, out, lse, q, k, v, q_dtype, kv_dtype, scale, softcap,
 *           window, chunk, sinks, padding_mask, cu_seqlens, dropout, seed):
 *   q: [B, S, H, D] of the ra_dtype q_dtype   out: float32 [B, S, H, D]
 *   k, v: [B, S, Hkv, D] of the ra_dtype kv_dtype
 *   lse: None (ra_attention) or float32 [B, H, S] (ra_attention_forward_lse)
 * scale, softcap, window, chunk: 0 for none, as ra_attention_options has them. */
PyObject *ra_ext_attention(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *context, *lse_obj, *sinks, *padding, *documents;
    PyArrayObject *out, *q, *k, *v;
    int q_dtype, kv_dtype;
    unsigned long long seed;
    float dropout;
    ra_attention_options o = ra_attention_options_init();
    if (!PyArg_ParseTuple(args, "OO!OO!O!O!iiddLLOOOfK:attention", &context, &PyArray_Type,
                          &out, &lse_obj, &PyArray_Type, &q, &PyArray_Type, &k, &PyArray_Type,
                          &v, &q_dtype, &kv_dtype, &o.scale, &o.softcap, &o.window, &o.chunk, &sinks,
                          &padding, &documents, &dropout, &seed))
        return NULL;
    o.dropout = dropout;
    o.seed = (uint64_t)seed;
    ra_ext_context *c;
    ra_tensor tout, tq, tk, tv;
    void *lse;
    if (!ra_ext_get_context(context, &c) || !ra_ext_tensor(q, q_dtype, 0, "q", &tq) ||
        !ra_ext_tensor(k, kv_dtype, 0, "k", &tk) || !ra_ext_tensor(v, kv_dtype, 0, "v", &tv) ||
        !ra_ext_tensor(out, RA_F32, 1, "out", &tout) ||
        !option_arrays(&o, &tq, sinks, Py_None, padding, documents) ||
        !contiguous(lse_obj, NPY_FLOAT32, (npy_intp)(tq.shape[0] * tq.shape[2] * tq.shape[1]),
                    1, "lse", &lse))
        return NULL;
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    ra_context *ctx = ra_ext_context_acquire(c);
    st = lse ? ra_attention_forward_lse(ctx, &tout, lse, &tq, &tk, &tv, &o)
             : ra_attention(ctx, &tout, &tq, &tk, &tv, &o);
    ra_ext_context_release(c, ctx);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) return ra_ext_raise(st, lse ? "ra_attention_forward_lse" : "ra_attention");
    Py_RETURN_NONE;
}

/* attention_backward(context, dq, dk, dv, dsinks, dout, q, k, v, out, lse,
 *                    q_dtype, kv_dtype, scale, softcap, window, chunk, sinks,
 *                    padding_mask, cu_seqlens, dropout, seed):
 *   dq, dout, out: float32 and q (q_dtype) [B, S, H, D]; dk, dv float32 and k, v (kv_dtype)
 *   [B, S, Hkv, D]; lse float32 [B, H, S] from the forward; dsinks None or
 *   float32 [H] (written, with sinks); the rest as attention's. */
PyObject *ra_ext_attention_backward(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *context, *dsinks, *lse_obj, *sinks, *padding, *documents;
    PyArrayObject *dq, *dk, *dv, *dout, *q, *k, *v, *out;
    int q_dtype, kv_dtype;
    unsigned long long seed;
    float dropout;
    ra_attention_options o = ra_attention_options_init();
    if (!PyArg_ParseTuple(args, "OO!O!O!OO!O!O!O!O!OiiddLLOOOfK:attention_backward", &context,
                          &PyArray_Type, &dq, &PyArray_Type, &dk, &PyArray_Type, &dv, &dsinks,
                          &PyArray_Type, &dout, &PyArray_Type, &q, &PyArray_Type, &k,
                          &PyArray_Type, &v, &PyArray_Type, &out, &lse_obj, &q_dtype, &kv_dtype,
                          &o.scale, &o.softcap, &o.window, &o.chunk, &sinks, &padding,
                          &documents, &dropout, &seed))
        return NULL;
    o.dropout = dropout;
    o.seed = (uint64_t)seed;
    ra_ext_context *c;
    ra_tensor tdq, tdk, tdv, tdout, tq, tk, tv, tout;
    void *lse;
    if (!ra_ext_get_context(context, &c) || !ra_ext_tensor(q, q_dtype, 0, "q", &tq) ||
        !ra_ext_tensor(k, kv_dtype, 0, "k", &tk) || !ra_ext_tensor(v, kv_dtype, 0, "v", &tv) ||
        !ra_ext_tensor(out, RA_F32, 0, "out", &tout) ||
        !ra_ext_tensor(dout, RA_F32, 0, "dout", &tdout) ||
        !ra_ext_tensor(dq, RA_F32, 1, "dq", &tdq) || !ra_ext_tensor(dk, RA_F32, 1, "dk", &tdk) ||
        !ra_ext_tensor(dv, RA_F32, 1, "dv", &tdv) ||
        !option_arrays(&o, &tq, sinks, dsinks, padding, documents))
        return NULL;
    if (lse_obj == Py_None) {
        PyErr_SetString(ra_ext_value_error, "lse: the forward's log-sum-exp is needed");
        return NULL;
    }
    if (!contiguous(lse_obj, NPY_FLOAT32, (npy_intp)(tq.shape[0] * tq.shape[2] * tq.shape[1]),
                    0, "lse", &lse))
        return NULL;
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    ra_context *ctx = ra_ext_context_acquire(c);
    st = ra_attention_backward(ctx, &tdq, &tdk, &tdv, &tdout, &tq, &tk, &tv, &tout, lse, &o);
    ra_ext_context_release(c, ctx);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) return ra_ext_raise(st, "ra_attention_backward");
    Py_RETURN_NONE;
}
