/*
 * test_attention_bf16.c — attention with q, k and v in 16-bit floats: the
 * flash path against the reference (sums in double) and against the float32
 * flash path on the same values widened, on every SIMD path, on awkward
 * shapes and with every mask; identical bits for 1, 2 and 3 threads; Inf
 * and NaN reaching the same outputs as on the float32 path.
 *
 * The bound (include/ropeattn.h, ra_attention): where the bf16 units run
 * (avx512bf16: vdpbf16ps; amx: AMX tiles) P is rounded to bf16 before P V,
 * a relative 2^-8 per probability, so each output is within 2^-8 max|v|
 * (over 1 - p with dropout p) of the exact one, plus the float32 sums'
 * ~1e-6 max|v|; the scores' products are exact, summed in float32.  Everywhere else 16-bit
 * inputs are widened (exact) and the result is the float32 path's, bit for
 * bit.
 *
 *   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "harness.h"
#include "ropeattn.h"

/* One case: shapes, then the options.  pad: 1 left padding (row b has 3 b +
 * 1 leading pads); docs: packed documents (0: one). */
typedef struct bf16_case {
    int64_t b, s, h, hkv, d;
    int64_t window;
    double softcap;
    int sinks, pad, docs;
    float dropout;
} bf16_case;

static const bf16_case cases[] = {
    /* b, s, h, hkv, d, window, softcap, sinks, pad, docs, dropout */
    {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},          /* one query, one feature */
    {1, 7, 2, 1, 3, 0, 0, 0, 0, 0, 0},          /* odd D below a pair's worth of vector */
    {2, 65, 4, 2, 16, 0, 0, 0, 0, 0, 0},        /* a key tile and one key */
    {1, 130, 8, 2, 33, 0, 0, 0, 0, 0, 0},       /* odd D past 32, tails of keys and rows */
    {1, 200, 4, 4, 64, 0, 0, 0, 0, 0, 0},       /* MHA */
    {1, 300, 8, 1, 128, 0, 0, 0, 0, 0, 0},      /* GQA 8, the LLaMA head */
    {1, 150, 6, 2, 40, 37, 0, 0, 0, 0, 0},      /* window, rep 3 */
    {2, 140, 4, 2, 24, 0, 30.0, 1, 0, 0, 0},    /* soft-cap and sinks */
    {2, 170, 4, 1, 32, 0, 0, 0, 1, 0, 0},       /* left padding */
    {1, 160, 4, 2, 48, 0, 0, 0, 0, 3, 0},       /* packed documents */
    {1, 129, 4, 2, 17, 20, 20.0, 1, 1, 0, 0.2f}, /* everything, dropout too */
};

enum { N_CASES = sizeof cases / sizeof cases[0] };

static int64_t n_q(const bf16_case *c) { return c->b * c->s * c->h * c->d; }
static int64_t n_kv(const bf16_case *c) { return c->b * c->s * c->hkv * c->d; }

/* One case's inputs: 16-bit q, k, v of dtype and the same values widened
 * (q32, k32, v32), the options and what they point at. */
typedef struct inputs {
    ra_dtype dtype;
    uint16_t *q, *k, *v;
    float *q32, *k32, *v32, sinks[16];
    uint8_t *pad;
    int64_t cu[8];
    ra_attention_options o;
} inputs;

/* x[0, n) uniform in [-scale, scale), rounded to dtype in x16 and widened
 * back into x. */
static void fill16(uint16_t *x16, float *x, int64_t n, ra_dtype dtype, float scale, uint64_t seed)
{
    ra_test_fill(x, (size_t)n, seed);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
    ra_convert(x16, dtype, x, RA_F32, n);
    ra_convert(x, RA_F32, x16, dtype, n);
}

