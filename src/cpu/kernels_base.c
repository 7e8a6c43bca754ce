/* kernels_base.c — the kernel templates compiled for base (flags: Makefile). */
#define RA_SIMD_BASE
#if defined(__aarch64__)
#define RA_BASE_NAME "neon"
#else
#define RA_BASE_NAME "sse2"
#endif
#include "cpu/flash_impl.h"
#include "cpu/flash_backward_impl.h"
#include "cpu/rope_impl.h"
#include "cpu/decode_impl.h"
#include "cpu/softmax_impl.h"
#include "cpu/gemv16_impl.h"

const ra_kernels ra_kernels_base = {
    .name = RA_BASE_NAME,
    .flash_task = flash_task,
    .flash_backward_task = flash_backward_task,
    .rope_task = rope_task,
    .decode_task = decode_task,
    .decode_merge_task = decode_merge_task,
    .decode_q8_task = decode_task,
    .softmax_task = softmax_task,
    .gemv16_task = gemv16_task,
    .widen16 = widen16,
};
