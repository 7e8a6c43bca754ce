/*
 * test_mpi.c — libropeattn_mpi under mpirun (tests/test_mpi.sh runs it with
 * -np 1, 2, 3, 4).  Every rank builds the same whole sequence from one
 * seed, runs the single-process call on it (ra_attention_forward_lse,
 * ra_attention_decode_lse) as the oracle, and checks its own shard of the
 * distributed call against it: within TOL of max|out| (lse: of max|lse|),
 * the same bits on a second run (the ring's with two threads a rank), and
 * for the decode the same bits on every rank.  The ring's backward against
 * ra_attention_backward likewise (within TOL of max|gradient|; dsinks the
 * same bits on every rank).  Bad arguments on one rank must fail the call on every rank.
 * Rank 0 prints "test_mpi P=N: N passed, N failed" (every rank's counts).
 *
 *   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]   lse: [B, H, S]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ropeattn_mpi.h"

static const double TOL = 1e-6;
static int rank, size, passed, failed, case_failed;
static ra_context *ctx, *ctx2; /* one thread, two */

#define CHECK(cond, ...)                                     \
    do {                                                     \
        if (!(cond)) {                                       \
            printf("rank %d: FAIL %s:%d: ", rank, __func__, __LINE__); \
            printf(__VA_ARGS__);                             \
            printf("\n");                                    \
            case_failed = 1;                                 \
        }                                                    \
    } while (0)

#define RUN(call)                                            \
    do {                                                     \
        case_failed = 0;                                     \
        call;                                                \
        if (case_failed) failed++; else passed++;            \
    } while (0)

/* A value in [-1, 1) from an index and a seed (the same on every rank). */
static float value(uint64_t i, uint64_t seed)
{
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (float)((double)(x >> 40) / (double)(1ull << 23) - 1.0);
}

static float *random_floats(int64_t n, uint64_t seed, float amplitude)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = amplitude * value((uint64_t)i, seed);
    return x;
}

/* bf16 of x, rounded to nearest even. */
static uint16_t to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* The largest finite |x[i]| (padding rows' lse is -Inf). */
static double max_abs(const float *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = isfinite(x[i]) && fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

typedef struct ring_case {
    int64_t B, S, H, Hkv, D;
    ra_dtype kv;
    double softcap;
    int64_t window;
    int sinks;
    int64_t chunk; /* chunked attention's C (0: none) */
    int masks;     /* 1: padding (left in row 0; right and a hole in row 1); 2: documents;
                      3: dropout (the whole sequence's masks, as one process draws them) */
} ring_case;

/* The case's padding [B, S] and documents (n + 1 starts in cu, *n) of the
 * whole sequence, set in o as c.masks asks. */
static void case_masks(const ring_case *c, uint8_t *pad, int64_t *cu, int64_t *n,
                       ra_attention_options *o)
{
    const int64_t S = c->S;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t s = 0; s < S; s++)
            pad[b * S + s] = b == 0 ? s >= S / 5 : s < S - S / 7 && (s < S / 2 || s > S / 2 + 3);
    const int64_t starts[5] = {0, S / 3, S / 3 + 1, 2 * S / 3, S};
    *n = 0;
    cu[0] = 0;
    for (int i = 1; i < 5; i++)
        if (starts[i] > cu[*n]) cu[++*n] = starts[i];
    if (c->masks == 1) o->padding_mask = pad;
    if (c->masks == 2) o->cu_seqlens = cu, o->n_documents = *n;
    if (c->masks == 3) o->dropout = 0.25f, o->seed = 20261203;
}

/* Rows of x [B, S, heads, D] (elements of esize bytes) at the rank's
 * positions ids [n] into a new [B, n, heads, D]. */
static void *shard_rows(const void *x, int64_t B, int64_t S, int64_t heads, int64_t D,
                        size_t esize, const int64_t *ids, int64_t n)
{
    char *y = malloc((size_t)(B * n * heads * D) * esize);
    const size_t row = (size_t)(heads * D) * esize;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < n; s++)
            memcpy(y + (size_t)(b * n + s) * row, (const char *)x + (size_t)(b * S + ids[s]) * row,
                   row);
    return y;
}

static void ring_check(ring_case c)
{
    const int64_t B = c.B, S = c.S, H = c.H, Hkv = c.Hkv, D = c.D;
    float *q = random_floats(B * S * H * D, 1, 1.0f);
    float *k = random_floats(B * S * Hkv * D, 2, 1.0f), *v = random_floats(B * S * Hkv * D, 3, 1.0f);
    float *sinks = random_floats(H, 4, 2.0f);
    const size_t esize = c.kv == RA_F32 ? 4 : 2;
    void *k16 = k, *v16 = v;
    if (c.kv == RA_BF16) {
        uint16_t *a = malloc((size_t)(B * S * Hkv * D) * 2), *b = malloc((size_t)(B * S * Hkv * D) * 2);
        for (int64_t i = 0; i < B * S * Hkv * D; i++) a[i] = to_bf16(k[i]), b[i] = to_bf16(v[i]);
        k16 = a, v16 = b;
    }
    ra_attention_options o = ra_attention_options_init();
    o.softcap = c.softcap;
    o.window = c.window;
    o.chunk = c.chunk;
    o.sinks = c.sinks ? sinks : NULL;
    uint8_t *pad = malloc((size_t)(B * S));
    int64_t cu[5], n_documents;
    case_masks(&c, pad, cu, &n_documents, &o);
    /* the oracle: the whole sequence in one process */
    float *out = malloc((size_t)(B * S * H * D) * sizeof *out), *lse = malloc((size_t)(B * H * S) * 4);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D), to = ra_tensor_4d(out, RA_F32, B, S, H, D);
    ra_tensor tk = ra_tensor_4d(k16, c.kv, B, S, Hkv, D), tv = ra_tensor_4d(v16, c.kv, B, S, Hkv, D);
    ra_status st = ra_attention_forward_lse(ctx, &to, lse, &tq, &tk, &tv, &o);
    CHECK(st == RA_OK, "single process: %s", ra_last_error());
    /* this rank's shard */
    int64_t start[2], count[2];
    st = ra_mpi_zigzag(S, size, rank, start, count);
    CHECK(st == RA_OK, "zigzag: %s", ra_mpi_last_error());
    const int64_t n = count[0] + count[1];
    int64_t *ids = malloc((size_t)(B * n) * sizeof *ids);
    st = ra_mpi_zigzag_positions(S, size, rank, B, n, ids);
    CHECK(st == RA_OK, "positions: %s", ra_mpi_last_error());
    float *lq = shard_rows(q, B, S, H, D, 4, ids, n);
    void *lk = shard_rows(k16, B, S, Hkv, D, esize, ids, n);
    void *lv = shard_rows(v16, B, S, Hkv, D, esize, ids, n);
    /* two runs, the second with two threads per rank */
    float *lout[2], *llse[2];
    for (int run = 0; run < 2; run++) {
        lout[run] = malloc((size_t)(B * n * H * D) * 4);
        llse[run] = malloc((size_t)(B * H * n) * 4);
        ra_tensor a = ra_tensor_4d(lq, RA_F32, B, n, H, D), y = ra_tensor_4d(lout[run], RA_F32, B, n, H, D);
        ra_tensor kk = ra_tensor_4d(lk, c.kv, B, n, Hkv, D), vv = ra_tensor_4d(lv, c.kv, B, n, Hkv, D);
        st = ra_mpi_attention(run ? ctx2 : ctx, MPI_COMM_WORLD, &y, llse[run], &a, &kk, &vv, S, &o);
        CHECK(st == RA_OK, "ring (B %lld S %lld H %lld Hkv %lld D %lld): %s", (long long)B,
              (long long)S, (long long)H, (long long)Hkv, (long long)D, ra_mpi_last_error());
    }
    const double ymax = max_abs(out, B * S * H * D), lmax = max_abs(lse, B * H * S);
    double worst = 0, worst_lse = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < n; s++)
            for (int64_t h = 0; h < H; h++) {
                for (int64_t d = 0; d < D; d++) {
                    double e = fabs(lout[0][((b * n + s) * H + h) * D + d] -
                                    out[((b * S + ids[s]) * H + h) * D + d]);
                    worst = e > worst || isnan(e) ? e : worst;
                }
                const float la = llse[0][(b * H + h) * n + s], lb = lse[(b * H + h) * S + ids[s]];
                double e = la == lb ? 0 : fabs(la - lb); /* padding rows: -Inf both */
                worst_lse = e > worst_lse || isnan(e) ? e : worst_lse;
            }
    CHECK(worst <= TOL * ymax && worst_lse <= TOL * lmax,
          "S %lld D %lld window %lld chunk %lld softcap %g sinks %d masks %d: out off by %.3g "
          "(max|y| %.3g), lse by %.3g (max|lse| %.3g)", (long long)S, (long long)D,
          (long long)c.window, (long long)c.chunk, c.softcap, c.sinks, c.masks, worst, ymax,
          worst_lse, lmax);
    CHECK(!memcmp(lout[0], lout[1], (size_t)(B * n * H * D) * 4) &&
              !memcmp(llse[0], llse[1], (size_t)(B * H * n) * 4),
          "two runs (one and two threads a rank) differ");
    for (int run = 0; run < 2; run++) free(lout[run]), free(llse[run]);
    if (k16 != k) free(k16), free(v16);
    free(q), free(k), free(v), free(sinks), free(out), free(lse), free(ids), free(lq), free(lk),
        free(lv), free(pad);
}

/* The cases of the ring's forward and backward: GQA, uneven chunks, windows,
 * soft-cap, sinks (added once; dsinks on every rank), bf16 K/V (dK/dV in
 * float32), chunked attention, and the whole sequence's padding, documents
 * and dropout. */