static void inputs_make(inputs *in, const bf16_case *c, ra_dtype dtype, uint64_t seed)
{
    in->dtype = dtype;
    in->q = malloc(2 * n_q(c));
    in->k = malloc(2 * n_kv(c));
    in->v = malloc(2 * n_kv(c));
    in->q32 = malloc(4 * n_q(c));
    in->k32 = malloc(4 * n_kv(c));
    in->v32 = malloc(4 * n_kv(c));
    fill16(in->q, in->q32, n_q(c), dtype, 3.0f, seed); /* peakier softmax */
    fill16(in->k, in->k32, n_kv(c), dtype, 1.0f, seed + 1);
    fill16(in->v, in->v32, n_kv(c), dtype, 2.0f, seed + 2);
    in->o = ra_attention_options_init();
    in->o.window = c->window;
    in->o.softcap = (float)c->softcap;
    in->o.dropout = c->dropout;
    in->o.seed = seed;
    for (int64_t h = 0; h < c->h; h++) in->sinks[h] = (float)h * 0.7f - 1.0f;
    if (c->sinks) in->o.sinks = in->sinks;
    in->pad = NULL;
    if (c->pad) {
        in->pad = malloc((size_t)(c->b * c->s));
        for (int64_t b = 0; b < c->b; b++)
            for (int64_t i = 0; i < c->s; i++) in->pad[b * c->s + i] = i >= 3 * b + 1;
        in->o.padding_mask = in->pad;
    }
    if (c->docs) {
        for (int d = 0; d <= c->docs; d++) in->cu[d] = c->s * d * d / (c->docs * c->docs);
        in->o.cu_seqlens = in->cu;
        in->o.n_documents = c->docs;
    }
}

static void inputs_free(inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->q32);
    free(in->k32);
    free(in->v32);
    free(in->pad);
}

/* ra_attention_forward_lse on the 16-bit inputs (wide 0) or their widened
 * copies (wide 1), on path with n_threads threads (0: no context). */
static ra_status run(float *out, float *lse, const bf16_case *c, const inputs *in, int wide,
                     ra_attention_path path, int n_threads)
{
    ra_dtype dt = wide ? RA_F32 : in->dtype;
    ra_tensor q = ra_tensor_4d(wide ? (void *)in->q32 : in->q, dt, c->b, c->s, c->h, c->d);
    ra_tensor k = ra_tensor_4d(wide ? (void *)in->k32 : in->k, dt, c->b, c->s, c->hkv, c->d);
    ra_tensor v = ra_tensor_4d(wide ? (void *)in->v32 : in->v, dt, c->b, c->s, c->hkv, c->d);
    ra_tensor o = ra_tensor_4d(out, RA_F32, c->b, c->s, c->h, c->d);
    ra_attention_options opts = in->o;
    opts.path = path;
    ra_context *ctx = NULL;
    if (n_threads && ra_context_create(&ctx, n_threads) != RA_OK) return RA_ERR_NOMEM;
    ra_status st = ra_attention_forward_lse(ctx, &o, lse, &q, &k, &v, &opts);
    ra_context_destroy(ctx);
    return st;
}

static float max_abs(const float *x, int64_t n)
{
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* Worst |a - b| over n floats, and where; Inf if either is not finite. */
static double worst_diff(const float *a, const float *b, int64_t n, int64_t *at)
{
    double w = 0;
    *at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = isfinite(a[i]) && isfinite(b[i]) ? fabs((double)a[i] - b[i]) : INFINITY;
        if (d > w) w = d, *at = i;
    }
    return w;
}

/* Whether the current path runs bf16 inputs on the bf16 units. */
static int bf16_units(ra_dtype dtype)
{
    return dtype == RA_BF16 && ra_test_isa >= RA_ISA_AVX512BF16;
}

static double worst_seen; /* the largest error / max|v| any case gave */
static const char *amx_state = "absent"; /* on the amx path: whether its tiles ran */

/* Every case, in bf16 and f16: flash against the reference and against the
 * float32 flash path on the widened values (same bits where the inputs are
 * widened, else the bound), lse against the reference's. */
