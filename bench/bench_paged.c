/*
 * bench_paged.c — batched decoding from a paged KV pool: 32 sequences of
 * 512 .. 8192 tokens (f32, spread evenly), one query token each, in one
 * ra_attention_decode_paged call, with pages of 16 and of 64 tokens; and
 * its contiguous twin, the same tokens in one ra_kv_cache of batch 32 and
 * capacity 8192 (per-sequence lengths), in one ra_attention_decode call.
 * Judged by the read bandwidth over the K + V rows read (1.1 GiB: past
 * every cache, as the 256 MiB read limit) and by the time against the twin.
 *
 *   q, out: [32, 1, 32, 128]   K, V: 32 sequences of [L_b, 8, 128]
 */
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "bench.h"

#define HEADS 32
#define KV_HEADS 8
#define HEAD_DIM 128
#define SEQS 32
#define SHORTEST 512
#define LONGEST 8192
/* Tokens per sequence per append while filling: rounds of all sequences,
 * so a pool's sequences' pages interleave as a server's do. */
#define FILL_BLOCK 128

typedef struct paged_params {
    int64_t page_size; /* 0: the contiguous twin */
} paged_params;

typedef struct paged_state {
    const paged_params *params;
    ra_kv_pool *pool;
    ra_kv_cache *cache;
    ra_rope *rope;
    int64_t ids[SEQS], length[SEQS];
    float *q, *out; /* [SEQS, 1, H, D] */
} paged_state;

/* Sequence b's length: 512 .. 8192 evenly (the mean 4352). */
static int64_t length_of(int b)
{
    return SHORTEST + (int64_t)b * (LONGEST - SHORTEST) / (SEQS - 1);
}

/* Tokens of the batch: the sum of length_of (paged_setup checks it). */
#define TOTAL_TOKENS 139249

static void paged_teardown(void *state)
{
    paged_state *s = state;
    if (!s) return;
    ra_kv_pool_destroy(s->pool);
    ra_kv_cache_destroy(s->cache);
    ra_rope_destroy(s->rope);
    free(s->q);
    free(s->out);
    free(s);
}

/* Appends every sequence's tokens, FILL_BLOCK per sequence per round
 * (random k and v of seed 1000 + round, RoPE at their positions), to the
 * pool (ids) or the cache: the same rows either way. */
static ra_status fill(paged_state *s, ra_context *ctx)
{
    const int64_t rows = (int64_t)SEQS * FILL_BLOCK;
    int64_t *at = malloc((size_t)rows * sizeof *at), n_new[SEQS], done[SEQS] = {0};
    ra_status status = at ? RA_OK : RA_ERR_NOMEM;
    for (int round = 0; status == RA_OK && done[SEQS - 1] < LONGEST; round++) {
        float *k = bench_random_floats(rows * KV_HEADS * HEAD_DIM, 1000 + 2 * (uint64_t)round);
        float *v = bench_random_floats(rows * KV_HEADS * HEAD_DIM, 1001 + 2 * (uint64_t)round);
        for (int b = 0; b < SEQS; b++) {
            const int64_t left = length_of(b) - done[b];
            n_new[b] = left < FILL_BLOCK ? left : FILL_BLOCK;
            for (int64_t t = 0; t < FILL_BLOCK; t++) at[b * FILL_BLOCK + t] = done[b] + t;
        }
        ra_tensor tk = ra_tensor_4d(k, RA_F32, SEQS, FILL_BLOCK, KV_HEADS, HEAD_DIM);
        ra_tensor tv = ra_tensor_4d(v, RA_F32, SEQS, FILL_BLOCK, KV_HEADS, HEAD_DIM);
        ra_positions pos = {.struct_size = sizeof pos, .ids = at};
        status = !k || !v ? RA_ERR_NOMEM
                 : s->pool ? ra_kv_pool_append(ctx, s->pool, s->rope, s->ids, SEQS, NULL, &tk,
                                               &tv, &pos, n_new)
                           : ra_kv_cache_append(ctx, s->cache, s->rope, NULL, &tk, &tv, &pos,
                                                n_new);
        for (int b = 0; b < SEQS; b++) done[b] += n_new[b];
        free(k);
        free(v);
    }
    free(at);
    return status;
}

