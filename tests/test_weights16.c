/*
 * test_weights16.c — layers whose projection matrices are bfloat16 or
 * float16 (ra_layer_weights.dtype): the 16-bit GEMV kernel against a
 * scalar reference on awkward shapes (1..3 threads, the same bits for each),
 * the panel products against sgemm on the widened weights, and the layer's
 * forward, cached prefill and steps, training forward and backward against
 * the float32 layer given the widened weights (separate and fused wqkv,
 * biases and norms), on every SIMD path; and the refusals.
 *
 * The 16-bit weights are widened exactly and every product and sum is
 * float32, so the two layers differ only in the order of the sums: the
 * GEMV kernel sums RA_W lanes then the lanes, sgemm its own way.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "harness.h"
#include "ropeattn.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static void fill(float *x, int64_t n, float amp)
{
    for (int64_t i = 0; i < n; i++) x[i] = amp * uniform();
}

/* w16[i] = w[i] rounded to dtype, and w[i] replaced by its widening. */
static void round_weights(float *w, uint16_t *w16, int64_t n, ra_dtype dtype)
{
    ra_convert(w16, dtype, w, RA_F32, n);
    ra_convert(w, RA_F32, w16, dtype, n);
}

static const char *dtype_name(ra_dtype d) { return d == RA_BF16 ? "bf16" : "f16"; }

/* ---- the kernels ------------------------------------------------------- */

/* The scalar reference: out[i, j] = sum_c a[i, c] w[j, c] in double, and
 * sum_c |a w| (the error bound's scale). */
static void gemv_ref(double *out, double *mag, const float *a, const float *w, int64_t m,
                     int64_t n, int64_t k)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, t = 0;
            for (int64_t c = 0; c < k; c++) {
                s += (double)a[i * k + c] * w[j * k + c];
                t += fabs((double)a[i * k + c] * w[j * k + c]);
            }
            out[i * n + j] = s;
            mag[i * n + j] = t;
        }
}

static void test_gemv(void)
{
    static const int64_t ms[] = {1, 2, 3, 5, 8}, ns[] = {1, 3, 4, 5, 67, 130},
                         ks[] = {1, 7, 16, 17, 33, 100, 129};
    ra_context *ctx[3] = {NULL, NULL, NULL};
    for (int t = 1; t < 3; t++) CHECK(ra_context_create(&ctx[t], t + 1) == RA_OK, "context");
    const int64_t most = 8 * 130 * 129;
    float *a = malloc(most * sizeof *a), *w = malloc(most * sizeof *w);
    float *out = malloc(most * sizeof *out), *out1 = malloc(most * sizeof *out1);
    uint16_t *w16 = malloc(most * sizeof *w16);
    double *ref = malloc(most * sizeof *ref), *mag = malloc(most * sizeof *mag);
    double worst = 0;
    for (int d = 0; d < 2; d++) {
        const ra_dtype dtype = d ? RA_F16 : RA_BF16;
        for (size_t im = 0; im < sizeof ms / sizeof ms[0]; im++)
            for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++)
                for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
                    const int64_t m = ms[im], n = ns[in], k = ks[ik];
                    fill(a, m * k, 2.0f);
                    fill(w, n * k, 1.0f);
                    round_weights(w, w16, n * k, dtype);
                    gemv_ref(ref, mag, a, w, m, n, k);
                    /* 1 to 3 threads, tasks of 4 and 16 columns, and the
                     * stream passes (eight rows; AVX2 only): one set of bits */
                    int same = 1;
                    for (int v = 0; v < 12; v++) {
                        ra_gemv16_job job = {v ? out : out1, n, a, w16, dtype == RA_BF16,
                                             m, n, k, v / 3 % 2 ? 16 : 4, v / 6};
                        ra_gemv16(ctx[v % 3], &job);
                        if (v > 0 && memcmp(out, out1, (size_t)(m * n) * sizeof *out) != 0)
                            same = 0;
                    }
                    /* float32 sums of k products: |error| <= (k + 1) 2^-24 sum|a w|
                     * (each rounding at most 2^-24 of a partial sum <= sum|a w|;
                     * with FMA the products round not at all) */
                    double err = 0;
                    for (int64_t i = 0; i < m * n; i++) {
                        double e = fabs(out[i] - ref[i]) / ((double)(k + 1) * 0x1p-24 *
                                                            (mag[i] > 0 ? mag[i] : 1));
                        err = e > err ? e : err;
                    }
                    worst = err > worst ? err : worst;
                    CHECK(err <= 1.0 && same, "%s m %lld n %lld k %lld: error %.2f of the "
                          "bound, threads the same bits %d", dtype_name(dtype), (long long)m,
                          (long long)n, (long long)k, err, same);
                }
    }
    printf("  %sgemv: worst error %.3f of the float32 summation bound\n", ra_test_label, worst);
    free(a), free(w), free(out), free(out1), free(w16), free(ref), free(mag);
    for (int t = 1; t < 3; t++) ra_context_destroy(ctx[t]);
}

