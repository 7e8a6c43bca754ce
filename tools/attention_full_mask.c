/*
 * attention_full_mask.c — --attention-mask of bool or float values
 * (attention_full_mask.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_full_mask.h"
#include "cli.h"

int full_mask_read(const char *path, int64_t batch, int64_t seq, full_mask *out)
{
    char msg[CLI_MSG_LEN];
    memset(out, 0, sizeof *out);
    if (ra_npy_read_float(path, &out->npy, msg, sizeof msg) != RA_OK)
        return cli_fail(EXIT_FAIL, "%s", msg);
    const ra_npy *m = &out->npy;
    if (m->dtype == RA_NPY_I32 || m->dtype == RA_NPY_I64) { /* a padding mask */
        full_mask_free(out);
        return -1;
    }
    ra_dtype dtype = m->dtype == RA_NPY_BOOL ? RA_BOOL
                     : m->dtype == RA_NPY_F16 ? RA_F16
                                              : RA_F32;
    int failed = 0;
    if (m->ndim < 1 || m->ndim > 4)
        failed = cli_fail(EXIT_FAIL, "%s: a full attention mask has 1 to 4 dimensions, "
                          "[batch, heads, seq, seq] or its last ones, not %d", path, m->ndim);
    /* [seq, seq] when batch = seq is also the shape of a padding mask [batch,
     * seq] given as bool or float (Hugging Face takes those too): read as a full
     * mask it would hide other keys, exit 0 */
    else if (m->ndim == 2 && batch == seq && batch > 1 && m->shape[0] == batch &&
             m->shape[1] == seq)
        failed = cli_fail(EXIT_FAIL, "%s: a 2-D bool or float mask [%lld, %lld] with batch = "
                          "seq: a full mask [seq, seq] or a padding mask [batch, seq]; give "
                          "a full mask as [1, 1, seq, seq], a padding mask as int32 or int64",
                          path, (long long)batch, (long long)seq);
    /* [seq] or [1, seq] when batch = 1 is a padding mask's shape too (an int
     * one of 1-D [seq] is read as one): read as a full mask over the keys it
     * would compute the padding tokens' rows, which a padding mask zeroes */
    else if (batch == 1 && seq > 1 && m->shape[m->ndim - 1] == seq &&
             (m->ndim == 1 || (m->ndim == 2 && m->shape[0] == 1)))
        failed = cli_fail(EXIT_FAIL, "%s: a %d-D bool or float mask of %lld keys with batch 1: "
                          "a full mask [1, 1, 1, seq] or a padding mask [batch, seq] (whose "
                          "padding rows are 0); give a full mask as [1, 1, 1, seq], a padding "
                          "mask as int32 or int64", path, m->ndim, (long long)seq);
    if (failed) {
        full_mask_free(out);
        return failed;
    }
    /* [B, H, Sq, Sk], the missing leading extents 1; contiguous strides */
    int64_t shape[4] = {1, 1, 1, 1}, want[4] = {batch, -1, seq, seq};
    const char *names[4] = {"batch", "heads", "seq (queries)", "seq (keys)"};
    for (int i = 0; i < m->ndim; i++) shape[4 - m->ndim + i] = m->shape[i];
    for (int i = 0; i < 4 && !failed; i++)
        if (want[i] >= 0 && shape[i] != want[i] && shape[i] != 1)
            failed = cli_fail(EXIT_FAIL, "%s: extent %lld for %s: must be %lld or 1 (a full "
                              "mask broadcasts to [batch, heads, seq, seq] = [%lld, H, %lld, "
                              "%lld])", path, (long long)shape[i], names[i], (long long)want[i],
                              (long long)batch, (long long)seq, (long long)seq);
    if (failed) {
        full_mask_free(out);
        return failed;
    }
    out->view.data = m->data;
    out->view.dtype = dtype;
    int64_t stride = 1;
    for (int i = 3; i >= 0; i--) {
        out->view.shape[i] = shape[i];
        out->view.stride[i] = stride;
        stride *= shape[i];
    }
    return 0;
}

int full_mask_join(full_mask *m, const uint8_t *keep, int64_t batch, int64_t seq)
{
    const ra_tensor *v = &m->view;
    const int64_t heads = v->shape[1];
    const size_t size = ra_dtype_size(v->dtype);
    /* a masked element's bytes: false, or -inf in float32 or float16 */
    const uint8_t off_bool = 0;
    const uint16_t off_f16 = 0xfc00;
    const float off_f32 = -INFINITY;
    const void *off = v->dtype == RA_BOOL ? (const void *)&off_bool
                      : v->dtype == RA_F16 ? (const void *)&off_f16
                                           : (const void *)&off_f32;
    char *out = malloc((size_t)(batch * heads * seq * seq) * size);
    if (!out) return cli_fail(EXIT_FAIL, "out of memory for the joined attention mask");
    char *dst = out;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < seq; i++)
                for (int64_t j = 0; j < seq; j++, dst += size) {
                    /* m's element (b, h, i, j), broadcast where its extent is 1 */
                    const int64_t at = (v->shape[0] == 1 ? 0 : b) * v->stride[0] +
                                       h * v->stride[1] +
                                       (v->shape[2] == 1 ? 0 : i) * v->stride[2] +
                                       (v->shape[3] == 1 ? 0 : j) * v->stride[3];
                    const char *src = (const char *)v->data + (size_t)at * size;
                    memcpy(dst, keep[(b * seq + i) * seq + j] ? src : off, size);
                }
    free(m->joined);
    m->joined = out;
    m->view = ra_tensor_4d(out, v->dtype, batch, heads, seq, seq);
    return 0;
}

void full_mask_free(full_mask *m)
{
    free(m->joined);
    ra_npy_free(&m->npy);
    memset(m, 0, sizeof *m);
}
