/*
 * bench_main.c — ropeattn-bench: options, the OpenBLAS environment, which
 * cases run, and the report.
 *
 * OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, when set, pin OpenBLAS to a kernel
 * and cache size that may be slower than the best for this CPU, and OpenBLAS
 * reads them once, when it loads.  So unless RA_BENCH_REEXEC is set, the
 * bench re-executes itself once without them (recording what it removed in
 * RA_BENCH_REEXEC) and says so; set RA_BENCH_REEXEC=keep to measure with the
 * environment as given.  The same re-execution sets OPENBLAS_THREAD_TIMEOUT=4
 * unless it is set: OpenBLAS's idle workers otherwise keep spinning for a
 * long while after each sgemm, beside the library's threads, which slows the
 * attention that follows a projection (or a sample of the sgemm limit) by up
 * to 2x on this 2-core machine.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/cli.h"
#include "../tools/outputs.h"
#include "../dev/dev.h"
#include "bench.h"

static const char usage[] =
    "usage: ropeattn-bench [--json] [--threads N] [--only NAME[,NAME...]] [--repeats N]\n"
    "                      [--svg FILE] [--no-torch]\n"
    "\n"
    "Times each kernel beside the machine limit it is judged against, measured in\n"
    "the same run: memory bandwidth (GB/s) and cblas_sgemm (GFLOP/s).  Each case is\n"
    "set up once, run once to warm up and to check its result, then timed; the\n"
    "median over the repeats is reported.  The table gives op, shape, median time,\n"
    "rate, the limit and the fraction of it, vs torch: the median time of Meta's\n"
    "LLaMA reference code (PyTorch) over ours, and vs torch2: PyTorch 2's over ours\n"
    "(with RA_BENCH_TORCH2, below).\n"
    "The machine's bandwidth and sgemm rate drift, so each sample of a case\n"
    "directly follows one sample of its limit, and the fraction is the median of\n"
    "those paired ratios.\n"
    "One thread's column (1t rate, 1t frac, 1t tgt): the decode cases (f32 at\n"
    "4096, 16384 and 32768 tokens and a window of 4096, bf16, int8, fp8, in cache,\n"
    "the contiguous batch and the paged ones with pages of 16 and 64,\n"
    "layer_decode_bf16w_dim4096), attention_prefill_f32_s2048,\n"
    "rope_f32, the limits they are judged by and their parts are measured again on\n"
    "one thread (OpenBLAS too) in the same run, each sample after one of its limit\n"
    "on one thread, so what one core does shows on any machine; with --threads 1\n"
    "the column repeats the run's.  The table's first lines and every JSON record\n"
    "name the machine: CPU, family and model, the library's SIMD kernels and their\n"
    "vector width, one core's L2, and the threads.\n"
    "\n"
    "  --json       print a JSON array of records instead of a table (notes go to\n"
    "               stderr): name, shape, median_seconds, bytes (memory-bound) or\n"
    "               flops (compute-bound), rate, rate_unit, limit_name, limit_rate,\n"
    "               fraction, target, torch_seconds, vs_torch, torch2_seconds,\n"
    "               vs_torch2, torch2_compiled_seconds; the layer adds parts,\n"
    "               parts_seconds, ratio_to_parts and parts_target; each, threads,\n"
    "               cpu, cpu_family, cpu_model, simd, vector_bits and one_thread:\n"
    "               null, or {threads 1, median_seconds, rate, limit_rate,\n"
    "               fraction, target, and with parts, parts_seconds and\n"
    "               ratio_to_parts}\n"
    "  --threads N  threads for the library, OpenBLAS and torch (default: one per\n"
    "               processor)\n"
    "  --only LIST  run only these cases (comma-separated); the limits they are\n"
    "               judged against (with their references), and the parts of\n"
    "               layer_forward_f32_s2048 and layer_backward_f32_s2048, run too\n"
    "  --repeats N  timed samples per case (default 5; attention_prefill_f32_s8192,\n"
    "               about 2 s a run, and the torch code past 1 s a run take\n"
    "               at most 3)\n"
    "  --svg FILE   also draw each case's rate as a fraction of its limit, with its\n"
    "               target, as an SVG bar chart (written atomically); a thin bar\n"
    "               under it gives the one-thread column's, where measured\n"
    "  --no-torch   skip the comparison with Meta's LLaMA reference code in PyTorch\n"
    "\n"
    "cases:\n"
    "  the limits, each the fastest loop found for its bytes (64-byte vectors, two\n"
    "  streams a thread, 2 MiB pages, threads started once); bytes: read + written\n"
    "  copy                             y = x over rope_f32's q + k (80 MiB each),\n"
    "                                   with stores that bypass the caches\n"
    "  rmw, rmw40M                      x = a x + b in place over rope_f32's and\n"
    "                                   rope_bf16's q + k (80 and 40 MiB)\n"
    "  read32M, read64M, read128M,      a float sum over the K + V of a decode cache\n"
    "  read256M                         of 4096, 16384 bf16, 16384, 32768 f32 tokens\n"
    "  sgemm                            cblas_sgemm, [2048, 4096] x [4096, 4096]^T\n"
    "  stream_copy, stream_rmw, stream_rmw40M, stream_sum32M, stream_sum64M,\n"
    "  stream_sum128M, stream_sum256M   STREAM-style references: the plain C loop\n"
    "                                   over the same bytes (the sums add 64-bit\n"
    "                                   integers, which the compiler vectorizes),\n"
    "                                   run with each bandwidth limit as its part: the\n"
    "                                   limit's time over theirs (target <= 1.05)\n"
    "  rope_f32, rope_half_f32, rope_bf16, rope_oop_f32, rope_decode_f32\n"
    "  attention_prefill_f32_s512, attention_prefill_f32_s2048,\n"
    "  attention_prefill_f32_s8192      causal, B 1, H 32, Hkv 8, D 128; flops 2 B H S^2 D\n"
    "                                   (target 0.85 of sgemm, S 2048 on one thread too)\n"
    "  attention_prefill_bf16_s512, attention_prefill_bf16_s2048,\n"
    "  attention_prefill_bf16_s8192     the same with q, k and v in bf16 (out f32); S 2048\n"
    "                                   also as a ratio to the f32 case (target <= 1/1.5)\n"
    "  attention_prefill_f32_s32768     the same, for its peak memory beyond inputs and\n"
    "                                   outputs (target <= 64 MiB); about 30 s a run\n"
    "  attention_prefill_f32_s8192_w1024  the same with a sliding window of 1024 keys;\n"
    "                                   flops counted inside the window only\n"
    "  attention_prefill_f32_s2048_softcap, attention_prefill_f32_s2048_sinks\n"
    "                                   S 2048 with Gemma 2's soft-cap (50) or gpt-oss's\n"
    "                                   sinks, also as a ratio to\n"
    "                                   attention_prefill_f32_s2048 (target <= 1.1)\n"
    "  attention_prefill_f32_s2048_noncausal  S 2048 without the causal mask (an encoder's;\n"
    "                                   twice the flops), time / the causal case <= 2.2\n"
    "  attention_prefill_f32_s2048_halfmask  S 2048 causal, a bool attn_mask whose odd\n"
    "                                   64-key stripes are empty, time / plain <= 0.8\n"
    "  attention_prefill_f32_s2048_halfmask_f32  the same mask additive (f32: 0 and -Inf)\n"
    "  attention_backward_f32_s2048     its backward (dq, dk, dv) at S 2048; flops counted\n"
    "                                   as 2.5 times the forward's\n"
    "  attention_backward_f32_s2048_halfmask  its backward under the additive half mask,\n"
    "                                   time / the plain backward <= 0.8\n"
    "  layer_projections_f32_s2048      the layer's four projection GEMMs alone\n"
    "  layer_forward_f32_s2048          the whole layer, also as a ratio to\n"
    "                                   layer_projections_f32_s2048 +\n"
    "                                   attention_prefill_f32_s2048 (target <= 1.1)\n"
    "  layer_backward_f32_s2048         the layer's backward (dx, dW) after a training\n"
    "                                   forward, also as a ratio to\n"
    "                                   layer_forward_f32_s2048 (target <= 2.5)\n"
    "  attention_decode_f32_l16, attention_decode_f32_l4096,\n"
    "  attention_decode_f32_l16384, attention_decode_f32_l32768\n"
    "                                   one token, H 32, Hkv 8, D 128, against a cache\n"
    "                                   of L tokens; bytes: the K and V read\n"
    "                                   (targets: 0.85 of the read limit, 0.8 on one\n"
    "                                   thread)\n"
    "  attention_decode_bf16_l16384     the same in bf16, judged by read64M, also as a\n"
    "                                   ratio to the f32 case (target <= 0.55)\n"
    "  attention_decode_int8_l16384, attention_decode_fp8_l16384\n"
    "                                   the same in 8 bits, judged by read32M (their\n"
    "                                   codes' bytes), also as a ratio to the f32 case\n"
    "                                   (target <= 0.3, on one thread too)\n"
    "  attention_decode_f32_incache, attention_decode_bf16_incache,\n"
    "  attention_decode_int8_incache, attention_decode_fp8_incache\n"
    "                                   one kv head and its 4 query heads over a cache\n"
    "                                   of half of one core's L2 (sysfs): the kernel's\n"
    "                                   flops (4 D a key and head) against sgemm, on\n"
    "                                   one thread against sgemm on one thread; far\n"
    "                                   above the from-memory rate: bound by memory\n"
    "  attention_decode_f32_w4096_l32768\n"
    "                                   a sliding-window layer (W 4096) at token 32768,\n"
    "                                   its cache a window cache; bytes: the window's\n"
    "                                   K and V\n"
    "  kv_append_rope_f32               one token's q, k rotated, k, v written\n"
    "  attention_decode_contig_f32_b32  32 sequences of 512..8192 f32 tokens, one query\n"
    "                                   each, in one cache of batch 32 (ragged lengths)\n"
    "  attention_decode_paged_f32_b32, attention_decode_paged_f32_b32_p64\n"
    "                                   the same tokens in a paged pool (pages of 16,\n"
    "                                   64), one call; the contiguous twin's bits, and\n"
    "                                   a ratio to its time (target <= 1.1); pages of\n"
    "                                   16 at 0.8 of read256M, on one thread too\n"
    "  serve_contig_bf16, serve_paged_bf16\n"
    "                                   a serving simulation (32 requests, continuous\n"
    "                                   batching, prefill + decode steps) on per-request\n"
    "                                   caches and on a pool; a run is the whole of it\n"
    "  attention_decode_mla_f32_l16384  a latent layer's absorbed decode step (dim 16):\n"
    "                                   DeepSeek-V3's 128 heads against a latent cache\n"
    "                                   of 16384 rows of 576 (compute-bound: judged\n"
    "                                   by sgemm, its flops those of scores and rows)\n"
    "  layer_forward_mla_f32_s2048      DeepSeek-V2-Lite's attention layer, S 2048\n"
    "  layer_decode_f32w_dim4096, layer_decode_bf16w_dim4096\n"
    "                                   a LLaMA-2-7B layer's decode step (weights f32,\n"
    "                                   bf16) over a window cache of 4096 f32 tokens;\n"
    "                                   bf16 at most 0.6 of f32's time, and 0.85 of\n"
    "                                   read128M over its weights and cache (0.8 on\n"
    "                                   one thread)\n"
    "  layer_forward_bf16w_s2048        the bf16-weight layer's prefill of 2048 tokens,\n"
    "                                   within 1.1 of layer_forward_f32_s2048\n"
    "\n"
    "Meta's LLaMA reference code in PyTorch: when /usr/bin/python3 can import torch,\n"
    "bench/seed_torch.py times its apply_rotary_emb on rope_f32's shape and its\n"
    "masked-softmax attention core (with repeat_kv) at S = 512 and 2048, at\n"
    "torch.set_num_threads(N),\n"
    "in a child process before the cases run.  Any failure there only drops the\n"
    "column, with a note.  Environment: RA_BENCH_PYTHON (interpreter),\n"
    "RA_BENCH_TORCH_SCRIPT (the script; default bench/seed_torch.py beside the build\n"
    "folder), RA_BENCH_TORCH_TIMEOUT (seconds before the child is killed; default 300,\n"
    "900 for PyTorch 2).\n"
    "\n"
    "PyTorch 2: when RA_BENCH_TORCH2 names an interpreter with torch 2 and\n"
    "transformers (e.g. .venv-hf/bin/python, scripts/setup-hf-venv.sh), bench/torch2.py\n"
    "times at the same thread count, in a child process before the cases run:\n"
    "scaled_dot_product_attention (is_causal, GQA by enable_gqa or transformers'\n"
    "repeat_kv, the faster) for attention_prefill_{f32,bf16}_s{512,2048,8192}; one\n"
    "query on cached k, v (enable_gqa or pack_gqa) for attention_decode_f32_l4096,\n"
    "attention_decode_f32_l16384 and attention_decode_bf16_l16384; transformers'\n"
    "Llama apply_rotary_pos_emb, eager and under torch.compile (a line under the\n"
    "row), for rope_half_f32.  RA_BENCH_TORCH2_SCRIPT: the script (default\n"
    "bench/torch2.py beside the build folder).  bench/torch2.py --e2e times a\n"
    "Llama-shaped model end to end (see docs/perf/2026-12-06-torch2.md).\n"
    "\n"
    "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE can force a slower sgemm kernel; when\n"
    "either is set the bench re-runs itself once without them.  Set\n"
    "RA_BENCH_REEXEC=keep to measure with them.\n";

#define MAX_CASES BENCH_MAX_CASES
#define DEFAULT_TORCH_TIMEOUT_S 300
#define DEFAULT_TORCH2_TIMEOUT_S 900
#define REEXEC_VAR "RA_BENCH_REEXEC"
#define REEXEC_MARK "removed"

static const char *const blas_env_vars[] = {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"};
#define N_BLAS_ENV_VARS 2

/* Every case, limits first so that the others can be judged against them. */
static int all_cases(const bench_case **cases)
{
    const bench_case *groups[] = {bench_limit_cases, bench_rope_cases, bench_attention_cases,
                                  bench_decode_cases, bench_paged_cases, bench_serve_cases,
                                  bench_mla_cases, bench_layer_decode_cases};
    const int counts[] = {bench_limit_case_count, bench_rope_case_count,
                          bench_attention_case_count, bench_decode_case_count,
                          bench_paged_case_count, bench_serve_case_count,
                          bench_mla_case_count, bench_layer_decode_case_count};
    int n = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (int i = 0; i < counts[g] && n < MAX_CASES; i++) cases[n++] = &groups[g][i];
    return n;
}

