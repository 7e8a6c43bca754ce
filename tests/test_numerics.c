/*
 * test_numerics.c — numbers at the edges, on every attention path (the
 * reference, flash, and decoding over a KV cache) and every SIMD path
 * (harness.h: ra_test_each_isa):
 *   - logits far beyond exp's range (±1000) and near FLT_MAX (±3e38): the
 *     softmax must neither overflow nor underflow to 0/0 (double reference);
 *   - logits beyond float32 (-Inf) weigh 0, and a row of nothing but them
 *     is NaN, as softmax gives;
 *   - NaN and Inf in q, k and v reach exactly the rows that see them;
 *   - seq = 1 and head_dim = 2 (one rotating pair);
 *   - positions near 2^31 and up to RA_MAX_POSITION against long double,
 *     refused one past it; the causal mask past 2^24 tokens (where a float
 *     no longer holds every index);
 *   - f16 storage that overflows after a rotation: ±Inf, as documented.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attention_internal.h"
#include "cpu/kernels.h"
#include "harness.h"
#include "ropeattn.h"

/* ---- the three paths and a double reference ---------------------------- */

enum { N_PATHS = 3 }; /* reference, flash, decode */
static const char *const path_name[N_PATHS] = {"reference", "flash", "decode"};

/* out[p] for p in reference, flash, decode; q [1, S, H, D], k, v [1, S, Hkv, D]
 * float32.  Decode caches k and v at position 0 (a rotation by 0 leaves
 * finite values exactly as they are) and attends with all S tokens as the
 * new ones, so that row t sees slots 0 .. t, as the causal paths do. */
static void run_paths(float *out[N_PATHS], const float *q, const float *k, const float *v,
                      int64_t s, int64_t h, int64_t hkv, int64_t d)
{
    ra_tensor tq = ra_tensor_4d((void *)q, RA_F32, 1, s, h, d);
    ra_tensor tk = ra_tensor_4d((void *)k, RA_F32, 1, s, hkv, d);
    ra_tensor tv = ra_tensor_4d((void *)v, RA_F32, 1, s, hkv, d);
    for (int p = 0; p < 2; p++) {
        ra_tensor to = ra_tensor_4d(out[p], RA_F32, 1, s, h, d);
        ra_attention_path path = p == 0 ? RA_PATH_REFERENCE : RA_PATH_FLASH;
        CHECK(ra_attention(NULL, &to, &tq, &tk, &tv, PATH_OPTS(path)) == RA_OK, "%s", path_name[p]);
    }
    ra_rope_config rc = ra_rope_config_default(d);
    ra_rope *rope;
    ra_kv_cache *cache;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    CHECK(ra_kv_cache_create(&cache, 1, s, hkv, d, RA_F32) == RA_OK, "cache");
    float *kc = malloc(sizeof(float) * s * hkv * d);
    memcpy(kc, k, sizeof(float) * s * hkv * d);
    int64_t *zeros = calloc((size_t)s, sizeof *zeros);
    ra_tensor tkc = ra_tensor_4d(kc, RA_F32, 1, s, hkv, d);
    ra_positions at_zero = {.struct_size = sizeof at_zero, .ids = zeros};
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &tkc, &tv, &at_zero, NULL) == RA_OK, "append");
    ra_tensor to = ra_tensor_4d(out[2], RA_F32, 1, s, h, d);
    CHECK(ra_attention_decode(NULL, cache, &to, &tq, NULL, NULL) == RA_OK, "decode");
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);
    free(kc);
    free(zeros);
}

static void alloc_paths(float *out[N_PATHS], int64_t n)
{
    for (int p = 0; p < N_PATHS; p++) out[p] = malloc(sizeof(float) * n);
}

static void free_paths(float *out[N_PATHS])
{
    for (int p = 0; p < N_PATHS; p++) free(out[p]);
}

/* Causal attention in double from the float inputs: logits summed in
 * double, softmax against the row maximum. */
static void attention_double(double *out, const float *q, const float *k, const float *v,
                             int64_t s, int64_t h, int64_t hkv, int64_t d)
{
    double *w = malloc(sizeof(double) * s);
    for (int64_t hh = 0; hh < h; hh++) {
        int64_t g = hh / (h / hkv);
        for (int64_t i = 0; i < s; i++) {
            double max = -INFINITY, sum = 0;
            for (int64_t j = 0; j <= i; j++) {
                double dot = 0;
                for (int64_t e = 0; e < d; e++)
                    dot += (double)q[(i * h + hh) * d + e] * k[(j * hkv + g) * d + e];
                w[j] = dot / sqrt((double)d);
                max = fmax(max, w[j]);
            }
            for (int64_t j = 0; j <= i; j++) sum += w[j] = exp(w[j] - max);
            for (int64_t e = 0; e < d; e++) {
                double acc = 0;
                for (int64_t j = 0; j <= i; j++) acc += w[j] * v[(j * hkv + g) * d + e];
                out[(i * h + hh) * d + e] = acc / sum;
            }
        }
    }
    free(w);
}

