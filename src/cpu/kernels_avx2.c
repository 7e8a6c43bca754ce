/* kernels_avx2.c — the kernel templates compiled for avx2 (flags: Makefile). */
#if defined(__x86_64__)
#define RA_SIMD_AVX2
#include "cpu/flash_impl.h"
#include "cpu/flash_backward_impl.h"
#include "cpu/rope_impl.h"
#include "cpu/decode_impl.h"
#include "cpu/softmax_impl.h"
#include "cpu/gemv16_impl.h"

const ra_kernels ra_kernels_avx2 = {
    .name = "avx2",
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
#endif