/* Re-executes this program once without the OpenBLAS variables; returns
 * only if there is nothing to remove or exec failed. */
static void reexec_without_blas_env(char **argv)
{
    if (getenv(REEXEC_VAR)) return;
    char removed[512] = REEXEC_MARK;
    for (int i = 0; i < N_BLAS_ENV_VARS; i++) {
        const char *value = getenv(blas_env_vars[i]);
        if (value)
            snprintf(removed + strlen(removed), sizeof removed - strlen(removed), " %s=%s",
                     blas_env_vars[i], value);
    }
    int set_timeout = getenv("OPENBLAS_THREAD_TIMEOUT") == NULL;
    if (strcmp(removed, REEXEC_MARK) == 0 && !set_timeout) return;
    char *saved[N_BLAS_ENV_VARS];
    for (int i = 0; i < N_BLAS_ENV_VARS; i++) {
        const char *value = getenv(blas_env_vars[i]);
        saved[i] = value ? strdup(value) : NULL;
        unsetenv(blas_env_vars[i]);
    }
    setenv(REEXEC_VAR, removed, 1);
    if (set_timeout) setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* exec failed: measure with the environment as given. */
    for (int i = 0; i < N_BLAS_ENV_VARS; i++) {
        if (saved[i]) setenv(blas_env_vars[i], saved[i], 1);
        free(saved[i]);
    }
    if (set_timeout) unsetenv("OPENBLAS_THREAD_TIMEOUT");
    setenv(REEXEC_VAR, "exec-failed", 1);
}

