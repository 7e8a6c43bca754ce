/*
 * bench_mpi.c — where ring attention's time goes, per rank, and the
 * sharded decode step's time (docs/SCALING.md reads these figures):
 *
 *   mpirun -np P build/mpi/bench_mpi [--seq S] [--decode-len L] [--dtype f32|bf16]
 *                                    [--threads N] [--reps R]
 *
 * Ring attention: causal over S tokens sharded zig-zag, B 1, H 32, Hkv 8,
 * D 128 (a Llama-like layer), K/V in dtype; per rank the median over R
 * calls of mpi_attention_timed's split: total, compute (the blocks' kernels
 * and merges), wait (MPI_Waitall after a step's blocks: the communication
 * that the compute did not hide) and the rest (checks, packing, finish),
 * the K/V bytes sent per step and the rank's attention rate (4 D flops per
 * visible query-key pair per head, over the compute time); then, for P > 1,
 * the same bytes shifted around the ring alone (MPI_Sendrecv, median of
 * 5 R): the link's bandwidth, for the model.  The ring's backward likewise
 * (mpi_attention_backward_timed, from the forward's out and lse): its
 * compute (ra_attention_block_backward), wait (K/V and dK/dV transfers the
 * compute did not hide, the last hop's included), the bytes sent per step
 * (K/V and dK/dV over P steps) and its rate (10 D flops per visible pair
 * per head: S = q k^T again, dV, dP, dQ and dK).
 *
 * Decode: one query token against a cache of L tokens in dtype (default
 * 131072), split into P contiguous shards; the median over 5 R calls of
 * ra_mpi_attention_decode per rank, and the bytes of its combining
 * MPI_Allreduce.
 *
 *   q: [B, S_local, H, D] f32   k, v: [B, S_local, Hkv, D] dtype
 *   cache: [B, L / P, Hkv, D] dtype a rank   q (decode): [B, 1, H, D] f32
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/ring_stats.h"

enum { B = 1, H = 32, HKV = 8, D = 128, APPEND_ROWS = 4096, FIELDS = 5 };

typedef struct settings {
    int64_t seq, decode_len;
    ra_dtype dtype;
    int threads, reps;
} settings;

static int rank, size;

static int usage(const char *why)
{
    if (rank == 0)
        fprintf(stderr, "bench_mpi: %s\nusage: mpirun -np P bench_mpi [--seq S] "
                "[--decode-len L] [--dtype f32|bf16] [--threads N] [--reps R]\n", why);
    return 2;
}

static int parse(int argc, char **argv, settings *s)
{
    *s = (settings){.seq = 8192, .decode_len = 131072, .dtype = RA_F32, .threads = 1, .reps = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage("an option without its value");
        if (!strcmp(a, "--seq")) s->seq = atoll(v);
        else if (!strcmp(a, "--decode-len")) s->decode_len = atoll(v);
        else if (!strcmp(a, "--threads")) s->threads = atoi(v);
        else if (!strcmp(a, "--reps")) s->reps = atoi(v);
        else if (!strcmp(a, "--dtype") && !strcmp(v, "f32")) s->dtype = RA_F32;
        else if (!strcmp(a, "--dtype") && !strcmp(v, "bf16")) s->dtype = RA_BF16;
        else return usage("an unknown option or value");
        i++;
    }
    if (s->seq < 2 * size || s->decode_len < size || s->threads < 1 || s->reps < 1)
        return usage("--seq >= 2 P, --decode-len >= P, --threads and --reps >= 1");
    return 0;
}

/* n values in [-1, 1) as dtype (bf16: a float's top half), from seed. */
static void *random_values(int64_t n, ra_dtype dtype, uint64_t seed)
{
    const size_t esize = dtype == RA_F32 ? 4 : 2;
    char *p = malloc((size_t)n * esize);
    for (int64_t i = 0; p && i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        float x = (float)((seed >> 40) * 0x1p-23) - 1.0f;
        uint32_t bits;
        memcpy(&bits, &x, 4);
        if (dtype == RA_F32) memcpy(p + i * 4, &x, 4);
        else memcpy(p + i * 2, &(uint16_t){(uint16_t)(bits >> 16)}, 2);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Query-key pairs the causal mask leaves this rank: sum of (position + 1)
 * over its rows. */
static double visible_pairs(int64_t seq)
{
    int64_t start[2], count[2];
    ra_mpi_zigzag(seq, size, rank, start, count);
    double pairs = 0;
    for (int c = 0; c < 2; c++)
        for (int64_t i = 0; i < count[c]; i++) pairs += (double)(start[c] + i + 1);
    return pairs;
}

/* The ring: fields [total, compute, wait, bytes, blocks] medians over the
 * reps, this rank's, of the forward (fwd) and the backward (bwd).  Returns
 * nonzero on a failure (every rank's). */
static int bench_ring(ra_context *ctx, const settings *s, double fwd[FIELDS], double bwd[FIELDS])
{
    int64_t start[2], count[2];
    ra_mpi_zigzag(s->seq, size, rank, start, count);
    const int64_t n = count[0] + count[1];
    float *q = random_values(B * n * H * D, RA_F32, 1 + (uint64_t)rank);
    float *out = malloc((size_t)(B * n * H * D) * 4), *lse = malloc((size_t)(B * H * n) * 4);
    void *k = random_values(B * n * HKV * D, s->dtype, 101 + (uint64_t)rank);
    void *v = random_values(B * n * HKV * D, s->dtype, 201 + (uint64_t)rank);
    const ra_tensor tq = ra_tensor_4d(q, RA_F32, B, n, H, D);
    const ra_tensor to = ra_tensor_4d(out, RA_F32, B, n, H, D);
    const ra_tensor tk = ra_tensor_4d(k, s->dtype, B, n, HKV, D);
    const ra_tensor tv = ra_tensor_4d(v, s->dtype, B, n, HKV, D);
    float *dout = random_values(B * n * H * D, RA_F32, 501 + (uint64_t)rank);
    float *dq = malloc((size_t)(B * n * H * D) * 4), *dk = malloc((size_t)(B * n * HKV * D) * 4);
    float *dv = malloc((size_t)(B * n * HKV * D) * 4);
    const ra_tensor tdo = ra_tensor_4d(dout, RA_F32, B, n, H, D);
    const ra_tensor tdq = ra_tensor_4d(dq, RA_F32, B, n, H, D);
    const ra_tensor tdk = ra_tensor_4d(dk, RA_F32, B, n, HKV, D);
    const ra_tensor tdv = ra_tensor_4d(dv, RA_F32, B, n, HKV, D);
    double *runs = calloc((size_t)(FIELDS * s->reps), sizeof *runs);
    ra_status st = q && out && lse && k && v && dout && dq && dk && dv && runs ? RA_OK
                                                                               : RA_ERR_NOMEM;
    for (int pass = 0; pass < 2; pass++) { /* the forward, then the backward */
        for (int r = -1; r < s->reps && st == RA_OK; r++) { /* r = -1: a warm-up */
            mpi_ring_stats stats;
            MPI_Barrier(MPI_COMM_WORLD);
            if (pass == 0)
                st = mpi_attention_timed(ctx, MPI_COMM_WORLD, &to, lse, &tq, &tk, &tv, s->seq,
                                         NULL, &stats);
            else
                st = mpi_attention_backward_timed(ctx, MPI_COMM_WORLD, &tdq, &tdk, &tdv, &tdo,
                                                  &tq, &tk, &tv, &to, lse, s->seq, NULL, &stats);
            if (r < 0) continue;
            const double f[FIELDS] = {stats.total_s, stats.compute_s, stats.wait_s,
                                      (double)stats.bytes_sent, (double)stats.blocks};
            for (int i = 0; i < FIELDS; i++) runs[i * s->reps + r] = f[i];
        }
        if (st != RA_OK) {
            fprintf(stderr, "rank %d: ring %s: %s\n", rank, pass ? "backward" : "forward",
                    ra_mpi_last_error());
            break;
        }
        double *med = pass ? bwd : fwd;
        for (int i = 0; i < FIELDS; i++) med[i] = median(runs + i * s->reps, s->reps);
    }
    free(q), free(out), free(lse), free(k), free(v), free(dout), free(dq), free(dk), free(dv),
        free(runs);
    return st != RA_OK;
}

/* The link alone: the median time of an MPI_Sendrecv of bytes to rank
 * r + 1 from r - 1 (the ring's shift, with no compute beside it). */
static int bench_link(int64_t bytes, int reps, double *seconds)
{
    char *send = calloc((size_t)bytes, 1), *recv = malloc((size_t)bytes);
    double *runs = malloc((size_t)reps * sizeof *runs);
    int failed = !send || !recv || !runs || bytes > INT_MAX, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int r = -1; r < reps && !any; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        MPI_Sendrecv(send, (int)bytes, MPI_BYTE, next, 0, recv, (int)bytes, MPI_BYTE, prev, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (r >= 0) runs[r] = MPI_Wtime() - t0;
    }
    if (!any) *seconds = median(runs, reps);
    free(send), free(recv), free(runs);
    return any;
}

/* This rank's contiguous shard of the decode cache, filled APPEND_ROWS
 * tokens at a time. */
static ra_status fill_cache(ra_context *ctx, const settings *s, ra_kv_cache **cache)
{
    const int64_t from = s->decode_len * rank / size;
    const int64_t len = s->decode_len * (rank + 1) / size - from;
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, &rc);
    if (st == RA_OK) st = ra_kv_cache_create(cache, B, len > 0 ? len : 1, HKV, D, s->dtype);
    float *k = random_values(B * APPEND_ROWS * HKV * D, RA_F32, 301 + (uint64_t)rank);
    float *v = random_values(B * APPEND_ROWS * HKV * D, RA_F32, 401 + (uint64_t)rank);
    if (st == RA_OK && (!k || !v)) st = RA_ERR_NOMEM;
    for (int64_t done = 0; st == RA_OK && done < len; done += APPEND_ROWS) {
        int64_t n = len - done < APPEND_ROWS ? len - done : APPEND_ROWS, at = from + done;
        ra_tensor tk = ra_tensor_4d(k, RA_F32, B, n, HKV, D);
        ra_tensor tv = ra_tensor_4d(v, RA_F32, B, n, HKV, D);
        ra_positions p = {.struct_size = sizeof p, .starts = &at};
        st = ra_kv_cache_append(ctx, *cache, rope, NULL, &tk, &tv, &p, &n);
    }
    free(k), free(v);
    ra_rope_destroy(rope);
    return st;
}

/* The decode step's median time on this rank. */
static int bench_decode(ra_context *ctx, const settings *s, double *seconds)
{
    ra_kv_cache *cache = NULL;
    ra_status st = fill_cache(ctx, s, &cache);
    if (st != RA_OK) fprintf(stderr, "rank %d: cache: %s\n", rank, ra_last_error());
    const int reps = 5 * s->reps;
    float *q = random_values(B * H * D, RA_F32, 7), *out = malloc((size_t)(B * H * D) * 4);
    double *runs = malloc((size_t)reps * sizeof *runs);
    if (st == RA_OK && (!q || !out || !runs)) st = RA_ERR_NOMEM;
    const ra_tensor tq = ra_tensor_4d(q, RA_F32, B, 1, H, D);
    const ra_tensor to = ra_tensor_4d(out, RA_F32, B, 1, H, D);
    /* every rank joins the calls (a failed shard fails them everywhere) */
    for (int r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        ra_status call = ra_mpi_attention_decode(ctx, MPI_COMM_WORLD, cache, &to, NULL, &tq, NULL,
                                                 NULL);
        if (r >= 0 && runs) runs[r] = MPI_Wtime() - t0;
        if (call != RA_OK && st == RA_OK) {
            fprintf(stderr, "rank %d: decode: %s\n", rank, ra_mpi_last_error());
            st = call;
        }
    }
    if (st == RA_OK) *seconds = median(runs, reps);
    free(q), free(out), free(runs);
    ra_kv_cache_destroy(cache);
    return st != RA_OK;
}

static const char *dtype_name(ra_dtype dtype)
{
    return dtype == RA_F32 ? "f32" : "bf16";
}

/* The ring's table: fields per rank as bench_ring's; the bytes sent over
 * steps (0: none sent), under the heading bytes; flops_pair a visible
 * pair's flops per head. */
static void report_ring(const double *ring, const double *pairs, int steps, const char *bytes,
                        double flops_pair)
{
    printf("%4s %10s %12s %10s %10s %7s %14s %12s\n", "rank", "total ms", "compute ms", "wait ms",
           "other ms", "blocks", bytes, "GFLOP/s");
    for (int r = 0; r < size; r++) {
        const double *f = ring + r * FIELDS;
        printf("%4d %10.1f %12.1f %10.2f %10.1f %7.0f %14.0f %12.2f\n", r, 1e3 * f[0], 1e3 * f[1],
               1e3 * f[2], 1e3 * (f[0] - f[1] - f[2]), f[4], steps > 0 ? f[3] / steps : 0.0,
               flops_pair * B * H * D * pairs[r] / f[1] * 1e-9);
    }
}

static void report(const settings *s, const double *ring, const double *back,
                   const double *pairs, const double *dec, double link)
{
    printf("bench_mpi: P %d, %d thread(s) a rank; B %d, H %d, Hkv %d, D %d, K/V %s; median of %d\n",
           size, s->threads, B, H, HKV, D, dtype_name(s->dtype), s->reps);
    printf("ring attention, causal, S %lld (zig-zag, %lld tokens a rank):\n", (long long)s->seq,
           (long long)(s->seq / size));
    report_ring(ring, pairs, size - 1, "bytes/step", 4.0);
    printf("its backward (K/V %d times, dK/dV %d times around the ring):\n", size - 1,
           size > 1 ? size : 0);
    report_ring(back, pairs, size > 1 ? 1 : 0, "bytes/call", 10.0);
    if (size > 1)
        printf("the link alone: MPI_Sendrecv of %.0f bytes around the ring, %.3f ms (%.2f GB/s)\n",
               ring[3] / (size - 1), 1e3 * link, ring[3] / (size - 1) / link * 1e-9);
    printf("decode, 1 token against a cache of %lld (%lld a rank), allreduce of %lld bytes:\n",
           (long long)s->decode_len, (long long)(s->decode_len / size),
           (long long)(B * H * (D + 3) * 8));
    printf("%4s %10s\n", "rank", "ms");
    for (int r = 0; r < size; r++) printf("%4d %10.3f\n", r, 1e3 * dec[r]);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    settings s;
    int failed = parse(argc, argv, &s);
    ra_context *ctx = NULL;
    if (!failed && ra_context_create(&ctx, s.threads) != RA_OK) failed = 1;
    double mine[2 * FIELDS] = {0}, pairs = 0, dec = 0, link = 0; /* forward, backward */
    if (!failed) {
        pairs = visible_pairs(s.seq);
        failed = bench_ring(ctx, &s, mine, mine + FIELDS);
        if (size > 1) failed |= bench_link((int64_t)mine[3] / (size - 1), 5 * s.reps, &link);
        failed |= bench_decode(ctx, &s, &dec);
    }
    double *ring = malloc((size_t)(size * 2 * FIELDS) * sizeof *ring);
    double *back = malloc((size_t)(size * FIELDS) * sizeof *back);
    double *all_pairs = malloc((size_t)size * sizeof *all_pairs);
    double *all_dec = malloc((size_t)size * sizeof *all_dec);
    MPI_Gather(mine, 2 * FIELDS, MPI_DOUBLE, ring, 2 * FIELDS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int r = 0; rank == 0 && r < size; r++) { /* [P, forward | backward]: two tables */
        memcpy(back + r * FIELDS, ring + (2 * r + 1) * FIELDS, FIELDS * sizeof *back);
        memmove(ring + r * FIELDS, ring + 2 * r * FIELDS, FIELDS * sizeof *ring);
    }
    MPI_Gather(&pairs, 1, MPI_DOUBLE, all_pairs, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(&dec, 1, MPI_DOUBLE, all_dec, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any) report(&s, ring, back, all_pairs, all_dec, link);
    free(ring), free(back), free(all_pairs), free(all_dec);
    ra_context_destroy(ctx);
    MPI_Finalize();
    return any;
}