/* max |a - b| / max |v|; Inf if a holds a NaN or an Inf. */
static double error_vs(const float *a, const double *b, int64_t n, const float *v, int64_t nv)
{
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        diff = fmax(diff, fabs(a[i] - b[i]));
    }
    for (int64_t i = 0; i < nv; i++) scale = fmax(scale, fabs(v[i]));
    return diff / scale;
}

/* ---- extreme logits ------------------------------------------------------- */

/* q_i = (a, r_i), k_j = (b_j, r_j) with r uniform in [-1, 1): logits
 * (a b_j + r_i . r_j) / sqrt(D). */
static void make_logits(float *q, float *k, int64_t s, int64_t h, int64_t hkv, int64_t d,
                        float a, const float *b, uint64_t seed)
{
    ra_test_fill(q, (size_t)(s * h * d), seed);
    ra_test_fill(k, (size_t)(s * hkv * d), seed + 1);
    for (int64_t i = 0; i < s * h; i++) q[i * d] = a;
    for (int64_t j = 0; j < s * hkv; j++) k[j * d] = b[j / hkv];
}

/* Each case, every path, against attention_double.  Tolerances:
 *   offset ±1000: float32 logits near 1000 carry rounding errors of a few
 *     1000 x 2^-24 (~1e-4), which scale the weights by e^(1e-4): 1e-3 of
 *     max|v| leaves room for D = 64 terms;
 *   near FLT_MAX: the weights are exactly 0 or 1 (ties split evenly), and
 *     out is a float32 average of up to S = 150 rows: S x 2^-24 ~ 1e-5. */
static void test_extreme_logits(void)
{
    enum { S = 150, H = 4, HKV = 2 };
    const int64_t dims[] = {2, 16, 64};
    for (int di = 0; di < 3; di++) {
        const int64_t d = dims[di];
        float *q = malloc(sizeof(float) * S * H * d), *k = malloc(sizeof(float) * S * HKV * d);
        float *v = malloc(sizeof(float) * S * HKV * d), b[S];
        double *want = malloc(sizeof(double) * S * H * d);
        float *out[N_PATHS];
        alloc_paths(out, S * H * d);
        ra_test_fill(v, (size_t)(S * HKV * d), 99);
        for (int c = 0; c < 4; c++) {
            /* 0: logits 1000 + O(1)   1: -1000 + O(1)   2: all 3e38 (ties)
             * 3: 3e38 u_j, u_j spread over [-1, 1) (one key dominates) */
            const char *name[] = {"+1000", "-1000", "3e38 ties", "3e38 spread"};
            float a = c < 2 ? sqrtf(1000.0f * sqrtf((float)d)) : 1e19f;
            ra_test_fill(b, S, 7 + c);
            for (int j = 0; j < S; j++) {
                if (c == 0) b[j] = a;
                if (c == 1) b[j] = -a;
                if (c == 2) b[j] = 2.97e19f * sqrtf((float)d);
                if (c == 3) b[j] *= 2.97e19f * sqrtf((float)d);
            }
            make_logits(q, k, S, H, HKV, d, a, b, 3 * c);
            attention_double(want, q, k, v, S, H, HKV, d);
            run_paths(out, q, k, v, S, H, HKV, d);
            double tol = c < 2 ? 1e-3 : 2e-5;
            for (int p = 0; p < N_PATHS; p++) {
                double e = error_vs(out[p], want, S * H * d, v, S * HKV * d);
                CHECK(e <= tol, "D %lld, logits %s, %s: error %.3g", (long long)d, name[c],
                      path_name[p], e);
            }
        }
        free(q), free(k), free(v), free(want);
        free_paths(out);
    }
}

/* Logits below -FLT_MAX are -Inf and weigh 0 (key 0 of every row beyond
 * the first, and for the first tile's worth of keys), whatever came first;
 * a row that sees nothing else is NaN (a softmax of -Inf alone). */