/* Notes on the library's SIMD path, and on OpenBLAS: which core it uses and
 * why. */
static void print_notes(FILE *to)
{
    const char *forced = getenv("RA_FORCE_ISA");
    if (forced)
        fprintf(to, "note: simd %s (capped by RA_FORCE_ISA=%s)\n", ra_simd_name(), forced);
    else
        fprintf(to, "note: simd %s (the best this CPU and OS support)\n", ra_simd_name());
    fprintf(to, "note: %s, core %s\n", openblas_get_config(), openblas_get_corename());
    const char *timeout = getenv("OPENBLAS_THREAD_TIMEOUT");
    if (timeout)
        fprintf(to, "note: OPENBLAS_THREAD_TIMEOUT=%s: OpenBLAS's idle workers sleep soon "
                "instead of spinning beside the library's threads\n", timeout);
    const char *reexec = getenv(REEXEC_VAR);
    if (reexec && strncmp(reexec, REEXEC_MARK " ", strlen(REEXEC_MARK) + 1) == 0) {
        fprintf(to, "note: re-ran itself without%s (they force a slower sgemm kernel); set "
                REEXEC_VAR "=keep to measure with them\n", reexec + strlen(REEXEC_MARK));
        return;
    }
    for (int i = 0; i < N_BLAS_ENV_VARS; i++) {
        const char *value = getenv(blas_env_vars[i]);
        if (value)
            fprintf(to, "note: %s=%s is set: sgemm (the limit and the layer's projections) is "
                    "measured with it, which may be slower than this CPU allows\n",
                    blas_env_vars[i], value);
    }
}