/* The panel products (more than RA_GEMV16_ROWS rows): weights long enough
 * that rows span several panels, against sgemm on the widened weights. */
static void test_panels(void)
{
    enum { M = 11, N = 300, K = 1 << 14 }; /* panels of 256 rows of 16384 */
    float *a = malloc((size_t)M * K * sizeof *a), *w = malloc((size_t)N * K * sizeof *w);
    float *dy = malloc((size_t)M * N * sizeof *dy);
    float *out = malloc((size_t)M * K * sizeof *out), *ref = malloc((size_t)M * K * sizeof *ref);
    uint16_t *w16 = malloc((size_t)N * K * sizeof *w16);
    ra_gemm_env env = {NULL, RA_BF16, NULL, ra_gemm_panel_floats(K, (int64_t)N * K)};
    env.panel = malloc((size_t)env.panel_floats * sizeof(float));
    CHECK(env.panel_floats / K < N, "several panels: %lld rows each",
          (long long)(env.panel_floats / K));
    for (int d = 0; d < 2; d++) {
        env.dtype = d ? RA_F16 : RA_BF16;
        fill(a, (int64_t)M * K, 1.0f);
        fill(w, (int64_t)N * K, 1.0f);
        fill(dy, (int64_t)M * N, 1.0f);
        round_weights(w, w16, (int64_t)N * K, env.dtype);
        /* y = a w^T: each output one sgemm dot over K, whichever panel */
        ra_gemm_nt_w(&env, out, N, a, w16, M, N, K);
        ra_gemm_nt(ref, N, a, w, M, N, K);
        double e = 0, s = 0;
        for (int64_t i = 0; i < (int64_t)M * N; i++) {
            e = fmax(e, fabs(out[i] - ref[i]));
            s = fmax(s, fabs(ref[i]));
        }
        /* sgemm's own order within a panel; seen 0 (the same bits) */
        CHECK(e <= 1e-6 * s, "%s nt: %.3g of %.3g", dtype_name(env.dtype), e, s);
        /* dx = dy w, the inner dimension split over panels (partial sums
         * added): float32 sums of 130 terms, relative ~1e-7 */
        for (int64_t i = 0; i < (int64_t)M * K; i++) out[i] = ref[i] = 0.5f;
        ra_gemm_nn_w(&env, out, dy, N, w16, M, K, N, 1.0f);
        ra_gemm_nn(ref, dy, N, w, M, K, N, 1.0f);
        e = s = 0;
        for (int64_t i = 0; i < (int64_t)M * K; i++) {
            e = fmax(e, fabs(out[i] - ref[i]));
            s = fmax(s, fabs(ref[i]));
        }
        CHECK(e <= 1e-6 * s, "%s nn: %.3g of %.3g", dtype_name(env.dtype), e, s);
    }
    free(a), free(w), free(dy), free(out), free(ref), free(w16), free(env.panel);
}

/* ---- the layer ----------------------------------------------------------- */

enum { FUSED = 1, EXTRAS = 2 }; /* wqkv; biases and q/k norms */