static void test_minus_inf_logits(void)
{
    enum { S = 100, H = 2, HKV = 1, D = 16 };
    float q[S * H * D], k[S * HKV * D], v[S * HKV * D];
    double want[S * H * D];
    float *out[N_PATHS];
    alloc_paths(out, S * H * D);
    ra_test_fill(q, S * H * D, 1);
    ra_test_fill(k, S * HKV * D, 2);
    ra_test_fill(v, S * HKV * D, 3);
    for (int64_t i = 0; i < S * H; i++) q[i * D] = 1e30f; /* q . k_j = 1e30 k_j[0] + O(1) */
    for (int64_t j = 0; j < 70; j++) k[j * D] = -1e30f;   /* keys 0 .. 69: -1e60 -> -Inf */
    for (int64_t j = 70; j < S; j++) k[j * D] = 0.0f;     /* the rest: O(1) */
    attention_double(want, q, k, v, S, H, HKV, D);
    run_paths(out, q, k, v, S, H, HKV, D);
    for (int p = 0; p < N_PATHS; p++) {
        int nan_ok = 1;
        for (int64_t i = 0; i < 70 * H * D; i++) nan_ok &= isnan(out[p][i]) != 0;
        CHECK(nan_ok, "%s: rows that see only -Inf logits are not NaN", path_name[p]);
        /* the rows after: a plain softmax over keys 70 .. i; float32
         * rounding of O(1) logits and sums: 1e-5 */
        double e = error_vs(out[p] + 70 * H * D, want + 70 * H * D, (S - 70) * H * D, v,
                            S * HKV * D);
        CHECK(e <= 1e-5, "%s: -Inf logits do not weigh 0: error %.3g", path_name[p], e);
    }
    free_paths(out);
}

/* ---- NaN and Inf --------------------------------------------------------- */

/* A NaN in q row i reaches out row i of that head only; a NaN or an Inf in
 * k or v at key j reaches exactly the rows i >= j of the heads that read
 * that kv head, and leaves every other output bit for bit as it was.
 * Keys at a tile's edges and inside one (the flash path's tiles are 64). */
static void test_nan_inf(void)
{
    enum { S = 150, H = 4, HKV = 2, D = 16 };
    static float q[S * H * D], k[S * HKV * D], v[S * HKV * D];
    float *clean[N_PATHS], *out[N_PATHS];
    alloc_paths(clean, S * H * D);
    alloc_paths(out, S * H * D);
    ra_test_fill(q, S * H * D, 11);
    ra_test_fill(k, S * HKV * D, 12);
    ra_test_fill(v, S * HKV * D, 13);
    run_paths(clean, q, k, v, S, H, HKV, D);
    const int64_t where[] = {0, 10, 63, 64, 100, 149};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int w = 0; w < 6; w++)
        for (int which = 0; which < 3; which++) /* q, k, v */
            for (int bi = 0; bi < 3; bi++) {
                const int64_t j = where[w], g = 1, head = 3; /* kv head 1: heads 2, 3 */
                float *x = which == 0 ? q : which == 1 ? k : v;
                int64_t at = which == 0 ? (j * H + head) * D + 5 : (j * HKV + g) * D + 5;
                float saved = x[at];
                x[at] = bad[bi];
                run_paths(out, q, k, v, S, H, HKV, D);
                x[at] = saved;
                for (int p = 0; p < N_PATHS; p++) {
                    int as_expected = 1, untouched = 1, reached = 1;
                    for (int64_t i = 0; i < S; i++)
                        for (int64_t hh = 0; hh < H; hh++) {
                            int hit = which == 0 ? i == j && hh == head : i >= j && hh / 2 == g;
                            const float *o = out[p] + (i * H + hh) * D, *c = clean[p] + (i * H + hh) * D;
                            if (!hit) {
                                untouched &= memcmp(o, c, sizeof(float) * D) == 0;
                                continue;
                            }
                            /* a NaN in q or k makes the row's logit NaN:
                             * the whole row is NaN; a NaN or an Inf in v
                             * shows in its feature; an Inf in q or k is an
                             * infinite logit: a NaN row (+Inf) or a key of
                             * weight 0 (-Inf) */
                            if (which == 2) reached &= !isfinite(o[5]);
                            else if (bi == 0)
                                for (int e = 0; e < D; e++) as_expected &= isnan(o[e]) != 0;
                        }
                    CHECK(untouched, "%s: %g in %c at %lld changed rows it must not reach",
                          path_name[p], bad[bi], "qkv"[which], (long long)j);
                    CHECK(reached && as_expected, "%s: %g in %c at %lld did not reach every row "
                          "that sees it", path_name[p], bad[bi], "qkv"[which], (long long)j);
                }
            }
    free_paths(clean);
    free_paths(out);
}

/* A NaN in one feature of a rotating pair reaches both features of the
 * pair (each is a sum over the two), nothing else; positions 0 and 3. */
