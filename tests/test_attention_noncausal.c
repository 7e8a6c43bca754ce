/*
 * test_attention_noncausal.c — non-causal attention, keys of another length
 * than the queries (the diagonal aligned bottom-right) and SDPA's attn_mask
 * (RA_BOOL or additive f32 / f16 / bf16, broadcast): the reference path
 * against a plain double-precision loop written here from the header's
 * words, the flash forward and backward against the reference on awkward
 * shapes (every SIMD path: harness.h), identical bits for 1 and 3 threads,
 * and every refusal.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

/* One case.  mask: 0 none, 1 RA_BOOL, 2 f32, 3 bf16, 4 f16.  bcast: the
 * mask's view: 0 [B, H, Sq, Sk]; 1 [1, 1, Sq, Sk]; 2 [B, 1, 1, Sk];
 * 3 [1, H, Sq, 1]; 4 [B, H, Sq, Sk] with stride 0 on H.  dead: rows with
 * i % 5 == 2 see no key (all masked).  skip: 1, keys 64 .. 191 masked for
 * every row (whole tiles the flash path skips); 2, the keys of odd 64-key
 * tiles masked, the others' values 0 or -0.0 (tiles the flash path runs
 * without building the mask's).  pad: right padding of
 * b + 2 tokens (Sq = Sk only). */
typedef struct nc_case {
    int64_t b, sq, sk, h, hkv, d;
    int non_causal;
    int64_t window;
    double softcap;
    int sinks, mask, bcast, dead, skip, pad;
} nc_case;

static const nc_case cases[] = {
    /* b, sq, sk, h, hkv, d, non_causal, window, softcap, sinks, mask, bcast, dead, skip, pad */
    {1, 1, 1, 1, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 7, 7, 2, 1, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {2, 70, 70, 4, 2, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 33, 150, 4, 2, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0},  /* Sq < Sk, causal: prefill */
    {1, 150, 33, 4, 2, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0},  /* Sq > Sk: early rows see none */
    {1, 1, 200, 4, 1, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0},   /* Sq = 1 */
    {2, 1, 130, 8, 2, 20, 1, 0, 0, 0, 1, 0, 0, 0, 0},
    {1, 40, 300, 6, 3, 10, 1, 0, 0, 0, 1, 2, 0, 0, 0},  /* cross-attention, key padding */
    {2, 90, 90, 4, 2, 16, 1, 9, 0, 0, 0, 0, 0, 0, 0},   /* window both ways */
    {1, 130, 70, 2, 1, 16, 1, 20, 5.0, 1, 2, 0, 0, 0, 0},
    {2, 100, 100, 4, 2, 12, 0, 30, 0, 0, 2, 1, 1, 0, 0}, /* causal, window, dead rows */
    {2, 80, 80, 4, 1, 16, 1, 0, 0, 1, 1, 3, 1, 0, 0},  /* dead rows and sinks */
    {1, 77, 260, 4, 2, 33, 0, 0, 30.0, 0, 3, 0, 0, 1, 0}, /* bf16 mask, skipped tiles */
    {1, 200, 260, 8, 2, 16, 1, 0, 0, 0, 1, 4, 1, 1, 0}, /* stride-0 heads */
    {2, 60, 60, 4, 2, 16, 1, 0, 0, 0, 4, 0, 0, 0, 1},  /* f16 mask and padding */
    {2, 65, 65, 2, 2, 8, 0, 4, 0, 1, 1, 1, 0, 0, 1},   /* causal window, padding, sinks */
    {2, 200, 200, 4, 2, 16, 1, 0, 0, 0, 2, 0, 0, 2, 0}, /* mask 0 or -0.0 on whole tiles */
    {1, 150, 300, 4, 2, 16, 0, 0, 0, 1, 1, 1, 1, 2, 0}, /* the same, causal (bool) */
    {2, 130, 130, 4, 2, 16, 0, 0, 5.0, 0, 4, 0, 0, 2, 1}, /* the same, f16, padding */
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* The mask's rule at (b, h, i, j): -Inf (masked) or an additive value. */
static float mask_value(const nc_case *c, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (c->dead && i % 5 == 2) return -INFINITY;
    if (c->skip == 1 && j >= 64 && j < 192) return -INFINITY;
    if (c->skip == 2) return (j / 64) % 2 ? -INFINITY : j % 2 ? -0.0f : 0.0f;
    uint64_t x = (uint64_t)(((b * 131 + h) * 1009 + i) * 7919 + j) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    if (x % 3 == 0) return -INFINITY;
    return c->mask == 1 ? 0.0f : (float)((int64_t)(x >> 40) % 2001 - 1000) / 400.0f;
}

/* The inputs of one case; o points into it. */
typedef struct nc_inputs {
    float *q, *k, *v, sinks[16];
    uint8_t *pad, *mask;
    ra_tensor tmask;
    ra_attention_options o;
} nc_inputs;

static ra_dtype mask_dtype(int mask)
{
    static const ra_dtype d[5] = {RA_F32, RA_BOOL, RA_F32, RA_BF16, RA_F16};
    return d[mask];
}

static void inputs_make(nc_inputs *in, const nc_case *c, uint64_t seed)
{
    int64_t nq = c->b * c->sq * c->h * c->d, nk = c->b * c->sk * c->hkv * c->d;
    in->q = malloc(4 * nq);
    in->k = malloc(4 * nk);
    in->v = malloc(4 * nk);
    ra_test_fill(in->q, nq, seed);
    ra_test_fill(in->k, nk, seed + 1);
    ra_test_fill(in->v, nk, seed + 2);
    for (int64_t i = 0; i < nq; i++) in->q[i] *= 3.0f; /* peaked rows too */
    for (int h = 0; h < 16; h++) in->sinks[h] = (float)(h % 3) - 0.5f;
    in->o = ra_attention_options_init();
    in->o.non_causal = c->non_causal;
    in->o.window = c->window;
    in->o.softcap = c->softcap;
    if (c->sinks) in->o.sinks = in->sinks;
    in->pad = NULL;
    if (c->pad) {
        in->pad = malloc(c->b * c->sq);
        for (int64_t b = 0; b < c->b; b++)
            for (int64_t i = 0; i < c->sq; i++) in->pad[b * c->sq + i] = i < c->sq - b - 2;
        in->o.padding_mask = in->pad;
    }
    in->mask = NULL;
    if (!c->mask) return;
    /* the view's shape; its storage contiguous over that shape (bcast 4:
     * [B, 1, Sq, Sk] stored, viewed with H and stride 0) */
    int64_t shape[4] = {c->b, c->h, c->sq, c->sk};
    if (c->bcast == 1) shape[0] = shape[1] = 1;
    if (c->bcast == 2) shape[1] = shape[2] = 1;
    if (c->bcast == 3) shape[0] = shape[3] = 1;
    int64_t stored_h = c->bcast == 4 ? 1 : shape[1];
    int64_t stride[4] = {stored_h * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1};
    if (c->bcast == 4) stride[1] = 0;
    ra_dtype dt = mask_dtype(c->mask);
    in->mask = malloc((size_t)(shape[0] * stored_h * shape[2] * shape[3]) * ra_dtype_size(dt));
    for (int64_t b = 0; b < shape[0]; b++)
        for (int64_t h = 0; h < stored_h; h++)
            for (int64_t i = 0; i < shape[2]; i++)
                for (int64_t j = 0; j < shape[3]; j++) {
                    float v = mask_value(c, b, h, i, j);
                    int64_t at = b * stride[0] + h * (stride[1] ? stride[1] : 0) + i * stride[2] + j;
                    if (dt == RA_BOOL) in->mask[at] = v != -INFINITY ? (uint8_t)(1 + j % 7) : 0;
                    else if (dt == RA_F32) ((float *)(void *)in->mask)[at] = v;
                    else if (dt == RA_BF16) ((uint16_t *)(void *)in->mask)[at] = ra_f32_to_bf16(v);
                    else ((uint16_t *)(void *)in->mask)[at] = ra_f32_to_f16(v);
                }
    in->tmask = (ra_tensor){in->mask, dt, {shape[0], shape[1], shape[2], shape[3]},
                            {stride[0], stride[1], stride[2], stride[3]}};
    in->o.attn_mask = &in->tmask;
}

static void inputs_free(nc_inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->pad);
    free(in->mask);
}

/* The mask's value as the view holds it (rounded to its dtype), at the
 * element (b, h, i, j) broadcasts to. */
static double view_value(const nc_inputs *in, int64_t b, int64_t h, int64_t i, int64_t j)
{
    const ra_tensor *t = &in->tmask;
    const int64_t idx[4] = {b, h, i, j};
    int64_t at = 0;
    for (int d = 0; d < 4; d++) at += (t->shape[d] == 1 ? 0 : idx[d]) * t->stride[d];
    if (t->dtype == RA_BOOL) return in->mask[at] ? 0.0 : -INFINITY;
    if (t->dtype == RA_F32) return ((const float *)t->data)[at];
    uint16_t x = ((const uint16_t *)t->data)[at];
    return t->dtype == RA_BF16 ? ra_bf16_to_f32(x) : ra_f16_to_f32(x);
}

/* The header's definition, in double: query i at key row a = i + Sk - Sq
 * sees key j when (non_causal or j <= a), the window allows it (a - W < j,
 * or |a - j| < W without the causal mask), j and i are real tokens and the
 * mask's value is not -Inf; s = c tanh(scale q.k / c) + mask; a row seeing
 * no key is 0 with lse -Inf (the sink with sinks). */
static void oracle(const nc_case *c, const nc_inputs *in, double *out, double *lse)
{
    const double scale = 1.0 / sqrt((double)c->d);
    const int64_t rep = c->h / c->hkv;
    double *s = malloc(sizeof(double) * c->sk);
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->h; h++)
            for (int64_t i = 0; i < c->sq; i++) {
                const int64_t a = i + c->sk - c->sq, g = h / rep;
                const float *qi = in->q + ((b * c->sq + i) * c->h + h) * c->d;
                double *o = out + ((b * c->sq + i) * c->h + h) * c->d;
                double mx = -INFINITY;
                int seen = 0;
                for (int64_t j = 0; j < c->sk; j++) {
                    s[j] = NAN; /* not seen */
                    if (!c->non_causal && j > a) continue;
                    if (c->window && (c->non_causal ? llabs(a - j) >= c->window
                                                    : j <= a - c->window))
                        continue;
                    if (in->pad && (!in->pad[b * c->sq + j] || !in->pad[b * c->sq + i])) continue;
                    double m = in->mask ? view_value(in, b, h, i, j) : 0.0;
                    if (m == -INFINITY) continue;
                    const float *kj = in->k + ((b * c->sk + j) * c->hkv + g) * c->d;
                    double dot = 0;
                    for (int64_t d = 0; d < c->d; d++) dot += (double)qi[d] * kj[d];
                    dot *= scale;
                    if (c->softcap) dot = c->softcap * tanh(dot / c->softcap);
                    s[j] = dot + m;
                    mx = s[j] > mx ? s[j] : mx;
                    seen = 1;
                }
                for (int64_t d = 0; d < c->d; d++) o[d] = 0;
                double *l = lse + (b * c->h + h) * c->sq + i;
                int real = !in->pad || in->pad[b * c->sq + i];
                if (!seen) {
                    *l = c->sinks && real ? in->sinks[h] : -INFINITY;
                    continue;
                }
                if (c->sinks && in->sinks[h] > mx) mx = in->sinks[h];
                double sum = c->sinks ? exp(in->sinks[h] - mx) : 0;
                for (int64_t j = 0; j < c->sk; j++)
                    if (!isnan(s[j])) sum += exp(s[j] - mx);
                for (int64_t j = 0; j < c->sk; j++) {
                    if (isnan(s[j])) continue;
                    const float *vj = in->v + ((b * c->sk + j) * c->hkv + g) * c->d;
                    double p = exp(s[j] - mx) / sum;
                    for (int64_t d = 0; d < c->d; d++) o[d] += p * vj[d];
                }
                *l = mx + log(sum);
            }
    free(s);
}