typedef struct weights16 {
    int64_t dim, qd, kv;
    float *w[4], *b[4], *qn, *kn; /* wq wk wv wo (widened), biases, norms */
    uint16_t *w16[4];
    float *fused;                 /* wqkv, widened */
    uint16_t *fused16;
    ra_layer *f32, *half;
} weights16;

/* Rows [g rows) of a group of each of q, k, v, as a fused wqkv stores them. */
static void fuse(float *out, float *const w[3], int64_t groups, int64_t rep, int64_t d,
                 int64_t dim)
{
    for (int64_t g = 0; g < groups; g++) {
        float *o = out + g * (rep + 2) * d * dim;
        memcpy(o, w[0] + g * rep * d * dim, (size_t)(rep * d * dim) * sizeof(float));
        memcpy(o + rep * d * dim, w[1] + g * d * dim, (size_t)(d * dim) * sizeof(float));
        memcpy(o + (rep + 1) * d * dim, w[2] + g * d * dim, (size_t)(d * dim) * sizeof(float));
    }
}

static int make_layers(weights16 *l, const ra_layer_config *cfg, ra_dtype dtype, int flags)
{
    memset(l, 0, sizeof *l);
    const int64_t D = cfg->head_dim;
    l->dim = cfg->dim, l->qd = cfg->n_heads * D, l->kv = cfg->n_kv_heads * D;
    const int64_t rows[4] = {l->qd, l->kv, l->kv, l->dim}, cols[4] = {l->dim, l->dim, l->dim,
                                                                        l->qd};
    for (int i = 0; i < 4; i++) {
        l->w[i] = malloc((size_t)(rows[i] * cols[i]) * sizeof(float));
        l->w16[i] = malloc((size_t)(rows[i] * cols[i]) * sizeof(uint16_t));
        l->b[i] = malloc((size_t)rows[i] * sizeof(float));
        fill(l->w[i], rows[i] * cols[i], 1.0f / sqrtf((float)cols[i]) * 1.7f);
        fill(l->b[i], rows[i], 0.1f);
        round_weights(l->w[i], l->w16[i], rows[i] * cols[i], dtype);
    }
    l->qn = malloc((size_t)D * sizeof(float));
    l->kn = malloc((size_t)D * sizeof(float));
    for (int64_t i = 0; i < D; i++) l->qn[i] = 1.0f + 0.3f * uniform(), l->kn[i] = 0.8f;
    ra_layer_weights w32 = ra_layer_weights_init(), w16 = w32;
    w16.dtype = dtype;
    if (flags & FUSED) {
        const int64_t n = (l->qd + 2 * l->kv) * l->dim;
        l->fused = malloc((size_t)n * sizeof(float));
        l->fused16 = malloc((size_t)n * sizeof(uint16_t));
        fuse(l->fused, l->w, cfg->n_kv_heads, cfg->n_heads / cfg->n_kv_heads, D, l->dim);
        ra_convert(l->fused16, dtype, l->fused, RA_F32, n);
        w32.wqkv = l->fused;
        w16.wqkv = (const float *)l->fused16;
    } else {
        w32.wq = l->w[0], w32.wk = l->w[1], w32.wv = l->w[2];
        w16.wq = (const float *)l->w16[0], w16.wk = (const float *)l->w16[1];
        w16.wv = (const float *)l->w16[2];
    }
    w32.wo = l->w[3];
    w16.wo = (const float *)l->w16[3];
    if (flags & EXTRAS) {
        w32.bo = w16.bo = l->b[3];
        w32.q_norm = w16.q_norm = l->qn;
        w32.k_norm = w16.k_norm = l->kn;
        if (!(flags & FUSED)) {
            w32.bq = w16.bq = l->b[0];
            w32.bk = w16.bk = l->b[1];
            w32.bv = w16.bv = l->b[2];
        }
    }
    ra_status a = ra_layer_create(&l->f32, cfg, &w32), b = ra_layer_create(&l->half, cfg, &w16);
    CHECK(a == RA_OK && b == RA_OK, "layers: %s", ra_last_error());
    return a == RA_OK && b == RA_OK;
}

