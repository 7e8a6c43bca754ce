/*
 * ggml_decode.c — one decode step of ggml's CPU flash attention
 * (ggml_flash_attn_ext) beside ropeattn's (ra_attention_decode), in one
 * process, on caches filled with the same values, at the same thread count.
 * Not part of `make`: bench/peers/ggml.sh builds it against a ggml checkout.
 *
 *   ggml_decode --threads N [--repeats R] [--only CASE[,CASE...]] [--side ours|ggml]
 *
 * Dims: H 32 query heads, Hkv 8 kv heads, D 128, one query token, scale
 * 1 / sqrt(D), no mask (b32: each sequence's own length).  Cases:
 *   {f32,f16,bf16,int8}_l{4096,16384,32768}  one sequence of L cached tokens;
 *       ropeattn's cache in that dtype against ggml's K and V of the same
 *       type, except int8: ropeattn's RA_I8 (a float scale per token and kv
 *       head) against ggml's q8_0 (an f16 scale per 32 values).
 *   {f32,f16}_b32  32 sequences of 512 .. 8192 tokens (bench_paged.c's
 *       lengths), one query each: ropeattn's cache of batch 32, capacity
 *       8192; ggml's 32 streams (q, K, V's fourth axis) of 8192 slots with
 *       a mask of -INF past each sequence's length, as llama.cpp's
 *       per-sequence caches.  ggml has no block table, so no paged pool.
 * ggml's K and V each in two layouts, the faster in one sample timed:
 *   tokens  [L, Hkv, D] in memory, viewed as [D, L, Hkv] (llama.cpp's cache
 *           as its graph hands it to ggml_flash_attn_ext)
 *   heads   [Hkv, L, D] in memory (ropeattn's layout)
 * q: ggml [D, 1, H, B] f32; ropeattn [B, 1, H, D] f32: the same floats.
 *
 * Values: K, V, q uniform in [-1, 1) from a hash of their index, stored by
 * each library's own conversion (ggml's from_float_ref; ropeattn's append).
 * Each variant runs once to warm up and to be checked; each ggml layout
 * once more, timed, and the faster one is timed R times with ropeattn,
 * alternately (each first in turn), every call 20 ms after the last (either
 * side's idle threads spin for a while after a call; the pause keeps them
 * off the next one's cores); the medians are reported.  --side times one
 * side's R samples alone (the other runs only to warm up and be checked;
 * its seconds print as null): each side's own time, to compare with the
 * alternation's.  Check: heads 0 and H - 1 (sequences 0 and B - 1) against
 * attention in double over the exact values; the largest |error| is
 * printed, and a variant past its dtype's tolerance (below) fails the run.
 *
 * Prints one JSON object per case a line:
 *   {"case", "threads", "tokens", "ours_dtype", "ggml_type", "ours_bytes",
 *    "ggml_bytes", "ours_seconds", "ggml_seconds", "ggml_layout",
 *    "ggml_layouts_once": {"tokens": s, "heads": s}, "ours_err", "ggml_err",
 *    "ggml_cpu": the vector features ggml's CPU backend was built for}
 * bytes: the K and V rows read once (ggml's q8_0 blocks with their scales,
 * ropeattn's int8 codes with theirs).  Exit 0, or 1 with a message.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "ropeattn.h"

#define HEADS 32
#define KV_HEADS 8
#define HEAD_DIM 128
#define ROW (KV_HEADS * HEAD_DIM) /* one token's K (or V) values */
#define B32 32
#define B32_CAPACITY 8192
#define FILL 256 /* tokens a sequence per append */
#define GAP_NS 20000000L

enum { LAYOUT_TOKENS, LAYOUT_HEADS, LAYOUTS };
static const char *const layout_names[LAYOUTS] = {"tokens", "heads"};

typedef struct peer_case {
    const char *name;
    ra_dtype ours;
    enum ggml_type theirs;
    int batch;      /* 1, or B32 */
    int64_t length; /* 1: the tokens; B32: the capacity */
    double tol;     /* largest |error| against the exact attention */
} peer_case;

/* Tolerances, on outputs of magnitude up to about 0.05 (means of uniform
 * values under a near-flat softmax): f32 sums of up to 32768 terms, as the
 * bench's decode check; 16-bit storage rounds each K and V value by up to
 * 2^-9 (bf16) of itself and ggml's f16 path rounds q to f16 and keeps its
 * V sums in f16; 8-bit storage rounds by up to max|x| / 254. */
