/* kernels_avx512.c — the kernel template compiled for avx512 (flags: Makefile). */
#if defined(__x86_64__)
#define RA_SIMD_AVX512
#include "cpu/flash_impl.h"

const ra_kernels ra_kernels_avx512 = {"avx512", flash_task};
#endif