static void free_layers(weights16 *l)
{
    for (int i = 0; i < 4; i++) free(l->w[i]), free(l->w16[i]), free(l->b[i]);
    free(l->qn), free(l->kn), free(l->fused), free(l->fused16);
    ra_layer_destroy(l->f32);
    ra_layer_destroy(l->half);
}

/* max |a - b| / max(max |b|, floor) */
static double rel_diff_floor(const float *a, const float *b, int64_t n, double floor)
{
    double e = 0, s = floor;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return s > 0 ? e / s : e;
}

static double rel_diff(const float *a, const float *b, int64_t n)
{
    return rel_diff_floor(a, b, n, 0);
}

/* Gradients' differences relative to the largest, floored at 0.1 (they
 * are of order 0.1 to 1 here): one token's q and k get no gradient in exact
 * arithmetic, only rounding noise of ~1e-7 in each order of sums (seen:
 * 1.3e-6 of 0.1). */
static double grad_diff(const float *a, const float *b, int64_t n)
{
    return rel_diff_floor(a, b, n, 0.1);
}

/* The two layers agree up to the order of float32 sums: inputs of order 1
 * through products of a few hundred terms and a softmax, relative ~1e-6
 * (seen below 1e-6); 2e-5 leaves a margin and is far below a bf16
 * rounding of a weight (2^-9 = 2e-3), which a wrong widening would show. */
#define LAYER_TOL 2e-5

typedef struct layer_shape {
    const char *name;
    int64_t b, s, h, hkv, d, dim;
    int flags;
} layer_shape;

static const layer_shape shapes[] = {
    {"gqa 2:1, dim 36", 2, 7, 4, 2, 12, 36, 0},
    {"mha, one token", 1, 1, 2, 2, 8, 16, EXTRAS},
    {"fused, biases, norms", 1, 13, 6, 2, 10, 61, FUSED | EXTRAS},
    {"gqa 3:1, 9 tokens", 3, 3, 3, 1, 16, 48, EXTRAS},
};

/* Through a cache: a prefill of S tokens, then three steps of one token
 * per sequence (B rows: the GEMV kernel); the largest difference. */
static double cached_diff(const weights16 *l, const layer_shape *sh, ra_context *ctx)
{
    const int64_t n = sh->b * sh->s * sh->dim;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y),
          *y32 = malloc((size_t)n * sizeof *y32);
    ra_kv_cache *c32 = NULL, *c16 = NULL;
    CHECK(ra_kv_cache_create(&c32, sh->b, sh->s + 3, sh->hkv, sh->d, RA_F32) == RA_OK &&
              ra_kv_cache_create(&c16, sh->b, sh->s + 3, sh->hkv, sh->d, RA_F32) == RA_OK,
          "caches");
    double worst = 0;
    for (int step = 0; step < 4; step++) {
        const int64_t s = step ? 1 : sh->s;
        fill(x, sh->b * s * sh->dim, 1.0f);
        ra_status a = ra_layer_forward_cached(ctx, l->f32, c32, y32, x, sh->b, s, NULL);
        ra_status b = ra_layer_forward_cached(ctx, l->half, c16, y, x, sh->b, s, NULL);
        CHECK(a == RA_OK && b == RA_OK, "%s step %d: %s", sh->name, step, ra_last_error());
        worst = fmax(worst, rel_diff(y, y32, sh->b * s * sh->dim));
    }
    ra_kv_cache_destroy(c32);
    ra_kv_cache_destroy(c16);
    free(x), free(y), free(y32);
    return worst;
}

