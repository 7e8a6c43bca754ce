/* layer.c — one attention layer of a Hugging Face checkpoint and its KV
 * cache:
 *   HFLayer          an ra_hf_layer, built by ra_hf_layer_create as the
 *                    CLI's `ropeattn attention` builds it
 *   layer_forward    ra_layer_forward
 *   KVCache          an ra_kv_cache and a lock (its writers need it to
 *                    themselves: ropeattn.h, "Thread safety")
 *   layer_forward_cached  ra_layer_forward_cached (_mask)
 * ropeattn.Layer and ropeattn.KVCache (python/ropeattn/layer.py) find the
 * files, check shapes and choose defaults; these map them onto the C API
 * and release the GIL around every call that reads files or computes.
 *
 * Shapes: B batch, S tokens, dim the model width, Hkv key/value heads, D
 * head_dim. */
#include <stdio.h>

#include "ext.h"
#include "ropeattn_hf.h"

/* cJSON keeps its last error in a process-wide variable, so checkpoints and
 * configs are opened (and layers built) under this lock (ropeattn_hf.h). */
static PyThread_type_lock open_lock;

int ra_ext_layer_init_module(void)
{
    if (!open_lock && !(open_lock = PyThread_allocate_lock())) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* ---- HFLayer ------------------------------------------------------------ */

typedef struct ra_ext_layer {
    PyObject_HEAD
    ra_hf_layer *layer;
    PyObject *model_type; /* str: config.json's model_type, "" when absent */
} ra_ext_layer;

/* What opening reads, taken from the arguments with the GIL held. */
typedef struct open_args {
    const char *weights, *config; /* config NULL: a config that says nothing ("{}") */
    const char *rope_parameters;  /* JSON text or NULL */
    Py_ssize_t rope_parameters_len;
    int has_theta, has_max_position_embeddings;
    double theta;
    long long max_position_embeddings;
    ra_hf_options o;
} open_args;

/* The failing call's name and its ra_hf_last_error(), copied at once. */
typedef struct open_error {
    const char *call;
    char detail[1024];
} open_error;

static ra_status hf_check(ra_status st, const char *call, open_error *e)
{
    if (st != RA_OK) {
        e->call = call;
        snprintf(e->detail, sizeof e->detail, "%s", ra_hf_last_error());
    }
    return st;
}

/* With the GIL released and open_lock held: the checkpoint and config
 * opened, the config's overrides set, the layer built, and both closed
 * again (the layer holds its own copy of the weights, in the checkpoint's
 * dtype for f16 and bf16 ones). */
static ra_status open_layer(const open_args *a, ra_hf_layer **out, char *model_type,
                            size_t model_type_len, open_error *e)
{
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    ra_status st = hf_check(ra_hf_checkpoint_open(&ckpt, a->weights), "ra_hf_checkpoint_open", e);
    if (st == RA_OK)
        st = a->config ? hf_check(ra_hf_config_open(&config, a->config), "ra_hf_config_open", e)
                       : hf_check(ra_hf_config_parse(&config, "{}", 2), "ra_hf_config_parse", e);
    if (st == RA_OK && a->rope_parameters)
        st = hf_check(ra_hf_config_set_rope_parameters(config, a->rope_parameters,
                                                       (size_t)a->rope_parameters_len),
                      "ra_hf_config_set_rope_parameters", e);
    if (st == RA_OK && a->has_theta)
        st = hf_check(ra_hf_config_set_rope_theta(config, a->theta),
                      "ra_hf_config_set_rope_theta", e);
    if (st == RA_OK && a->has_max_position_embeddings)
        st = hf_check(ra_hf_config_set_max_position_embeddings(
                          config, (int64_t)a->max_position_embeddings),
                      "ra_hf_config_set_max_position_embeddings", e);
    if (st == RA_OK)
        st = hf_check(ra_hf_layer_create(out, ckpt, config, &a->o), "ra_hf_layer_create", e);
    if (st == RA_OK) snprintf(model_type, model_type_len, "%s", ra_hf_config_model_type(config));
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
    return st;
}

/* HFLayer(weights, config=None, *, layer=-1, n_heads=0, n_kv_heads=0,
 *         layout=-1, first_token=0, n_tokens=0, max_position=-1, seq_len=0,
 *         position_ids=False, rope_parameters=None, theta=None,
 *         max_position_embeddings=None, vision=False, token_types=False,
 *         vision_windows=False)
 * weights, config: paths (str, bytes or os.PathLike); the integers are
 * ra_hf_options' fields; rope_parameters: JSON text; theta and
 * max_position_embeddings: the config's overrides (None: the config's). */
static int layer_init(ra_ext_layer *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"weights", "config", "layer", "n_heads", "n_kv_heads", "layout",
                         "first_token", "n_tokens", "max_position", "seq_len", "position_ids",
                         "rope_parameters", "theta", "max_position_embeddings", "vision",
                         "token_types", "vision_windows", NULL};
    open_args a = {.o = ra_hf_options_init()};
    PyObject *weights_obj, *config_obj = Py_None, *rope_obj = Py_None, *theta_obj = Py_None,
             *mpe_obj = Py_None;
    long long layer = -1, n_heads = 0, n_kv_heads = 0, layout = -1, first_token = 0,
              n_tokens = 0, max_position = -1, seq_len = 0;
    int position_ids = 0, vision = 0, token_types = 0, vision_windows = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$LLLLLLLLpOOOppp:HFLayer", kw,
                                     &weights_obj, &config_obj, &layer, &n_heads, &n_kv_heads,
                                     &layout, &first_token, &n_tokens, &max_position, &seq_len,
                                     &position_ids, &rope_obj, &theta_obj, &mpe_obj, &vision,
                                     &token_types, &vision_windows))
        return -1;
    if (self->layer) {
        PyErr_SetString(ra_ext_error, "HFLayer: already initialized");
        return -1;
    }
    a.o.layer = layer;
    a.o.n_heads = n_heads;
    a.o.n_kv_heads = n_kv_heads;
    a.o.layout = layout;
    a.o.first_token = first_token;
    a.o.n_tokens = n_tokens;
    a.o.max_position = max_position;
    a.o.seq_len = seq_len;
    a.o.position_ids = position_ids;
    a.o.vision = vision;
    a.o.token_types = token_types;
    a.o.vision_windows = vision_windows;
    if (theta_obj != Py_None) {
        a.theta = PyFloat_AsDouble(theta_obj);
        if (a.theta == -1.0 && PyErr_Occurred()) return -1;
        a.has_theta = 1;
    }
    if (mpe_obj != Py_None) {
        a.max_position_embeddings = PyLong_AsLongLong(mpe_obj);
        if (a.max_position_embeddings == -1 && PyErr_Occurred()) return -1;
        a.has_max_position_embeddings = 1;
    }
    if (rope_obj != Py_None &&
        !(a.rope_parameters = PyUnicode_AsUTF8AndSize(rope_obj, &a.rope_parameters_len)))
        return -1;
    PyObject *weights = NULL, *config = NULL; /* bytes */
    if (!PyUnicode_FSConverter(weights_obj, &weights) ||
        (config_obj != Py_None && !PyUnicode_FSConverter(config_obj, &config))) {
        Py_XDECREF(weights);
        return -1;
    }
    a.weights = PyBytes_AS_STRING(weights);
    a.config = config ? PyBytes_AS_STRING(config) : NULL;
    char model_type[256];
    open_error e;
    ra_status st;
    ra_hf_layer *built = NULL;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(open_lock, WAIT_LOCK);
    st = open_layer(&a, &built, model_type, sizeof model_type, &e);
    PyThread_release_lock(open_lock);
    Py_END_ALLOW_THREADS
    Py_DECREF(weights);
    Py_XDECREF(config);
    if (st != RA_OK) {
        ra_ext_raise_detail(st, e.call, e.detail);
        return -1;
    }
    if (self->layer) { /* another thread's __init__ got there first */
        ra_hf_layer_destroy(built);
        PyErr_SetString(ra_ext_error, "HFLayer: already initialized");
        return -1;
    }
    self->layer = built;
    Py_XSETREF(self->model_type, PyUnicode_DecodeUTF8(model_type, (Py_ssize_t)strlen(model_type),
                                                      "replace"));
    return self->model_type ? 0 : -1;
}