static void test_nan_rope(void)
{
    enum { D = 16 };
    for (int layout = 0; layout < 2; layout++) {
        ra_rope_config rc = ra_rope_config_default(D);
        rc.layout = (ra_layout)layout;
        ra_rope *rope;
        CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
        for (int64_t pos = 0; pos < 4; pos += 3) {
            float x[D];
            ra_test_fill(x, D, 5);
            x[3] = NAN;
            CHECK(ra_rope_apply_f32(NULL, rope, x, 1, 1, 1, pos) == RA_OK, "apply");
            int partner = layout == RA_LAYOUT_INTERLEAVED ? 2 : 3 + D / 2;
            for (int e = 0; e < D; e++)
                CHECK(!isnan(x[e]) == (e != 3 && e != partner), "layout %d position %lld: "
                      "feature %d is %g", layout, (long long)pos, e, x[e]);
        }
        ra_rope_destroy(rope);
    }
}

/* ---- seq = 1 and head_dim = 2 -------------------------------------------- */

/* One token sees only itself: out = v (of its kv head) exactly on every path,
 * and the layer's y = wo (wv x) (sgemm in float32: 1e-5 of max|y|). */
static void test_seq_one(void)
{
    enum { H = 4, HKV = 2, D = 8, DIM = H * D };
    float q[H * D], k[HKV * D], v[HKV * D];
    float *out[N_PATHS];
    alloc_paths(out, H * D);
    ra_test_fill(q, H * D, 1);
    ra_test_fill(k, HKV * D, 2);
    ra_test_fill(v, HKV * D, 3);
    run_paths(out, q, k, v, 1, H, HKV, D);
    for (int p = 0; p < N_PATHS; p++)
        for (int h = 0; h < H; h++)
            CHECK(memcmp(out[p] + h * D, v + h / 2 * D, sizeof(float) * D) == 0,
                  "%s: head %d is not v", path_name[p], h);
    free_paths(out);

    static float wq[DIM * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * DIM];
    float x[DIM], y[DIM];
    ra_test_fill(wq, DIM * DIM, 4);
    ra_test_fill(wk, HKV * D * DIM, 5);
    ra_test_fill(wv, HKV * D * DIM, 6);
    ra_test_fill(wo, DIM * DIM, 7);
    ra_test_fill(x, DIM, 8);
    ra_rope_config lc_rope = ra_rope_config_default(0);
    ra_layer_config lc = {.struct_size = sizeof lc, .dim = DIM, .n_heads = H, .n_kv_heads = HKV,
                          .rope = &lc_rope};
    ra_layer_weights lw = {.struct_size = sizeof lw, .wq = wq, .wk = wk, .wv = wv, .wo = wo};
    ra_layer *layer;
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_OK, "layer");
    ra_attention_options opt = {.struct_size = sizeof opt, .path = RA_PATH_REFERENCE};
    double xv[HKV * D], want[DIM];
    for (int r = 0; r < HKV * D; r++) {
        xv[r] = 0;
        for (int c = 0; c < DIM; c++) xv[r] += (double)wv[r * DIM + c] * x[c];
    }
    for (int r = 0; r < DIM; r++) {
        want[r] = 0;
        for (int c = 0; c < DIM; c++) want[r] += (double)wo[r * DIM + c] * xv[c / (2 * D) * D + c % D];
    }
    for (int p = RA_PATH_REFERENCE; p <= RA_PATH_FLASH; p++) {
        opt.path = (ra_attention_path)p;
        CHECK(ra_layer_forward(NULL, layer, y, x, 1, 1, NULL, &opt) == RA_OK, "forward");
        double e = ra_test_rel_err(y, want, DIM);
        CHECK(e <= 1e-5, "path %d: layer at seq 1 is off by %.3g", p, e);
    }
    ra_layer_destroy(layer);
}

/* head_dim 2 is one pair rotating by m radians (theta_0 = 1): against
 * long double at positions up to 1e6 (angle errors ~1e6 x 2^-53 and one
 * float32 rounding of cos, sin and each product: 1e-6 of |x|), and
 * attention with D = 2 on every path against double (S x 2^-24 of max|v|,
 * plus float32 logits: 1e-5). */
