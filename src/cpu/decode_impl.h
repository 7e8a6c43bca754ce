/*
 * decode_impl.h — flash-decoding over a KV cache, written once against
 * simd.h and compiled per ISA (kernels_*.c).
 *
 * A task is (b, chunk of RA_DECODE_CHUNK cache slots, a run of kv heads): for
 * each of its kv heads it reads the chunk front to back (one sequential run
 * of K rows and one of V rows: the cache is head-major), a block of
 * decode_block_keys slots at a time, each K and V row once for the whole group of
 * query rows (rep heads x T new tokens) of its kv head, and keeps, per row,
 * an online softmax:
 *   s_j = c tanh(q . k_j scale / c)   (key j visible to the row, else skipped;
 *                                      the soft-cap c only when asked)
 *   m' = max(m, max s);  l = l e^(m - m') + sum e^(s - m');
 *   o = o e^(m - m') + sum e^(s_j - m') v_j
 * A row sees the keys first .. last of its position (causal, window,
 * chunk: ra_decode_first_key), so a chunk no row sees is not read.  The
 * partials (o, m, l) are merged across chunks, with the sink, by
 * decode_merge_task, in chunk order.  Which thread runs a task, and how the
 * kv heads are split into tasks, change no bits.
 *
 * A bf16 cache's rows are widened in pairs of vectors (simd_half.h's vload_bf16_pairs:
 * the even elements of 2 RA_W, then the odd ones), two operations per 2
 * RA_W values where one vector at a time takes four; so the task keeps its
 * scaled q and its partial o in that order over D's first bf16_paired
 * elements, and the merge puts o back in D's order.  Each element of o
 * sums its keys in the same order as unpaired; a score sums q's products
 * in another order (lane l gets elements 2l and 2l + 1 of each 2 RA_W),
 * within the same bound.
 */
#include <math.h>
#include <string.h>

#include "cpu/attention_job.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/simd_half.h"
#include "cpu/decode_job.h"

/* The kernels' pseudo-dtype of an fp8 cache that never stored a NaN code
 * (ra_kv_cache.nan_codes 0): its codes are widened without the NaN check.
 * RA_F8E4M3 itself is a cache that may hold NaN codes. */
#define DECODE_E4M3_FINITE ((ra_dtype)(RA_F8E4M3 + 64))

/* The kernels' pseudo-dtype of an int8 cache read with quantized queries
 * (ra_attention_options' quantize_q): each row of q (times the logit
 * scale) x comes as int8 codes c_q = round(x / s_q) of scale s_q = max|x| /
 * 127 (ra_decode_job's q_codes, q_scale), and a score is ((c_q . c) s_q)
 * s_k, the integer c_q . c summed exactly (RA_DECODE_Q8_MAX_DIM).  The
 * float kernels sum it from qs holding the codes' values; the VNNI build
 * (RA_DECODE_VNNI) on vpdpbusd: the same integer, so the same bits. */
#define DECODE_I8_Q8 ((ra_dtype)(RA_I8 + 64))

/* Whether dtype (a constant where inlined) is an int8 kernel's. */
static inline __attribute__((always_inline)) int is_i8(const ra_dtype dtype)
{
    return dtype == RA_I8 || dtype == DECODE_I8_Q8;
}

/* Whether dtype (a constant where inlined) is an fp8 kernel's. */
static inline __attribute__((always_inline)) int is_e4m3(const ra_dtype dtype)
{
    return dtype == RA_F8E4M3 || dtype == DECODE_E4M3_FINITE;
}

/* The kernel dtype that reads cache c: its dtype, DECODE_E4M3_FINITE or
 * (quantize_q) DECODE_I8_Q8. */
static inline ra_dtype decode_dtype(const ra_kv_cache *c, int quantize_q)
{
    if (quantize_q) return DECODE_I8_Q8;
    return c->dtype == RA_F8E4M3 && !c->nan_codes ? DECODE_E4M3_FINITE : c->dtype;
}

/* The scale the kernels apply to an fp8 cache's codes for the cache's
 * scale s: the codes are widened as their values times 2^-8
 * (vload_e4m3_low), so s 2^8 (a float: s <= FLT_MAX / 448).  Exact: a
 * power of two, so the scores and the weighted sums are the bits of the
 * unscaled codes' times s, unless a product falls below FLT_MIN. */
static inline float e4m3_scale(float s)
{
    return s * 0x1p8f;
}

/* Bytes per element of a cache of this dtype (a constant where inlined). */
static inline __attribute__((always_inline)) int64_t elem_bytes(const ra_dtype dtype)
{
    return dtype == RA_F32 ? 4 : is_i8(dtype) || is_e4m3(dtype) ? 1 : 2;
}

/* RA_W widened values of a K or V row from element d on (dtype a constant
 * where this is inlined); an 8-bit row's codes, before their scale (fp8's
 * times 2^-8: e4m3_scale). */
static inline __attribute__((always_inline)) vf load_any(const void *row, ra_dtype dtype,
                                                          int64_t d)
{
    if (dtype == RA_F32) return vload((const float *)row + d);
    if (dtype == RA_BF16) return vload_bf16((const uint16_t *)row + d);
    if (is_i8(dtype)) return vload_i8((const int8_t *)row + d);
    if (dtype == RA_F8E4M3) return vload_e4m3_low_nan((const uint8_t *)row + d);
    if (dtype == DECODE_E4M3_FINITE) return vload_e4m3_low((const uint8_t *)row + d);
    return vload_f16((const uint16_t *)row + d);
}

/* The first elements of D held in bf16 pairs (decode_impl.h's head): the
 * whole vectors' pairs for a bf16 cache, else none. */
static inline __attribute__((always_inline)) int64_t bf16_paired(const ra_dtype dtype,
                                                                 int64_t head_dim)
{
    return dtype == RA_BF16 ? head_dim - head_dim % (2 * RA_W) : 0;
}

/* Where element e of q or o is kept: in its 2 RA_W's even half (e even) or
 * odd half, below paired; else at e. */
static inline int64_t pair_slot(int64_t e, int64_t paired)
{
    if (e >= paired) return e;
    const int64_t base = e - e % (2 * RA_W), m = e - base;
    return base + (m & 1) * RA_W + m / 2;
}

/* nv vectors of a K or V row from element d on: pair (a constant) asks
 * for them in bf16 pairs (nv even), else load_any's, an fp8 row's two
 * vectors at a time where nv is even (vload_e4m3_low2: the same values). */
static inline __attribute__((always_inline)) void load_span(vf *v, const void *row,
                                                            ra_dtype dtype, int64_t d,
                                                            const int nv, const int pair)
{
    const int two = pair || (is_e4m3(dtype) && nv % 2 == 0);
    for (int x = 0; x < nv; x += two ? 2 : 1) {
        const int64_t at = d + x * RA_W;
        if (pair)
            vload_bf16_pairs((const uint16_t *)row + at, &v[x], &v[x + 1]);
        else if (two && dtype == RA_F8E4M3)
            vload_e4m3_low2_nan((const uint8_t *)row + at, &v[x], &v[x + 1]);
        else if (two)
            vload_e4m3_low2((const uint8_t *)row + at, &v[x], &v[x + 1]);
        else
            v[x] = load_any(row, dtype, at);
    }
}

/* Element d of a K or V row as load_any widens it (D's tail). */
static inline __attribute__((always_inline)) float load_one(const void *row, ra_dtype dtype,
                                                            int64_t d)
{
    if (is_e4m3(dtype)) return ra_load(row, RA_F8E4M3, d) * 0x1p-8f;
    return ra_load(row, is_i8(dtype) ? RA_I8 : dtype, d);
}

/* How a block asks for a line (decode_ahead's to_l2 and line_far): into L2
 * only (to_l2), or into every level and then far bytes on into L2 (far_on). */
typedef struct decode_lines {
    int to_l2, far_on;
    int64_t far;
} decode_lines;

/* Asks for the line that holds element d of a row, when element d starts
 * a line: so once per line.  Into every level (prefetcht0), and then for
 * the line ln.far bytes on into L2 (ln.far_on); or with ln.to_l2 only into
 * L2 and out (prefetcht1): the non-temporal hint (prefetchnta) made an f32
 * step over 16384 tokens 2.5 to 3 times slower on an Intel Xeon (Sapphire
 * Rapids class), its lines gone from L1 before the block read them
 * (docs/perf/2026-12-03-decode-prefetch.md); decode_task says where each
 * is used. */
