/*
 * rope_impl.h — the RoPE task, written once against simd.h and compiled per
 * ISA (kernels_*.c).  A task rotates a range of tokens of x into out; each
 * token's cos/sin row (from the table, or formed on the fly beyond it) is
 * read once, rearranged once, and serves every head of the token (M-RoPE:
 * a token whose three position components differ gets its row put together
 * from theirs, ra_rope_mrope_row, the same numbers the reference forms).
 *
 *   x, out: [B, S, heads, D] strided views, f32, f16 or bf16; pairs
 *   [0, rotary_dim/2) rotate, features [rotary_dim, D) pass through.
 *   c, s: the row's cos and sign * sin (+1 forward, -1 inverse), per pair.
 *
 *   interleaved, f32/f16: v = x[2i, 2i + W) = [a0 b0 a1 b1 ...], v' = v with
 *                each pair swapped (one in-lane shuffle),
 *                y = v [c0 c0 c1 c1 ...] + v' [-s0 s0 -s1 s1 ...]
 *   interleaved, bf16: 2W values load as W 32-bit lanes, lane i = pair i,
 *                which widen to a and b and round back with lane arithmetic
 *                alone (simd_half.h), y_a = a c - b s, y_b = a s + b c
 *   half:        a = x[i, i + W), b = x[h + i, h + i + W)   (h = rotary_dim/2),
 *                y_a = a c - b s, y_b = a s + b c; bf16 as lanes of (even,
 *                odd) values, with c and s split into even and odd
 *
 * Interleaved, a token whose heads are contiguous and rotate whole is one
 * run of heads * D/2 pairs (else each head is one), stored in vectors
 * aligned to memory with the row turned to match, and one overlapping
 * unaligned vector at each end (rope_run); half-split goes a head at a
 * time.  A task's tokens go two at a time, the k-th of its first half with
 * the k-th of its second, a vector of each in turn (rope_tokens): two
 * streams of memory a thread, as the read-modify-write limit walks them.
 *
 * These are the reference's float32 products and sums (a c + b (-s) is
 * a c - b s exactly, and a sum does not depend on the order of its two
 * terms), each rounded on its own, so the result equals rope_ref.c's bit
 * for bit on every ISA.  For that, this file's functions are compiled with
 * contraction to FMA off, whatever the including file's flags (clang: the
 * C pragma, which the Makefile's -ffp-contract=on for clang honours), and
 * with GCC, without its auto-vectorizer, which forms FMADDSUB from the
 * scalar tails' a c - b s, a s + b c even with contraction off (GCC 12); the
 * vector code is written out.  16-bit storage is widened and rounded once.
 */
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/simd_half.h"
#include "cpu/rope_job.h"

#if defined(__clang__) /* back to the command line's setting at the end */
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off", "no-tree-vectorize")
#endif

/* Pairs of a token's cos/sin row handled at once: rows of up to ROPE_CHUNK
 * pairs (head_dim up to 512) serve every head in one pass over the token. */
enum { ROPE_CHUNK = 256 };