static void test_against_reference(void)
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_CASES; i++) {
            const bf16_case *c = &cases[i];
            const ra_dtype dtype = t ? RA_F16 : RA_BF16;
            inputs in;
            inputs_make(&in, c, dtype, 100 + (uint64_t)i);
            int64_t n = n_q(c), nl = c->b * c->h * c->s;
            float *o = malloc(4 * n), *o32 = malloc(4 * n), *ref = malloc(4 * n);
            float *lse = malloc(4 * nl), *lse32 = malloc(4 * nl), *lse_ref = malloc(4 * nl);
            CHECK(run(o, lse, c, &in, 0, RA_PATH_FLASH, 0) == RA_OK, "case %d: %s", i,
                  ra_last_error());
            CHECK(run(o32, lse32, c, &in, 1, RA_PATH_FLASH, 0) == RA_OK, "case %d f32", i);
            CHECK(run(ref, lse_ref, c, &in, 0, RA_PATH_REFERENCE, 0) == RA_OK, "case %d ref", i);
            const double vmax = max_abs(in.v32, n_kv(c));
            int64_t at;
            if (!bf16_units(dtype)) { /* widened: the float32 path itself */
                CHECK(memcmp(o, o32, 4 * (size_t)n) == 0 && memcmp(lse, lse32, 4 * (size_t)nl) == 0,
                      "case %d %s: not the float32 path's bits", i, t ? "f16" : "bf16");
            } else {
                /* 2^-8 max|v| from P's rounding (of the kept probabilities
                 * scaled by 1 / (1 - p) with dropout), 2e-5 max|v| for the
                 * float32 sums of both paths */
                const double tol = (0x1p-8 + 2e-5) * vmax / (1.0 - c->dropout);
                double e = worst_diff(o, o32, n, &at);
                worst_seen = fmax(worst_seen, e / vmax);
                CHECK(e <= tol, "case %d: bf16 units vs float32 path %.3g at %lld (%g vs %g), "
                      "bound %.3g", i, e, (long long)at, o[at], o32[at], tol);
                /* lse: the scores alone, float32 sums of exact products of
                 * inputs |q| < 3, |k| < 1 (the float32 path's own error) */
                e = worst_diff(lse, lse32, nl, &at);
                CHECK(e <= 1e-4 || (isinf(lse[at]) && lse[at] == lse32[at]),
                      "case %d: lse %g vs %g", i, lse[at], lse32[at]);
            }
            /* against the reference (double sums): the bound above, plus the
             * float32 path's own error against it (1e-4 relative, the
             * tolerance of test_attention.c's flash checks) */
            double e = worst_diff(o, ref, n, &at);
            const double tol =
                ((bf16_units(dtype) ? 0x1p-8 + 2e-5 : 0) / (1.0 - c->dropout) + 1e-4) * vmax;
            CHECK(e <= tol, "case %d %s: vs reference %.3g at %lld (%g vs %g), bound %.3g", i,
                  t ? "f16" : "bf16", e, (long long)at, o[at], ref[at], tol);
            free(o);
            free(o32);
            free(ref);
            free(lse);
            free(lse32);
            free(lse_ref);
            inputs_free(&in);
        }
}

/* The same bits for 1, 2 and 3 threads (and no context), every case. */
static void test_threads(void)
{
    for (int i = 0; i < N_CASES; i++) {
        const bf16_case *c = &cases[i];
        inputs in;
        inputs_make(&in, c, RA_BF16, 200 + (uint64_t)i);
        int64_t n = n_q(c), nl = c->b * c->h * c->s;
        float *o[4], *lse[4];
        for (int t = 0; t < 4; t++) {
            o[t] = malloc(4 * n);
            lse[t] = malloc(4 * nl);
            CHECK(run(o[t], lse[t], c, &in, 0, RA_PATH_FLASH, t) == RA_OK, "case %d", i);
        }
        for (int t = 1; t < 4; t++)
            CHECK(memcmp(o[0], o[t], 4 * (size_t)n) == 0 &&
                      memcmp(lse[0], lse[t], 4 * (size_t)nl) == 0,
                  "case %d: %d threads differ from the caller's", i, t);
        for (int t = 0; t < 4; t++) {
            free(o[t]);
            free(lse[t]);
        }
        inputs_free(&in);
    }
}

