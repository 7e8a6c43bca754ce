/*
 * fuzz_safetensors.c — ra_safetensors_open on any bytes.  A file it refuses
 * must come with a status that says so and a message naming the file; a
 * file it accepts must keep every promise of io.h: each tensor's bytes are
 * bytes of the data area (all read: ASan and the mapping's bounds watch),
 * exactly count * dtype size of them, sharing none with another tensor and
 * together covering the whole data area, and
 * its name is unique and found again by ra_safetensors_find.  The same file
 * then goes through the checkpoint library (ropeattn_hf.h) as the tool's
 * attention command reads it: a layer it refuses comes with a sentence, a
 * layer it builds names tensors of the file and runs.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_file.h"
#include "io/io.h"
#include "ropeattn_hf.h"

static int is_float(ra_st_dtype d)
{
    return d == RA_ST_F32 || d == RA_ST_F16 || d == RA_ST_BF16 || d == RA_ST_F64;
}

/* ra_st_tensor_to_f32's status: RA_ERR_DTYPE for a dtype it does not
 * convert, RA_ERR_FORMAT for an F64 holding a finite value beyond
 * float32's range (FLT_MAX plus half an ulp or more rounds to Inf). */
static ra_status expected_to_f32(const ra_st_tensor *t)
{
    if (!is_float(t->dtype)) return RA_ERR_DTYPE;
    for (int64_t i = 0; t->dtype == RA_ST_F64 && i < t->count; i++) {
        double d;
        memcpy(&d, (const char *)t->data + 8 * i, sizeof d);
        if (isfinite(d) && fabs(d) >= 0x1.ffffffp127) return RA_ERR_FORMAT;
    }
    return RA_OK;
}

/* area: the file's data area (after the header), as the fuzzer wrote it. */
static void check_tensor(const ra_safetensors *st, const ra_st_tensor *t, const uint8_t *area,
                         uint64_t data_area)
{
    FUZZ_CHECK(t != NULL && t->name != NULL, "a tensor or its name is NULL");
    FUZZ_CHECK((unsigned)t->dtype < RA_ST_DTYPE_COUNT, "dtype %d", (int)t->dtype);
    FUZZ_CHECK(t->ndim >= 0 && t->ndim <= RA_IO_MAX_DIMS, "ndim %d", t->ndim);
    int64_t count = 1;
    for (int i = 0; i < t->ndim; i++) {
        FUZZ_CHECK(t->shape[i] >= 0, "negative dimension");
        count *= t->shape[i]; /* cannot overflow: nbytes below bounds it */
        if (count == 0) break;
    }
    FUZZ_CHECK(count == t->count, "count %lld, shape says %lld", (long long)t->count,
               (long long)count);
    FUZZ_CHECK(t->nbytes <= data_area, "%zu bytes in a data area of %llu", t->nbytes,
               (unsigned long long)data_area);
    FUZZ_CHECK(t->nbytes == (uint64_t)t->count * ra_st_dtype_size(t->dtype), "nbytes %zu",
               t->nbytes);
    FUZZ_CHECK(ra_safetensors_find(st, t->name) == t, "find(\"%s\") misses", t->name);
    /* Reading every byte also lets ASan and the mapping's bounds watch. */
    FUZZ_CHECK(t->nbytes == 0 || memmem(area, data_area, t->data, t->nbytes) != NULL,
               "the bytes of \"%s\" are not in the data area", t->name);
    float *f = malloc(t->count > 0 ? (size_t)t->count * sizeof(float) : 1);
    FUZZ_CHECK(f != NULL, "out of memory");
    ra_status s = ra_st_tensor_to_f32(t, f);
    FUZZ_CHECK(s == expected_to_f32(t), "to_f32 gave %d for %s", (int)s,
               ra_st_dtype_name(t->dtype));
    free(f);
}

/* Non-empty tensors, sorted by start, must not share a byte. */
static int by_start(const void *a, const void *b)
{
    const ra_st_tensor *x = *(const ra_st_tensor *const *)a, *y = *(const ra_st_tensor *const *)b;
    uintptr_t px = (uintptr_t)x->data, py = (uintptr_t)y->data;
    return px < py ? -1 : px > py;
}

static void check_disjoint(const ra_safetensors *st, int64_t n, uint64_t data_area)
{
    const ra_st_tensor **order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    FUZZ_CHECK(order != NULL, "out of memory");
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (ra_safetensors_at(st, i)->nbytes > 0) order[m++] = ra_safetensors_at(st, i);
    qsort(order, (size_t)m, sizeof *order, by_start);
    uint64_t total = 0;
    for (int64_t i = 0; i < m; i++) {
        total += order[i]->nbytes;
        if (i > 0)
            FUZZ_CHECK((const unsigned char *)order[i - 1]->data + order[i - 1]->nbytes <=
                           (const unsigned char *)order[i]->data,
                       "\"%s\" and \"%s\" overlap", order[i - 1]->name, order[i]->name);
        if (i > 0) /* all inside one data area: the span bounds the bytes */
            FUZZ_CHECK((const unsigned char *)order[i]->data + order[i]->nbytes -
                               (const unsigned char *)order[0]->data <= (ptrdiff_t)data_area,
                       "tensors span more than the data area");
    }
    /* Disjoint and as many bytes as the area: they tile it, as the format requires. */
    FUZZ_CHECK(total == data_area, "%llu tensor bytes in a data area of %llu",
               (unsigned long long)total, (unsigned long long)data_area);
    for (int64_t i = 1; i < n; i++)
        for (int64_t j = 0; j < i && j < 64; j++)
            FUZZ_CHECK(strcmp(ra_safetensors_at(st, i)->name, ra_safetensors_at(st, j)->name) != 0,
                       "name \"%s\" twice", ra_safetensors_at(st, i)->name);
    free(order);
}

