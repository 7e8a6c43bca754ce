/*
 * rope_impl.h — the RoPE task, written once against simd.h and compiled per
 * ISA (kernels_*.c).  A task rotates a range of tokens of x into out; each
 * token's cos/sin row (from the table, or formed on the fly beyond it) is
 * read once and serves every head of the token.
 *
 *   x, out: [B, S, heads, D] strided views, f32, f16 or bf16; pairs
 *   [0, rotary_dim/2) rotate, features [rotary_dim, D) pass through.
 *   c, s: the row's cos and sign * sin (+1 forward, -1 inverse), per pair.
 *
 *   half (f32, f16):  a = x[i, i + W), b = x[h + i, h + i + W)   (h = rotary_dim/2)
 *                     y_a = a c - b s          y_b = a s + b c
 *   interleaved (f32, f16): v = x[2i, 2i + W) = [a0 b0 a1 b1 ...], v' = v
 *                     with each pair swapped (one in-lane shuffle)
 *                     y = v [c0 c0 c1 c1 ...] + v' [-s0 s0 -s1 s1 ...]
 *   bf16: 2W values load as W 32-bit lanes of (even, odd) value pairs that
 *         widen and round without shuffles (simd_half.h): interleaved, the
 *         lanes are the rotation pairs themselves (c, s straight from the
 *         row); half, the even and odd pairs rotate apart (c, s split into
 *         even and odd once per token).
 *
 * These are the reference's float32 products and sums (a c + b (-s) is
 * a c - b s exactly, and a sum does not depend on the order of its two
 * terms), each rounded on its own, so the result equals rope_ref.c's bit
 * for bit on every ISA.  For that, this file's functions are compiled with
 * contraction to FMA off, whatever the including file's flags, and without
 * GCC's auto-vectorizer, which forms FMADDSUB from the scalar tails'
 * a c - b s, a s + b c even with contraction off (GCC 12); the vector code
 * is written out.  16-bit storage is widened and rounded once.
 */
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/simd_half.h"
#include "rope_internal.h"

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off", "no-tree-vectorize")

/* Pairs of a token's cos/sin row handled at once: rows of up to ROPE_CHUNK
 * pairs (head_dim up to 512) serve every head in one pass over the token. */
enum { ROPE_CHUNK = 256 };

/* Lane permutations, from the lane numbers 0, 1, ..., RA_W - 1. */
#if RA_W == 16
#define ROPE_LANES {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
#elif RA_W == 8
#define ROPE_LANES {0, 1, 2, 3, 4, 5, 6, 7}
#else
#define ROPE_LANES {0, 1, 2, 3}
#endif
#define ROPE_PAIR_SWAP ((vi)ROPE_LANES ^ 1)               /* 1 0 3 2 ... */
#define ROPE_DUP_LOW ((vi)ROPE_LANES >> 1)                /* 0 0 1 1 ... */
#define ROPE_DUP_HIGH (((vi)ROPE_LANES >> 1) + RA_W / 2) /* W/2 W/2 ... */
#define ROPE_EVEN ((vi)ROPE_LANES * 2)                    /* 0 2 4 ... of two vectors */
#define ROPE_ODD ((vi)ROPE_LANES * 2 + 1)                 /* 1 3 5 ... */

#define ROPE_INLINE static inline __attribute__((always_inline))

/* RA_W elements p[i, i + RA_W), f32 or f16, as float32 and back; dt is a
 * constant wherever these are inlined, so each storage type gets its loop. */
ROPE_INLINE vf rope_load(const void *p, int64_t i, ra_dtype dt)
{
    if (dt == RA_F32) return vload((const float *)p + i);
    return vload_f16((const uint16_t *)p + i);
}

ROPE_INLINE void rope_store(void *p, int64_t i, ra_dtype dt, vf v)
{
    if (dt == RA_F32) vstore((float *)p + i, v);
    else vstore_f16((uint16_t *)p + i, v);
}

/* One pair in scalar form (tails), as rope_ref.c writes it. */
ROPE_INLINE void rope_pair(void *y, const void *x, ra_dtype dt, int64_t ia, int64_t ib, float c,
                           float sn)
{
    float a = ra_load(x, dt, ia), b = ra_load(x, dt, ib);
    ra_store(y, dt, ia, a * c - b * sn);
    ra_store(y, dt, ib, a * sn + b * c);
}