static void test_head_dim_two(void)
{
    enum { S = 70, H = 2, HKV = 1, D = 2 };
    ra_rope_config rc = ra_rope_config_default(D);
    rc.table_size = 16;
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "head_dim 2");
    int64_t ids[S];
    float x[S * D], y[S * D];
    ra_test_fill(x, S * D, 1);
    for (int t = 0; t < S; t++) ids[t] = (int64_t)t * t * t % 1000003;
    ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, S, 1, D), ty = ra_tensor_4d(y, RA_F32, 1, S, 1, D);
    ra_positions p = {.struct_size = sizeof p, .ids = ids};
    CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, RA_FORWARD) == RA_OK, "apply");
    double worst = 0;
    for (int t = 0; t < S; t++) {
        long double c = cosl((long double)ids[t]), s = sinl((long double)ids[t]);
        worst = fmax(worst, fabsl(y[2 * t] - (x[2 * t] * c - x[2 * t + 1] * s)));
        worst = fmax(worst, fabsl(y[2 * t + 1] - (x[2 * t] * s + x[2 * t + 1] * c)));
    }
    CHECK(worst <= 1e-6, "head_dim 2 rotation off by %.3g", worst);
    ra_rope_destroy(rope);

    float q[S * H * D], k[S * HKV * D], v[S * HKV * D];
    double want[S * H * D];
    float *out[N_PATHS];
    alloc_paths(out, S * H * D);
    ra_test_fill(q, S * H * D, 2);
    ra_test_fill(k, S * HKV * D, 3);
    ra_test_fill(v, S * HKV * D, 4);
    attention_double(want, q, k, v, S, H, HKV, D);
    run_paths(out, q, k, v, S, H, HKV, D);
    for (int path = 0; path < N_PATHS; path++) {
        double e = error_vs(out[path], want, S * H * D, v, S * HKV * D);
        CHECK(e <= 1e-5, "%s at head_dim 2: error %.3g", path_name[path], e);
    }
    free_paths(out);
}

/* ---- positions ------------------------------------------------------------ */

/* Rotation at positions near 2^31 and up to RA_MAX_POSITION = 2^32 against
 * long double (theta = 500000, D = 128, every pair).  The angle m theta_i
 * is formed in double: theta_i's rounding and the product's each move it by
 * up to 2^32 x 2^-53 ~ 5e-7; cos, sin and the float32 rotation add ~2e-7 of
 * |x|: 2e-6 of max|x|.  One past the limit, by a start, a start per row or
 * an id, is RA_ERR_POSITION and writes nothing — also through the KV
 * cache's append and the layer. */
