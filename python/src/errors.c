/* errors.c — library statuses as Python exceptions.  ropeattn.Error is the
 * base of them all; a status that reports a bad argument is also a
 * ValueError, a bad dtype also a TypeError, an unsupported combination also
 * a NotImplementedError, a failed allocation also a MemoryError, a file
 * that cannot be read an OSError, a malformed file a ValueError, a missing
 * tensor or key a LookupError, so that code written for NumPy's and
 * Python's exceptions catches them.  A full KV cache is an ArgumentError
 * of its own class, CacheFullError. */
#include "ext.h"

PyObject *ra_ext_error, *ra_ext_value_error, *ra_ext_type_error,
    *ra_ext_unsupported_error, *ra_ext_memory_error, *ra_ext_file_error,
    *ra_ext_format_error, *ra_ext_not_found_error, *ra_ext_cache_full_error;

static PyObject *subclass(const char *name, PyObject *builtin, const char *doc)
{
    PyObject *bases = PyTuple_Pack(2, ra_ext_error, builtin);
    if (!bases) return NULL;
    PyObject *cls = PyErr_NewExceptionWithDoc(name, doc, bases, NULL);
    Py_DECREF(bases);
    return cls;
}

/* ropeattn.Error, with the class attribute status = None (raised by the
 * package's own checks); ra_ext_raise sets it on the instance. */
static PyObject *base_error(void)
{
    PyObject *dict = Py_BuildValue("{s:O}", "status", Py_None);
    if (!dict) return NULL;
    PyObject *cls = PyErr_NewExceptionWithDoc(
        "ropeattn.Error", "An error reported by ropeattn; .status is the ra_status "
        "number when the C library reported it, else None.", NULL, dict);
    Py_DECREF(dict);
    return cls;
}

/* The subclasses of ropeattn.Error, each with the built-in exception it
 * also is (NULL: ArgumentError, for CacheFullError after it). */
static const struct {
    PyObject **cls;
    const char *name;
    PyObject **builtin;
    const char *doc;
} subclasses[] = {
    {&ra_ext_value_error, "ArgumentError", &PyExc_ValueError,
     "A size, shape, position or option out of range."},
    {&ra_ext_type_error, "DtypeError", &PyExc_TypeError,
     "An array of a dtype the call cannot take."},
    {&ra_ext_unsupported_error, "UnsupportedError", &PyExc_NotImplementedError,
     "Valid, but not supported by the library."},
    {&ra_ext_memory_error, "OutOfMemoryError", &PyExc_MemoryError,
     "The library could not allocate memory."},
    {&ra_ext_file_error, "FileError", &PyExc_OSError, "A file could not be opened or read."},
    {&ra_ext_format_error, "FormatError", &PyExc_ValueError, "A file is malformed."},
    {&ra_ext_not_found_error, "NotFoundError", &PyExc_LookupError,
     "A named tensor or key is missing (a layer the checkpoint does not have)."},
    {&ra_ext_cache_full_error, "CacheFullError", NULL,
     "A KV cache has no room for the tokens given (an ArgumentError)."},
};

int ra_ext_add_errors(PyObject *module)
{
    if (!(ra_ext_error = base_error())) return -1;
    Py_INCREF(ra_ext_error);
    if (PyModule_AddObject(module, "Error", ra_ext_error) < 0) {
        Py_DECREF(ra_ext_error);
        return -1;
    }
    for (size_t i = 0; i < sizeof subclasses / sizeof subclasses[0]; i++) {
        char qualified[64];
        snprintf(qualified, sizeof qualified, "ropeattn.%s", subclasses[i].name);
        PyObject *cls = subclasses[i].builtin
                            ? subclass(qualified, *subclasses[i].builtin, subclasses[i].doc)
                            : PyErr_NewExceptionWithDoc(qualified, subclasses[i].doc,
                                                        ra_ext_value_error, NULL);
        if (!cls) return -1;
        *subclasses[i].cls = cls;
        Py_INCREF(cls);
        if (PyModule_AddObject(module, subclasses[i].name, cls) < 0) {
            Py_DECREF(cls);
            return -1;
        }
    }
    return 0;
}

static PyObject *class_of(ra_status status)
{
    switch (status) {
    case RA_ERR_DTYPE: return ra_ext_type_error;
    case RA_ERR_UNSUPPORTED: return ra_ext_unsupported_error;
    case RA_ERR_NOMEM: return ra_ext_memory_error;
    case RA_ERR_IO: return ra_ext_file_error;
    case RA_ERR_FORMAT: return ra_ext_format_error;
    case RA_ERR_NOT_FOUND: return ra_ext_not_found_error;
    case RA_ERR_CACHE_FULL: return ra_ext_cache_full_error;
    case RA_ERR_NULL: case RA_ERR_SIZE: case RA_ERR_OVERFLOW: case RA_ERR_HEAD_DIM:
    case RA_ERR_DIM: case RA_ERR_GQA: case RA_ERR_POSITION: case RA_ERR_THETA:
    case RA_ERR_ARGUMENT: case RA_ERR_SHAPE:
        return ra_ext_value_error;
    default: return ra_ext_error;
    }
}

PyObject *ra_ext_raise_detail(ra_status status, const char *call, const char *detail)
{
    PyObject *cls = class_of(status);
    PyObject *msg = detail[0]
        ? PyUnicode_FromFormat("%s: %s (%s)", call, ra_status_string(status), detail)
        : PyUnicode_FromFormat("%s: %s", call, ra_status_string(status));
    if (!msg) return NULL;
    PyObject *exc = PyObject_CallOneArg(cls, msg);
    Py_DECREF(msg);
    if (!exc) return NULL;
    PyObject *code = PyLong_FromLong((long)status);
    if (code && PyObject_SetAttrString(exc, "status", code) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(code);
    Py_DECREF(exc);
    return NULL;
}

PyObject *ra_ext_raise(ra_status status, const char *call)
{
    /* this thread's: read before any other call */
    return ra_ext_raise_detail(status, call, ra_last_error());
}
