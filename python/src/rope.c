/* rope.c — ropeattn._ropeattn.Rope (an ra_rope made from ra_rope_config's
 * fields given as keywords) and rope_apply (ra_rope_apply on strided
 * views).  ropeattn.RotaryEmbedding (python/ropeattn/rope.py) turns Hugging
 * Face's names into these fields. */
#include "ext.h"

/* A longrope factor list as the [rotary_dim / 2] doubles the config points
 * at (the rope copies them); None gives NULL. */
static int doubles(PyObject *obj, PyArrayObject **arr, const double **p)
{
    *arr = NULL;
    *p = NULL;
    if (obj == Py_None) return 1;
    *arr = (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 1, 1, NPY_ARRAY_CARRAY_RO);
    if (!*arr) return 0;
    *p = (const double *)PyArray_DATA(*arr);
    return 1;
}

static int rope_init(ra_ext_rope *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"head_dim", "type", "layout", "rotary_dim", "theta", "table_size",
                         "factor", "original_max_position_embeddings",
                         "max_position_embeddings", "seq_len", "attention_factor",
                         "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                         "yarn_no_truncate", "low_freq_factor", "high_freq_factor",
                         "short_factor", "long_factor", "mrope_section",
                         "mrope_interleaved", "axial", "axial_column_first", NULL};
    ra_rope_config c = ra_rope_config_default(0);
    int type = 0, layout = 0, no_truncate = 0, axial = 0;
    PyObject *short_obj = Py_None, *long_obj = Py_None, *section_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "L|$iiLdLdLLLdddddpddOOOpip:Rope", kw,
                                     &c.head_dim, &type, &layout, &c.rotary_dim, &c.theta,
                                     &c.table_size, &c.factor,
                                     &c.original_max_position_embeddings,
                                     &c.max_position_embeddings, &c.seq_len,
                                     &c.attention_factor, &c.beta_fast, &c.beta_slow,
                                     &c.mscale, &c.mscale_all_dim, &no_truncate,
                                     &c.low_freq_factor, &c.high_freq_factor, &short_obj,
                                     &long_obj, &section_obj, &c.mrope_interleaved, &axial,
                                     &c.axial_column_first))
        return -1;
    if (section_obj != Py_None) { /* M-RoPE: 3 integers */
        PyArrayObject *sec = (PyArrayObject *)PyArray_FROMANY(section_obj, NPY_INT64, 1, 1,
                                                              NPY_ARRAY_CARRAY_RO);
        if (!sec) return -1;
        if (PyArray_DIM(sec, 0) != 3) {
            Py_DECREF(sec);
            PyErr_SetString(ra_ext_value_error, "Rope: mrope_section needs 3 integers");
            return -1;
        }
        memcpy(c.mrope_section, PyArray_DATA(sec), sizeof c.mrope_section);
        Py_DECREF(sec);
    }
    if (self->rope) {
        PyErr_SetString(ra_ext_error, "Rope: already initialized");
        return -1;
    }
    c.type = (ra_rope_type)type;
    c.layout = (ra_layout)layout;
    c.yarn_no_truncate = no_truncate;
    c.axial = (ra_rope_axial)axial;
    PyArrayObject *short_arr, *long_arr;
    if (!doubles(short_obj, &short_arr, &c.short_factor)) return -1;
    if (!doubles(long_obj, &long_arr, &c.long_factor)) {
        Py_XDECREF(short_arr);
        return -1;
    }
    int64_t half = (c.rotary_dim ? c.rotary_dim : c.head_dim) / 2;
    if ((short_arr && PyArray_DIM(short_arr, 0) != half) ||
        (long_arr && PyArray_DIM(long_arr, 0) != half)) {
        PyErr_Format(ra_ext_value_error, "Rope: short_factor and long_factor need "
                     "rotary_dim / 2 = %lld entries", (long long)half);
        Py_XDECREF(short_arr);
        Py_XDECREF(long_arr);
        return -1;
    }
    ra_status st;
    ra_rope *rope = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ra_rope_create(&rope, &c);
    Py_END_ALLOW_THREADS
    Py_XDECREF(short_arr);
    Py_XDECREF(long_arr);
    if (st != RA_OK) {
        ra_ext_raise(st, "ra_rope_create");
        return -1;
    }
    if (self->rope) { /* another thread's __init__ got there first */
        ra_rope_destroy(rope);
        PyErr_SetString(ra_ext_error, "Rope: already initialized");
        return -1;
    }
    self->rope = rope;
    return 0;
}