/* Runs a case's forward on path into out and lse. */
static ra_status run_forward(ra_context *ctx, const nc_case *c, nc_inputs *in, ra_dtype kv_dtype,
                             ra_attention_path path, float *out, float *lse, const void *k,
                             const void *v, const void *q)
{
    ra_tensor tq = ra_tensor_4d((void *)q, kv_dtype, c->b, c->sq, c->h, c->d);
    ra_tensor tk = ra_tensor_4d((void *)k, kv_dtype, c->b, c->sk, c->hkv, c->d);
    ra_tensor tv = ra_tensor_4d((void *)v, kv_dtype, c->b, c->sk, c->hkv, c->d);
    ra_tensor to = ra_tensor_4d(out, RA_F32, c->b, c->sq, c->h, c->d);
    in->o.path = path;
    return ra_attention_forward_lse(ctx, &to, lse, &tq, &tk, &tv, &in->o);
}

/* Worst |a - b| over n; lse's -Inf must match exactly (Inf). */
static double max_diff(const float *a, const double *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isinf(b[i]) || isinf(a[i])) {
            if ((double)a[i] != b[i]) return INFINITY;
            continue;
        }
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= worst)) worst = d; /* NaN: stays */
    }
    return worst;
}

static double max_diff_f(const float *a, const float *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isinf(a[i]) || isinf(b[i])) {
            if (a[i] != b[i]) return INFINITY;
            continue;
        }
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* The reference path against the oracle.  Tolerance 1e-5: the reference
 * sums in double but stores logits and probabilities as float32 (relative
 * 6e-8 each), and |v| <= 1, so each output is within a few float32 ulps of
 * 1 (the mask's additive values are read exactly by both). */
static void test_reference_matches_oracle(void)
{
    for (int ci = 0; ci < N_CASES; ci++) {
        const nc_case *c = &cases[ci];
        nc_inputs in;
        inputs_make(&in, c, 100 + ci);
        int64_t nq = c->b * c->sq * c->h * c->d, nl = c->b * c->h * c->sq;
        float *out = malloc(4 * nq), *lse = malloc(4 * nl);
        double *want = malloc(8 * nq), *want_lse = malloc(8 * nl);
        oracle(c, &in, want, want_lse);
        CHECK(run_forward(NULL, c, &in, RA_F32, RA_PATH_REFERENCE, out, lse, in.k, in.v, in.q) ==
                  RA_OK, "case %d: %s", ci, ra_last_error());
        double e = max_diff(out, want, nq), el = max_diff(lse, want_lse, nl);
        CHECK(e <= 1e-5, "case %d: reference out differs from the oracle by %.3g", ci, e);
        /* lse: the max logit (|s| < 15) stored in float32, 1e-4 */
        CHECK(el <= 1e-4, "case %d: reference lse differs by %.3g", ci, el);
        free(out);
        free(lse);
        free(want);
        free(want_lse);
        inputs_free(&in);
    }
}

/* The flash path against the reference, f32 inputs and bf16 ones (the
 * same values rounded to bf16 first, so both paths read the same numbers).
 * Tolerances: f32, 5e-5 on out and lse (float32 sums over at most 300 keys
 * in another order, |v| <= 1, logits up to ~10); bf16, 4e-3 (the bf16
 * units round P to bf16 before P v: 2^-8 max|v|, ropeattn.h). */
static void test_flash_matches_reference(void)
{
    for (int ci = 0; ci < N_CASES; ci++) {
        const nc_case *c = &cases[ci];
        nc_inputs in;
        inputs_make(&in, c, 200 + ci);
        int64_t nq = c->b * c->sq * c->h * c->d, nk = c->b * c->sk * c->hkv * c->d;
        int64_t nl = c->b * c->h * c->sq;
        float *o1 = malloc(4 * nq), *o2 = malloc(4 * nq), *l1 = malloc(4 * nl), *l2 = malloc(4 * nl);
        uint16_t *q16 = malloc(2 * nq), *k16 = malloc(2 * nk), *v16 = malloc(2 * nk);
        for (int bf = 0; bf < 2; bf++) {
            const void *q = in.q, *k = in.k, *v = in.v;
            if (bf) {
                ra_convert(q16, RA_BF16, in.q, RA_F32, nq);
                ra_convert(k16, RA_BF16, in.k, RA_F32, nk);
                ra_convert(v16, RA_BF16, in.v, RA_F32, nk);
                q = q16, k = k16, v = v16;
            }
            ra_dtype dt = bf ? RA_BF16 : RA_F32;
            CHECK(run_forward(NULL, c, &in, dt, RA_PATH_REFERENCE, o1, l1, k, v, q) == RA_OK,
                  "case %d: %s", ci, ra_last_error());
            memset(o2, 0x7f, 4 * nq);
            CHECK(run_forward(NULL, c, &in, dt, RA_PATH_FLASH, o2, l2, k, v, q) == RA_OK,
                  "case %d: %s", ci, ra_last_error());
            const double tol = bf ? 4e-3 : 5e-5;
            double e = max_diff_f(o2, o1, nq), el = max_diff_f(l2, l1, nl);
            CHECK(e <= tol, "case %d (%s): flash out differs from the reference by %.3g", ci,
                  bf ? "bf16" : "f32", e);
            CHECK(el <= 5e-5 * 4, "case %d (%s): flash lse differs by %.3g", ci,
                  bf ? "bf16" : "f32", el);
        }
        free(q16);
        free(k16);
        free(v16);
        free(o1);
        free(o2);
        free(l1);
        free(l2);
        inputs_free(&in);
    }
}

/* A short block (Sq times a group's heads at most 32 rows: the decode
 * kernel's, attention_short.c) with the causal mask also given as
 * attn_mask (bool; additive f32 of 0 and -0.0 with -Inf past the diagonal;
 * bf16 broadcast [1, 1, Sq, Sk]): the same bytes as causal alone, out and
 * lse, since the mask adds nothing there.  With one key the causal mask
 * lets a row see masked as well, it changes the output and the flash path
 * still matches the reference (5e-5, test_flash_matches_reference's). */
static void test_short_causal_mask(void)
{
    static const int64_t shapes[][5] = {/* sq, sk, h, hkv, d */
                                        {1, 1, 4, 1, 16},   {1, 300, 8, 2, 128}, {3, 3, 4, 1, 40},
                                        {3, 37, 8, 2, 16},  {8, 8, 4, 1, 64},    {8, 300, 2, 2, 24},
                                        {5, 1030, 4, 4, 128}};
    for (int si = 0; si < 7; si++)
        for (int kind = 0; kind < 4; kind++) {
            const int64_t *sh = shapes[si];
            const nc_case c = {2, sh[0], sh[1], sh[2], sh[3], sh[4], 0, 0, 0, 0, 0, 0, 0, 0, 0};
            const int64_t nq = c.b * c.sq * c.h * c.d, nl = c.b * c.h * c.sq;
            const int64_t shift = c.sk - c.sq, cells = c.b * c.h * c.sq * c.sk;
            nc_inputs in;
            inputs_make(&in, &c, 900 + si);
            float *o1 = malloc(4 * nq), *o2 = malloc(4 * nq), *l1 = malloc(4 * nl);
            float *l2 = malloc(4 * nl);
            CHECK(run_forward(NULL, &c, &in, RA_F32, RA_PATH_FLASH, o1, l1, in.k, in.v, in.q) ==
                      RA_OK, "%s", ra_last_error());
            /* kinds 0 bool, 1 f32, 2 bf16 [1, 1, Sq, Sk], 3 f32 with a causal key masked */
            const ra_dtype dt = kind == 0 ? RA_BOOL : kind == 2 ? RA_BF16 : RA_F32;
            const int64_t n = kind == 2 ? c.sq * c.sk : cells;
            char *m = malloc((size_t)n * 4);
            for (int64_t e = 0; e < n; e++) {
                const int64_t i = e / c.sk % c.sq, j = e % c.sk, seen = j <= i + shift;
                const float a = seen ? (e % 3 ? 0.0f : -0.0f) : -INFINITY;
                if (dt == RA_BOOL) m[e] = (char)seen;
                else if (dt == RA_BF16) ((uint16_t *)(void *)m)[e] = ra_f32_to_bf16(a);
                else ((float *)(void *)m)[e] = kind == 3 && e == n - 2 ? -INFINITY : a;
            }
            in.tmask = kind == 2 ? ra_tensor_4d(m, dt, 1, 1, c.sq, c.sk)
                                 : ra_tensor_4d(m, dt, c.b, c.h, c.sq, c.sk);
            in.o.attn_mask = &in.tmask;
            CHECK(run_forward(NULL, &c, &in, RA_F32, RA_PATH_FLASH, o2, l2, in.k, in.v, in.q) ==
                      RA_OK, "%s", ra_last_error());
            const int same = !memcmp(o1, o2, 4 * nq) && !memcmp(l1, l2, 4 * nl);
            if (kind < 3) {
                CHECK(same, "shape %d, mask kind %d: other bytes than the causal mask alone", si,
                      kind);
            } else if (c.sk > 1) {
                CHECK(!same, "shape %d: a masked causal key changed nothing", si);
                CHECK(run_forward(NULL, &c, &in, RA_F32, RA_PATH_REFERENCE, o1, l1, in.k, in.v,
                                  in.q) == RA_OK, "%s", ra_last_error());
                CHECK(max_diff_f(o2, o1, nq) <= 5e-5 && max_diff_f(l2, l1, nl) <= 2e-4,
                      "shape %d: a masked causal key: flash off the reference by %.3g", si,
                      max_diff_f(o2, o1, nq));
            }
            free(m);
            free(o1);
            free(o2);
            free(l1);
            free(l2);
            inputs_free(&in);
        }
}

/* Fully masked rows: out exactly 0 and lse -Inf (the sink with sinks), on
 * both paths; a row of finite but huge negative values (finfo.min) is not
 * masked: it averages v. */
static void test_fully_masked_rows(void)
{
    const int64_t sq = 5, sk = 70, h = 2, d = 8;
    float q[5 * 2 * 8], k[70 * 1 * 8], v[70 * 1 * 8], out[5 * 2 * 8], lse[2 * 5];
    ra_test_fill(q, sizeof q / 4, 7);
    ra_test_fill(k, sizeof k / 4, 8);
    ra_test_fill(v, sizeof v / 4, 9);
    float add[5 * 70];
    for (int64_t i = 0; i < sq; i++)
        for (int64_t j = 0; j < sk; j++)
            add[i * sk + j] = i == 1 ? -INFINITY : i == 3 ? -3.4028235e38f : 0.0f;
    ra_tensor tm = {add, RA_F32, {1, 1, sq, sk}, {0, 0, sk, 1}};
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, sq, h, d), tk = ra_tensor_4d(k, RA_F32, 1, sk, 1, d);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, sk, 1, d), to = ra_tensor_4d(out, RA_F32, 1, sq, h, d);
    float sinks[2] = {0.5f, -1.0f};
    for (int p = 0; p < 2; p++)
        for (int with_sinks = 0; with_sinks < 2; with_sinks++) {
            ra_attention_options o = ra_attention_options_init();
            o.path = p ? RA_PATH_FLASH : RA_PATH_REFERENCE;
            o.non_causal = 1;
            o.attn_mask = &tm;
            if (with_sinks) o.sinks = sinks;
            CHECK(ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, &o) == RA_OK, "%s",
                  ra_last_error());
            for (int64_t hh = 0; hh < h; hh++) {
                float want = with_sinks ? sinks[hh] : -INFINITY;
                CHECK(lse[hh * sq + 1] == want, "path %d: lse %g, not %g", p, lse[hh * sq + 1],
                      want);
                for (int64_t dd = 0; dd < d; dd++)
                    CHECK(out[(1 * h + hh) * d + dd] == 0.0f, "path %d: masked row not 0", p);
                /* finfo.min everywhere: a plain mean of v (no sink) */
                if (with_sinks) continue;
                for (int64_t dd = 0; dd < d; dd++) {
                    double mean = 0;
                    for (int64_t j = 0; j < sk; j++) mean += v[j * d + dd];
                    mean /= sk;
                    CHECK(fabs(out[(3 * h + hh) * d + dd] - mean) < 1e-5, "path %d: finfo.min row "
                          "%g, mean %g", p, out[(3 * h + hh) * d + dd], mean);
                }
            }
        }
}

