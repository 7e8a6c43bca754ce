/* kernels_base.c — the kernel template compiled for base (flags: Makefile). */
#define RA_SIMD_BASE
#if defined(__aarch64__)
#define RA_BASE_NAME "neon"
#else
#define RA_BASE_NAME "sse2"
#endif
#include "cpu/flash_impl.h"

const ra_kernels ra_kernels_base = {RA_BASE_NAME, flash_task};
