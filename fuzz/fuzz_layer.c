/*
 * fuzz_layer.c — the attention layer on fuzzed arguments: ra_layer_create
 * (dim, heads, kv heads, head_dim, biases, q/k norms, rope, q/k/v fused per
 * group, Llama 4's L2 norm and temperature), ra_layer_forward (batch,
 * sequence, positions, path, training dropout, the calling thread or two)
 * and ra_layer_forward_cached (a prefill then single-token steps, caches of
 * every dtype), with float32, bf16 or f16 weights.
 *
 * An inference forward must be the seed's Attention computed here in double
 * (projections, the reference rotation, causal GQA softmax, wo) to 1e-4 of
 * the scale of y, the bound: of max|y| where no sum cancels, else
 * of what float32 sums are exact relative to (expected_forward); the cached layer must give the same y as the
 * forward without a cache (to float32 rounding with an f32 cache, 16-bit
 * rounding otherwise).  16-bit weights are the float32 ones rounded to
 * that dtype, which the reference reads, so the bounds are the same.  A refusal must be a documented status that leaves
 * y and the cache as they were; a call built only of valid arguments must
 * succeed.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "fuzz_positions.h"
#include "fuzz_views.h"
#include "rope_internal.h"

#define NO_COVERAGE __attribute__((no_sanitize("coverage")))

static float round_to(ra_dtype dtype, float v)
{
    return dtype == RA_BF16 ? ra_bf16_to_f32(ra_f32_to_bf16(v)) : ra_f16_to_f32(ra_f32_to_f16(v));
}

static ra_context *two_threads;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    FUZZ_CHECK(ra_context_create(&two_threads, 2) == RA_OK, "context");
    return 0;
}

/* out[t, n] = bias[n] + sum_k a[t, k] w[n, k], in double, rounded to
 * float (bias NULL: none). */
NO_COVERAGE static void project(float *out, const float *a, const float *w, const float *bias,
                                int64_t tokens, int64_t n, int64_t k)
{
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t i = 0; i < n; i++) {
            double acc = bias ? bias[i] : 0.0;
            for (int64_t j = 0; j < k; j++) acc += (double)a[t * k + j] * w[i * k + j];
            out[t * n + i] = (float)acc;
        }
}

/* out[t, n] = |bias[n]| + sum_k |a[t, k] w[n, k]|: the size that float32
 * rounding of project's sum is relative to (its result may be far smaller,
 * when the terms cancel). */
NO_COVERAGE static void project_abs(double *out, const double *a, const float *w,
                                    const float *bias, int64_t tokens, int64_t n, int64_t k)
{
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t i = 0; i < n; i++) {
            double acc = bias ? fabs(bias[i]) : 0.0;
            for (int64_t j = 0; j < k; j++) acc += fabs(a[t * k + j] * w[i * k + j]);
            out[t * n + i] = acc;
        }
}

/* The seed's Attention.forward in inference: y [B, S, dim], with the rotated
 * keys and the values rounded to `storage` as a KV cache of that dtype
 * keeps them (RA_F32: as they are).  Returns the scale float32 errors in y
 * are relative to: the largest y computed with every term of the value and
 * output projections and of P.V taken by its magnitude. */
/* Each row of d: w * (row - mean) / sqrt(mean((row - mean)^2) + eps), in
 * double, rounded to float; mean 0 unless centered (a LayerNorm), w =
 * weight + (r % weight_rows) d (weight NULL: none). */
NO_COVERAGE static void norm_rows(float *x, const float *weight, int64_t rows, int64_t d,
                                  int64_t weight_rows, int centered, double eps)
{
    for (int64_t r = 0; weight && r < rows; r++) {
        float *row = x + r * d;
        const float *w = weight + (r % weight_rows) * d;
        double mean = 0, squares = 0;
        for (int64_t i = 0; centered && i < d; i++) mean += row[i];
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++) squares += (row[i] - mean) * (row[i] - mean);
        for (int64_t i = 0; i < d; i++)
            row[i] = (float)(w[i] * ((row[i] - mean) / sqrt(squares / (double)d + eps)));
    }
}