static inline __attribute__((always_inline)) void prefetch_line(const void *row, int64_t d,
                                                                const decode_lines ln,
                                                                const ra_dtype dtype)
{
    const int64_t at = d * elem_bytes(dtype);
    if ((at & 63) != 0) return;
    if (ln.to_l2) {
        __builtin_prefetch((const char *)row + at, 0, 2);
        return;
    }
    __builtin_prefetch((const char *)row + at, 0, 3);
    if (ln.far_on) __builtin_prefetch((const char *)row + at + ln.far, 0, 2);
}

/* Asks, with the hint for the outer caches (the line is not read for a
 * while), for the line far bytes past a row of row_bytes, when that line
 * is the first a row starts in its 4 KiB page: once per 4 KiB, well ahead
 * of the near requests (decode_task says why). */
static inline __attribute__((always_inline)) void prefetch_far(const void *row, int64_t far,
                                                               int64_t row_bytes)
{
    const char *at = (const char *)row + far;
    if ((int64_t)((uintptr_t)at & 4095) < row_bytes) __builtin_prefetch(at, 0, 1);
}

/* Query rows that share each load of K and V, at most. */
#define DECODE_ROWS 4

/* Keys per block of the online softmax: two vectors' worth (AVX-512: 32).
 * Longer blocks spread the block's fixed work (the rescale of o, the
 * softmax's reductions) over more keys: on one core, with the cache in L2,
 * a bf16 step per key took 19.2 ns at one vector's worth, 15.7 at two and
 * 14.3 at four.  But from memory, on two threads, a bf16 step over 16384
 * tokens took a median 1.54 and 1.85 ms at two against 1.58 and 2.35 at
 * four (two sets of ten bench runs alternating the builds): see
 * decode_task on how far ahead a block asks for lines.  AVX2's blocks are
 * four vectors' worth, the same 32 keys: on one core of an AMD EPYC
 * family 25 model 1 (Zen 3), 16-key blocks took 1.05 times as long (f32
 * over 16384 and 32768 tokens, bf16 over 16384) to 1.3 (f32 over 4096)
 * from memory, and 1.07 (bf16) to 1.43 (f32) in L2
 * (docs/perf/2026-12-08-decode-zen3.md). */
#if defined(RA_SIMD_AVX2)
#define DECODE_KEYS (4 * RA_W)
#else
#define DECODE_KEYS (2 * RA_W)
#endif

/* An 8-bit cache's blocks are twice as long where their rows still take
 * at most AHEAD_BLOCK_BYTES (decode_task's requests one phase ahead; at D
 * 128 on AVX-512: 64 keys of 128 bytes): its step is bound by arithmetic,
 * not by memory, and the block's fixed work (the softmax's reductions and
 * exponentials of m, the rescale of o, the wait of P.V for the softmax)
 * is then spread over twice the keys.  On one core of an Intel Xeon
 * (family 6 model 167), 4096 keys in L2, 4 query heads: int8 and fp8
 * 0.92-0.99 of the time with blocks of 32 (median 0.965 of 12 alternating
 * pairs; from memory within the noise: docs/perf/2026-12-07-decode.md,
 * tenth session). */
#define DECODE_KEYS_MAX (4 * RA_W)
enum { AHEAD_BLOCK_BYTES = 8192 };

/* Keys per block of cache c (DECODE_KEYS or DECODE_KEYS_MAX): a paged
 * view's as the contiguous cache's, so the same bits. */
static inline int decode_block_keys(const ra_kv_cache *c)
{
    const int64_t row_bytes = c->head_dim * (int64_t)ra_dtype_size(c->dtype);
    return ra_dtype_is_cache8(c->dtype) && DECODE_KEYS_MAX * row_bytes <= AHEAD_BLOCK_BYTES
               ? DECODE_KEYS_MAX
               : DECODE_KEYS;
}

/* The keys of a block each row sees, [from[r], to[r]) (empty: from = to =
 * 0), and those every row sees, [shared_from, shared_to) (none: 0, 0). */
typedef struct decode_seen {
    int from[DECODE_ROWS], to[DECODE_ROWS];
    int shared_from, shared_to;
} decode_seen;

/* Vectors of D that one values_span takes for a row (a constant where
 * inlined): 4, so 16 accumulators for 4 rows; an 8-bit cache's on AVX2 2.
 * AVX2 has 16 vector registers, and 16 accumulators beside a span's 4
 * widened V vectors and a weight left 4 of them in memory, each loaded,
 * added to and stored again for every key (GCC 12); at 2, 8 accumulators
 * and none in memory.  Each element sums its keys in the same order
 * either way: the same bits (docs/perf/2026-12-08-decode8-zen3.md). */
static inline __attribute__((always_inline)) int values_span_vectors(const ra_dtype dtype)
{
#if defined(RA_SIMD_AVX2)
    if (is_i8(dtype) || is_e4m3(dtype)) return 2;
#else
    (void)dtype;
#endif
    return 4;
}

/* o += p_i v_i for row r's own keys i in [from, to). */
static inline __attribute__((always_inline)) void
values_own(vf *acc, const void *const *vals, const float *p, int from, int to, int64_t d,
           const int nv, const int pair, const ra_dtype dtype)
{
    for (int i = from; i < to; i++) {
        vf v[4];
        load_span(v, vals[i], dtype, d, nv, pair);
        for (int x = 0; x < nv; x++) acc[x] += vsplat(p[i]) * v[x];
    }
}

/* o = o alpha + sum over visible keys of p_i v_i, for elements
 * [d, d + nv RA_W) of rows 0 .. nr of o [rows, stride] (nr, nv, pair: bf16
 * pairs, and dtype constants), asking for the lines of row ahead[i] + skip
 * bytes (ahead NULL: none; ln: prefetch_line's) as it reads
 * v_i, and in the first span for v_i + far bytes once per page
 * (prefetch_far; far 0: none).  Keys seen by every row share
 * their V loads; the rest (several new tokens: the causal edge and the
 * windows' starts) go row by row, so a key a row does not see never
 * touches it.  Each element sums its keys in slot order, whatever the
 * span. */
static inline __attribute__((always_inline)) void
values_span(float *o, int64_t stride, const void *const *vals, const void *const *ahead,
            int64_t skip, const decode_lines ln, int64_t far, int64_t row_bytes,
            float p[][DECODE_KEYS_MAX], const float *alpha, const decode_seen *seen, int64_t d,
            const int nr, const int nv, const int pair, const ra_dtype dtype)
{
    const int shared_from = seen->shared_from, shared_to = seen->shared_to;
    vf acc[DECODE_ROWS][4];
    for (int r = 0; r < nr; r++) {
        for (int x = 0; x < nv; x++)
            acc[r][x] = vload(o + r * stride + d + x * RA_W) * vsplat(alpha[r]);
        int to = seen->to[r] < shared_from ? seen->to[r] : shared_from;
        values_own(acc[r], vals, p[r], seen->from[r], to, d, nv, pair, dtype);
    }
    for (int i = shared_from; i < shared_to; i++) {
        if (far && d == 0) prefetch_far(vals[i], far, row_bytes);
        vf v[4];
        load_span(v, vals[i], dtype, d, nv, pair);
        for (int x = 0; x < nv && ahead; x++)
            prefetch_line((const char *)ahead[i] + skip, d + x * RA_W, ln, dtype);
        for (int r = 0; r < nr; r++) {
            vf pr = vsplat(p[r][i]);
            for (int x = 0; x < nv; x++) acc[r][x] += pr * v[x];
        }
    }
    for (int r = 0; r < nr; r++) {
        int from = seen->from[r] > shared_to ? seen->from[r] : shared_to;
        values_own(acc[r], vals, p[r], from, seen->to[r], d, nv, pair, dtype);
        for (int x = 0; x < nv; x++) vstore(o + r * stride + d + x * RA_W, acc[r][x]);
    }
}

/* The keys [j, j + n) of a block that rows r0 .. r0 + nr see: row r sees
 * positions first[r] .. last[r]. */
