/* kernels_avx2.c — the kernel template compiled for avx2 (flags: Makefile). */
#if defined(__x86_64__)
#define RA_SIMD_AVX2
#include "cpu/flash_impl.h"

const ra_kernels ra_kernels_avx2 = {"avx2", flash_task};
#endif