static const ring_case ring_cases[] = {
    {1, 64, 4, 4, 64, RA_F32, 0, 0, 0, 0, 0},
    {2, 37, 8, 2, 72, RA_F32, 0, 0, 0, 0, 0},     /* uneven chunks, GQA */
    {1, 300, 4, 1, 80, RA_F32, 0, 0, 0, 0, 0},    /* chunks of several flash tiles */
    {1, 8 * 4 + 3, 4, 2, 16, RA_F32, 30.0, 0, 0, 0, 0},
    {1, 150, 4, 2, 32, RA_F32, 0, 5, 0, 0, 0},    /* a window inside a chunk */
    {1, 150, 4, 2, 32, RA_F32, 0, 40, 0, 0, 0},   /* across chunks */
    {2, 91, 6, 3, 24, RA_F32, 0, 0, 1, 0, 0},     /* sinks */
    {1, 120, 8, 2, 72, RA_F32, 20.0, 33, 1, 0, 0},
    {1, 77, 4, 2, 64, RA_BF16, 0, 0, 0, 0, 0},
    {1, 150, 4, 2, 32, RA_F32, 0, 0, 0, 16, 0},   /* chunked attention, C 16 */
    {2, 203, 4, 1, 24, RA_F32, 0, 0, 1, 70, 0},   /* C 70: across the shards */
    {1, 120, 8, 2, 72, RA_F32, 20.0, 25, 1, 40, 0},
    {2, 150, 4, 2, 32, RA_F32, 0, 0, 1, 0, 1},     /* padding (dsinks without its rows) */
    {2, 203, 4, 1, 24, RA_F32, 15.0, 0, 0, 70, 1}, /* chunks from each row's padding */
    {2, 91, 6, 3, 24, RA_BF16, 0, 30, 1, 0, 1},
    {1, 150, 4, 2, 32, RA_F32, 0, 0, 1, 0, 2},     /* packed documents */
    {1, 150, 4, 2, 32, RA_F32, 0, 30, 1, 0, 2},
    {1, 203, 4, 1, 24, RA_F32, 20.0, 40, 0, 0, 2},
    {2, 150, 4, 2, 32, RA_F32, 0, 0, 1, 0, 3},     /* dropout */
    {1, 203, 4, 1, 24, RA_F32, 15.0, 60, 0, 70, 3},
    {1, 203, 4, 1, 24, RA_BF16, 15.0, 60, 0, 70, 3},
};

static void test_ring(void)
{
    for (size_t i = 0; i < sizeof ring_cases / sizeof ring_cases[0]; i++)
        ring_check(ring_cases[i]);
    /* the shortest sequences: S = P (some chunks empty), 2P + 1 */
    ring_case tiny = {1, size, 2, 1, 8, RA_F32, 0, 0, 0, 0, 0};
    ring_check(tiny);
    tiny.S = 2 * size + 1;
    ring_check(tiny);
}

/* The worst |a - b| over the rank's rows of a [B, n, heads, D] against the
 * whole sequence's b [B, S, heads, D] at positions ids. */
static double shard_error(const float *a, const float *b, int64_t B, int64_t n, int64_t S,
                          int64_t heads, int64_t D, const int64_t *ids)
{
    double worst = 0;
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t s = 0; s < n; s++)
            for (int64_t i = 0; i < heads * D; i++) {
                double e = fabs(a[(bb * n + s) * heads * D + i] - b[(bb * S + ids[s]) * heads * D + i]);
                worst = e > worst || isnan(e) ? e : worst;
            }
    return worst;
}

/* ra_mpi_attention_backward against ra_attention_backward over the whole
 * sequence: the rank's rows of dq, dk and dv and every rank's dsinks. */
static void ring_backward_check(ring_case c)
{
    const int64_t B = c.B, S = c.S, H = c.H, Hkv = c.Hkv, D = c.D;
    const int64_t nq = B * S * H * D, nk = B * S * Hkv * D;
    float *q = random_floats(nq, 41, 1.0f), *k = random_floats(nk, 42, 1.0f);
    float *v = random_floats(nk, 43, 1.0f), *dout = random_floats(nq, 44, 1.0f);
    float *sinks = random_floats(H, 45, 2.0f), dsinks[3][16];
    const size_t esize = c.kv == RA_F32 ? 4 : 2;
    void *k16 = k, *v16 = v; /* k and v as c.kv */
    if (c.kv == RA_BF16) {
        uint16_t *a16 = malloc((size_t)nk * 2), *b16 = malloc((size_t)nk * 2);
        for (int64_t i = 0; i < nk; i++) a16[i] = to_bf16(k[i]), b16[i] = to_bf16(v[i]);
        k16 = a16, v16 = b16;
    }
    ra_attention_options o = ra_attention_options_init();
    o.softcap = c.softcap;
    o.window = c.window;
    o.chunk = c.chunk;
    o.sinks = c.sinks ? sinks : NULL;
    uint8_t *pad = malloc((size_t)(B * S));
    int64_t cu[5], n_documents;
    case_masks(&c, pad, cu, &n_documents, &o);
    /* the oracle: the whole sequence in one process */
    float *out = malloc((size_t)nq * 4), *lse = malloc((size_t)(B * H * S) * 4);
    float *dq = malloc((size_t)nq * 4), *dk = malloc((size_t)nk * 4), *dv = malloc((size_t)nk * 4);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D), to = ra_tensor_4d(out, RA_F32, B, S, H, D);
    ra_tensor tk = ra_tensor_4d(k16, c.kv, B, S, Hkv, D), tv = ra_tensor_4d(v16, c.kv, B, S, Hkv, D);
    ra_tensor tdo = ra_tensor_4d(dout, RA_F32, B, S, H, D), tdq = ra_tensor_4d(dq, RA_F32, B, S, H, D);
    ra_tensor tdk = ra_tensor_4d(dk, RA_F32, B, S, Hkv, D), tdv = ra_tensor_4d(dv, RA_F32, B, S, Hkv, D);
    ra_status st = ra_attention_forward_lse(ctx, &to, lse, &tq, &tk, &tv, &o);
    o.dsinks = c.sinks ? dsinks[0] : NULL;
    if (st == RA_OK) st = ra_attention_backward(ctx, &tdq, &tdk, &tdv, &tdo, &tq, &tk, &tv, &to, lse, &o);
    CHECK(st == RA_OK, "single process: %s", ra_last_error());
    /* this rank's shard: the forward's out and lse, then the backward twice
     * (one thread a rank, two) */
    int64_t start[2], count[2];
    ra_mpi_zigzag(S, size, rank, start, count);
    const int64_t n = count[0] + count[1];
    int64_t *ids = malloc((size_t)(B * n) * sizeof *ids);
    ra_mpi_zigzag_positions(S, size, rank, B, n, ids);
    float *lq = shard_rows(q, B, S, H, D, 4, ids, n), *ldo = shard_rows(dout, B, S, H, D, 4, ids, n);
    void *lk = shard_rows(k16, B, S, Hkv, D, esize, ids, n);
    void *lv = shard_rows(v16, B, S, Hkv, D, esize, ids, n);
    float *lout = malloc((size_t)(B * n * H * D) * 4), *llse = malloc((size_t)(B * H * n) * 4);
    ra_tensor a = ra_tensor_4d(lq, RA_F32, B, n, H, D), y = ra_tensor_4d(lout, RA_F32, B, n, H, D);
    ra_tensor kk = ra_tensor_4d(lk, c.kv, B, n, Hkv, D), vv = ra_tensor_4d(lv, c.kv, B, n, Hkv, D);
    ra_tensor dy = ra_tensor_4d(ldo, RA_F32, B, n, H, D);
    o.dsinks = NULL;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &y, llse, &a, &kk, &vv, S, &o);
    CHECK(st == RA_OK, "ring forward: %s", ra_mpi_last_error());
    float *g[2][3];
    for (int run = 0; run < 2; run++) {
        for (int i = 0; i < 3; i++) g[run][i] = malloc((size_t)(B * n * (i ? Hkv : H) * D) * 4);
        ra_tensor gq = ra_tensor_4d(g[run][0], RA_F32, B, n, H, D);
        ra_tensor gk = ra_tensor_4d(g[run][1], RA_F32, B, n, Hkv, D);
        ra_tensor gv = ra_tensor_4d(g[run][2], RA_F32, B, n, Hkv, D);
        o.dsinks = c.sinks ? dsinks[1 + run] : NULL;
        st = ra_mpi_attention_backward(run ? ctx2 : ctx, MPI_COMM_WORLD, &gq, &gk, &gv, &dy, &a, &kk,
                                       &vv, &y, llse, S, &o);
        CHECK(st == RA_OK, "ring backward (B %lld S %lld H %lld Hkv %lld D %lld): %s", (long long)B,
              (long long)S, (long long)H, (long long)Hkv, (long long)D, ra_mpi_last_error());
    }
    /* float32 sums in another order (per block, then across ranks; dq and
     * dK/dV over the ring's blocks): within TOL of the largest gradient */
    const double mq = max_abs(dq, nq), mk = max_abs(dk, nk), mv = max_abs(dv, nk);
    const double eq = shard_error(g[0][0], dq, B, n, S, H, D, ids);
    const double ek = shard_error(g[0][1], dk, B, n, S, Hkv, D, ids);
    const double ev = shard_error(g[0][2], dv, B, n, S, Hkv, D, ids);
    CHECK(eq <= TOL * mq && ek <= TOL * mk && ev <= TOL * mv,
          "S %lld D %lld window %lld chunk %lld softcap %g sinks %d masks %d: dq off by %.3g (max "
          "%.3g), dk by %.3g (max %.3g), dv by %.3g (max %.3g)", (long long)S, (long long)D,
          (long long)c.window, (long long)c.chunk, c.softcap, c.sinks, c.masks, eq, mq, ek, mk, ev,
          mv);
    for (int i = 0; i < 3; i++)
        CHECK(!memcmp(g[0][i], g[1][i], (size_t)(B * n * (i ? Hkv : H) * D) * 4),
              "gradient %d: two runs (one and two threads a rank) differ", i);
    if (c.sinks) {
        const double ms = max_abs(dsinks[0], H), es = shard_error(dsinks[1], dsinks[0], 1, 1, 1, H, 1,
                                                                 (const int64_t[]){0});
        /* double sums in another order, rounded once to float32, of terms
         * from out and lse that a shard's short blocks take from the decode
         * kernel (other float32 sums than the oracle's tiles, each within a
         * few ulps): 4 TOL (1.1 TOL seen, 3 ranks, the ASan build) */
        CHECK(es <= 4 * TOL * ms, "dsinks off by %.3g (max %.3g)", es, ms);
        CHECK(!memcmp(dsinks[1], dsinks[2], (size_t)H * 4), "dsinks: two runs differ");
        float first[16];
        memcpy(first, dsinks[1], (size_t)H * 4);
        MPI_Bcast(first, (int)H, MPI_FLOAT, 0, MPI_COMM_WORLD);
        CHECK(!memcmp(first, dsinks[1], (size_t)H * 4), "rank %d's dsinks differ from rank 0's", rank);
    }
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 3; i++) free(g[run][i]);
    if (k16 != k) free(k16), free(v16);
    free(q), free(k), free(v), free(dout), free(sinks), free(out), free(lse), free(dq), free(dk),
        free(dv), free(ids), free(lq), free(ldo), free(lk), free(lv), free(lout), free(llse),
        free(pad);
}