static inline __attribute__((always_inline)) decode_seen
decode_block_seen(const int64_t *first, const int64_t *last, int64_t j, int n, int64_t r0,
                  const int nr)
{
    decode_seen seen = {{0}, {0}, 0, n};
    for (int r = 0; r < nr; r++) {
        int64_t from = first[r0 + r] - j, to = last[r0 + r] - j + 1;
        from = from < 0 ? 0 : from;
        to = to > n ? n : to;
        if (from >= to) from = to = 0;
        seen.from[r] = (int)from;
        seen.to[r] = (int)to;
        seen.shared_from = seen.from[r] > seen.shared_from ? seen.from[r] : seen.shared_from;
        seen.shared_to = seen.to[r] < seen.shared_to ? seen.to[r] : seen.shared_to;
    }
    if (seen.shared_from >= seen.shared_to) seen.shared_from = seen.shared_to = 0;
    return seen;
}

/* The lines a block asks for while it computes: for key i, the scores ask
 * for row scores_rows[i] + scores_skip bytes and P.V for values_rows[i] +
 * values_skip (values_rows NULL: none) -- the block's own K or V rows, some
 * distance on, and for each such line the one line_far bytes further on
 * (prefetch_line's far; 0: none); and, once per page of each stream, for
 * the line far bytes on in that stream. */
typedef struct decode_ahead {
    const void *const *scores_rows, *const *values_rows;
    int64_t scores_skip, values_skip, far;
    int to_l2; /* prefetch_line's: the rows' own lines far on, not the next phase's */
    int64_t line_far;
} decode_ahead;

/* The kernels' schemes of requests (decode_rows_n's lines, a constant):
 * LINES_ASKED reads a block's from its decode_ahead; the others are the
 * two that AVX-512's f32 and bf16 blocks take at D 128 (decode_task),
 * known at compile time, so that a loop over D issues its requests with
 * no test of the scheme: LINES_TO_L2 (to_l2, no far line) and
 * LINES_NEXT_FAR (the next phase's lines, then line_far on). */
enum { LINES_ASKED, LINES_TO_L2, LINES_NEXT_FAR };

static inline __attribute__((always_inline)) decode_lines lines_of(const decode_ahead *a,
                                                                   const int lines)
{
    if (lines == LINES_TO_L2) return (decode_lines){1, 0, 0};
    if (lines == LINES_NEXT_FAR) return (decode_lines){0, 1, a->line_far};
    return (decode_lines){a->to_l2, a->line_far != 0, a->line_far};
}

#if defined(RA_DECODE_VNNI)
/* quantize_q's scores on AVX512-VNNI.  vpdpbusd multiplies unsigned bytes
 * by signed ones: a key code c goes in as c + 128 (c ^ 0x80), and each
 * lane's accumulator starts at minus 128 times the sum of the q codes that
 * land in it (vnni_bias), so that it holds the exact sum of its c_q c. */

/* bias[r] = per lane, 128 times the sum of row r's codes that lane meets
 * over D's whole 64 bytes (codes qc [nr, D]). */
static inline __attribute__((always_inline)) void vnni_bias(vi *bias, const int8_t *qc,
                                                             int64_t head_dim, const int nr)
{
    const vi ones = vbytes_splat(0x80);
    for (int r = 0; r < nr; r++) {
        bias[r] = vbytes_splat(0);
        for (int64_t d = 0; d + 64 <= head_dim; d += 64)
            bias[r] = vdot_u8_s8(bias[r], ones, vload_bytes(qc + r * head_dim + d));
    }
}

/* acc[r per_row + i] += lanes of c_q,r . c_i (keys' rows keys[i]) over D's
 * whole 64 bytes, as decode_rows_n's float loops lay them out (their
 * prefetches too); returns the elements done.  Each lane's sum is below
 * 2^24: converted to float exactly. */
static inline __attribute__((always_inline)) int64_t
scores_vnni(vf *acc, const int8_t *qc, const vi *bias, const void *const *keys,
            const decode_ahead *ahead, int k0, int64_t head_dim, const int nr)
{
    const int per_row = RA_W / nr;
    const vi flip = vbytes_splat(0x80);
    vi sums[RA_W];
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < per_row; i++) sums[r * per_row + i] = -bias[r];
    int64_t d = 0;
    for (; d + 64 <= head_dim; d += 64) {
        vi k[RA_W];
        for (int i = 0; i < per_row; i++) {
            if (d == 0) prefetch_far(keys[i], ahead->far, head_dim); /* D bytes a row */
            k[i] = vload_bytes((const int8_t *)keys[i] + d) ^ flip;
            prefetch_line((const char *)ahead->scores_rows[k0 + i] + ahead->scores_skip, d,
                          lines_of(ahead, LINES_ASKED), DECODE_I8_Q8);
        }
        for (int r = 0; r < nr; r++) {
            const vi qv = vload_bytes(qc + r * head_dim + d);
            for (int i = 0; i < per_row; i++)
                sums[r * per_row + i] = vdot_u8_s8(sums[r * per_row + i], k[i], qv);
        }
    }
    for (int x = 0; x < RA_W; x++) acc[x] += __builtin_convertvector(sums[x], vf);
    return d;
}
#endif

#if defined(RA_SIMD_AVX2)
/* decode_rows_n's scores of an 8-bit block on AVX2 (nr rows of scaled
 * queries q [nr, D], the block's n keys; the same loops, so the same sums
 * in the same order: the same bits), in a function of their own for each
 * dtype and row count.  Inlined into decode_rows, GCC 12 kept each q
 * vector in one stack slot, stored there and read back by each of the
 * per_row FMAs that take it: on one core of an AMD EPYC (family 25 model
 * 1, Zen 3) an int8 step took 65-70 ns a key and kv head (4 query heads,
 * D 128), in L2 and from memory alike, where its 128 FMAs take 20 ns
 * (docs/perf/2026-12-08-decode8-zen3.md). */
static inline __attribute__((always_inline)) void
scores8_rows(float scores[][DECODE_KEYS_MAX], const float *q, const void *const *keys,
             const decode_ahead *ahead, int n, int64_t head_dim, const int nr,
             const ra_dtype dtype)
{
    const decode_lines ln = lines_of(ahead, LINES_ASKED);
    const int per_row = RA_W / nr; /* keys per lane sum */
    const int n_up = (n + RA_W - 1) / RA_W * RA_W;
    for (int k0 = 0; k0 < n_up; k0 += per_row) {
        if (k0 >= n) { /* past the block's last key: masked by the caller */
            for (int r = 0; r < nr; r++) memset(&scores[r][k0], 0, sizeof(float) * per_row);
            continue;
        }
        vf acc[RA_W];
        for (int x = 0; x < RA_W; x++) acc[x] = vsplat(0.0f);
        for (int i = 0; i < per_row; i++) prefetch_far(keys[k0 + i], ahead->far, head_dim);
        int64_t d = 0;
        for (; d + RA_W <= head_dim; d += RA_W) {
            vf k[RA_W];
            for (int i = 0; i < per_row; i++) {
                k[i] = load_any(keys[k0 + i], dtype, d);
                prefetch_line((const char *)ahead->scores_rows[k0 + i] + ahead->scores_skip, d,
                              ln, dtype);
            }
            for (int r = 0; r < nr; r++) {
                const vf qv = vload(q + r * head_dim + d);
                for (int i = 0; i < per_row; i++) acc[r * per_row + i] += qv * k[i];
            }
        }
        float sum[RA_W];
        vstore(sum, vsum_lanes(acc));
        for (int r = 0; r < nr; r++)
            memcpy(&scores[r][k0], sum + r * per_row, sizeof(float) * per_row);
        if (d < head_dim) /* D past the last whole vector */
            for (int r = 0; r < nr; r++)
                for (int i = 0; i < per_row; i++)
                    for (int64_t e = d; e < head_dim; e++)
                        scores[r][k0 + i] += q[r * head_dim + e] * load_one(keys[k0 + i], dtype, e);
    }
}

#define SCORES8_OF(name, nr, dtype)                                                         \
    static __attribute__((noinline)) void name(float scores[][DECODE_KEYS_MAX], const float *q, \
                                               const void *const *keys,                      \
                                               const decode_ahead *ahead, int n,             \
                                               int64_t head_dim)                             \
    {                                                                                        \
        scores8_rows(scores, q, keys, ahead, n, head_dim, nr, dtype);                        \
    }