static void rope_dealloc(ra_ext_rope *self)
{
    ra_rope_destroy(self->rope);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(ra_ext_rope *self)
{
    if (self->rope) return 1;
    PyErr_SetString(ra_ext_error, "Rope: not initialized");
    return 0;
}

/* inv_freq(): theta_i, float64 [rotary_dim / 2]. */
static PyObject *rope_inv_freq(ra_ext_rope *self, PyObject *unused)
{
    (void)unused;
    if (!ready(self)) return NULL;
    const ra_rope_config *c = ra_rope_get_config(self->rope);
    npy_intp n = (npy_intp)(c->rotary_dim ? c->rotary_dim : c->head_dim) / 2;
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_DOUBLE);
    if (!out) return NULL;
    ra_status st = ra_rope_inverse_frequencies(self->rope, (double *)PyArray_DATA(out));
    if (st != RA_OK) {
        Py_DECREF(out);
        return ra_ext_raise(st, "ra_rope_inverse_frequencies");
    }
    return (PyObject *)out;
}

/* table(positions): positions int64 [n] -> (cos, sin), float32 [n, rotary_dim / 2]. */
static PyObject *rope_table(ra_ext_rope *self, PyObject *arg)
{
    if (!ready(self)) return NULL;
    PyArrayObject *pos = (PyArrayObject *)PyArray_FROMANY(arg, NPY_INT64, 1, 1,
                                                          NPY_ARRAY_CARRAY_RO);
    if (!pos) return NULL;
    const ra_rope_config *c = ra_rope_get_config(self->rope);
    npy_intp dims[2] = {PyArray_DIM(pos, 0),
                        (npy_intp)(c->rotary_dim ? c->rotary_dim : c->head_dim) / 2};
    PyArrayObject *cos = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_FLOAT32);
    PyArrayObject *sin = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_FLOAT32);
    PyObject *result = NULL;
    if (cos && sin) {
        ra_status st = RA_OK;
        if (dims[0] > 0) { /* an empty table is an empty answer, not RA_ERR_SIZE */
            Py_BEGIN_ALLOW_THREADS
            st = ra_rope_table(self->rope, (float *)PyArray_DATA(cos),
                               (float *)PyArray_DATA(sin),
                               (const int64_t *)PyArray_DATA(pos), (int64_t)dims[0]);
            Py_END_ALLOW_THREADS
        }
        result = st == RA_OK ? PyTuple_Pack(2, cos, sin) : ra_ext_raise(st, "ra_rope_table");
    }
    Py_DECREF(pos);
    Py_XDECREF(cos);
    Py_XDECREF(sin);
    return result;
}

/* The (cos, sin) tables, float32 [n, rotary_dim / 2], of positions int64
 * with n >= 1 along axis n_axis and `components` along the other, by fn:
 * M-RoPE's [3, n] and the 2-D rope's [n, 2].  what: the method and the
 * shape it expects, for its error; c_name: fn's, for the library's. */
static PyObject *table_of(ra_ext_rope *self, PyObject *arg, int n_axis, npy_intp components,
                          ra_status (*fn)(const ra_rope *, float *, float *, const int64_t *,
                                          int64_t),
                          const char *what, const char *c_name)
{
    if (!ready(self)) return NULL;
    PyArrayObject *pos = (PyArrayObject *)PyArray_FROMANY(arg, NPY_INT64, 2, 2,
                                                          NPY_ARRAY_CARRAY_RO);
    if (!pos) return NULL;
    if (PyArray_DIM(pos, 1 - n_axis) != components || PyArray_DIM(pos, n_axis) == 0) {
        Py_DECREF(pos);
        PyErr_Format(ra_ext_value_error, "%s, n >= 1", what);
        return NULL;
    }
    const ra_rope_config *c = ra_rope_get_config(self->rope);
    npy_intp dims[2] = {PyArray_DIM(pos, n_axis),
                        (npy_intp)(c->rotary_dim ? c->rotary_dim : c->head_dim) / 2};
    PyArrayObject *cos = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_FLOAT32);
    PyArrayObject *sin = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_FLOAT32);
    PyObject *result = NULL;
    if (cos && sin) {
        ra_status st;
        Py_BEGIN_ALLOW_THREADS
        st = fn(self->rope, (float *)PyArray_DATA(cos), (float *)PyArray_DATA(sin),
                (const int64_t *)PyArray_DATA(pos), (int64_t)dims[0]);
        Py_END_ALLOW_THREADS
        result = st == RA_OK ? PyTuple_Pack(2, cos, sin) : ra_ext_raise(st, c_name);
    }
    Py_DECREF(pos);
    Py_XDECREF(cos);
    Py_XDECREF(sin);
    return result;
}

