/*
 * fuzz_kvcache.c — the KV cache on fuzzed arguments: ra_kv_cache_create
 * (sizes, dtypes, 8-bit ones and fp8's scales), then a few ra_kv_cache_append and ra_attention_decode
 * calls (strided views, optional q, per-sequence n_new and n_query,
 * positions in every form, ropes of both layouts and partial rotary, the
 * calling thread or two) and resets.
 *
 * An append must rotate the first n_new[b] rows of q and k as the scalar
 * reference rotation does, bit for bit, leave the other rows alone, write
 * k and v (rounded to the cache's dtype; 8-bit: the codes and scales the
 * scalar quantizers of quant8.h give) into the slots after each
 * sequence's length and nothing else, and advance the lengths.  A decode
 * must give, for row t < n_query[b] (the token in slot length[b] -
 * n_query[b] + t), the softmax attention over slots 0 .. that slot computed
 * here in double, within a float32 rounding bound, and leave the other rows
 * of out alone.  A refused call must be a documented status and change no
 * buffer, no cache slot and no length; a call built only of valid arguments
 * must succeed.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "fuzz_positions.h"
#include "fuzz_views.h"
#include "kvcache_internal.h"
#include "rope_internal.h"

#define NO_COVERAGE __attribute__((no_sanitize("coverage")))

static ra_context *two_threads;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    FUZZ_CHECK(ra_context_create(&two_threads, 2) == RA_OK, "context");
    return 0;
}

typedef struct state {
    ra_kv_cache *cache;
    ra_rope *rope;
    int64_t batch, capacity, hkv, d, rep;
    ra_dtype dtype;
    int rope_fits;    /* the rope's head_dim is the cache's */
    ra_tensor kc, vc; /* the cache's storage views (8-bit: its codes) */
    size_t cache_bytes;
    size_t scale_bytes; /* an 8-bit cache's scales of K, and of V (else 0) */
} state;

/* A copy of the cache's storage, scales and lengths, to compare with later. */
typedef struct snapshot {
    void *k, *v;
    float *ks, *vs;
    int64_t length[4];
} snapshot;

static snapshot take_snapshot(const state *s)
{
    snapshot p = {malloc(s->cache_bytes), malloc(s->cache_bytes), malloc(s->scale_bytes + 4),
                  malloc(s->scale_bytes + 4), {0}};
    memcpy(p.k, s->kc.data, s->cache_bytes);
    memcpy(p.v, s->vc.data, s->cache_bytes);
    if (s->scale_bytes) memcpy(p.ks, s->cache->k_scale, s->scale_bytes);
    if (s->scale_bytes) memcpy(p.vs, s->cache->v_scale, s->scale_bytes);
    for (int64_t b = 0; b < s->batch; b++) p.length[b] = ra_kv_cache_length(s->cache, b);
    return p;
}

static void free_snapshot(snapshot *p)
{
    free(p->k), free(p->v), free(p->ks), free(p->vs);
}

/* Element d of row (b, j, g) of the cache's K (which 0) or V, as decoding
 * reads it: an 8-bit cache's code times its scale. */
static double cache_elem(const state *s, int which, int64_t b, int64_t j, int64_t g, int64_t d)
{
    const ra_tensor *t = which ? &s->vc : &s->kc;
    const int64_t i = b * t->stride[0] + j * t->stride[1] + g * t->stride[2] + d;
    if (!ra_dtype_is_cache8(s->dtype)) return load_elem(t->data, s->dtype, i);
    const float *scales = ra_kv_cache_scales(s->cache, which, b, g);
    return (double)ra_load(t->data, s->dtype, i) * scales[s->dtype == RA_I8 ? j : 0];
}

static int unchanged(const state *s, const snapshot *p)
{
    int same = memcmp(p->k, s->kc.data, s->cache_bytes) == 0 &&
               memcmp(p->v, s->vc.data, s->cache_bytes) == 0 &&
               (!s->scale_bytes || (memcmp(p->ks, s->cache->k_scale, s->scale_bytes) == 0 &&
                                    memcmp(p->vs, s->cache->v_scale, s->scale_bytes) == 0));
    for (int64_t b = 0; b < s->batch; b++)
        same = same && p->length[b] == ra_kv_cache_length(s->cache, b);
    return same;
}