static void test_positions_near_limit(void)
{
    enum { S = 6, D = 128 };
    ra_rope_config rc = ra_rope_config_default(D);
    rc.theta = 500000.0;
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    const int64_t max = RA_MAX_POSITION, two31 = (int64_t)1 << 31;
    int64_t ids[S] = {two31 - 1, two31, two31 + 1, max - 2, max - 1, max};
    float x[S * D], y[S * D], before[S * D];
    ra_test_fill(x, S * D, 9);
    ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, S, 1, D), ty = ra_tensor_4d(y, RA_F32, 1, S, 1, D);
    ra_positions p = {.struct_size = sizeof p, .ids = ids};
    for (int dir = 0; dir < 2; dir++) {
        CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, (ra_direction)dir) == RA_OK, "ids");
        double worst = 0;
        for (int t = 0; t < S; t++)
            for (int i = 0; i < D / 2; i++) {
                long double f = 1.0L / powl(500000.0L, (long double)(2 * i) / D);
                long double a = (long double)ids[t] * f * (dir ? -1 : 1);
                long double c = cosl(a), s = sinl(a), x0 = x[t * D + 2 * i], x1 = x[t * D + 2 * i + 1];
                worst = fmax(worst, fabsl(y[t * D + 2 * i] - (x0 * c - x1 * s)));
                worst = fmax(worst, fabsl(y[t * D + 2 * i + 1] - (x0 * s + x1 * c)));
            }
        CHECK(worst <= 2e-6, "direction %d: off by %.3g near 2^31 .. 2^32", dir, worst);
    }
    /* a start whose last token lands on the limit: the same numbers */
    float z[3 * D];
    ra_tensor tz = ra_tensor_4d(z, RA_F32, 1, 3, 1, D), tx3 = ra_tensor_4d(x + 3 * D, RA_F32, 1, 3, 1, D);
    ra_positions last = {.struct_size = sizeof last, .start = max - 2};
    CHECK(ra_rope_apply(NULL, rope, &tz, &tx3, &last, RA_FORWARD) == RA_OK, "start at the limit");
    CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, RA_FORWARD) == RA_OK, "ids");
    CHECK(memcmp(z, y + 3 * D, sizeof z) == 0, "start and ids disagree at the limit");

    /* one past: refused, nothing written */
    memcpy(before, y, sizeof y);
    const int64_t past_starts[1] = {max - S + 2};
    int64_t past_ids[S];
    memcpy(past_ids, ids, sizeof ids);
    past_ids[2] = max + 1;
    ra_positions past[] = {{.struct_size = sizeof(ra_positions),
                            .start = max - S + 2}, {.struct_size = sizeof(ra_positions),
                            .starts = past_starts}, {.struct_size = sizeof(ra_positions),
                            .ids = past_ids},
                           {.struct_size = sizeof(ra_positions),
                            .start = INT64_MAX}, {.struct_size = sizeof(ra_positions),
                            .start = -1}};
    for (int c = 0; c < 5; c++)
        CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &past[c], RA_FORWARD) == RA_ERR_POSITION,
              "case %d not refused", c);
    CHECK(memcmp(before, y, sizeof y) == 0, "a refused call wrote");
    int64_t past_table[2] = {max, max + 1};
    float c2[2 * D / 2], s2[2 * D / 2];
    CHECK(ra_rope_table(rope, c2, s2, past_table, 2) == RA_ERR_POSITION, "table past the limit");
    CHECK(ra_precompute_freqs(c2, s2, 2, max + 2, 10000.0) == RA_ERR_POSITION, "freqs past the limit");

    /* the cache's append, at the limit and one past */
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, 2 * S, 1, D, RA_F16) == RA_OK, "cache");
    ra_tensor tv = ra_tensor_4d(x, RA_F32, 1, S, 1, D);
    memcpy(y, x, sizeof x);
    ra_positions at_limit = {.struct_size = sizeof at_limit,
                             .start = max - S + 1}, beyond = {.struct_size = sizeof beyond,
                             .start = max - S + 2};
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &ty, &tv, &beyond, NULL) == RA_ERR_POSITION,
          "append past the limit");
    CHECK(ra_kv_cache_length(cache, 0) == 0 && memcmp(y, x, sizeof x) == 0, "refused append wrote");
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &ty, &tv, &at_limit, NULL) == RA_OK,
          "append at the limit");
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);

    /* the layer */
    enum { H = 2, DIM = H * D };
    static float w[DIM * DIM], xs[S * DIM], ys[S * DIM];
    ra_test_fill(w, DIM * DIM, 3);
    ra_test_fill(xs, S * DIM, 4);
    ra_rope_config lc_rope = ra_rope_config_default(0);
    ra_layer_config lc = {.struct_size = sizeof lc, .dim = DIM, .n_heads = H, .rope = &lc_rope};
    ra_layer_weights lw = {.struct_size = sizeof lw, .wq = w, .wk = w, .wv = w, .wo = w};
    ra_layer *layer;
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_OK, "layer");
    CHECK(ra_layer_forward(NULL, layer, ys, xs, 1, S, &at_limit, NULL) == RA_OK, "layer at the limit");
    memcpy(before, ys, sizeof before);
    CHECK(ra_layer_forward(NULL, layer, ys, xs, 1, S, &beyond, NULL) == RA_ERR_POSITION,
          "layer past the limit");
    CHECK(memcmp(before, ys, sizeof before) == 0, "a refused layer call wrote");
    ra_layer_destroy(layer);
}