/* Lane permutations (simd.h's RA_SHUFFLE): */
#define ROPE_DUP(i, first) ((first) + (i) / 2) /* first first first+1 first+1 ... */
#define ROPE_PICK(i, odd) (2 * (i) + (odd))    /* 0 2 4 ... (odd 1: 1 3 5 ...) of two vectors */

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
    const vi even = (ra_lanes & 1) == 0;
    const vf vsign = vsplat(sign);
    int64_t i = 0;
    for (; i + RA_W <= n; i += RA_W) {
        vf cv = vload(c + i), sv = vload(s + i) * vsign;
        vf slo = RA_SHUFFLE(sv, sv, ROPE_DUP, 0), shi = RA_SHUFFLE(sv, sv, ROPE_DUP, RA_W / 2);
        vstore(ce + 2 * i, RA_SHUFFLE(cv, cv, ROPE_DUP, 0));
        vstore(ce + 2 * i + RA_W, RA_SHUFFLE(cv, cv, ROPE_DUP, RA_W / 2));
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

/* t[len, len + RA_W) = t[0, RA_W) (repeating when len < RA_W): room for a
 * vector that reads past the last entry into the start again. */
static void rope_pad(float *t, int64_t len)
{
    if (len >= RA_W) {
        vstore(t + len, vload(t));
        return;
    }
    for (int64_t k = len; k < len + RA_W; k++) t[k] = t[k - len];
}

/* c2 = [c c], s2 = [s s]: the row twice, so that the row turned by any rot
 * (entry k = entry (k + rot) mod n) is the span from rot on. */
static void rope_twice(float *c2, float *s2, const float *c, const float *s, int64_t n)
{
    int64_t i = 0;
    for (; i + RA_W <= n; i += RA_W) {
        vf cv = vload(c + i), sv = vload(s + i);
        vstore(c2 + i, cv);
        vstore(c2 + n + i, cv);
        vstore(s2 + i, sv);
        vstore(s2 + n + i, sv);
    }
    for (; i < n; i++) {
        c2[i] = c2[n + i] = c[i];
        s2[i] = s2[n + i] = s[i];
    }
}

/* What the interleaved run multiplies by, t0 and t1: the row turned by rot
 * (so that the run's aligned vectors read aligned entries), expanded for
 * f32 and f16 (rope_expand_span) or as cos and sign * sin for bf16, padded
 * with rope_pad.  c2, s2: room for rope_twice. */
static void rope_turn(float *t0, float *t1, float *c2, float *s2, const float *c, const float *s,
                      float sign, int64_t n, int64_t rot, ra_dtype dt)
{
    if (rot) {
        rope_twice(c2, s2, c, s, n);
        c = c2 + rot;
        s = s2 + rot;
    }
    const int64_t len = dt == RA_BF16 ? n : 2 * n;
    if (dt == RA_BF16) rope_copy_span(t0, t1, c, s, sign, n);
    else rope_expand_span(t0, t1, c, s, sign, n);
    rope_pad(t0, len);
    rope_pad(t1, len);
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
        vstore(cd + i, RA_SHUFFLE(c0, c1, ROPE_PICK, 0));
        vstore(cd + i + RA_W, RA_SHUFFLE(c0, c1, ROPE_PICK, 1));
        vstore(sd + i, RA_SHUFFLE(s0, s1, ROPE_PICK, 0));
        vstore(sd + i + RA_W, RA_SHUFFLE(s0, s1, ROPE_PICK, 1));
    }
}

/* simd_half.h's vbf16_pack (nearest, ties to even, lane arithmetic), with
 * fewer operations on AVX-512, where the bf16 loops are bound by the
 * vector ports (every 512-bit operation takes port 0 or 5): the 16-bit
 * halves of the results are put side by side first, hi the truncated
 * bf16 values in their places and lo the bits below them, and each 16-bit
 * lane of hi goes up by one where lo | (hi & 1) > 0x8000, which is where
 * lo + 0x7fff + (hi & 1) carries into hi (an odd lo gains nothing from the
 * 1; an even one gains it as the sum would): 7 operations for the pair of
 * vectors against 10, the same bits for every input, NaNs included
 * (checked over every 32-bit value in either lane against vbf16_pack).
 * Elsewhere vbf16_pack itself. */
ROPE_INLINE vu rope_bf16_pack(vf even, vf odd)
{
#if defined(RA_SIMD_AVX512)
    const __m512i e = (__m512i)even, o = (__m512i)odd;
    enum { A_OR_B_AND_C = 0xf8 }; /* vpternlog's table for a | (b & c) */
    __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi32(e, 16), o,
                                           _mm512_set1_epi32((int)0xffff0000u), A_OR_B_AND_C);
    __m512i lo = _mm512_ternarylogic_epi32(_mm512_slli_epi32(o, 16), e,
                                           _mm512_set1_epi32(0xffff), A_OR_B_AND_C);
    __m512i key = _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi32(0x00010001),
                                            A_OR_B_AND_C);
    __mmask32 up = _mm512_cmpgt_epu16_mask(key, _mm512_set1_epi16((short)0x8000));
    return (vu)_mm512_mask_sub_epi16(hi, up, hi, _mm512_set1_epi16(-1));
#else
    return vbf16_pack(even, odd);
#endif
}