SCORES8_OF(scores8_i8_4, 4, RA_I8)
SCORES8_OF(scores8_i8_2, 2, RA_I8)
SCORES8_OF(scores8_i8_1, 1, RA_I8)
SCORES8_OF(scores8_q8_4, 4, DECODE_I8_Q8)
SCORES8_OF(scores8_q8_2, 2, DECODE_I8_Q8)
SCORES8_OF(scores8_q8_1, 1, DECODE_I8_Q8)
SCORES8_OF(scores8_e4m3_4, 4, RA_F8E4M3)
SCORES8_OF(scores8_e4m3_2, 2, RA_F8E4M3)
SCORES8_OF(scores8_e4m3_1, 1, RA_F8E4M3)
SCORES8_OF(scores8_finite_4, 4, DECODE_E4M3_FINITE)
SCORES8_OF(scores8_finite_2, 2, DECODE_E4M3_FINITE)
SCORES8_OF(scores8_finite_1, 1, DECODE_E4M3_FINITE)
#undef SCORES8_OF

/* The scores8_* function of nr rows (4, 2 or 1) and dtype (constants). */
static inline __attribute__((always_inline)) void
scores8(float scores[][DECODE_KEYS_MAX], const float *q, const void *const *keys,
        const decode_ahead *ahead, int n, int64_t head_dim, const int nr, const ra_dtype dtype)
{
#define SCORES8_CALL(f4, f2, f1) \
    (nr == 4 ? f4 : nr == 2 ? f2 : f1)(scores, q, keys, ahead, n, head_dim)
    if (dtype == RA_I8) SCORES8_CALL(scores8_i8_4, scores8_i8_2, scores8_i8_1);
    else if (dtype == DECODE_I8_Q8) SCORES8_CALL(scores8_q8_4, scores8_q8_2, scores8_q8_1);
    else if (dtype == RA_F8E4M3) SCORES8_CALL(scores8_e4m3_4, scores8_e4m3_2, scores8_e4m3_1);
    else SCORES8_CALL(scores8_finite_4, scores8_finite_2, scores8_finite_1);
#undef SCORES8_CALL
}
#endif

/* A block's keys against every row of a group: the rows' scaled queries qs
 * [rows, D], their key ranges first .. last [rows] and partials group
 * [rows, D + 2]; with quantize_q (DECODE_I8_Q8) qs holds the rows' codes'
 * values, q_codes [rows, D] the codes and q_scale [rows] their scales s_q
 * (else NULL). */
typedef struct decode_group {
    const float *qs;
    const int64_t *first, *last;
    float softcap;
    float *partials;
    int64_t rows;
    const float *q_scale;
    const int8_t *q_codes;
} decode_group;

/* One block of n <= DECODE_KEYS_MAX keys (positions j ..) of a kv head against
 * rows r0 .. r0 + nr of its group (scaled queries qs [rows, D], a bf16 cache's in pairs, partials
 * group [rows, D + 2], the rows' key ranges first .. last, soft-cap softcap
 * or 0); nr (1, 2 or 4) and dtype are constants.  An 8-bit cache's keys'
 * and values' scales: ks, vs [n rounded up to RA_W] (else NULL); keys and
 * vals [n rounded up to RA_W], those past n any of the cache's rows.
 *
 * Scores: RA_W accumulators, nr rows x RA_W / nr keys, each one vector FMA
 * per RA_W elements of D; vsum_lanes then gives lane r * (RA_W / nr) + i =
 * q_r . k_i.  So every K load serves nr rows, and a block's K and V are each
 * read once for the group.  Then the online softmax of each row, and
 * o += p v with each V load shared by the rows. */
static inline __attribute__((always_inline)) void
decode_rows_n(const decode_group *g, int64_t head_dim, const void *const *keys,
              const void *const *vals, const float *ks, const float *vs,
              const decode_ahead *ahead, int n, int64_t j, int64_t r0, const int nr,
              const ra_dtype dtype, const int lines)
{
    const decode_lines ln = lines_of(ahead, lines);
    const int64_t *first = g->first, *last = g->last;
    const float softcap = g->softcap;
    float *group = g->partials;
    const int eight = is_i8(dtype) || is_e4m3(dtype);
    const int64_t stride = head_dim + 2, row_bytes = head_dim * elem_bytes(dtype);
    const int per_row = RA_W / nr; /* keys per lane sum */
    const int64_t paired = bf16_paired(dtype, head_dim);
    /* the elements whose keys' codes are read two vectors at a time (bf16
     * pairs; fp8 rows: load_span's) */
    const int64_t twos = is_e4m3(dtype) ? head_dim - head_dim % (2 * RA_W) : paired;
    const float *q = g->qs + r0 * head_dim;
    float scores[DECODE_ROWS][DECODE_KEYS_MAX];
    const int n_up = (n + RA_W - 1) / RA_W * RA_W; /* the vectors that hold keys */
#if defined(RA_DECODE_VNNI)
    vi bias[DECODE_ROWS];
    if (dtype == DECODE_I8_Q8) vnni_bias(bias, g->q_codes + r0 * head_dim, head_dim, nr);
#endif
    int k_start = 0; /* the first key the loop below scores */
#if defined(RA_SIMD_AVX2)
    if (eight) {
        scores8(scores, q, keys, ahead, n, head_dim, nr, dtype);
        k_start = n_up;
    }
#endif
    for (int k0 = k_start; k0 < n_up; k0 += per_row) {
        if (k0 >= n) { /* past the block's last key: masked below */
            for (int r = 0; r < nr; r++) memset(&scores[r][k0], 0, sizeof(float) * per_row);
            continue;
        }
        vf acc[RA_W];
        for (int x = 0; x < RA_W; x++) acc[x] = vsplat(0.0f);
        int64_t d = 0;
#if defined(RA_DECODE_VNNI)
        if (dtype == DECODE_I8_Q8) /* D's whole 64 bytes; the rest below, as floats */
            d = scores_vnni(acc, g->q_codes + r0 * head_dim, bias, keys + k0, ahead, k0,
                            head_dim, nr);
#endif
        for (int i = 0; i < per_row && d == 0; i++) /* before the loops over D: no test in them */
            prefetch_far(keys[k0 + i], ahead->far, row_bytes);
        for (; d + 2 * RA_W <= twos; d += 2 * RA_W) { /* bf16: q's even, then odd half */
            vf k[RA_W][2];
            for (int i = 0; i < per_row; i++) {
                load_span(k[i], keys[k0 + i], dtype, d, 2, dtype == RA_BF16);
                for (int x = 0; x < 2; x++)
                    prefetch_line((const char *)ahead->scores_rows[k0 + i] + ahead->scores_skip,
                                  d + x * RA_W, ln, dtype);
            }
            for (int x = 0; x < 2; x++)
                for (int r = 0; r < nr; r++) {
                    vf qv = vload(q + r * head_dim + d + x * RA_W);
                    for (int i = 0; i < per_row; i++) acc[r * per_row + i] += qv * k[i][x];
                }
        }
        for (; d + RA_W <= head_dim; d += RA_W) {
            vf k[RA_W];
            for (int i = 0; i < per_row; i++) {
                k[i] = load_any(keys[k0 + i], dtype, d);
                prefetch_line((const char *)ahead->scores_rows[k0 + i] + ahead->scores_skip, d,
                              ln, dtype);
            }
            for (int r = 0; r < nr; r++) {
                vf qv = vload(q + r * head_dim + d);
                for (int i = 0; i < per_row; i++) acc[r * per_row + i] += qv * k[i];
            }
        }
        float sum[RA_W];
        vstore(sum, vsum_lanes(acc));
        for (int r = 0; r < nr; r++)
            memcpy(&scores[r][k0], sum + r * per_row, sizeof(float) * per_row);
        if (d < head_dim) /* D past the last whole vector */
            for (int r = 0; r < nr; r++)
                for (int i = 0; i < per_row; i++)
                    for (int64_t e = d; e < head_dim; e++)
                        scores[r][k0 + i] += q[r * head_dim + e] * load_one(keys[k0 + i], dtype, e);
    }
    if (eight) /* q . (s c) = (q . c) s; quantize_q's ((c_q . c) s_q) s */
        for (int r = 0; r < nr; r++)
            for (int k0 = 0; k0 < n_up; k0 += RA_W) {
                vf sc = vload(scores[r] + k0);
                if (dtype == DECODE_I8_Q8) sc = sc * vsplat(g->q_scale[r0 + r]);
                vstore(scores[r] + k0, sc * vload(ks + k0));
            }

    float p[DECODE_ROWS][DECODE_KEYS_MAX], alpha[RA_W], m_old[RA_W] = {0}, m_new[RA_W] = {0};
    float m_exp[RA_W] = {0};
    const decode_seen seen = decode_block_seen(first, last, j, n, r0, nr);
    for (int r = 0; r < nr; r++) {
        float *m = group + (r0 + r) * stride + head_dim;
        const int from = seen.from[r], to = seen.to[r];
        if (from == to) continue; /* nothing here for this row: o, m, l stay */
        if (softcap > 0) /* before the mask, as the reference */
            for (int k0 = 0; k0 < n; k0 += RA_W)
                vstore(scores[r] + k0,
                       vsplat(softcap) * vtanh(vload(scores[r] + k0) / vsplat(softcap)));
        vf mx = vsplat(-INFINITY);
        for (int k0 = 0; k0 < n; k0 += RA_W) { /* the spans that hold keys */
            vi in = (ra_lanes >= from - k0) & (ra_lanes < to - k0);
            vf sr = vselect(in, vload(scores[r] + k0), vsplat(-INFINITY));
            vstore(scores[r] + k0, sr);
            mx = vmax(mx, sr);
        }
        float block_max = vreduce_max(mx);
        m_old[r] = *m;
        m_new[r] = block_max > *m ? block_max : *m;
    }
    /* against 0 while every score is -inf (as the flash path does; its exp
     * is vexp_flash, within float32 rounding of this one); one vexp for every row's
     * e^(m - m') (rows that saw nothing: e^0 = 1) */
    for (int r = 0; r < nr; r++) m_exp[r] = m_new[r] == -INFINITY ? 0.0f : m_new[r];
    vstore(alpha, vexp(vload(m_old) - vload(m_exp)));
    for (int r = 0; r < nr; r++) {
        if (seen.from[r] == seen.to[r]) continue;
        float *m = group + (r0 + r) * stride + head_dim, *l = m + 1;
        vf sum = vsplat(0.0f);
        for (int k0 = 0; k0 < n; k0 += RA_W) {
            vf e = vexp(vload(scores[r] + k0) - vsplat(m_exp[r]));
            vstore(p[r] + k0, e);
            sum += e;
        }
        *l = *l * alpha[r] + vreduce_add(sum);
        *m = m_new[r];
        if (eight) /* p (s c) = (p s) c: the weights of the values' codes */
            for (int k0 = 0; k0 < n; k0 += RA_W) vstore(p[r] + k0, vload(p[r] + k0) * vload(vs + k0));
    }

    /* o = o alpha + p V: spans of 4 vectors of D (16 accumulators for 4
     * rows), then single vectors, then single elements */
    float *o = group + r0 * stride;
    const void *const *next = ahead->values_rows;
    const int64_t skip = ahead->values_skip, far = next ? ahead->far : 0;
    int64_t d = 0;
    for (; d + 4 * RA_W <= paired; d += 4 * RA_W)
        values_span(o, stride, vals, next, skip, ln, far, row_bytes, p, alpha, &seen,
                    d, nr, 4, 1, dtype);
    if (d < paired) { /* one pair left */
        values_span(o, stride, vals, next, skip, ln, far, row_bytes, p, alpha, &seen,
                    d, nr, 2, 1, dtype);
        d += 2 * RA_W;
    }
    const int span = values_span_vectors(dtype);
    for (; d + span * RA_W <= head_dim; d += span * RA_W)
        values_span(o, stride, vals, next, skip, ln, far, row_bytes, p, alpha, &seen,
                    d, nr, span, 0, dtype);
    for (; d + RA_W <= head_dim; d += RA_W)
        values_span(o, stride, vals, next, skip, ln, far, row_bytes, p, alpha, &seen,
                    d, nr, 1, 0, dtype);
    for (; d < head_dim; d++)
        for (int r = 0; r < nr; r++) {
            float acc = o[r * stride + d] * alpha[r];
            for (int i = seen.from[r]; i < seen.to[r]; i++)
                acc += p[r][i] * load_one(vals[i], dtype, d);
            o[r * stride + d] = acc;
        }
}

