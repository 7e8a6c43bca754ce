/* module.c — ropeattn._ropeattn, the extension module: the library's
 * version and the header's it was built with (the package compares them at
 * import), the SIMD path, and the types and functions of the other files
 * (libropeattn's, and libropeattn_hf's checkpoint layers in layer.c). */
#define RA_EXT_IMPORTS_NUMPY
#include "ext.h"

static PyObject *library_version(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyUnicode_FromString(ra_version());
}

static PyObject *simd(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyUnicode_FromString(ra_simd_name());
}

static PyMethodDef methods[] = {
    {"library_version", library_version, METH_NOARGS, "ra_version(): the library's version."},
    {"simd", simd, METH_NOARGS, "ra_simd_name(): the SIMD kernels in use."},
    {"maps", ra_ext_maps, METH_O, "Whether the library reads the array in place."},
    {"rope_apply", (PyCFunction)(void (*)(void))ra_ext_rope_apply, METH_VARARGS | METH_KEYWORDS,
     "ra_rope_apply on strided arrays (see rope.c)."},
    {"attention", ra_ext_attention, METH_VARARGS,
     "ra_attention, or ra_attention_forward_lse, on strided arrays (see attention.c)."},
    {"attention_backward", ra_ext_attention_backward, METH_VARARGS,
     "ra_attention_backward on strided arrays (see attention.c)."},
    {"attention_block", ra_ext_attention_block, METH_VARARGS,
     "ra_attention_block_lse on strided arrays (see attention.c)."},
    {"attention_block_backward", ra_ext_attention_block_backward, METH_VARARGS,
     "ra_attention_block_backward on strided arrays (see attention.c)."},
    {"default_context", ra_ext_default_context, METH_VARARGS,
     "default_context(threads=0): the shared Context that context=None stands for "
     "(see context.c)."},
    {"precompute_freqs", ra_ext_precompute_freqs, METH_VARARGS,
     "ra_precompute_freqs(head_dim, end, theta) -> (cos, sin) (see rope.c)."},
    {"layer_forward", (PyCFunction)(void (*)(void))ra_ext_layer_forward,
     METH_VARARGS | METH_KEYWORDS, "ra_layer_forward (see layer.c)."},
    {"layer_forward_cached", (PyCFunction)(void (*)(void))ra_ext_layer_forward_cached,
     METH_VARARGS | METH_KEYWORDS, "ra_layer_forward_cached (see layer.c)."},
    {"layer_forward_paged", (PyCFunction)(void (*)(void))ra_ext_layer_forward_paged,
     METH_VARARGS | METH_KEYWORDS, "ra_layer_forward_paged (see pool.c)."},
    {"vision_windows", ra_ext_vision_windows, METH_VARARGS,
     "ra_hf_vision_windows(config path, grid_thw) (see layer.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_ropeattn",
    "The C extension under the ropeattn package: use ropeattn, not this.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ropeattn(void)
{
    import_array();
    if (PyType_Ready(&ra_ext_context_type) < 0 || PyType_Ready(&ra_ext_rope_type) < 0 ||
        PyType_Ready(&ra_ext_layer_type) < 0 || PyType_Ready(&ra_ext_cache_type) < 0 ||
        PyType_Ready(&ra_ext_pool_type) < 0 ||
        ra_ext_layer_init_module() < 0 || ra_ext_context_init_module() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&ra_ext_context_type);
    Py_INCREF(&ra_ext_rope_type);
    Py_INCREF(&ra_ext_layer_type);
    Py_INCREF(&ra_ext_cache_type);
    Py_INCREF(&ra_ext_pool_type);
    if (ra_ext_add_errors(m) < 0 ||
        PyModule_AddObject(m, "Context", (PyObject *)&ra_ext_context_type) < 0 ||
        PyModule_AddObject(m, "Rope", (PyObject *)&ra_ext_rope_type) < 0 ||
        PyModule_AddObject(m, "HFLayer", (PyObject *)&ra_ext_layer_type) < 0 ||
        PyModule_AddObject(m, "KVCache", (PyObject *)&ra_ext_cache_type) < 0 ||
        PyModule_AddObject(m, "KVPool", (PyObject *)&ra_ext_pool_type) < 0 ||
        PyModule_AddStringConstant(m, "HEADER_VERSION", RA_VERSION_STRING) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
