/*
 * ext.h — what the files of the extension module ropeattn._ropeattn share:
 * NumPy arrays as ra_tensor views, library statuses as Python exceptions,
 * and the Context type.  The Python package (python/ropeattn) checks shapes
 * and dtypes and chooses defaults; these files map arrays onto the C API and
 * release the GIL around each kernel.
 */
#ifndef ROPEATTN_EXT_H
#define ROPEATTN_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL ropeattn_ARRAY_API
#ifndef RA_EXT_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "ropeattn.h"

/* ropeattn.Error and its subclasses that are also ValueError, TypeError,
 * NotImplementedError, MemoryError, OSError (FileError), ValueError
 * (FormatError) and LookupError (NotFoundError), and CacheFullError, an
 * ArgumentError (errors.c). */
extern PyObject *ra_ext_error, *ra_ext_value_error, *ra_ext_type_error,
    *ra_ext_unsupported_error, *ra_ext_memory_error, *ra_ext_file_error,
    *ra_ext_format_error, *ra_ext_not_found_error, *ra_ext_cache_full_error;
int ra_ext_add_errors(PyObject *module);
/* Raises the exception for status, "<call>: <ra_status_string> (<ra_last_error>)",
 * with .status the status's number; returns NULL.  ra_ext_raise_detail:
 * the same with the detail given (libropeattn_hf's ra_hf_last_error). */
PyObject *ra_ext_raise(ra_status status, const char *call);
PyObject *ra_ext_raise_detail(ra_status status, const char *call, const char *detail);

/* Fills *t with a view of a (4-D, aligned, non-negative strides that are
 * whole elements, the last axis contiguous, itemsize that of dtype;
 * writable when out is nonzero), or raises ValueError and returns 0.
 * Strides of axes of extent 1 do not matter and are set to 0 (1 for the
 * last).  name names the argument in the message. */
int ra_ext_tensor(PyArrayObject *a, int dtype, int out, const char *name, ra_tensor *t);
/* attn_mask as the 4-D view ra_attention_options takes (SDPA's attn_mask
 * over [B, H, Sq, Sk]): an aligned array whose strides are non-negative
 * whole elements, any axis included (zero: broadcast, as np.broadcast_to
 * makes them); dtype RA_BOOL (one byte, nonzero = attend), RA_F32, RA_F16
 * or RA_BF16 (additive).  The library checks its shape against q's and
 * k's.  Returns 0 with ValueError naming what does not fit. */
int ra_ext_mask_tensor(PyObject *obj, int dtype, ra_tensor *t);
/* maps(a): whether ra_ext_tensor takes a's strides and alignment (the
 * package copies an input that it does not). */
PyObject *ra_ext_maps(PyObject *self, PyObject *a);

/* ropeattn.Context: an ra_context and a lock, since a context serves one
 * calling thread at a time (ropeattn.h, "Thread safety"). */
typedef struct ra_ext_context {
    PyObject_HEAD
    ra_context *ctx; /* NULL once closed */
    PyThread_type_lock lock;
    int shared; /* a default context: never closed; a call finding it busy
                   runs on its calling thread alone rather than wait */
} ra_ext_context;
extern PyTypeObject ra_ext_context_type;

/* context: None or a Context, open.  Sets *c (None: the default context,
 * one thread per processor this process may run on, made on first use in
 * this process) or raises and returns 0. */
int ra_ext_get_context(PyObject *context, ra_ext_context **c);
/* default_context(threads=0): the shared default Context of that many
 * threads (0: one per processor this process may run on). */
PyObject *ra_ext_default_context(PyObject *self, PyObject *args);
/* Registers the fork handler after which a child makes its own defaults. */
int ra_ext_context_init_module(void);
/* With the GIL released: takes c's lock and returns its ra_context, or
 * returns NULL holding nothing (c NULL, c closed meanwhile, or c a default
 * that another call holds): the call then runs on the calling thread
 * alone, as NULL means.  release gives the lock back when ctx, acquire's
 * result, is not NULL. */
ra_context *ra_ext_context_acquire(ra_ext_context *c);
void ra_ext_context_release(ra_ext_context *c, ra_context *ctx);

/* ropeattn._ropeattn.Rope: an ra_rope (rope.c). */
typedef struct ra_ext_rope {
    PyObject_HEAD
    ra_rope *rope;
} ra_ext_rope;
extern PyTypeObject ra_ext_rope_type;

PyObject *ra_ext_rope_apply(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *ra_ext_attention(PyObject *self, PyObject *args);
PyObject *ra_ext_attention_backward(PyObject *self, PyObject *args);
PyObject *ra_ext_attention_block(PyObject *self, PyObject *args);
PyObject *ra_ext_attention_block_backward(PyObject *self, PyObject *args);
PyObject *ra_ext_precompute_freqs(PyObject *self, PyObject *args);

/* ropeattn._ropeattn.HFLayer and KVCache, and the layer's forwards
 * (layer.c).  ra_ext_layer_init_module allocates the lock that opening
 * checkpoints takes (cJSON keeps its last error in a global). */
extern PyTypeObject ra_ext_layer_type, ra_ext_cache_type;
int ra_ext_layer_init_module(void);
PyObject *ra_ext_layer_forward(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *ra_ext_layer_forward_cached(PyObject *self, PyObject *args, PyObject *kwargs);
/* vision_windows(config, grid): ra_hf_vision_windows (layer.c). */
PyObject *ra_ext_vision_windows(PyObject *self, PyObject *args);
/* The layer of an HFLayer (NULL, with the error set, when it has none). */
const ra_layer *ra_ext_layer_of(PyObject *layer);
/* x, y float32 [B, S, dim]; ids None, int64 [B, S] or (M-RoPE) [3, B, S];
 * mask None or uint8 [B, S]: checked, with *positions from start and ids. */
int ra_ext_forward_args(const ra_layer *l, PyObject *y, PyObject *x, long long start,
                        PyObject *ids, PyObject *mask, ra_positions *positions,
                        npy_intp *batch, npy_intp *seq);

extern PyTypeObject ra_ext_pool_type;
PyObject *ra_ext_layer_forward_paged(PyObject *self, PyObject *args, PyObject *kwargs);

#endif