/* Whether name is one of the comma-separated parts. */
static int is_part(const char *parts, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = parts; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0')) return 1;
    return 0;
}

/* Marks the cases --only names, the parts of those with parts, and the
 * limits they are judged by. */
static int select_cases(const char *only, const bench_case **cases, int n, int *selected)
{
    for (int i = 0; i < n; i++) selected[i] = only == NULL;
    if (!only) return 0;
    char *list = strdup(only), *save = NULL;
    if (!list) return cli_fail(EXIT_FAIL, "out of memory");
    int failed = 0;
    for (char *name = strtok_r(list, ",", &save); name && !failed;
         name = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(name, cases[i]->name) == 0) selected[i] = found = 1;
        if (!found)
            failed = cli_fail(EXIT_USAGE, "bench: unknown case '%s' in --only (see 'ropeattn-"
                              "bench --help')", name);
    }
    free(list);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n && selected[i]; j++) {
            if (cases[j]->measures != LIMIT_NONE && cases[j]->measures == cases[i]->judged_by)
                selected[j] = 1;
            if (cases[i]->parts && is_part(cases[i]->parts, cases[j]->name)) selected[j] = 1;
        }
    /* Parts may bring in limits of their own, and limits their references
     * (a limit's parts). */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n && selected[i]; j++) {
            if (cases[j]->measures != LIMIT_NONE && cases[j]->measures == cases[i]->judged_by)
                selected[j] = 1;
            if (cases[i]->measures != LIMIT_NONE && cases[i]->parts &&
                is_part(cases[i]->parts, cases[j]->name))
                selected[j] = 1;
        }
    return failed;
}

