/* tensor.c — a NumPy array as an ra_tensor view, without a copy.  NumPy
 * strides count bytes, ra_tensor's elements: a view maps when every stride
 * is a non-negative multiple of the item size and the last axis is
 * contiguous (ropeattn.h, ra_tensor).  The Python package copies inputs
 * that do not map; an output that does not map is refused here. */
#include "ext.h"

/* Whether a's strides map onto ra_tensor's (see above): -1 if so, else
 * the first axis that does not. */
static int bad_axis(PyArrayObject *a, npy_intp item)
{
    const int ndim = PyArray_NDIM(a);
    for (int i = 0; i < ndim; i++) {
        npy_intp n = PyArray_DIM(a, i), s = PyArray_STRIDE(a, i);
        if (n != 1 && (s < 0 || s % item != 0 || (i == ndim - 1 && s != item))) return i;
    }
    return -1;
}

PyObject *ra_ext_maps(PyObject *self, PyObject *a)
{
    (void)self;
    if (!PyArray_Check(a)) return PyErr_Format(PyExc_TypeError, "maps: expected an array");
    PyArrayObject *arr = (PyArrayObject *)a;
    return PyBool_FromLong(PyArray_ISALIGNED(arr) && bad_axis(arr, PyArray_ITEMSIZE(arr)) < 0);
}

int ra_ext_tensor(PyArrayObject *a, int dtype, int out, const char *name, ra_tensor *t)
{
    size_t item = ra_dtype_size((ra_dtype)dtype);
    if (item == 0 || (size_t)PyArray_ITEMSIZE(a) != item) {
        PyErr_Format(ra_ext_type_error, "%s: item size %d does not match the dtype",
                     name, (int)PyArray_ITEMSIZE(a));
        return 0;
    }
    if (PyArray_NDIM(a) != 4) {
        PyErr_Format(ra_ext_value_error, "%s: expected 4 dimensions [B, S, heads, D], got %d",
                     name, PyArray_NDIM(a));
        return 0;
    }
    if (out && !PyArray_ISWRITEABLE(a)) {
        PyErr_Format(ra_ext_value_error, "%s: the array is read-only", name);
        return 0;
    }
    if (!PyArray_ISALIGNED(a)) {
        PyErr_Format(ra_ext_value_error, "%s: the array is not aligned to its item size", name);
        return 0;
    }
    int axis = bad_axis(a, (npy_intp)item);
    if (axis >= 0) {
        PyErr_Format(ra_ext_value_error,
                     "%s: strides must be non-negative whole elements with the last "
                     "axis contiguous (axis %d has %zd bytes)", name, axis,
                     (Py_ssize_t)PyArray_STRIDE(a, axis));
        return 0;
    }
    t->data = PyArray_DATA(a);
    t->dtype = (ra_dtype)dtype;
    for (int i = 0; i < 4; i++) { /* extent 1: any stride reads the same element */
        t->shape[i] = (int64_t)PyArray_DIM(a, i);
        t->stride[i] = t->shape[i] == 1 ? (i == 3) : PyArray_STRIDE(a, i) / (npy_intp)item;
    }
    return 1;
}

int ra_ext_mask_tensor(PyObject *obj, int dtype, ra_tensor *t)
{
    PyArrayObject *a = (PyArrayObject *)obj;
    npy_intp item = dtype == RA_BOOL ? 1 : (npy_intp)ra_dtype_size((ra_dtype)dtype);
    if (!PyArray_Check(obj) || item == 0 || PyArray_ITEMSIZE(a) != item) {
        PyErr_SetString(ra_ext_type_error, "attn_mask: expected an array of the item size "
                        "of its dtype (bool, float32, float16 or bfloat16 bits)");
        return 0;
    }
    if (PyArray_NDIM(a) != 4 || !PyArray_ISALIGNED(a)) {
        PyErr_SetString(ra_ext_value_error, "attn_mask: expected an aligned 4-D array "
                        "[B, H, Sq, Sk] (extents of 1 or zero strides broadcast)");
        return 0;
    }
    t->data = PyArray_DATA(a);
    t->dtype = (ra_dtype)dtype;
    for (int i = 0; i < 4; i++) {
        npy_intp s = PyArray_STRIDE(a, i);
        t->shape[i] = (int64_t)PyArray_DIM(a, i);
        if (t->shape[i] != 1 && (s < 0 || s % item != 0)) {
            PyErr_Format(ra_ext_value_error, "attn_mask: axis %d's stride of %zd bytes is not "
                         "a non-negative whole number of elements", i, (Py_ssize_t)s);
            return 0;
        }
        t->stride[i] = t->shape[i] == 1 ? 0 : s / item;
    }
    return 1;
}
