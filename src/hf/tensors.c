/* tensors.c — any tensor of a checkpoint, for an engine that reads the
 * rest of the model itself: enumeration, description (dtype, shape, the
 * stored bytes) and a read into float32. */
#include <string.h>

#include "hf/hf.h"

/* The tensor at index i over the files in order, and its file's index. */
static const ra_st_tensor *tensor_at(const ra_hf_checkpoint *ckpt, int64_t i, int64_t *file)
{
    for (int64_t f = 0; f < ckpt->n && i >= 0; f++) {
        int64_t n = ra_safetensors_count(ckpt->files[f]);
        if (i < n) {
            *file = f;
            return ra_safetensors_at(ckpt->files[f], i);
        }
        i -= n;
    }
    return NULL;
}

RA_HF_API int64_t ra_hf_checkpoint_tensor_count(const ra_hf_checkpoint *ckpt)
{
    int64_t n = 0;
    for (int64_t f = 0; ckpt && f < ckpt->n; f++) n += ra_safetensors_count(ckpt->files[f]);
    return n;
}

RA_HF_API const char *ra_hf_checkpoint_tensor_name(const ra_hf_checkpoint *ckpt, int64_t i)
{
    int64_t file;
    const ra_st_tensor *t = ckpt ? tensor_at(ckpt, i, &file) : NULL;
    return t ? t->name : NULL;
}

/* The tensor called name (ckpt and name checked), naming what is missing. */
static ra_status lookup(const ra_hf_checkpoint *ckpt, const char *name, const ra_st_tensor **t,
                        int64_t *file)
{
    if (!ckpt || !name) return hf_fail(RA_ERR_NULL, "%s is NULL", ckpt ? "name" : "ckpt");
    *t = hf_find_tensor(ckpt, name, file);
    if (!*t)
        return hf_fail(RA_ERR_NOT_FOUND, "%s holds no tensor '%s'%s", ckpt->path, name,
                       ckpt->n > 1 ? " (in any of its shards)" : "");
    return RA_OK;
}

RA_HF_API ra_status ra_hf_checkpoint_tensor(const ra_hf_checkpoint *ckpt, const char *name,
                                            ra_hf_tensor *out)
{
    hf_reset();
    if (!out) return hf_fail(RA_ERR_NULL, "out is NULL");
    if (out->struct_size < RA_HF_TENSOR_SIZE_V1)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_tensor: struct_size %zu is less than %d: start "
                       "from ra_hf_tensor_init()", out->struct_size, RA_HF_TENSOR_SIZE_V1);
    const ra_st_tensor *t;
    int64_t file = 0;
    RA_HF_TRY(lookup(ckpt, name, &t, &file));
    ra_hf_tensor d = ra_hf_tensor_init();
    d.name = t->name;
    d.dtype = ra_st_dtype_name(t->dtype);
    d.ndim = t->ndim;
    memcpy(d.shape, t->shape, (size_t)t->ndim * sizeof d.shape[0]);
    d.count = t->count;
    d.data = t->data;
    d.nbytes = t->nbytes;
    d.file = ckpt->paths[file];
    /* as many bytes as the caller's struct holds (an older, shorter one:
     * its fields) */
    size_t n = out->struct_size < sizeof d ? out->struct_size : sizeof d;
    d.struct_size = out->struct_size;
    memcpy(out, &d, n);
    return RA_OK;
}

RA_HF_API ra_status ra_hf_checkpoint_read_f32(const ra_hf_checkpoint *ckpt, const char *name,
                                              float *dst, int64_t count)
{
    hf_reset();
    const ra_st_tensor *t;
    int64_t file = 0;
    RA_HF_TRY(lookup(ckpt, name, &t, &file));
    if (!dst && count > 0) return hf_fail(RA_ERR_NULL, "dst is NULL");
    if (count != t->count)
        return hf_fail(RA_ERR_SIZE, "tensor '%s' in %s holds %lld values; dst has room for "
                       "%lld (count)", name, ckpt->paths[file], (long long)t->count,
                       (long long)count);
    return hf_load_f32(t, ckpt->paths[file], dst);
}