/* The flash path's causal mask for a query block past 2^24 tokens, where a
 * float no longer holds every index (2^24 + 3 rounds to 2^24 + 4).  Only
 * the last query block's task runs (the others are the same code at
 * smaller indices): its block_q queries against 2^24 + block_q keys, of
 * which all but the last block_q are zero (logit 0, value 0; their pages are never written, so
 * they cost address space, not memory).  Each row must weigh exactly the
 * keys up to its own: against double, 1e-4 relative (float32 sums of the
 * 2^24 unit weights round at 2^-24 each: ~1e-7 x a few, with room).  Under
 * a sanitizer (whose job is memory errors, not sums; the sweep of 2^24
 * keys takes minutes there) the rows see a window of 4 blocks instead:
 * the same tiles at the same indices, 3 blocks of zero keys. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
static void test_mask_past_2_24(void)
{
    enum { D = 2 };
    const int64_t BLOCK = ra_flash_layout_for(1, D).block_q, window = SANITIZED ? 4 * BLOCK : 0;
    const int64_t s = ((int64_t)1 << 24) + BLOCK, q0 = s - BLOCK;
    float *q = calloc((size_t)s * D, sizeof(float)), *k = calloc((size_t)s * D, sizeof(float));
    float *v = calloc((size_t)s * D, sizeof(float)), *o = calloc((size_t)s * D, sizeof(float));
    CHECK(q && k && v && o, "out of memory");
    if (!q || !k || !v || !o) return;
    for (int64_t i = 0; i < BLOCK; i++) {
        q[(q0 + i) * D] = 4.0f;                             /* logit 4 k_j[0] / sqrt(2) */
        k[(q0 + i) * D] = 4.0f + (float)i * 8 / (float)BLOCK; /* grows with the key: e^(~20) */
        v[(q0 + i) * D] = (float)(i + 1);
        v[(q0 + i) * D + 1] = (float)((i * 7) % 5);
    }
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, s, 1, D), tk = ra_tensor_4d(k, RA_F32, 1, s, 1, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, s, 1, D), to = ra_tensor_4d(o, RA_F32, 1, s, 1, D);
    ra_attention_options opts = ra_attention_options_init();
    opts.window = window;
    ra_attention_args args;
    CHECK(ra_attention_prepare(&args, &to, &tq, &tk, &tv, &opts) == RA_OK, "prepare");
    ra_flash_job job = {.args = &args, .layout = ra_flash_layout_for(1, D)};
    job.n_query_blocks = s / job.layout.block_q;
    job.scratch = aligned_alloc(64, sizeof(float) * (size_t)job.layout.per_thread);
    ra_kernels_get()->flash_task(&job, 0, 0); /* task 0: the last query block */
    double worst = 0;
    for (int64_t i = 0; i < BLOCK; i++) {
        /* the q0 zero keys (those in the window) weigh e^0 each, key q0
         * + j weighs e^(s_j) */
        double l = (double)(window ? window - 1 - i : q0), o0 = 0, o1 = 0;
        for (int64_t j = 0; j <= i; j++) {
            double w = exp(4.0 * k[(q0 + j) * D] / sqrt(2.0));
            l += w;
            o0 += w * v[(q0 + j) * D];
            o1 += w * v[(q0 + j) * D + 1];
        }
        worst = fmax(worst, fabs(o[(q0 + i) * D] - o0 / l) / (o0 / l));
        if (o1 > 0) worst = fmax(worst, fabs(o[(q0 + i) * D + 1] - o1 / l) / (o1 / l));
    }
    CHECK(worst <= 1e-4, "rows past 2^24 weigh the wrong keys: relative error %.3g", worst);
    free(job.scratch);
    free(q), free(k), free(v), free(o);
}

/* ---- f16 storage ---------------------------------------------------------- */

/* A rotation can grow a feature by up to sqrt(2) (the pair's norm is kept):
 * an f16 result beyond 65504 is stored as ±Inf, as PyTorch's .half() does,
 * and the call succeeds (documented in ropeattn.h).  bf16 holds it; float32
 * overflows the same way near FLT_MAX.  The KV cache's f16 storage too. */
static void test_f16_overflow(void)
{
    ra_rope_config rc = ra_rope_config_default(2);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    /* position 1, one pair, angle 1 rad: (a, b) -> (a cos 1 - b sin 1, a sin 1 + b cos 1) */
    const float pairs[3][2] = {{60000, 60000}, {-60000, -60000}, {3e38f, 3e38f}};
    for (int c = 0; c < 3; c++) {
        double a = pairs[c][0], b = pairs[c][1];
        double want0 = a * cos(1.0) - b * sin(1.0), want1 = a * sin(1.0) + b * cos(1.0);
        for (int dt = RA_F32; dt <= RA_BF16; dt++) {
            if (c == 2 && dt != RA_F32) continue;
            uint16_t h[2];
            float f[2] = {pairs[c][0], pairs[c][1]};
            void *data = dt == RA_F32 ? (void *)f : (void *)h;
            if (dt != RA_F32) ra_convert(h, (ra_dtype)dt, f, RA_F32, 2);
            ra_tensor t = ra_tensor_4d(data, (ra_dtype)dt, 1, 1, 1, 2);
            ra_positions p = {.struct_size = sizeof p, .start = 1};
            CHECK(ra_rope_apply(NULL, rope, &t, &t, &p, RA_FORWARD) == RA_OK, "apply");
            if (dt != RA_F32) ra_convert(f, RA_F32, h, (ra_dtype)dt, 2);
            double limit = dt == RA_F16 ? 65504.0 : 3.4028234663852886e38;
            int overflows = fabs(want1) > limit * (1 + 1e-3); /* clear of rounding */
            CHECK(fabs(f[0] - want0) <= 1e-2 * fabs(want0), "case %d dtype %d: %g for %g", c, dt,
                  f[0], want0);
            if (overflows)
                CHECK(isinf(f[1]) && (f[1] > 0) == (want1 > 0), "case %d dtype %d: %g, not %sInf",
                      c, dt, f[1], want1 > 0 ? "+" : "-");
            else
                CHECK(fabs(f[1] - want1) <= 1e-2 * fabs(want1), "case %d dtype %d: %g for %g", c,
                      dt, f[1], want1);
            CHECK(c == 2 || overflows == (dt == RA_F16), "case %d dtype %d: overflow expected "
                  "only in f16", c, dt);
        }
    }
    /* f32 keys beyond 65504 land in an f16 cache as Inf */
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, 1, 1, 2, RA_F16) == RA_OK, "cache");
    float k[2] = {70000.0f, -1.0f}, v[2] = {-1e6f, 65504.0f};
    ra_tensor tk = ra_tensor_4d(k, RA_F32, 1, 1, 1, 2), tv = ra_tensor_4d(v, RA_F32, 1, 1, 1, 2);
    ra_positions p0 = {.struct_size = sizeof p0, .start = 0};
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tv, &p0, NULL) == RA_OK, "append");
    ra_tensor ck, cv;
    ra_kv_cache_views(cache, &ck, &cv);
    const uint16_t *hk = ck.data, *hv = cv.data;
    CHECK(hk[0] == 0x7c00 && hv[0] == 0xfc00 && hv[1] == 0x7bff && hk[1] == 0xbc00,
          "f16 cache holds %04x %04x %04x %04x", hk[0], hk[1], hv[0], hv[1]);
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);
}