/* ce = [c0 c0 c1 c1 ...], se = [-s0 s0 -s1 s1 ...] with s = sign * sin, for
 * n pairs. */
static void rope_expand_span(float *ce, float *se, const float *c, const float *s, float sign,
                             int64_t n)
{
    const vi even = ((vi)ROPE_LANES & 1) == 0;
    const vf vsign = vsplat(sign);
    int64_t i = 0;
    for (; i + RA_W <= n; i += RA_W) {
        vf cv = vload(c + i), sv = vload(s + i) * vsign;
        vf slo = __builtin_shuffle(sv, ROPE_DUP_LOW), shi = __builtin_shuffle(sv, ROPE_DUP_HIGH);
        vstore(ce + 2 * i, __builtin_shuffle(cv, ROPE_DUP_LOW));
        vstore(ce + 2 * i + RA_W, __builtin_shuffle(cv, ROPE_DUP_HIGH));
        vstore(se + 2 * i, vselect(even, -slo, slo));
        vstore(se + 2 * i + RA_W, vselect(even, -shi, shi));
    }
    for (; i < n; i++) {
        float sn = sign * s[i];
        ce[2 * i] = ce[2 * i + 1] = c[i];
        se[2 * i] = -sn;
        se[2 * i + 1] = sn;
    }
}

/* What the interleaved f32/f16 run multiplies by: rope_expand_span of the n
 * pairs turned by rot (entry k is pair (k + rot) mod n), so that the run's
 * aligned vectors read aligned entries, then RA_W more floats from the
 * start again for a vector that wraps. */
static void rope_expand(float *ce, float *se, const float *c, const float *s, float sign,
                        int64_t n, int64_t rot)
{
    rope_expand_span(ce, se, c + rot, s + rot, sign, n - rot);
    rope_expand_span(ce + 2 * (n - rot), se + 2 * (n - rot), c, s, sign, rot);
    for (int64_t k = 2 * n; k < 2 * n + RA_W; k++) {
        ce[k] = ce[k - 2 * n];
        se[k] = se[k - 2 * n];
    }
}

/* cw = c, sw = sign * s for n pairs. */
static void rope_copy_span(float *cw, float *sw, const float *c, const float *s, float sign,
                           int64_t n)
{
    const vf vsign = vsplat(sign);
    int64_t i = 0;
    for (; i + RA_W <= n; i += RA_W) {
        vstore(cw + i, vload(c + i));
        vstore(sw + i, vload(s + i) * vsign);
    }
    for (; i < n; i++) {
        cw[i] = c[i];
        sw[i] = sign * s[i];
    }
}

/* What the interleaved bf16 run multiplies by: cos and sign * sin of the n
 * pairs turned by rot, as rope_expand's, then RA_W more from the start. */
static void rope_wrap(float *cw, float *sw, const float *c, const float *s, float sign, int64_t n,
                      int64_t rot)
{
    rope_copy_span(cw, sw, c + rot, s + rot, sign, n - rot);
    rope_copy_span(cw + n - rot, sw + n - rot, c, s, sign, rot);
    for (int64_t k = n; k < n + RA_W; k++) {
        cw[k] = cw[k - n];
        sw[k] = sw[k - n];
    }
}

/* sign * s for n pairs: s itself forward, negated into out inverse. */
static const float *rope_signed(float *out, const float *s, float sign, int64_t n)
{
    if (sign > 0) return s;
    int64_t i = 0;
    for (; i + RA_W <= n; i += RA_W) vstore(out + i, -vload(s + i));
    for (; i < n; i++) out[i] = -s[i];
    return out;
}

/* For the half-split bf16 loop: per block of 2 RA_W pairs, cd holds the
 * block's even-indexed cos then its odd-indexed cos, sd the same of
 * sign * sin; the pairs past the last whole block are left out. */
static void rope_split(float *cd, float *sd, const float *c, const float *s, float sign,
                       int64_t n)
{
    const vf vsign = vsplat(sign);
    for (int64_t i = 0; i + 2 * RA_W <= n; i += 2 * RA_W) {
        vf c0 = vload(c + i), c1 = vload(c + i + RA_W);
        vf s0 = vload(s + i) * vsign, s1 = vload(s + i + RA_W) * vsign;
        vstore(cd + i, __builtin_shuffle(c0, c1, ROPE_EVEN));
        vstore(cd + i + RA_W, __builtin_shuffle(c0, c1, ROPE_ODD));
        vstore(sd + i, __builtin_shuffle(s0, s1, ROPE_EVEN));
        vstore(sd + i + RA_W, __builtin_shuffle(s0, s1, ROPE_ODD));
    }
}

