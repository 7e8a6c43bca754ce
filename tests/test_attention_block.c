/*
 * test_attention_block.c — ra_attention_block_lse (queries at q_start + i
 * against keys at k_start + j) and ra_attention_decode_lse (decoding with
 * lse, queries placed by q_start) against a plain double reference written
 * here: before, across and after the diagonal, keys wholly after the
 * queries, windows that hide whole rows, softcap, sinks, GQA, odd D; the
 * same bits as ra_attention_forward_lse and ra_attention_decode where the
 * calls coincide; short blocks (a decoding step's few queries) over many
 * shapes; argument checks.  ra_attention_block_backward: the
 * blocks of a split of a whole sequence summed against ra_attention_backward
 * over it, its bits on the diagonal block, any thread count the same bits.
 *
 *   q, out: [B, Sq, H, D]   k, v: [B, Sk, Hkv, D]   lse: [B, H, Sq]
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

typedef struct block_case {
    int64_t B, Sq, Sk, H, Hkv, D, q_start, k_start;
    double softcap;
    int64_t window;
    int sinks;
    int64_t chunk; /* chunks of global positions from 0 */
} block_case;

/* out and lse of query rows at q_start + i against keys at k_start + j (key
 * j seen when k_start + j <= q_start + i, within the window and the chunk), in
 * double.  Rows that see nothing: 0 and -Inf (the sink with sinks). */
static void reference(const block_case *c, const float *q, const float *k, const float *v,
                      const float *sinks, float *out, float *lse)
{
    const int64_t H = c->H, D = c->D, rep = c->H / c->Hkv;
    const double scale = 1.0 / sqrt((double)D);
    double *p = malloc((size_t)c->Sk * sizeof *p), *acc = malloc((size_t)D * sizeof *acc);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < c->Sq; i++) {
                const int64_t pos = c->q_start + i, g = h / rep;
                const float *qi = q + ((b * c->Sq + i) * H + h) * D;
                double m = sinks ? sinks[h] : -INFINITY;
                for (int64_t j = 0; j < c->Sk; j++) {
                    const int64_t kp = c->k_start + j;
                    p[j] = NAN;
                    if (kp > pos || (c->window && kp <= pos - c->window) ||
                        (c->chunk && kp / c->chunk != pos / c->chunk))
                        continue;
                    const float *kj = k + ((b * c->Sk + j) * c->Hkv + g) * D;
                    double s = 0;
                    for (int64_t d = 0; d < D; d++) s += (double)qi[d] * kj[d];
                    s *= scale;
                    if (c->softcap > 0) s = c->softcap * tanh(s / c->softcap);
                    p[j] = s;
                    m = s > m ? s : m;
                }
                double l = sinks ? exp(sinks[h] - m) : 0;
                for (int64_t d = 0; d < D; d++) acc[d] = 0;
                for (int64_t j = 0; j < c->Sk; j++) {
                    if (isnan(p[j])) continue;
                    const double e = exp(p[j] - m);
                    const float *vj = v + ((b * c->Sk + j) * c->Hkv + g) * D;
                    l += e;
                    for (int64_t d = 0; d < D; d++) acc[d] += e * vj[d];
                }
                float *o = out + ((b * c->Sq + i) * H + h) * D;
                const int seen = m != -INFINITY && (l > (sinks ? exp(sinks[h] - m) : 0));
                for (int64_t d = 0; d < D; d++) o[d] = seen ? (float)(acc[d] / l) : 0.0f;
                lse[(b * H + h) * c->Sq + i] =
                    seen ? (float)(m + log(l)) : sinks ? sinks[h] : -INFINITY;
            }
    free(p);
    free(acc);
}

static void run_case(ra_context *ctx, const block_case *c, uint64_t seed)
{
    const int64_t nq = c->B * c->Sq * c->H * c->D, nk = c->B * c->Sk * c->Hkv * c->D;
    float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
    float *v = malloc(sizeof(float) * nk), *sinks = malloc(sizeof(float) * c->H);
    float *out = malloc(sizeof(float) * nq), *ref = malloc(sizeof(float) * nq);
    float *lse = malloc(sizeof(float) * c->B * c->H * c->Sq);
    float *ref_lse = malloc(sizeof(float) * c->B * c->H * c->Sq);
    ra_test_fill(q, nq, seed);
    ra_test_fill(k, nk, seed + 1);
    ra_test_fill(v, nk, seed + 2);
    ra_test_fill(sinks, c->H, seed + 3);
    for (int64_t i = 0; i < nq; i++) q[i] *= 3.0f; /* peakier softmax */
    ra_attention_options o = ra_attention_options_init();
    o.softcap = c->softcap;
    o.window = c->window;
    o.chunk = c->chunk;
    o.sinks = c->sinks ? sinks : NULL;
    ra_tensor tq = ra_tensor_4d(q, RA_F32, c->B, c->Sq, c->H, c->D);
    ra_tensor to = ra_tensor_4d(out, RA_F32, c->B, c->Sq, c->H, c->D);
    ra_tensor tk = ra_tensor_4d(k, RA_F32, c->B, c->Sk, c->Hkv, c->D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, c->B, c->Sk, c->Hkv, c->D);
    ra_status st = ra_attention_block_lse(ctx, &to, lse, &tq, &tk, &tv, c->q_start, c->k_start, 0,
                                          &o);
    CHECK(st == RA_OK, "block: %s", ra_last_error());
    reference(c, q, k, v, o.sinks, ref, ref_lse);
    double e = ra_test_max_rel_diff(out, ref, nq), el = 0;
    for (int64_t i = 0; i < c->B * c->H * c->Sq; i++) {
        double d = ref_lse[i] == lse[i] ? 0 : fabs(ref_lse[i] - lse[i]);
        el = d > el || isnan(d) ? d : el;
    }
    CHECK(e <= 2e-5 && el <= 2e-5, "Sq %lld Sk %lld q_start %lld k_start %lld window %lld: out "
          "off by %.3g, lse by %.3g", (long long)c->Sq, (long long)c->Sk, (long long)c->q_start,
          (long long)c->k_start, (long long)c->window, e, el);
    free(q), free(k), free(v), free(sinks), free(out), free(ref), free(lse), free(ref_lse);
}

static void test_block_matches_reference(void)
{
    const block_case cases[] = {
        /* B, Sq, Sk, H, Hkv, D, q_start, k_start, softcap, window, sinks, chunk */
        {1, 40, 40, 4, 2, 16, 100, 100, 0, 0, 0, 0},  /* the diagonal */
        {2, 30, 70, 4, 1, 72, 200, 100, 0, 0, 0, 0},  /* keys wholly before */
        {1, 37, 130, 8, 2, 80, 93, 0, 0, 0, 0, 0},    /* a prefill against keys and its own */
        {1, 33, 50, 2, 2, 24, 10, 0, 0, 0, 0, 0},     /* keys past the last query */
        {1, 20, 20, 2, 1, 8, 0, 30, 0, 0, 1, 0},      /* keys after every query: all empty */
        {1, 70, 64, 4, 2, 32, 90, 0, 0, 40, 0, 0},    /* a window hides some rows wholly */
        {2, 45, 45, 6, 3, 10, 45, 0, 15.0, 50, 1, 0}, /* softcap, window, sinks */
        {1, 65, 129, 4, 4, 64, 64, 0, 0, 0, 1, 0},
        {1, 70, 90, 4, 2, 32, 100, 30, 0, 0, 0, 64},    /* chunks across both blocks */
        {2, 40, 100, 4, 1, 16, 150, 20, 12.0, 0, 1, 48}, /* keys in earlier chunks only */
        {1, 37, 130, 8, 2, 80, 93, 0, 0, 20, 0, 50},     /* a window and chunks */
    };
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, &cases[i], 40 + i);
    ra_context_destroy(ctx);
}