/* How many comma-separated parts; 0 for NULL. */
static int count_parts(const char *parts)
{
    int count = parts != NULL;
    for (const char *p = parts; p && *p; p++) count += *p == ',';
    return count;
}

/* Whether a selected case after i has case i among its parts. */
static int needed_later(const bench_case **cases, const int *selected, int n, int i)
{
    for (int j = i + 1; j < n; j++)
        if (selected[j] && cases[j]->parts && is_part(cases[j]->parts, cases[i]->name)) return 1;
    return 0;
}

typedef struct bench_settings {
    int json, torch;
    int repeats;
    const char *svg;
} bench_settings;

static double torch_timeout(double fallback)
{
    const char *text = getenv("RA_BENCH_TORCH_TIMEOUT");
    char *end = NULL;
    double value = text ? strtod(text, &end) : 0;
    return text && end != text && *end == '\0' && value > 0 ? value : fallback;
}

/* The PyTorch times of the selected cases: Meta's LLaMA code unless
 * settings->torch is 0, PyTorch 2 where RA_BENCH_TORCH2 names an
 * interpreter; NAN where not measured.  info->torch and info->torch2
 * point into the versions. */
static void time_torch(const bench_case **cases, const int *selected, int n,
                       const bench_settings *settings, bench_run_info *info,
                       double (*seconds)[MAX_CASES], double (*compiled)[MAX_CASES],
                       char (*versions)[128], FILE *notes)
{
    const char *seed_python = getenv("RA_BENCH_PYTHON"), *torch2_python = getenv("RA_BENCH_TORCH2");
    const bench_torch_options options[] = {
        {BENCH_SEED_TORCH, info->threads, settings->repeats,
         torch_timeout(DEFAULT_TORCH_TIMEOUT_S), seed_python ? seed_python : "/usr/bin/python3",
         getenv("RA_BENCH_TORCH_SCRIPT")},
        {BENCH_TORCH2, info->threads, settings->repeats, torch_timeout(DEFAULT_TORCH2_TIMEOUT_S),
         torch2_python, getenv("RA_BENCH_TORCH2_SCRIPT")}};
    const int wanted[] = {settings->torch, torch2_python && torch2_python[0]};
    for (int column = 0; column < 2; column++) {
        for (int i = 0; i < n; i++) seconds[column][i] = compiled[column][i] = NAN;
        versions[column][0] = '\0';
        if (wanted[column])
            bench_torch(cases, selected, n, &options[column], seconds[column], compiled[column],
                        versions[column], sizeof versions[column], notes);
    }
    info->torch = versions[0][0] ? versions[0] : NULL;
    info->torch2 = versions[1][0] ? versions[1] : NULL;
}

