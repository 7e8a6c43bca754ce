/* context.c — ropeattn.Context(threads=0): an ra_context (worker threads and
 * a scratch workspace reused across calls) and a lock, since a context
 * serves one calling thread at a time.  A context manager: leaving the
 * with block closes it.  And the default contexts that context=None
 * stands for: one per thread count, made in this process on first use and
 * shared by every call (default_context). */
#include "ext.h" /* Python.h first: it defines _GNU_SOURCE, for sched_getaffinity */

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

static int context_init(ra_ext_context *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"threads", NULL};
    int threads = 0;
    PyObject *given = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Context", kw, &given)) return -1;
    if (given && PyBool_Check(given)) { /* a count, not a truth: True ran 1 thread */
        PyErr_SetString(ra_ext_type_error, "Context: threads must be an integer, not a bool");
        return -1;
    }
    long long count = 0;
    int overflow = 0;
    if (given) {
        if (!PyIndex_Check(given)) {
            PyErr_Format(ra_ext_type_error, "Context: threads must be an integer, not %s",
                         Py_TYPE(given)->tp_name);
            return -1;
        }
        PyObject *index = PyNumber_Index(given);
        if (!index) return -1;
        count = PyLong_AsLongLongAndOverflow(index, &overflow);
        Py_DECREF(index);
        if (count == -1 && PyErr_Occurred()) return -1;
    }
    if (self->ctx) {
        PyErr_SetString(ra_ext_error, "Context: already initialized");
        return -1;
    }
    if (overflow < 0 || (!overflow && count < 0)) {
        PyErr_Format(ra_ext_value_error, "Context: threads %S is negative "
                     "(0 means one per online processor)", given);
        return -1;
    }
    if (overflow > 0 || count > 4096) { /* ra_context_create's limit (2^31 raised OverflowError) */
        PyErr_Format(ra_ext_value_error, "Context: threads %S is past the limit of 4096", given);
        return -1;
    }
    threads = (int)count;
    if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
        PyErr_NoMemory();
        return -1;
    }
    ra_status st;
    ra_context *ctx = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ra_context_create(&ctx, threads);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) {
        ra_ext_raise(st, "ra_context_create");
        return -1;
    }
    if (self->ctx) { /* another thread's __init__ got there first */
        ra_context_destroy(ctx);
        PyErr_SetString(ra_ext_error, "Context: already initialized");
        return -1;
    }
    self->ctx = ctx;
    return 0;
}