/* K or V rows of case c from src to dst: [B, Sk, Hkv, D] to head-major
 * [B, Hkv, Sk, D] (back: the other way), or as they are (head_major 0). */
static void kv_layout(float *dst, const float *src, const block_case *c, int head_major,
                      int back)
{
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t j = 0; j < c->Sk; j++)
            for (int64_t g = 0; g < c->Hkv; g++) {
                const int64_t rows = ((b * c->Sk + j) * c->Hkv + g) * c->D;
                const int64_t heads = head_major ? ((b * c->Hkv + g) * c->Sk + j) * c->D : rows;
                memcpy(dst + (back ? rows : heads), src + (back ? heads : rows),
                       sizeof(float) * c->D);
            }
}

/* Short blocks, a few query rows (the flash path runs them on the decode
 * kernel: attention_short.c), against the reference: Sq 1 .. 8, Sk 1 ..
 * 5000 (across the decode's chunks of 1024), groups of 1 to 8 query heads,
 * 1 to 3 kv heads, D 13 to 128, the queries at the keys' end (a decoding
 * step), inside them, before and after them, with windows, chunks,
 * soft-caps and sinks; K and V token-major or head-major (transformers'
 * cache, [B, Hkv, Sk, D] seen as [B, Sk, Hkv, D]); f32, f16 and bf16 (the
 * reference on the 16-bit values, widened exactly).  Tolerance as the
 * longer blocks': 2e-5 of max|out| and 2e-5 on lse: float32 sums of up to
 * 5000 terms (1.3e-6 and 9.5e-7 seen, every kernel).  1, 2 and 3 threads:
 * the same bits, and a padding mask of ones with one document none's. */
static void test_short_blocks(void)
{
    static const int64_t keys[] = {1, 2, 7, 31, 32, 33, 100, 1023, 1024, 1025, 2100, 5000};
    static const int64_t dims[] = {13, 16, 40, 64, 128};
    static const ra_dtype dtypes[] = {RA_F32, RA_F32, RA_BF16, RA_F16};
    ra_context *ctx[3];
    for (int t = 0; t < 3; t++) CHECK(ra_context_create(&ctx[t], t + 1) == RA_OK, "ctx");
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 40; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const int64_t Sq = 1 + i % 8, Sk = keys[i % 12], Hkv = 1 + (int64_t)(x % 3);
        const int64_t rep = (int64_t)1 << (x >> 8) % 4, D = dims[(x >> 16) % 5];
        const int where = (int)((x >> 24) % 5), masks = (int)((x >> 32) % 5);
        const int head_major = (x >> 40) & 1;
        const ra_dtype dtype = dtypes[(x >> 44) % 4];
        block_case c = {1 + (int64_t)((x >> 48) & 1), Sq, Sk, rep * Hkv, Hkv, D, 0, 9, 0, 0, 0, 0};
        /* at the end (twice as often), inside, before, after the keys */
        const int64_t at[5] = {Sk - Sq, Sk - Sq, Sk / 2, -Sq - 2, Sk + 5};
        c.q_start = c.k_start + at[where];
        if (masks == 1) c.window = 1 + Sk / 3;
        if (masks == 2) c.chunk = 64;
        if (masks == 3) c.softcap = 20.0;
        if (masks == 4) c.sinks = 1;
        const int64_t nq = c.B * Sq * c.H * D, nk = c.B * Sk * Hkv * D;
        float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
        float *v = malloc(sizeof(float) * nk), *sinks = malloc(sizeof(float) * c.H);
        float *ref = malloc(sizeof(float) * nq), *ref_lse = malloc(sizeof(float) * c.B * c.H * Sq);
        float *out[3], *lse[3];
        for (int t = 0; t < 3; t++)
            out[t] = malloc(sizeof(float) * nq), lse[t] = malloc(sizeof(float) * c.B * c.H * Sq);
        ra_test_fill(q, nq, 300 + i), ra_test_fill(k, nk, 400 + i), ra_test_fill(v, nk, 500 + i);
        ra_test_fill(sinks, c.H, 600 + i);
        for (int64_t e = 0; e < nq; e++) q[e] *= 3.0f; /* peakier softmax */
        /* the library's inputs: dtype, K and V in the case's layout */
        const size_t size = dtype == RA_F32 ? 4 : 2;
        char *qd = malloc(size * nq), *kd = malloc(size * nk), *vd = malloc(size * nk);
        float *kl = malloc(sizeof(float) * nk), *vl = malloc(sizeof(float) * nk);
        kv_layout(kl, k, &c, head_major, 0);
        kv_layout(vl, v, &c, head_major, 0);
        CHECK(ra_convert(qd, dtype, q, RA_F32, nq) == RA_OK &&
                  ra_convert(kd, dtype, kl, RA_F32, nk) == RA_OK &&
                  ra_convert(vd, dtype, vl, RA_F32, nk) == RA_OK, "convert");
        /* the reference's: the values the library reads, widened back */
        CHECK(ra_convert(q, RA_F32, qd, dtype, nq) == RA_OK &&
                  ra_convert(kl, RA_F32, kd, dtype, nk) == RA_OK &&
                  ra_convert(vl, RA_F32, vd, dtype, nk) == RA_OK, "widen");
        kv_layout(k, kl, &c, head_major, 1);
        kv_layout(v, vl, &c, head_major, 1);
        ra_attention_options o = ra_attention_options_init();
        o.softcap = c.softcap, o.window = c.window, o.chunk = c.chunk;
        o.sinks = c.sinks ? sinks : NULL;
        ra_tensor tq = ra_tensor_4d(qd, dtype, c.B, Sq, c.H, D);
        ra_tensor tk = ra_tensor_4d(kd, dtype, c.B, Sk, Hkv, D);
        ra_tensor tv = ra_tensor_4d(vd, dtype, c.B, Sk, Hkv, D);
        if (head_major)
            for (int d = 0; d < 3; d++)
                tk.stride[d] = tv.stride[d] = d == 0 ? Hkv * Sk * D : d == 1 ? D : Sk * D;
        for (int t = 0; t < 3; t++) {
            ra_tensor to = ra_tensor_4d(out[t], RA_F32, c.B, Sq, c.H, D);
            CHECK(ra_attention_block_lse(ctx[t], &to, lse[t], &tq, &tk, &tv, c.q_start, c.k_start,
                                         0, &o) == RA_OK, "block: %s", ra_last_error());
        }
        reference(&c, q, k, v, o.sinks, ref, ref_lse);
        double e = ra_test_max_rel_diff(out[0], ref, nq), el = 0;
        for (int64_t r = 0; r < c.B * c.H * Sq; r++) {
            double d = ref_lse[r] == lse[0][r] ? 0 : fabs(ref_lse[r] - lse[0][r]);
            el = d > el || isnan(d) ? d : el;
        }
        CHECK(e <= 2e-5 && el <= 2e-5, "case %d: B %lld Sq %lld Sk %lld H %lld Hkv %lld D %lld "
              "q_start %lld, masks %d, %s, %s: out off by %.3g, lse by %.3g", i, (long long)c.B,
              (long long)Sq, (long long)Sk, (long long)c.H, (long long)Hkv, (long long)D,
              (long long)c.q_start, masks, head_major ? "head-major" : "token-major",
              dtype == RA_F32 ? "f32" : dtype == RA_BF16 ? "bf16" : "f16", e, el);
        for (int t = 1; t < 3; t++)
            CHECK(!memcmp(out[t], out[0], sizeof(float) * nq) &&
                      !memcmp(lse[t], lse[0], sizeof(float) * c.B * c.H * Sq),
                  "case %d: other bits on %d threads", i, t + 1);
        if (where == 0) { /* a padding mask of ones, one document: none's bits */
            const int64_t seq = c.k_start + Sk, cu[2] = {0, seq};
            uint8_t *ones = malloc((size_t)(c.B * seq));
            memset(ones, 1, (size_t)(c.B * seq));
            o.padding_mask = ones, o.cu_seqlens = cu, o.n_documents = 1;
            ra_tensor to = ra_tensor_4d(out[1], RA_F32, c.B, Sq, c.H, D);
            CHECK(ra_attention_block_lse(ctx[1], &to, lse[1], &tq, &tk, &tv, c.q_start,
                                         c.k_start, seq, &o) == RA_OK &&
                      !memcmp(out[1], out[0], sizeof(float) * nq) &&
                      !memcmp(lse[1], lse[0], sizeof(float) * c.B * c.H * Sq),
                  "case %d: a padding mask of ones changed the bits", i);
            free(ones);
        }
        for (int t = 0; t < 3; t++) free(out[t]), free(lse[t]);
        free(q), free(k), free(v), free(sinks), free(ref), free(ref_lse);
        free(qd), free(kd), free(vd), free(kl), free(vl);
    }
    for (int t = 0; t < 3; t++) ra_context_destroy(ctx[t]);
}