/* A [batch, seq, heads, d] f32 view in a fresh buffer (*buf, *bytes). */
static ra_tensor take_view(fuzz_input *in, int64_t batch, int64_t seq, int64_t heads, int64_t d,
                           int broadcast, int *valid, void **buf, size_t *bytes)
{
    ra_tensor t = {NULL, RA_F32, {batch, seq, heads, d}, {0, 0, 0, 1}};
    take_strides(in, &t, broadcast, valid);
    int64_t span = view_span(&t);
    if (span == 0) *valid = 0;
    *buf = take_buffer(in, RA_F32, span ? span : 1, bytes);
    t.data = *buf;
    return t;
}

/* Row (b, s, h) of a view and element d of it. */
static int64_t at(const ra_tensor *t, int64_t b, int64_t s, int64_t h)
{
    return b * t->stride[0] + s * t->stride[1] + h * t->stride[2];
}

/* After a successful append: rows s < n of q and k equal the reference
 * rotation of the originals q0 and k0 (rotated here, in rq and rk), rows
 * past n the originals; slots length + s of the cache hold k (rotated) and
 * v rounded to its dtype; nothing else in the cache moved. */
NO_COVERAGE static void check_append(const state *s, const snapshot *before, const ra_tensor *q,
                                     const ra_tensor *q0, const ra_tensor *rq,
                                     const ra_tensor *k, const ra_tensor *k0,
                                     const ra_tensor *rk, const ra_tensor *v,
                                     const ra_positions *pos, const int64_t *n_new)
{
    const int64_t seq = k->shape[1];
    const ra_tensor views[2] = {*rk, q ? *rq : *rk};
    for (int i = 0; i < (q ? 2 : 1); i++)
        FUZZ_CHECK(ra_rope_apply_reference(s->rope, &views[i], &views[i], pos, RA_FORWARD) == RA_OK,
                   "the reference refused what the append took");
    void *want_k = malloc(s->cache_bytes), *want_v = malloc(s->cache_bytes);
    float *want_ks = malloc(s->scale_bytes + 4), *want_vs = malloc(s->scale_bytes + 4);
    memcpy(want_k, before->k, s->cache_bytes);
    memcpy(want_v, before->v, s->cache_bytes);
    memcpy(want_ks, before->ks, s->scale_bytes);
    memcpy(want_vs, before->vs, s->scale_bytes);
    for (int64_t b = 0; b < s->batch; b++) {
        int64_t n = n_new ? n_new[b] : seq;
        FUZZ_CHECK(ra_kv_cache_length(s->cache, b) == before->length[b] + n, "length of %lld",
                   (long long)b);
        for (int64_t t = 0; t < seq; t++) {
            const ra_tensor *pairs[2][2] = {{k, t < n ? &views[0] : k0},
                                            {q, t < n ? &views[1] : q0}};
            for (int i = 0; i < (q ? 2 : 1); i++) {
                const ra_tensor *got = pairs[i][0], *want = pairs[i][1];
                for (int64_t h = 0; h < got->shape[2]; h++)
                    FUZZ_CHECK(memcmp((float *)got->data + at(got, b, t, h),
                                      (float *)want->data + at(want, b, t, h),
                                      (size_t)s->d * sizeof(float)) == 0,
                               "%s row (%lld, %lld, %lld) after the append", i ? "q" : "k",
                               (long long)b, (long long)t, (long long)h);
            }
            if (t >= n) continue;
            for (int64_t h = 0; ra_dtype_is_cache8(s->dtype) && h < s->hkv; h++) {
                /* the row quantized by the scalar quantizers, its scale beside */
                const int64_t p = before->length[b] + t, row = at(&s->kc, b, p, h);
                const float *kx = (float *)views[0].data + at(&views[0], b, t, h);
                const float *vx = (float *)v->data + at(v, b, t, h);
                if (s->dtype == RA_I8) {
                    want_ks[(b * s->hkv + h) * s->capacity + p] =
                        ra_quantize_i8((int8_t *)want_k + row, kx, s->d);
                    want_vs[(b * s->hkv + h) * s->capacity + p] =
                        ra_quantize_i8((int8_t *)want_v + row, vx, s->d);
                } else {
                    ra_quantize_e4m3((uint8_t *)want_k + row, kx, s->cache->k_scale[h], s->d);
                    ra_quantize_e4m3((uint8_t *)want_v + row, vx, s->cache->v_scale[h], s->d);
                }
            }
            for (int64_t h = 0; !ra_dtype_is_cache8(s->dtype) && h < s->hkv; h++)
                for (int64_t d = 0; d < s->d; d++) {
                    int64_t slot = at(&s->kc, b, before->length[b] + t, h) + d;
                    store_elem(want_k, s->dtype, slot,
                               ((float *)views[0].data)[at(&views[0], b, t, h) + d]);
                    store_elem(want_v, s->dtype, slot, ((float *)v->data)[at(v, b, t, h) + d]);
                }
        }
    }
    FUZZ_CHECK(memcmp(want_k, s->kc.data, s->cache_bytes) == 0, "cached keys (dtype %d)",
               (int)s->dtype);
    FUZZ_CHECK(memcmp(want_v, s->vc.data, s->cache_bytes) == 0, "cached values (dtype %d)",
               (int)s->dtype);
    FUZZ_CHECK(!s->scale_bytes || (memcmp(want_ks, s->cache->k_scale, s->scale_bytes) == 0 &&
                                   memcmp(want_vs, s->cache->v_scale, s->scale_bytes) == 0),
               "the 8-bit cache's scales (dtype %d)", (int)s->dtype);
    free(want_k);
    free(want_v);
    free(want_ks);
    free(want_vs);
}