/* Each vector loaded asks for the line ROPE_AHEAD bytes further on,
 * writable (in place it is written next): the hardware prefetcher alone
 * kept too few lines in flight.  Against a read-modify-write loop over the
 * same bytes, in place, interleaved bf16 went from 0.83-0.89 to 0.96-1.1
 * of its rate on one thread and from 0.81-0.95 to 0.93-1.1 on two, f32 on
 * two from 0.92-1.0 to 1.0-1.09; half-split f32 on two took 0.88 of the
 * time (2 KiB and 8 KiB ahead measured no better).  Interleaved asks 3 KiB
 * ahead: f32 on one thread read 0.90-0.91 of the limit's rate with 3 KiB
 * against 0.85-0.86 with 4 KiB (1.5, 2, 2.5, 3.5 and 5 KiB: 0.85-0.89),
 * where half-split read 0.92-0.93 with 3 KiB against 0.94-0.96 with 4 KiB
 * (docs/perf/2026-12-07-rope-columns.md). */
enum { ROPE_AHEAD = 3072, ROPE_AHEAD_HALF = 4096 };

ROPE_INLINE void rope_prefetch(const void *x, int64_t byte, int64_t ahead)
{
    __builtin_prefetch((const char *)x + byte + ahead, 1, 3);
}

/* Interleaved pairs a vector holds (f32, f16: RA_W / 2; bf16: RA_W, a pair a
 * lane), and bytes a pair takes. */
ROPE_INLINE int64_t rope_step(ra_dtype dt) { return dt == RA_BF16 ? RA_W : RA_W / 2; }
ROPE_INLINE uintptr_t rope_pair_bytes(ra_dtype dt) { return dt == RA_F32 ? 8 : 4; }

/* Interleaved pairs before the first one where y is aligned to a whole
 * vector (fewer than rope_step); none when y is not aligned to a pair. */
ROPE_INLINE int64_t rope_peel(const void *y, ra_dtype dt)
{
    const uintptr_t a = (uintptr_t)y, pair = rope_pair_bytes(dt), vector = pair * rope_step(dt);
    return a % pair ? 0 : (int64_t)((vector - a % vector) % vector / pair);
}

/* Table entry r moved on by k pairs, modulo n (a loop rather than a select:
 * the branch is predicted, where a select would delay the next loads). */
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
        return (vf)rope_bf16_pack(a * c - b * s, a * s + b * c);
    }
    vf v = rope_load(x, 2 * p, dt);
    return v * vload(t0 + 2 * r) + RA_SHUFFLE(v, v, RA_LANE_SWAP, 1) * vload(t1 + 2 * r);
}

ROPE_INLINE void rope_run_put(void *y, ra_dtype dt, int64_t p, vf v)
{
    if (dt == RA_BF16) memcpy((uint16_t *)y + 2 * p, &v, sizeof v);
    else rope_store(y, 2 * p, dt, v);
}

/* Runs of interleaved pairs (2p, 2p + 1), p in [0, pairs), of `count`
 * tokens (1 or 2, a constant where this is inlined) in step: a vector of
 * each loaded, then both stored (a store to one token before the other's
 * load would stall it: the two are often a multiple of 4 KiB apart), with
 * the same entries of each token's t0, t1, from r0 on.  Vectors start at
 * y[k] itself, aligned or not (rope_run peels unaligned runs instead); the
 * pairs past the last whole vector go one at a time. */
ROPE_INLINE void rope_runs_in_step(void *const *y, const void *const *x, ra_dtype dt,
                                   const float *const *t0, const float *const *t1, int count,
                                   int64_t n, int64_t r0, int64_t pairs)
{
    const int64_t step = rope_step(dt);
    int64_t p = 0, r = r0;
    for (; p + step <= pairs; p += step, r = rope_next(r, step, n)) {
        vf v[2];
        for (int k = 0; k < count; k++) {
            rope_prefetch(x[k], p * (int64_t)rope_pair_bytes(dt), ROPE_AHEAD);
            v[k] = rope_run_vector(x[k], dt, t0[k], t1[k], p, r);
        }
        for (int k = 0; k < count; k++) rope_run_put(y[k], dt, p, v[k]);
    }
    for (; p < pairs; p++, r = rope_next(r, 1, n))
        for (int k = 0; k < count; k++) rope_run_pair(y[k], x[k], dt, t0[k], t1[k], p, r);
}