/* A short block's batch rows run in one decode call (up to 64 at a time),
 * their chunks and kv heads spread over the threads: each row's out and lse
 * are the bits the row alone gives (B 1), on 1, 2 and 3 threads.  B 3 to
 * 70 (past 64: two calls), Hkv 1 and 2, keys within a chunk and across
 * three, K and V token-major and head-major (batch stride Hkv Sk D). */
static void test_short_batch_rows(void)
{
    static const int64_t shapes[][5] = {
        /* B, Sq, Hkv, rep, Sk */
        {4, 1, 1, 4, 500}, {8, 2, 2, 2, 300}, {3, 1, 1, 8, 2100}, {70, 1, 2, 4, 40},
        {5, 4, 1, 8, 1025},
    };
    ra_context *ctx[3];
    for (int t = 0; t < 3; t++) CHECK(ra_context_create(&ctx[t], t + 1) == RA_OK, "ctx");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t B = shapes[i][0], Sq = shapes[i][1], Hkv = shapes[i][2];
        const int64_t H = Hkv * shapes[i][3], Sk = shapes[i][4], D = 40;
        const int64_t nq = B * Sq * H * D, nk = B * Sk * Hkv * D, nl = B * H * Sq;
        const int head_major = (int)(i % 2);
        float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
        float *v = malloc(sizeof(float) * nk), *alone = malloc(sizeof(float) * nq);
        float *alone_lse = malloc(sizeof(float) * nl), *out = malloc(sizeof(float) * nq);
        float *lse = malloc(sizeof(float) * nl);
        ra_test_fill(q, nq, 700 + i), ra_test_fill(k, nk, 800 + i), ra_test_fill(v, nk, 900 + i);
        ra_attention_options o = ra_attention_options_init();
        o.window = i == 2 ? 1500 : 0;
        ra_tensor tq = ra_tensor_4d(q, RA_F32, B, Sq, H, D);
        ra_tensor tk = ra_tensor_4d(k, RA_F32, B, Sk, Hkv, D);
        ra_tensor tv = ra_tensor_4d(v, RA_F32, B, Sk, Hkv, D);
        if (head_major)
            for (int d = 0; d < 3; d++)
                tk.stride[d] = tv.stride[d] = d == 0 ? Hkv * Sk * D : d == 1 ? D : Sk * D;
        for (int64_t b = 0; b < B; b++) { /* each row alone, on 2 threads */
            ra_tensor rq = tq, rk = tk, rv = tv;
            ra_tensor ro = ra_tensor_4d(alone + b * Sq * H * D, RA_F32, 1, Sq, H, D);
            rq.data = q + b * Sq * H * D, rq.shape[0] = 1;
            rk.data = k + b * Sk * Hkv * D, rk.shape[0] = 1;
            rv.data = v + b * Sk * Hkv * D, rv.shape[0] = 1;
            CHECK(ra_attention_block_lse(ctx[1], &ro, alone_lse + b * H * Sq, &rq, &rk, &rv,
                                         Sk - Sq, 0, 0, &o) == RA_OK, "row: %s", ra_last_error());
        }
        for (int t = 0; t < 3; t++) {
            ra_tensor to = ra_tensor_4d(out, RA_F32, B, Sq, H, D);
            CHECK(ra_attention_block_lse(ctx[t], &to, lse, &tq, &tk, &tv, Sk - Sq, 0, 0, &o) ==
                      RA_OK, "batch: %s", ra_last_error());
            CHECK(!memcmp(out, alone, sizeof(float) * nq) &&
                      !memcmp(lse, alone_lse, sizeof(float) * nl),
                  "B %lld Sq %lld H %lld Hkv %lld Sk %lld %s, %d threads: the batch's bits are "
                  "not each row's alone", (long long)B, (long long)Sq, (long long)H,
                  (long long)Hkv, (long long)Sk, head_major ? "head-major" : "token-major", t + 1);
        }
        free(q), free(k), free(v), free(alone), free(alone_lse), free(out), free(lse);
    }
    for (int t = 0; t < 3; t++) ra_context_destroy(ctx[t]);
}