#define TOL_F32 1e-4
#define TOL_16 2e-3
#define TOL_8 5e-3

/* One sequence of 4096, 16384, 32768 tokens. */
#define LENGTHS(dt, ours, theirs, tol)                                              \
    {dt "_l4096", ours, theirs, 1, 4096, tol}, {dt "_l16384", ours, theirs, 1, 16384, tol}, \
        {dt "_l32768", ours, theirs, 1, 32768, tol}

static const peer_case cases[] = {
    LENGTHS("f32", RA_F32, GGML_TYPE_F32, TOL_F32),
    LENGTHS("f16", RA_F16, GGML_TYPE_F16, TOL_16),
    LENGTHS("bf16", RA_BF16, GGML_TYPE_BF16, TOL_16),
    LENGTHS("int8", RA_I8, GGML_TYPE_Q8_0, TOL_8),
    {"f32_b32", RA_F32, GGML_TYPE_F32, B32, B32_CAPACITY, TOL_F32},
    {"f16_b32", RA_F16, GGML_TYPE_F16, B32, B32_CAPACITY, TOL_16},
};
#define CASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- values ---------------------------------------------------------------- */

/* Uniform in [-1, 1) from (what, b, t, i): what 0 K, 1 V, 2 q; i the index
 * within a token's row [Hkv, D] (q: [H, D]). */
static float value(int what, int64_t b, int64_t t, int64_t i)
{
    uint64_t x = ((uint64_t)what << 60) ^ ((uint64_t)b << 48) ^ ((uint64_t)t << 16) ^ (uint64_t)i;
    x += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (float)((double)(x >> 40) / (double)(1ull << 23) - 1.0);
}

static void fill_row(float *row, int what, int64_t b, int64_t t, int n)
{
    for (int i = 0; i < n; i++) row[i] = value(what, b, t, i);
}

/* Sequence b's tokens: the case's length, or bench_paged.c's 512 .. 8192. */
static int64_t tokens_of(const peer_case *c, int b)
{
    return c->batch == 1 ? c->length : 512 + (int64_t)b * (8192 - 512) / (B32 - 1);
}

static int64_t total_tokens(const peer_case *c)
{
    int64_t n = 0;
    for (int b = 0; b < c->batch; b++) n += tokens_of(c, b);
    return n;
}

/* Attention of query head h of sequence b over the exact values, in double.
 *   out: [D] */
static void reference(const peer_case *c, int b, int h, double *out)
{
    const int64_t n = tokens_of(c, b);
    const int g = h / (HEADS / KV_HEADS);
    float q[HEAD_DIM], k[HEAD_DIM];
    for (int d = 0; d < HEAD_DIM; d++) q[d] = value(2, b, 0, (int64_t)h * HEAD_DIM + d);
    double *s = malloc((size_t)n * sizeof *s), max = -INFINITY, sum = 0;
    if (!s) return;
    for (int64_t t = 0; t < n; t++) {
        double dot = 0;
        for (int d = 0; d < HEAD_DIM; d++) {
            k[d] = value(0, b, t, (int64_t)g * HEAD_DIM + d);
            dot += (double)q[d] * k[d];
        }
        s[t] = dot / sqrt((double)HEAD_DIM);
        max = fmax(max, s[t]);
    }
    for (int d = 0; d < HEAD_DIM; d++) out[d] = 0;
    for (int64_t t = 0; t < n; t++) {
        double p = exp(s[t] - max);
        sum += p;
        for (int d = 0; d < HEAD_DIM; d++) out[d] += p * value(1, b, t, (int64_t)g * HEAD_DIM + d);
    }
    for (int d = 0; d < HEAD_DIM; d++) out[d] /= sum;
    free(s);
}

/* The largest |error| of heads 0 and H - 1 of sequences 0 and B - 1.
 *   out: [B, H, D] f32 (both libraries write it so) */
static double largest_error(const peer_case *c, const float *out)
{
    double worst = 0, exact[HEAD_DIM];
    const int seqs[] = {0, c->batch - 1}, heads[] = {0, HEADS - 1};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            reference(c, seqs[i], heads[j], exact);
            const float *got = out + ((int64_t)seqs[i] * HEADS + heads[j]) * HEAD_DIM;
            for (int d = 0; d < HEAD_DIM; d++) {
                double e = fabs(got[d] - exact[d]);
                worst = isnan(e) ? INFINITY : fmax(worst, e);
            }
        }
    return worst;
}