/* table_mrope(positions): positions int64 [3, n] -> (cos, sin), float32
 * [n, rotary_dim / 2]: ra_rope_table_mrope. */
static PyObject *rope_table_mrope(ra_ext_rope *self, PyObject *arg)
{
    return table_of(self, arg, 1, 3, ra_rope_table_mrope,
                    "table_mrope: expected positions [3, n]", "ra_rope_table_mrope");
}

/* table_axial(positions): positions int64 [n, 2] (row, column) -> (cos,
 * sin), float32 [n, rotary_dim / 2]: ra_rope_table_axial. */
static PyObject *rope_table_axial(ra_ext_rope *self, PyObject *arg)
{
    return table_of(self, arg, 0, 2, ra_rope_table_axial,
                    "table_axial: expected positions [n, 2]", "ra_rope_table_axial");
}

static PyObject *rope_attention_factor(ra_ext_rope *self, void *closure)
{
    (void)closure;
    if (!ready(self)) return NULL;
    return PyFloat_FromDouble(ra_rope_attention_factor(self->rope));
}

/* config: the rope's ra_rope_config fields that the package reads back. */
static PyObject *rope_config(ra_ext_rope *self, void *closure)
{
    (void)closure;
    if (!ready(self)) return NULL;
    const ra_rope_config *c = ra_rope_get_config(self->rope);
    return Py_BuildValue("{s:L,s:L,s:i,s:i,s:d,s:(LLL),s:O,s:i,s:O}", "head_dim",
                         (long long)c->head_dim, "rotary_dim",
                         (long long)(c->rotary_dim ? c->rotary_dim : c->head_dim), "type",
                         (int)c->type, "layout", (int)c->layout, "theta", c->theta,
                         "mrope_section", (long long)c->mrope_section[0],
                         (long long)c->mrope_section[1], (long long)c->mrope_section[2],
                         "mrope_interleaved", c->mrope_interleaved ? Py_True : Py_False,
                         "axial", (int)c->axial, "axial_column_first",
                         c->axial_column_first ? Py_True : Py_False);
}