/* q_start = k_start, Sq = Sk: ra_attention_forward_lse's bits. */
static void test_block_is_forward_lse(void)
{
    const int64_t B = 2, S = 150, H = 4, Hkv = 2, D = 40, nq = B * S * H * D, nk = B * S * Hkv * D;
    float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
    float *v = malloc(sizeof(float) * nk), *a = malloc(sizeof(float) * nq);
    float *b = malloc(sizeof(float) * nq), *la = malloc(sizeof(float) * B * H * S);
    float *lb = malloc(sizeof(float) * B * H * S);
    ra_test_fill(q, nq, 1), ra_test_fill(k, nk, 2), ra_test_fill(v, nk, 3);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D), tk = ra_tensor_4d(k, RA_F32, B, S, Hkv, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, B, S, Hkv, D), ta = ra_tensor_4d(a, RA_F32, B, S, H, D);
    ra_tensor tb = ra_tensor_4d(b, RA_F32, B, S, H, D);
    ra_attention_options o = ra_attention_options_init();
    o.window = 70;
    CHECK(ra_attention_forward_lse(NULL, &ta, la, &tq, &tk, &tv, &o) == RA_OK, "forward_lse");
    CHECK(ra_attention_block_lse(NULL, &tb, lb, &tq, &tk, &tv, 7, 7, 0, &o) == RA_OK, "block: %s",
          ra_last_error());
    CHECK(!memcmp(a, b, sizeof(float) * nq) && !memcmp(la, lb, sizeof(float) * B * H * S),
          "block on the diagonal differs from ra_attention_forward_lse");
    free(q), free(k), free(v), free(a), free(b), free(la), free(lb);
}

/* A cache of L tokens; decoding with lse (q_start NULL: ra_attention_decode's
 * bits) and with the queries past the cache (a shard of a longer
 * sequence), against the reference on the cache's keys. */
static void test_decode_lse(void)
{
    const int64_t B = 2, L = 1100, H = 8, Hkv = 2, D = 48, T = 3;
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, B, L, Hkv, D, RA_F32) == RA_OK, "cache");
    float *k = malloc(sizeof(float) * B * L * Hkv * D), *v = malloc(sizeof(float) * B * L * Hkv * D);
    float *q = malloc(sizeof(float) * B * T * H * D), *sinks = malloc(sizeof(float) * H);
    ra_test_fill(k, B * L * Hkv * D, 7), ra_test_fill(v, B * L * Hkv * D, 8);
    ra_test_fill(q, B * T * H * D, 9), ra_test_fill(sinks, H, 10);
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_tensor tk = ra_tensor_4d(k, RA_F32, B, L, Hkv, D), tv = ra_tensor_4d(v, RA_F32, B, L, Hkv, D);
    int64_t n_new[2] = {L, L - 300};
    ra_positions at0 = {.struct_size = sizeof at0};
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tv, &at0, n_new) == RA_OK, "append: %s",
          ra_last_error());
    /* the keys as stored (rotated), for the reference */
    for (int64_t b = 0; b < B; b++) {
        ra_tensor kb = ra_tensor_4d(k + b * L * Hkv * D, RA_F32, 1, n_new[b], Hkv, D);
        ra_tensor vb = ra_tensor_4d(v + b * L * Hkv * D, RA_F32, 1, n_new[b], Hkv, D);
        CHECK(ra_kv_cache_read(cache, b, 0, &kb, &vb) == RA_OK, "read");
    }
    float *out = calloc((size_t)(B * T * H * D), sizeof(float));
    float *dec = calloc((size_t)(B * T * H * D), sizeof(float));
    float *lse = malloc(sizeof(float) * B * H * T), *ref = malloc(sizeof(float) * T * H * D);
    float *ref_lse = malloc(sizeof(float) * H * T);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, T, H, D), to = ra_tensor_4d(out, RA_F32, B, T, H, D);
    ra_tensor td = ra_tensor_4d(dec, RA_F32, B, T, H, D);
    ra_attention_options none = ra_attention_options_init();
    CHECK(ra_attention_decode(NULL, cache, &td, &tq, NULL, &none) == RA_OK, "decode");
    CHECK(ra_attention_decode_lse(NULL, cache, &to, lse, &tq, NULL, NULL, NULL, &none) == RA_OK,
          "decode_lse: %s", ra_last_error());
    CHECK(!memcmp(out, dec, sizeof(float) * B * T * H * D), "decode_lse differs from decode");
    /* placed queries: after the cache, before its end, before its start */
    const int64_t starts[][2] = {{1500, 900}, {500, 20}, {-2, 1100}, {1098, 797}};
    /* w 3, 4: chunks of 64 from the whole sequence's start, the cache a
     * shard of it from position k_start */
    const int64_t k_start[2] = {37, 5};
    for (int w = 0; w < 5; w++)
        for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
            ra_attention_options o = ra_attention_options_init();
            o.window = w == 0 || w == 3 ? 0 : w == 1 ? 450 : 700;
            o.softcap = w == 2 ? 20.0 : 0.0;
            o.sinks = w == 2 || w == 4 ? sinks : NULL;
            o.chunk = w >= 3 ? 64 : 0;
            const int64_t *ks = w >= 3 ? k_start : NULL;
            ra_status st = ra_attention_decode_lse(NULL, cache, &to, lse, &tq, NULL, starts[s], ks,
                                                   &o);
            CHECK(st == RA_OK, "decode_lse at %lld: %s", (long long)starts[s][0], ra_last_error());
            for (int64_t b = 0; b < B; b++) {
                const int64_t k0 = ks ? ks[b] : 0;
                block_case c = {1, T, n_new[b], H, Hkv, D, k0 + starts[s][b], k0, o.softcap,
                                o.window, o.sinks != NULL, o.chunk};
                reference(&c, q + b * T * H * D, k + b * L * Hkv * D, v + b * L * Hkv * D,
                          o.sinks, ref, ref_lse);
                double e = ra_test_max_rel_diff(out + b * T * H * D, ref, T * H * D), el = 0;
                for (int64_t i = 0; i < H * T; i++) {
                    float x = lse[b * H * T + i];
                    double d = ref_lse[i] == x ? 0 : fabs(ref_lse[i] - x);
                    el = d > el || isnan(d) ? d : el;
                }
                CHECK(e <= 2e-5 && el <= 2e-5, "window %lld, b %lld at %lld: out off by %.3g, lse "
                      "by %.3g", (long long)o.window, (long long)b, (long long)starts[s][b], e, el);
            }
        }
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);
    free(k), free(v), free(q), free(sinks), free(out), free(dec), free(lse), free(ref), free(ref_lse);
}