/* Interleaved pairs a vector holds, and bytes a pair takes. */
ROPE_INLINE int64_t rope_step(ra_dtype dt) { return dt == RA_BF16 ? RA_W : RA_W / 2; }
ROPE_INLINE uintptr_t rope_pair_bytes(ra_dtype dt) { return dt == RA_F32 ? 8 : 4; }

/* Interleaved pairs before the first one where y is aligned to a whole
 * vector (fewer than rope_step); none when y is not aligned to a pair. */
ROPE_INLINE int64_t rope_peel(const void *y, ra_dtype dt)
{
    const uintptr_t a = (uintptr_t)y, pair = rope_pair_bytes(dt), vector = pair * rope_step(dt);
    return a % pair ? 0 : (int64_t)((vector - a % vector) % vector / pair);
}

/* Table entry r moved on by k pairs, modulo n. */
ROPE_INLINE int64_t rope_next(int64_t r, int64_t k, int64_t n)
{
    for (r += k; r >= n; r -= n) {}
    return r;
}

/* One interleaved pair p of a run in scalar form, with entry r of the
 * turned row: expanded (f32, f16) or not (bf16). */
ROPE_INLINE void rope_run_pair(void *y, const void *x, ra_dtype dt, const float *t0,
                               const float *t1, int64_t p, int64_t r)
{
    if (dt == RA_BF16) rope_pair(y, x, dt, 2 * p, 2 * p + 1, t0[r], t1[r]);
    else rope_pair(y, x, dt, 2 * p, 2 * p + 1, t0[2 * r], t1[2 * r + 1]);
}

/* The interleaved pairs [p, p + step) rotated with entries from r on, in
 * the form rope_run_put stores: f32 values (f32, f16: step = RA_W / 2, the
 * swap form), or the bits of RA_W packed bf16 pairs (bf16: step = RA_W,
 * one pair a 32-bit lane). */
ROPE_INLINE vf rope_run_vector(const void *x, ra_dtype dt, const float *t0, const float *t1,
                               int64_t p, int64_t r)
{
    if (dt == RA_BF16) {
        vf a, b, c = vload(t0 + r), s = vload(t1 + r);
        vload_bf16_pairs((const uint16_t *)x + 2 * p, &a, &b);
        return (vf)vbf16_pack(a * c - b * s, a * s + b * c);
    }
    vf v = rope_load(x, 2 * p, dt);
    return v * vload(t0 + 2 * r) + __builtin_shuffle(v, ROPE_PAIR_SWAP) * vload(t1 + 2 * r);
}

ROPE_INLINE void rope_run_put(void *y, ra_dtype dt, int64_t p, vf v)
{
    if (dt == RA_BF16) memcpy((uint16_t *)y + 2 * p, &v, sizeof v);
    else rope_store(y, 2 * p, dt, v);
}

/* A run of interleaved pairs (2p, 2p + 1), p in [0, pairs): one head, or
 * every head of a token whose heads are contiguous and rotate whole.  Pair p
 * takes entry (r0 + p) mod n of the turned row t0, t1 (rope_expand's for
 * f32 and f16, rope_wrap's for bf16).  Vectors are stored where y is aligned
 * to a whole vector (one that straddles two cache lines costs about twice as
 * much), plus one unaligned vector at each end that overlaps its neighbour
 * (and nothing else, the run being at least two vectors long): each vector
 * is loaded before the one it overlaps is stored, so in place both write
 * the same values. */
