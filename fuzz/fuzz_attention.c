/*
 * fuzz_attention.c — ra_attention on fuzzed arguments: batch, sequence
 * (across the flash path's 64-key tiles), heads and GQA ratio, head_dim,
 * f32/f16/bf16 keys and values, strided, broadcast or fused QKV views,
 * dropout, every path, on the calling thread or two.
 *
 * Without dropout each successful result must be the softmax attention of
 * the header, computed here in double, to within a bound from float32
 * rounding of the dot products and sums; the reference path must give the
 * same bits again, the flash path the same bits on one thread or two, and
 * with dropout the flash path must stay within that bound of the reference.
 * A failure must be a documented status and leave out as it was; the inputs
 * are never written; a call built only of valid arguments must succeed.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "fuzz_views.h"
#include "ropeattn.h"

static ra_context *two_threads;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    FUZZ_CHECK(ra_context_create(&two_threads, 2) == RA_OK, "context");
    return 0;
}

/* The model below is this file's own arithmetic: no coverage for it, so
 * that libFuzzer's counters do not slow it down. */
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))

NO_COVERAGE static float elem(const ra_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d)
{
    return load_elem(t->data, t->dtype,
                     b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + d);
}

/* out[b, i, h] of the header in double, and how far float32 may stray:
 * max|v| (4 D 2^-24 L + (S + 10) 2^-24 + 1e-6), L the largest
 * sum_d |q_d k_d| / sqrt(D) of the row. */
NO_COVERAGE static void expected_row(const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                                     int64_t b, int64_t i, int64_t h, double *out, double *bound)
{
    const int64_t D = q->shape[3], kv = h / (q->shape[2] / k->shape[2]);
    const double scale = 1.0 / sqrt((double)D);
    double qrow[128], logits[128], max = -INFINITY, sum = 0, big = 0, vmax = 0;
    for (int64_t d = 0; d < D; d++) qrow[d] = elem(q, b, i, h, d);
    for (int64_t j = 0; j <= i; j++) {
        double dot = 0, mag = 0;
        for (int64_t d = 0; d < D; d++) {
            double p = qrow[d] * elem(k, b, j, kv, d);
            dot += p;
            mag += fabs(p);
        }
        logits[j] = dot * scale;
        big = fmax(big, mag * scale);
        max = fmax(max, logits[j]);
    }
    for (int64_t j = 0; j <= i; j++) sum += (logits[j] = exp(logits[j] - max));
    for (int64_t d = 0; d < D; d++) out[d] = 0;
    for (int64_t j = 0; j <= i; j++)
        for (int64_t d = 0; d < D; d++) {
            double x = elem(v, b, j, kv, d);
            out[d] += logits[j] / sum * x;
            vmax = fmax(vmax, fabs(x));
        }
    *bound = vmax * (4.0 * (double)D * 0x1p-24 * big + (double)(i + 11) * 0x1p-24 + 1e-6);
}

/* Without dropout (p < 0): flash and reference each within the bound of
 * the model.  With dropout p: flash within twice the bound, scaled by
 * 1 / (1 - p) as the kept probabilities are, of the reference. */
