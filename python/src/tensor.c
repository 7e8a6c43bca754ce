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