ROPE_INLINE void rope_run(void *y, const void *x, ra_dtype dt, const float *t0, const float *t1,
                          int64_t n, int64_t r0, int64_t pairs)
{
    const int64_t step = rope_step(dt);
    if (pairs < 2 * step) { /* too short for the two ends to miss each other */
        int64_t p = 0, r = r0;
        for (; p + step <= pairs; p += step, r = rope_next(r, step, n))
            rope_run_put(y, dt, p, rope_run_vector(x, dt, t0, t1, p, r));
        for (; p < pairs; p++, r = rope_next(r, 1, n)) rope_run_pair(y, x, dt, t0, t1, p, r);
        return;
    }
    int64_t p = rope_peel(y, dt), r = rope_next(r0, p, n);
    int64_t held_at = 0; /* where the vector held back goes */
    vf held = rope_run_vector(x, dt, t0, t1, 0, r0);
    if (p == 0) { /* aligned from the start: the first vector is the loop's */
        p = step;
        r = rope_next(r0, step, n);
    }
    for (; p + step <= pairs; p += step, r = rope_next(r, step, n)) {
        vf v = rope_run_vector(x, dt, t0, t1, p, r);
        rope_run_put(y, dt, held_at, held);
        held = v;
        held_at = p;
    }
    if (p < pairs) { /* the last step pairs, unaligned */
        int64_t last = pairs - step;
        vf v = rope_run_vector(x, dt, t0, t1, last, (r0 + last) % n);
        rope_run_put(y, dt, held_at, held);
        held = v;
        held_at = last;
    }
    rope_run_put(y, dt, held_at, held);
}

/* One head, half-split, f32 or f16: pairs (i, half + i) for i in [0, n);
 * s is sign * sin. */
ROPE_INLINE void rope_head_half(void *y, const void *x, ra_dtype dt, const float *c,
                                const float *s, int64_t n, int64_t half)
{
    int64_t i = 0;
    for (; i + RA_W <= n; i += RA_W) {
        vf a = rope_load(x, i, dt), b = rope_load(x, half + i, dt);
        vf cv = vload(c + i), sv = vload(s + i);
        rope_store(y, i, dt, a * cv - b * sv);
        rope_store(y, half + i, dt, a * sv + b * cv);
    }
    for (; i < n; i++) rope_pair(y, x, dt, i, half + i, c[i], s[i]);
}

/* One head, half-split, bf16: 2 RA_W pairs a step, the even-indexed and the
 * odd-indexed ones apart, with rope_split's cd, sd. */
ROPE_INLINE void rope_head_half_bf16(uint16_t *y, const uint16_t *x, const float *cd,
                                     const float *sd, const float *c, const float *s, float sign,
                                     int64_t n, int64_t half)
{
    int64_t i = 0;
    for (; i + 2 * RA_W <= n; i += 2 * RA_W) {
        vf a0, a1, b0, b1;
        vf c0 = vload(cd + i), c1 = vload(cd + i + RA_W);
        vf s0 = vload(sd + i), s1 = vload(sd + i + RA_W);
        vload_bf16_pairs(x + i, &a0, &a1);
        vload_bf16_pairs(x + half + i, &b0, &b1);
        vstore_bf16_pairs(y + i, a0 * c0 - b0 * s0, a1 * c1 - b1 * s1);
        vstore_bf16_pairs(y + half + i, a0 * s0 + b0 * c0, a1 * s1 + b1 * c1);
    }
    for (; i < n; i++) rope_pair(y, x, RA_BF16, i, half + i, c[i], sign * s[i]);
}

/* Element (b, s, h, i) of a view, as a byte address. */
ROPE_INLINE char *rope_element(const ra_tensor *t, int64_t b, int64_t s, int64_t h, int64_t i,
                               size_t esize)
{
    int64_t offset = b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + i;
    return (char *)t->data + (size_t)offset * esize;
}

/* Rotates pairs [first, first + n) (n <= ROPE_CHUNK) of every head of token
 * (b, s); c and sn hold those pairs' cos and sin.  Interleaved, the token's
 * heads are one run when they are contiguous and rotate whole. */