/* Dropout with Sq != Sk: element (b, h, i, j) of [B, H, Sq, Sk] keys each
 * multiplier, so the flash path and the reference agree (tolerance 2e-4:
 * 5e-5 times 1 / (1 - p) plus slack for the 0.4 p of masked terms). */
static void test_dropout(void)
{
    const nc_case c = {2, 37, 150, 4, 2, 16, 1, 0, 0, 0, 1, 0, 0, 0, 0};
    nc_inputs in;
    inputs_make(&in, &c, 55);
    in.o.dropout = 0.3f;
    in.o.seed = 99;
    int64_t nq = c.b * c.sq * c.h * c.d, nl = c.b * c.h * c.sq;
    float *o1 = malloc(4 * nq), *o2 = malloc(4 * nq), *l1 = malloc(4 * nl), *l2 = malloc(4 * nl);
    CHECK(run_forward(NULL, &c, &in, RA_F32, RA_PATH_REFERENCE, o1, l1, in.k, in.v, in.q) == RA_OK,
          "%s", ra_last_error());
    CHECK(run_forward(NULL, &c, &in, RA_F32, RA_PATH_FLASH, o2, l2, in.k, in.v, in.q) == RA_OK,
          "%s", ra_last_error());
    double e = max_diff_f(o2, o1, nq);
    CHECK(e <= 2e-4, "dropout: flash differs from the reference by %.3g", e);
    free(o1);
    free(o2);
    free(l1);
    free(l2);
    inputs_free(&in);
}