/* All rows of a group, in runs of 4, 2 and 1, for one dtype and scheme of
 * requests (lines_of's). */
static inline __attribute__((always_inline)) void
decode_rows_dtype(const decode_group *g, int64_t head_dim, const void *const *keys,
                  const void *const *vals, const float *ks, const float *vs,
                  const decode_ahead *ahead, int n, int64_t j, const ra_dtype dtype,
                  const int lines)
{
    int64_t r0 = 0;
    for (; r0 + 4 <= g->rows; r0 += 4)
        decode_rows_n(g, head_dim, keys, vals, ks, vs, ahead, n, j, r0, 4, dtype, lines);
    if (r0 + 2 <= g->rows) {
        decode_rows_n(g, head_dim, keys, vals, ks, vs, ahead, n, j, r0, 2, dtype, lines);
        r0 += 2;
    }
    if (r0 < g->rows)
        decode_rows_n(g, head_dim, keys, vals, ks, vs, ahead, n, j, r0, 1, dtype, lines);
}

static void decode_rows(const decode_group *g, int64_t head_dim, const void *const *keys,
                        const void *const *vals, const float *ks, const float *vs,
                        const decode_ahead *ahead, int n, int64_t j, ra_dtype dtype)
{
#define DECODE_ROWS_AS(t, lines)                                                        \
    decode_rows_dtype(g, head_dim, keys, vals, ks, vs, ahead, n, j, t, lines)
#define DECODE_ROWS_OF(t) DECODE_ROWS_AS(t, LINES_ASKED)
#if defined(RA_DECODE_VNNI) /* this build runs quantize_q's jobs only (kernels.h) */
    (void)dtype;
    DECODE_ROWS_OF(DECODE_I8_Q8);
#else
    /* f32 and bf16 blocks with the schemes of requests they take at D
     * 128 on AVX-512 known at compile time (lines_of): on one core of an
     * Intel Xeon (family 6 model 167), a bf16 step over 2048 tokens in L2
     * took 28.2-28.3 ns a key and kv head against 30.0-30.4 with the
     * scheme read from the decode_ahead (a harness, three rounds
     * alternating; docs/perf/2026-12-07-decode.md, thirteenth session). */
    switch ((int)dtype) { /* an int: the pseudo-dtypes are no ra_dtype */
    case RA_F32:
        if (ahead->to_l2) DECODE_ROWS_AS(RA_F32, LINES_TO_L2);
        else DECODE_ROWS_OF(RA_F32);
        break;
    case RA_BF16:
        if (!ahead->to_l2 && ahead->line_far) DECODE_ROWS_AS(RA_BF16, LINES_NEXT_FAR);
        else DECODE_ROWS_OF(RA_BF16);
        break;
    case RA_I8: DECODE_ROWS_OF(RA_I8); break;
    case DECODE_I8_Q8: DECODE_ROWS_OF(DECODE_I8_Q8); break;
    case RA_F8E4M3: DECODE_ROWS_OF(RA_F8E4M3); break;
    case DECODE_E4M3_FINITE: DECODE_ROWS_OF(DECODE_E4M3_FINITE); break;
    default: DECODE_ROWS_OF(RA_F16); break;
    }
#endif
#undef DECODE_ROWS_OF
#undef DECODE_ROWS_AS
}

/* The rows of kv head g of row b in chunk chunk of a decode task: the
 * thread's scaled queries qs [Hkv * rows, D] and key ranges first, last
 * [rows], and the task's partials. */
static decode_group decode_group_of(const ra_decode_job *job, const float *qs,
                                    const int64_t *first, const int64_t *last, int64_t b,
                                    int64_t g, int64_t chunk)
{
    const int64_t rows = job->rows, head_dim = job->cache->head_dim;
    const int64_t group = b * job->cache->n_kv_heads + g;
    const int quantize_q = job->mask.quantize_q;
    return (decode_group){qs + g * rows * head_dim, first, last, job->mask.softcap,
                          job->partials + (group * job->n_chunks + chunk) * rows * (head_dim + 2),
                          rows, quantize_q ? job->q_scale + group * rows : NULL,
                          quantize_q ? job->q_codes + group * rows * head_dim : NULL};
}

