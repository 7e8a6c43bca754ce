/*
 * kernels.h — the table of SIMD kernels, one instance per ISA, chosen once at
 * first use by dispatch.c (internal); the tests switch it (cpu/dispatch.h).
 *
 * Each instance comes from the same templates (*_impl.h) compiled with its
 * ISA's flags: kernels_avx512.c, kernels_avx2.c, and kernels_base.c (SSE2 on
 * x86-64, NEON on aarch64); kernels_avx512bf16.c and kernels_amx.c give
 * one flash task and one flash backward task each (kernels_avx512bf16.c
 * also the VNNI decode task of quantize_q), which dispatch.c puts in
 * copies of the avx512 table.
 * Setting RA_FORCE_ISA=amx|avx512bf16|avx512|avx2|base in the environment
 * caps the choice, for the tool and the tests alike.
 */
#ifndef RA_KERNELS_H
#define RA_KERNELS_H

#include "internal.h"

typedef struct ra_kernels {
    const char *name;
    /* One flash-attention task: arg is an ra_flash_job (cpu/attention_job.h). */
    void (*flash_task)(void *arg, int64_t task, int thread);
    /* One flash-attention backward task: arg is an ra_flash_backward_job
     * (cpu/attention_job.h). */
    void (*flash_backward_task)(void *arg, int64_t task, int thread);
    /* One rope task: arg is an ra_rope_job (cpu/rope_job.h). */
    void (*rope_task)(void *arg, int64_t task, int thread);
    /* One flash-decoding task and one merge task: arg is an ra_decode_job
     * (cpu/decode_job.h). */
    void (*decode_task)(void *arg, int64_t task, int thread);
    void (*decode_merge_task)(void *arg, int64_t task, int thread);
    /* decode_task for a job of quantize_q (its mask's): the same, or on
     * AVX512-VNNI's vpdpbusd (avx512bf16, amx), of the same bits. */
    void (*decode_q8_task)(void *arg, int64_t task, int thread);
    /* One block of rows of an online softmax: arg is an ra_softmax_job
     * (cpu/decode_job.h). */
    void (*softmax_task)(void *arg, int64_t task, int thread);
    /* One task of the 16-bit-weight GEMV: arg is an ra_gemv16_job (cpu/gemv16_job.h). */
    void (*gemv16_task)(void *arg, int64_t task, int thread);
    /* dst[0, n) = src[0, n) widened exactly: bfloat16 (bf16 1) or float16. */
    void (*widen16)(float *dst, const uint16_t *src, int64_t n, int bf16);
} ra_kernels;

extern const ra_kernels ra_kernels_base;
#if defined(__x86_64__)
extern const ra_kernels ra_kernels_avx2;
extern const ra_kernels ra_kernels_avx512;
/* avx512's flash task, with q, k and v in bf16 on AVX512-BF16 (vdpbf16ps),
 * and on AMX-BF16's tiles where the job allows (ra_flash_job's amx). */
void ra_flash_task_avx512bf16(void *arg, int64_t task, int thread);
void ra_flash_task_amx(void *arg, int64_t task, int thread);
/* avx512's flash backward task, with q, k and v in bf16 on the same units
 * (and AMX's where ra_flash_backward_job's amx allows). */
void ra_flash_backward_task_avx512bf16(void *arg, int64_t task, int thread);
void ra_flash_backward_task_amx(void *arg, int64_t task, int thread);
/* avx512's decode task for quantize_q's jobs, its scores on AVX512-VNNI
 * (compiled beside the avx512bf16 flash task: every CPU with AVX512-BF16
 * has AVX512-VNNI, and dispatch.c checks both). */
void ra_decode_q8_task_vnni(void *arg, int64_t task, int thread);
#endif

/* Whether the amx kernels may use AMX's tiles now: 1 once the kernels chosen
 * are amx's and Linux granted this process the tile data
 * (arch_prctl(ARCH_REQ_XCOMP_PERM), asked once, at the first call: a
 * process that never runs bf16 attention never asks), else 0. */
int ra_cpu_amx_enable(void);

/* 1 on an AMD CPU of family 25 (Zen 3) or later, else 0 (off x86-64 too):
 * the kernels' choices tuned on such a core (gemv16_impl.h's stream). */
int ra_cpu_zen(void);

/* The best kernels this CPU and OS support, within RA_FORCE_ISA (or those a
 * test switched to).  Callers fetch it per call, never keep it: a switch
 * must reach the next call. */
const ra_kernels *ra_kernels_get(void);

#endif