static void test_errors(void)
{
    float x[4 * 8] = {0}, y[4 * 8], lse[4];
    ra_tensor q = ra_tensor_4d(x, RA_F32, 1, 2, 2, 8), k = ra_tensor_4d(x, RA_F32, 1, 1, 1, 8);
    ra_tensor out = ra_tensor_4d(y, RA_F32, 1, 2, 2, 8), k7 = ra_tensor_4d(x, RA_F32, 1, 1, 1, 7);
    ra_attention_options o = ra_attention_options_init();
    CHECK(ra_attention_block_lse(NULL, &out, NULL, &q, &k, &k, 0, 0, 0, NULL) == RA_ERR_NULL, "lse");
    CHECK(ra_attention_block_lse(NULL, &out, lse, &q, &k7, &k7, 0, 0, 0, NULL) == RA_ERR_SHAPE, "D");
    CHECK(ra_attention_block_lse(NULL, &out, lse, &q, &k, &k, -1, 0, 0, NULL) == RA_ERR_POSITION,
          "q_start");
    CHECK(ra_attention_block_lse(NULL, &out, (float *)x, &q, &k, &k, 0, 0, 0, NULL) == RA_ERR_ARGUMENT,
          "lse over q");
    ra_kv_cache *window;
    CHECK(ra_kv_cache_create_window(&window, 1, 4, 2, 1, 8, RA_F32) == RA_OK, "window cache");
    int64_t start = 0;
    o = ra_attention_options_init();
    o.window = 4;
    CHECK(ra_attention_decode_lse(NULL, window, &out, lse, &q, NULL, &start, NULL, &o) ==
              RA_ERR_UNSUPPORTED, "q_start on a window cache");
    start = INT64_MAX;
    ra_kv_cache *full;
    CHECK(ra_kv_cache_create(&full, 1, 4, 1, 8, RA_F32) == RA_OK, "cache");
    CHECK(ra_attention_decode_lse(NULL, full, &out, lse, &q, NULL, &start, NULL, NULL) == RA_ERR_POSITION,
          "q_start past 2^32");
    CHECK(ra_attention_decode_lse(NULL, full, &out, NULL, &q, NULL, NULL, NULL, NULL) == RA_ERR_NULL,
          "NULL lse");
    int64_t k_start = 0;
    CHECK(ra_attention_decode_lse(NULL, full, &out, lse, &q, NULL, NULL, &k_start, NULL) ==
              RA_ERR_ARGUMENT, "k_start without q_start");
    start = 0, k_start = -1;
    CHECK(ra_attention_decode_lse(NULL, full, &out, lse, &q, NULL, &start, &k_start, NULL) ==
              RA_ERR_POSITION, "k_start -1");
    ra_kv_cache_destroy(window);
    ra_kv_cache_destroy(full);
}

static void test_block_backward_errors(void)
{
    float x[4 * 8] = {0}, g[5][4 * 8], lse[4] = {0}, sinks[2] = {0}, dsinks[2];
    ra_tensor q = ra_tensor_4d(x, RA_F32, 1, 2, 2, 8), k = ra_tensor_4d(x, RA_F32, 1, 3, 1, 8);
    ra_tensor dq = ra_tensor_4d(g[0], RA_F32, 1, 2, 2, 8), dk = ra_tensor_4d(g[1], RA_F32, 1, 3, 1, 8);
    ra_tensor dv = ra_tensor_4d(g[2], RA_F32, 1, 3, 1, 8), out = ra_tensor_4d(g[3], RA_F32, 1, 2, 2, 8);
    ra_tensor dout = ra_tensor_4d(g[4], RA_F32, 1, 2, 2, 8);
    ra_tensor dk7 = ra_tensor_4d(g[1], RA_F32, 1, 2, 1, 7);
    CHECK(ra_attention_block_backward(NULL, &dq, &dk, &dv, &dout, &q, &k, &k, &out, NULL, 0, 0, 0,
                                      NULL) == RA_ERR_NULL, "lse");
    CHECK(ra_attention_block_backward(NULL, &dq, &dk, &dv, &dout, &q, &k, &k, NULL, lse, 0, 0, 0,
                                      NULL) == RA_ERR_NULL, "out");
    CHECK(ra_attention_block_backward(NULL, &dq, &dk7, &dv, &dout, &q, &k, &k, &out, lse, 0, 0, 0,
                                      NULL) == RA_ERR_SHAPE, "dk's shape");
    CHECK(ra_attention_block_backward(NULL, &dq, &dk, &dv, &dout, &q, &k, &k, &out, lse, 0, -1, 0,
                                      NULL) == RA_ERR_POSITION, "k_start");
    CHECK(ra_attention_block_backward(NULL, &dq, &dq, &dv, &dout, &q, &k, &k, &out, lse, 0, 0, 0,
                                      NULL) != RA_OK, "dk over dq");
    ra_attention_options o = ra_attention_options_init();
    o.sinks = sinks;
    o.dsinks = dsinks;
    CHECK(ra_attention_block_backward(NULL, &dq, &dk, &dv, &dout, &q, &k, &k, &out, lse, 0, 0, 0,
                                      &o) == RA_ERR_UNSUPPORTED, "dsinks");
    uint8_t pad[4] = {1, 1, 1, 1};
    const int64_t documents[2] = {0, 4};
    for (int i = 0; i < 6; i++) {
        /* the reference path: refused; dropout and the sequence's masks
         * with seq 0, or rows past seq 4 */
        static const char *const what[6] = {"reference", "dropout, seq 0", "documents, seq 0",
                                            "padding, seq 0", "documents, rows past seq",
                                            "padding, rows past seq"};
        static const ra_status want[6] = {RA_ERR_UNSUPPORTED, RA_ERR_ARGUMENT, RA_ERR_ARGUMENT,
                                          RA_ERR_ARGUMENT, RA_ERR_POSITION, RA_ERR_POSITION};
        o = ra_attention_options_init();
        if (i == 0) o.path = RA_PATH_REFERENCE;
        if (i == 1) o.dropout = 0.5f;
        if (i == 2 || i == 4) o.cu_seqlens = documents, o.n_documents = 1;
        if (i == 3 || i == 5) o.padding_mask = pad;
        CHECK(ra_attention_block_lse(NULL, &out, lse, &q, &k, &k, i >= 4 ? 3 : 0, 0, i >= 4 ? 4 : 0,
                                     &o) == want[i], "%s", what[i]);
        CHECK(ra_attention_block_backward(NULL, &dq, &dk, &dv, &dout, &q, &k, &k, &out, lse,
                                          i >= 4 ? 3 : 0, 0, i >= 4 ? 4 : 0, &o) == want[i],
              "backward: %s", what[i]);
    }
    o = ra_attention_options_init();
    o.cu_seqlens = documents, o.n_documents = 1;
    CHECK(ra_attention_block_lse(NULL, &out, lse, &q, &k, &k, 0, 0, 5, &o) == RA_ERR_ARGUMENT,
          "documents ending before seq");
    CHECK(ra_attention_block_lse(NULL, &out, lse, &q, &k, &k, 0, 0, -1, NULL) == RA_ERR_SIZE,
          "seq -1");
    CHECK(ra_attention_block_lse(NULL, &out, lse, &q, &k, &k, 0, 0, (int64_t)1 << 62, &o) ==
              RA_ERR_SIZE, "seq 2^62");
}

/* One sequence, its gradients whole and as the sum over a split into
 * blocks (cuts not at tile multiples, every (query block, key block) pair
 * called, those wholly after the queries too). */
typedef struct split_case {
    int64_t B, S, H, Hkv, D;
    double softcap;
    int64_t window;
    int sinks, n_cuts;
    int64_t cuts[4]; /* block starts after 0 */
    ra_dtype dtype;  /* q, k and v's */
    int64_t chunk;
    int masks; /* 1: padding (left in row 0, right and a hole in row 1); 2: documents;
                  3: dropout (p 0.3: the whole sequence's masks) */
} split_case;