static void test_ring_backward(void)
{
    for (size_t i = 0; i < sizeof ring_cases / sizeof ring_cases[0]; i++)
        ring_backward_check(ring_cases[i]);
    /* the shortest sequences: S = P (some chunks empty), 2P + 1 */
    ring_case tiny = {1, size, 2, 1, 8, RA_F32, 0, 0, 1, 0, 0};
    ring_backward_check(tiny);
    tiny.S = 2 * size + 1;
    ring_backward_check(tiny);
}

/* With P > 1, every rank's sentence names the argument the ranks disagree
 * on and the values: needle, with %d the last rank. */
static void expect_names(const char *needle, const char *what)
{
    char want[256];
    snprintf(want, sizeof want, needle, size - 1);
    CHECK(size == 1 || strstr(ra_mpi_last_error(), want) != NULL, "%s: \"%s\" does not say "
          "\"%s\"", what, ra_mpi_last_error(), want);
}

/* ra_mpi_attention_backward with arguments bad on one rank: every rank
 * returns an error, none hangs. */
static void ring_backward_errors(void)
{
    const int64_t B = 1, H = 2, D = 8, S = 4 * size + 1;
    int64_t start[2], count[2];
    ra_mpi_zigzag(S, size, rank, start, count);
    const int64_t n = count[0] + count[1], m = B * n * H * D;
    float *x = random_floats(8 * m + B * H * n, 51, 1);
    float *lse = x + 8 * m;
    ra_tensor t[8]; /* dq, dk, dv, dout, q, k, v, out */
    for (int i = 0; i < 8; i++) t[i] = ra_tensor_4d(x + i * m, RA_F32, B, n, H, D);
    ra_tensor out = t[7];
    ra_status st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &out, lse, &t[4], &t[5], &t[6], S, NULL);
    CHECK(st == RA_OK, "forward: %s", ra_mpi_last_error());
#define BACKWARD(comm, dq, dk, dout, seq, opts)                                                \
    ra_mpi_attention_backward(ctx, comm, dq, dk, &t[2], dout, &t[4], &t[5], &t[6], &t[7], lse, \
                              seq, opts)
    st = BACKWARD(MPI_COMM_NULL, &t[0], &t[1], &t[3], S, NULL);
    CHECK(st == RA_ERR_NULL, "MPI_COMM_NULL: %d", (int)st);
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &t[3], S, NULL);
    CHECK(st == RA_OK, "good arguments: %d (%s)", (int)st, ra_mpi_last_error());
    /* the last rank's NULL dout; rank 0's dk of the wrong length */
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], rank == size - 1 ? NULL : &t[3], S, NULL);
    CHECK(st == RA_ERR_NULL, "the last rank's NULL dout: %d (%s)", (int)st, ra_mpi_last_error());
    ra_tensor short_dk = t[1];
    short_dk.shape[1] = rank == 0 ? n - 1 : n;
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &short_dk, &t[3], S, NULL);
    CHECK(st == RA_ERR_SHAPE, "rank 0's short dk: %d (%s)", (int)st, ra_mpi_last_error());
    /* the last rank's dq of another D, dout in bf16 */
    ra_tensor odd = t[0];
    odd.shape[3] = rank == size - 1 ? D - 1 : D;
    st = BACKWARD(MPI_COMM_WORLD, &odd, &t[1], &t[3], S, NULL);
    CHECK(st == RA_ERR_SHAPE, "the last rank's dq D: %d (%s)", (int)st, ra_mpi_last_error());
    odd = t[3];
    if (rank == size - 1) odd.dtype = RA_BF16;
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &odd, S, NULL);
    CHECK(st == RA_ERR_DTYPE, "the last rank's bf16 dout: %d (%s)", (int)st, ra_mpi_last_error());
    /* the last rank's seq; rank 0's dq stride; rank 0's dq over its q */
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &t[3], rank == size - 1 ? S + 2 * size : S, NULL);
    CHECK(size == 1 ? st != RA_OK : st == RA_ERR_SHAPE, "one rank's seq: %d (%s)", (int)st,
          ra_mpi_last_error());
    ra_tensor bad_dq = t[0];
    bad_dq.stride[3] = rank == 0 ? 2 : 1;
    st = BACKWARD(MPI_COMM_WORLD, &bad_dq, &t[1], &t[3], S, NULL);
    CHECK(st == RA_ERR_ARGUMENT, "rank 0's dq stride: %d (%s)", (int)st, ra_mpi_last_error());
    /* the last rank's dk is its dq, then its dv */
    st = BACKWARD(MPI_COMM_WORLD, &t[0], rank == size - 1 ? &t[0] : &t[1], &t[3], S, NULL);
    CHECK(st == RA_ERR_ARGUMENT, "the last rank's dk over its dq: %d (%s)", (int)st,
          ra_mpi_last_error());
    st = BACKWARD(MPI_COMM_WORLD, &t[0], rank == size - 1 ? &t[2] : &t[1], &t[3], S, NULL);
    CHECK(st == RA_ERR_ARGUMENT, "the last rank's dk over its dv: %d (%s)", (int)st,
          ra_mpi_last_error());
    /* rank 0's chunked attention differs */
    ra_attention_options o = ra_attention_options_init();
    o.chunk = rank == 0 ? 5 : 0;
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &t[3], S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "rank 0's chunk: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("chunk is 5 on rank 0 and 0 on rank 1", "rank 0's chunk");
    /* rank 0 asks for dropout, the last rank for another seed; the last
     * rank for dsinks alone */
    o = ra_attention_options_init();
    o.dropout = rank == 0 ? 0.1f : 0.0f;
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &t[3], S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "rank 0's dropout: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("the ranks disagree on the call: dropout is 0.1 on rank 0 and 0 on rank 1",
                 "rank 0's dropout");
    /* seeds 2^63 and 2^63 + 1: the same but for the last bit */
    o.dropout = 0.1f;
    o.seed = (UINT64_C(1) << 63) + (rank == size - 1);
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &t[3], S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "the last rank's seed: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("seed is 9223372036854775808 on rank 0 and 9223372036854775809 on rank %d",
                 "the last rank's seed");
    o.dropout = 0.1f;
    o.seed = rank == size - 1 ? 2 : 1;
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &t[3], S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "the last rank's seed: %d (%s)", (int)st,
          ra_mpi_last_error());
    const float sinks[2] = {0.5f, -1.0f};
    float dsinks[2];
    o = ra_attention_options_init();
    o.sinks = sinks;
    o.dsinks = rank == size - 1 ? dsinks : NULL;
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &t[3], S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "the last rank's dsinks: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("dsinks is NULL on rank 0 and set on rank %d", "the last rank's dsinks");
    /* dsinks inside dq (the last rank) or on the sinks (rank 0): refused everywhere */
    o.dsinks = rank == size - 1 ? (float *)t[0].data : rank == 0 ? (float *)(void *)sinks : dsinks;
    st = BACKWARD(MPI_COMM_WORLD, &t[0], &t[1], &t[3], S, &o);
    CHECK(st == RA_ERR_ARGUMENT, "dsinks on dq or sinks: %d (%s)", (int)st, ra_mpi_last_error());
#undef BACKWARD
    free(x);
}