static int paged_setup(const void *params, ra_context *ctx, void **state)
{
    paged_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for paged decode");
    s->params = params;
    s->q = bench_random_floats(SEQS * HEADS * HEAD_DIM, 30);
    s->out = bench_random_floats(SEQS * HEADS * HEAD_DIM, 31);
    if (!s->q || !s->out) return cli_fail(EXIT_FAIL, "bench: out of memory for paged decode");
    ra_rope_config config = ra_rope_config_default(HEAD_DIM);
    config.table_size = LONGEST;
    ra_status status = ra_rope_create(&s->rope, &config);
    const int64_t ps = s->params->page_size;
    int64_t total = 0;
    for (int b = 0; b < SEQS; b++) total += length_of(b);
    if (total != TOTAL_TOKENS)
        return cli_fail(EXIT_FAIL, "bench: the batch holds %lld tokens, not TOTAL_TOKENS",
                        (long long)total);
    if (status == RA_OK && ps) {
        int64_t pages = 0;
        for (int b = 0; b < SEQS; b++) pages += (length_of(b) + ps - 1) / ps;
        status = ra_kv_pool_create(&s->pool, pages, ps, SEQS, KV_HEADS, HEAD_DIM, RA_F32);
        for (int b = 0; b < SEQS && status == RA_OK; b++)
            status = ra_kv_pool_add_sequence(s->pool, 0, &s->ids[b]);
    } else if (status == RA_OK) {
        status = ra_kv_cache_create(&s->cache, SEQS, LONGEST, KV_HEADS, HEAD_DIM, RA_F32);
    }
    if (status == RA_OK) status = fill(s, ctx);
    return status == RA_OK ? 0 : cli_fail_status(status, "bench: cannot fill the KV pages");
}

static ra_status paged_run(void *state, ra_context *ctx)
{
    paged_state *s = state;
    ra_tensor q = ra_tensor_4d(s->q, RA_F32, SEQS, 1, HEADS, HEAD_DIM);
    ra_tensor out = ra_tensor_4d(s->out, RA_F32, SEQS, 1, HEADS, HEAD_DIM);
    return s->pool ? ra_attention_decode_paged(ctx, s->pool, s->ids, SEQS, &out, &q, NULL, NULL)
                   : ra_attention_decode(ctx, s->cache, &out, &q, NULL, NULL);
}

/* The pool's outputs must be the contiguous cache's bits (the library's
 * promise): a twin cache is filled with the same rows and decoded. */
static int paged_check(void *state, ra_context *ctx)
{
    paged_state *s = state;
    if (!s->pool) return 0; /* the twin is what the pool is checked against */
    static const paged_params contiguous = {0};
    void *twin_state;
    int failed = paged_setup(&contiguous, ctx, &twin_state);
    paged_state *twin = twin_state;
    if (!failed) {
        memcpy(twin->q, s->q, SEQS * HEADS * HEAD_DIM * sizeof(float));
        ra_status status = paged_run(twin, ctx);
        if (status != RA_OK)
            failed = cli_fail_status(status, "bench: the contiguous twin's decode");
        else if (memcmp(twin->out, s->out, SEQS * HEADS * HEAD_DIM * sizeof(float)) != 0)
            failed = cli_fail(EXIT_FAIL, "bench: paged decode (pages of %lld) differs from the "
                              "contiguous cache's", (long long)s->params->page_size);
    }
    paged_teardown(twin);
    return failed;
}

static const paged_params pages_16 = {16}, pages_64 = {64}, contiguous_twin = {0};

/* Bytes of one run: the K and V rows read (q and out are 512 KiB). */
#define PAGED_BYTES (2.0 * TOTAL_TOKENS * KV_HEADS * HEAD_DIM * 4)

/* Targets (issue 23): 0.8 of the read bandwidth, and at most 1.1 times the
 * contiguous twin's time; issue 44: both page sizes and the twin on one
 * thread too, 0.8 of one thread's read bandwidth. */
#define PAGED_CASE(case_name, case_shape, case_params)                                      \
    {.name = (case_name), .shape = (case_shape), .measures = LIMIT_NONE,                    \
     .judged_by = LIMIT_READ_256M, .work = PAGED_BYTES, .params = &(case_params),           \
     .setup = paged_setup, .run = paged_run, .check = paged_check,                          \
     .teardown = paged_teardown, .target = 0.8, .one_thread = 1, .target_one_thread = 0.8, \
     .parts = "attention_decode_contig_f32_b32", .parts_target = 1.1}

const bench_case bench_paged_cases[] = {
    {.name = "attention_decode_contig_f32_b32",
     .shape = "q[32,1,32,128], one cache [32, 8192, 8, 128] f32 of 512..8192 tokens",
     .measures = LIMIT_NONE, .judged_by = LIMIT_READ_256M, .work = PAGED_BYTES,
     .params = &contiguous_twin, .setup = paged_setup, .run = paged_run,
     .teardown = paged_teardown, .one_thread = 1},
    PAGED_CASE("attention_decode_paged_f32_b32",
               "q[32,1,32,128], 32 sequences of 512..8192 f32 tokens in pages of 16",
               pages_16),
    PAGED_CASE("attention_decode_paged_f32_b32_p64",
               "q[32,1,32,128], 32 sequences of 512..8192 f32 tokens in pages of 64",
               pages_64),
};
const int bench_paged_case_count = sizeof bench_paged_cases / sizeof bench_paged_cases[0];