/* A run of interleaved pairs (2p, 2p + 1), p in [0, pairs): one head, or
 * every head of a token whose heads are contiguous and rotate whole.  Pair p
 * takes entry (r0 + p) mod n of rope_turn's t0, t1.  Vectors are stored
 * where y is aligned to a whole vector (one that straddles two cache lines
 * costs about twice as much).  When y is not aligned at the start, one
 * unaligned vector at each end overlaps its neighbour (and nothing else, the
 * run being at least two vectors long): each vector is loaded before the
 * one it overlaps is stored, so in place both write the same values.
 * Otherwise (rope_runs_in_step) the pairs past the last whole vector go one
 * at a time. */
ROPE_INLINE void rope_run(void *y, const void *x, ra_dtype dt, const float *t0, const float *t1,
                          int64_t n, int64_t r0, int64_t pairs)
{
    const int64_t step = rope_step(dt);
    int64_t p = rope_peel(y, dt);
    if (p == 0 || pairs < 2 * step) { /* aligned already, or too short for
                                         the two ends to miss each other */
        rope_runs_in_step(&y, &x, dt, &t0, &t1, 1, n, r0, pairs);
        return;
    }
    int64_t r = (r0 + p) % n, held_at = 0; /* where the vector held back goes */
    vf held = rope_run_vector(x, dt, t0, t1, 0, r0);
    for (; p + step <= pairs; p += step, r = rope_next(r, step, n)) {
        rope_prefetch(x, p * (int64_t)rope_pair_bytes(dt), ROPE_AHEAD);
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
    const int64_t esize = dt == RA_F32 ? 4 : 2;
    for (; i + RA_W <= n; i += RA_W) {
        rope_prefetch(x, i * esize, ROPE_AHEAD_HALF);
        rope_prefetch(x, (half + i) * esize, ROPE_AHEAD_HALF);
        vf a = rope_load(x, i, dt), b = rope_load(x, half + i, dt);
        vf cv = vload(c + i), sv = vload(s + i);
        rope_store(y, i, dt, a * cv - b * sv);
        rope_store(y, half + i, dt, a * sv + b * cv);
    }
    for (; i < n; i++) rope_pair(y, x, dt, i, half + i, c[i], s[i]);
}

/* One head, half-split, bf16: 2 RA_W pairs a step, the even-indexed and the
 * odd-indexed ones apart, with rope_split's cd, sd; s is sign * sin. */
ROPE_INLINE void rope_head_half_bf16(uint16_t *y, const uint16_t *x, const float *cd,
                                     const float *sd, const float *c, const float *s, int64_t n,
                                     int64_t half)
{
    int64_t i = 0;
    for (; i + 2 * RA_W <= n; i += 2 * RA_W) {
        vf a0, a1, b0, b1;
        vf c0 = vload(cd + i), c1 = vload(cd + i + RA_W);
        vf s0 = vload(sd + i), s1 = vload(sd + i + RA_W);
        rope_prefetch(x, i * 2, ROPE_AHEAD_HALF);
        rope_prefetch(x, (half + i) * 2, ROPE_AHEAD_HALF);
        vload_bf16_pairs(x + i, &a0, &a1);
        vload_bf16_pairs(x + half + i, &b0, &b1);
        vu ya = rope_bf16_pack(a0 * c0 - b0 * s0, a1 * c1 - b1 * s1);
        vu yb = rope_bf16_pack(a0 * s0 + b0 * c0, a1 * s1 + b1 * c1);
        memcpy(y + i, &ya, sizeof ya);
        memcpy(y + half + i, &yb, sizeof yb);
    }
    for (; i < n; i++) rope_pair(y, x, RA_BF16, i, half + i, c[i], s[i]);
}

/* Element (b, s, h, i) of a view, as a byte address. */
ROPE_INLINE char *rope_element(const ra_tensor *t, int64_t b, int64_t s, int64_t h, int64_t i,
                               size_t esize)
{
    int64_t offset = b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + i;
    return (char *)t->data + (size_t)offset * esize;
}

/* A token of a task, and its cos and sin for the pairs at hand. */
typedef struct rope_token {
    int64_t b, s;           /* its batch and sequence index */
    const float *c, *sn;    /* cos and sin of pairs [first, first + n) */
} rope_token;

/* Rotates pairs [first, first + n) (n <= ROPE_CHUNK) of every head of
 * tok[0, count) (count 1 or 2), interleaved.  A token's heads are one run
 * when they are contiguous and rotate whole.  Two tokens go in step
 * (rope_runs_in_step) wherever neither run needs the row turned or the
 * first vector peeled (their vectors start where y does: always when y is
 * aligned), else one after the other. */
ROPE_INLINE void rope_token_interleaved(const ra_rope_job *job, ra_dtype dt,
                                        const rope_token *tok, int count, int64_t first,
                                        int64_t n)
{
    const ra_tensor *x = job->x, *out = job->out;
    const int64_t heads = x->shape[2], d = x->shape[3];
    const size_t esize = dt == RA_F32 ? 4 : 2;
    const size_t x_head = (size_t)x->stride[2] * esize, y_head = (size_t)out->stride[2] * esize;
    const int one_run = 2 * n == d && x->stride[2] == d && out->stride[2] == d;
    const int64_t runs = one_run ? 1 : heads, pairs = one_run ? heads * n : n;
    float cx[2][2 * ROPE_CHUNK + RA_W] __attribute__((aligned(64)));
    float sx[2][2 * ROPE_CHUNK + RA_W] __attribute__((aligned(64)));
    float c2[2 * ROPE_CHUNK], s2[2 * ROPE_CHUNK];
    const char *xh[2];
    char *yh[2];
    int64_t r0[2];
    for (int k = 0; k < count; k++) {
        xh[k] = rope_element(x, tok[k].b, tok[k].s, 0, 2 * first, esize);
        yh[k] = rope_element(out, tok[k].b, tok[k].s, 0, 2 * first, esize);
        /* the row turned by the pairs before the first run's aligned
         * vectors, aligned itself, as the runs read it in aligned vectors */
        const int64_t rot = rope_peel(yh[k], dt) % n;
        r0[k] = (n - rot) % n;
        rope_turn(cx[k], sx[k], c2, s2, tok[k].c, tok[k].sn, job->sign, n, rot, dt);
    }
    const float *t0[2] = {cx[0], cx[1]}, *t1[2] = {sx[0], sx[1]};
    for (int64_t h = 0; h < runs; h++) {
        void *y[2];
        const void *xr[2];
        for (int k = 0; k < count; k++) {
            y[k] = yh[k] + h * y_head;
            xr[k] = xh[k] + h * x_head;
        }
        if (count == 2 && r0[0] == 0 && r0[1] == 0 && rope_peel(y[0], dt) == 0 &&
            rope_peel(y[1], dt) == 0)
            rope_runs_in_step(y, xr, dt, t0, t1, 2, n, 0, pairs);
        else
            for (int k = 0; k < count; k++)
                rope_run(y[k], xr[k], dt, t0[k], t1[k], n, r0[k], pairs);
    }
}

/* The same, half-split (pairs (i, half + i)), one token (already two
 * streams: the head's halves), a head at a time. */
ROPE_INLINE void rope_token_half(const ra_rope_job *job, ra_dtype dt, const rope_token *tok,
                                 int64_t first, int64_t n)
{
    const ra_tensor *x = job->x, *out = job->out;
    const int64_t heads = x->shape[2], half = job->rope->n_pairs;
    const size_t esize = dt == RA_F32 ? 4 : 2;
    const size_t x_head = (size_t)x->stride[2] * esize, y_head = (size_t)out->stride[2] * esize;
    const char *xh = rope_element(x, tok->b, tok->s, 0, first, esize);
    char *yh = rope_element(out, tok->b, tok->s, 0, first, esize);
    float signed_s[ROPE_CHUNK], cd[ROPE_CHUNK], sd[ROPE_CHUNK];
    const float *ss = rope_signed(signed_s, tok->sn, job->sign, n);
    if (dt == RA_BF16) rope_split(cd, sd, tok->c, tok->sn, job->sign, n);
    for (int64_t h = 0; h < heads; h++, xh += x_head, yh += y_head) {
        if (dt == RA_BF16)
            rope_head_half_bf16((uint16_t *)yh, (const uint16_t *)xh, cd, sd, tok->c, ss, n, half);
        else
            rope_head_half(yh, xh, dt, tok->c, ss, n, half);
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

/* The cos and sin of pairs [first, first + n) of a token at the three
 * positions pos3: its table row, or formed into angle_c, angle_s (beyond
 * the table, or an M-RoPE token whose components differ: ra_rope_mrope_row
 * puts its row together from each pair's component's row). */
ROPE_INLINE void rope_row(const ra_rope *rope, const int64_t pos3[3], int64_t first, int64_t n,
                          float *angle_c, float *angle_s, rope_token *tok)
{
    const int64_t pos = pos3[0];
    if (pos3[1] != pos || pos3[2] != pos) {
        ra_rope_mrope_row(rope, pos3, first, n, angle_c, angle_s);
    } else if (pos < rope->config.table_size) {
        tok->c = rope->cos + ra_rope_table_row(rope, pos) + first;
        tok->sn = rope->sin + ra_rope_table_row(rope, pos) + first;
        return;
    } else {
        ra_rope_angles(rope, pos, first, n, angle_c, angle_s);
    }
    tok->c = angle_c;
    tok->sn = angle_s;
}

/* Asks for token t's cos and sin rows from the table (one run of memory),
 * where rope_row will read them, a token ahead: read at a token's start,
 * before its first vector, the rows come from beyond L2 (the streams of x
 * push the table out) (docs/perf/2026-12-07-rope-columns.md).  Nothing for
 * a token whose row is put together or formed on the fly (rope_row). */
ROPE_INLINE void rope_prefetch_row(const ra_rope_job *job, int64_t t, int64_t seq,
                                   int64_t *seq_hint)
{
    const ra_rope *rope = job->rope;
    int64_t pos3[3];
    ra_position3(job->positions, t, seq, seq_hint, pos3);
    const int64_t pos = pos3[0];
    if (pos3[1] != pos || pos3[2] != pos || pos >= rope->config.table_size) return;
    const char *row = (const char *)(rope->cos + ra_rope_table_row(rope, pos));
    const int64_t bytes = 2 * rope->n_pairs * (int64_t)sizeof(float);
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 3);
    __builtin_prefetch(row + bytes - 1, 0, 3); /* the last line, where the row
                                                  starts inside a line */
}

/* The tokens [t0, t1) of a task, interleaved: the first half and the
 * second half of the range in step, the k-th token of each together (an
 * odd one out last, on its own), so that a thread reads and writes two
 * streams of memory at a time, as the read-modify-write limit does
 * (bench_limits.c). */
ROPE_INLINE void rope_tokens_interleaved(const ra_rope_job *job, ra_dtype dt, int64_t t0,
                                         int64_t t1)
{
    const ra_rope *rope = job->rope;
    const int64_t seq = job->x->shape[1], n_pairs = rope->n_pairs;
    const int64_t mid = t0 + (t1 - t0 + 1) / 2; /* the second stream's start */
    float angle_c[2][ROPE_CHUNK] __attribute__((aligned(64)));
    float angle_s[2][ROPE_CHUNK] __attribute__((aligned(64)));
    int64_t seq_hint[2] = {ra_position_sequence(job->positions, t0),
                           ra_position_sequence(job->positions, mid)};
    for (int64_t i = 0; t0 + i < mid; i++) {
        const int count = mid + i < t1 ? 2 : 1;
        rope_token tok[2];
        int64_t pos3[2][3];
        for (int k = 0; k < count; k++) {
            const int64_t t = (k ? mid : t0) + i;
            tok[k].b = t / seq;
            tok[k].s = t % seq;
            ra_position3(job->positions, t, seq, &seq_hint[k], pos3[k]);
            if (t + 1 < (k ? t1 : mid)) rope_prefetch_row(job, t + 1, seq, &seq_hint[k]);
        }
        for (int64_t first = 0; first < n_pairs; first += ROPE_CHUNK) {
            const int64_t n = n_pairs - first < ROPE_CHUNK ? n_pairs - first : ROPE_CHUNK;
            for (int k = 0; k < count; k++)
                rope_row(rope, pos3[k], first, n, angle_c[k], angle_s[k], &tok[k]);
            rope_token_interleaved(job, dt, tok, count, first, n);
        }
        for (int k = 0; k < count; k++) rope_copy_tail(job, dt, tok[k].b, tok[k].s);
    }
}

/* The same, half-split: one token at a time (its heads' halves are two
 * streams already; two tokens in step measured slower here:
 * docs/perf/2026-12-03-rope-speed.md). */
ROPE_INLINE void rope_tokens_half(const ra_rope_job *job, ra_dtype dt, int64_t t0, int64_t t1)
{
    const ra_rope *rope = job->rope;
    const int64_t seq = job->x->shape[1], n_pairs = rope->n_pairs;
    float angle_c[ROPE_CHUNK] __attribute__((aligned(64)));
    float angle_s[ROPE_CHUNK] __attribute__((aligned(64)));
    int64_t seq_hint = ra_position_sequence(job->positions, t0);
    for (int64_t t = t0; t < t1; t++) {
        rope_token tok = {t / seq, t % seq, NULL, NULL};
        int64_t pos3[3];
        ra_position3(job->positions, t, seq, &seq_hint, pos3);
        for (int64_t first = 0; first < n_pairs; first += ROPE_CHUNK) {
            const int64_t n = n_pairs - first < ROPE_CHUNK ? n_pairs - first : ROPE_CHUNK;
            rope_row(rope, pos3, first, n, angle_c, angle_s, &tok);
            rope_token_half(job, dt, &tok, first, n);
        }
        rope_copy_tail(job, dt, tok.b, tok.s);
    }
}

/* Tokens [task * tokens_per_task, ...) of the B * S, in storage type dt and
 * the layout `interleaved` says. */
ROPE_INLINE void rope_tokens(const ra_rope_job *job, int64_t task, ra_dtype dt, int interleaved)
{
    const int64_t n_tokens = job->x->shape[0] * job->x->shape[1];
    const int64_t t0 = task * job->tokens_per_task;
    const int64_t t1 = t0 + job->tokens_per_task < n_tokens ? t0 + job->tokens_per_task : n_tokens;
    if (interleaved) rope_tokens_interleaved(job, dt, t0, t1);
    else rope_tokens_half(job, dt, t0, t1);
}

/* One function per storage type and layout, each with its loops alone (one
 * function holding them all runs short of registers). */
#define ROPE_TOKENS(name, dt, interleaved)                                         \
    static __attribute__((noinline)) void name(const ra_rope_job *job, int64_t task) \
    {                                                                               \
        rope_tokens(job, task, dt, interleaved);                                    \
    }
ROPE_TOKENS(rope_tokens_f32_interleaved, RA_F32, 1)
ROPE_TOKENS(rope_tokens_f32_half, RA_F32, 0)
ROPE_TOKENS(rope_tokens_f16_interleaved, RA_F16, 1)
ROPE_TOKENS(rope_tokens_f16_half, RA_F16, 0)
ROPE_TOKENS(rope_tokens_bf16_interleaved, RA_BF16, 1)
ROPE_TOKENS(rope_tokens_bf16_half, RA_BF16, 0)
#undef ROPE_TOKENS

/* One task of an ra_rope_job: arg is the job. */
static void rope_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const ra_rope_job *job = arg;
    const int interleaved = job->rope->config.layout == RA_LAYOUT_INTERLEAVED;
    switch (job->x->dtype) {
    case RA_F16:
        (interleaved ? rope_tokens_f16_interleaved : rope_tokens_f16_half)(job, task);
        break;
    case RA_BF16:
        (interleaved ? rope_tokens_bf16_interleaved : rope_tokens_bf16_half)(job, task);
        break;
    default:
        (interleaved ? rope_tokens_f32_interleaved : rope_tokens_f32_half)(job, task);
        break;
    }
}

#undef ROPE_INLINE
#undef ROPE_DUP
#undef ROPE_PICK

#if defined(__clang__)
#pragma STDC FP_CONTRACT DEFAULT
#else
#pragma GCC pop_options
#endif