/* The positions of all ranks cover 0 .. S - 1 once each. */
static void test_layout(void)
{
    for (int64_t S = size; S < 4 * size + 3; S++) {
        int64_t start[2], count[2];
        ra_status st = ra_mpi_zigzag(S, size, rank, start, count);
        CHECK(st == RA_OK, "zigzag %lld: %s", (long long)S, ra_mpi_last_error());
        const int64_t n = count[0] + count[1];
        CHECK(n >= 1, "S %lld: rank %d holds no token", (long long)S, rank);
        int64_t *ids = malloc((size_t)n * sizeof *ids), *seen = calloc((size_t)S, sizeof *seen);
        ra_mpi_zigzag_positions(S, size, rank, 1, n, ids);
        for (int64_t i = 0; i < n; i++) seen[ids[i]]++;
        MPI_Allreduce(MPI_IN_PLACE, seen, (int)S, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        for (int64_t i = 0; i < S; i++) CHECK(seen[i] == 1, "S %lld: position %lld held %lld times",
                                              (long long)S, (long long)i, (long long)seen[i]);
        free(ids), free(seen);
    }
    int64_t start[2], count[2];
    CHECK(ra_mpi_zigzag(size - 1, size, rank, start, count) == RA_ERR_SIZE, "S < P accepted");
    CHECK(ra_mpi_zigzag(8, size, size, start, count) == RA_ERR_ARGUMENT, "rank P accepted");
}

/* RoPE at the rank's positions (ra_mpi_zigzag_positions as ra_positions.ids)
 * gives the rows of the whole sequence rotated at 0 .. S - 1, bit for bit. */
static void test_rope_positions(void)
{
    const int64_t B = 2, S = 4 * size + 3, H = 3, D = 16;
    float *x = random_floats(B * S * H * D, 31, 1.0f);
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope = NULL;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope: %s", ra_last_error());
    int64_t start[2], count[2];
    ra_mpi_zigzag(S, size, rank, start, count);
    const int64_t n = count[0] + count[1];
    int64_t *ids = malloc((size_t)(B * n) * sizeof *ids);
    ra_mpi_zigzag_positions(S, size, rank, B, n, ids);
    float *local = shard_rows(x, B, S, H, D, 4, ids, n);
    ra_positions at = {.struct_size = sizeof at, .ids = ids};
    ra_tensor tl = ra_tensor_4d(local, RA_F32, B, n, H, D);
    CHECK(ra_rope_apply(ctx, rope, &tl, &tl, &at, RA_FORWARD) == RA_OK, "local: %s", ra_last_error());
    CHECK(ra_rope_apply_f32(ctx, rope, x, B, S, H, 0) == RA_OK, "whole: %s", ra_last_error());
    float *expect = shard_rows(x, B, S, H, D, 4, ids, n);
    CHECK(!memcmp(local, expect, (size_t)(B * n * H * D) * 4), "rotated at the rank's positions "
          "differs from the whole sequence's rows");
    ra_rope_destroy(rope);
    free(x), free(ids), free(local), free(expect);
}

/* A call made with arguments that fail on `bad` (a rank, or -1: all): every
 * rank must return an error, none hang. */
static void ring_errors(void)
{
    const int64_t B = 1, H = 2, D = 8, S = 4 * size + 1;
    int64_t start[2], count[2];
    ra_mpi_zigzag(S, size, rank, start, count);
    const int64_t n = count[0] + count[1];
    float *q = random_floats(B * n * H * D, 5, 1), *k = random_floats(B * n * H * D, 6, 1);
    float *v = random_floats(B * n * H * D, 7, 1), *out = malloc((size_t)(B * n * H * D) * 4);
    float *lse = malloc((size_t)(B * H * n) * 4);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, n, H, D), tk = ra_tensor_4d(k, RA_F32, B, n, H, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, B, n, H, D), to = ra_tensor_4d(out, RA_F32, B, n, H, D);
    ra_status st = ra_mpi_attention(ctx, MPI_COMM_NULL, &to, lse, &tq, &tk, &tv, S, NULL);
    CHECK(st == RA_ERR_NULL, "MPI_COMM_NULL: %d", (int)st);
    /* the last rank's seq disagrees: its shard's size or the signature */
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv,
                          rank == size - 1 ? S + 2 * size : S, NULL);
    CHECK(size == 1 ? st != RA_OK : st == RA_ERR_SHAPE, "one rank's seq: %d (%s)", (int)st,
          ra_mpi_last_error());
    /* one rank asks for dropout; one rank asks for the reference path */
    ra_attention_options o = ra_attention_options_init();
    o.dropout = rank == 0 ? 0.1f : 0.0f;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "rank 0's dropout: %d (%s)", (int)st,
          ra_mpi_last_error());
    o = ra_attention_options_init();
    o.path = rank == size - 1 ? RA_PATH_REFERENCE : RA_PATH_FLASH;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(st == RA_ERR_UNSUPPORTED, "the last rank's reference path: %d (%s)", (int)st,
          ra_mpi_last_error());
    /* one rank's chunked attention differs */
    o = ra_attention_options_init();
    o.chunk = rank == size - 1 ? 8 : 0;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "the last rank's chunk: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("chunk is 0 on rank 0 and 8 on rank %d", "the last rank's chunk");
    /* soft-cap 0 on some ranks, -0 on others: the same option (none) */
    o = ra_attention_options_init();
    o.softcap = rank % 2 ? -0.0 : 0.0;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(st == RA_OK, "softcap -0 and 0: %d (%s)", (int)st, ra_mpi_last_error());
    /* one rank's window differs: each rank's call is fine alone */
    o = ra_attention_options_init();
    o.window = rank == 0 ? 3 : 0;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "rank 0's window: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("window is 3 on rank 0 and 0 on rank 1", "rank 0's window");
    /* the last rank's scale, rank 0's softcap, the last rank's bf16 k and v */
    o = ra_attention_options_init();
    o.scale = rank == size - 1 ? 0.25 : 0.0;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "the last rank's scale: %d (%s)",
          (int)st, ra_mpi_last_error());
    expect_names("scale is 0 on rank 0 and 0.25 on rank %d", "the last rank's scale");
    o = ra_attention_options_init();
    o.softcap = rank == 0 ? 30.0 : 0.0;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    expect_names("softcap is 30 on rank 0 and 0 on rank 1", "rank 0's softcap");
    ra_tensor k16 = tk, v16 = tv; /* the first half of each f32 buffer's bytes */
    if (rank == size - 1 && size > 1) k16.dtype = v16.dtype = RA_BF16;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &k16, &v16, S, NULL);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "the last rank's bf16 k, v: %d (%s)",
          (int)st, ra_mpi_last_error());
    expect_names("the dtype of k and v is float32 on rank 0 and bfloat16 on rank %d",
                 "the last rank's bf16 k and v");
    /* one rank's NULL lse, one rank's k of the wrong length */
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, rank == size - 1 ? NULL : lse, &tq, &tk, &tv,
                          S, NULL);
    CHECK(st == RA_ERR_NULL, "the last rank's NULL lse: %d (%s)", (int)st, ra_mpi_last_error());
    ra_tensor short_k = tk;
    short_k.shape[1] = rank == 0 ? n - 1 : n;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &short_k, &tv, S, NULL);
    CHECK(st == RA_ERR_SHAPE, "rank 0's short k: %d (%s)", (int)st, ra_mpi_last_error());
    /* the last rank's out of another D, v of another length, k of another
     * dtype than v; rank 0's q in bf16 */
    ra_tensor odd = to;
    odd.shape[3] = rank == size - 1 ? D - 1 : D;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &odd, lse, &tq, &tk, &tv, S, NULL);
    CHECK(st == RA_ERR_SHAPE, "the last rank's out D: %d (%s)", (int)st, ra_mpi_last_error());
    odd = tv;
    odd.shape[1] = rank == size - 1 ? n - 1 : n;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &odd, S, NULL);
    CHECK(st == RA_ERR_SHAPE, "the last rank's short v: %d (%s)", (int)st, ra_mpi_last_error());
    odd = tk;
    if (rank == size - 1) odd.dtype = RA_BF16;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &odd, &tv, S, NULL);
    CHECK(st == RA_ERR_DTYPE, "the last rank's bf16 k: %d (%s)", (int)st, ra_mpi_last_error());
    odd = tq;
    if (rank == 0) odd.dtype = RA_BF16;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &odd, &tk, &tv, S, NULL);
    CHECK(st == RA_ERR_DTYPE, "rank 0's bf16 q: %d (%s)", (int)st, ra_mpi_last_error());
    /* one rank's out: a feature stride of 2, no data, lse inside it; one
     * rank's sink values */
    ra_tensor bad_out = to;
    bad_out.stride[3] = rank == 0 ? 2 : 1;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &bad_out, lse, &tq, &tk, &tv, S, NULL);
    CHECK(st == RA_ERR_ARGUMENT, "rank 0's out stride: %d (%s)", (int)st, ra_mpi_last_error());
    bad_out = to;
    if (rank == size - 1) bad_out.data = NULL;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &bad_out, lse, &tq, &tk, &tv, S, NULL);
    CHECK(st == RA_ERR_NULL, "the last rank's out data: %d (%s)", (int)st, ra_mpi_last_error());
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, rank == 0 ? out + 1 : lse, &tq, &tk, &tv, S,
                          NULL);
    CHECK(st == RA_ERR_ARGUMENT, "rank 0's lse in out: %d (%s)", (int)st, ra_mpi_last_error());
    const float sinks[2] = {rank == 0 ? -5.0f : 5.0f, 0.0f};
    o = ra_attention_options_init();
    o.sinks = sinks;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "rank 0's sinks: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("sinks differs on rank 1 from rank 0's", "rank 0's sinks");
    /* rank 0's padding differs in one byte, the last rank's documents; a
     * bad cu_seqlens (ending before S) on rank 0 alone */
    uint8_t pad[4 * 4 + 1];
    memset(pad, 1, sizeof pad);
    pad[S - 1] = rank == 0 ? 0 : 1;
    o = ra_attention_options_init();
    o.padding_mask = pad;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "rank 0's padding: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("padding_mask differs on rank 1 from rank 0's", "rank 0's padding");
    o.padding_mask = rank == 0 ? pad : NULL;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    expect_names("padding_mask is set on rank 0 and NULL on rank 1", "rank 0's padding alone");
    const int64_t cu[3] = {0, rank == size - 1 ? 2 : 3, S}, short_cu[2] = {0, S - 1};
    o = ra_attention_options_init();
    o.cu_seqlens = cu, o.n_documents = 2;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(size == 1 ? st == RA_OK : st == RA_ERR_SHAPE, "the last rank's documents: %d (%s)",
          (int)st, ra_mpi_last_error());
    expect_names("cu_seqlens differs on rank %d from rank 0's", "the last rank's documents");
    if (rank == 0) o.cu_seqlens = short_cu, o.n_documents = 1;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, S, &o);
    CHECK(st == RA_ERR_ARGUMENT, "rank 0's short documents: %d (%s)", (int)st,
          ra_mpi_last_error());
    /* the last rank's padding mask lies inside its out, with P > 1 rank
     * 0's inside its lse: refused on every rank */
    float *spare = malloc((size_t)(B * n * H * D) * 4);
    ra_tensor mine = to;
    uint8_t *mask = pad;
    if (rank == size - 1) mine.data = spare, mask = (uint8_t *)(void *)spare;
    else if (rank == 0) mask = (uint8_t *)(void *)lse;
    memset(mask, 1, (size_t)S);
    o = ra_attention_options_init();
    o.padding_mask = mask;
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &mine, lse, &tq, &tk, &tv, S, &o);
    CHECK(st == RA_ERR_ARGUMENT, "padding inside out or lse: %d (%s)", (int)st,
          ra_mpi_last_error());
    free(spare);
    /* sequences shorter than P, every rank alike */
    st = ra_mpi_attention(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, size - 1, NULL);
    CHECK(st == RA_ERR_SIZE, "S = P - 1: %d (%s)", (int)st, ra_mpi_last_error());
    free(q), free(k), free(v), free(out), free(lse);
}