/* ---- ropeattn ---------------------------------------------------------------- */

typedef struct ours_state {
    ra_context *ctx;
    ra_kv_cache *cache;
    float *q, *out; /* [B, 1, H, D] */
} ours_state;

static int ours_fail(const char *what)
{
    fprintf(stderr, "ggml_decode: ropeattn %s: %s\n", what, ra_last_error());
    return 1;
}

static int ours_setup(ours_state *s, const peer_case *c, int threads)
{
    const int B = c->batch;
    const int64_t capacity = c->batch == 1 ? c->length : B32_CAPACITY;
    if (ra_context_create(&s->ctx, threads) != RA_OK) return ours_fail("context");
    if (ra_kv_cache_create(&s->cache, B, capacity, KV_HEADS, HEAD_DIM, c->ours) != RA_OK)
        return ours_fail("cache");
    float *k = malloc((size_t)B * FILL * ROW * sizeof(float) * 2), *v = k + (size_t)B * FILL * ROW;
    s->q = malloc((size_t)B * HEADS * HEAD_DIM * sizeof(float));
    s->out = calloc((size_t)B * HEADS * HEAD_DIM, sizeof(float));
    if (!k || !s->q || !s->out) {
        free(k);
        fprintf(stderr, "ggml_decode: out of memory\n");
        return 1;
    }
    for (int b = 0; b < B; b++) fill_row(s->q + (int64_t)b * HEADS * HEAD_DIM, 2, b, 0, HEADS * HEAD_DIM);
    int failed = 0;
    for (int64_t from = 0; from < capacity && !failed; from += FILL) {
        int64_t n_new[B32];
        for (int b = 0; b < B; b++) {
            int64_t left = tokens_of(c, b) - from;
            n_new[b] = left < 0 ? 0 : left < FILL ? left : FILL;
            for (int64_t t = 0; t < n_new[b]; t++) {
                fill_row(k + ((int64_t)b * FILL + t) * ROW, 0, b, from + t, ROW);
                fill_row(v + ((int64_t)b * FILL + t) * ROW, 1, b, from + t, ROW);
            }
        }
        ra_tensor kt = ra_tensor_4d(k, RA_F32, B, FILL, KV_HEADS, HEAD_DIM);
        ra_tensor vt = ra_tensor_4d(v, RA_F32, B, FILL, KV_HEADS, HEAD_DIM);
        if (ra_kv_cache_append(s->ctx, s->cache, NULL, NULL, &kt, &vt, NULL, n_new) != RA_OK)
            failed = ours_fail("append");
    }
    free(k);
    return failed;
}

static int ours_run(ours_state *s, const peer_case *c)
{
    ra_tensor q = ra_tensor_4d(s->q, RA_F32, c->batch, 1, HEADS, HEAD_DIM);
    ra_tensor out = ra_tensor_4d(s->out, RA_F32, c->batch, 1, HEADS, HEAD_DIM);
    return ra_attention_decode(s->ctx, s->cache, &out, &q, NULL, NULL) == RA_OK ? 0
                                                                                : ours_fail("decode");
}

static void ours_teardown(ours_state *s)
{
    ra_kv_cache_destroy(s->cache);
    ra_context_destroy(s->ctx);
    free(s->q);
    free(s->out);
}

/* ---- ggml ------------------------------------------------------------------------ */

typedef struct ggml_state {
    struct ggml_context *ctx;
    struct ggml_cgraph *graph;
    struct ggml_cplan plan;
    struct ggml_tensor *out; /* [D, H, 1, B] */
} ggml_state;

/* Writes token t of sequence b (K or V, what 0 or 1) into ggml's storage
 * of that layout: tokens [B][slots][Hkv][D], heads [B][Hkv][slots][D]. */
