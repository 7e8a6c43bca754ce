/*
 * test_attention_backward.c — the attention core's backward
 * (ra_attention_backward) and the forward that keeps the log-sum-exp
 * (ra_attention_forward_lse): both paths against central finite differences
 * of a double-precision forward, the flash path against the reference on
 * many shapes (strided and fused views, f16/bf16 keys and values), dropout
 * (the forward's masks, regenerated), p = 0, lse against a direct
 * computation, identical bits for any thread count, overwrite semantics and
 * argument checks.
 *
 *   q, out, dout, dq: [B, S, H, D]   k, v, dk, dv: [B, S, Hkv, D]   lse: [B, H, S]
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/dropout.h"
#include "harness.h"
#include "ropeattn.h"

typedef struct shape {
    int64_t b, s, h, hkv, d;
} shape;

static int64_t n_q(const shape *c) { return c->b * c->s * c->h * c->d; }
static int64_t n_kv(const shape *c) { return c->b * c->s * c->hkv * c->d; }

/* Inputs and both paths' gradients for one shape, contiguous. */
typedef struct problem {
    shape c;
    float *q, *k, *v, *dout, *out, *lse;
    float *dq, *dk, *dv; /* the path under test */
} problem;

static void problem_make(problem *p, const shape *c, uint64_t seed, float q_gain)
{
    p->c = *c;
    p->q = malloc(4 * n_q(c));
    p->k = malloc(4 * n_kv(c));
    p->v = malloc(4 * n_kv(c));
    p->dout = malloc(4 * n_q(c));
    p->out = malloc(4 * n_q(c));
    p->lse = malloc(4 * c->b * c->h * c->s);
    p->dq = malloc(4 * n_q(c));
    p->dk = malloc(4 * n_kv(c));
    p->dv = malloc(4 * n_kv(c));
    ra_test_fill(p->q, n_q(c), seed);
    ra_test_fill(p->k, n_kv(c), seed + 1);
    ra_test_fill(p->v, n_kv(c), seed + 2);
    ra_test_fill(p->dout, n_q(c), seed + 3);
    for (int64_t i = 0; i < n_q(c); i++) p->q[i] *= q_gain; /* peakier softmax */
}

static void problem_free(problem *p)
{
    free(p->q); free(p->k); free(p->v); free(p->dout); free(p->out); free(p->lse);
    free(p->dq); free(p->dk); free(p->dv);
}