/* The K and V rows (and RA_I8 scales) of positions j .. j + n - 1 of a
 * paged view's row b, kv head g, into keys, vals (and ks, vs) [nk], the
 * rows past n repeating position j (no row sees them).  One division for
 * the block: the rows then walk through the pages. */
static inline void paged_rows(const ra_kv_cache *c, int64_t b, int64_t g, int64_t j, int n,
                              int nk, const void **keys, const void **vals, float *ks, float *vs)
{
    const int64_t row_bytes = c->head_dim * (int64_t)ra_dtype_size(c->dtype), ps = c->page_size;
    const int32_t *table = c->pages[b] + (j / ps - c->first_page[b]);
    const int64_t hkv = c->n_kv_heads, group = c->page_group, n_pages = c->n_pages;
    int64_t in_page = j % ps, base = ra_kv_page_row(*table, g, ps, hkv, group, n_pages);
    const int64_t first = base + in_page;
    for (int i = 0; i < nk; i++) {
        const int64_t row = i < n ? base + in_page : first;
        keys[i] = (const char *)c->k + row * row_bytes;
        vals[i] = (const char *)c->v + row * row_bytes;
        if (ks) ks[i] = c->k_scale[row], vs[i] = c->v_scale[row];
        if (i < n && ++in_page == ps && i + 1 < n) {
            in_page = 0;
            base = ra_kv_page_row(*++table, g, ps, hkv, group, n_pages);
        }
    }
}

/* A block of a paged view's task: kv head g's positions j .. j + n - 1,
 * their rows (paged_rows's) and an 8-bit cache's scales. */
typedef struct paged_block {
    const void *keys[DECODE_KEYS_MAX], *vals[DECODE_KEYS_MAX];
    float ks[DECODE_KEYS_MAX], vs[DECODE_KEYS_MAX];
    int64_t g, j;
    int n;
} paged_block;

/* Block i of the walk of decode_paged_task over kv heads g0 .. g0 + heads
 * and positions [j_start, j_end) (n_blocks blocks a head): spans of span
 * blocks, in each span every head in turn, its blocks in order. */
static void paged_block_at(const ra_kv_cache *c, int64_t b, int64_t g0, int64_t heads,
                           int64_t j_start, int64_t j_end, int64_t span, int64_t n_blocks,
                           int64_t i, paged_block *block)
{
    const int64_t first = i / (span * heads) * span, in_span = i - first * heads;
    const int64_t blocks = n_blocks - first < span ? n_blocks - first : span;
    block->g = g0 + in_span / blocks;
    const int nk = decode_block_keys(c);
    block->j = j_start + (first + in_span % blocks) * nk;
    block->n = j_end - block->j < nk ? (int)(j_end - block->j) : nk;
    const int i8 = c->dtype == RA_I8;
    paged_rows(c, b, block->g, block->j, block->n, nk, block->keys, block->vals,
               i8 ? block->ks : NULL, block->vs);
    for (int k = 0; ra_dtype_is_cache8(c->dtype) && !i8 && k < nk; k++)
        block->ks[k] = e4m3_scale(c->k_scale[block->g]),
        block->vs[k] = e4m3_scale(c->v_scale[block->g]);
}

/* decode_task's blocks for kv heads g0 .. g0 + heads of row b of a paged
 * view (an ra_kv_pool's pages, cache->page_size > 0), positions [j_start,
 * j_end): each head's blocks of decode_block_keys in the contiguous cache's
 * order, so the same bits (qs, first, last: decode_group_of's; kind:
 * decode_rows's dtype).
 *
 * A group of pages holds each kv head's rows of its pages as one run, the
 * heads' runs one after another (kvpool_internal.h), and a sequence's
 * pages lie in groups in order.  So the task walks spans of a group's
 * positions (RA_DECODE_CHUNK: a task's, where the page size divides it),
 * every head in turn in a span: a span's group is read front to back, and
 * each head's rows of it as one run, as a contiguous cache's.  Each block asks for
 * the lines of the next block of the walk
 * (the next head's, across the heads and spans): as the contiguous
 * cache's f32 blocks do their rows 16 KiB on (decode_task), its K rows in
 * the scores and its V rows in P.V, or with next_phase the block's own V
 * in the scores and the next K in P.V; and, at its start, for the first
 * line of each page that the next block enters, of K and V: the hardware
 * prefetcher does not carry a stream into a page that is not the next in
 * memory.  With a group of one page (each head's rows of a page an 8 KiB
 * run at pages of 16), on two threads of an Intel Xeon (family 6 model
 * 167) a step over 32 sequences took 1.10-1.22 of the contiguous twin's
 * time, whatever the walk's order or requests, where a pool of one page a
 * sequence took 1.00-1.03: the runs' starts cost, not the walk; groups of
 * 1024 positions took 0.94-1.06 (docs/perf/2026-12-07-paged.md, thirteenth
 * session).  Earlier, with groups of one page, on one core
 * 32 sequences read at 0.71-0.73 (pages of 16) and 0.72-0.74 (64) of one
 * thread's read limit before (each head's blocks in turn, asking for its
 * rows 32 positions on, and once per 4 KiB for a row 32 positions on),
 * 0.75-0.79 and 0.76-0.78 so, the contiguous twin 0.75-0.80 (bench, eleven
 * runs alternating the builds; on two threads no change at 16, 64 0-4%
 * faster).  In a harness of the same batch, bf16 pools went from 0.62-0.63
 * to 0.74-0.76 (the twin 0.72-0.73); the f32 walk with the old requests
 * read at 0.66-0.71; asking once per 4 KiB instead of once per page, 0.75
 * at pages of 64 (0.78 at 16); finding the pages' starts by a division per
 * row cost 1-3%
 * (docs/perf/2026-12-07-paged.md). */
static void decode_paged_task(const ra_decode_job *job, const float *qs, const int64_t *first,
                              const int64_t *last, int64_t b, int64_t chunk, int64_t g0,
                              int64_t heads, int64_t j_start, int64_t j_end, int next_phase,
                              ra_dtype kind)
{
    if (j_start >= j_end) return;
    const ra_kv_cache *c = job->cache;
    const int nk = decode_block_keys(c);
    const int64_t ps = c->page_size, n_blocks = (j_end - j_start + nk - 1) / nk;
    const int64_t span = (c->page_group * ps + nk - 1) / nk, total = n_blocks * heads;
    const int eight = ra_dtype_is_cache8(c->dtype);
    paged_block blocks[2];
    paged_block_at(c, b, g0, heads, j_start, j_end, span, n_blocks, 0, &blocks[0]);
    for (int64_t i = 0; i < total; i++) {
        const paged_block *cur = &blocks[i & 1];
        const paged_block *next = i + 1 < total ? &blocks[(i + 1) & 1] : NULL;
        if (next)
            paged_block_at(c, b, g0, heads, j_start, j_end, span, n_blocks, i + 1,
                           &blocks[(i + 1) & 1]);
        const void *ahead_k[DECODE_KEYS_MAX], *ahead_v[DECODE_KEYS_MAX];
        for (int k = 0; k < nk; k++) { /* past the next block: this one's own rows */
            const int on = next && k < next->n;
            ahead_k[k] = on ? next->keys[k] : cur->keys[k];
            ahead_v[k] = on ? next->vals[k] : cur->vals[k];
        }
        if (next) /* the pages the next block enters: their first rows */
            for (int64_t k = (ps - next->j % ps) % ps; k < next->n; k += ps) {
                __builtin_prefetch(next->keys[k], 0, 1);
                __builtin_prefetch(next->vals[k], 0, 1);
            }
        decode_ahead ahead = {ahead_k, ahead_v, 0, 0, 0, 1, 0};
        if (next_phase) {
            ahead = (decode_ahead){cur->vals, ahead_k, 0, 0, 0, 0, 0};
            if (!next) ahead.values_rows = NULL; /* last block */
        }
        const decode_group rows_of_g = decode_group_of(job, qs, first, last, b, cur->g, chunk);
        decode_rows(&rows_of_g, c->head_dim, cur->keys, cur->vals, eight ? cur->ks : NULL,
                    eight ? cur->vs : NULL, &ahead, cur->n, cur->j, kind);
    }
}

