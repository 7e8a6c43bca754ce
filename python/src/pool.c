/* pool.c — a paged KV pool and the layer over it:
 *   KVPool               an ra_kv_pool and a lock (its writers need it to
 *                        themselves: ropeattn.h, "Thread safety")
 *   layer_forward_paged  ra_layer_forward_paged
 * ropeattn.KVPool (python/ropeattn/layer.py) checks the arguments and
 * chooses defaults; these map them onto the C API and release the GIL
 * around every call that computes.
 *
 * Shapes: N sequences (rows), S tokens a row, dim the model width. */
#include "ext.h"

typedef struct ra_ext_pool {
    PyObject_HEAD
    ra_kv_pool *pool;
    PyThread_type_lock lock;
} ra_ext_pool;

/* KVPool(n_pages, page_size, max_sequences, n_kv_heads, head_dim, dtype,
 * scale=0): ra_kv_pool_create; scale > 0: an fp8 pool's one scale for k
 * and v (ra_kv_pool_set_scales). */
static int pool_init(ra_ext_pool *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"n_pages", "page_size", "max_sequences", "n_kv_heads", "head_dim",
                         "dtype", "scale", NULL};
    long long n_pages, page_size, max_sequences, n_kv_heads, head_dim;
    int dtype;
    double scale = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LLLLLi|d:KVPool", kw, &n_pages, &page_size,
                                     &max_sequences, &n_kv_heads, &head_dim, &dtype, &scale))
        return -1;
    if (self->pool) {
        PyErr_SetString(ra_ext_error, "KVPool: already initialized");
        return -1;
    }
    if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
        PyErr_NoMemory();
        return -1;
    }
    ra_status st, scale_st = RA_OK;
    ra_kv_pool *pool = NULL;
    const float scale_f = (float)scale;
    Py_BEGIN_ALLOW_THREADS
    st = ra_kv_pool_create(&pool, n_pages, page_size, max_sequences, n_kv_heads, head_dim,
                           (ra_dtype)dtype);
    if (st == RA_OK && scale > 0) scale_st = ra_kv_pool_set_scales(pool, &scale_f, &scale_f, 1);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) {
        ra_ext_raise(st, "ra_kv_pool_create");
        return -1;
    }
    if (scale_st != RA_OK) {
        ra_kv_pool_destroy(pool);
        ra_ext_raise(scale_st, "ra_kv_pool_set_scales");
        return -1;
    }
    if (self->pool) { /* another thread's __init__ got there first */
        ra_kv_pool_destroy(pool);
        PyErr_SetString(ra_ext_error, "KVPool: already initialized");
        return -1;
    }
    self->pool = pool;
    return 0;
}

static void pool_dealloc(ra_ext_pool *self)
{
    ra_kv_pool_destroy(self->pool); /* no call holds it: each keeps a reference */
    if (self->lock) PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int pool_ready(ra_ext_pool *self)
{
    if (self->pool) return 1;
    PyErr_SetString(ra_ext_error, "KVPool: not initialized");
    return 0;
}

/* The ra_kv_pool_ calls on one integer that write the pool: add (the
 * window, returns the new id), fork (the parent, returns the child), free. */
enum pool_op { POOL_ADD, POOL_FORK, POOL_FREE };

static PyObject *pool_call(ra_ext_pool *self, PyObject *arg, enum pool_op op)
{
    static const char *const calls[] = {"ra_kv_pool_add_sequence", "ra_kv_pool_fork",
                                        "ra_kv_pool_free_sequence"};
    long long value = PyLong_AsLongLong(arg);
    if ((value == -1 && PyErr_Occurred()) || !pool_ready(self)) return NULL;
    int64_t id = -1;
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    st = op == POOL_ADD    ? ra_kv_pool_add_sequence(self->pool, (int64_t)value, &id)
         : op == POOL_FORK ? ra_kv_pool_fork(self->pool, (int64_t)value, &id)
                           : ra_kv_pool_free_sequence(self->pool, (int64_t)value);
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) return ra_ext_raise(st, calls[op]);
    if (op == POOL_FREE) Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)id);
}

static PyObject *pool_add(ra_ext_pool *self, PyObject *arg) { return pool_call(self, arg, POOL_ADD); }
static PyObject *pool_fork(ra_ext_pool *self, PyObject *arg) { return pool_call(self, arg, POOL_FORK); }
static PyObject *pool_free(ra_ext_pool *self, PyObject *arg) { return pool_call(self, arg, POOL_FREE); }

/* length(id): tokens appended to sequence id. */
static PyObject *pool_length(ra_ext_pool *self, PyObject *arg)
{
    long long id = PyLong_AsLongLong(arg);
    if ((id == -1 && PyErr_Occurred()) || !pool_ready(self)) return NULL;
    int64_t n;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK); /* waits for a call writing it */
    n = ra_kv_pool_length(self->pool, (int64_t)id);
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    if (n < 0) return ra_ext_raise(RA_ERR_ARGUMENT, "ra_kv_pool_length"); /* names id */
    return PyLong_FromLongLong((long long)n);
}