/* Whether case i is measured on one thread: it asks to be, or it is the
 * limit of a selected case that asks to be. */
static int wants_one_thread(const bench_case **cases, const int *selected, int n, int i)
{
    if (cases[i]->one_thread) return 1;
    for (int j = 0; j < n && cases[i]->measures != LIMIT_NONE; j++)
        if (selected[j] && cases[j]->one_thread && cases[j]->judged_by == cases[i]->measures)
            return 1;
    return 0;
}

/* r's one-thread column: p (with its limit and parts) measured again on
 * ctx1, OpenBLAS on one thread meanwhile; or, when the run itself is one
 * thread (ctx1 NULL), r's own figures. */
static int measure_one_thread(bench_prepared *p, bench_prepared *limit,
                              bench_prepared *const *parts, int n_parts, ra_context *ctx,
                              ra_context *ctx1, int repeats, bench_record *r)
{
    bench_record one = *r;
    int failed = 0;
    if (ctx1) {
        openblas_set_num_threads(1);
        failed = bench_measure(p, limit, parts, n_parts, ctx1, repeats, &one);
        openblas_set_num_threads(ra_context_threads(ctx));
    }
    r->one = (bench_one_thread){1,
                                one.median_seconds,
                                one.rate,
                                one.fraction,
                                one.limit_rate,
                                one.parts_seconds,
                                one.parts_ratio};
    return failed;
}