static void test_layer_forward(void)
{
    ra_context *ctx = NULL;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "context");
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const layer_shape *sh = &shapes[i];
            const ra_dtype dtype = d ? RA_F16 : RA_BF16;
            ra_rope_config rope = ra_rope_config_default(sh->d);
            ra_layer_config cfg = ra_layer_config_init();
            cfg.dim = sh->dim, cfg.n_heads = sh->h, cfg.n_kv_heads = sh->hkv;
            cfg.head_dim = sh->d, cfg.rope = &rope;
            weights16 l;
            if (!make_layers(&l, &cfg, dtype, sh->flags)) {
                free_layers(&l);
                continue;
            }
            const int64_t T = sh->b * sh->s, n = T * sh->dim;
            float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y),
                  *y32 = malloc((size_t)n * sizeof *y32);
            fill(x, n, 1.0f);
            double worst = 0;
            for (int path = 0; path < 2; path++)
                for (int c = 0; c < 2; c++) { /* NULL ctx, three threads */
                    const ra_attention_options *o =
                        PATH_OPTS(path ? RA_PATH_REFERENCE : RA_PATH_FLASH);
                    ra_status a = ra_layer_forward(c ? ctx : NULL, l.f32, y32, x, sh->b, sh->s,
                                                   NULL, o);
                    ra_status b = ra_layer_forward(c ? ctx : NULL, l.half, y, x, sh->b, sh->s,
                                                   NULL, o);
                    CHECK(a == RA_OK && b == RA_OK, "%s: %s", sh->name, ra_last_error());
                    worst = fmax(worst, rel_diff(y, y32, n));
                }
            const double cached = cached_diff(&l, sh, ctx);
            CHECK(worst <= LAYER_TOL && cached <= LAYER_TOL, "%s %s: forward %.3g, cached %.3g",
                  sh->name, dtype_name(dtype), worst, cached);
            printf("  %s%-22s %s  forward %.1e  cached %.1e\n", ra_test_label, sh->name,
                   dtype_name(dtype), worst, cached);
            free(x), free(y), free(y32);
            free_layers(&l);
        }
    ra_context_destroy(ctx);
}

/* Training: the forward through a tape, and every gradient. */
static void test_layer_backward(void)
{
    ra_context *ctx = NULL;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "context");
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const layer_shape *sh = &shapes[i];
            const ra_dtype dtype = d ? RA_F16 : RA_BF16;
            ra_rope_config rope = ra_rope_config_default(sh->d);
            ra_layer_config cfg = ra_layer_config_init();
            cfg.dim = sh->dim, cfg.n_heads = sh->h, cfg.n_kv_heads = sh->hkv;
            cfg.head_dim = sh->d, cfg.rope = &rope;
            weights16 l;
            if (!make_layers(&l, &cfg, dtype, sh->flags)) {
                free_layers(&l);
                continue;
            }
            const int64_t T = sh->b * sh->s, n = T * sh->dim;
            const int64_t sizes[8] = {l.qd * l.dim, l.kv * l.dim, l.kv * l.dim, l.dim * l.qd,
                                      l.qd, l.kv, l.kv, l.dim};
            float *x = malloc((size_t)n * sizeof *x), *dy = malloc((size_t)n * sizeof *dy);
            float *y[2], *dx[2], *g[2][8], *norms[2][2], *fused[2];
            ra_layer_tape *tape[2] = {NULL, NULL};
            fill(x, n, 1.0f);
            fill(dy, n, 1.0f);
            for (int k = 0; k < 2; k++) {
                const ra_layer *layer = k ? l.half : l.f32;
                y[k] = malloc((size_t)n * sizeof(float));
                dx[k] = malloc((size_t)n * sizeof(float));
                for (int j = 0; j < 8; j++) g[k][j] = calloc((size_t)sizes[j], sizeof(float));
                for (int j = 0; j < 2; j++) norms[k][j] = calloc((size_t)sh->d, sizeof(float));
                fused[k] = calloc((size_t)((l.qd + 2 * l.kv) * l.dim), sizeof(float));
                ra_layer_grads gr = ra_layer_grads_init();
                if (sh->flags & FUSED) {
                    gr.dwqkv = fused[k];
                } else {
                    gr.dwq = g[k][0], gr.dwk = g[k][1], gr.dwv = g[k][2];
                    gr.dbq = g[k][4], gr.dbk = g[k][5], gr.dbv = g[k][6];
                }
                gr.dwo = g[k][3], gr.dbo = g[k][7];
                gr.dq_norm = norms[k][0], gr.dk_norm = norms[k][1];
                ra_status st = ra_layer_tape_create(&tape[k], layer, T);
                if (st == RA_OK)
                    st = ra_layer_forward_train(ctx, layer, y[k], tape[k], x, sh->b, sh->s, NULL,
                                                NULL);
                if (st == RA_OK) st = ra_layer_backward(ctx, layer, dx[k], &gr, tape[k], dy);
                CHECK(st == RA_OK, "%s %s: %s", sh->name, dtype_name(dtype), ra_last_error());
            }
            /* the same bound as the forward's: float32 sums in another order */
            double worst = fmax(rel_diff(y[1], y[0], n), grad_diff(dx[1], dx[0], n));
            for (int j = 0; j < 8; j++) worst = fmax(worst, grad_diff(g[1][j], g[0][j], sizes[j]));
            for (int j = 0; j < 2; j++)
                worst = fmax(worst, grad_diff(norms[1][j], norms[0][j], sh->d));
            worst = fmax(worst, grad_diff(fused[1], fused[0], (l.qd + 2 * l.kv) * l.dim));
            CHECK(worst <= LAYER_TOL, "%s %s: gradients %.3g", sh->name, dtype_name(dtype), worst);
            printf("  %s%-22s %s  training %.1e\n", ra_test_label, sh->name, dtype_name(dtype),
                   worst);
            for (int k = 0; k < 2; k++) {
                ra_layer_tape_destroy(tape[k]);
                free(y[k]), free(dx[k]), free(fused[k]);
                for (int j = 0; j < 8; j++) free(g[k][j]);
                for (int j = 0; j < 2; j++) free(norms[k][j]);
            }
            free(x), free(dy);
            free_layers(&l);
        }
    ra_context_destroy(ctx);
}

