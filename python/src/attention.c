/* attention.c — ra_attention on strided views, its options as keywords. */
#include "ext.h"

/* attention(context, out, q, k, v, kv_dtype, scale, softcap, window, sinks,
 *           dropout, seed):
 *   q, out: float32 [B, S, H, D]   k, v: [B, S, Hkv, D] of the ra_dtype kv_dtype
 *   sinks: None or float32 [H], C-contiguous
 * scale, softcap, window: 0 for none, as ra_attention_options has them. */
PyObject *ra_ext_attention(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kw[] = {"context", "out", "q", "k", "v", "kv_dtype", "scale", "softcap",
                         "window", "sinks", "dropout", "seed", NULL};
    PyObject *context, *sinks_obj;
    PyArrayObject *out, *q, *k, *v;
    int kv_dtype;
    unsigned long long seed;
    float dropout;
    ra_attention_options o = ra_attention_options_init();
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O!O!O!iddLOfK:attention", kw,
                                     &context, &PyArray_Type, &out, &PyArray_Type, &q,
                                     &PyArray_Type, &k, &PyArray_Type, &v, &kv_dtype,
                                     &o.scale, &o.softcap, &o.window, &sinks_obj, &dropout,
                                     &seed))
        return NULL;
    o.dropout = dropout;
    o.seed = (uint64_t)seed;
    ra_ext_context *c;
    ra_tensor tout, tq, tk, tv;
    if (!ra_ext_get_context(context, &c) || !ra_ext_tensor(q, RA_F32, 0, "q", &tq) ||
        !ra_ext_tensor(k, kv_dtype, 0, "k", &tk) || !ra_ext_tensor(v, kv_dtype, 0, "v", &tv) ||
        !ra_ext_tensor(out, RA_F32, 1, "out", &tout))
        return NULL;
    if (sinks_obj != Py_None) {
        PyArrayObject *sinks = (PyArrayObject *)sinks_obj;
        if (!PyArray_Check(sinks_obj) || PyArray_TYPE(sinks) != NPY_FLOAT32 ||
            !PyArray_IS_C_CONTIGUOUS(sinks) || PyArray_NDIM(sinks) != 1 ||
            PyArray_DIM(sinks, 0) != tq.shape[2]) {
            PyErr_SetString(ra_ext_value_error, "sinks: expected C-contiguous float32 [H]");
            return NULL;
        }
        o.sinks = (const float *)PyArray_DATA(sinks);
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