static PyObject *pool_free_pages(ra_ext_pool *self, void *closure)
{
    (void)closure;
    if (!pool_ready(self)) return NULL;
    int64_t n;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    n = ra_kv_pool_free_pages(self->pool);
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong((long long)n);
}

static PyMethodDef pool_methods[] = {
    {"add", (PyCFunction)pool_add, METH_O, "add(window): a new sequence's id."},
    {"fork", (PyCFunction)pool_fork, METH_O, "fork(id): a sequence sharing id's pages."},
    {"free", (PyCFunction)pool_free, METH_O, "free(id): its pages back to the pool."},
    {"length", (PyCFunction)pool_length, METH_O, "length(id): tokens appended to it."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef pool_getset[] = {
    {"free_pages", (getter)pool_free_pages, NULL, "Pages no sequence holds.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ra_ext_pool_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ropeattn._ropeattn.KVPool",
    .tp_basicsize = sizeof(ra_ext_pool),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "KVPool(n_pages, page_size, max_sequences, n_kv_heads, head_dim, dtype, "
              "scale=0): ra_kv_pool_create.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)pool_init,
    .tp_dealloc = (destructor)pool_dealloc,
    .tp_methods = pool_methods,
    .tp_getset = pool_getset,
};

/* layer_forward_paged(layer, context, pool, y, x, ids, n_new, start,
 * pos_ids): ra_layer_forward_paged of rows ids (int64 [N]), n_new None or
 * int64 [N]; start -1 with pos_ids None: continuing from the sequences'
 * lengths (NULL positions), else positions as layer_forward's. */
PyObject *ra_ext_layer_forward_paged(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kw[] = {"layer", "context", "pool", "y", "x", "ids", "n_new", "start",
                         "pos_ids", NULL};
    PyObject *layer, *context, *y, *x, *ids, *n_new, *pos_ids;
    ra_ext_pool *pool;
    long long start;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OO!OOOOLO:layer_forward_paged", kw,
                                     &ra_ext_layer_type, &layer, &context, &ra_ext_pool_type,
                                     &pool, &y, &x, &ids, &n_new, &start, &pos_ids))
        return NULL;
    const ra_layer *l = ra_ext_layer_of(layer);
    ra_ext_context *c;
    ra_positions positions;
    npy_intp rows, seq;
    const int continuing = start < 0 && pos_ids == Py_None;
    if (!l || !pool_ready(pool) || !ra_ext_get_context(context, &c) ||
        !ra_ext_forward_args(l, y, x, continuing ? 0 : start, pos_ids, Py_None, &positions,
                             &rows, &seq))
        return NULL;
    PyArrayObject *a_ids = (PyArrayObject *)ids, *a_new = (PyArrayObject *)n_new;
    const int ok_ids = PyArray_Check(ids) && PyArray_TYPE(a_ids) == NPY_INT64 &&
                       PyArray_ISCARRAY_RO(a_ids) && PyArray_NDIM(a_ids) == 1 &&
                       PyArray_DIM(a_ids, 0) == rows;
    const int ok_new = n_new == Py_None ||
                       (PyArray_Check(n_new) && PyArray_TYPE(a_new) == NPY_INT64 &&
                        PyArray_ISCARRAY_RO(a_new) && PyArray_NDIM(a_new) == 1 &&
                        PyArray_DIM(a_new, 0) == rows);
    if (!ok_ids || !ok_new) {
        PyErr_Format(ra_ext_value_error, "%s: expected C-contiguous, aligned int64 [%lld]",
                     ok_ids ? "n_new" : "ids", (long long)rows);
        return NULL;
    }
    const int64_t *idp = (const int64_t *)PyArray_DATA(a_ids);
    const int64_t *newp = n_new == Py_None ? NULL : (const int64_t *)PyArray_DATA(a_new);
    float *yp = (float *)PyArray_DATA((PyArrayObject *)y);
    const float *xp = (const float *)PyArray_DATA((PyArrayObject *)x);
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    /* the pool first, then the context: no call takes them the other way */
    PyThread_acquire_lock(pool->lock, WAIT_LOCK);
    ra_context *ctx = ra_ext_context_acquire(c);
    st = ra_layer_forward_paged(ctx, l, pool->pool, idp, (int64_t)rows, yp, xp, (int64_t)seq,
                                newp, continuing ? NULL : &positions);
    ra_ext_context_release(c, ctx);
    PyThread_release_lock(pool->lock);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) return ra_ext_raise(st, "ra_layer_forward_paged");
    Py_RETURN_NONE;
}