/* A config of block-FP8 weights ([2, 3] blocks, into bfloat16), parsed once. */
static const ra_hf_config *fp8_config(void)
{
    static ra_hf_config *config;
    static const char text[] = "{\"torch_dtype\": \"bfloat16\", \"quantization_config\": "
                               "{\"quant_method\": \"fp8\", \"weight_block_size\": [2, 3]}}";
    if (!config) FUZZ_CHECK(ra_hf_config_parse(&config, text, strlen(text)) == RA_OK, "%s",
                            ra_hf_last_error());
    return config;
}

/* The file as a checkpoint: layer -1 (the only one) with 1 and 2 heads,
 * 3 tokens, no config, then a block-FP8 one (F8_E4M3 weights with their
 * weight_scale_inv dequantized). */
static void check_layer(const char *path, const ra_safetensors *st)
{
    ra_hf_checkpoint *ckpt = NULL;
    FUZZ_CHECK(ra_hf_checkpoint_open(&ckpt, path) == RA_OK, "%s", ra_hf_last_error());
    for (int64_t run = 0; run < 4; run++) {
        int64_t heads = 1 + run % 2;
        ra_hf_layer *layer = (ra_hf_layer *)&layer;
        ra_hf_options o = ra_hf_options_init();
        o.n_heads = heads;
        o.n_tokens = 3;
        ra_status status = ra_hf_layer_create(&layer, ckpt, run < 2 ? NULL : fp8_config(), &o);
        if (status != RA_OK) {
            FUZZ_CHECK(layer == NULL, "out not NULL after a failure");
            FUZZ_CHECK(ra_hf_last_error()[0] != '\0', "status %d without a sentence",
                       (int)status);
            continue;
        }
        for (int64_t i = 0; i < ra_hf_layer_tensor_count(layer); i++)
            FUZZ_CHECK(ra_safetensors_find(st, ra_hf_layer_tensor_name(layer, i)) != NULL,
                       "'%s' is not in the file", ra_hf_layer_tensor_name(layer, i));
        int64_t dim = ra_layer_get_config(ra_hf_layer_get(layer))->dim;
        if (dim <= 4096) { /* the layer runs on what it was built from */
            float *x = calloc((size_t)(3 * dim), sizeof(float));
            float *y = malloc((size_t)(3 * dim) * sizeof(float));
            FUZZ_CHECK(x && y, "out of memory");
            FUZZ_CHECK(ra_layer_forward(NULL, ra_hf_layer_get(layer), y, x, 1, 3, NULL, NULL) ==
                           RA_OK, "forward: %s", ra_last_error());
            free(x);
            free(y);
        }
        ra_hf_layer_destroy(layer);
    }
    ra_hf_checkpoint_close(ckpt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    if (path == NULL) return 0;
    ra_safetensors *st = (ra_safetensors *)&st; /* must be set to NULL on failure */
    char msg[512];
    ra_status status = ra_safetensors_open(&st, path, msg, sizeof msg);
    if (status != RA_OK) {
        FUZZ_CHECK(status == RA_ERR_FORMAT || status == RA_ERR_DTYPE || status == RA_ERR_SHAPE,
                   "status %d: %s", (int)status, msg);
        FUZZ_CHECK(st == NULL, "out not NULL after a failure");
        FUZZ_CHECK(strncmp(msg, path, strlen(path)) == 0 && msg[strlen(path)] == ':',
                   "message does not start with the path: %s", msg);
        return 0;
    }
    FUZZ_CHECK(msg[0] == '\0', "message after success: %s", msg);
    FUZZ_CHECK(size >= 8, "a %zu-byte file accepted", size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | data[i];
    FUZZ_CHECK(header_len <= size - 8, "header length %llu beyond the file",
               (unsigned long long)header_len);
    uint64_t data_area = size - 8 - header_len;
    int64_t n = ra_safetensors_count(st);
    FUZZ_CHECK(n >= 0 && ra_safetensors_at(st, n) == NULL && ra_safetensors_at(st, -1) == NULL,
               "count %lld", (long long)n);
    for (int64_t i = 0; i < n; i++)
        check_tensor(st, ra_safetensors_at(st, i), data + 8 + header_len, data_area);
    check_disjoint(st, n, data_area);
    FUZZ_CHECK(ra_safetensors_find(st, "__metadata__") == NULL, "__metadata__ is a tensor");
    check_layer(path, st);
    ra_safetensors_close(st);
    return 0;
}