/* q, k and v for an append: each in its own buffer, or (`fused`) heads of
 * one buffer whose token rows hold q, k and v side by side; home[i] is the
 * buffer view i lies in.  Rarely two views made to share elements. */
static void take_append_views(fuzz_input *in, const state *s, int64_t seq, int with_q,
                              ra_tensor *views, int *home, void **bufs, size_t *bytes, int *valid)
{
    const int64_t heads = s->hkv * s->rep, d = s->d;
    const int64_t widths[3] = {heads, s->hkv, s->hkv};
    if (with_q && take_range(in, 0, 3) == 3) {
        int64_t pad = take_range(in, 0, 3), row = (heads + 2 * s->hkv) * d + pad;
        int64_t tokens = s->batch * (seq > 0 ? seq : 1);
        bufs[0] = take_buffer(in, RA_F32, tokens * row, &bytes[0]);
        for (int i = 0, column = 0; i < 3; column += (int)(widths[i] * d), i++) {
            ra_tensor t = {(float *)bufs[0] + column, RA_F32, {s->batch, seq, widths[i], d},
                           {seq * row, row, d, 1}};
            views[i] = t;
            home[i] = 0;
        }
        int alias = take_range(in, 0, 15);
        if (alias == 15) views[2].data = views[1].data, *valid = 0; /* v on k */
        else if (alias == 14) views[1].data = views[0].data, *valid = 0; /* k on q */
        return;
    }
    for (int i = with_q ? 0 : 1; i < 3; i++) {
        views[i] = take_view(in, s->batch, seq, widths[i], d, i == 2, valid, &bufs[i], &bytes[i]);
        home[i] = i;
    }
}