/* ---- RA_FORCE_ISA ---------------------------------------------------------- */

/* Runs this program again as "<self> --simd-check" with RA_FORCE_ISA set to
 * value (the kernels are chosen once per process); returns what that run's
 * main returns: 0 accepted, 3 refused, and 4 added when the kernels are not
 * the base ones. */
static int simd_check_in_child(const char *value)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("RA_FORCE_ISA", value, 1);
        execl("/proc/self/exe", "test_numerics", "--simd-check", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

static void test_force_isa(void)
{
    /* RA_FORCE_ISA caps the paths the suite runs: a value the library
     * does not know must stop it, not pass for a test of the path meant. */
    CHECK(ra_simd_check_environment() == RA_OK, "RA_FORCE_ISA='%s' is not a known value",
          getenv("RA_FORCE_ISA"));
    CHECK(simd_check_in_child("base") == 0, "base");
    CHECK((simd_check_in_child("amx") & 3) == 0, "amx");
    CHECK((simd_check_in_child("avx512bf16") & 3) == 0, "avx512bf16");
    CHECK((simd_check_in_child("avx512") & 3) == 0, "avx512");
    CHECK((simd_check_in_child("avx2") & 3) == 0, "avx2");
    CHECK((simd_check_in_child("") & 3) == 0, "empty means unset");
    static const char *const unknown[] = {"AVX2", "sse2", "avx", "base ", "neon?"};
    for (int i = 0; i < 5; i++) /* refused, and the kernels capped at base */
        CHECK(simd_check_in_child(unknown[i]) == 3, "'%s' gave %d", unknown[i],
              simd_check_in_child(unknown[i]));
    /* The switch the suite runs its paths with (cpu/dispatch.h): each path
     * up to the cap runs its own kernels, and none past it. */
    for (int isa = RA_ISA_BASE; isa <= ra_cpu_isa_max(); isa++) {
        const char *want = isa == RA_ISA_BASE ? ra_kernels_base.name : ra_cpu_isa_name(isa);
        CHECK(ra_cpu_force_isa(isa) == 0 && strcmp(ra_simd_name(), want) == 0,
              "%s runs %s", ra_cpu_isa_name(isa), ra_simd_name());
    }
    const char *last = ra_simd_name();
    CHECK(ra_cpu_force_isa(ra_cpu_isa_max() + 1) == -1 && ra_cpu_force_isa(-1) == -1 &&
              strcmp(ra_simd_name(), last) == 0, "a path out of range was taken");
}

/* Every case but test_force_isa reaches the SIMD kernels: each runs on
 * every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_extreme_logits);
    RUN(test_minus_inf_logits);
    RUN(test_nan_inf);
    RUN(test_nan_rope);
    RUN(test_seq_one);
    RUN(test_head_dim_two);
    RUN(test_positions_near_limit);
    RUN(test_mask_past_2_24);
    RUN(test_f16_overflow);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--simd-check") == 0)
        return (ra_simd_check_environment() == RA_OK ? 0 : 3) +
               (strcmp(ra_simd_name(), ra_kernels_base.name) != 0 ? 4 : 0);
    RUN(test_force_isa);
    ra_test_each_isa(simd_cases);
    return ra_test_summary("numerics");
}