/* The case's padding [B, S] or documents into pad or cu (n + 1 starts, *n). */
static void split_masks(const split_case *c, uint8_t *pad, int64_t *cu, int64_t *n)
{
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t s = 0; s < c->S; s++)
            pad[b * c->S + s] = b == 0 ? s >= 13 : s < c->S - 20 && (s < 40 || s > 44);
    const int64_t starts[] = {0, 40, 41, 97, c->S};
    *n = 0;
    for (int i = 0; i < 5; i++)
        if (i == 0 || (starts[i] > cu[*n] && starts[i] <= c->S)) cu[i ? ++*n : 0] = starts[i];
}

/* Blocks' (out_b, lse_b) merged into out and lse of query rows [q0, q0 +
 * sq) (ring attention's merge, in double), then each query head's sink
 * once; a row that saw no key (a padding query): zeros and lse -Inf. */
static void merge_rows(const split_case *c, float *const *outs, float *const *lses, int n_blocks,
                       int64_t sq, const float *sinks, float *out, float *lse)
{
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t i = 0; i < sq; i++) {
                double m = -INFINITY, l = 0;
                for (int j = 0; j < n_blocks; j++) {
                    const double x = lses[j][(b * c->H + h) * sq + i];
                    m = x > m ? x : m;
                }
                float *o = out + ((b * sq + i) * c->H + h) * c->D;
                for (int64_t d = 0; d < c->D; d++) o[d] = 0.0f;
                if (m == -INFINITY) {
                    lse[(b * c->H + h) * sq + i] = -INFINITY;
                    continue;
                }
                if (sinks && sinks[h] > m) m = sinks[h];
                double *acc = calloc((size_t)c->D, sizeof *acc);
                for (int j = 0; j < n_blocks; j++) {
                    const double x = lses[j][(b * c->H + h) * sq + i];
                    if (x == -INFINITY) continue;
                    const double w = exp(x - m);
                    const float *ob = outs[j] + ((b * sq + i) * c->H + h) * c->D;
                    for (int64_t d = 0; d < c->D; d++) acc[d] += w * ob[d];
                    l += w;
                }
                if (sinks) l += exp(sinks[h] - m);
                for (int64_t d = 0; d < c->D; d++) o[d] = (float)(acc[d] / l);
                lse[(b * c->H + h) * sq + i] = (float)(m + log(l));
                free(acc);
            }
}

/* The view of rows [s0, s1) of a [B, S, heads, D] tensor of dtype. */
static ra_tensor rows_as(void *x, ra_dtype dtype, const split_case *c, int64_t heads, int64_t s0,
                         int64_t s1)
{
    ra_tensor t = ra_tensor_4d(x, dtype, c->B, c->S, heads, c->D);
    t.data = (char *)x + (size_t)(s0 * t.stride[1]) * (dtype == RA_F32 ? 4 : 2);
    t.shape[1] = s1 - s0;
    return t;
}

/* The same of a float32 tensor. */
static ra_tensor rows_of(float *x, const split_case *c, int64_t heads, int64_t s0, int64_t s1)
{
    return rows_as(x, RA_F32, c, heads, s0, s1);
}