NO_COVERAGE static double expected_forward(const ra_layer *layer, const float *const w[10],
                                           const float *x, int64_t batch, int64_t seq,
                                           const ra_positions *pos, ra_dtype storage, double *y)
{
    const ra_layer_config *c = ra_layer_get_config(layer);
    const int64_t H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim, dim = c->dim;
    const int64_t tokens = batch * seq;
    float *q = malloc((size_t)(tokens * H * D) * 4), *k = malloc((size_t)(tokens * Hkv * D) * 4);
    float *v = malloc((size_t)(tokens * Hkv * D) * 4), *o = malloc((size_t)(tokens * H * D) * 4);
    double *xa = malloc((size_t)(tokens * dim) * sizeof *xa); /* magnitudes */
    double *va = malloc((size_t)(tokens * Hkv * D) * sizeof *va);
    double *oa = malloc((size_t)(tokens * H * D) * sizeof *oa), *ya = malloc(sizeof *ya * dim);
    project(q, x, w[0], w[4], tokens, H * D, dim);
    project(k, x, w[1], w[5], tokens, Hkv * D, dim);
    project(v, x, w[2], w[6], tokens, Hkv * D, dim);
    for (int64_t i = 0; i < tokens * dim; i++) xa[i] = fabs(x[i]);
    project_abs(va, xa, w[2], w[6], tokens, Hkv * D, dim);
    const int own = c->norm_head_weights != 0; /* each head its own weights */
    norm_rows(q, w[8], tokens * H, D, own ? H : 1, c->norm_layer, c->norm_eps);
    norm_rows(k, w[9], tokens * Hkv, D, own ? Hkv : 1, c->norm_layer, c->norm_eps);
    ra_rope_config rc = *c->rope;
    ra_rope *rope;
    FUZZ_CHECK(ra_rope_create(&rope, &rc) == RA_OK, "the layer's rope");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, batch, seq, H, D);
    ra_tensor tk = ra_tensor_4d(k, RA_F32, batch, seq, Hkv, D);
    FUZZ_CHECK(ra_rope_apply_reference(rope, &tq, &tq, pos, RA_FORWARD) == RA_OK &&
                   ra_rope_apply_reference(rope, &tk, &tk, pos, RA_FORWARD) == RA_OK, "rotation");
    ra_rope_destroy(rope);
    for (int64_t r = 0; c->qk_l2_norm && r < tokens * (H + Hkv); r++) { /* Llama 4 */
        float *row = r < tokens * H ? q + r * D : k + (r - tokens * H) * D;
        double squares = 0;
        for (int64_t d = 0; d < D; d++) squares += (double)row[d] * row[d];
        for (int64_t d = 0; d < D; d++) row[d] = (float)(row[d] / sqrt(squares / D + c->norm_eps));
    }
    for (int64_t t = 0; c->temperature_floor > 0 && t < tokens; t++) {
        const int64_t b = t / seq, s = t % seq;
        const double p = (double)(pos->ids ? pos->ids[t]
                                           : (pos->starts ? pos->starts[b] : pos->start) + s);
        const double f = 1.0 + c->temperature_scale * log1p(floor((p + 1) / c->temperature_floor));
        for (int64_t i = 0; i < H * D; i++) q[t * H * D + i] = (float)(q[t * H * D + i] * f);
    }
    if (storage != RA_F32) {
        uint16_t *stored = malloc((size_t)(tokens * Hkv * D) * 2);
        for (int i = 0; i < 2; i++) {
            float *kv = i ? v : k;
            ra_convert(stored, storage, kv, RA_F32, tokens * Hkv * D);
            ra_convert(kv, RA_F32, stored, storage, tokens * Hkv * D);
        }
        free(stored);
    }
    double logits[64];
    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < seq; i++) {
                const int64_t g = h / (H / Hkv);
                const float *qi = q + ((b * seq + i) * H + h) * D;
                double max = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const float *kj = k + ((b * seq + j) * Hkv + g) * D;
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += (double)qi[d] * kj[d];
                    logits[j] = dot / sqrt((double)D);
                    max = fmax(max, logits[j]);
                }
                for (int64_t j = 0; j <= i; j++) sum += (logits[j] = exp(logits[j] - max));
                float *oi = o + ((b * seq + i) * H + h) * D;
                double *oai = oa + ((b * seq + i) * H + h) * D;
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0, mag = 0;
                    for (int64_t j = 0; j <= i; j++) {
                        acc += logits[j] / sum * v[((b * seq + j) * Hkv + g) * D + d];
                        mag += logits[j] / sum * va[((b * seq + j) * Hkv + g) * D + d];
                    }
                    oi[d] = (float)acc;
                    oai[d] = mag;
                }
            }
    double scale = 0;
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t i = 0; i < dim; i++) {
            double acc = w[7] ? w[7][i] : 0.0;
            for (int64_t j = 0; j < H * D; j++) acc += (double)o[t * H * D + j] * w[3][i * H * D + j];
            y[t * dim + i] = acc;
        }
        project_abs(ya, oa + t * H * D, w[3], w[7], 1, dim, H * D);
        for (int64_t i = 0; i < dim; i++) scale = fmax(scale, ya[i]);
    }
    free(q), free(k), free(v), free(o), free(xa), free(va), free(oa), free(ya);
    return scale;
}