/* What the layer refuses: other dtypes, odd addresses, latent attention. */
static void test_refusals(void)
{
    static uint16_t w16[4 * 64 + 1];
    ra_rope_config rope = ra_rope_config_default(8);
    ra_layer_config cfg = ra_layer_config_init();
    cfg.dim = 16, cfg.n_heads = 2, cfg.rope = &rope;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = w.wk = w.wv = w.wo = (const float *)w16;
    ra_layer *layer = NULL;
    w.dtype = RA_F8E4M3;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_DTYPE && !layer, "fp8 weights");
    w.dtype = (ra_dtype)77;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_DTYPE && !layer, "dtype 77");
    w.dtype = RA_BF16;
    w.wk = (const float *)(const void *)((const char *)w16 + 1);
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_ARGUMENT && !layer &&
              strstr(ra_last_error(), "wk"), "odd address: %s", ra_last_error());
    w.wk = (const float *)w16;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_OK, "bf16: %s", ra_last_error());
    ra_layer_destroy(layer);
    layer = NULL;
    /* latent attention: float32 weights only */
    static float norm[16];
    ra_rope_config mrope = ra_rope_config_default(4);
    ra_layer_config mc = ra_layer_config_init();
    mc.dim = 16, mc.n_heads = 2, mc.head_dim = 8, mc.kv_lora_rank = 4;
    mc.qk_nope_head_dim = 4, mc.v_head_dim = 4, mc.rope = &mrope;
    ra_layer_weights mw = ra_layer_weights_init();
    mw.wq = mw.wkv_a = mw.wkv_b = mw.wo = (const float *)w16;
    mw.kv_a_norm = norm;
    mw.dtype = RA_F16;
    CHECK(ra_layer_create(&layer, &mc, &mw) == RA_ERR_UNSUPPORTED && !layer &&
              strstr(ra_last_error(), "latent"), "latent: %s", ra_last_error());
}

static void simd_cases(void)
{
    RUN(test_gemv);
    RUN(test_panels);
    RUN(test_layer_forward);
    RUN(test_layer_backward);
}

int main(void)
{
    RUN(test_refusals);
    ra_test_each_isa(simd_cases);
    return ra_test_summary("weights_half");
}