static void run_split(const split_case *c, uint64_t seed)
{
    const int64_t nq = c->B * c->S * c->H * c->D, nk = c->B * c->S * c->Hkv * c->D;
    float *buf[12];
    const int64_t sizes[12] = {nq, nk, nk, nq, nq, nq, nk, nk, nq, nk, nk, c->B * c->H * c->S};
    for (int i = 0; i < 12; i++) buf[i] = malloc(sizeof(float) * sizes[i]);
    float *q = buf[0], *k = buf[1], *v = buf[2], *out = buf[3], *dout = buf[4], *dq = buf[5];
    float *dk = buf[6], *dv = buf[7], *bq = buf[8], *bk = buf[9], *bv = buf[10], *lse = buf[11];
    float sinks[8], dsinks[8];
    ra_test_fill(q, nq, seed), ra_test_fill(k, nk, seed + 1), ra_test_fill(v, nk, seed + 2);
    ra_test_fill(dout, nq, seed + 3), ra_test_fill(sinks, 8, seed + 4);
    for (int64_t i = 0; i < nq; i++) q[i] *= 3.0f; /* peakier softmax */
    /* q, k and v as the case's dtype (16-bit: copies, widened exactly by
     * both calls) */
    void *q_in = q, *k_in = k, *v_in = v;
    if (c->dtype != RA_F32) {
        q_in = malloc((size_t)nq * 2), k_in = malloc((size_t)nk * 2), v_in = malloc((size_t)nk * 2);
        CHECK(ra_convert(q_in, c->dtype, q, RA_F32, nq) == RA_OK &&
                  ra_convert(k_in, c->dtype, k, RA_F32, nk) == RA_OK &&
                  ra_convert(v_in, c->dtype, v, RA_F32, nk) == RA_OK, "convert");
    }
    ra_attention_options o = ra_attention_options_init();
    o.softcap = c->softcap;
    o.window = c->window;
    o.chunk = c->chunk;
    o.sinks = c->sinks ? sinks : NULL;
    uint8_t *pad = malloc((size_t)(c->B * c->S));
    int64_t cu[5], n_documents;
    split_masks(c, pad, cu, &n_documents);
    if (c->masks == 1) o.padding_mask = pad;
    if (c->masks == 2) o.cu_seqlens = cu, o.n_documents = n_documents;
    if (c->masks == 3) o.dropout = 0.3f, o.seed = 11;
    const int64_t S = c->S, H = c->H, G = c->Hkv;
    ra_tensor tq = rows_as(q_in, c->dtype, c, H, 0, S), tk = rows_as(k_in, c->dtype, c, G, 0, S);
    ra_tensor tv = rows_as(v_in, c->dtype, c, G, 0, S);
    ra_tensor to = rows_of(out, c, H, 0, S), tdo = rows_of(dout, c, H, 0, S);
    ra_tensor tdq = rows_of(dq, c, H, 0, S), tdk = rows_of(dk, c, G, 0, S);
    ra_tensor tdv = rows_of(dv, c, G, 0, S);
    CHECK(ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, &o) == RA_OK, "forward");
    o.dsinks = c->sinks ? dsinks : NULL;
    CHECK(ra_attention_backward(NULL, &tdq, &tdk, &tdv, &tdo, &tq, &tk, &tv, &to, lse, &o) ==
              RA_OK, "backward: %s", ra_last_error());
    o.dsinks = NULL;
    int64_t at[6] = {0};
    for (int i = 0; i < c->n_cuts; i++) at[i + 1] = c->cuts[i];
    at[c->n_cuts + 1] = S;
    const int n = c->n_cuts + 1;
    /* the forward: each query block's key blocks merged (sinks added once
     * after), within 1e-5 of the whole call's out and lse (float32
     * rounding of another order; padding rows: zeros and -Inf both) */
    ra_attention_options ob_options = o;
    ob_options.sinks = NULL;
    float *outs[5], *lses[5], *merged = malloc(sizeof(float) * nq), *mlse = malloc(sizeof(float) * c->B * H * S);
    for (int i = 0; i < n; i++) {
        const int64_t sq = at[i + 1] - at[i];
        for (int j = 0; j < n; j++) {
            outs[j] = malloc(sizeof(float) * c->B * sq * H * c->D);
            lses[j] = malloc(sizeof(float) * c->B * H * sq);
            ra_tensor qb = rows_as(q_in, c->dtype, c, H, at[i], at[i + 1]);
            ra_tensor kb = rows_as(k_in, c->dtype, c, G, at[j], at[j + 1]);
            ra_tensor vb = rows_as(v_in, c->dtype, c, G, at[j], at[j + 1]);
            ra_tensor obt = ra_tensor_4d(outs[j], RA_F32, c->B, sq, H, c->D);
            CHECK(ra_attention_block_lse(NULL, &obt, lses[j], &qb, &kb, &vb, at[i], at[j], S,
                                         &ob_options) == RA_OK, "forward block (%d, %d): %s", i,
                  j, ra_last_error());
            /* rows that see no key, or only padding keys: zeros */
            int finite = 1;
            for (int64_t e = 0; e < c->B * sq * H * c->D; e++) finite &= isfinite(outs[j][e]);
            CHECK(finite, "forward block (%d, %d): a row not finite", i, j);
        }
        float *mo = malloc(sizeof(float) * c->B * sq * H * c->D);
        float *ml = malloc(sizeof(float) * c->B * H * sq);
        merge_rows(c, outs, lses, n, sq, o.sinks, mo, ml);
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t r = 0; r < sq; r++) {
                memcpy(merged + ((b * S + at[i] + r) * H) * c->D, mo + (b * sq + r) * H * c->D,
                       sizeof(float) * H * c->D);
                for (int64_t h = 0; h < H; h++)
                    mlse[(b * H + h) * S + at[i] + r] = ml[(b * H + h) * sq + r];
            }
        for (int j = 0; j < n; j++) free(outs[j]), free(lses[j]);
        free(mo), free(ml);
    }
    double eo = ra_test_max_rel_diff(merged, out, nq), el = 0;
    for (int64_t i = 0; i < c->B * H * S; i++) {
        const double d = mlse[i] == lse[i] ? 0 : fabs((double)mlse[i] - lse[i]);
        el = d > el || isnan(d) ? d : el;
    }
    /* bf16 on the bf16 units: P is rounded to bf16 against each block's
     * own running max, so the merge and the whole call are each within
     * 2^-8 max|v| of the exact out (ra_attention's bound), and within
     * 2^-7 max|v| of each other */
    const int units = c->dtype == RA_BF16 && (!strcmp(ra_simd_name(), "amx") ||
                                              !strcmp(ra_simd_name(), "avx512bf16"));
    double max_v = 0, max_out = 0;
    for (int64_t i = 0; i < nk; i++) max_v = fmax(max_v, fabs(v[i]));
    for (int64_t i = 0; i < nq; i++) max_out = fmax(max_out, fabs(out[i]));
    CHECK(eo * max_out <= (units ? 0x1p-7 * max_v : 1e-5 * max_out) && el <= 1e-5, "S %lld masks "
          "%d: merged blocks' out off by %.3g of max|out|, lse by %.3g", (long long)S, c->masks,
          eo, el);
    free(merged), free(mlse);
    for (int threads = 1; threads <= 3; threads += 2) {
        ra_context *ctx;
        CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
        memset(bq, 0, sizeof(float) * nq), memset(bk, 0, sizeof(float) * nk);
        memset(bv, 0, sizeof(float) * nk);
        for (int i = 0; i < n; i++)     /* query block */
            for (int j = 0; j < n; j++) { /* key block */
                ra_tensor qb = rows_as(q_in, c->dtype, c, H, at[i], at[i + 1]);
                ra_tensor ob = rows_of(out, c, H, at[i], at[i + 1]);
                ra_tensor dob = rows_of(dout, c, H, at[i], at[i + 1]);
                ra_tensor dqb = rows_of(bq, c, H, at[i], at[i + 1]);
                ra_tensor kb = rows_as(k_in, c->dtype, c, G, at[j], at[j + 1]);
                ra_tensor vb = rows_as(v_in, c->dtype, c, G, at[j], at[j + 1]);
                ra_tensor dkb = rows_of(bk, c, G, at[j], at[j + 1]);
                ra_tensor dvb = rows_of(bv, c, G, at[j], at[j + 1]);
                /* lse rows [at[i], at[i+1]) of each (b, h): a [B, H, Sq]
                 * array of its own */
                const int64_t sq = at[i + 1] - at[i];
                float *lb = malloc(sizeof(float) * c->B * H * sq);
                for (int64_t bh = 0; bh < c->B * H; bh++)
                    memcpy(lb + bh * sq, lse + bh * S + at[i], sizeof(float) * sq);
                ra_status st = ra_attention_block_backward(ctx, &dqb, &dkb, &dvb, &dob, &qb, &kb,
                                                           &vb, &ob, lb, at[i], at[j], S, &o);
                CHECK(st == RA_OK, "block (%d, %d): %s", i, j, ra_last_error());
                free(lb);
            }
        /* float32 sums in another order (per block, then across blocks):
         * within 1e-5 of the largest gradient */
        double eq = ra_test_max_rel_diff(bq, dq, nq), ek = ra_test_max_rel_diff(bk, dk, nk);
        double ev = ra_test_max_rel_diff(bv, dv, nk);
        CHECK(eq <= 1e-5 && ek <= 1e-5 && ev <= 1e-5, "S %lld D %lld window %lld chunk %lld, %d "
              "threads: dq off by %.3g, dk by %.3g, dv by %.3g", (long long)S, (long long)c->D,
              (long long)c->window, (long long)c->chunk, threads, eq, ek, ev);
        if (threads == 1) memcpy(dq, bq, sizeof(float) * nq); /* for the bits below */
        else CHECK(!memcmp(dq, bq, sizeof(float) * nq), "dq: other bits on %d threads", threads);
        ra_context_destroy(ctx);
    }
    if (c->dtype != RA_F32) free(q_in), free(k_in), free(v_in);
    for (int i = 0; i < 12; i++) free(buf[i]);
    free(pad);
}