/* max |a - b| over n values, relative to scale (expected_forward's: at
 * least max |b|; 0: absolute). */
NO_COVERAGE static double rel_diff(const float *a, const double *b, int64_t n, double scale)
{
    double diff = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        diff = fmax(diff, fabs(a[i] - b[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

/* The cached layer over the same x: a prefill of p tokens per sequence,
 * then one token at a time, must give the seed's Attention with keys and
 * values rounded as the cache stores them. */
static void check_cached(fuzz_input *in, const ra_layer *layer, const float *const w[10],
                         const float *x, int64_t batch, int64_t seq)
{
    const ra_layer_config *c = ra_layer_get_config(layer);
    const int64_t dim = c->dim;
    ra_dtype dtype = (ra_dtype)take_range(in, 0, RA_DTYPE_COUNT - 1);
    /* seq - 1: the last step is refused */
    int64_t capacity = seq + take_range(in, seq > 1 ? -1 : 0, 3);
    int64_t p = 1 + take_range(in, 0, seq - 1);
    double *want = malloc((size_t)(batch * seq * dim) * sizeof *want);
    double scale = expected_forward(layer, w, x, batch, seq, &(ra_positions){.struct_size = sizeof(ra_positions)}, dtype, want);
    ra_kv_cache *cache;
    FUZZ_CHECK(ra_kv_cache_create(&cache, batch, capacity, c->n_kv_heads, c->head_dim, dtype) ==
                   RA_OK, "cache");
    ra_context *ctx = take_range(in, 0, 1) ? two_threads : NULL;
    const size_t bytes = (size_t)(batch * seq * dim) * 4;
    float *xs = malloc(bytes), *ys = malloc(bytes), *got = malloc(bytes);
    for (int64_t s0 = 0; s0 < seq;) {
        int64_t n = s0 == 0 ? p : 1;
        for (int64_t b = 0; b < batch; b++)
            memcpy(xs + b * n * dim, x + (b * seq + s0) * dim, (size_t)(n * dim) * 4);
        for (int64_t i = 0; i < batch * n * dim; i++) ys[i] = 5.0f;
        ra_status st = ra_layer_forward_cached(ctx, layer, cache, ys, xs, batch, n, NULL);
        if (s0 + n > capacity) {
            FUZZ_CHECK(st == RA_ERR_CACHE_FULL, "a step past the capacity: %d", (int)st);
            for (int64_t b = 0; b < batch; b++)
                FUZZ_CHECK(ra_kv_cache_length(cache, b) == s0, "a refused step moved the cache");
            for (int64_t i = 0; i < batch * n * dim; i++)
                FUZZ_CHECK(ys[i] == 5.0f, "a refused step wrote y");
            break;
        }
        FUZZ_CHECK(st == RA_OK, "cached step at %lld refused: %d", (long long)s0, (int)st);
        for (int64_t b = 0; b < batch; b++)
            memcpy(got + (b * seq + s0) * dim, ys + b * n * dim, (size_t)(n * dim) * 4);
        s0 += n;
        if (s0 == seq) {
            /* float32 sums; with 16-bit storage also the odd element that
             * rounds the other way from a projection a few ulps off */
            double tol = dtype == RA_F32 ? 1e-4 : dtype == RA_F16 ? 1e-3 : 1e-2;
            double e = rel_diff(got, want, batch * seq * dim, scale);
            FUZZ_CHECK(e <= tol, "prefill %lld + steps with a dtype %d cache: %.3g from the seed's "
                       "Attention", (long long)p, (int)dtype, e);
        }
    }
    free(xs), free(ys), free(got), free(want);
    ra_kv_cache_destroy(cache);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t head_dims[] = {8, 2, 4, 16, 6, 3};
    fuzz_input in = {data, size};
    int valid = 1;
    int64_t hkv = take_size(&in, 2, &valid), rep = take_size(&in, 3, &valid);
    int64_t head_dim = TAKE_ONE_OF(&in, head_dims), heads = hkv * rep;
    ra_rope_config lc_rope = ra_rope_config_default(0);
    ra_layer_config lc = {.struct_size = sizeof lc, .dim = heads * head_dim, .n_heads = heads,
                          .n_kv_heads = hkv,
                          .rope = &lc_rope};
    int odd = take_range(&in, 0, 15);
    if (odd < 4) lc.head_dim = head_dim; /* given, not derived from dim */
    if (odd == 15) lc.dim += 3, lc.head_dim = head_dim;      /* H D < dim (Mistral-Nemo) */
    else if (odd == 13) lc.dim -= 1, lc.head_dim = head_dim; /* H D > dim (Qwen3, Gemma) */
    else if (odd == 14) lc.n_kv_heads = heads + 1, valid = 0;
    else if (odd == 0 && hkv == heads) lc.n_kv_heads = 0; /* 0 means n_heads */
    if (head_dim % 2) valid = 0;
    lc_rope.layout = (ra_layout)take_range(&in, 0, 1);
    lc_rope.type = take_range(&in, 0, 3) == 3 ? RA_ROPE_LINEAR : RA_ROPE_DEFAULT;
    lc_rope.factor = 2;
    lc_rope.table_size = take_range(&in, 0, 8);
    int64_t dim = lc.dim > 0 ? lc.dim : 1, wide = dim > heads * head_dim ? dim : heads * head_dim;
    size_t bytes;
    /* wq, wk, wv, wo, each [wide, dim] or [dim, wide] (room for [H D, dim]
     * and [dim, H D]); then bq, bk, bv, bo of wide values, and q_norm,
     * k_norm of head_dim values (heads * head_dim with each head's own
     * weights), or NULL; LayerNorms or RMSNorms */
    float *w[10] = {NULL};
    for (int i = 0; i < 4; i++) {
        w[i] = take_buffer(&in, RA_F32, wide * dim, &bytes);
        for (int64_t j = 0; j < wide * dim; j++) w[i][j] /= 2 * sqrtf((float)dim); /* modest logits */
    }
    int norms = take_range(&in, 0, 3);
    lc.norm_head_weights = norms & 1;
    lc.norm_layer = norms >> 1;
    for (int i = 4; i < 10; i++)
        if (take_range(&in, 0, 1))
            w[i] = take_buffer(&in, RA_F32, i < 8 ? wide : (lc.norm_head_weights && heads > 0 ? heads : 1) *
                               head_dim, &bytes);
    ra_layer_weights lw = {.struct_size = sizeof lw, .wq = w[0], .wk = w[1], .wv = w[2], .wo = w[3],
                           .bq = w[4],
                           .bk = w[5], .bv = w[6], .bo = w[7], .q_norm = w[8], .k_norm = w[9]};
    /* Llama 4's L2 norm and temperature; q, k and v fused per group (when
     * q, k and v have biases all or none) */
    int extras = take_range(&in, 0, 7);
    lc.qk_l2_norm = extras & 1;
    lc.temperature_floor = extras & 2 ? (double)take_range(&in, 1, 8) : 0.0;
    lc.temperature_scale = 0.5;
    /* weights in a checkpoint's 16-bit dtype: rounded here, in float32, so
     * the reference reads the values the layer widens */
    static const ra_dtype weight_dtypes[] = {RA_F32, RA_BF16, RA_F16};
    const ra_dtype wdtype = TAKE_ONE_OF(&in, weight_dtypes);
    for (int i = 0; i < 4 && wdtype != RA_F32; i++)
        for (int64_t j = 0; j < wide * dim; j++) w[i][j] = round_to(wdtype, w[i][j]);
    float *fused[2] = {NULL, NULL};
    if ((extras & 4) && valid && !w[4] == !w[5] && !w[4] == !w[6]) {
        const int64_t rows = (heads + 2 * hkv) * head_dim; /* rep = heads / hkv */
        fused[0] = malloc((size_t)(rows * dim) * 4);
        fused[1] = w[4] ? malloc((size_t)rows * 4) : NULL;
        for (int f = 0; f < 2; f++) /* weights' rows, then biases' values */
            for (int64_t g = 0, at = 0; fused[f] && g < hkv; g++)
                for (int p = 0; p < 3; p++) {
                    const int64_t n = (p ? 1 : rep) * head_dim, first = g * n, in_f = f ? 1 : dim;
                    memcpy(fused[f] + at * in_f, w[p + 4 * f] + first * in_f,
                           (size_t)(n * in_f) * 4);
                    at += n;
                }
        lw.wq = lw.wk = lw.wv = lw.bq = lw.bk = lw.bv = NULL;
        lw.wqkv = fused[0];
        lw.bqkv = fused[1];
    }
    uint16_t *w16[5] = {NULL};
    if (wdtype != RA_F32) {
        const float **slots[5] = {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.wqkv};
        const int64_t rows[5] = {wide, wide, wide, wide, (heads + 2 * hkv) * head_dim};
        for (int i = 0; i < 5; i++)
            if (*slots[i]) {
                w16[i] = malloc((size_t)(rows[i] * dim) * 2);
                for (int64_t j = 0; j < rows[i] * dim; j++)
                    w16[i][j] = wdtype == RA_BF16 ? ra_f32_to_bf16((*slots[i])[j])
                                                  : ra_f32_to_f16((*slots[i])[j]);
                *slots[i] = (const float *)w16[i];
            }
        lw.dtype = wdtype;
    }
    ra_layer *layer = (ra_layer *)&layer;
    ra_status st = ra_layer_create(&layer, &lc, &lw);
    if (!valid || st != RA_OK) {
        FUZZ_CHECK(!valid, "valid layer refused: %d", (int)st);
        FUZZ_CHECK(st == RA_ERR_SIZE || st == RA_ERR_DIM || st == RA_ERR_GQA ||
                       st == RA_ERR_HEAD_DIM, "ra_layer_create: status %d", (int)st);
        FUZZ_CHECK(layer == NULL, "out not NULL after a failure");
        for (int i = 0; i < 10; i++) free(w[i]);
        for (int i = 0; i < 5; i++) free(w16[i]);
        free(fused[0]), free(fused[1]);
        return 0;
    }
    int64_t batch = take_size(&in, 2, &valid), seq = take_size(&in, 10, &valid);
    fuzz_positions fp;
    take_positions(&in, &fp, batch, seq, 0, 1, &valid);
    if (fp.p.cu_seqlens) valid = 0; /* RA_ERR_UNSUPPORTED */
    ra_attention_options opt = {.struct_size = sizeof opt,
                                .path = (ra_attention_path)take_range(&in, 0, RA_PATH_COUNT),
                                .seed = 7};
    if ((unsigned)opt.path >= RA_PATH_COUNT) valid = 0;
    int training = take_range(&in, 0, 7);
    if (training >= 6) {
        opt.dropout = training == 6 ? 0.25f : 1.0f;
        if (opt.dropout >= 1.0f) valid = 0;
    }
    ra_context *ctx = take_range(&in, 0, 1) ? two_threads : NULL;
    int64_t n = (batch > 0 ? batch : 1) * (seq > 0 ? seq : 1) * ra_layer_get_config(layer)->dim;
    float *x = take_buffer(&in, RA_F32, n, &bytes);
    float *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) y[i] = 3.0f;
    st = ra_layer_forward(ctx, layer, y, x, batch, seq, &fp.p, &opt);
    if (valid) FUZZ_CHECK(st == RA_OK, "valid forward refused: %d", (int)st);
    if (st != RA_OK) {
        FUZZ_CHECK(st == RA_ERR_NULL || st == RA_ERR_SIZE || st == RA_ERR_ARGUMENT ||
                       st == RA_ERR_POSITION || st == RA_ERR_UNSUPPORTED || st == RA_ERR_OVERFLOW,
                   "undocumented status %d", (int)st);
        for (int64_t i = 0; i < n; i++) FUZZ_CHECK(y[i] == 3.0f, "a refused forward wrote y");
    } else if (opt.dropout == 0.0f) {
        double *want = malloc((size_t)n * sizeof *want);
        double scale = expected_forward(layer, (const float *const *)w, x, batch, seq, &fp.p,
                                        RA_F32, want);
        double e = rel_diff(y, want, n, scale);
        FUZZ_CHECK(e <= 1e-4, "forward (path %d) is %.3g from the seed's Attention",
                   (int)opt.path, e);
        if (!fp.p.ids && !fp.p.starts && fp.p.start == 0) /* the cache's own positions */
            check_cached(&in, layer, (const float *const *)w, x, batch, seq);
        free(want);
    }
    fuzz_positions_free(&fp);
    free(x), free(y);
    for (int i = 0; i < 10; i++) free(w[i]);
    for (int i = 0; i < 5; i++) free(w16[i]);
    free(fused[0]), free(fused[1]);
    ra_layer_destroy(layer);
    return 0;
}