static void decode_task(void *arg, int64_t task, int thread)
{
    const ra_decode_job *job = arg;
    const ra_kv_cache *c = job->cache;
    const ra_tensor *q = job->q;
    const int64_t n_kv = c->n_kv_heads, head_dim = c->head_dim, T = q->shape[1];
    const int64_t rep = q->shape[2] / n_kv, rows = job->rows, heads = n_kv / job->n_splits;
    const int64_t g0 = task % job->n_splits * heads, chunk = task / job->n_splits % job->n_chunks;
    const int64_t b = task / job->n_splits / job->n_chunks;
    const int64_t nq = ra_decode_queries(job, b), p0 = ra_decode_query_start(job, b);
    const ra_tensor kt = ra_kv_cache_view(c, 0), vt = ra_kv_cache_view(c, 1);
    const float scale = (float)job->mask.scale;
    const int64_t stride = head_dim + 2; /* a row's partial: o[D], m, l */
    const int64_t paired = bf16_paired(c->dtype, head_dim);
    float *qs = job->scratch + thread * job->per_thread;  /* [Hkv * rows, D] scaled queries */
    int64_t *first = (int64_t *)(void *)(qs + ra_decode_queries_floats(c, rows)), *last = first + rows;
    const int quantize_q = job->mask.quantize_q;

    /* Row r = (head in group) * T + t is the token at position p0 + t
     * (ra_decode_query_start: len - nq + t but in ra_attention_decode_lse);
     * it sees the positions first .. that one, of those cached (last).
     * Rows past nq see nothing.
     * The task reads the positions [j_start, j_end) of its chunk that some
     * row sees. */
    const int64_t j0 = (ra_decode_first_chunk(job, b) + chunk) * RA_DECODE_CHUNK;
    int64_t j_start = j0 + RA_DECODE_CHUNK, j_end = j0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r % T;
        last[r] = t < nq ? ra_decode_last_key(job, b, p0 + t) : -1;
        first[r] = t < nq ? ra_decode_first_key(job, b, p0 + t) : 0;
        int64_t from = first[r] > j0 ? first[r] : j0;
        int64_t to = last[r] + 1 < j0 + RA_DECODE_CHUNK ? last[r] + 1 : j0 + RA_DECODE_CHUNK;
        if (from >= to) continue;
        j_start = from < j_start ? from : j_start;
        j_end = to > j_end ? to : j_end;
    }
    for (int64_t g = g0; g < g0 + heads; g++)
        for (int64_t r = 0; r < rows; r++) {
            int64_t h = r / T, t = r % T;
            float *o = job->partials + (((b * n_kv + g) * job->n_chunks + chunk) * rows + r) * stride;
            memset(o, 0, (size_t)head_dim * sizeof(float));
            o[head_dim] = -INFINITY;
            o[head_dim + 1] = 0.0f;
            float *dst = qs + (g * rows + r) * head_dim;
            const void *qrow = t < nq ? ra_row_any(q, b, t, g * rep + h) : NULL;
            if (quantize_q) { /* the codes' values, for the float kernels */
                const int8_t *codes = job->q_codes + ((b * n_kv + g) * rows + r) * head_dim;
                for (int64_t d = 0; d < head_dim; d++) dst[d] = codes[d];
            } else if (qrow && q->dtype == RA_F32 && !paired) { /* vectorized */
                for (int64_t d = 0; d < head_dim; d++) dst[d] = ((const float *)qrow)[d] * scale;
            } else if (qrow) { /* a 16-bit q widened exactly; a bf16 cache's in pairs' order */
                for (int64_t d = 0; d < head_dim; d++)
                    dst[pair_slot(d, paired)] = ra_load(qrow, q->dtype, d) * scale;
            } else {
                memset(dst, 0, (size_t)head_dim * sizeof(float));
            }
        }

    /* The cache is head-major: each kv head's chunk is one sequential run
     * of K rows and one of V rows, read front to back.  The hardware
     * prefetcher alone keeps too short a distance ahead of a kernel that
     * also computes, so each block asks for lines ahead of its loads.  When
     * a phase's rows (a block's K or its V) take at most AHEAD_BLOCK_BYTES
     * (16-bit and 8-bit rows at D = 128), the scores ask for the block's own
     * V rows and P.V for the next block's K rows, so every load was asked for one phase
     * earlier: for a bf16 cache at D = 128, 0.7 of the time of the other
     * way on one core, 0.85-0.9 on two (nearer the memory's limit).  With
     * 16 KiB phases (blocks of 64 keys) the scheme was slower (DECODE_KEYS),
     * and so were bursts (all of a phase's requests at its start: 1.2 times
     * as long); each stream asking for its own rows 8 or 16 KiB on, and far
     * requests (below) 8 or 32 KiB on were no faster.  Each of these
     * requests is followed by one for the line LINE_FAR_BYTES further on,
     * into L2 (prefetch_line's far): on one core of an Intel Xeon (family 6
     * model 167) a bf16 step over 16384 tokens then read at 0.80-0.81 of one
     * thread's read limit, against 0.73-0.78 without and 0.73-0.77 (16 KiB)
     * and 0.76 (32 KiB) further on (alternating bench runs;
     * docs/perf/2026-12-07-decode-ahead.md).  Past AHEAD_BLOCK_BYTES (AVX-512's
     * f32 rows), each stream asks for its own rows AHEAD_BYTES further on, into
     * L2 only (to_l2: prefetcht1; the block's own loads bring them on): on
     * one core of the same Xeon, an f32 step over 16384 tokens after a 1 GiB
     * read took 0.93-0.96 of the time it took with prefetcht0 (8 KiB on) in
     * quiet alternating runs (docs/perf/2026-12-07-decode.md), dropping
     * these requests made it 1.3 times as long, asking for every other line
     * only 1.2 times; 16 KiB on rather than 8 took 0.87-0.90 of the time over
     * 16384 tokens and 0.94-0.97 over 32768 (24 and 32 KiB no better;
     * docs/perf/2026-12-07-decode-ahead.md).
     *
     * A step that follows other memory traffic (another layer's cache, the
     * bench's read limit) is slow: on the 2-core VM here, an f32 step over
     * 16384 tokens right after a 256 MiB read took 1.4 times as long as the
     * same step repeated (one thread).  Why is not known.  Not page walks:
     * the cache is on 2 MiB pages (ra_alloc advises it), so a step meets a
     * few dozen.  Hardware prefetchers do not carry a stream across a 4 KiB
     * boundary, which may be where the step loses time.  What is measured
     * is that a block asking, once per 4 KiB of each stream, for a line
     * FAR_BYTES on (16 to 64 KiB time the same) recovers most of it: on two
     * threads an f32 step takes 0.76-0.81 of the time without it (bench).
     * Once per row instead helped f32 less, and a bf16 step took 1.1-1.2
     * times as long as without. */
    enum { AHEAD_BYTES = 16384, FAR_BYTES = 16384, LINE_FAR_BYTES = 8192 };
    const int64_t size = (int64_t)ra_dtype_size(c->dtype), row_bytes = kt.stride[1] * size;
    const int nk = decode_block_keys(c); /* keys a block */
    const int next_phase = nk * row_bytes <= AHEAD_BLOCK_BYTES;
    /* the slot of position j_start; each block's slots follow around the
     * ring (a block's keys span at most the capacity: it wraps once) */
    const int64_t slot_start = j_start < j_end ? ra_kv_cache_slot(c, j_start) : 0;
    const int eight = ra_dtype_is_cache8(c->dtype), i8 = c->dtype == RA_I8;
    const ra_dtype kind = decode_dtype(c, quantize_q);
    if (c->page_size) {
        decode_paged_task(job, qs, first, last, b, chunk, g0, heads, j_start, j_end, next_phase,
                          kind);
        return;
    }
    for (int64_t g = g0; g < g0 + heads; g++) {
        const decode_group rows_of_g = decode_group_of(job, qs, first, last, b, g, chunk);
        float ks[DECODE_KEYS_MAX], vs[DECODE_KEYS_MAX];
        const char *krows = (const char *)kt.data + (b * kt.stride[0] + g * kt.stride[2]) * size;
        const char *vrows = (const char *)vt.data + (b * vt.stride[0] + g * vt.stride[2]) * size;
        /* an 8-bit cache's scales of this head: int8's by slot, fp8's one */
        const float *kscales = eight ? ra_kv_cache_scales(c, 0, b, g) : NULL;
        const float *vscales = eight ? ra_kv_cache_scales(c, 1, b, g) : NULL;
        for (int i = 0; eight && !i8 && i < nk; i++)
            ks[i] = e4m3_scale(*kscales), vs[i] = e4m3_scale(*vscales);
        int64_t slot0 = slot_start;
        for (int64_t j = j_start; j < j_end; j += nk) {
            int n = j_end - j < nk ? (int)(j_end - j) : nk;
            const void *keys[DECODE_KEYS_MAX], *vals[DECODE_KEYS_MAX];
            const float *kb = ks, *vb = vs; /* the block's keys' scales */
            if (n == nk && slot0 + nk <= c->capacity) { /* whole, unwrapped:
                                    the rows in turn, int8's scales where they are */
                const char *kp = krows + slot0 * row_bytes, *vp = vrows + slot0 * row_bytes;
                for (int i = 0; i < nk; i++)
                    keys[i] = kp + i * row_bytes, vals[i] = vp + i * row_bytes;
                if (i8) kb = kscales + slot0, vb = vscales + slot0;
            } else {
                for (int i = 0; i < nk; i++) {
                    int64_t slot = slot0 + (i < n ? i : 0);
                    slot = slot < c->capacity ? slot : slot - c->capacity;
                    keys[i] = krows + slot * row_bytes;
                    vals[i] = vrows + slot * row_bytes;
                    if (i8) ks[i] = kscales[slot], vs[i] = vscales[slot];
                }
            }
            slot0 = slot0 + nk < c->capacity ? slot0 + nk : slot0 + nk - c->capacity;
            decode_ahead ahead = {next_phase ? vals : keys, next_phase ? keys : vals,
                                  next_phase ? 0 : AHEAD_BYTES,
                                  next_phase ? nk * row_bytes : AHEAD_BYTES, FAR_BYTES,
                                  !next_phase, next_phase ? LINE_FAR_BYTES : 0};
            if (next_phase && j + nk >= j_end) ahead.values_rows = NULL; /* last block */
            /* Near the end of the head's positions (to_l2): the rows past j_end
             * belong to another task, so ask for the next head's first rows of
             * this task instead (after the last head: the block's own, nothing).
             * At D 128 (f32) the rows past j_end were 32 KiB of each 1 MiB read;
             * on one core of the Intel Xeon (family 6 model 167) the contiguous
             * twin of the paged bench (32 sequences) went from 0.78-0.81 to
             * 0.80-0.82 of the read limit, an f32 step over 32768 tokens took
             * 0.98 of the time (bench, alternating runs;
             * docs/perf/2026-12-07-paged.md). */
            const void *end_k[DECODE_KEYS_MAX], *end_v[DECODE_KEYS_MAX];
            const int64_t on = AHEAD_BYTES / row_bytes; /* rows ahead of a to_l2 request */
            if (!next_phase && on > 0 && j + nk + on > j_end) {
                const int next_head = g + 1 < g0 + heads;
                for (int i = 0; i < nk; i++) {
                    const int64_t past = j + (i < n ? i : 0) + on - j_end; /* rows past j_end */
                    end_k[i] = (const char *)keys[i] + AHEAD_BYTES;
                    end_v[i] = (const char *)vals[i] + AHEAD_BYTES;
                    if (past >= 0 && next_head && past < j_end - j_start) {
                        int64_t slot = slot_start + past;
                        slot = slot < c->capacity ? slot : slot - c->capacity;
                        end_k[i] = krows + (kt.stride[2] + slot * kt.stride[1]) * size;
                        end_v[i] = vrows + (vt.stride[2] + slot * vt.stride[1]) * size;
                    } else if (past >= 0) {
                        end_k[i] = keys[i], end_v[i] = vals[i];
                    }
                }
                ahead.scores_rows = end_k, ahead.values_rows = end_v;
                ahead.scores_skip = ahead.values_skip = 0;
            }
            decode_rows(&rows_of_g, head_dim, keys, vals, eight ? kb : NULL, eight ? vb : NULL,
                        &ahead, n, j, kind);
        }
    }
}