typedef struct decode_case {
    int64_t B, H, Hkv, D, T;
    int64_t len[2], n_query[2];
    ra_dtype cache;
    double softcap;
    int64_t window;
    int sinks;
    int64_t chunk;
    int quantize_q; /* ra_attention_options' (an RA_I8 cache's) */
} decode_case;

/* Appends tokens [from, from + n[b]) of each sequence of k, v [B, L, Hkv, D]
 * to cache, at their positions. */
static ra_status append(ra_kv_cache *cache, const ra_rope *rope, const float *k, const float *v,
                        int64_t B, int64_t L, int64_t Hkv, int64_t D, const int64_t *from,
                        const int64_t *n)
{
    int64_t most = 1;
    for (int64_t b = 0; b < B; b++) most = n[b] > most ? n[b] : most;
    float *kk = calloc((size_t)(B * most * Hkv * D), 4), *vv = calloc((size_t)(B * most * Hkv * D), 4);
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < n[b]; s++) {
            memcpy(kk + (b * most + s) * Hkv * D, k + (b * L + from[b] + s) * Hkv * D, (size_t)(Hkv * D) * 4);
            memcpy(vv + (b * most + s) * Hkv * D, v + (b * L + from[b] + s) * Hkv * D, (size_t)(Hkv * D) * 4);
        }
    ra_tensor tk = ra_tensor_4d(kk, RA_F32, B, most, Hkv, D), tv = ra_tensor_4d(vv, RA_F32, B, most, Hkv, D);
    ra_positions p = {.struct_size = sizeof p, .starts = from};
    ra_status st = ra_kv_cache_append(ctx, cache, rope, NULL, &tk, &tv, &p, n);
    free(kk), free(vv);
    return st;
}

static void decode_check(decode_case c)
{
    const int64_t B = c.B, H = c.H, Hkv = c.Hkv, D = c.D, T = c.T;
    const int64_t L = c.len[0] > c.len[1] ? c.len[0] : c.len[1];
    float *k = random_floats(B * L * Hkv * D, 11, 1.0f), *v = random_floats(B * L * Hkv * D, 12, 1.0f);
    float *q = random_floats(B * T * H * D, 13, 1.0f), *sinks = random_floats(H, 14, 2.0f);
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, &rc);
    CHECK(st == RA_OK, "rope: %s", ra_last_error());
    ra_attention_options o = ra_attention_options_init();
    o.softcap = c.softcap;
    o.window = c.window;
    o.chunk = c.chunk;
    o.sinks = c.sinks ? sinks : NULL;
    o.quantize_q = c.quantize_q;
    /* the oracle: one cache with every token */
    ra_kv_cache *whole = NULL, *shard = NULL;
    st = ra_kv_cache_create(&whole, B, L, Hkv, D, c.cache);
    int64_t zero[2] = {0, 0}, from[2], n[2];
    if (st == RA_OK) st = append(whole, rope, k, v, B, L, Hkv, D, zero, c.len);
    CHECK(st == RA_OK, "whole cache: %s", ra_last_error());
    float *ref = calloc((size_t)(B * T * H * D), 4), *ref_lse = calloc((size_t)(B * H * T), 4);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, T, H, D), tr = ra_tensor_4d(ref, RA_F32, B, T, H, D);
    st = ra_attention_decode_lse(ctx, whole, &tr, ref_lse, &tq, c.n_query, NULL, NULL, &o);
    CHECK(st == RA_OK, "single process: %s", ra_last_error());
    /* rank r's shard of sequence b: tokens [len r / P, len (r + 1) / P) */
    for (int64_t b = 0; b < B; b++) {
        from[b] = c.len[b] * rank / size;
        n[b] = c.len[b] * (rank + 1) / size - from[b];
    }
    st = ra_kv_cache_create(&shard, B, L, Hkv, D, c.cache);
    if (st == RA_OK) st = append(shard, rope, k, v, B, L, Hkv, D, from, n);
    CHECK(st == RA_OK, "shard: %s", ra_last_error());
    float *out[2], *lse[2];
    for (int run = 0; run < 2; run++) {
        out[run] = calloc((size_t)(B * T * H * D), 4);
        lse[run] = calloc((size_t)(B * H * T), 4);
        ra_tensor to = ra_tensor_4d(out[run], RA_F32, B, T, H, D);
        st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, shard, &to, lse[run], &tq, c.n_query, &o);
        CHECK(st == RA_OK, "sharded decode: %s", ra_mpi_last_error());
    }
    const double ymax = max_abs(ref, B * T * H * D), lmax = max_abs(ref_lse, B * H * T);
    double worst = 0, worst_lse = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < c.n_query[b]; t++)
            for (int64_t h = 0; h < H; h++) {
                for (int64_t d = 0; d < D; d++) {
                    int64_t i = ((b * T + t) * H + h) * D + d;
                    double e = fabs(out[0][i] - ref[i]);
                    worst = e > worst || isnan(e) ? e : worst;
                }
                int64_t i = (b * H + h) * T + t;
                double e = fabs(lse[0][i] - ref_lse[i]);
                worst_lse = e > worst_lse || isnan(e) ? e : worst_lse;
            }
    CHECK(worst <= TOL * ymax && worst_lse <= TOL * lmax,
          "decode (cache dtype %d, window %lld, chunk %lld, softcap %g, sinks %d, quantize_q %d): "
          "out off by %.3g (max|y| %.3g), lse by %.3g", (int)c.cache, (long long)c.window,
          (long long)c.chunk, c.softcap, c.sinks, c.quantize_q, worst, ymax, worst_lse);
    CHECK(!memcmp(out[0], out[1], (size_t)(B * T * H * D) * 4), "two runs differ");
    /* the same bits on every rank: rank 0's, broadcast */
    float *first = malloc((size_t)(B * T * H * D) * 4);
    memcpy(first, out[0], (size_t)(B * T * H * D) * 4);
    MPI_Bcast(first, (int)(B * T * H * D), MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(first, out[0], (size_t)(B * T * H * D) * 4), "rank %d's out differs from rank 0's",
          rank);
    free(first);
    for (int run = 0; run < 2; run++) free(out[run]), free(lse[run]);
    ra_kv_cache_destroy(whole);
    ra_kv_cache_destroy(shard);
    ra_rope_destroy(rope);
    free(k), free(v), free(q), free(sinks), free(ref), free(ref_lse);
}