/* The flash path gives the same bits on 1 and 3 threads, masked and not,
 * with dropout. */
static void test_thread_determinism(void)
{
    const int which[] = {3, 7, 9, 13};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    for (int w = 0; w < 4; w++) {
        const nc_case *c = &cases[which[w]];
        nc_inputs in;
        inputs_make(&in, c, 300 + w);
        in.o.dropout = w % 2 ? 0.2f : 0.0f;
        int64_t nq = c->b * c->sq * c->h * c->d, nl = c->b * c->h * c->sq;
        float *o1 = malloc(4 * nq), *o3 = malloc(4 * nq), *l1 = malloc(4 * nl), *l3 = malloc(4 * nl);
        CHECK(run_forward(NULL, c, &in, RA_F32, RA_PATH_FLASH, o1, l1, in.k, in.v, in.q) == RA_OK,
              "%s", ra_last_error());
        CHECK(run_forward(ctx, c, &in, RA_F32, RA_PATH_FLASH, o3, l3, in.k, in.v, in.q) == RA_OK,
              "%s", ra_last_error());
        CHECK(memcmp(o1, o3, 4 * nq) == 0 && memcmp(l1, l3, 4 * nl) == 0,
              "case %d: 1 and 3 threads differ", which[w]);
        free(o1);
        free(o3);
        free(l1);
        free(l3);
        inputs_free(&in);
    }
    ra_context_destroy(ctx);
}

/* The additive mask's values scan: NaN and +Inf refused in each dtype,
 * -Inf taken, the first bad element named by its index: past the first run
 * of 256 keys, through a stride of 2, and on an axis of stride 0 (index
 * 0 there, each distinct element read once). */
static void test_mask_values(void)
{
    enum { SK = 300 };
    static float kv[SK * 8], buf[4 * 2 * 8], out[4 * 2 * 8];
    ra_tensor q = ra_tensor_4d(buf, RA_F32, 1, 4, 2, 8), k = ra_tensor_4d(kv, RA_F32, 1, SK, 1, 8);
    ra_tensor o = ra_tensor_4d(out, RA_F32, 1, 4, 2, 8);
    static float m32[2 * 4 * 2 * SK];
    static uint16_t m16[2 * 4 * SK];
    ra_attention_options opt = ra_attention_options_init();
    opt.path = RA_PATH_REFERENCE;
    const ra_dtype dts[3] = {RA_F32, RA_F16, RA_BF16};
    static const char *const names[3] = {"f32", "f16", "bf16"};
    for (int d = 0; d < 3; d++) {
        const int wide = dts[d] == RA_F32;
        /* [1, 2, 4, SK] read with stride 2 on the keys (f32: every other float) */
        ra_tensor tm = {wide ? (void *)m32 : (void *)m16, dts[d], {1, 2, 4, SK},
                        {0, 4 * 2 * SK, 2 * SK, wide ? 2 : 1}};
        if (!wide) tm.stride[1] = 4 * SK, tm.stride[2] = SK;
        opt.attn_mask = &tm;
        const float bad[3] = {NAN, INFINITY, -INFINITY};
        for (int b = 0; b < 3; b++) {
            memset(m32, 0, sizeof m32);
            memset(m16, 0, sizeof m16);
            const int64_t at = 1 * tm.stride[1] + 2 * tm.stride[2] + 270 * tm.stride[3];
            if (wide) m32[at] = bad[b];
            else ra_convert(m16 + at, dts[d], &bad[b], RA_F32, 1);
            if (wide) m32[at + 1] = NAN; /* between the strided elements: never read */
            ra_status st = ra_attention(NULL, &o, &q, &k, &k, &opt);
            if (b == 2) {
                CHECK(st == RA_OK, "%s -Inf: %s", names[d], ra_last_error());
                continue;
            }
            CHECK(st == RA_ERR_ARGUMENT, "%s %g in the mask", names[d],
                  (double)bad[b]);
            CHECK(strstr(ra_last_error(), "[0, 1, 2, 270]") != NULL, "names the index: %s",
                  ra_last_error());
        }
        /* stride 0 on the queries: row 0 stands for every query */
        memset(m32, 0, sizeof m32);
        memset(m16, 0, sizeof m16);
        tm.stride[2] = 0;
        const int64_t at = tm.stride[1] + 5 * tm.stride[3];
        if (wide) m32[at] = INFINITY;
        else ra_convert(m16 + at, dts[d], &bad[1], RA_F32, 1);
        CHECK(ra_attention(NULL, &o, &q, &k, &k, &opt) == RA_ERR_ARGUMENT, "%s +Inf, stride 0",
              names[d]);
        CHECK(strstr(ra_last_error(), "[0, 1, 0, 5]") != NULL, "names the index: %s",
              ra_last_error());
    }
}

/* Every refusal, and hostile attn_mask views (as a fuzzer would build
 * them): negative strides, huge shapes and strides, NULL data. */
static void test_refusals(void)
{
    float buf[4 * 6 * 2 * 8] = {0}, out[4 * 2 * 8], lse[2 * 4], m[4 * 6];
    ra_tensor q = ra_tensor_4d(buf, RA_F32, 1, 4, 2, 8), k = ra_tensor_4d(buf, RA_F32, 1, 6, 1, 8);
    ra_tensor o = ra_tensor_4d(out, RA_F32, 1, 4, 2, 8);
    ra_tensor tm = {m, RA_F32, {1, 1, 4, 6}, {24, 24, 6, 1}};
    ra_attention_options opt = ra_attention_options_init();
    opt.attn_mask = &tm;
    opt.path = RA_PATH_REFERENCE; /* (outside ra_test_each_isa: no SIMD kernel) */
    for (int i = 0; i < 24; i++) m[i] = 0.0f;
    CHECK(ra_attention(NULL, &o, &q, &k, &k, &opt) == RA_OK, "a plain mask: %s", ra_last_error());
    m[7] = NAN;
    CHECK(ra_attention(NULL, &o, &q, &k, &k, &opt) == RA_ERR_ARGUMENT, "NaN in the mask");
    CHECK(strstr(ra_last_error(), "[0, 0, 1, 1]") != NULL, "names the index: %s", ra_last_error());
    m[7] = INFINITY;
    CHECK(ra_attention(NULL, &o, &q, &k, &k, &opt) == RA_ERR_ARGUMENT, "+Inf in the mask");
    m[7] = -INFINITY;
    CHECK(ra_attention(NULL, &o, &q, &k, &k, &opt) == RA_OK, "-Inf: %s", ra_last_error());
    /* RA_BOOL is the mask's alone */
    ra_tensor qb = ra_tensor_4d(buf, RA_BOOL, 1, 4, 2, 8);
    CHECK(ra_attention(NULL, &o, &qb, &k, &k, NULL) == RA_ERR_DTYPE, "RA_BOOL q");
    CHECK(ra_dtype_size(RA_BOOL) == 1, "RA_BOOL's size");
    uint8_t bytes[4];
    CHECK(ra_convert(bytes, RA_BOOL, buf, RA_F32, 4) == RA_ERR_DTYPE, "ra_convert to RA_BOOL");
    /* padding with Sq != Sk */
    uint8_t pad[6] = {1, 1, 1, 1, 1, 1};
    ra_attention_options po = ra_attention_options_init();
    po.padding_mask = pad;
    CHECK(ra_attention(NULL, &o, &q, &k, &k, &po) == RA_ERR_UNSUPPORTED, "padding, Sq != Sk");
    po.padding_mask = NULL;
    po.chunk = 2;
    CHECK(ra_attention(NULL, &o, &q, &k, &k, &po) == RA_ERR_UNSUPPORTED, "chunk, Sq != Sk");
    /* the mask overlapping an output */
    ra_tensor over = {out, RA_F32, {1, 1, 4, 6}, {24, 24, 6, 1}};
    opt.attn_mask = &over;
    CHECK(ra_attention(NULL, &o, &q, &k, &k, &opt) == RA_ERR_ARGUMENT, "mask overlapping out");
    float lse_big[8 * 2] = {0};
    ra_tensor on_lse = {lse_big, RA_F32, {1, 1, 1, 6}, {0, 0, 0, 1}};
    opt.attn_mask = &on_lse;
    CHECK(ra_attention_forward_lse(NULL, &o, lse_big, &q, &k, &k, &opt) == RA_ERR_ARGUMENT,
          "mask overlapping lse");
    /* hostile views */
    const ra_tensor hostile[] = {
        {m, RA_F32, {1, 1, 4, 6}, {24, 24, -6, 1}},             /* negative stride */
        {m, RA_F32, {1, 1, 4, 6}, {24, 24, 6, -1}},
        {m, RA_F32, {1, 1, INT64_MAX, 6}, {0, 0, 6, 1}},         /* huge shape */
        {m, RA_F32, {1, 1, 4, (int64_t)1 << 40}, {0, 0, 6, 1}},
        {m, RA_F32, {1, 1, 4, 6}, {0, 0, INT64_MAX / 2, 1}},     /* huge stride */
        {m, RA_F32, {1, 1, 0, 6}, {24, 24, 6, 1}},               /* empty */
        {m, RA_F32, {1, 1, -4, 6}, {24, 24, 6, 1}},
        {NULL, RA_F32, {1, 1, 4, 6}, {24, 24, 6, 1}},            /* NULL data */
        {m, RA_I8, {1, 1, 4, 6}, {24, 24, 6, 1}},                /* not a mask's dtype */
        {m, (ra_dtype)99, {1, 1, 4, 6}, {24, 24, 6, 1}},
        {m, RA_F32, {1, 3, 4, 6}, {24, 24, 6, 1}},               /* H = 2: neither 2 nor 1 */
    };
    const ra_status want[] = {RA_ERR_ARGUMENT, RA_ERR_ARGUMENT, RA_ERR_SHAPE, RA_ERR_SHAPE,
                              RA_ERR_OVERFLOW, RA_ERR_SHAPE, RA_ERR_SHAPE, RA_ERR_NULL,
                              RA_ERR_DTYPE, RA_ERR_DTYPE, RA_ERR_SHAPE};
    for (int i = 0; i < (int)(sizeof hostile / sizeof hostile[0]); i++) {
        opt.attn_mask = &hostile[i];
        for (int p = 0; p < 2; p++) {
            opt.path = p ? RA_PATH_FLASH : RA_PATH_REFERENCE;
            ra_status s = ra_attention(NULL, &o, &q, &k, &k, &opt);
            CHECK(s == want[i], "hostile view %d: status %d, not %d (%s)", i, (int)s,
                  (int)want[i], ra_last_error());
        }
    }
    /* decode and block calls take neither */
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, 8, 1, 8, RA_F32) == RA_OK, "cache");
    ra_tensor q1 = ra_tensor_4d(buf, RA_F32, 1, 1, 2, 8), o1 = ra_tensor_4d(out, RA_F32, 1, 1, 2, 8);
    ra_tensor m1 = {m, RA_F32, {1, 1, 1, 1}, {0, 0, 0, 1}};
    m[0] = 0.0f;
    opt = ra_attention_options_init();
    opt.attn_mask = &m1;
    CHECK(ra_attention_decode(NULL, cache, &o1, &q1, NULL, &opt) == RA_ERR_UNSUPPORTED,
          "decode with attn_mask: %s", ra_last_error());
    opt.attn_mask = NULL;
    opt.non_causal = 1;
    CHECK(ra_attention_decode(NULL, cache, &o1, &q1, NULL, &opt) == RA_ERR_UNSUPPORTED,
          "decode non_causal");
    ra_kv_cache_destroy(cache);
    CHECK(ra_attention_block_lse(NULL, &o, lse, &q, &k, &k, 2, 0, 0, &opt) == RA_ERR_UNSUPPORTED,
          "block non_causal");
}