/* Forward (with lse) then backward on one path, contiguous views. */
static ra_status run_paths(problem *p, ra_context *ctx, ra_attention_path path,
                           const ra_attention_options *drop)
{
    const shape *c = &p->c;
    ra_tensor q = ra_tensor_4d(p->q, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor k = ra_tensor_4d(p->k, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor v = ra_tensor_4d(p->v, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor o = ra_tensor_4d(p->out, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor dout = ra_tensor_4d(p->dout, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor dq = ra_tensor_4d(p->dq, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor dk = ra_tensor_4d(p->dk, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor dv = ra_tensor_4d(p->dv, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_status st = ra_attention_forward_lse(ctx, &o, p->lse, &q, &k, &v, DROP_OPTS(path, drop));
    if (st != RA_OK) return st;
    return ra_attention_backward(ctx, &dq, &dk, &dv, &dout, &q, &k, &v, &o, p->lse,
                                 DROP_OPTS(path, drop));
}

/* ---- a double-precision forward, for finite differences ------------------ */

/* L = sum(out * dout), out = attention(q, k, v) in double with the library's
 * dropout masks (dropout.h: the same Philox indices).  Contiguous inputs. */
static double loss_double(const shape *c, const double *q, const double *k, const double *v,
                          const float *dout, const ra_attention_options *drop)
{
    const int64_t s = c->s, d = c->d, rep = c->h / c->hkv;
    double *p = malloc(8 * s), loss = 0;
    float *mult = malloc(4 * s);
    ra_dropout_mask mask = ra_dropout_mask_make(drop ? drop->dropout : 0.0f, drop ? drop->seed : 0,
                                                RA_STREAM_ATTENTION);
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->h; h++)
            for (int64_t i = 0; i < s; i++) {
                const double *qi = q + ((b * s + i) * c->h + h) * d;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *kj = k + ((b * s + j) * c->hkv + h / rep) * d;
                    double dot = 0;
                    for (int64_t e = 0; e < d; e++) dot += qi[e] * kj[e];
                    p[j] = dot / sqrt((double)d);
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                for (int64_t j = 0; j < s; j++) mult[j] = 1.0f;
                if (drop && drop->dropout > 0)
                    ra_dropout_row(&mask, (uint64_t)(((b * c->h + h) * s + i) * s), s, mult);
                const float *doi = dout + ((b * s + i) * c->h + h) * d;
                for (int64_t e = 0; e < d; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= i; j++)
                        acc += p[j] / sum * mult[j] * v[((b * s + j) * c->hkv + h / rep) * d + e];
                    loss += acc * doi[e];
                }
            }
    free(p);
    free(mult);
    return loss;
}

/* Central differences of L w.r.t. every element of x (step 1e-5 on inputs
 * of size ~1: truncation ~1e-10, rounding ~1e-11). */
static void numeric_grad(double *grad, double *x, int64_t n, const shape *c, const double *q,
                         const double *k, const double *v, const float *dout,
                         const ra_attention_options *drop)
{
    const double step = 1e-5;
    for (int64_t i = 0; i < n; i++) {
        double saved = x[i];
        x[i] = saved + step;
        double up = loss_double(c, q, k, v, dout, drop);
        x[i] = saved - step;
        double down = loss_double(c, q, k, v, dout, drop);
        x[i] = saved;
        grad[i] = (up - down) / (2 * step);
    }
}

static double *widen(const float *x, int64_t n)
{
    double *y = malloc(8 * n);
    for (int64_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

/* Both paths against finite differences of the double forward, with and
 * without dropout.  Tolerance 1e-5 of max|grad| per tensor, observed
 * <= 1e-6: the library computes in float32 (the reference's sums in double,
 * its products and the softmax backward in float32; flash's sums in
 * float32), ~1e-7 relative per operation, and the differences are exact to
 * ~1e-9; the margin covers cancellation in dS = P * (dP - Delta). */
static void test_finite_differences(void)
{
    const shape shapes[] = {{1, 1, 1, 1, 2}, {1, 3, 2, 1, 4}, {2, 5, 4, 2, 6},
                            {1, 8, 4, 1, 8}, {1, 6, 2, 2, 5}};
    const ra_attention_options drop = DROPOUT(0.3f, 77);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int with_drop = 0; with_drop < 2; with_drop++) {
            const shape *c = &shapes[t];
            const ra_attention_options *dp = with_drop ? &drop : NULL;
            problem p;
            problem_make(&p, c, 40 + t, 2.0f);
            double *q = widen(p.q, n_q(c)), *k = widen(p.k, n_kv(c)), *v = widen(p.v, n_kv(c));
            double *gq = malloc(8 * n_q(c)), *gk = malloc(8 * n_kv(c)), *gv = malloc(8 * n_kv(c));
            numeric_grad(gq, q, n_q(c), c, q, k, v, p.dout, dp);
            numeric_grad(gk, k, n_kv(c), c, q, k, v, p.dout, dp);
            numeric_grad(gv, v, n_kv(c), c, q, k, v, p.dout, dp);
            for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
                CHECK(run_paths(&p, ctx, (ra_attention_path)path, dp) == RA_OK, "run");
                double eq = ra_test_rel_err(p.dq, gq, n_q(c));
                double ek = ra_test_rel_err(p.dk, gk, n_kv(c));
                double ev = ra_test_rel_err(p.dv, gv, n_kv(c));
                CHECK(eq <= 1e-5 && ek <= 1e-5 && ev <= 1e-5,
                      "shape %zu path %d dropout %d: dq %.3g dk %.3g dv %.3g", t, path, with_drop,
                      eq, ek, ev);
            }
            free(q); free(k); free(v); free(gq); free(gk); free(gv);
            problem_free(&p);
        }
    ra_context_destroy(ctx);
}

/* ---- flash against the reference ----------------------------------------- */

/* Tolerance flash vs reference: 1e-5 of max|grad| per tensor, observed
 * <= 1e-6 on every SIMD path.  Flash sums in float32 (over D, 64-key tiles
 * and up to S queries) in another order than the reference's double sums
 * and recomputes P from the forward's float32 lse; peaky softmaxes (q
 * scaled by 3) make dS = P * (dP - Delta) lose a few bits to cancellation. */
#define FLASH_TOL 1e-5

static void check_paths_agree(const char *what, size_t t, const float *dq_ref, const float *dk_ref,
                              const float *dv_ref, const float *dq, const float *dk,
                              const float *dv, const shape *c)
{
    double eq = ra_test_max_rel_diff(dq, dq_ref, n_q(c));
    double ek = ra_test_max_rel_diff(dk, dk_ref, n_kv(c));
    double ev = ra_test_max_rel_diff(dv, dv_ref, n_kv(c));
    CHECK(eq <= FLASH_TOL && ek <= FLASH_TOL && ev <= FLASH_TOL,
          "%s %zu (B%lld S%lld H%lld Hkv%lld D%lld): dq %.3g dk %.3g dv %.3g", what, t,
          (long long)c->b, (long long)c->s, (long long)c->h, (long long)c->hkv, (long long)c->d,
          eq, ek, ev);
}

/* Views of q, k, v inside one fused [B, S, H + 2 Hkv, D] buffer, as a QKV
 * projection writes them (and dq, dk, dv inside its gradient). */
static void fused_views(float *qkv, const shape *c, ra_tensor *q, ra_tensor *k, ra_tensor *v)
{
    ra_tensor base = ra_tensor_4d(qkv, RA_F32, c->b, c->s, c->h + 2 * c->hkv, c->d);
    *q = *k = *v = base;
    q->shape[2] = c->h;
    k->shape[2] = v->shape[2] = c->hkv;
    k->data = qkv + c->h * c->d;
    v->data = qkv + (c->h + c->hkv) * c->d;
}

static void test_flash_matches_reference(void)
{
    const shape shapes[] = {/* B, S, H, Hkv, D */
                            {1, 1, 1, 1, 2},     {1, 2, 2, 1, 16},   {2, 63, 4, 1, 16},
                            {1, 64, 8, 2, 64},   {1, 65, 8, 8, 128}, {3, 130, 4, 2, 16},
                            {1, 257, 8, 1, 64},  {2, 65, 2, 1, 128}, {1, 130, 8, 4, 2},
                            {1, 257, 2, 2, 128}, {3, 17, 6, 3, 10},  {1, 70, 4, 4, 5},
                            {2, 64, 8, 1, 1},    {1, 129, 4, 2, 40}, {1, 100, 16, 2, 24}};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const shape *c = &shapes[t];
        problem p;
        problem_make(&p, c, 10 + t, 3.0f);
        float *dq = malloc(4 * n_q(c)), *dk = malloc(4 * n_kv(c)), *dv = malloc(4 * n_kv(c));
        CHECK(run_paths(&p, NULL, RA_PATH_REFERENCE, NULL) == RA_OK, "reference");
        memcpy(dq, p.dq, 4 * n_q(c));
        memcpy(dk, p.dk, 4 * n_kv(c));
        memcpy(dv, p.dv, 4 * n_kv(c));
        CHECK(run_paths(&p, ctx, RA_PATH_FLASH, NULL) == RA_OK, "flash");
        check_paths_agree("shape", t, dq, dk, dv, p.dq, p.dk, p.dv, c);

        /* The same through fused QKV views, gradients into a fused dQKV. */
        int64_t n_fused = c->b * c->s * (c->h + 2 * c->hkv) * c->d;
        float *qkv = malloc(4 * n_fused), *dqkv = malloc(4 * n_fused);
        ra_tensor q, k, v, gq, gk, gv;
        fused_views(qkv, c, &q, &k, &v);
        fused_views(dqkv, c, &gq, &gk, &gv);
        for (int64_t row = 0; row < c->b * c->s; row++) {
            int64_t w = (c->h + 2 * c->hkv) * c->d;
            memcpy(qkv + row * w, p.q + row * c->h * c->d, 4 * c->h * c->d);
            memcpy(qkv + row * w + c->h * c->d, p.k + row * c->hkv * c->d, 4 * c->hkv * c->d);
            memcpy(qkv + row * w + (c->h + c->hkv) * c->d, p.v + row * c->hkv * c->d,
                   4 * c->hkv * c->d);
        }
        ra_tensor o = ra_tensor_4d(p.out, RA_F32, c->b, c->s, c->h, c->d);
        ra_tensor dout = ra_tensor_4d(p.dout, RA_F32, c->b, c->s, c->h, c->d);
        CHECK(ra_attention_backward(ctx, &gq, &gk, &gv, &dout, &q, &k, &v, &o,
                                    p.lse, PATH_OPTS(RA_PATH_FLASH)) == RA_OK, "fused");
        for (int64_t row = 0; row < c->b * c->s; row++) {
            int64_t w = (c->h + 2 * c->hkv) * c->d;
            memcpy(p.dq + row * c->h * c->d, dqkv + row * w, 4 * c->h * c->d);
            memcpy(p.dk + row * c->hkv * c->d, dqkv + row * w + c->h * c->d, 4 * c->hkv * c->d);
            memcpy(p.dv + row * c->hkv * c->d, dqkv + row * w + (c->h + c->hkv) * c->d,
                   4 * c->hkv * c->d);
        }
        check_paths_agree("fused", t, dq, dk, dv, p.dq, p.dk, p.dv, c);
        free(qkv); free(dqkv); free(dq); free(dk); free(dv);
        problem_free(&p);
    }
    ra_context_destroy(ctx);
}

/* 16-bit keys and values, and q too: the same gradients as float32 inputs
 * holding the widened numbers, bit for bit on both paths (both widen
 * exactly and then run the float32 code), but for q, k and v all bf16 on
 * the flash path with bf16 units (avx512bf16, amx), which runs its GEMMs
 * on them: test_attention_bf16_backward.c checks that one. */
static void test_half_inputs(void)
{
    const shape c = {2, 70, 8, 2, 40};
    problem p;
    problem_make(&p, &c, 31, 2.0f);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    uint16_t *k16 = malloc(2 * n_kv(&c)), *v16 = malloc(2 * n_kv(&c)), *q16 = malloc(2 * n_q(&c));
    float *want = malloc(4 * (n_q(&c) + 2 * n_kv(&c)));
    ra_tensor q = ra_tensor_4d(p.q, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor o = ra_tensor_4d(p.out, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor dout = ra_tensor_4d(p.dout, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor dq = ra_tensor_4d(p.dq, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor dk = ra_tensor_4d(p.dk, RA_F32, c.b, c.s, c.hkv, c.d);
    ra_tensor dv = ra_tensor_4d(p.dv, RA_F32, c.b, c.s, c.hkv, c.d);
    for (int dt = RA_F16; dt <= RA_BF16; dt++)
        for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++)
            for (int half_q = 0; half_q <= 1; half_q++) {
            ra_convert(q16, (ra_dtype)dt, p.q, RA_F32, n_q(&c));
            if (half_q) ra_convert(p.q, RA_F32, q16, (ra_dtype)dt, n_q(&c));
            ra_convert(k16, (ra_dtype)dt, p.k, RA_F32, n_kv(&c));
            ra_convert(v16, (ra_dtype)dt, p.v, RA_F32, n_kv(&c));
            ra_convert(p.k, RA_F32, k16, (ra_dtype)dt, n_kv(&c)); /* the widened numbers */
            ra_convert(p.v, RA_F32, v16, (ra_dtype)dt, n_kv(&c));
            CHECK(run_paths(&p, ctx, (ra_attention_path)path, NULL) == RA_OK, "f32");
            memcpy(want, p.dq, 4 * n_q(&c));
            memcpy(want + n_q(&c), p.dk, 4 * n_kv(&c));
            memcpy(want + n_q(&c) + n_kv(&c), p.dv, 4 * n_kv(&c));
            ra_tensor k = ra_tensor_4d(k16, (ra_dtype)dt, c.b, c.s, c.hkv, c.d);
            ra_tensor v = ra_tensor_4d(v16, (ra_dtype)dt, c.b, c.s, c.hkv, c.d);
            ra_tensor q_half = ra_tensor_4d(q16, (ra_dtype)dt, c.b, c.s, c.h, c.d);
            CHECK(ra_attention_backward(ctx, &dq, &dk, &dv, &dout, half_q ? &q_half : &q, &k,
                                        &v, &o, p.lse,
                                        PATH_OPTS((ra_attention_path)path)) == RA_OK,
                  "16-bit");
            if (dt == RA_BF16 && half_q && path == RA_PATH_FLASH &&
                ra_test_isa >= RA_ISA_AVX512BF16)
                continue;
            CHECK(memcmp(want, p.dq, 4 * n_q(&c)) == 0 &&
                      memcmp(want + n_q(&c), p.dk, 4 * n_kv(&c)) == 0 &&
                      memcmp(want + n_q(&c) + n_kv(&c), p.dv, 4 * n_kv(&c)) == 0,
                  "dtype %d path %d: 16-bit k/v%s differ from widened f32", dt, path,
                  half_q ? " and q" : "");
        }
    ra_context_destroy(ctx);
    free(k16); free(v16); free(q16); free(want);
    problem_free(&p);
}

/* ---- the forward that keeps lse -------------------------------------------- */

/* out is ra_attention's, bit for bit, on both paths and with dropout; lse
 * is log sum_j exp(s_ij) computed directly in double, to 1e-6 + 1e-6 |lse|
 * (float32 rounding of a value near log S plus the scores' own float32
 * rounding, ~1e-7 each). */
static void test_forward_lse(void)
{
    const shape c = {2, 130, 4, 2, 32};
    problem p;
    problem_make(&p, &c, 5, 3.0f);
    float *plain = malloc(4 * n_q(&c));
    ra_tensor q = ra_tensor_4d(p.q, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor k = ra_tensor_4d(p.k, RA_F32, c.b, c.s, c.hkv, c.d);
    ra_tensor v = ra_tensor_4d(p.v, RA_F32, c.b, c.s, c.hkv, c.d);
    ra_tensor o = ra_tensor_4d(p.out, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor o2 = ra_tensor_4d(plain, RA_F32, c.b, c.s, c.h, c.d);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    const ra_attention_options drop = DROPOUT(0.2f, 5);
    for (int path = RA_PATH_AUTO; path <= RA_PATH_FLASH; path++)
        for (int with_drop = 0; with_drop < 2; with_drop++) {
            const ra_attention_options *dp = with_drop ? &drop : NULL;
            CHECK(ra_attention_forward_lse(ctx, &o, p.lse, &q, &k, &v,
                                           DROP_OPTS((ra_attention_path)path, dp)) == RA_OK,
                  "lse");
            CHECK(ra_attention(ctx, &o2, &q, &k, &v, DROP_OPTS((ra_attention_path)path, dp)) ==
                      RA_OK,
                  "plain");
            CHECK(memcmp(p.out, plain, 4 * n_q(&c)) == 0, "path %d dropout %d: out differs", path,
                  with_drop);
            double worst = 0;
            for (int64_t b = 0; b < c.b; b++)
                for (int64_t h = 0; h < c.h; h++)
                    for (int64_t i = 0; i < c.s; i++) {
                        double mx = -INFINITY, sum = 0, *s = malloc(8 * (i + 1));
                        for (int64_t j = 0; j <= i; j++) {
                            double dot = 0;
                            for (int64_t e = 0; e < c.d; e++)
                                dot += (double)p.q[((b * c.s + i) * c.h + h) * c.d + e] *
                                       p.k[((b * c.s + j) * c.hkv + h / 2) * c.d + e];
                            s[j] = dot / sqrt((double)c.d);
                            mx = fmax(mx, s[j]);
                        }
                        for (int64_t j = 0; j <= i; j++) sum += exp(s[j] - mx);
                        double want = mx + log(sum), got = p.lse[(b * c.h + h) * c.s + i];
                        worst = fmax(worst, fabs(got - want) / (1e-6 + 1e-6 * fabs(want)));
                        free(s);
                    }
            CHECK(worst <= 1.0, "path %d: lse off by %.3g of its tolerance", path, worst);
        }
    ra_context_destroy(ctx);
    free(plain);
    problem_free(&p);
}

/* ---- dropout --------------------------------------------------------------- */

/* The backward uses the forward's masks.  With one-hot values (v[j, e] = 1
 * for e == j, D >= S) the forward's output row i is Pd[i, :] itself, the
 * dropped probabilities; dv must then be Pd^T dout summed over the group,
 * built from those (to 2e-6 of max|dv|: float32 products of the same
 * numbers, summed in another order).  S = 80 spans two of the flash path's
 * 64-key tiles, so the masks of a tile other than the first are checked
 * too.  Flash equals the reference with the same seed; p = 0 gives exactly
 * the gradients without dropout; another seed gives other gradients. */
static void test_dropout(void)
{
    const shape c = {1, 80, 4, 2, 80};
    const ra_attention_options drop = DROPOUT(0.25f, 42), other = DROPOUT(0.25f, 43),
                               zero = DROPOUT(0.0f, 42);
    problem p;
    problem_make(&p, &c, 7, 2.0f);
    memset(p.v, 0, 4 * n_kv(&c));
    for (int64_t j = 0; j < c.s; j++)
        for (int64_t g = 0; g < c.hkv; g++) p.v[(j * c.hkv + g) * c.d + j] = 1.0f;
    float *want = malloc(4 * n_kv(&c)), *ref = malloc(4 * (n_q(&c) + 2 * n_kv(&c)));
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
        CHECK(run_paths(&p, ctx, (ra_attention_path)path, &drop) == RA_OK, "dropout");
        int64_t dropped = 0;
        for (int64_t g = 0; g < c.hkv; g++)
            for (int64_t j = 0; j < c.s; j++)
                for (int64_t e = 0; e < c.d; e++) {
                    double acc = 0;
                    for (int64_t h = g * 2; h < g * 2 + 2; h++)
                        for (int64_t i = 0; i < c.s; i++) {
                            float pd = p.out[(i * c.h + h) * c.d + j];
                            dropped += j <= i && pd == 0.0f && e == 0;
                            acc += (double)pd * p.dout[(i * c.h + h) * c.d + e];
                        }
                    want[(j * c.hkv + g) * c.d + e] = (float)acc;
                }
        double e = ra_test_max_rel_diff(p.dv, want, n_kv(&c));
        CHECK(e <= 2e-6, "path %d: dv is not Pd^T dout with the forward's masks (%.3g)", path, e);
        CHECK(dropped > 0, "path %d: nothing was dropped", path);
        if (path == RA_PATH_REFERENCE) {
            memcpy(ref, p.dq, 4 * n_q(&c));
            memcpy(ref + n_q(&c), p.dk, 4 * n_kv(&c));
            memcpy(ref + n_q(&c) + n_kv(&c), p.dv, 4 * n_kv(&c));
        } else {
            check_paths_agree("dropout", 0, ref, ref + n_q(&c), ref + n_q(&c) + n_kv(&c), p.dq,
                              p.dk, p.dv, &c);
        }
    }
    /* Another seed, other gradients; p = 0 is no dropout, bit for bit. */
    ra_test_fill(p.v, n_kv(&c), 9);
    CHECK(run_paths(&p, ctx, RA_PATH_FLASH, &drop) == RA_OK, "seed 42");
    memcpy(ref, p.dq, 4 * n_q(&c));
    CHECK(run_paths(&p, ctx, RA_PATH_FLASH, &other) == RA_OK, "seed 43");
    CHECK(memcmp(ref, p.dq, 4 * n_q(&c)) != 0, "another seed gave the same gradients");
    for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
        CHECK(run_paths(&p, ctx, (ra_attention_path)path, NULL) == RA_OK, "inference");
        memcpy(ref, p.dq, 4 * n_q(&c));
        memcpy(ref + n_q(&c), p.dk, 4 * n_kv(&c));
        memcpy(ref + n_q(&c) + n_kv(&c), p.dv, 4 * n_kv(&c));
        CHECK(run_paths(&p, ctx, (ra_attention_path)path, &zero) == RA_OK, "p = 0");
        CHECK(memcmp(ref, p.dq, 4 * n_q(&c)) == 0 &&
                  memcmp(ref + n_q(&c), p.dk, 4 * n_kv(&c)) == 0 &&
                  memcmp(ref + n_q(&c) + n_kv(&c), p.dv, 4 * n_kv(&c)) == 0,
              "path %d: p = 0 differs from no dropout", path);
    }
    ra_context_destroy(ctx);
    free(want);
    free(ref);
    problem_free(&p);
}

/* ---- determinism and overwriting ------------------------------------------- */

/* The same bits for no context and 1, 2, 3 and 5 threads, with and without
 * dropout; the gradients are overwritten whatever they held (NaN here). */
static void test_thread_determinism(void)
{
    const shape c = {2, 150, 8, 2, 32};
    const ra_attention_options drop = DROPOUT(0.3f, 1234);
    problem p;
    problem_make(&p, &c, 4, 2.0f);
    size_t bytes = 4 * (size_t)(n_q(&c) + 2 * n_kv(&c));
    float *want = malloc(bytes), *got = malloc(bytes);
    for (int with_drop = 0; with_drop < 2; with_drop++) {
        const ra_attention_options *dp = with_drop ? &drop : NULL;
        CHECK(run_paths(&p, NULL, RA_PATH_FLASH, dp) == RA_OK, "no context");
        memcpy(want, p.dq, 4 * n_q(&c));
        memcpy(want + n_q(&c), p.dk, 4 * n_kv(&c));
        memcpy(want + n_q(&c) + n_kv(&c), p.dv, 4 * n_kv(&c));
        const int counts[] = {1, 2, 3, 5};
        for (int t = 0; t < 4; t++) {
            ra_context *ctx;
            CHECK(ra_context_create(&ctx, counts[t]) == RA_OK, "ctx");
            for (int rep = 0; rep < 2; rep++) {
                memset(p.dq, 0xff, 4 * n_q(&c)); /* NaN: must be overwritten */
                memset(p.dk, 0xff, 4 * n_kv(&c));
                memset(p.dv, 0xff, 4 * n_kv(&c));
                CHECK(run_paths(&p, ctx, RA_PATH_FLASH, dp) == RA_OK, "threads");
                memcpy(got, p.dq, 4 * n_q(&c));
                memcpy(got + n_q(&c), p.dk, 4 * n_kv(&c));
                memcpy(got + n_q(&c) + n_kv(&c), p.dv, 4 * n_kv(&c));
                CHECK(memcmp(want, got, bytes) == 0, "%d threads differ (dropout %d)", counts[t],
                      with_drop);
            }
            ra_context_destroy(ctx);
        }
    }
    free(want);
    free(got);
    problem_free(&p);
}

/* ---- argument checks ------------------------------------------------------- */

static void test_errors(void)
{
    const shape c = {1, 4, 4, 2, 8};
    problem p;
    problem_make(&p, &c, 3, 1.0f);
    ra_tensor q = ra_tensor_4d(p.q, RA_F32, 1, 4, 4, 8), k = ra_tensor_4d(p.k, RA_F32, 1, 4, 2, 8);
    ra_tensor v = ra_tensor_4d(p.v, RA_F32, 1, 4, 2, 8), o = ra_tensor_4d(p.out, RA_F32, 1, 4, 4, 8);
    ra_tensor dout = ra_tensor_4d(p.dout, RA_F32, 1, 4, 4, 8);
    ra_tensor dq = ra_tensor_4d(p.dq, RA_F32, 1, 4, 4, 8), dk = ra_tensor_4d(p.dk, RA_F32, 1, 4, 2, 8);
    ra_tensor dv = ra_tensor_4d(p.dv, RA_F32, 1, 4, 2, 8);
    CHECK(ra_attention_forward_lse(NULL, &o, p.lse, &q, &k, &v, PATH_OPTS(RA_PATH_FLASH)) == RA_OK,
          "fwd");
    memset(p.dq, 0x7f, 4 * n_q(&c));
    memset(p.dk, 0x7f, 4 * n_kv(&c));
    memset(p.dv, 0x7f, 4 * n_kv(&c));
#define BWD(path, gq, gk, gv, lse, drop) \
    ra_attention_backward(NULL, gq, gk, gv, &dout, &q, &k, &v, &o, lse, DROP_OPTS(path, drop))
    const ra_attention_path F = RA_PATH_FLASH;
    CHECK(BWD((ra_attention_path)7, &dq, &dk, &dv, p.lse, NULL) == RA_ERR_ARGUMENT, "path");
    CHECK(BWD(F, NULL, &dk, &dv, p.lse, NULL) == RA_ERR_NULL, "NULL dq");
    CHECK(BWD(F, &dq, NULL, &dv, p.lse, NULL) == RA_ERR_NULL, "NULL dk");
    CHECK(ra_attention_backward(NULL, &dq, &dk, &dv, NULL, &q, &k, &v, &o, p.lse, PATH_OPTS(F)) ==
              RA_ERR_NULL, "NULL dout");
    CHECK(BWD(F, &dq, &dk, &dv, NULL, NULL) == RA_ERR_NULL, "flash without lse");
    CHECK(BWD(RA_PATH_AUTO, &dq, &dk, &dv, NULL, NULL) == RA_ERR_NULL, "auto without lse");
    CHECK(ra_attention_backward(NULL, &dq, &dk, &dv, &dout, &q, &k, &v, NULL, p.lse,
                                PATH_OPTS(F)) == RA_ERR_NULL,
          "flash without out");
    ra_tensor null_data = dq;
    null_data.data = NULL;
    CHECK(BWD(F, &null_data, &dk, &dv, p.lse, NULL) == RA_ERR_NULL, "NULL data");
    ra_tensor bad = ra_tensor_4d(p.dq, RA_F32, 1, 4, 4, 6);
    CHECK(BWD(F, &bad, &dk, &dv, p.lse, NULL) == RA_ERR_SHAPE, "dq shape");
    bad = ra_tensor_4d(p.dk, RA_F32, 1, 3, 2, 8);
    CHECK(BWD(F, &dq, &bad, &dv, p.lse, NULL) == RA_ERR_SHAPE, "dk shape");
    bad = ra_tensor_4d(p.dv, RA_F32, 1, 4, 1, 8);
    CHECK(BWD(F, &dq, &dk, &bad, p.lse, NULL) == RA_ERR_SHAPE, "dv heads");
    ra_tensor k3 = ra_tensor_4d(p.k, RA_F32, 1, 4, 3, 8), dk3 = ra_tensor_4d(p.dk, RA_F32, 1, 4, 3, 8);
    CHECK(ra_attention_backward(NULL, &dq, &dk3, &dk3, &dout, &q, &k3, &k3, &o, p.lse,
                                PATH_OPTS(F)) == RA_ERR_GQA,
          "GQA");
    bad = ra_tensor_4d(p.dq, RA_BF16, 1, 4, 4, 8);
    CHECK(BWD(F, &bad, &dk, &dv, p.lse, NULL) == RA_ERR_DTYPE, "dq bf16");
    bad = ra_tensor_4d(p.dk, RA_F16, 1, 4, 2, 8);
    CHECK(BWD(F, &dq, &bad, &dv, p.lse, NULL) == RA_ERR_DTYPE, "dk f16");
    ra_tensor q8 = ra_tensor_4d(p.q, RA_I8, 1, 4, 4, 8);
    CHECK(ra_attention_backward(NULL, &dq, &dk, &dv, &dout, &q8, &k, &v, &o, p.lse,
                                PATH_OPTS(F)) == RA_ERR_DTYPE,
          "q int8");
    bad = ra_tensor_4d(p.out, RA_BF16, 1, 4, 4, 8);
    CHECK(ra_attention_backward(NULL, &dq, &dk, &dv, &dout, &q, &k, &v, &bad, p.lse,
                                PATH_OPTS(F)) == RA_ERR_DTYPE,
          "out bf16");
    bad = dq;
    bad.dtype = (ra_dtype)9;
    CHECK(BWD(F, &bad, &dk, &dv, p.lse, NULL) == RA_ERR_ARGUMENT, "unknown dtype");
    bad = dq;
    bad.stride[3] = 2;
    CHECK(BWD(F, &bad, &dk, &dv, p.lse, NULL) == RA_ERR_ARGUMENT, "feature stride");
    /* Overlaps: a gradient on an input, on lse, or on another gradient. */
    CHECK(BWD(F, &q, &dk, &dv, p.lse, NULL) == RA_ERR_ARGUMENT, "dq on q");
    ra_tensor on_dout = ra_tensor_4d(p.dout + 8, RA_F32, 1, 4, 2, 8);
    CHECK(BWD(F, &dq, &dk, &on_dout, p.lse, NULL) == RA_ERR_ARGUMENT, "dv on dout");
    CHECK(BWD(F, &dq, &v, &dv, p.lse, NULL) == RA_ERR_ARGUMENT, "dk on v");
    CHECK(BWD(F, &dq, &dk, &dk, p.lse, NULL) == RA_ERR_ARGUMENT, "dv on dk");
    ra_tensor on_out = ra_tensor_4d(p.out, RA_F32, 1, 4, 2, 8);
    CHECK(BWD(F, &dq, &on_out, &dv, p.lse, NULL) == RA_ERR_ARGUMENT, "dk on out");
    ra_tensor on_lse = ra_tensor_4d(p.lse + 8, RA_F32, 1, 4, 2, 8); /* only its range is used */
    CHECK(BWD(F, &dq, &dk, &on_lse, p.lse, NULL) == RA_ERR_ARGUMENT, "dv on lse");
    ra_tensor half_dq = ra_tensor_4d(p.dq + 64, RA_F32, 1, 4, 2, 8);
    CHECK(BWD(F, &dq, &half_dq, &dv, p.lse, NULL) == RA_ERR_ARGUMENT, "dk inside dq");
    /* In a fused [1, 4, 4 + 2 + 2, 8] dQKV buffer: dk starting on dq's last
     * head aliases it, dk after dq does not. */
    float fused[4 * 8 * 8];
    ra_tensor fq = ra_tensor_4d(fused, RA_F32, 1, 4, 8, 8), fk = fq, fv = fq;
    fq.shape[2] = 4;
    fk.shape[2] = fv.shape[2] = 2;
    fk.data = fused + 3 * 8;
    fv.data = fused + 6 * 8;
    CHECK(BWD(F, &fq, &fk, &fv, p.lse, NULL) == RA_ERR_ARGUMENT, "fused dk on dq's last head");
    fk.data = fused + 4 * 8;
    CHECK(BWD(F, &fq, &fk, &fv, p.lse, NULL) == RA_OK, "fused dq, dk, dv");
    ra_attention_options p1 = DROPOUT(1.0f, 0), pn = DROPOUT(-0.5f, 0), pnan = DROPOUT(NAN, 0);
    CHECK(BWD(F, &dq, &dk, &dv, p.lse, &p1) == RA_ERR_ARGUMENT, "p = 1");
    CHECK(BWD(F, &dq, &dk, &dv, p.lse, &pn) == RA_ERR_ARGUMENT, "p < 0");
    CHECK(BWD(F, &dq, &dk, &dv, p.lse, &pnan) == RA_ERR_ARGUMENT, "p NaN");
    float sentinel;
    memset(&sentinel, 0x7f, 4);
    int untouched = 1;
    for (int64_t i = 0; i < n_kv(&c); i++) untouched &= memcmp(&p.dk[i], &sentinel, 4) == 0;
    CHECK(untouched, "a failing backward wrote to dk");
    /* The reference path takes NULL out and lse. */
    CHECK(ra_attention_backward(NULL, &dq, &dk, &dv, &dout, &q, &k, &v, NULL, NULL,
                                PATH_OPTS(RA_PATH_REFERENCE)) == RA_OK,
          "reference without out and lse");
    /* The forward with lse. */
    CHECK(ra_attention_forward_lse(NULL, &o, NULL, &q, &k, &v, PATH_OPTS(F)) == RA_ERR_NULL,
          "NULL lse");
    CHECK(ra_attention_forward_lse(NULL, &o, p.lse, &q, &k, &v, PATH_OPTS((ra_attention_path)3)) ==
              RA_ERR_ARGUMENT, "lse path");
    CHECK(ra_attention_forward_lse(NULL, &o, p.out + 8, &q, &k, &v, PATH_OPTS(F)) ==
              RA_ERR_ARGUMENT,
          "lse inside out");
    CHECK(ra_attention_forward_lse(NULL, &o, p.q, &q, &k, &v, PATH_OPTS(F)) == RA_ERR_ARGUMENT,
          "lse on q");
    CHECK(ra_attention_forward_lse(NULL, &o, p.lse, &q, &k3, &k3, PATH_OPTS(F)) == RA_ERR_GQA,
          "GQA");
#undef BWD
    problem_free(&p);
}

/* Every case reaches the SIMD kernels (test_errors: the calls that must
 * succeed), so each runs on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_finite_differences);
    RUN(test_flash_matches_reference);
    RUN(test_half_inputs);
    RUN(test_forward_lse);
    RUN(test_dropout);
    RUN(test_thread_determinism);
    RUN(test_errors);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("attention_backward");
}