static void test_decode(void)
{
    const decode_case cases[] = {
        {2, 8, 2, 64, 3, {50, 37}, {3, 1}, RA_F32, 0, 0, 0, 0, 0},
        {1, 4, 4, 72, 1, {1500, 0}, {1, 0}, RA_F32, 0, 0, 0, 0, 0}, /* over several decode chunks */
        {2, 4, 1, 80, 4, {2, 9}, {2, 4}, RA_F32, 0, 0, 0, 0, 0},    /* shards of no token; queries
                                                                    across ranks */
        {2, 8, 2, 32, 2, {60, 45}, {2, 2}, RA_F32, 0, 7, 0, 0, 0},  /* a window */
        {2, 8, 2, 32, 2, {60, 45}, {2, 1}, RA_F32, 25.0, 0, 1, 0, 0},
        {1, 8, 2, 64, 2, {70, 0}, {2, 0}, RA_BF16, 0, 20, 1, 0, 0},
        {1, 4, 2, 32, 2, {30, 0}, {2, 0}, RA_F32, 0, 12, 0, 0, 0},  /* windows across shards */
        {1, 4, 2, 32, 3, {30, 0}, {3, 0}, RA_F32, 0, 18, 0, 0, 0},
        {2, 4, 2, 32, 3, {31, 22}, {3, 2}, RA_F32, 0, 0, 0, 8, 0}, /* chunks across shards */
        {1, 4, 2, 32, 5, {45, 0}, {5, 0}, RA_F32, 0, 6, 1, 7, 0},  /* and a window, sinks */
        /* quantize_q: each rank quantizes the same query rows, so its scores
         * are the whole cache's; D 96 is 64 bytes on VNNI and a tail */
        {2, 8, 2, 64, 3, {50, 37}, {3, 1}, RA_I8, 0, 0, 0, 0, 1},
        {1, 4, 4, 96, 2, {1500, 0}, {2, 0}, RA_I8, 25.0, 0, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) decode_check(cases[i]);
}

static void decode_errors(void)
{
    const int64_t B = 1, H = 2, Hkv = 1, D = 16, T = 2;
    ra_kv_cache *cache = NULL, *window = NULL;
    ra_kv_cache_create(&cache, B, 8, Hkv, D, RA_F32);
    ra_kv_cache_create_window(&window, B, 4, 2, Hkv, D, RA_F32);
    float *q = random_floats(B * T * H * D, 21, 1), *out = calloc((size_t)(B * T * H * D), 4);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, T, H, D), to = ra_tensor_4d(out, RA_F32, B, T, H, D);
    ra_status st = ra_mpi_attention_decode(ctx, MPI_COMM_NULL, cache, &to, NULL, &tq, NULL, NULL);
    CHECK(st == RA_ERR_NULL, "MPI_COMM_NULL: %d", (int)st);
    /* empty caches: 2 queries, 0 tokens */
    st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, cache, &to, NULL, &tq, NULL, NULL);
    CHECK(st == RA_ERR_SIZE, "queries past the tokens: %d (%s)", (int)st, ra_mpi_last_error());
    /* the last rank's window cache */
    st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, rank == size - 1 ? window : cache, &to, NULL,
                                 &tq, NULL, NULL);
    CHECK(st == RA_ERR_UNSUPPORTED, "a window cache: %d (%s)", (int)st, ra_mpi_last_error());
    /* rank 0's n_query differs */
    int64_t nq = rank == 0 ? 1 : 2;
    st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, cache, &to, NULL, &tq, &nq, NULL);
    CHECK(size == 1 ? st == RA_ERR_SIZE : st == RA_ERR_SHAPE, "rank 0's n_query: %d (%s)", (int)st,
          ra_mpi_last_error());
    expect_names("n_query differs on rank 1 from rank 0's", "rank 0's n_query");
    /* rank 0's sink values differ; rank 0's out has a feature stride of 2 */
    const float sinks[2] = {rank == 0 ? -5.0f : 5.0f, 0.0f};
    ra_attention_options o = ra_attention_options_init();
    o.sinks = sinks;
    st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, cache, &to, NULL, &tq, NULL, &o);
    CHECK(size == 1 ? st == RA_ERR_SIZE : st == RA_ERR_SHAPE, "rank 0's sinks: %d (%s)", (int)st,
          ra_mpi_last_error());
    ra_tensor bad_out = to;
    bad_out.stride[3] = rank == 0 ? 2 : 1;
    st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, cache, &bad_out, NULL, &tq, NULL, NULL);
    CHECK(st == RA_ERR_ARGUMENT, "rank 0's out stride: %d (%s)", (int)st, ra_mpi_last_error());
    o = ra_attention_options_init();
    o.chunk = rank == 0 ? 4 : 0; /* (an empty cache: RA_ERR_SIZE alone) */
    st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, cache, &to, NULL, &tq, NULL, &o);
    CHECK(size == 1 ? st == RA_ERR_SIZE : st == RA_ERR_SHAPE, "rank 0's chunk: %d (%s)", (int)st,
          ra_mpi_last_error());
    /* rank 0's quantize_q on int8 caches: each rank's call is fine alone */
    ra_kv_cache *i8 = NULL;
    ra_kv_cache_create(&i8, B, 8, Hkv, D, RA_I8);
    o = ra_attention_options_init();
    o.quantize_q = rank == 0;
    st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, i8, &to, NULL, &tq, NULL, &o);
    CHECK(size == 1 ? st == RA_ERR_SIZE : st == RA_ERR_SHAPE, "rank 0's quantize_q: %d (%s)",
          (int)st, ra_mpi_last_error());
    expect_names("quantize_q is 1 on rank 0 and 0 on rank 1", "rank 0's quantize_q");
    /* the last rank's quantize_q on an f32 cache: its own refusal, on every rank */
    o.quantize_q = rank == size - 1;
    st = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, cache, &to, NULL, &tq, NULL, &o);
    CHECK(st == RA_ERR_UNSUPPORTED, "the last rank's quantize_q on f32: %d (%s)", (int)st,
          ra_mpi_last_error());
    ra_kv_cache_destroy(i8);
    ra_kv_cache_destroy(cache);
    ra_kv_cache_destroy(window);
    free(q), free(out);
}

/* ---- a layer across the ranks (ra_mpi_layer_forward ...) ------------------ */

typedef struct layer_mpi_case {
    int64_t B, S, dim, H, Hkv, D, window, chunk;
    double softcap;
    int sinks, norms;
    ra_status expect; /* RA_OK, or every rank's refusal */
    int masks;        /* ring_case's: 1 padding, 2 documents (ra_mpi_sequence's) */
} layer_mpi_case;

/* The sharded training forward and backward against one
 * process's: each rank's dx rows, the weights' gradients summed over the
 * ranks (each rank's share of the tokens) and dsinks (the ring's, already
 * every rank's sum).  Tolerance 1e-5 of each tensor's max: the attention's
 * gradients are within TOL, and the weights' sums over tokens run in
 * another order (per rank, then across ranks). */