/* Gradients of one case. */
typedef struct nc_grads {
    float *dq, *dk, *dv, dsinks[16];
} nc_grads;

static void grads_make(nc_grads *g, const nc_case *c)
{
    g->dq = malloc(4 * c->b * c->sq * c->h * c->d);
    g->dk = malloc(4 * c->b * c->sk * c->hkv * c->d);
    g->dv = malloc(4 * c->b * c->sk * c->hkv * c->d);
    memset(g->dsinks, 0, sizeof g->dsinks);
}

static void grads_free(nc_grads *g)
{
    free(g->dq);
    free(g->dk);
    free(g->dv);
}

/* The backward of a case on path (f32 inputs), dsinks with sinks. */
static ra_status run_backward(ra_context *ctx, const nc_case *c, nc_inputs *in,
                              ra_attention_path path, const float *dout, const float *out,
                              const float *lse, nc_grads *g)
{
    ra_tensor tq = ra_tensor_4d(in->q, RA_F32, c->b, c->sq, c->h, c->d);
    ra_tensor tk = ra_tensor_4d(in->k, RA_F32, c->b, c->sk, c->hkv, c->d);
    ra_tensor tv = ra_tensor_4d(in->v, RA_F32, c->b, c->sk, c->hkv, c->d);
    ra_tensor to = ra_tensor_4d((float *)out, RA_F32, c->b, c->sq, c->h, c->d);
    ra_tensor tdo = ra_tensor_4d((float *)dout, RA_F32, c->b, c->sq, c->h, c->d);
    ra_tensor dq = ra_tensor_4d(g->dq, RA_F32, c->b, c->sq, c->h, c->d);
    ra_tensor dk = ra_tensor_4d(g->dk, RA_F32, c->b, c->sk, c->hkv, c->d);
    ra_tensor dv = ra_tensor_4d(g->dv, RA_F32, c->b, c->sk, c->hkv, c->d);
    in->o.path = path;
    in->o.dsinks = c->sinks ? g->dsinks : NULL;
    ra_status st = ra_attention_backward(ctx, &dq, &dk, &dv, &tdo, &tq, &tk, &tv, &to, lse,
                                         &in->o);
    in->o.dsinks = NULL;
    return st;
}

/* The flash backward against the reference's on every case, with and
 * without dropout: 2e-5 of the largest gradient (float32 sums in tiles
 * against double sums, as test_attention_masks.c); the same bits on 1 and 3
 * threads; rows that see no key have dq exactly 0. */
static void test_backward(void)
{
    ra_context *ctx3;
    CHECK(ra_context_create(&ctx3, 3) == RA_OK, "ctx");
    for (int ci = 0; ci < N_CASES; ci++) {
        const nc_case *c = &cases[ci];
        nc_inputs in;
        inputs_make(&in, c, 400 + ci);
        in.o.dropout = ci % 3 == 1 ? 0.25f : 0.0f;
        in.o.seed = 7 + ci;
        int64_t nq = c->b * c->sq * c->h * c->d, nk = c->b * c->sk * c->hkv * c->d;
        int64_t nl = c->b * c->h * c->sq;
        float *out = malloc(4 * nq), *lse = malloc(4 * nl), *dout = malloc(4 * nq);
        ra_test_fill(dout, nq, 900 + ci);
        nc_grads ref, fl, fl3;
        grads_make(&ref, c);
        grads_make(&fl, c);
        grads_make(&fl3, c);
        CHECK(run_forward(NULL, c, &in, RA_F32, RA_PATH_FLASH, out, lse, in.k, in.v, in.q) ==
                  RA_OK, "case %d forward: %s", ci, ra_last_error());
        CHECK(run_backward(NULL, c, &in, RA_PATH_REFERENCE, dout, out, lse, &ref) == RA_OK,
              "case %d reference: %s", ci, ra_last_error());
        CHECK(run_backward(NULL, c, &in, RA_PATH_FLASH, dout, out, lse, &fl) == RA_OK,
              "case %d flash: %s", ci, ra_last_error());
        CHECK(run_backward(ctx3, c, &in, RA_PATH_FLASH, dout, out, lse, &fl3) == RA_OK,
              "case %d flash, 3 threads: %s", ci, ra_last_error());
        double eq = ra_test_max_rel_diff(fl.dq, ref.dq, nq), ek = ra_test_max_rel_diff(fl.dk, ref.dk, nk);
        double ev = ra_test_max_rel_diff(fl.dv, ref.dv, nk);
        double es = c->sinks ? ra_test_max_rel_diff(fl.dsinks, ref.dsinks, c->h) : 0;
        CHECK(eq <= 2e-5 && ek <= 2e-5 && ev <= 2e-5 && es <= 2e-5, "case %d: flash vs reference "
              "dq %.3g dk %.3g dv %.3g dsinks %.3g", ci, eq, ek, ev, es);
        CHECK(memcmp(fl.dq, fl3.dq, 4 * nq) == 0 && memcmp(fl.dk, fl3.dk, 4 * nk) == 0 &&
                  memcmp(fl.dv, fl3.dv, 4 * nk) == 0 &&
                  memcmp(fl.dsinks, fl3.dsinks, sizeof fl.dsinks) == 0,
              "case %d: 3 threads change the gradients' bits", ci);
        for (int64_t b = 0; b < c->b; b++) /* rows that see no key: lse -Inf or the sink */
            for (int64_t h = 0; h < c->h; h++)
                for (int64_t i = 0; i < c->sq; i++) {
                    float l = lse[(b * c->h + h) * c->sq + i];
                    if (!(l == -INFINITY || (c->sinks && l == in.sinks[h] && c->dead && i % 5 == 2)))
                        continue;
                    for (int64_t d = 0; d < c->d; d++) {
                        float x = fl.dq[((b * c->sq + i) * c->h + h) * c->d + d];
                        float y = ref.dq[((b * c->sq + i) * c->h + h) * c->d + d];
                        CHECK(x == 0.0f && y == 0.0f, "case %d: a row seeing no key has dq "
                              "%g (flash), %g (reference)", ci, x, y);
                    }
                }
        grads_free(&ref);
        grads_free(&fl);
        grads_free(&fl3);
        free(out);
        free(lse);
        free(dout);
        inputs_free(&in);
    }
    ra_context_destroy(ctx3);
}