static void layer_dealloc(ra_ext_layer *self)
{
    ra_hf_layer_destroy(self->layer); /* no call holds it: each keeps a reference */
    Py_XDECREF(self->model_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

const ra_layer *ra_ext_layer_of(PyObject *obj)
{
    ra_ext_layer *self = (ra_ext_layer *)obj;
    if (self->layer) return ra_hf_layer_get(self->layer);
    PyErr_SetString(ra_ext_error, "HFLayer: not initialized");
    return NULL;
}

/* Into config: the switches and scales of the attention features some
 * families use (norms after RoPE, the output gate's form, v's norm, latent
 * attention's latent scales and raw q latent, clip after the norms, an
 * encoder's non_causal, RoPE on the values too, a windowed encoder's
 * max_document). */
static int add_feature_fields(PyObject *config, const ra_layer_config *c)
{
    const struct {
        const char *key;
        PyObject *value;
    } fields[] = {
        {"norm_after_rope", PyBool_FromLong(c->norm_after_rope)},
        {"clip_after_norm", PyBool_FromLong(c->clip_after_norm)},
        {"v_norm", PyBool_FromLong(c->v_norm)},
        {"gated_output", PyBool_FromLong(c->gated_output)},
        {"gate_per_head", PyBool_FromLong(c->gate_per_head)},
        {"gate_softplus", PyBool_FromLong(c->gate_softplus)},
        {"q_latent_scale", PyFloat_FromDouble(c->q_latent_scale ? c->q_latent_scale : 1.0)},
        {"kv_latent_scale", PyFloat_FromDouble(c->kv_latent_scale ? c->kv_latent_scale : 1.0)},
        {"q_b_raw_latent", PyBool_FromLong(c->q_b_raw_latent)},
        {"non_causal", PyBool_FromLong(c->non_causal)},
        {"rope_values", PyBool_FromLong(c->rope_values)},
        {"max_document", PyLong_FromLongLong((long long)c->max_document)},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        failed = failed || !fields[i].value ||
                 PyDict_SetItemString(config, fields[i].key, fields[i].value) != 0;
        Py_XDECREF(fields[i].value);
    }
    return failed ? -1 : 0;
}

/* config: ra_layer_config's fields as the layer uses them, its rope's in
 * "rope" (type and layout as ra_rope_type and ra_layout numbers). */
static PyObject *layer_config(ra_ext_layer *self, void *closure)
{
    (void)closure;
    const ra_layer *l = ra_ext_layer_of((PyObject *)self);
    if (!l) return NULL;
    const ra_layer_config *c = ra_layer_get_config(l);
    const ra_rope_config *r = c->rope;
    PyObject *rope = Py_BuildValue(
        "{s:i,s:i,s:L,s:L,s:d,s:L,s:d,s:L,s:L,s:L,s:d,s:(LLL),s:O}", "type", (int)r->type,
        "layout",
        (int)r->layout, "head_dim", (long long)r->head_dim, "rotary_dim",
        (long long)(r->rotary_dim ? r->rotary_dim : r->head_dim), "theta", r->theta,
        "table_size", (long long)r->table_size, "factor", r->factor,
        "original_max_position_embeddings", (long long)r->original_max_position_embeddings,
        "max_position_embeddings", (long long)r->max_position_embeddings, "seq_len",
        (long long)r->seq_len, "attention_factor", r->attention_factor, "mrope_section",
        (long long)r->mrope_section[0], (long long)r->mrope_section[1],
        (long long)r->mrope_section[2], "mrope_interleaved",
        r->mrope_interleaved ? Py_True : Py_False);
    if (!rope) return NULL;
    PyObject *pairs = PyLong_FromLongLong((long long)r->rotating_pairs); /* 0: every pair */
    int failed = !pairs || PyDict_SetItemString(rope, "rotating_pairs", pairs) != 0;
    Py_XDECREF(pairs);
    PyObject *axial = PyLong_FromLong((long)r->axial); /* 0: not 2-D */
    failed = failed || !axial || PyDict_SetItemString(rope, "axial", axial) != 0 ||
             PyDict_SetItemString(rope, "axial_column_first",
                                  r->axial_column_first ? Py_True : Py_False) != 0;
    Py_XDECREF(axial);
    if (failed) {
        Py_DECREF(rope);
        return NULL;
    }
    PyObject *config = Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:N,s:O,s:d,s:O,s:O,s:O,s:d,s:d,s:O,s:d,s:d,s:O,s:d,s:d,s:L,s:L,s:d,"
        "s:L,s:L,s:L,s:L,s:L,s:O,s:d}", "dim",
        (long long)c->dim, "n_heads", (long long)c->n_heads, "n_kv_heads",
        (long long)(c->n_kv_heads ? c->n_kv_heads : c->n_heads), "head_dim",
        (long long)c->head_dim, "rope", rope, "no_rope", c->no_rope ? Py_True : Py_False,
        "norm_eps", c->norm_eps, "norm_whole", c->norm_whole ? Py_True : Py_False,
        "norm_head_weights", c->norm_head_weights ? Py_True : Py_False, "norm_layer",
        c->norm_layer ? Py_True : Py_False, "scale", c->scale, "clip_qkv", c->clip_qkv,
        "qk_l2_norm", c->qk_l2_norm ? Py_True : Py_False, "temperature_floor",
        c->temperature_floor, "temperature_scale", c->temperature_scale,
        "temperature_no_offset", c->temperature_no_offset ? Py_True : Py_False,
        "temperature_length", c->temperature_length, "temperature_power", c->temperature_power,
        "window",
        (long long)c->window, "chunk", (long long)c->chunk, "softcap", c->softcap,
        "kv_lora_rank", (long long)c->kv_lora_rank, "q_lora_rank", (long long)c->q_lora_rank,
        "qk_nope_head_dim", (long long)c->qk_nope_head_dim, "v_head_dim",
        (long long)(c->v_head_dim ? c->v_head_dim : c->head_dim), "max_keys",
        (long long)c->max_keys, "positions_are_slots",
        c->positions_are_slots ? Py_True : Py_False, "v_scale", c->v_scale ? c->v_scale : 1.0);
    if (config && add_feature_fields(config, c) != 0) Py_CLEAR(config);
    return config;
}

static PyObject *layer_model_type(ra_ext_layer *self, void *closure)
{
    (void)closure;
    if (!ra_ext_layer_of((PyObject *)self)) return NULL;
    Py_INCREF(self->model_type);
    return self->model_type;
}

/* tensors(): [(name, shape tuple)], the checkpoint tensors the layer was
 * built from: weights, biases, q/k norms. */
static PyObject *layer_tensors(ra_ext_layer *self, PyObject *unused)
{
    (void)unused;
    if (!ra_ext_layer_of((PyObject *)self)) return NULL;
    int64_t n = ra_hf_layer_tensor_count(self->layer);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        int64_t shape[8];
        int ndim = ra_hf_layer_tensor_shape(self->layer, i, shape);
        PyObject *dims = PyTuple_New(ndim > 0 ? ndim : 0);
        for (int d = 0; dims && d < ndim; d++) {
            PyObject *v = PyLong_FromLongLong((long long)shape[d]);
            if (!v) Py_CLEAR(dims);
            else PyTuple_SET_ITEM(dims, d, v);
        }
        PyObject *item = dims ? Py_BuildValue("(sN)", ra_hf_layer_tensor_name(self->layer, i),
                                              dims)
                              : NULL;
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

/* token_type_mask(token_type_ids, padding, mask, past=0):
 * ra_hf_token_type_mask_cached; token_type_ids int64 [B, past + S],
 * padding None or uint8 [B, past + S], mask bool [B, 1, S, past + S]
 * (written), each C-contiguous and aligned. */
static PyObject *layer_token_type_mask(ra_ext_layer *self, PyObject *args)
{
    PyObject *tt, *pad, *mask;
    long long past = 0;
    if (!PyArg_ParseTuple(args, "OOO|L:token_type_mask", &tt, &pad, &mask, &past) ||
        !ra_ext_layer_of((PyObject *)self))
        return NULL;
    PyArrayObject *t = (PyArrayObject *)tt, *p = (PyArrayObject *)pad, *m = (PyArrayObject *)mask;
    const int ok = PyArray_Check(tt) && PyArray_TYPE(t) == NPY_INT64 && PyArray_NDIM(t) == 2 &&
                   PyArray_IS_C_CONTIGUOUS(t) && PyArray_ISALIGNED(t) && PyArray_Check(mask) &&
                   PyArray_TYPE(m) == NPY_BOOL && PyArray_NDIM(m) == 4 &&
                   PyArray_IS_C_CONTIGUOUS(m) && PyArray_ISWRITEABLE(m) &&
                   PyArray_DIM(m, 0) == PyArray_DIM(t, 0) && PyArray_DIM(m, 1) == 1 &&
                   past >= 0 && PyArray_DIM(m, 2) + past == PyArray_DIM(t, 1) &&
                   PyArray_DIM(m, 3) == PyArray_DIM(t, 1) &&
                   (pad == Py_None ||
                    (PyArray_Check(pad) && PyArray_TYPE(p) == NPY_UINT8 && PyArray_NDIM(p) == 2 &&
                     PyArray_IS_C_CONTIGUOUS(p) && PyArray_DIM(p, 0) == PyArray_DIM(t, 0) &&
                     PyArray_DIM(p, 1) == PyArray_DIM(t, 1)));
    if (!ok) {
        PyErr_SetString(ra_ext_value_error, "token_type_mask: expected int64 [B, P + S], None "
                        "or uint8 [B, P + S], and a writable bool [B, 1, S, P + S], "
                        "C-contiguous, P = past >= 0");
        return NULL;
    }
    ra_status st = ra_hf_token_type_mask_cached(
        self->layer, (const int64_t *)PyArray_DATA(t),
        pad == Py_None ? NULL : (const uint8_t *)PyArray_DATA(p), (int64_t)PyArray_DIM(t, 0),
        (int64_t)past, (int64_t)PyArray_DIM(m, 2), (uint8_t *)PyArray_DATA(m));
    if (st != RA_OK) return ra_ext_raise_detail(st, "ra_hf_token_type_mask", ra_hf_last_error());
    Py_RETURN_NONE;
}

static int carray(PyObject *obj, int npy, int nd, const npy_intp *shape, int out,
                  const char *name);

/* With the GIL released and open_lock held: ra_hf_vision_windows of the
 * config at path for grid [n, 3] into malloc'ed window_index, cu and
 * positions (counts their sizes). */
static ra_status windows_of(const char *path, const int64_t *grid, int64_t n, int64_t counts[3],
                            int64_t **index, int64_t **cu, int64_t **pos, open_error *e)
{
    ra_hf_config *config = NULL;
    ra_status st = hf_check(ra_hf_config_open(&config, path), "ra_hf_config_open", e);
    if (st == RA_OK)
        st = hf_check(ra_hf_vision_windows(config, grid, n, counts, NULL, NULL, NULL),
                      "ra_hf_vision_windows", e);
    if (st == RA_OK && (!(*index = malloc((size_t)(counts[1] ? counts[1] : 1) * 8)) ||
                        !(*cu = malloc((size_t)(counts[2] + 1) * 8)) ||
                        !(*pos = malloc((size_t)(counts[0] ? counts[0] : 1) * 16)))) {
        st = RA_ERR_NOMEM;
        e->call = "vision_windows";
        snprintf(e->detail, sizeof e->detail, "out of memory");
    }
    if (st == RA_OK)
        st = hf_check(ra_hf_vision_windows(config, grid, n, counts, *index, *cu, *pos),
                      "ra_hf_vision_windows", e);
    ra_hf_config_close(config);
    return st;
}

/* vision_windows(config, grid): ra_hf_vision_windows for config.json's
 * path and grid int64 [n, 3] -> (window_index [G], cu_window_seqlens
 * [W + 1], positions [N, 2]), int64 arrays. */
PyObject *ra_ext_vision_windows(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *path_obj, *grid, *path = NULL;
    if (!PyArg_ParseTuple(args, "OO:vision_windows", &path_obj, &grid)) return NULL;
    const npy_intp grid_shape[2] = {-1, 3};
    if (!carray(grid, NPY_INT64, 2, grid_shape, 0, "grid_thw") ||
        !PyUnicode_FSConverter(path_obj, &path))
        return NULL;
    int64_t counts[3] = {0, 0, 0}, *index = NULL, *cu = NULL, *pos = NULL;
    const int64_t *g = (const int64_t *)PyArray_DATA((PyArrayObject *)grid);
    const int64_t n = (int64_t)PyArray_DIM((PyArrayObject *)grid, 0);
    open_error e;
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(open_lock, WAIT_LOCK);
    st = windows_of(PyBytes_AS_STRING(path), g, n, counts, &index, &cu, &pos, &e);
    PyThread_release_lock(open_lock);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    PyObject *out = NULL;
    if (st != RA_OK)
        ra_ext_raise_detail(st, e.call, e.detail);
    else {
        const npy_intp di[1] = {counts[1]}, dc[1] = {counts[2] + 1}, dp[2] = {counts[0], 2};
        PyObject *a = PyArray_SimpleNew(1, di, NPY_INT64), *b = PyArray_SimpleNew(1, dc, NPY_INT64),
                 *c = PyArray_SimpleNew(2, dp, NPY_INT64);
        if (a && b && c) {
            memcpy(PyArray_DATA((PyArrayObject *)a), index, (size_t)counts[1] * 8);
            memcpy(PyArray_DATA((PyArrayObject *)b), cu, (size_t)(counts[2] + 1) * 8);
            memcpy(PyArray_DATA((PyArrayObject *)c), pos, (size_t)counts[0] * 16);
            out = PyTuple_Pack(3, a, b, c);
        }
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
    }
    free(index);
    free(cu);
    free(pos);
    return out;
}

static PyMethodDef layer_methods[] = {
    {"tensors", (PyCFunction)layer_tensors, METH_NOARGS,
     "tensors() -> [(name, shape)]: the checkpoint tensors the layer was built from."},
    {"token_type_mask", (PyCFunction)layer_token_type_mask, METH_VARARGS,
     "token_type_mask(token_type_ids, padding, mask, past=0): ra_hf_token_type_mask_cached "
     "into mask."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef layer_getset[] = {
    {"config", (getter)layer_config, NULL, "ra_layer_config's fields as the layer uses them.",
     NULL},
    {"model_type", (getter)layer_model_type, NULL, "config.json's model_type (\"\": none).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ra_ext_layer_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ropeattn._ropeattn.HFLayer",
    .tp_basicsize = sizeof(ra_ext_layer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "HFLayer(weights, config=None, *, layer=-1, ...): ra_hf_layer_create on a "
              "checkpoint and config.json, with ra_hf_options' fields as keywords "
              "(ropeattn_hf.h).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)layer_init,
    .tp_dealloc = (destructor)layer_dealloc,
    .tp_methods = layer_methods,
    .tp_getset = layer_getset,
};

/* ---- KVCache ------------------------------------------------------------ */

typedef struct ra_ext_cache {
    PyObject_HEAD
    ra_kv_cache *cache;
    PyThread_type_lock lock;
    long long slots; /* token slots per sequence */
} ra_ext_cache;

/* KVCache(batch, capacity, n_kv_heads, head_dim, dtype, window=0,
 * latent=0, scale=0): ra_kv_cache_create; with window W > 0
 * ra_kv_cache_create_window of max_new = capacity (W - 1 + capacity
 * slots); with latent r > 0 (a latent-attention layer's kv_lora_rank)
 * ra_kv_cache_create_latent, head_dim the rotated part's (n_kv_heads 1);
 * scale > 0: an fp8 cache's one scale for k and v (ra_kv_cache_set_scales). */
static int cache_init(ra_ext_cache *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"batch",  "capacity", "n_kv_heads", "head_dim",
                         "dtype",  "window",   "latent",     "scale", NULL};
    long long batch, capacity, n_kv_heads, head_dim, window = 0, latent = 0;
    int dtype;
    double scale = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LLLLi|LLd:KVCache", kw, &batch, &capacity,
                                     &n_kv_heads, &head_dim, &dtype, &window, &latent, &scale))
        return -1;
    if (latent && (window || n_kv_heads != 1)) {
        PyErr_SetString(ra_ext_value_error, "KVCache: a latent cache has one row of "
                        "head_dim + latent values a token (n_kv_heads 1) and no window");
        return -1;
    }
    if (self->cache) {
        PyErr_SetString(ra_ext_error, "KVCache: already initialized");
        return -1;
    }
    if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
        PyErr_NoMemory();
        return -1;
    }
    ra_status st, scale_st = RA_OK;
    ra_kv_cache *cache = NULL;
    const float scale_f = (float)scale;
    Py_BEGIN_ALLOW_THREADS
    st = latent ? ra_kv_cache_create_latent(&cache, batch, capacity, latent, head_dim,
                                            (ra_dtype)dtype)
         : window > 0 ? ra_kv_cache_create_window(&cache, batch, window, capacity, n_kv_heads,
                                                  head_dim, (ra_dtype)dtype)
                      : ra_kv_cache_create(&cache, batch, capacity, n_kv_heads, head_dim,
                                           (ra_dtype)dtype);
    if (st == RA_OK && scale > 0) scale_st = ra_kv_cache_set_scales(cache, &scale_f, &scale_f, 1);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) {
        ra_ext_raise(st, latent       ? "ra_kv_cache_create_latent"
                         : window > 0 ? "ra_kv_cache_create_window"
                                      : "ra_kv_cache_create");
        return -1;
    }
    if (scale_st != RA_OK) {
        ra_kv_cache_destroy(cache);
        ra_ext_raise(scale_st, "ra_kv_cache_set_scales");
        return -1;
    }
    self->slots = window > 0 ? window - 1 + capacity : capacity;
    if (self->cache) { /* another thread's __init__ got there first */
        ra_kv_cache_destroy(cache);
        PyErr_SetString(ra_ext_error, "KVCache: already initialized");
        return -1;
    }
    self->cache = cache;
    return 0;
}

static void cache_dealloc(ra_ext_cache *self)
{
    ra_kv_cache_destroy(self->cache); /* no call holds it: each keeps a reference */
    if (self->lock) PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int cache_ready(ra_ext_cache *self)
{
    if (self->cache) return 1;
    PyErr_SetString(ra_ext_error, "KVCache: not initialized");
    return 0;
}

/* length(b): tokens appended to sequence b. */
static PyObject *cache_length(ra_ext_cache *self, PyObject *arg)
{
    long long b = PyLong_AsLongLong(arg);
    if ((b == -1 && PyErr_Occurred()) || !cache_ready(self)) return NULL;
    int64_t n;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK); /* waits for a call writing it */
    n = ra_kv_cache_length(self->cache, (int64_t)b);
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    if (n < 0)
        return PyErr_Format(ra_ext_value_error, "length: sequence %lld is not one of the "
                            "cache's", b);
    return PyLong_FromLongLong((long long)n);
}

static PyObject *cache_reset(ra_ext_cache *self, PyObject *unused)
{
    (void)unused;
    if (!cache_ready(self)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    ra_kv_cache_reset(self->cache);
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* slots: the storage's token slots per sequence (capacity, or a window
 * cache's W - 1 + max_new). */
static PyObject *cache_slots(ra_ext_cache *self, void *closure)
{
    (void)closure;
    if (!cache_ready(self)) return NULL;
    return PyLong_FromLongLong(self->slots);
}

static PyMethodDef cache_methods[] = {
    {"length", (PyCFunction)cache_length, METH_O, "length(b): tokens appended to sequence b."},
    {"reset", (PyCFunction)cache_reset, METH_NOARGS, "Every length back to 0."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cache_getset[] = {
    {"slots", (getter)cache_slots, NULL, "Token slots per sequence.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ra_ext_cache_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ropeattn._ropeattn.KVCache",
    .tp_basicsize = sizeof(ra_ext_cache),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "KVCache(batch, capacity, n_kv_heads, head_dim, dtype, window=0, latent=0): "
              "ra_kv_cache_create, ra_kv_cache_create_window(window, max_new=capacity), or "
              "ra_kv_cache_create_latent(latent, rope_dim=head_dim).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)cache_init,
    .tp_dealloc = (destructor)cache_dealloc,
    .tp_methods = cache_methods,
    .tp_getset = cache_getset,
};

/* ---- the forwards ------------------------------------------------------- */

/* An array of type npy, C-contiguous, of nd dimensions (shape[i] where
 * shape is given and shape[i] >= 0), else ValueError. */
static int carray(PyObject *obj, int npy, int nd, const npy_intp *shape, int out,
                  const char *name)
{
    PyArrayObject *a = (PyArrayObject *)obj;
    int ok = PyArray_Check(obj) && PyArray_TYPE(a) == npy && PyArray_IS_C_CONTIGUOUS(a) &&
             PyArray_ISALIGNED(a) && PyArray_NDIM(a) == nd && (!out || PyArray_ISWRITEABLE(a));
    for (int i = 0; ok && shape && i < nd; i++)
        ok = shape[i] < 0 || PyArray_DIM(a, i) == shape[i];
    if (!ok)
        PyErr_Format(ra_ext_value_error, "%s: expected a C-contiguous, aligned%s array of "
                     "%d dimensions and the right dtype and shape", name,
                     out ? ", writable" : "", nd);
    return ok;
}

int ra_ext_forward_args(const ra_layer *l, PyObject *y, PyObject *x, long long start,
                        PyObject *ids, PyObject *mask, ra_positions *positions,
                        npy_intp *batch, npy_intp *seq)
{
    npy_intp shape[3] = {-1, -1, (npy_intp)ra_layer_get_config(l)->dim};
    if (!carray(x, NPY_FLOAT32, 3, shape, 0, "x")) return 0;
    shape[0] = *batch = PyArray_DIM((PyArrayObject *)x, 0);
    shape[1] = *seq = PyArray_DIM((PyArrayObject *)x, 1);
    const int axial = ra_layer_get_config(l)->rope->axial != RA_AXIAL_NONE; /* [B, S, 2] */
    const int three = ids != Py_None && PyArray_Check(ids) &&
                      PyArray_NDIM((PyArrayObject *)ids) == 3;
    npy_intp ids3[3] = {3, shape[0], shape[1]}, ids2[3] = {shape[0], shape[1], 2};
    if (!carray(y, NPY_FLOAT32, 3, shape, 1, "y") ||
        (ids != Py_None && !carray(ids, NPY_INT64, 2 + (three || axial),
                                   axial ? ids2 : three ? ids3 : shape, 0, "ids")) ||
        (mask != Py_None && !carray(mask, NPY_UINT8, 2, shape, 0, "mask")))
        return 0;
    if (y == x) {
        PyErr_SetString(ra_ext_value_error, "y: must not be x");
        return 0;
    }
    *positions = ra_positions_start((int64_t)start);
    if (ids != Py_None && axial)
        positions->axial_ids = (const int64_t *)PyArray_DATA((PyArrayObject *)ids);
    else if (ids != Py_None && three)
        positions->mrope_ids = (const int64_t *)PyArray_DATA((PyArrayObject *)ids);
    else if (ids != Py_None)
        positions->ids = (const int64_t *)PyArray_DATA((PyArrayObject *)ids);
    return 1;
}

/* layer_forward(layer, context, y, x, start, ids, mask, attn_mask=None,
 * cu_seqlens=None, non_causal=0): ra_layer_forward, positions start,
 * start + 1, ... or ids (a 2-D rope's: [B, S, 2]); mask: the padding mask
 * (1 = a token, 0 = padding) or None; attn_mask: None or the pair (a 4-D
 * array [B, H, S, S], its ra_dtype): ra_ext_mask_tensor; cu_seqlens: None
 * or int64 [n + 1], the options' packed documents; non_causal: the
 * options' (the attn_mask as the whole mask). */
PyObject *ra_ext_layer_forward(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kw[] = {"layer", "context", "y", "x", "start", "ids", "mask", "attn_mask",
                         "cu_seqlens", "non_causal", NULL};
    ra_ext_layer *layer;
    PyObject *context, *y, *x, *ids, *mask, *attn_mask = Py_None, *cu = Py_None;
    long long start;
    int non_causal = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOOLOO|OOp:layer_forward", kw,
                                     &ra_ext_layer_type, &layer, &context, &y, &x, &start, &ids,
                                     &mask, &attn_mask, &cu, &non_causal))
        return NULL;
    const ra_layer *l = ra_ext_layer_of((PyObject *)layer);
    ra_ext_context *c;
    ra_positions positions;
    npy_intp batch, seq;
    if (!l || !ra_ext_get_context(context, &c) ||
        !ra_ext_forward_args(l, y, x, start, ids, mask, &positions, &batch, &seq))
        return NULL;
    ra_attention_options o = ra_attention_options_init();
    if (mask != Py_None) o.padding_mask = (const uint8_t *)PyArray_DATA((PyArrayObject *)mask);
    if (cu != Py_None) { /* packed images: [n + 1] int64, C-contiguous */
        npy_intp cu_shape[1] = {-1};
        if (!carray(cu, NPY_INT64, 1, cu_shape, 0, "cu_seqlens")) return NULL;
        o.cu_seqlens = (const int64_t *)PyArray_DATA((PyArrayObject *)cu);
        o.n_documents = (int64_t)PyArray_DIM((PyArrayObject *)cu, 0) - 1;
    }
    ra_tensor mask_view;
    if (attn_mask != Py_None) {
        PyObject *array;
        int dtype;
        if (!PyArg_ParseTuple(attn_mask, "Oi:attn_mask", &array, &dtype) ||
            !ra_ext_mask_tensor(array, dtype, &mask_view))
            return NULL;
        o.attn_mask = &mask_view;
    }
    o.non_causal = non_causal;
    float *yp = (float *)PyArray_DATA((PyArrayObject *)y);
    const float *xp = (const float *)PyArray_DATA((PyArrayObject *)x);
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    ra_context *ctx = ra_ext_context_acquire(c);
    st = ra_layer_forward(ctx, l, yp, xp, (int64_t)batch, (int64_t)seq, &positions, &o);
    ra_ext_context_release(c, ctx);
    Py_END_ALLOW_THREADS
    if (st != RA_OK) return ra_ext_raise(st, "ra_layer_forward");
    Py_RETURN_NONE;
}

/* layer_forward_cached(layer, context, cache, y, x, start, ids,
 * whole_mask=None): ra_layer_forward_cached; start -1 with ids None:
 * continuing from the cache's lengths (NULL positions); whole_mask: None or
 * a bool array [B, 1, S, L + S], the call's whole mask
 * (ra_layer_forward_cached_mask with non_causal). */
PyObject *ra_ext_layer_forward_cached(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kw[] = {"layer", "context", "cache", "y", "x", "start", "ids", "whole_mask",
                         NULL};
    ra_ext_layer *layer;
    ra_ext_cache *cache;
    PyObject *context, *y, *x, *ids, *whole = Py_None;
    long long start;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OO!OOLO|O:layer_forward_cached", kw,
                                     &ra_ext_layer_type, &layer, &context, &ra_ext_cache_type,
                                     &cache, &y, &x, &start, &ids, &whole))
        return NULL;
    ra_attention_options o = ra_attention_options_init();
    ra_tensor mask_view;
    if (whole != Py_None) {
        if (!ra_ext_mask_tensor(whole, RA_BOOL, &mask_view)) return NULL;
        o.attn_mask = &mask_view;
        o.non_causal = 1;
    }
    const ra_layer *l = ra_ext_layer_of((PyObject *)layer);
    ra_ext_context *c;
    ra_positions positions;
    npy_intp batch, seq;
    const int continuing = start < 0 && ids == Py_None;
    if (!l || !cache_ready(cache) || !ra_ext_get_context(context, &c) ||
        !ra_ext_forward_args(l, y, x, continuing ? 0 : start, ids, Py_None, &positions, &batch, &seq))
        return NULL;
    float *yp = (float *)PyArray_DATA((PyArrayObject *)y);
    const float *xp = (const float *)PyArray_DATA((PyArrayObject *)x);
    ra_status st;
    Py_BEGIN_ALLOW_THREADS
    /* the cache first, then the context: no call takes them the other way */
    PyThread_acquire_lock(cache->lock, WAIT_LOCK);
    ra_context *ctx = ra_ext_context_acquire(c);
    const ra_positions *given = continuing ? NULL : &positions;
    st = o.attn_mask ? ra_layer_forward_cached_mask(ctx, l, cache->cache, yp, xp, (int64_t)batch,
                                                    (int64_t)seq, given, &o)
                     : ra_layer_forward_cached(ctx, l, cache->cache, yp, xp, (int64_t)batch,
                                               (int64_t)seq, given);
    ra_ext_context_release(c, ctx);
    PyThread_release_lock(cache->lock);
    Py_END_ALLOW_THREADS
    if (st != RA_OK)
        return ra_ext_raise(st, o.attn_mask ? "ra_layer_forward_cached_mask"
                                            : "ra_layer_forward_cached");
    Py_RETURN_NONE;
}