static void layer_grads_check(const ra_layer *layer, const layer_mpi_case *c, const float *x,
                              const int64_t *ids, int64_t n, const float *lx,
                              const ra_positions *pos, const ra_mpi_sequence *sq,
                              const ra_attention_options *o, const ra_attention_options *whole)
{
    const ra_layer_config *lc = ra_layer_get_config(layer);
    const int64_t B = c->B, S = c->S, dim = lc->dim, qd = c->H * c->D, kd = c->Hkv * c->D;
    const int64_t nn = c->norms ? c->D : 0; /* wq, wk, wv, wo, q_norm, k_norm, sinks: */
    const int64_t n_w[7] = {qd * dim, kd * dim, kd * dim, dim * qd, nn, nn, c->sinks ? c->H : 0};
    float *dy = random_floats(B * S * dim, 18, 1.0f), *ldy = shard_rows(dy, B, S, 1, dim, 4, ids, n);
    float *dx[2], *g[2][7], *y = malloc((size_t)(B * S * dim) * 4);
    for (int run = 0; run < 2; run++) {
        dx[run] = malloc((size_t)(B * S * dim) * 4);
        for (int i = 0; i < 7; i++) g[run][i] = calloc((size_t)n_w[i] + 1, 4);
        ra_layer_grads lg = ra_layer_grads_init();
        lg.dwq = g[run][0], lg.dwk = g[run][1], lg.dwv = g[run][2], lg.dwo = g[run][3];
        lg.dq_norm = nn ? g[run][4] : NULL, lg.dk_norm = nn ? g[run][5] : NULL;
        lg.dsinks = c->sinks ? g[run][6] : NULL;
        ra_layer_tape *tape = NULL;
        ra_status st = ra_layer_tape_create(&tape, layer, B * S);
        if (st == RA_OK)
            st = run ? ra_mpi_layer_forward_train(ctx2, sq, layer, y, tape, lx, B, n, pos, o)
                     : ra_layer_forward_train(ctx, layer, y, tape, x, B, S, NULL, whole);
        if (st == RA_OK)
            st = run ? ra_mpi_layer_backward(ctx2, sq, layer, dx[run], &lg, tape, ldy)
                     : ra_layer_backward(ctx, layer, dx[run], &lg, tape, dy);
        CHECK(st == RA_OK, "%s training: %s", run ? "sharded" : "one-process",
              run ? ra_mpi_last_error() : ra_last_error());
        ra_layer_tape_destroy(tape);
    }
    for (int i = 0; i < 6; i++) /* each rank's share: summed */
        MPI_Allreduce(MPI_IN_PLACE, g[1][i], (int)n_w[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double worst = 0, dmax = max_abs(dx[0], B * S * dim);
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < n; s++)
            for (int64_t d = 0; d < dim; d++) {
                double err = fabs(dx[1][(b * n + s) * dim + d] - dx[0][(b * S + ids[s]) * dim + d]);
                worst = err > worst || isnan(err) ? err : worst;
            }
    CHECK(worst <= 1e-5 * dmax, "S %lld: dx off by %.3g (max %.3g)", (long long)S, worst, dmax);
    for (int i = 0; i < 7; i++) {
        double gw = 0, gmax = max_abs(g[0][i], n_w[i]);
        for (int64_t j = 0; j < n_w[i]; j++) {
            double err = fabs(g[1][i][j] - g[0][i][j]);
            gw = err > gw || isnan(err) ? err : gw;
        }
        CHECK(gw <= 1e-5 * gmax, "S %lld: gradient %d off by %.3g (max %.3g)", (long long)S, i,
              gw, gmax);
    }
    for (int run = 0; run < 2; run++) {
        free(dx[run]);
        for (int i = 0; i < 7; i++) free(g[run][i]);
    }
    free(dy), free(ldy), free(y);
}

/* ra_mpi_layer_forward on each rank's zig-zag shard of x, at its global
 * positions, against ra_layer_forward over the whole
 * sequence in one process: within TOL of max|y| (the attention's f32 sums
 * in another order; the projections are the same per token). */
static void layer_check(layer_mpi_case c)
{
    const int64_t B = c.B, S = c.S, dim = c.dim, qd = c.H * c.D, kd = c.Hkv * c.D;
    float *wq = random_floats(qd * dim, 11, 0.3f), *wk = random_floats(kd * dim, 12, 0.3f);
    float *wv = random_floats(kd * dim, 13, 0.3f), *wo = random_floats(dim * qd, 14, 0.3f);
    float *sinks = random_floats(c.H, 15, 1.0f), *qn = random_floats(c.D, 16, 0.5f);
    float *x = random_floats(B * S * dim, 17, 1.0f);
    ra_rope_config rope = ra_rope_config_default(c.D);
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = dim, lc.n_heads = c.H, lc.n_kv_heads = c.Hkv, lc.head_dim = c.D, lc.rope = &rope;
    lc.window = c.window, lc.chunk = c.chunk, lc.softcap = c.softcap;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = wq, w.wk = wk, w.wv = wv, w.wo = wo;
    w.sinks = c.sinks ? sinks : NULL;
    w.q_norm = w.k_norm = c.norms ? qn : NULL;
    ra_layer *layer = NULL;
    ra_status st = ra_layer_create(&layer, &lc, &w);
    CHECK(st == RA_OK, "layer: %s", ra_last_error());
    float *y = malloc((size_t)(B * S * dim) * sizeof *y);
    ra_attention_options whole = ra_attention_options_init();
    uint8_t *pad = malloc((size_t)(B * S));
    int64_t cu[5], n_documents;
    const ring_case shape = {B, S, c.H, c.Hkv, c.D, RA_F32, 0, 0, 0, 0, c.masks};
    case_masks(&shape, pad, cu, &n_documents, &whole);
    st = ra_layer_forward(ctx, layer, y, x, B, S, NULL, &whole);
    CHECK(st == RA_OK, "single process: %s", ra_last_error());
    int64_t start[2], count[2];
    ra_mpi_zigzag(S, size, rank, start, count);
    const int64_t n = count[0] + count[1];
    int64_t *ids = malloc((size_t)(B * n) * sizeof *ids);
    ra_mpi_zigzag_positions(S, size, rank, B, n, ids);
    float *lx = shard_rows(x, B, S, 1, dim, 4, ids, n);
    float *ly = malloc((size_t)(B * n * dim) * sizeof *ly);
    ra_positions pos = ra_positions_start(0);
    pos.ids = ids;
    ra_mpi_sequence sq;
    st = ra_mpi_sequence_init(&sq, MPI_COMM_WORLD, S);
    CHECK(st == RA_OK, "sequence: %s", ra_mpi_last_error());
    sq.padding_mask = whole.padding_mask;
    sq.cu_seqlens = whole.cu_seqlens;
    sq.n_documents = whole.n_documents;
    ra_attention_options o = ra_attention_options_init();
    if (c.expect != RA_OK) o.path = RA_PATH_REFERENCE; /* the ring's refusal */
    st = ra_mpi_layer_forward(ctx2, &sq, layer, ly, lx, B, n, &pos, &o);
    CHECK(st == c.expect, "S %lld window %lld chunk %lld: %s (%s)", (long long)S,
          (long long)c.window, (long long)c.chunk, ra_status_string(st), ra_mpi_last_error());
    if (st == RA_OK && c.expect == RA_OK) {
        double worst = 0, ymax = max_abs(y, B * S * dim);
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < n; s++)
                for (int64_t d = 0; d < dim; d++) {
                    double err = fabs(ly[(b * n + s) * dim + d] - y[(b * S + ids[s]) * dim + d]);
                    worst = err > worst || isnan(err) ? err : worst;
                }
        CHECK(worst <= TOL * ymax, "S %lld window %lld softcap %g sinks %d norms %d: y off by "
              "%.3g (max|y| %.3g)", (long long)S, (long long)c.window, c.softcap, c.sinks,
              c.norms, worst, ymax);
        layer_grads_check(layer, &c, x, ids, n, lx, &pos, &sq, &o, &whole);
    }
    if (c.masks) { /* the call's own options: refused, the whole sequence's are sq's */
        ra_attention_options mine = o;
        mine.padding_mask = whole.padding_mask;
        mine.cu_seqlens = whole.cu_seqlens;
        mine.n_documents = whole.n_documents;
        const ra_status refused = ra_mpi_layer_forward(ctx2, &sq, layer, ly, lx, B, n, &pos,
                                                       &mine);
        CHECK(refused == RA_ERR_ARGUMENT && strstr(ra_mpi_last_error(), "sharded layer call"),
              "masks in the call's options: %s", ra_mpi_last_error());
    }
    if (st != RA_OK)
        CHECK(strstr(ra_mpi_last_error(), "reference"), "the sentence: %s", ra_mpi_last_error());
    ra_attention_options dropping = o; /* the layer's output dropout: refused */
    dropping.dropout = 0.1f;
    CHECK(ra_mpi_layer_forward(ctx2, &sq, layer, ly, lx, B, n, &pos, &dropping) ==
              RA_ERR_UNSUPPORTED && strstr(ra_mpi_last_error(), "dropout"),
          "dropout in a sharded call taken: %s", ra_mpi_last_error());
    ra_layer_destroy(layer);
    free(wq), free(wk), free(wv), free(wo), free(sinks), free(qn), free(x), free(y), free(ids),
        free(lx), free(ly), free(pad);
}

/* The sharded cached layer (every rank the same x, its own
 * cache): a prompt of P tokens, then one decode step per token, against
 * ra_layer_forward_cached on one cache in one process.  Tolerance: TOL of
 * max|y| for every cache dtype: the same stored keys (an 8-bit prompt
 * attends over its float32 keys in both), only the sums' order differs.
 * Every rank's y is the same bits. */
static void cached_check(layer_mpi_case c, ra_dtype dtype, int64_t P)
{
    const int64_t B = c.B, S = c.S, dim = c.dim, qd = c.H * c.D, kd = c.Hkv * c.D;
    float *wq = random_floats(qd * dim, 21, 0.3f), *wk = random_floats(kd * dim, 22, 0.3f);
    float *wv = random_floats(kd * dim, 23, 0.3f), *wo = random_floats(dim * qd, 24, 0.3f);
    float *sinks = random_floats(c.H, 25, 1.0f), *x = random_floats(B * S * dim, 27, 1.0f);
    ra_rope_config rope = ra_rope_config_default(c.D);
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = dim, lc.n_heads = c.H, lc.n_kv_heads = c.Hkv, lc.head_dim = c.D, lc.rope = &rope;
    lc.window = c.window, lc.softcap = c.softcap;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = wq, w.wk = wk, w.wv = wv, w.wo = wo;
    w.sinks = c.sinks ? sinks : NULL;
    ra_layer *layer = NULL;
    ra_status st = ra_layer_create(&layer, &lc, &w);
    CHECK(st == RA_OK, "layer: %s", ra_last_error());
    float *y[2], *xs = malloc((size_t)(B * P * dim) * sizeof *xs);
    ra_mpi_sequence sq;
    ra_mpi_sequence_init(&sq, MPI_COMM_WORLD, S);
    for (int sharded = 0; sharded < 2; sharded++) {
        y[sharded] = calloc((size_t)(B * S * dim), sizeof(float));
        ra_kv_cache *cache = NULL;
        st = ra_kv_cache_create(&cache, B, S, c.Hkv, c.D, dtype);
        CHECK(st == RA_OK, "cache: %s", ra_last_error());
        for (int64_t first = 0, n = P; st == RA_OK && first < S; first += n, n = 1) {
            float *ys = malloc((size_t)(B * n * dim) * sizeof *ys);
            for (int64_t b = 0; b < B; b++)
                memcpy(xs + b * n * dim, x + (b * S + first) * dim, (size_t)(n * dim) * 4);
            ra_positions pos = ra_positions_start(first);
            st = sharded ? ra_mpi_layer_forward_cached(ctx, &sq, layer, cache, ys, xs, B, n, &pos)
                         : ra_layer_forward_cached(ctx, layer, cache, ys, xs, B, n, &pos);
            CHECK(st == RA_OK, "%s step at %lld: %s", sharded ? "sharded" : "one process",
                  (long long)first, sharded ? ra_mpi_last_error() : ra_last_error());
            for (int64_t b = 0; b < B; b++)
                memcpy(y[sharded] + (b * S + first) * dim, ys + b * n * dim,
                       (size_t)(n * dim) * 4);
            free(ys);
        }
        ra_kv_cache_destroy(cache);
    }
    double worst = 0, ymax = max_abs(y[0], B * S * dim);
    for (int64_t i = 0; i < B * S * dim; i++) {
        double err = fabs(y[1][i] - y[0][i]);
        worst = err > worst || isnan(err) ? err : worst;
    }
    CHECK(worst <= TOL * ymax, "dtype %d S %lld prompt %lld window %lld sinks %d: y off by %.3g "
          "(max|y| %.3g)", (int)dtype, (long long)S, (long long)P, (long long)c.window, c.sinks,
          worst, ymax);
    /* the same bits on every rank: rank 0's y against each rank's */
    float *y0 = malloc((size_t)(B * S * dim) * sizeof *y0);
    memcpy(y0, y[1], (size_t)(B * S * dim) * 4);
    MPI_Bcast(y0, (int)(B * S * dim), MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(y0, y[1], (size_t)(B * S * dim) * 4), "rank %d's y differs from rank 0's", rank);
    ra_layer_destroy(layer);
    free(wq), free(wk), free(wv), free(wo), free(sinks), free(x), free(xs), free(y[0]),
        free(y[1]), free(y0);
}

/* No room on one rank: every rank refuses, and no cache changes.  The
 * last rank's cache holds exactly its share of a 4-token prompt, and stores
 * every later token: the next step finds it full. */