static void do_append(fuzz_input *in, state *s)
{
    int valid = 1;
    int64_t seq = take_size(in, 6, &valid);
    void *bufs[3] = {NULL, NULL, NULL}, *orig[3] = {NULL, NULL, NULL};
    size_t bytes[3] = {0, 0, 0};
    int with_q = take_range(in, 0, 3) != 3, home[3] = {0, 1, 2};
    ra_tensor views[3] = {{0}, {0}, {0}};
    take_append_views(in, s, seq, with_q, views, home, bufs, bytes, &valid);
    ra_tensor *q = with_q ? &views[0] : NULL, *k = &views[1], *v = &views[2];
    if (!s->rope_fits) valid = 0; /* RA_ERR_SHAPE */
    int wrong = take_range(in, 0, 31);
    if (wrong == 31) k->dtype = RA_I8, valid = 0; /* a cache dtype, not a tensor's */
    else if (wrong == 30) v->shape[2] += 1, valid = 0;
    else if (wrong == 29 && q) q->shape[1] += 1, valid = 0;
    fuzz_positions fp;
    take_positions(in, &fp, s->batch, seq > 0 ? seq : 1, 0, 1, &valid);
    if (fp.p.cu_seqlens) valid = 0; /* RA_ERR_UNSUPPORTED: the inputs are a grid */
    int64_t n_new[4], *np = NULL;
    int fits = 1;
    if (take_range(in, 0, 1)) {
        np = n_new;
        for (int64_t b = 0; b < s->batch; b++) {
            n_new[b] = take_range(in, 0, seq > 0 ? seq + 1 : 1) - (take_range(in, 0, 31) == 31);
            if (n_new[b] < 0 || n_new[b] > seq) valid = 0;
        }
    }
    for (int64_t b = 0; b < s->batch; b++)
        if ((np ? n_new[b] : seq) > s->capacity - ra_kv_cache_length(s->cache, b)) fits = 0;
    for (int i = 0; i < 3; i++)
        if (bufs[i]) {
            orig[i] = malloc(bytes[i]);
            memcpy(orig[i], bufs[i], bytes[i]);
        }
    snapshot before = take_snapshot(s);
    ra_context *ctx = take_range(in, 0, 1) ? two_threads : NULL;
    ra_status st = ra_kv_cache_append(ctx, s->cache, s->rope, q, k, v, &fp.p, np);
    if (valid && fits) FUZZ_CHECK(st == RA_OK, "valid append refused: %d", (int)st);
    if (valid && !fits)
        FUZZ_CHECK(st == RA_ERR_CACHE_FULL, "an append past the capacity: %d", (int)st);
    if (st == RA_OK) {
        void *rotated[3] = {NULL, NULL, NULL};
        for (int i = 0; i < 3; i++)
            if (bufs[i]) {
                rotated[i] = malloc(bytes[i]);
                memcpy(rotated[i], orig[i], bytes[i]);
            }
        ra_tensor q0 = views[0], rq = views[0];
        if (q) {
            q0 = rebase(*q, bufs[home[0]], orig[home[0]]);
            rq = rebase(*q, bufs[home[0]], rotated[home[0]]);
        }
        ra_tensor k0 = rebase(*k, bufs[home[1]], orig[home[1]]);
        ra_tensor rk = rebase(*k, bufs[home[1]], rotated[home[1]]);
        check_append(s, &before, q, &q0, &rq, k, &k0, &rk, v, &fp.p, np);
        for (int i = 0; i < 3; i++) free(rotated[i]);
    } else {
        FUZZ_CHECK(st == RA_ERR_NULL || st == RA_ERR_SIZE || st == RA_ERR_ARGUMENT ||
                       st == RA_ERR_SHAPE || st == RA_ERR_DTYPE || st == RA_ERR_POSITION ||
                       st == RA_ERR_UNSUPPORTED || st == RA_ERR_OVERFLOW ||
                       st == RA_ERR_CACHE_FULL,
                   "undocumented status %d", (int)st);
        FUZZ_CHECK(unchanged(s, &before), "a refused append (status %d) changed the cache", (int)st);
        for (int i = 0; i < 3; i++)
            FUZZ_CHECK(!bufs[i] || memcmp(bufs[i], orig[i], bytes[i]) == 0,
                       "a refused append (status %d) wrote input %d", (int)st, i);
    }
    free_snapshot(&before);
    for (int i = 0; i < 3; i++) free(bufs[i]), free(orig[i]);
    fuzz_positions_free(&fp);
}

/* out[b, t, h] over the cache in double, within max|v| (4 D 2^-24 L +
 * (len + 10) 2^-24 + 1e-6) of it, L the largest sum_d |q_d k_d| / sqrt(D). */