static void test_block_backward_sums(void)
{
    const split_case cases[] = {
        /* B, S, H, Hkv, D, softcap, window, sinks, n_cuts, cuts, dtype, chunk */
        {1, 150, 4, 2, 16, 0, 0, 0, 2, {50, 100}, RA_F32, 0, 0},
        {2, 203, 4, 1, 72, 0, 0, 1, 3, {64, 70, 190}, RA_F32, 0, 0},
        {1, 300, 6, 3, 80, 20.0, 0, 0, 3, {37, 160, 161}, RA_F32, 0, 0},
        {1, 260, 2, 2, 33, 0, 45, 1, 4, {10, 99, 130, 200}, RA_F32, 0, 0}, /* a window hides blocks */
        {2, 97, 8, 2, 64, 10.0, 30, 1, 1, {48}, RA_F32, 0, 0},
        {1, 180, 4, 2, 48, 0, 0, 1, 2, {70, 71}, RA_BF16, 0, 0},
        {1, 130, 2, 1, 40, 25.0, 0, 0, 1, {65}, RA_F16, 0, 0},
        {2, 230, 4, 2, 24, 0, 0, 1, 3, {50, 120, 121}, RA_F32, 70, 0}, /* chunks across blocks */
        {1, 200, 6, 3, 72, 15.0, 40, 0, 2, {64, 150}, RA_F32, 100, 0},
        /* padding and documents of the whole sequence */
        {2, 150, 4, 2, 16, 0, 0, 1, 2, {13, 90}, RA_F32, 0, 1},   /* a block all padding */
        {2, 203, 4, 1, 72, 12.0, 0, 1, 3, {64, 70, 190}, RA_F32, 0, 1},
        {2, 230, 4, 2, 24, 0, 0, 1, 3, {50, 120, 121}, RA_F32, 70, 1}, /* chunks from lp */
        {2, 160, 4, 2, 40, 0, 60, 0, 2, {41, 100}, RA_BF16, 0, 1},
        {1, 203, 4, 1, 72, 0, 0, 1, 3, {30, 41, 150}, RA_F32, 0, 2},
        {2, 150, 6, 3, 33, 20.0, 30, 0, 2, {64, 96}, RA_F32, 50, 2},
        {2, 203, 4, 1, 72, 0, 0, 1, 3, {64, 70, 190}, RA_F32, 0, 3}, /* dropout */
        {1, 180, 4, 2, 48, 0, 50, 0, 2, {70, 71}, RA_BF16, 60, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_split(&cases[i], 60 + i);
}

/* The diagonal block of a whole sequence on zeroed gradients:
 * ra_attention_backward's values (its tiles, its order; == so that a -0
 * written there and 0 + -0 added here agree). */
static void test_block_backward_diagonal(void)
{
    const split_case c = {2, 170, 4, 2, 40, 0, 60, 1, 0, {0}, RA_F32, 0, 0};
    const int64_t nq = c.B * c.S * c.H * c.D, nk = c.B * c.S * c.Hkv * c.D;
    float *x = malloc(sizeof(float) * (6 * nq + 6 * nk + c.B * c.H * c.S)), sinks[4] = {0.5f, -1, 2, 0};
    float *q = x, *out = q + nq, *dout = out + nq, *dq = dout + nq, *aq = dq + nq, *k = aq + nq;
    float *v = k + nk, *dk = v + nk, *dv = dk + nk, *ak = dv + nk, *av = ak + nk, *lse = av + nk;
    ra_test_fill(q, nq, 5), ra_test_fill(k, nk, 6), ra_test_fill(v, nk, 7), ra_test_fill(dout, nq, 8);
    ra_attention_options o = ra_attention_options_init();
    o.window = c.window;
    o.sinks = sinks;
    ra_tensor tq = rows_of(q, &c, c.H, 0, c.S), tk = rows_of(k, &c, c.Hkv, 0, c.S);
    ra_tensor tv = rows_of(v, &c, c.Hkv, 0, c.S), to = rows_of(out, &c, c.H, 0, c.S);
    ra_tensor tdo = rows_of(dout, &c, c.H, 0, c.S);
    ra_tensor tdq = rows_of(dq, &c, c.H, 0, c.S), tdk = rows_of(dk, &c, c.Hkv, 0, c.S);
    ra_tensor tdv = rows_of(dv, &c, c.Hkv, 0, c.S), taq = rows_of(aq, &c, c.H, 0, c.S);
    ra_tensor tak = rows_of(ak, &c, c.Hkv, 0, c.S), tav = rows_of(av, &c, c.Hkv, 0, c.S);
    CHECK(ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, &o) == RA_OK, "forward");
    CHECK(ra_attention_backward(NULL, &tdq, &tdk, &tdv, &tdo, &tq, &tk, &tv, &to, lse, &o) ==
              RA_OK, "backward");
    memset(aq, 0, sizeof(float) * nq), memset(ak, 0, sizeof(float) * nk);
    memset(av, 0, sizeof(float) * nk);
    CHECK(ra_attention_block_backward(NULL, &taq, &tak, &tav, &tdo, &tq, &tk, &tv, &to, lse, 9, 9, 0,
                                      &o) == RA_OK, "block: %s", ra_last_error());
    int same = 1;
    for (int64_t i = 0; i < nq; i++) same &= aq[i] == dq[i];
    for (int64_t i = 0; i < nk; i++) same &= ak[i] == dk[i] && av[i] == dv[i];
    CHECK(same, "the diagonal block differs from ra_attention_backward");
    free(x);
}

/* A padding query's row of dq and a padding key's rows of dk and dv are
 * left as they were (the block adds nothing there), and lse may not lie on
 * the padding it reads. */
static void test_block_padding_adds_nothing(void)
{
    enum { B = 1, S = 6, H = 2, D = 8 };
    float q[B * S * H * D], k[B * S * H * D], out[B * S * H * D], lse[B * H * S];
    float dq[B * S * H * D], dk[B * S * H * D], dv[B * S * H * D];
    ra_test_fill(q, B * S * H * D, 3), ra_test_fill(k, B * S * H * D, 4);
    const uint8_t pad[S] = {0, 1, 1, 0, 1, 1}; /* rows 0 and 3: padding */
    ra_attention_options o = ra_attention_options_init();
    o.padding_mask = pad;
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D), tk = ra_tensor_4d(k, RA_F32, B, S, H, D);
    ra_tensor to = ra_tensor_4d(out, RA_F32, B, S, H, D);
    CHECK(ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tk, &o) == RA_OK, "forward");
    for (int i = 0; i < B * S * H * D; i++) dq[i] = dk[i] = dv[i] = 1.0f;
    ra_tensor tdq = ra_tensor_4d(dq, RA_F32, B, S, H, D), tdk = ra_tensor_4d(dk, RA_F32, B, S, H, D);
    ra_tensor tdv = ra_tensor_4d(dv, RA_F32, B, S, H, D);
    CHECK(ra_attention_block_backward(NULL, &tdq, &tdk, &tdv, &to, &tq, &tk, &tk, &to, lse, 0, 0,
                                      S, &o) == RA_OK, "block backward: %s", ra_last_error());
    int kept = 1;
    for (int r = 0; r < S; r += 3) /* rows 0 and 3 */
        for (int i = 0; i < H * D; i++)
            kept &= dq[r * H * D + i] == 1.0f && dk[r * H * D + i] == 1.0f &&
                    dv[r * H * D + i] == 1.0f;
    CHECK(kept, "a padding row's gradient was changed");
    /* lse over the padding mask's bytes */
    float over[B * H * S];
    memcpy(over, pad, sizeof pad);
    o.padding_mask = (const uint8_t *)over;
    CHECK(ra_attention_block_lse(NULL, &to, over, &tq, &tk, &tk, 0, 0, S, &o) == RA_ERR_ARGUMENT,
          "lse over padding_mask");
}

/* The cases that reach the SIMD kernels, run on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_block_matches_reference);
    RUN(test_block_is_forward_lse);
    RUN(test_short_blocks);
    RUN(test_short_batch_rows);
    RUN(test_decode_lse);
    RUN(test_block_backward_sums);
    RUN(test_block_backward_diagonal);
    RUN(test_block_padding_adds_nothing);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    RUN(test_errors);
    RUN(test_block_backward_errors);
    return ra_test_summary("attention_block");
}