/* L = sum(out * dout) from the oracle, in double. */
static double oracle_loss(const nc_case *c, const nc_inputs *in, const float *dout)
{
    int64_t nq = c->b * c->sq * c->h * c->d, nl = c->b * c->h * c->sq;
    double *out = malloc(8 * nq), *lse = malloc(8 * nl), loss = 0;
    oracle(c, in, out, lse);
    for (int64_t i = 0; i < nq; i++) loss += out[i] * dout[i];
    free(out);
    free(lse);
    return loss;
}

/* The reference backward against central differences of the oracle's
 * loss (step 2^-8 on float32 inputs, exact; the loss's curvature gives an
 * error of order 1e-5 of the gradients): 1e-3 of the largest gradient. */
static void test_backward_finite_differences(void)
{
    static const nc_case small[] = {
        {1, 5, 9, 2, 1, 4, 1, 0, 0, 0, 1, 0, 1, 0, 0},   /* non-causal, bool, a dead row */
        {1, 4, 11, 2, 2, 6, 0, 0, 3.0, 0, 2, 1, 0, 0, 0}, /* Sq < Sk, f32 mask, cap */
        {1, 9, 4, 2, 1, 4, 1, 3, 0, 1, 3, 3, 0, 0, 0},   /* Sq > Sk, window, sinks */
    };
    for (int ci = 0; ci < 3; ci++) {
        const nc_case *c = &small[ci];
        nc_inputs in;
        inputs_make(&in, c, 500 + ci);
        int64_t nq = c->b * c->sq * c->h * c->d, nk = c->b * c->sk * c->hkv * c->d;
        int64_t nl = c->b * c->h * c->sq;
        float *out = malloc(4 * nq), *lse = malloc(4 * nl), *dout = malloc(4 * nq);
        ra_test_fill(dout, nq, 77);
        nc_grads g;
        grads_make(&g, c);
        CHECK(run_forward(NULL, c, &in, RA_F32, RA_PATH_REFERENCE, out, lse, in.k, in.v, in.q) ==
                  RA_OK, "forward");
        CHECK(run_backward(NULL, c, &in, RA_PATH_REFERENCE, dout, out, lse, &g) == RA_OK, "%s",
              ra_last_error());
        float *x[3] = {in.q, in.k, in.v}, *grad[3] = {g.dq, g.dk, g.dv};
        int64_t n[3] = {nq, nk, nk};
        const float step = 1.0f / 256;
        for (int t = 0; t < 3; t++) {
            double worst = 0, top = 0;
            for (int64_t i = 0; i < n[t]; i++) top = fmax(top, fabs(grad[t][i]));
            for (int64_t i = 0; i < n[t]; i++) {
                float keep = x[t][i];
                x[t][i] = keep + step;
                double up = oracle_loss(c, &in, dout);
                x[t][i] = keep - step;
                double down = oracle_loss(c, &in, dout);
                x[t][i] = keep;
                worst = fmax(worst, fabs((up - down) / (2 * step) - grad[t][i]));
            }
            CHECK(worst <= 1e-3 * fmax(top, 1e-3), "case %d, %s: finite differences off by %.3g "
                  "(largest gradient %.3g)", ci, t == 0 ? "dq" : t == 1 ? "dk" : "dv", worst, top);
        }
        grads_free(&g);
        free(out);
        free(lse);
        free(dout);
        inputs_free(&in);
    }
}

/* The backward's refusals: Sq != Sk with padding; the block backward
 * with attn_mask. */
static void test_backward_refusals(void)
{
    float buf[4 * 6 * 2 * 8] = {0}, g[3][4 * 6 * 2 * 8], lse[2 * 4] = {0};
    ra_tensor q = ra_tensor_4d(buf, RA_F32, 1, 4, 2, 8), k = ra_tensor_4d(buf, RA_F32, 1, 6, 1, 8);
    ra_tensor dq = ra_tensor_4d(g[0], RA_F32, 1, 4, 2, 8), dk = ra_tensor_4d(g[1], RA_F32, 1, 6, 1, 8);
    ra_tensor dv = ra_tensor_4d(g[2], RA_F32, 1, 6, 1, 8);
    uint8_t pad[6] = {1, 1, 1, 1, 1, 1};
    ra_attention_options o = ra_attention_options_init();
    o.path = RA_PATH_REFERENCE;
    o.padding_mask = pad;
    CHECK(ra_attention_backward(NULL, &dq, &dk, &dv, &q, &q, &k, &k, NULL, NULL, &o) ==
              RA_ERR_UNSUPPORTED, "padding, Sq != Sk: %s", ra_last_error());
    float m[24] = {0};
    ra_tensor tm = {m, RA_F32, {1, 1, 4, 6}, {24, 24, 6, 1}};
    o = ra_attention_options_init();
    o.attn_mask = &tm;
    ra_tensor k4 = ra_tensor_4d(buf, RA_F32, 1, 4, 1, 8), dk4 = ra_tensor_4d(g[1], RA_F32, 1, 4, 1, 8);
    ra_tensor dv4 = ra_tensor_4d(g[2], RA_F32, 1, 4, 1, 8);
    CHECK(ra_attention_block_backward(NULL, &dq, &dk4, &dv4, &q, &q, &k4, &k4, &q, lse, 0, 0, 0,
                                      &o) == RA_ERR_UNSUPPORTED, "block backward with attn_mask");
}

/* The layer: config.non_causal on the uncached calls, attn_mask through
 * the call's options.  A non-causal layer given the causal mask as a bool
 * attn_mask gives the causal layer's y (1e-5 of max|y|: float32 sums of
 * masked tiles in another order); flash and reference paths agree on the
 * forward and on the training backward's weight gradients (1e-4 of the
 * largest: float32 through the projections); a call's own non_causal
 * makes its attn_mask the whole mask; the cached, paged and phased cached
 * calls refuse non_causal. */