static int run_cases(const bench_case **cases, const int *selected, int n, ra_context *ctx,
                     ra_context *ctx1, const bench_settings *settings)
{
    bench_record records[MAX_CASES];
    double torch_seconds[2][MAX_CASES], compiled_seconds[2][MAX_CASES];
    char torch_versions[2][128];
    int n_records = 0;
    FILE *notes = settings->json ? stderr : stdout;
    bench_run_info info = {ra_context_threads(ctx), settings->repeats, ctx1 != NULL,
                           ra_simd_name(), NULL, NULL};
    fprintf(notes, "ropeattn bench: %d threads, median of %d timed samples after a warm-up, "
            "each right after a sample of its limit (and parts); the decode cases, "
            "prefill f32 S 2048, rope_f32 and their limits also on one thread\n", info.threads,
            info.repeats);
    print_notes(notes);
    time_torch(cases, selected, n, settings, &info, torch_seconds, compiled_seconds,
               torch_versions, notes);
    if (!settings->json) bench_print_table_header(&info);
    /* Limits stay prepared for the cases judged by them, parts for the cases
     * made of them. */
    bench_prepared limits[N_LIMITS] = {{0}}, kept[MAX_CASES] = {{0}};
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (!selected[i]) continue;
        const bench_case *c = cases[i];
        bench_prepared p;
        failed = bench_prepare(c, ctx, &p);
        if (failed) break;
        bench_prepared *limit = c->judged_by != LIMIT_NONE && limits[c->judged_by].c
                                    ? &limits[c->judged_by]
                                    : NULL;
        bench_prepared *parts[MAX_CASES];
        int n_parts = 0;
        for (int j = 0; j < i && c->parts; j++)
            if (kept[j].c && is_part(c->parts, cases[j]->name)) parts[n_parts++] = &kept[j];
        if (n_parts < count_parts(c->parts)) n_parts = 0; /* a part is missing: no ratio */
        bench_record *r = &records[n_records];
        failed = bench_measure(&p, limit, parts, n_parts, ctx, settings->repeats, r);
        if (!failed && wants_one_thread(cases, selected, n, i))
            failed = measure_one_thread(&p, limit, parts, n_parts, ctx, ctx1, settings->repeats,
                                        r);
        if (c->measures != LIMIT_NONE && !failed)
            limits[c->measures] = p;
        else if (needed_later(cases, selected, n, i) && !failed)
            kept[i] = p;
        else
            bench_release(&p);
        if (failed) break;
        r->torch_seconds = torch_seconds[BENCH_SEED_TORCH][i];
        r->torch2_seconds = torch_seconds[BENCH_TORCH2][i];
        r->torch2_compiled_seconds = compiled_seconds[BENCH_TORCH2][i];
        if (!settings->json) bench_print_table_row(r);
        n_records++;
    }
    for (int l = 0; l < N_LIMITS; l++) bench_release(&limits[l]);
    for (int i = 0; i < n; i++) bench_release(&kept[i]);
    if (failed) return failed;
    if (settings->json) bench_print_json(records, n_records, &info);
    if (settings->svg) {
        if (bench_write_svg(settings->svg, records, n_records, &info)) return EXIT_FAIL;
        fprintf(notes, "note: chart written to %s\n", settings->svg);
    }
    return EXIT_OK;
}

int cmd_bench(int argc, char **argv)
{
    int json = 0, no_torch = 0;
    int64_t threads = 0, repeats = 5;
    const char *only = NULL, *svg = NULL;
    const cli_option options[] = {
        CLI_FLAG_OPTION("--json", &json),
        CLI_INT_OPTION("--threads", &threads, 1, CLI_MAX_THREADS),
        CLI_STRING_OPTION("--only", &only),
        CLI_INT_OPTION("--repeats", &repeats, 1, 1000),
        CLI_STRING_OPTION("--svg", &svg),
        CLI_FLAG_OPTION("--no-torch", &no_torch),
    };
    switch (cli_parse("bench", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    const bench_case *cases[MAX_CASES];
    int selected[MAX_CASES];
    int n = all_cases(cases);
    int failed = select_cases(only, cases, n, selected);
    if (!failed && svg) { /* refused now, not after the whole run */
        cli_outputs check = {0};
        failed = cli_outputs_add(&check, "--svg", svg);
        cli_outputs_free(&check);
    }
    if (failed) return failed;
    reexec_without_blas_env(argv);
    ra_context *ctx = NULL, *ctx1 = NULL; /* ctx1: the one-thread column's, if ctx has more */
    failed = cli_context_create(&ctx, threads);
    if (!failed && ra_context_threads(ctx) > 1 && ra_context_create(&ctx1, 1) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "cannot create the one-thread context");
    bench_settings settings = {json, !no_torch, (int)repeats, svg};
    if (!failed) failed = run_cases(cases, selected, n, ctx, ctx1, &settings);
    ra_context_destroy(ctx1);
    ra_context_destroy(ctx);
    return failed;
}
