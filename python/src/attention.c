/* attention.c — ra_attention on strided views, its options as keywords. */
#include "ext.h"

/* A C-contiguous array of n elements of type `type` (NPY_*), or NULL with
 * ValueError naming it; None gives *p = NULL. */
static int contiguous(PyObject *obj, int type, npy_intp n, const char *name, const void **p)
{
    *p = NULL;
    if (obj == Py_None) return 1;
    PyArrayObject *a = (PyArrayObject *)obj;
    if (!PyArray_Check(obj) || PyArray_TYPE(a) != type || !PyArray_IS_C_CONTIGUOUS(a) ||
        PyArray_SIZE(a) != n) {
        PyErr_Format(ra_ext_value_error, "%s: expected a C-contiguous array of %zd elements "
                     "of the right dtype", name, (Py_ssize_t)n);
        return 0;
    }
    *p = PyArray_DATA(a);
    return 1;
}

/* attention(context, out, q, k, v, kv_dtype, scale, softcap, window, chunk,
 *           sinks, padding_mask, cu_seqlens, dropout, seed):
 *   q, out: float32 [B, S, H, D]   k, v: [B, S, Hkv, D] of the ra_dtype kv_dtype
 *   sinks: None or float32 [H]; padding_mask: None or uint8 [B, S];
 *   cu_seqlens: None or int64 [n_documents + 1]; each C-contiguous
 * scale, softcap, window, chunk: 0 for none, as ra_attention_options has them. */
PyObject *ra_ext_attention(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kw[] = {"context", "out", "q", "k", "v", "kv_dtype", "scale", "softcap",
                         "window", "chunk", "sinks", "padding_mask", "cu_seqlens", "dropout",
                         "seed", NULL};
    PyObject *context, *sinks, *padding, *documents;
    PyArrayObject *out, *q, *k, *v;
    int kv_dtype;
    unsigned long long seed;
    float dropout;
    ra_attention_options o = ra_attention_options_init();
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O!O!O!iddLLOOOfK:attention", kw,
                                     &context, &PyArray_Type, &out, &PyArray_Type, &q,
                                     &PyArray_Type, &k, &PyArray_Type, &v, &kv_dtype,
                                     &o.scale, &o.softcap, &o.window, &o.chunk, &sinks,
                                     &padding, &documents, &dropout, &seed))
        return NULL;
    o.dropout = dropout;
    o.seed = (uint64_t)seed;
    ra_ext_context *c;
    ra_tensor tout, tq, tk, tv;
    if (!ra_ext_get_context(context, &c) || !ra_ext_tensor(q, RA_F32, 0, "q", &tq) ||
        !ra_ext_tensor(k, kv_dtype, 0, "k", &tk) || !ra_ext_tensor(v, kv_dtype, 0, "v", &tv) ||
        !ra_ext_tensor(out, RA_F32, 1, "out", &tout))
        return NULL;
    const void *p;
    if (!contiguous(sinks, NPY_FLOAT32, (npy_intp)tq.shape[2], "sinks", &p)) return NULL;
    o.sinks = p;
    if (!contiguous(padding, NPY_UINT8, (npy_intp)(tq.shape[0] * tq.shape[1]), "padding_mask",
                    &p))
        return NULL;
    o.padding_mask = p;
    if (documents != Py_None) {
        if (!PyArray_Check(documents) || PyArray_SIZE((PyArrayObject *)documents) < 2) {
            PyErr_SetString(ra_ext_value_error, "cu_seqlens: expected int64 [n_documents + 1]");
            return NULL;
        }
        o.n_documents = (int64_t)PyArray_SIZE((PyArrayObject *)documents) - 1;
        if (!contiguous(documents, NPY_INT64, (npy_intp)o.n_documents + 1, "cu_seqlens", &p))
            return NULL;
        o.cu_seqlens = p;
    }
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    ra_context *ctx = ra_ext_context_acquire(c);
    st = ra_attention(ctx, &tout, &tq, &tk, &tv, &o);
    ra_ext_context_release(c);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) return ra_ext_raise(st, "ra_attention");
    Py_RETURN_NONE;
}