static void ggml_put(struct ggml_tensor *x, int layout, int what, int b, int64_t t, int64_t slots,
                     float *row)
{
    const struct ggml_type_traits *traits = ggml_get_type_traits(x->type);
    const size_t head_bytes = ggml_row_size(x->type, HEAD_DIM);
    fill_row(row, what, b, t, ROW);
    for (int g = 0; g < KV_HEADS; g++) {
        int64_t slot = layout == LAYOUT_TOKENS ? ((int64_t)b * slots + t) * KV_HEADS + g
                                               : ((int64_t)b * KV_HEADS + g) * slots + t;
        char *dst = (char *)x->data + slot * head_bytes;
        if (x->type == GGML_TYPE_F32)
            memcpy(dst, row + g * HEAD_DIM, head_bytes);
        else
            traits->from_float_ref(row + g * HEAD_DIM, dst, HEAD_DIM);
    }
}

/* K or V as ggml_flash_attn_ext takes them: [D, slots, Hkv, B]. */
static struct ggml_tensor *ggml_cache(struct ggml_context *ctx, struct ggml_tensor *store,
                                      int layout, int64_t slots, int B)
{
    const size_t head = ggml_row_size(store->type, HEAD_DIM);
    if (layout == LAYOUT_HEADS)
        return ggml_view_4d(ctx, store, HEAD_DIM, slots, KV_HEADS, B, head, head * slots,
                            head * slots * KV_HEADS, 0);
    return ggml_view_4d(ctx, store, HEAD_DIM, slots, KV_HEADS, B, head * KV_HEADS, head,
                        head * KV_HEADS * slots, 0);
}

static int ggml_setup(ggml_state *s, const peer_case *c, int layout, int threads,
                      struct ggml_threadpool *pool)
{
    const int B = c->batch;
    const int64_t slots = c->length;
    const size_t store_bytes = ggml_row_size(c->theirs, HEAD_DIM) * KV_HEADS * slots * B;
    struct ggml_init_params params = {
        .mem_size = 2 * store_bytes + (size_t)B * HEADS * HEAD_DIM * 8 +
                    (size_t)slots * B * 2 + 16 * ggml_tensor_overhead() + ggml_graph_overhead() +
                    (1 << 20),
        .mem_buffer = NULL,
        .no_alloc = false};
    s->ctx = ggml_init(params);
    if (!s->ctx) {
        fprintf(stderr, "ggml_decode: ggml_init failed\n");
        return 1;
    }
    struct ggml_tensor *q = ggml_new_tensor_4d(s->ctx, GGML_TYPE_F32, HEAD_DIM, 1, HEADS, B);
    for (int b = 0; b < B; b++) fill_row((float *)q->data + (int64_t)b * HEADS * HEAD_DIM, 2, b, 0, HEADS * HEAD_DIM);
    struct ggml_tensor *kv[2], *mask = NULL;
    float row[ROW];
    for (int what = 0; what < 2; what++) {
        /* b32: the slots past a sequence's length are left unwritten (ggml
         * skips a key whose mask is -INF before reading it) */
        kv[what] = ggml_new_tensor_1d(s->ctx, c->theirs, (int64_t)HEAD_DIM * KV_HEADS * slots * B);
        for (int b = 0; b < B; b++)
            for (int64_t t = 0; t < tokens_of(c, b); t++)
                ggml_put(kv[what], layout, what, b, t, slots, row);
    }
    if (B > 1) { /* [slots, 1, 1, B]: 0 where sequence b has a token, else -INF */
        mask = ggml_new_tensor_4d(s->ctx, GGML_TYPE_F16, slots, 1, 1, B);
        ggml_fp16_t *m = mask->data;
        for (int b = 0; b < B; b++)
            for (int64_t t = 0; t < slots; t++)
                m[(int64_t)b * slots + t] = ggml_fp32_to_fp16(t < tokens_of(c, b) ? 0.0f : -INFINITY);
    }
    s->out = ggml_flash_attn_ext(s->ctx, q, ggml_cache(s->ctx, kv[0], layout, slots, B),
                                 ggml_cache(s->ctx, kv[1], layout, slots, B), mask,
                                 1.0f / sqrtf(HEAD_DIM), 0.0f, 0.0f);
    s->graph = ggml_new_graph(s->ctx);
    ggml_build_forward_expand(s->graph, s->out);
    s->plan = ggml_graph_plan(s->graph, threads, pool);
    s->plan.work_data = malloc(s->plan.work_size ? s->plan.work_size : 1);
    if (!s->plan.work_data) {
        fprintf(stderr, "ggml_decode: out of memory\n");
        return 1;
    }
    return 0;
}