static PyMethodDef rope_methods[] = {
    {"inv_freq", (PyCFunction)rope_inv_freq, METH_NOARGS,
     "inv_freq() -> float64 [rotary_dim / 2]: the inverse frequencies theta_i."},
    {"table", (PyCFunction)rope_table, METH_O,
     "table(positions int64 [n]) -> (cos, sin), float32 [n, rotary_dim / 2], "
     "attention factor applied."},
    {"table_mrope", (PyCFunction)rope_table_mrope, METH_O,
     "table_mrope(positions int64 [3, n]) -> (cos, sin), float32 [n, rotary_dim / 2]: "
     "M-RoPE's tables of 3-D positions."},
    {"table_axial", (PyCFunction)rope_table_axial, METH_O,
     "table_axial(positions int64 [n, 2]) -> (cos, sin), float32 [n, rotary_dim / 2]: "
     "a 2-D rope's tables of (row, column) positions."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rope_getset[] = {
    {"attention_factor", (getter)rope_attention_factor, NULL,
     "The factor on every cos and sin: 1 but for yarn and longrope.", NULL},
    {"config", (getter)rope_config, NULL,
     "head_dim, rotary_dim, type, layout, theta, mrope_section, mrope_interleaved, axial, "
     "axial_column_first.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ra_ext_rope_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ropeattn._ropeattn.Rope",
    .tp_basicsize = sizeof(ra_ext_rope),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Rope(head_dim, *, type, layout, ...): ra_rope_create on the "
              "ra_rope_config fields of the same names (ropeattn.h).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)rope_init,
    .tp_dealloc = (destructor)rope_dealloc,
    .tp_methods = rope_methods,
    .tp_getset = rope_getset,
};

/* rope_apply(rope, context, out, x, dtype, start, ids, inverse):
 *   x, out: [B, S, heads, D] arrays of the ra_dtype dtype (out is x: in place)
 *   ids: None (positions start, start + 1, ...), int64 [B, S], (M-RoPE)
 *   [3, B, S] or (a 2-D rope) [B, S, 2], C-contiguous */
PyObject *ra_ext_rope_apply(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kw[] = {"rope", "context", "out", "x", "dtype", "start", "ids",
                         "inverse", NULL};
    ra_ext_rope *rope;
    PyObject *context, *ids_obj;
    PyArrayObject *out, *x;
    int dtype, inverse;
    long long start;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OO!O!iLOp:rope_apply", kw,
                                     &ra_ext_rope_type, &rope, &context, &PyArray_Type, &out,
                                     &PyArray_Type, &x, &dtype, &start, &ids_obj, &inverse))
        return NULL;
    ra_ext_context *c;
    ra_tensor tx, tout;
    if (!ready(rope) || !ra_ext_get_context(context, &c) ||
        !ra_ext_tensor(x, dtype, 0, "x", &tx) || !ra_ext_tensor(out, dtype, 1, "out", &tout))
        return NULL;
    ra_positions pos = ra_positions_start((int64_t)start);
    if (ids_obj != Py_None) {
        PyArrayObject *ids = (PyArrayObject *)ids_obj;
        /* the rope says how to read 3 axes: [B, S, 2] (2-D) or [3, B, S] */
        const int axial = ra_rope_get_config(rope->rope)->axial != RA_AXIAL_NONE;
        const int three = PyArray_Check(ids_obj) && PyArray_NDIM(ids) == 3 && !axial;
        const int ok = PyArray_Check(ids_obj) && PyArray_TYPE(ids) == NPY_INT64 &&
                       PyArray_IS_C_CONTIGUOUS(ids) &&
                       (axial ? PyArray_NDIM(ids) == 3 && PyArray_DIM(ids, 0) == tx.shape[0] &&
                                    PyArray_DIM(ids, 1) == tx.shape[1] && PyArray_DIM(ids, 2) == 2
                              : PyArray_NDIM(ids) == 2 + three &&
                                    (!three || PyArray_DIM(ids, 0) == 3) &&
                                    PyArray_DIM(ids, three) == tx.shape[0] &&
                                    PyArray_DIM(ids, 1 + three) == tx.shape[1]);
        if (!ok) {
            PyErr_SetString(ra_ext_value_error, axial ? "ids: expected C-contiguous int64 "
                            "[B, S, 2] for a 2-D rope" : "ids: expected C-contiguous int64 "
                            "[B, S] or [3, B, S]");
            return NULL;
        }
        if (axial) pos.axial_ids = (const int64_t *)PyArray_DATA(ids);
        else if (three) pos.mrope_ids = (const int64_t *)PyArray_DATA(ids);
        else pos.ids = (const int64_t *)PyArray_DATA(ids);
    }
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    ra_context *ctx = ra_ext_context_acquire(c);
    st = ra_rope_apply(ctx, rope->rope, &tout, &tx, &pos, inverse ? RA_INVERSE : RA_FORWARD);
    ra_ext_context_release(c, ctx);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) return ra_ext_raise(st, "ra_rope_apply");
    Py_RETURN_NONE;
}

/* precompute_freqs(head_dim, end, theta) -> (cos, sin), float32
 * [end, head_dim / 2]: ra_precompute_freqs, Meta's precompute_freqs_cis as
 * cos and sin tables. */
PyObject *ra_ext_precompute_freqs(PyObject *self, PyObject *args)
{
    (void)self;
    long long dim, end;
    double theta;
    if (!PyArg_ParseTuple(args, "LLd:precompute_freqs", &dim, &end, &theta)) return NULL;
    ra_status st;
    if (dim <= 0 || dim % 2 || end <= 0 || end - 1 > RA_MAX_POSITION) {
        /* The library refuses these before it writes anything: its message,
         * without allocating a table of a bad shape first. */
        float unused;
        st = ra_precompute_freqs(&unused, &unused, dim, end, theta);
        return ra_ext_raise(st != RA_OK ? st : RA_ERR_ARGUMENT, "ra_precompute_freqs");
    }
    npy_intp dims[2] = {(npy_intp)end, (npy_intp)(dim / 2)};
    PyArrayObject *cos = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_FLOAT32);
    PyArrayObject *sin = cos ? (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_FLOAT32) : NULL;
    PyObject *result = NULL;
    if (cos && sin) {
        Py_BEGIN_ALLOW_THREADS
        st = ra_precompute_freqs((float *)PyArray_DATA(cos), (float *)PyArray_DATA(sin),
                                 (int64_t)dim, (int64_t)end, theta);
        Py_END_ALLOW_THREADS
        result = st == RA_OK ? PyTuple_Pack(2, cos, sin) : ra_ext_raise(st, "ra_precompute_freqs");
    }
    Py_XDECREF(cos);
    Py_XDECREF(sin);
    return result;
}