ROPE_INLINE void rope_token(const ra_rope_job *job, ra_dtype dt, int64_t b, int64_t s,
                            const float *c, const float *sn, int64_t first, int64_t n)
{
    const ra_tensor *x = job->x, *out = job->out;
    const int64_t heads = x->shape[2], d = x->shape[3], half = job->rope->n_pairs;
    const int interleaved = job->rope->config.layout == RA_LAYOUT_INTERLEAVED;
    const size_t esize = dt == RA_F32 ? 4 : 2;
    const size_t x_head = (size_t)x->stride[2] * esize, y_head = (size_t)out->stride[2] * esize;
    const int64_t offset = interleaved ? 2 * first : first;
    const char *xh = rope_element(x, b, s, 0, offset, esize);
    char *yh = rope_element(out, b, s, 0, offset, esize);
    /* the row, rearranged; aligned, as the runs read it in aligned vectors */
    float cx[2 * ROPE_CHUNK + RA_W] __attribute__((aligned(64)));
    float sx[2 * ROPE_CHUNK + RA_W] __attribute__((aligned(64)));
    if (interleaved) {
        /* turned by the pairs before the first run's aligned vectors */
        const int one_run = 2 * n == d && x->stride[2] == d && out->stride[2] == d;
        const int64_t runs = one_run ? 1 : heads, pairs = one_run ? heads * n : n;
        const int64_t rot = rope_peel(yh, dt) % n, r0 = (n - rot) % n;
        if (dt == RA_BF16) rope_wrap(cx, sx, c, sn, job->sign, n, rot);
        else rope_expand(cx, sx, c, sn, job->sign, n, rot);
        for (int64_t h = 0; h < runs; h++, xh += x_head, yh += y_head)
            rope_run(yh, xh, dt, cx, sx, n, r0, pairs);
    } else if (dt == RA_BF16) {
        rope_split(cx, sx, c, sn, job->sign, n);
        for (int64_t h = 0; h < heads; h++, xh += x_head, yh += y_head)
            rope_head_half_bf16((uint16_t *)yh, (const uint16_t *)xh, cx, sx, c, sn, job->sign, n,
                                half);
    } else {
        const float *ss = rope_signed(sx, sn, job->sign, n);
        for (int64_t h = 0; h < heads; h++, xh += x_head, yh += y_head)
            rope_head_half(yh, xh, dt, c, ss, n, half);
    }
}

/* Copies the features that do not rotate, [rotary_dim, D), when out != x. */
ROPE_INLINE void rope_copy_tail(const ra_rope_job *job, ra_dtype dt, int64_t b, int64_t s)
{
    const ra_tensor *x = job->x, *out = job->out;
    const int64_t rot = job->rope->config.rotary_dim, d = x->shape[3];
    const size_t esize = dt == RA_F32 ? 4 : 2;
    if (rot == d || out->data == x->data) return;
    for (int64_t h = 0; h < x->shape[2]; h++)
        memcpy(rope_element(out, b, s, h, rot, esize), rope_element(x, b, s, h, rot, esize),
               (size_t)(d - rot) * esize);
}

/* Tokens [task * tokens_per_task, ...) of the B * S, in storage type dt. */
ROPE_INLINE void rope_tokens(const ra_rope_job *job, int64_t task, ra_dtype dt)
{
    const ra_rope *rope = job->rope;
    const int64_t seq = job->x->shape[1], n_tokens = job->x->shape[0] * seq;
    const int64_t n_pairs = rope->n_pairs;
    int64_t t0 = task * job->tokens_per_task, t1 = t0 + job->tokens_per_task;
    if (t1 > n_tokens) t1 = n_tokens;
    float c[ROPE_CHUNK], sn[ROPE_CHUNK]; /* angles formed on the fly, beyond the table */
    int64_t seq_hint = ra_position_sequence(job->positions, t0);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t b = t / seq, s = t % seq;
        const int64_t pos = ra_position(job->positions, t, seq, &seq_hint);
        for (int64_t first = 0; first < n_pairs; first += ROPE_CHUNK) {
            const int64_t n = n_pairs - first < ROPE_CHUNK ? n_pairs - first : ROPE_CHUNK;
            if (pos < rope->config.table_size) {
                const int64_t row = pos * n_pairs + first;
                rope_token(job, dt, b, s, rope->cos + row, rope->sin + row, first, n);
            } else {
                ra_rope_angles(rope, pos, first, n, c, sn);
                rope_token(job, dt, b, s, c, sn, first, n);
            }
        }
        rope_copy_tail(job, dt, b, s);
    }
}

/* One task of an ra_rope_job: arg is the job. */
static void rope_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const ra_rope_job *job = arg;
    switch (job->x->dtype) {
    case RA_F16: rope_tokens(job, task, RA_F16); break;
    case RA_BF16: rope_tokens(job, task, RA_BF16); break;
    default: rope_tokens(job, task, RA_F32); break;
    }
}

#undef ROPE_INLINE
#undef ROPE_LANES
#undef ROPE_PAIR_SWAP
#undef ROPE_DUP_LOW
#undef ROPE_DUP_HIGH
#undef ROPE_EVEN
#undef ROPE_ODD

#pragma GCC pop_options