NO_COVERAGE static void check_decode(const state *s, const ra_tensor *out, const ra_tensor *q,
                                     const int64_t *n_query)
{
    const int64_t T = q->shape[1], D = s->d;
    const double scale = 1.0 / sqrt((double)D);
    double logits[64], want[64];
    for (int64_t b = 0; b < s->batch; b++) {
        int64_t nq = n_query ? n_query[b] : T, len = ra_kv_cache_length(s->cache, b);
        for (int64_t t = 0; t < nq; t++)
            for (int64_t h = 0; h < q->shape[2]; h++) {
                int64_t last = len - nq + t, g = h / s->rep;
                double max = -INFINITY, sum = 0, big = 0, vmax = 0;
                for (int64_t j = 0; j <= last; j++) {
                    double dot = 0, mag = 0;
                    for (int64_t d = 0; d < D; d++) {
                        double p = (double)((float *)q->data)[at(q, b, t, h) + d] *
                                   cache_elem(s, 0, b, j, g, d);
                        dot += p;
                        mag += fabs(p);
                    }
                    logits[j] = dot * scale;
                    big = fmax(big, mag * scale);
                    max = fmax(max, logits[j]);
                }
                for (int64_t j = 0; j <= last; j++) sum += (logits[j] = exp(logits[j] - max));
                for (int64_t d = 0; d < D; d++) want[d] = 0;
                for (int64_t j = 0; j <= last; j++)
                    for (int64_t d = 0; d < D; d++) {
                        double x = cache_elem(s, 1, b, j, g, d);
                        want[d] += logits[j] / sum * x;
                        vmax = fmax(vmax, fabs(x));
                    }
                double bound = vmax * (4.0 * (double)D * 0x1p-24 * big +
                                       (double)(last + 11) * 0x1p-24 + 1e-6);
                for (int64_t d = 0; d < D; d++) {
                    double got = ((float *)out->data)[at(out, b, t, h) + d];
                    FUZZ_CHECK(fabs(got - want[d]) <= bound,
                               "decode out[%lld, %lld, %lld, %lld] = %.9g, expected %.9g (bound "
                               "%.3g, slot %lld, dtype %d)", (long long)b, (long long)t,
                               (long long)h, (long long)d, got, want[d], bound, (long long)last,
                               (int)s->dtype);
                }
            }
    }
}