/* An Inf or a NaN in v (or k) reaches exactly the outputs that read it, as
 * on the float32 path: the same outputs are finite on both paths. */
static void test_nonfinite(void)
{
    static const float bad[] = {INFINITY, -INFINITY, NAN};
    const bf16_case c = {1, 150, 4, 2, 32, 40, 0, 0, 0, 0, 0}; /* window: masked tiles */
    for (int which = 0; which < 2; which++)
        for (int i = 0; i < 3; i++) {
            inputs in;
            inputs_make(&in, &c, RA_BF16, 300 + (uint64_t)i);
            int64_t key = 70 + 13 * i, at = (key * c.hkv + 1) * c.d + 5; /* kv head 1 */
            float *x32 = which ? in.k32 : in.v32;
            uint16_t *x = which ? in.k : in.v;
            x32[at] = bad[i];
            ra_convert(&x[at], RA_BF16, &x32[at], RA_F32, 1);
            int64_t n = n_q(&c), nl = c.b * c.h * c.s;
            float *o = malloc(4 * n), *o32 = malloc(4 * n), *lse = malloc(4 * nl);
            CHECK(run(o, lse, &c, &in, 0, RA_PATH_FLASH, 0) == RA_OK, "run");
            CHECK(run(o32, lse, &c, &in, 1, RA_PATH_FLASH, 0) == RA_OK, "run f32");
            int64_t differ = 0, nonfinite = 0;
            for (int64_t j = 0; j < n; j++) {
                differ += !isfinite(o[j]) != !isfinite(o32[j]);
                nonfinite += !isfinite(o[j]);
            }
            CHECK(differ == 0 && nonfinite > 0 && nonfinite < n,
                  "%s[%lld] = %g: %lld outputs finite on one path only (%lld not finite)",
                  which ? "k" : "v", (long long)key, bad[i], (long long)differ,
                  (long long)nonfinite);
            free(o);
            free(o32);
            free(lse);
            inputs_free(&in);
        }
}

static void simd_cases(void)
{
    if (ra_test_isa == RA_ISA_AMX) {
        amx_state = ra_cpu_amx_enable() ? "used" : "refused";
        /* a CPU with AMX whose tiles never ran would test only vdpbf16ps
         * here: a failure, unless the OS is known to refuse them */
        CHECK(ra_cpu_amx_enable() || getenv("RA_TEST_NO_AMX"),
              "the CPU has AMX and the OS refused its tiles (set RA_TEST_NO_AMX=1 where it "
              "must)");
    }
    RUN(test_against_reference);
    RUN(test_threads);
    RUN(test_nonfinite);
}

/* q's dtype: f32, f16 and bf16 are taken (above), others refused, and out
 * stays float32. */
static void test_checks(void)
{
    float x[8] = {0}, y[8] = {0};
    ra_tensor o = ra_tensor_4d(x, RA_F32, 1, 1, 1, 2), q = ra_tensor_4d(y, RA_BF16, 1, 1, 1, 2);
    q.dtype = RA_I8;
    CHECK(ra_attention(NULL, &o, &q, &o, &o, NULL) == RA_ERR_DTYPE, "int8 q");
    q.dtype = RA_BF16;
    o.dtype = RA_BF16;
    CHECK(ra_attention(NULL, &o, &q, &q, &q, NULL) == RA_ERR_DTYPE, "bf16 out");
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    RUN(test_checks);
    printf("attention_bfloat: worst error of the bf16 units against the float32 path: %.3g "
           "max|v| (bound 2^-8 = %.3g); AMX tiles %s\n", worst_seen, 0x1p-8, amx_state);
    return ra_test_summary("attention_bfloat"); /* [a-z_]: run.sh reads it */
}