static int ggml_run(ggml_state *s)
{
    if (ggml_graph_compute(s->graph, &s->plan) == GGML_STATUS_SUCCESS) return 0;
    fprintf(stderr, "ggml_decode: ggml_graph_compute failed\n");
    return 1;
}

static void ggml_teardown(ggml_state *s)
{
    free(s->plan.work_data);
    if (s->ctx) ggml_free(s->ctx);
}

/* ---- timing ------------------------------------------------------------------------ */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void pause_gap(void)
{
    struct timespec gap = {0, GAP_NS};
    nanosleep(&gap, NULL);
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, compare);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Variant 0 is ropeattn, 1 + layout ggml's. */
static int solo = -1; /* --side: 0 ropeattn, 1 ggml, -1 both */

#define VARIANTS (1 + LAYOUTS)

typedef struct variants {
    ours_state ours;
    ggml_state theirs[LAYOUTS];
} variants;

/* Runs variant i once; its time in *seconds. */
static int run_variant(variants *v, int i, const peer_case *c, double *seconds)
{
    double start = now();
    int failed = i == 0 ? ours_run(&v->ours, c) : ggml_run(&v->theirs[i - 1]);
    *seconds = now() - start;
    pause_gap();
    return failed;
}

/* Each variant's warm-up, checked: its largest error in err[i]. */
static int warm_up(variants *v, const peer_case *c, double *err)
{
    for (int i = 0; i < VARIANTS; i++) {
        double ignored;
        if (run_variant(v, i, c, &ignored)) return 1;
        err[i] = largest_error(c, i == 0 ? v->ours.out : (const float *)v->theirs[i - 1].out->data);
        if (!(err[i] <= c->tol)) {
            fprintf(stderr, "ggml_decode: %s: %s is off by %g (tolerance %g)\n", c->name,
                    i == 0 ? "ropeattn" : layout_names[i - 1], err[i], c->tol);
            return 1;
        }
    }
    return 0;
}

/* seconds as JSON into buf, null for the side --side left out. */
static const char *json_seconds(char buf[32], double seconds, int who)
{
    if (solo >= 0 && solo != who) return "null";
    snprintf(buf, 32, "%.6g", seconds);
    return buf;
}

/* The x86 and Arm vector features ggml's CPU backend was compiled for
 * (ggml_cpu_has_*: GGML_NATIVE builds for the build machine), space-separated,
 * into buf: "avx avx2 fma f16c" on an AVX2 core, "... avx512 ..." on one with AVX-512. */
static const char *ggml_features(char *buf, size_t len)
{
    static const struct { const char *name; int (*has)(void); } features[] = {
        {"avx", ggml_cpu_has_avx},           {"avx2", ggml_cpu_has_avx2},
        {"fma", ggml_cpu_has_fma},           {"f16c", ggml_cpu_has_f16c},
        {"avx_vnni", ggml_cpu_has_avx_vnni}, {"avx512", ggml_cpu_has_avx512},
        {"avx512_vnni", ggml_cpu_has_avx512_vnni}, {"avx512_bf16", ggml_cpu_has_avx512_bf16},
        {"amx_int8", ggml_cpu_has_amx_int8}, {"neon", ggml_cpu_has_neon},
        {"sve", ggml_cpu_has_sve},
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof features / sizeof features[0]; i++)
        if (features[i].has() && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " " : "",
                                     features[i].name);
    return buf;
}

static void print_record(const peer_case *c, int threads, const double *err, double ours,
                         double theirs, int layout, const double *once)
{
    const double tokens = (double)total_tokens(c), values = 2.0 * tokens * KV_HEADS * HEAD_DIM;
    double ours_bytes = values * (double)ra_dtype_size(c->ours);
    if (c->ours == RA_I8) ours_bytes += 2.0 * tokens * KV_HEADS * sizeof(float); /* the scales */
    const double ggml_bytes =
        values / (double)ggml_blck_size(c->theirs) * (double)ggml_type_size(c->theirs);
    char ours_buf[32], theirs_buf[32], features[160];
    const char *dtype = c->ours == RA_I8 ? "int8" : c->ours == RA_F32 ? "f32"
                                                  : c->ours == RA_F16 ? "f16" : "bf16";
    printf("{\"case\": \"%s\", \"threads\": %d, \"tokens\": %.0f, \"ours_dtype\": \"%s\", "
           "\"ggml_type\": \"%s\", \"ours_bytes\": %.0f, \"ggml_bytes\": %.0f, "
           "\"ours_seconds\": %s, \"ggml_seconds\": %s, \"ggml_layout\": \"%s\", "
           "\"ggml_layouts_once\": {\"%s\": %.6g, \"%s\": %.6g}, \"ours_err\": %.3g, "
           "\"ggml_err\": %.3g, \"ggml_cpu\": \"%s\"}\n",
           c->name, threads, tokens, dtype, ggml_type_name(c->theirs), ours_bytes, ggml_bytes,
           json_seconds(ours_buf, ours, 0), json_seconds(theirs_buf, theirs, 1),
           layout_names[layout], layout_names[0], once[0], layout_names[1], once[1],
           err[0], fmax(err[1], err[2]), ggml_features(features, sizeof features));
    fflush(stdout);
}