static void test_layer(void)
{
    const int64_t B = 2, S = 70, dim = 64, H = 4, Hkv = 2, D = 16, n = B * S;
    float *x = malloc(4 * n * dim), *wq = malloc(4 * H * D * dim), *wk = malloc(4 * Hkv * D * dim);
    float *wv = malloc(4 * Hkv * D * dim), *wo = malloc(4 * dim * H * D);
    float *y1 = malloc(4 * n * dim), *y2 = malloc(4 * n * dim), *dy = malloc(4 * n * dim);
    float *dx = malloc(4 * n * dim);
    ra_test_fill(x, n * dim, 1);
    ra_test_fill(wq, H * D * dim, 2);
    ra_test_fill(wk, Hkv * D * dim, 3);
    ra_test_fill(wv, Hkv * D * dim, 4);
    ra_test_fill(wo, dim * H * D, 5);
    ra_test_fill(dy, n * dim, 6);
    uint8_t *causal = malloc(S * S), *mixed = malloc(B * S * S);
    for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < S; j++) causal[i * S + j] = j <= i;
    for (int64_t t = 0; t < B * S * S; t++) mixed[t] = (t * 2654435761u >> 7) % 4 != 0;
    ra_tensor tcausal = {causal, RA_BOOL, {1, 1, S, S}, {0, 0, S, 1}};
    ra_tensor tmixed = {mixed, RA_BOOL, {B, 1, S, S}, {S * S, 0, S, 1}};
    ra_rope_config rope = ra_rope_config_default(0);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = dim, .n_heads = H,
                           .n_kv_heads = Hkv, .head_dim = D, .rope = &rope};
    ra_layer_weights w = {.struct_size = sizeof w, .wq = wq, .wk = wk, .wv = wv, .wo = wo};
    ra_layer *dec, *enc;
    CHECK(ra_layer_create(&dec, &cfg, &w) == RA_OK, "decoder");
    cfg.non_causal = 1;
    CHECK(ra_layer_create(&enc, &cfg, &w) == RA_OK, "encoder: %s", ra_last_error());
    ra_attention_options o = ra_attention_options_init();
    o.path = RA_PATH_FLASH;
    CHECK(ra_layer_forward(NULL, dec, y1, x, B, S, NULL, &o) == RA_OK, "causal");
    o.attn_mask = &tcausal;
    CHECK(ra_layer_forward(NULL, enc, y2, x, B, S, NULL, &o) == RA_OK, "%s", ra_last_error());
    double e = ra_test_max_rel_diff(y2, y1, n * dim);
    CHECK(e <= 1e-5, "non-causal with the causal mask vs causal: %.3g", e);
    o.attn_mask = NULL;
    CHECK(ra_layer_forward(NULL, enc, y2, x, B, S, NULL, &o) == RA_OK, "%s", ra_last_error());
    CHECK(ra_test_max_rel_diff(y2, y1, n * dim) > 1e-2, "non_causal changed nothing");
    /* paths agree, with a mask per batch row; train + backward too */
    o.attn_mask = &tmixed;
    for (int win = 0; win < 2; win++) {
        ra_layer *l = enc;
        if (win) {
            cfg.window = 5; /* both ways: 4 keys each side */
            CHECK(ra_layer_create(&l, &cfg, &w) == RA_OK, "window");
            cfg.window = 0;
        }
        float *dw[2][4];
        for (int p = 0; p < 2; p++) {
            o.path = p ? RA_PATH_FLASH : RA_PATH_REFERENCE;
            ra_layer_tape *tape;
            CHECK(ra_layer_tape_create(&tape, l, n) == RA_OK, "tape");
            CHECK(ra_layer_forward_train(NULL, l, p ? y2 : y1, tape, x, B, S, NULL, &o) == RA_OK,
                  "train: %s", ra_last_error());
            for (int i = 0; i < 4; i++) dw[p][i] = calloc(H * D * dim, 4);
            ra_layer_grads g = {.struct_size = sizeof g, .dwq = dw[p][0], .dwk = dw[p][1],
                                .dwv = dw[p][2], .dwo = dw[p][3]};
            CHECK(ra_layer_backward(NULL, l, dx, &g, tape, dy) == RA_OK, "backward: %s",
                  ra_last_error());
            ra_layer_tape_destroy(tape);
        }
        e = ra_test_max_rel_diff(y2, y1, n * dim);
        CHECK(e <= 1e-5, "window %d: layer paths differ by %.3g", win, e);
        for (int i = 0; i < 4; i++) {
            int64_t cnt = i == 0 || i == 3 ? H * D * dim : Hkv * D * dim;
            e = ra_test_max_rel_diff(dw[1][i], dw[0][i], cnt);
            CHECK(e <= 1e-4, "window %d: gradient %d differs by %.3g", win, i, e);
            free(dw[0][i]);
            free(dw[1][i]);
        }
        if (win) ra_layer_destroy(l);
    }
    /* options' non_causal: the attn_mask is the whole mask, the causal
     * mask not applied, the window only on the earlier keys (a decoder with
     * window 5 = the encoder without one under the mask cut to j > i - 5,
     * the bound transformers' sliding masks always keep; a mask already
     * cut gives the decoder the same bits); without a mask, or on an
     * encoder: refused */
    cfg.non_causal = 0;
    cfg.window = 5;
    ra_layer *slid;
    CHECK(ra_layer_create(&slid, &cfg, &w) == RA_OK, "window 5");
    cfg.window = 0;
    uint8_t *cut = malloc(B * S * S);
    for (int64_t t = 0; t < B * S * S; t++) cut[t] = mixed[t] && t % S > t / S % S - 5;
    ra_tensor tcut = {cut, RA_BOOL, {B, 1, S, S}, {S * S, 0, S, 1}};
    o.path = RA_PATH_FLASH;
    o.attn_mask = &tcut;
    CHECK(ra_layer_forward(NULL, enc, y1, x, B, S, NULL, &o) == RA_OK, "%s", ra_last_error());
    o.non_causal = 1;
    CHECK(ra_layer_forward(NULL, slid, y2, x, B, S, NULL, &o) == RA_OK, "%s", ra_last_error());
    CHECK(!memcmp(y1, y2, 4 * n * dim), "options' non_causal, a mask with the window");
    o.attn_mask = &tmixed;
    CHECK(ra_layer_forward(NULL, slid, y2, x, B, S, NULL, &o) == RA_OK, "%s", ra_last_error());
    CHECK(!memcmp(y1, y2, 4 * n * dim), "options' non_causal: the window's earlier bound lost");
    int64_t later = 0; /* keys the cut mask keeps 5 or more after their query */
    for (int64_t t = 0; t < B * S * S; t++) later += cut[t] && t % S >= t / S % S + 5;
    CHECK(later > 0, "no later keys past the window");
    o.path = RA_PATH_REFERENCE; /* the reference's rows, the same keys */
    CHECK(ra_layer_forward(NULL, slid, y2, x, B, S, NULL, &o) == RA_OK, "%s", ra_last_error());
    CHECK(ra_test_max_rel_diff(y2, y1, n * dim) <= 1e-5, "reference path");
    o.path = RA_PATH_FLASH;
    free(cut);
    CHECK(ra_layer_forward(NULL, enc, y1, x, B, S, NULL, &o) == RA_ERR_ARGUMENT,
          "options' non_causal on a non_causal layer");
    o.attn_mask = NULL;
    CHECK(ra_layer_forward(NULL, dec, y1, x, B, S, NULL, &o) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "without an attn_mask"), "%s", ra_last_error());
    ra_layer_destroy(slid);
    /* whole_masks: an attn_mask needs non_causal; not on an encoder */
    cfg.non_causal = 0;
    cfg.whole_masks = 1;
    CHECK(ra_layer_create(&slid, &cfg, &w) == RA_OK, "whole_masks: %s", ra_last_error());
    o.attn_mask = &tmixed;
    CHECK(ra_layer_forward(NULL, slid, y2, x, B, S, NULL, &o) == RA_OK, "%s", ra_last_error());
    o.non_causal = 0;
    CHECK(ra_layer_forward(NULL, slid, y2, x, B, S, NULL, &o) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "whole_masks"), "%s", ra_last_error());
    o.attn_mask = NULL;
    CHECK(ra_layer_forward(NULL, slid, y2, x, B, S, NULL, &o) == RA_OK, "no mask: %s",
          ra_last_error());
    ra_layer_destroy(slid);
    cfg.non_causal = 1;
    CHECK(ra_layer_create(&slid, &cfg, &w) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "whole_masks"), "%s", ra_last_error());
    cfg.whole_masks = 0;
    o.non_causal = 0;
    ra_tensor wrong = {mixed, RA_BOOL, {B, 1, S - 1, S}, {S * S, 0, S, 1}};
    o.attn_mask = &wrong;
    CHECK(ra_layer_forward(NULL, dec, y1, x, B, S, NULL, &o) == RA_ERR_SHAPE, "mask's shape");
    ra_tensor on_y = {y1, RA_F32, {1, 1, S, S}, {0, 0, S, 1}};
    memset(y1, 0, 4 * n * dim);
    o.attn_mask = &on_y;
    CHECK(ra_layer_forward(NULL, dec, y1, x, B, S, NULL, &o) == RA_ERR_ARGUMENT, "mask on y");
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, B, S, Hkv, D, RA_F32) == RA_OK, "cache");
    CHECK(ra_layer_forward_cached(NULL, enc, cache, y1, x, B, S, NULL) == RA_ERR_UNSUPPORTED,
          "cached non_causal");
    ra_layer_step *step;
    ra_positions at0 = {.struct_size = sizeof at0};
    ra_status st = ra_layer_forward_cached_begin(&step, NULL, enc, y1, x, B, S, &at0);
    CHECK(st == RA_ERR_UNSUPPORTED, "phased cached non_causal: %d %s", (int)st, ra_last_error());
    ra_kv_cache_destroy(cache);
    ra_kv_pool *pool;
    CHECK(ra_kv_pool_create(&pool, 8, 16, 2, Hkv, D, RA_F32) == RA_OK, "pool: %s", ra_last_error());
    int64_t id = 0, n_new = 1;
    CHECK(ra_layer_forward_paged(NULL, enc, pool, &id, 1, y1, x, 1, &n_new, NULL) ==
              RA_ERR_UNSUPPORTED,
          "paged non_causal: %s", ra_last_error());
    ra_kv_pool_destroy(pool);
    ra_layer_destroy(dec);
    ra_layer_destroy(enc);
    free(x), free(wq), free(wk), free(wv), free(wo), free(y1), free(y2), free(dy), free(dx);
    free(causal), free(mixed);
}