/* out[b, t, h] = merge of the chunks' partials for that row, in chunk order:
 * m = max m_c, l = sum l_c e^(m_c - m), o = sum o_c e^(m_c - m) / l, over
 * the chunks that saw the row (m_c > -inf).  With sinks, head h's sink
 * sigma joins as a chunk that saw one key of logit sigma and value 0:
 * m = max(m, sigma), l += e^(sigma - m) (so m is finite).  Each chunk's
 * weight e^(m_c - m) replaces its l_c in the partials (scratch) once l is
 * summed, so that o sums a vector of D at a time over the chunks. */
#if !defined(RA_DECODE_VNNI) /* that build gives the task alone (kernels.h) */
static void decode_merge_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const ra_decode_job *job = arg;
    const ra_kv_cache *c = job->cache;
    const int64_t n_kv = c->n_kv_heads, head_dim = c->head_dim, T = job->q->shape[1];
    const int64_t rep = job->q->shape[2] / n_kv, rows = job->rows, stride = head_dim + 2;
    const int64_t paired = bf16_paired(c->dtype, head_dim);
    const int64_t b = task / n_kv, g = task % n_kv, nq = job->n_query ? job->n_query[b] : T;
    float *group = job->partials + (b * n_kv + g) * job->n_chunks * rows * stride;
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r / T, t = r % T;
        if (t >= nq) continue;
        const float *sink = job->mask.sinks ? job->mask.sinks + g * rep + h : NULL;
        float *dst = ra_row(job->out, b, t, g * rep + h);
        float *lse = job->lse ? job->lse + (b * n_kv * rep + g * rep + h) * T + t : NULL;
        const int64_t p = ra_decode_query_start(job, b) + t;
        if (ra_decode_first_key(job, b, p) > ra_decode_last_key(job, b, p)) { /* sees no key (only
                                                                  with q_start): 0, lse -Inf */
            memset(dst, 0, (size_t)head_dim * sizeof(float));
            if (lse) *lse = sink ? *sink : -INFINITY;
            continue;
        }
        float m = sink ? *sink : -INFINITY, l = 0.0f;
        for (int64_t ch = 0; ch < job->n_chunks; ch++) {
            float mc = group[(ch * rows + r) * stride + head_dim];
            m = mc > m ? mc : m;
        }
        for (int64_t ch = 0; ch < job->n_chunks; ch++) {
            float *o = group + (ch * rows + r) * stride;
            if (o[head_dim] == -INFINITY) continue; /* saw nothing */
            float w = o[head_dim] == m ? 1.0f : expf(o[head_dim] - m); /* e^0 = 1 */
            l += o[head_dim + 1] * w;
            o[head_dim + 1] = w;
        }
        if (sink) l += *sink == m ? 1.0f : expf(*sink - m);
        if (lse) *lse = m + logf(l);
        float inv = 1.0f / l;
        int64_t d = 0;
        for (; d + 2 * RA_W <= paired; d += 2 * RA_W) { /* o's pairs back in D's order */
            vf acc[2] = {vsplat(0.0f), vsplat(0.0f)};
            for (int64_t ch = 0; ch < job->n_chunks; ch++) {
                const float *o = group + (ch * rows + r) * stride;
                if (o[head_dim] != -INFINITY)
                    for (int x = 0; x < 2; x++)
                        acc[x] += vload(o + d + x * RA_W) * vsplat(o[head_dim + 1]);
            }
            const vf even = acc[0] * vsplat(inv), odd = acc[1] * vsplat(inv);
            vstore(dst + d, RA_SHUFFLE(even, odd, RA_LANE_ZIP_LOW, 0));
            vstore(dst + d + RA_W, RA_SHUFFLE(even, odd, RA_LANE_ZIP_HIGH, 0));
        }
        for (; d + RA_W <= head_dim; d += RA_W) {
            vf acc = vsplat(0.0f);
            for (int64_t ch = 0; ch < job->n_chunks; ch++) {
                const float *o = group + (ch * rows + r) * stride;
                if (o[head_dim] != -INFINITY) acc += vload(o + d) * vsplat(o[head_dim + 1]);
            }
            vstore(dst + d, acc * vsplat(inv));
        }
        for (; d < head_dim; d++) {
            float acc = 0.0f;
            for (int64_t ch = 0; ch < job->n_chunks; ch++) {
                const float *o = group + (ch * rows + r) * stride;
                if (o[head_dim] != -INFINITY) acc += o[d] * o[head_dim + 1];
            }
            dst[d] = acc * inv;
        }
    }
}
#endif