static void do_decode(fuzz_input *in, state *s)
{
    int valid = 1;
    int64_t T = take_size(in, 4, &valid), heads = s->hkv * s->rep;
    void *qbuf, *obuf;
    size_t qbytes, obytes;
    ra_tensor q = take_view(in, s->batch, T, heads, s->d, 1, &valid, &qbuf, &qbytes);
    ra_tensor out = take_view(in, s->batch, T, heads, s->d, 0, &valid, &obuf, &obytes);
    if (take_range(in, 0, 31) == 31) out.shape[2] += 1, valid = 0;
    int64_t n_query[4], *np = NULL;
    if (take_range(in, 0, 1)) {
        np = n_query;
        for (int64_t b = 0; b < s->batch; b++) {
            n_query[b] = take_range(in, 0, T > 0 ? T + 1 : 1) - (take_range(in, 0, 31) == 31);
            if (n_query[b] < 0 || n_query[b] > T) valid = 0;
        }
    }
    for (int64_t b = 0; b < s->batch; b++)
        if ((np ? n_query[b] : T) > ra_kv_cache_length(s->cache, b)) valid = 0; /* RA_ERR_SIZE */
    void *qorig = malloc(qbytes), *oorig = malloc(obytes);
    memcpy(qorig, qbuf, qbytes);
    memcpy(oorig, obuf, obytes);
    snapshot before = take_snapshot(s);
    ra_context *ctx = take_range(in, 0, 1) ? two_threads : NULL;
    ra_status st = ra_attention_decode(ctx, s->cache, &out, &q, np, NULL);
    FUZZ_CHECK(unchanged(s, &before) && memcmp(qbuf, qorig, qbytes) == 0,
               "decode (status %d) changed the cache or q", (int)st);
    if (valid) FUZZ_CHECK(st == RA_OK, "valid decode refused: %d", (int)st);
    if (st == RA_OK) {
        check_decode(s, &out, &q, np);
        for (int64_t b = 0; b < s->batch; b++) /* rows past n_query: as they were */
            for (int64_t t = np ? np[b] : T; t < T; t++)
                for (int64_t h = 0; h < heads; h++)
                    FUZZ_CHECK(memcmp((float *)obuf + at(&out, b, t, h),
                                      (float *)oorig + at(&out, b, t, h),
                                      (size_t)s->d * sizeof(float)) == 0,
                               "decode wrote row %lld past n_query %lld", (long long)t,
                               (long long)np[b]);
    } else {
        FUZZ_CHECK(st == RA_ERR_NULL || st == RA_ERR_SIZE || st == RA_ERR_ARGUMENT ||
                       st == RA_ERR_SHAPE || st == RA_ERR_DTYPE || st == RA_ERR_GQA ||
                       st == RA_ERR_OVERFLOW, "undocumented status %d", (int)st);
        FUZZ_CHECK(memcmp(obuf, oorig, obytes) == 0, "a refused decode (status %d) wrote", (int)st);
    }
    free_snapshot(&before);
    free(qbuf), free(obuf), free(qorig), free(oorig);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t dims[] = {8, 2, 4, 6, 16, 34, 64, 3, 0};
    fuzz_input in = {data, size};
    int valid = 1;
    state s;
    s.batch = take_size(&in, 3, &valid);
    s.capacity = take_size(&in, 40, &valid);
    s.hkv = take_size(&in, 2, &valid);
    s.rep = 1 + take_range(&in, 0, 2);
    s.d = TAKE_ONE_OF(&in, dims);
    if (s.d % 2 || s.d <= 0) valid = 0;
    /* f32, f16, bf16, int8, fp8 e4m3, or no dtype (3) */
    static const ra_dtype dtypes[6] = {RA_F32, RA_F16, RA_BF16, RA_I8, RA_F8E4M3, RA_DTYPE_COUNT};
    s.dtype = dtypes[take_range(&in, 0, 15) % 6];
    if (s.dtype == RA_DTYPE_COUNT) valid = 0;
    s.cache = (ra_kv_cache *)&s;
    ra_status st = ra_kv_cache_create(&s.cache, s.batch, s.capacity, s.hkv, s.d, s.dtype);
    if (!valid) {
        FUZZ_CHECK(st == RA_ERR_SIZE || st == RA_ERR_HEAD_DIM || st == RA_ERR_ARGUMENT,
                   "ra_kv_cache_create: status %d", (int)st);
        FUZZ_CHECK(s.cache == NULL, "out not NULL after a failure");
        return 0;
    }
    FUZZ_CHECK(st == RA_OK, "valid cache refused: %d", (int)st);
    const int eight = ra_dtype_is_cache8(s.dtype);
    FUZZ_CHECK(ra_kv_cache_views(s.cache, &s.kc, &s.vc) == (eight ? RA_ERR_DTYPE : RA_OK), "views");
    s.kc = ra_kv_cache_view(s.cache, 0); /* the storage itself: an 8-bit cache's codes */
    s.vc = ra_kv_cache_view(s.cache, 1);
    s.cache_bytes = (size_t)(s.batch * s.capacity * s.hkv * s.d) * ra_dtype_size(s.dtype);
    s.scale_bytes = !eight ? 0 : (size_t)(s.dtype == RA_I8 ? s.batch * s.capacity * s.hkv : s.hkv) * 4;
    if (s.dtype == RA_F8E4M3 && take_range(&in, 0, 1)) { /* scales 2^-8 .. 2^7, per head or one */
        float ks[2], vs[2];
        const int64_t n_scales = take_range(&in, 0, 1) ? s.hkv : 1;
        for (int64_t g = 0; g < n_scales; g++)
            ks[g] = ldexpf(1.0f + (float)take_range(&in, 0, 7) / 8, (int)take_range(&in, 0, 15) - 8),
            vs[g] = ldexpf(1.0f + (float)take_range(&in, 0, 7) / 8, (int)take_range(&in, 0, 15) - 8);
        FUZZ_CHECK(ra_kv_cache_set_scales(s.cache, ks, vs, n_scales) == RA_OK, "fp8 scales");
    }
    memset(s.kc.data, 0, s.cache_bytes); /* storage is uninitialized until appended */
    memset(s.vc.data, 0, s.cache_bytes);
    s.rope_fits = take_range(&in, 0, 31) != 31;
    ra_rope_config rc = ra_rope_config_default(s.d + (s.rope_fits ? 0 : 2));
    rc.layout = (ra_layout)take_range(&in, 0, 1);
    rc.rotary_dim = take_range(&in, 0, 3) == 3 && s.d >= 4 ? (s.d / 2) & ~(int64_t)1 : 0;
    rc.table_size = take_range(&in, 0, 16);
    FUZZ_CHECK(ra_rope_create(&s.rope, &rc) == RA_OK, "rope");
    for (int op = 0; op < 6 && in.n > 0; op++) {
        int what = take_range(&in, 0, 15);
        if (what < 9) do_append(&in, &s);
        else if (what < 15) do_decode(&in, &s);
        else ra_kv_cache_reset(s.cache);
    }
    ra_rope_destroy(s.rope);
    ra_kv_cache_destroy(s.cache);
    return 0;
}