static PyObject *context_close(ra_ext_context *self, PyObject *unused)
{
    (void)unused;
    if (self->shared) {
        PyErr_SetString(ra_ext_error, "Context: the default context (context=None) is shared "
                        "by every call: not closed");
        return NULL;
    }
    if (self->ctx) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(self->lock, WAIT_LOCK); /* waits for a call using it */
        ra_context_destroy(self->ctx);
        self->ctx = NULL;
        PyThread_release_lock(self->lock);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static void context_dealloc(ra_ext_context *self)
{
    ra_context_destroy(self->ctx); /* no call holds it: each keeps a reference */
    if (self->lock) PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *context_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *context_exit(ra_ext_context *self, PyObject *args)
{
    (void)args;
    return context_close(self, NULL);
}

static PyObject *context_threads(ra_ext_context *self, void *closure)
{
    (void)closure;
    if (!self->ctx) {
        PyErr_SetString(ra_ext_error, "Context: closed");
        return NULL;
    }
    return PyLong_FromLong(ra_context_threads(self->ctx));
}

static PyObject *context_closed(ra_ext_context *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->ctx == NULL);
}

static PyMethodDef context_methods[] = {
    {"close", (PyCFunction)context_close, METH_NOARGS,
     "Stops the worker threads and frees the workspace (also on leaving a with block)."},
    {"__enter__", context_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)context_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef context_getset[] = {
    {"threads", (getter)context_threads, NULL, "Threads, the caller's included.", NULL},
    {"closed", (getter)context_closed, NULL, "True after close().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ra_ext_context_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ropeattn.Context",
    .tp_basicsize = sizeof(ra_ext_context),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Context(threads=0): worker threads (threads in all, the caller's\n"
              "included; 0: one per online processor) and a scratch workspace that\n"
              "the calls given context=... reuse.  One call at a time uses it (others\n"
              "wait); give each Python thread its own for parallel calls.  A context\n"
              "manager: `with ropeattn.Context(threads=4) as ctx: ...`.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)context_init,
    .tp_dealloc = (destructor)context_dealloc,
    .tp_methods = context_methods,
    .tp_getset = context_getset,
};

/* The processors this process may run on: its affinity mask's count where
 * the system has one (a container's or taskset's share), else those online. */
static int processors(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 4096 ? (int)n : 1;
}

/* The default contexts, {threads: Context}, of this process.  A forked
 * child has none of its parent's worker threads: its first call makes its
 * own, and the parent's are left as they are (destroying them would wait
 * for threads the child does not have). */
static PyObject *defaults;
static volatile int defaults_forked;

static void forked_child(void) { defaults_forked = 1; }

/* The shared default Context of `threads` threads (0: one per processor
 * this process may run on), made on first use; a borrowed reference, or
 * NULL with the error set.  Called with the GIL held, which serializes it. */
static ra_ext_context *default_of(int threads)
{
    if (threads <= 0) threads = processors();
    if (!defaults || defaults_forked) {
        /* the parent's stay referenced: never destroyed in this process */
        defaults_forked = 0;
        if (!(defaults = PyDict_New())) return NULL;
    }
    PyObject *key = PyLong_FromLong(threads);
    if (!key) return NULL;
    PyObject *found = PyDict_GetItemWithError(defaults, key); /* borrowed */
    if (!found && !PyErr_Occurred()) {
        PyObject *made = PyObject_CallFunction((PyObject *)&ra_ext_context_type, "i", threads);
        /* Making it released the GIL: another thread's may be there now,
         * and the first one stays (a default is never replaced or freed, so
         * a borrowed reference stays good). */
        found = made ? PyDict_SetDefault(defaults, key, made) : NULL;
        if (found) ((ra_ext_context *)found)->shared = 1;
        Py_XDECREF(made);
    }
    Py_DECREF(key);
    return (ra_ext_context *)found;
}

PyObject *ra_ext_default_context(PyObject *self, PyObject *args)
{
    (void)self;
    int threads = 0;
    if (!PyArg_ParseTuple(args, "|i:default_context", &threads)) return NULL;
    ra_ext_context *c = default_of(threads);
    Py_XINCREF(c);
    return (PyObject *)c;
}

int ra_ext_context_init_module(void)
{
    return pthread_atfork(NULL, NULL, forked_child) == 0 ? 0 : -1;
}

int ra_ext_get_context(PyObject *context, ra_ext_context **c)
{
    *c = NULL;
    if (context == Py_None) return (*c = default_of(0)) != NULL;
    if (!PyObject_TypeCheck(context, &ra_ext_context_type)) {
        PyErr_Format(PyExc_TypeError, "context: expected a ropeattn.Context or None, got %s",
                     Py_TYPE(context)->tp_name);
        return 0;
    }
    *c = (ra_ext_context *)context;
    if (!(*c)->ctx) {
        PyErr_SetString(ra_ext_error, "context: the Context is closed");
        return 0;
    }
    return 1;
}

ra_context *ra_ext_context_acquire(ra_ext_context *c)
{
    if (!c || !PyThread_acquire_lock(c->lock, c->shared ? NOWAIT_LOCK : WAIT_LOCK)) return NULL;
    if (!c->ctx) PyThread_release_lock(c->lock); /* closed meanwhile */
    return c->ctx;
}

void ra_ext_context_release(ra_ext_context *c, ra_context *ctx)
{
    if (ctx) PyThread_release_lock(c->lock);
}
