/* tensor.c — a NumPy array as an ra_tensor view, without a copy.  NumPy
 * strides count bytes, ra_tensor's elements: a view maps when every stride
 * is a non-negative multiple of the item size and the last axis is
 * contiguous (ropeattn.h, ra_tensor).  The Python package copies inputs
 * that do not map; an output that does not map is refused here. */
#include "ext.h"

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
    t->data = PyArray_DATA(a);
    t->dtype = (ra_dtype)dtype;
    for (int i = 0; i < 4; i++) {
        npy_intp n = PyArray_DIM(a, i), s = PyArray_STRIDE(a, i);
        t->shape[i] = (int64_t)n;
        if (n == 1) {
            t->stride[i] = i == 3 ? 1 : 0;
            continue;
        }
        if (s < 0 || s % (npy_intp)item != 0 || (i == 3 && s != (npy_intp)item)) {
            PyErr_Format(ra_ext_value_error,
                         "%s: strides must be non-negative whole elements with the last "
                         "axis contiguous (axis %d has %zd bytes)", name, i, (Py_ssize_t)s);
            return 0;
        }
        t->stride[i] = (int64_t)(s / (npy_intp)item);
    }
    return 1;
}