/* Warm-up and check; one sample of each ggml layout, the faster kept; then
 * repeats rounds of ropeattn and that layout, each first in turn. */
static int run_case(const peer_case *c, int threads, int repeats, struct ggml_threadpool *pool)
{
    variants v = {0};
    double *t = calloc(2 * (size_t)repeats, sizeof *t), err[VARIANTS], once[LAYOUTS];
    int failed = !t || ours_setup(&v.ours, c, threads);
    for (int l = 0; l < LAYOUTS && !failed; l++) failed = ggml_setup(&v.theirs[l], c, l, threads, pool);
    failed = failed || warm_up(&v, c, err);
    for (int l = 0; l < LAYOUTS && !failed; l++) failed = run_variant(&v, 1 + l, c, &once[l]);
    const int layout = !failed && once[1] < once[0] ? 1 : 0;
    for (int r = 0; r < repeats && !failed; r++)
        for (int j = 0; j < 2 && !failed; j++) {
            const int first = (r + j) % 2;
            if (solo >= 0 && solo != first) continue;
            failed = run_variant(&v, first ? 1 + layout : 0, c, &t[first * repeats + r]);
        }
    if (!failed)
        print_record(c, threads, err, median(t, repeats), median(t + repeats, repeats), layout,
                     once);
    ours_teardown(&v.ours);
    for (int l = 0; l < LAYOUTS; l++) ggml_teardown(&v.theirs[l]);
    free(t);
    return failed;
}

static int usage(void)
{
    fprintf(stderr, "usage: ggml_decode --threads N [--repeats R] [--only CASE[,CASE...]]"
                    " [--side ours|ggml]\n"
                    "cases:");
    for (int i = 0; i < CASES; i++) fprintf(stderr, " %s", cases[i].name);
    fprintf(stderr, "\n");
    return 1;
}

/* Whether the comma-separated list holds the name name[0 .. n - 1]. */
static int listed(const char *list, const char *name, size_t n)
{
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (end != NULL);
    }
    return 0;
}

/* The first name in --only that is no case's, or NULL. */
static const char *unknown_case(const char *only, size_t *len)
{
    for (const char *p = only; *p;) {
        const char *end = strchr(p, ',');
        int known = 0;
        *len = end ? (size_t)(end - p) : strlen(p);
        for (int i = 0; i < CASES; i++)
            known |= strlen(cases[i].name) == *len && !strncmp(p, cases[i].name, *len);
        if (!known) return p;
        p += *len + (end != NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 0, repeats = 7;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--repeats"))
            repeats = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--only"))
            only = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--side") && !strcmp(argv[i + 1], "ours"))
            solo = 0, i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--side") && !strcmp(argv[i + 1], "ggml"))
            solo = 1, i++;
        else
            return usage();
    }
    if (threads < 1 || repeats < 1) return usage();
    size_t len;
    const char *unknown = only ? unknown_case(only, &len) : NULL;
    if (unknown) {
        fprintf(stderr, "ggml_decode: --only: unknown case %.*s\n", (int)len, unknown);
        return usage();
    }
    ggml_cpu_init();
    struct ggml_threadpool_params tp = ggml_threadpool_params_default(threads);
    struct ggml_threadpool *pool = ggml_threadpool_new(&tp);
    if (!pool) {
        fprintf(stderr, "ggml_decode: ggml_threadpool_new failed\n");
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < CASES && !failed; i++)
        if (!only || listed(only, cases[i].name, strlen(cases[i].name)))
            failed = run_case(&cases[i], threads, repeats, pool);
    ggml_threadpool_free(pool);
    return failed;
}