static void cached_full(void)
{
    const int64_t dim = 16, H = 2, D = 8, share = 4 - 4 * (size - 1) / size;
    float *wq = random_floats(H * D * dim, 31, 0.3f), *wo = random_floats(dim * H * D, 33, 0.3f);
    float *x = random_floats(4 * dim, 32, 1.0f), y[4 * 16];
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = dim, lc.n_heads = H, lc.head_dim = D;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = w.wk = w.wv = wq, w.wo = wo;
    ra_layer *layer = NULL;
    ra_kv_cache *cache = NULL;
    ra_mpi_sequence sq;
    ra_status st = ra_layer_create(&layer, &lc, &w);
    if (st == RA_OK) st = ra_kv_cache_create(&cache, 1, rank == size - 1 ? share : 8, H, D, RA_F32);
    if (st == RA_OK) st = ra_mpi_sequence_init(&sq, MPI_COMM_WORLD, 8);
    ra_positions pos = ra_positions_start(0);
    if (st == RA_OK) st = ra_mpi_layer_forward_cached(ctx, &sq, layer, cache, y, x, 1, 4, &pos);
    CHECK(st == RA_OK, "prompt: %s", ra_mpi_last_error());
    const int64_t held = ra_kv_cache_length(cache, 0);
    pos.start = 4;
    st = ra_mpi_layer_forward_cached(ctx, &sq, layer, cache, y, x, 1, 1, &pos);
    CHECK(st == RA_ERR_CACHE_FULL && ra_kv_cache_length(cache, 0) == held,
          "a step with no room: %s (length %lld, was %lld)", ra_status_string(st),
          (long long)ra_kv_cache_length(cache, 0), (long long)held);
    /* rank 0's sequence holds a padding mask: refused on every rank,
     * nothing stored */
    const uint8_t pad[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    sq.padding_mask = rank == 0 ? pad : NULL;
    st = ra_mpi_layer_forward_cached(ctx, &sq, layer, cache, y, x, 1, 1, &pos);
    char why[256];
    snprintf(why, sizeof why, "%s", ra_mpi_last_error()); /* before another call clears it */
    CHECK(st == RA_ERR_UNSUPPORTED && ra_kv_cache_length(cache, 0) == held &&
              strstr(why, "padding_mask or cu_seqlens in cached decoding"),
          "rank 0's sequence with padding: %s (%s)", ra_status_string(st), why);
    ra_kv_cache_destroy(cache);
    ra_layer_destroy(layer);
    free(wq), free(wo), free(x);
}

static void test_layer_cached(void)
{
    const layer_mpi_case plain = {1, 40, 32, 4, 2, 8, 0, 0, 0, 0, 0, RA_OK, 0};
    const layer_mpi_case masks = {2, 30, 48, 6, 2, 16, 5, 0, 20.0, 1, 0, RA_OK, 0};
    cached_check(plain, RA_F32, 12);
    cached_check(plain, RA_F32, 40);  /* all prompt */
    cached_check(masks, RA_F32, size); /* a prompt of one token a rank */
    cached_check(masks, RA_BF16, 9);
    cached_check(plain, RA_I8, 12);
    cached_check(masks, RA_F8E4M3, 9);
    cached_check(masks, RA_I8, 2 * size + 1);
}

/* A layer call that fails on one rank alone (its checks, before the ring)
 * fails on every rank, without a hang: the agreement between the phases. */
static void layer_one_rank_fails(void)
{
    const int64_t dim = 16, H = 2, D = 8, S = 4 * size;
    float *w = random_floats(H * D * dim, 61, 0.3f), *x = random_floats(S * dim, 62, 1.0f);
    float *y = malloc((size_t)(S * dim) * sizeof *y);
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = dim, lc.n_heads = H, lc.head_dim = D;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = lw.wk = lw.wv = lw.wo = w;
    ra_layer *layer = NULL;
    ra_layer_create(&layer, &lc, &lw);
    int64_t start[2], count[2], ids[64];
    ra_mpi_zigzag(S, size, rank, start, count);
    const int64_t n = count[0] + count[1];
    ra_mpi_zigzag_positions(S, size, rank, 1, n, ids);
    if (rank == size - 1) ids[0] = -1; /* RA_ERR_POSITION here alone */
    ra_positions pos = ra_positions_start(0);
    pos.ids = ids;
    ra_mpi_sequence sq;
    CHECK(ra_mpi_sequence_init(NULL, MPI_COMM_WORLD, S) == RA_ERR_NULL &&
              ra_mpi_sequence_init(&sq, MPI_COMM_WORLD, 0) == RA_ERR_SIZE,
          "ra_mpi_sequence_init's refusals: %s", ra_mpi_last_error());
    ra_mpi_sequence_init(&sq, MPI_COMM_WORLD, S);
    ra_attention_options o = ra_attention_options_init();
    ra_status st = ra_mpi_layer_forward(ctx, &sq, layer, y, x, 1, n, &pos, &o);
    CHECK(st != RA_OK, "forward: a bad position on the last rank gave RA_OK");
    ra_layer_tape *tape = NULL;
    ra_layer_tape_create(&tape, layer, rank == size - 1 ? n - 1 : n); /* too small there */
    ids[0] = rank == size - 1 ? 0 : ids[0];
    ra_mpi_zigzag_positions(S, size, rank, 1, n, ids);
    st = ra_mpi_layer_forward_train(ctx, &sq, layer, y, tape, x, 1, n, &pos, &o);
    CHECK(size == 1 ? st == RA_ERR_SIZE : st != RA_OK, "train: a short tape on the last rank "
          "gave %s", ra_status_string(st));
    ra_kv_cache *cache = NULL;
    ra_kv_cache_create(&cache, 1, S, H, D, RA_F32);
    st = ra_mpi_layer_forward_cached(ctx, &sq, layer, cache, y, x, 1, 2,
                                     rank == size - 1 ? NULL : &pos);
    CHECK(st != RA_OK && ra_kv_cache_length(cache, 0) == 0,
          "cached: no positions on the last rank gave %s", ra_status_string(st));
    ra_kv_cache_destroy(cache);
    /* the backward of a forward the last rank lacks (its tape empty) */
    ra_layer_tape *filled = NULL, *empty = NULL;
    ra_layer_tape_create(&filled, layer, n);
    ra_layer_tape_create(&empty, layer, n);
    st = ra_mpi_layer_forward_train(ctx, &sq, layer, y, filled, x, 1, n, &pos, &o);
    CHECK(st == RA_OK, "train: %s", ra_mpi_last_error());
    float *dw = calloc((size_t)(4 * H * D * dim), sizeof *dw), *dx = malloc((size_t)(S * dim) * 4);
    ra_layer_grads lg = ra_layer_grads_init();
    lg.dwq = dw, lg.dwk = dw + H * D * dim, lg.dwv = dw + 2 * H * D * dim;
    lg.dwo = dw + 3 * H * D * dim;
    st = ra_mpi_layer_backward(ctx, &sq, layer, dx, &lg, filled, x);
    CHECK(st == RA_OK, "backward: %s", ra_mpi_last_error());
    st = ra_mpi_layer_backward(ctx, &sq, layer, dx, &lg, rank == size - 1 ? empty : filled, x);
    CHECK(rank == size - 1 ? st == RA_ERR_ARGUMENT && strstr(ra_mpi_last_error(), "no forward")
                           : st == RA_ERR_ARGUMENT && strstr(ra_mpi_last_error(), "rank"),
          "backward: an empty tape on the last rank gave %s (%s)", ra_status_string(st),
          ra_mpi_last_error());
    ra_layer_tape_destroy(filled);
    ra_layer_tape_destroy(empty);
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(layer);
    /* a key bound counts the whole sequence's keys: refused on every rank */
    lc.max_keys = 4;
    ra_layer_create(&layer, &lc, &lw);
    st = ra_mpi_layer_forward(ctx, &sq, layer, y, x, 1, n, &pos, &o);
    CHECK(st == RA_ERR_UNSUPPORTED && strstr(ra_mpi_last_error(), "max_keys 4 across ranks"),
          "max_keys: %s", ra_mpi_last_error());
    ra_layer_destroy(layer);
    free(w), free(x), free(y), free(dw), free(dx);
}

static void test_layer_sharded(void)
{
    const layer_mpi_case cases[] = {
        {1, 64, 32, 4, 2, 8, 0, 0, 0, 0, 0, RA_OK, 0},
        {2, 45, 48, 6, 2, 16, 0, 0, 0, 1, 1, RA_OK, 0},  /* uneven chunks, sinks, q/k norms */
        {1, 90, 32, 4, 1, 16, 20, 0, 30.0, 0, 0, RA_OK, 0},  /* window, soft-cap */
        {1, 40, 32, 4, 2, 8, 0, 8, 0, 0, 0, RA_OK, 0},  /* chunked */
        {1, 40, 32, 4, 2, 8, 0, 0, 0, 0, 0, RA_ERR_UNSUPPORTED, 0}, /* every rank refuses */
        {2, 45, 48, 6, 2, 16, 0, 8, 0, 1, 0, RA_OK, 1},  /* padding (the sequence's), chunks */
        {1, 60, 32, 4, 2, 8, 0, 0, 0, 1, 0, RA_OK, 2},   /* packed documents */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) layer_check(cases[i]);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (ra_context_create(&ctx, 1) != RA_OK || ra_context_create(&ctx2, 2) != RA_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    RUN(test_layout());
    RUN(test_rope_positions());
    RUN(test_ring());
    RUN(ring_errors());
    RUN(test_ring_backward());
    RUN(ring_backward_errors());
    RUN(test_decode());
    RUN(decode_errors());
    RUN(test_layer_sharded());
    RUN(test_layer_cached());
    RUN(cached_full());
    RUN(layer_one_rank_fails());
    int counts[2] = {passed, failed};
    MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_mpi P=%d: %d passed, %d failed\n", size, counts[0], counts[1]);
    ra_context_destroy(ctx);
    ra_context_destroy(ctx2);
    MPI_Finalize();
    return counts[1] != 0;
}