/* A masked prefill of 8 tokens under mask first runs, and the next call
 * of 7 under mask next is refused (RA_ERR_UNSUPPORTED) naming what. */
static void first_then_refused(ra_layer *l, ra_kv_cache *cache, float *ys, const float *x,
                               int64_t B, ra_attention_options *co, const ra_tensor *first,
                               const ra_tensor *next, const char *what)
{
    co->attn_mask = first;
    CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, x, B, 8, NULL, co) == RA_OK,
          "the first call (%s): %s", what, ra_last_error());
    co->attn_mask = next;
    CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, x, B, 7, NULL, co) ==
              RA_ERR_UNSUPPORTED && strstr(ra_last_error(), what), "%s", ra_last_error());
}

/* ra_layer_forward_cached_mask: a prefill in chunks of 8, 7 and 5 tokens,
 * each under its rows of one [B, 1, S, S] mask (random, cut at each
 * chunk's end: a chunk sees no later one's keys) over the cached and new
 * keys, with non_causal (the mask, the layer's window 5 bounding only the
 * earlier keys, counted from the sequence's start) equals ra_layer_forward
 * under the whole mask (1e-5 of max|y|: float32
 * sums in another order; an f16 cache 4e-3: k and v rounded to f16); an
 * all-true mask without non_causal equals ra_layer_forward_cached (the
 * causal mask and window still apply); the refusals. */
static void test_layer_cached_mask(void)
{
    const int64_t B = 2, S = 20, dim = 32, H = 4, Hkv = 2, D = 8, n = B * S * dim;
    const int64_t chunks[3] = {8, 7, 5};
    float *x = malloc(4 * n), *w[4], *want = malloc(4 * n), *got = malloc(4 * n);
    const int64_t rows[4] = {H * D, Hkv * D, Hkv * D, dim}, cols[4] = {dim, dim, dim, H * D};
    for (int i = 0; i < 4; i++) {
        w[i] = malloc(4 * rows[i] * cols[i]);
        ra_test_fill(w[i], rows[i] * cols[i], 20 + i);
    }
    ra_test_fill(x, n, 19);
    uint8_t *m = malloc(B * S * S), *ones = malloc(B * S * S);
    memset(ones, 1, B * S * S);
    for (int64_t t = 0; t < B * S * S; t++) {
        const int64_t i = t / S % S, j = t % S, end = i < 8 ? 8 : i < 15 ? 15 : S;
        m[t] = j < end && (j == i || (t * 2654435761u >> 9) % 3 != 0);
    }
    ra_rope_config rope = ra_rope_config_default(0);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = dim, .n_heads = H,
                           .n_kv_heads = Hkv, .head_dim = D, .rope = &rope, .window = 5};
    ra_layer_weights lw = {.struct_size = sizeof lw, .wq = w[0], .wk = w[1], .wv = w[2],
                           .wo = w[3]};
    ra_layer *l;
    CHECK(ra_layer_create(&l, &cfg, &lw) == RA_OK, "%s", ra_last_error());
    ra_tensor whole = ra_tensor_4d(m, RA_BOOL, B, 1, S, S);
    ra_attention_options o = ra_attention_options_init();
    o.attn_mask = &whole;
    o.non_causal = 1;
    CHECK(ra_layer_forward(NULL, l, want, x, B, S, NULL, &o) == RA_OK, "%s", ra_last_error());
    float *xs = malloc(4 * n), *ys = malloc(4 * n), *plain = malloc(4 * n);
    for (int pass = 0; pass < 3; pass++) { /* f32 masked, f16 masked, f32 all-true causal */
        ra_kv_cache *cache = NULL;
        CHECK(ra_kv_cache_create(&cache, B, S, Hkv, D, pass == 1 ? RA_F16 : RA_F32) == RA_OK,
              "%s", ra_last_error());
        for (int c = 0, start = 0; cache && c < 3; start += (int)chunks[c++]) {
            const int64_t len = chunks[c], end = start + len;
            for (int64_t b = 0; b < B; b++)
                memcpy(xs + b * len * dim, x + (b * S + start) * dim, 4 * len * dim);
            ra_tensor view = {(pass == 2 ? ones : m) + start * S, RA_BOOL, {B, 1, len, end},
                              {S * S, 0, S, 1}};
            ra_attention_options co = ra_attention_options_init();
            co.attn_mask = &view;
            co.non_causal = pass < 2;
            CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, xs, B, len, NULL, &co) ==
                      RA_OK, "pass %d chunk %d: %s", pass, c, ra_last_error());
            for (int64_t b = 0; b < B; b++)
                memcpy(got + (b * S + start) * dim, ys + b * len * dim, 4 * len * dim);
        }
        if (pass == 2) { /* the same chunks through ra_layer_forward_cached */
            ra_kv_cache_reset(cache);
            for (int c = 0, start = 0; c < 3; start += (int)chunks[c++]) {
                const int64_t len = chunks[c];
                for (int64_t b = 0; b < B; b++)
                    memcpy(xs + b * len * dim, x + (b * S + start) * dim, 4 * len * dim);
                CHECK(ra_layer_forward_cached(NULL, l, cache, ys, xs, B, len, NULL) == RA_OK,
                      "%s", ra_last_error());
                for (int64_t b = 0; b < B; b++)
                    memcpy(plain + (b * S + start) * dim, ys + b * len * dim, 4 * len * dim);
            }
        }
        const double e = ra_test_max_rel_diff(got, pass == 2 ? plain : want, n);
        CHECK(e <= (pass == 1 ? 4e-3 : 1e-5), "pass %d: %.3g of max|y|", pass, e);
        ra_kv_cache_destroy(cache);
    }
    /* refusals: an 8-bit cache holding tokens, another option, a mask of
     * the wrong key length */
    ra_kv_cache *cache = NULL;
    CHECK(ra_kv_cache_create(&cache, B, S, Hkv, D, RA_I8) == RA_OK, "%s", ra_last_error());
    ra_tensor first = {m, RA_BOOL, {B, 1, 8, 8}, {S * S, 0, S, 1}};
    ra_tensor next = {m + 8 * S, RA_BOOL, {B, 1, 7, 15}, {S * S, 0, S, 1}};
    ra_attention_options co = ra_attention_options_init();
    co.non_causal = 1;
    first_then_refused(l, cache, ys, x, B, &co, &first, &next, "8-bit");
    ra_kv_cache_destroy(cache);
    CHECK(ra_kv_cache_create(&cache, B, S, Hkv, D, RA_F32) == RA_OK, "%s", ra_last_error());
    co.attn_mask = &first;
    co.padding_mask = ones;
    CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, x, B, 8, NULL, &co) ==
              RA_ERR_ARGUMENT, "padding_mask: %s", ra_last_error());
    co.padding_mask = NULL;
    co.attn_mask = &next;
    CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, x, B, 7, NULL, &co) == RA_ERR_SHAPE,
          "15 keys in an empty cache: %s", ra_last_error());
    /* a chunked layer: its prefill's first call only (Sk != Sq refuses
     * chunk in the kernel's masks) */
    ra_layer_destroy(l);
    cfg.window = 0;
    cfg.chunk = 4;
    CHECK(ra_layer_create(&l, &cfg, &lw) == RA_OK, "%s", ra_last_error());
    ra_kv_cache_reset(cache);
    co.non_causal = 0;
    first_then_refused(l, cache, ys, x, B, &co, &first, &next, "chunk 4");
    ra_kv_cache_destroy(cache);
    ra_layer_destroy(l);
    for (int i = 0; i < 4; i++) free(w[i]);
    free(x), free(want), free(got), free(xs), free(ys), free(plain), free(m), free(ones);
}

/* The cases that reach the SIMD kernels, run on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_flash_matches_reference);
    RUN(test_short_causal_mask);
    RUN(test_fully_masked_rows);
    RUN(test_dropout);
    RUN(test_thread_determinism);
    RUN(test_backward);
    RUN(test_layer);
    RUN(test_layer_cached_mask);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    RUN(test_reference_matches_oracle);
    RUN(test_refusals);
    RUN(test_mask_values);
    RUN(test_backward_finite_differences);
    RUN(test_backward_refusals);
    return ra_test_summary("attention_noncausal");
}