NO_COVERAGE static void check_rows(const ra_tensor *flash, const ra_tensor *ref,
                                   const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                                   float p)
{
    double want[128], bound;
    for (int64_t b = 0; b < q->shape[0]; b++)
        for (int64_t i = 0; i < q->shape[1]; i++)
            for (int64_t h = 0; h < q->shape[2]; h++) {
                expected_row(q, k, v, b, i, h, want, &bound);
                for (int64_t d = 0; d < q->shape[3]; d++) {
                    double x = elem(flash, b, i, h, d), y = elem(ref, b, i, h, d);
                    if (p > 0) {
                        FUZZ_CHECK(fabs(x - y) <= 2 * bound / (1 - p),
                                   "with dropout %g, flash %.9g and reference %.9g at [%lld, "
                                   "%lld, %lld, %lld]", p, x, y, (long long)b, (long long)i,
                                   (long long)h, (long long)d);
                        continue;
                    }
                    FUZZ_CHECK(fabs(x - want[d]) <= bound && fabs(y - want[d]) <= bound,
                               "out[%lld, %lld, %lld, %lld]: flash %.9g, reference %.9g, "
                               "expected %.9g (bound %.3g)", (long long)b, (long long)i,
                               (long long)h, (long long)d, x, y, want[d], bound);
                }
            }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t dims[] = {8, 2, 4, 6, 16, 32, 34, 64, 66, 3};
    fuzz_input in = {data, size};
    int valid = 1;
    ra_tensor q, k, v, out;
    /* Sequences past the flash path's 64-key tile are costly to check:
     * one batch row of small heads. */
    int long_seq = take_range(&in, 0, 15) == 15;
    int64_t batch = long_seq ? 1 : take_size(&in, 2, &valid);
    int64_t seq = long_seq ? 60 + take_range(&in, 0, 12) : take_size(&in, 12, &valid);
    int64_t hkv = take_size(&in, 2, &valid), rep = take_size(&in, 4, &valid);
    int64_t d = long_seq ? 2 << take_range(&in, 0, 3) : TAKE_ONE_OF(&in, dims);
    int64_t heads = hkv * rep + (take_range(&in, 0, 31) == 31 ? 1 : 0);
    if (hkv > 0 && heads % hkv) valid = 0;
    q.dtype = out.dtype = RA_F32;
    k.dtype = (ra_dtype)(take_range(&in, 0, 15) % (RA_DTYPE_COUNT + 1));
    v.dtype = take_range(&in, 0, 3) == 3 ? (ra_dtype)take_range(&in, 0, RA_DTYPE_COUNT) : k.dtype;
    if ((unsigned)k.dtype >= RA_DTYPE_COUNT || (unsigned)v.dtype >= RA_DTYPE_COUNT) valid = 0;
    if (take_range(&in, 0, 31) == 31) q.dtype = RA_BF16, valid = 0;
    if (take_range(&in, 0, 31) == 31) out.dtype = RA_F16, valid = 0;
    int64_t qshape[4] = {batch, seq, heads, d}, kshape[4] = {batch, seq, hkv, d};
    memcpy(q.shape, qshape, sizeof qshape);
    memcpy(out.shape, qshape, sizeof qshape);
    memcpy(k.shape, kshape, sizeof kshape);
    memcpy(v.shape, kshape, sizeof kshape);
    if (take_range(&in, 0, 31) == 31) {
        v.shape[1] += 1; /* a shape that does not fit */
        valid = 0;
    }
    if (batch <= 0 || seq <= 0 || hkv <= 0 || heads <= 0) { /* refused before any use */
        q.shape[0] = k.shape[0] = v.shape[0] = out.shape[0] = batch;
    }
    int fused = q.dtype == RA_F32 && k.dtype == RA_F32 && v.dtype == RA_F32 &&
                take_range(&in, 0, 3) == 3;
    void *bufs[4] = {NULL, NULL, NULL, NULL}; /* q, k, v (or one fused), out */
    size_t bytes[4] = {0, 0, 0, 0};
    if (fused && valid) { /* one [B, S, H + 2 Hkv, D] buffer, rows padded */
        int64_t pad = take_range(&in, 0, 3), row = (heads + 2 * hkv) * d + pad;
        bufs[0] = take_buffer(&in, RA_F32, batch * seq * row, &bytes[0]);
        ra_tensor *views[3] = {&q, &k, &v};
        int64_t first[3] = {0, heads * d, (heads + hkv) * d};
        for (int i = 0; i < 3; i++) {
            int64_t st[4] = {seq * row, row, d, 1};
            memcpy(views[i]->stride, st, sizeof st);
            views[i]->data = (float *)bufs[0] + first[i];
        }
    } else {
        ra_tensor *views[3] = {&q, &k, &v};
        for (int i = 0; i < 3; i++) {
            take_strides(&in, views[i], 1, &valid);
            int64_t span = view_span(views[i]);
            bufs[i] = take_buffer(&in, views[i]->dtype, span ? span : 1, &bytes[i]);
            views[i]->data = bufs[i];
        }
    }
    take_strides(&in, &out, 0, &valid);
    int64_t out_span = view_span(&out);
    bufs[3] = take_buffer(&in, RA_F32, out_span ? out_span : 1, &bytes[3]);
    out.data = bufs[3];
    if (take_range(&in, 0, 31) == 31) {
        out.data = q.data; /* out on top of q: refused */
        valid = 0;
    }
    if (view_span(&q) == 0 || view_span(&k) == 0 || view_span(&v) == 0 || out_span == 0) valid = 0;

    ra_attention_options opt = ra_attention_options_init();
    opt.seed = take_bits(&in, 8);
    int p_kind = take_range(&in, 0, 15);
    if (p_kind >= 12) {
        static const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
        opt.dropout = ps[p_kind - 12];
    } else if (p_kind == 11) {
        static const float bad[] = {1.0f, -0.25f, NAN, 2.0f};
        opt.dropout = TAKE_ONE_OF(&in, bad);
        valid = 0;
    }
    ra_attention_path path = (ra_attention_path)(take_range(&in, 0, 15) % (RA_PATH_COUNT + 1));
    if ((unsigned)path >= RA_PATH_COUNT) valid = 0;
    opt.path = path;
    ra_attention_options ref_opt = opt, flash_opt = opt;
    ref_opt.path = RA_PATH_REFERENCE;
    flash_opt.path = RA_PATH_FLASH;
    ra_context *ctx = take_range(&in, 0, 1) ? two_threads : NULL;

    /* Copies of out for the other runs and of everything for "unchanged". */
    void *orig[4], *ref_out = malloc(bytes[3]), *other_out = malloc(bytes[3]);
    for (int i = 0; i < 4; i++) {
        orig[i] = bufs[i] ? malloc(bytes[i]) : NULL;
        if (bufs[i]) memcpy(orig[i], bufs[i], bytes[i]);
    }
    memcpy(ref_out, bufs[3], bytes[3]);
    memcpy(other_out, bufs[3], bytes[3]);
    ra_tensor out_ref = out, out_other = out;
    if (out.data == bufs[3]) out_ref.data = ref_out, out_other.data = other_out;

    ra_status st = ra_attention(ctx, &out, &q, &k, &v, &opt);
    for (int i = 0; i < 3; i++)
        FUZZ_CHECK(!bufs[i] || memcmp(bufs[i], orig[i], bytes[i]) == 0 || out.data == q.data,
                   "ra_attention wrote to its input %d", i);
    if (valid) FUZZ_CHECK(st == RA_OK, "valid arguments refused: %d", (int)st);
    if (st != RA_OK) {
        FUZZ_CHECK(st == RA_ERR_NULL || st == RA_ERR_SIZE || st == RA_ERR_ARGUMENT ||
                       st == RA_ERR_SHAPE || st == RA_ERR_DTYPE || st == RA_ERR_GQA ||
                       st == RA_ERR_OVERFLOW, "undocumented status %d", (int)st);
        for (int i = 0; i < 4; i++)
            FUZZ_CHECK(!bufs[i] || memcmp(bufs[i], orig[i], bytes[i]) == 0,
                       "a refused call (status %d) wrote", (int)st);
    } else {
        ra_status r = ra_attention(NULL, &out_ref, &q, &k, &v, &ref_opt);
        FUZZ_CHECK(r == RA_OK, "the reference path refused what %d took: %d", (int)path, (int)r);
        ra_context *other = ctx ? NULL : two_threads;
        ra_status f = ra_attention(other, &out_other, &q, &k, &v, &flash_opt);
        FUZZ_CHECK(f == RA_OK, "flash refused what %d took: %d", (int)path, (int)f);
        if (path == RA_PATH_REFERENCE)
            FUZZ_CHECK(memcmp(bufs[3], ref_out, bytes[3]) == 0, "the reference is not repeatable");
        else
            FUZZ_CHECK(memcmp(bufs[3], other_out, bytes[3]) == 0,
                       "flash gives other bits on %s", ctx ? "one thread" : "two threads");
        check_rows(&out_other, &out_ref, &q, &k, &v, p_kind >= 12 ? opt.dropout : -1.0f);
    }
    for (int i = 0; i < 4; i++) free(bufs[i]), free(orig[i]);
    free(ref_out);
    free(other_out);
    return 0;
}
