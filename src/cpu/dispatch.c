/*
 * dispatch.c — pick the best kernels once: CPUID says what the processor
 * has, XGETBV whether the OS saves the wider registers, and RA_FORCE_ISA
 * (avx512, avx2 or base) may cap the choice for testing.  Any other
 * non-empty value caps it at base, the safest choice, and
 * ra_simd_check_environment reports it, so that a misspelt cap can never
 * pass for a test of the path it meant.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* 0 base, 1 AVX2 + FMA + F16C, 2 AVX-512 F/BW/VL/DQ as well. */
static int detect_level(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx) return 0;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return 0; /* XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int avx2 = (b >> 5) & 1;
    if (!(avx2 && fma && f16c)) return 0;
    int avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
    if (avx512 && (xcr0 & 0xe6) == 0xe6) return 2; /* opmask, ZMM_Hi256, Hi16_ZMM */
    return 1;
}
#endif

static const ra_kernels *selected;
static int force_unknown; /* RA_FORCE_ISA held a value not listed above */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void select_kernels(void)
{
    const char *force = getenv("RA_FORCE_ISA");
    int cap = 2; /* unset or empty: no cap */
    if (force && force[0] != '\0' && strcmp(force, "avx512") != 0) {
        cap = strcmp(force, "avx2") == 0 ? 1 : 0;
        force_unknown = cap == 0 && strcmp(force, "base") != 0;
    }
    selected = &ra_kernels_base;
#if defined(__x86_64__)
    int level = detect_level();
    if (level > cap) level = cap;
    if (level == 2) selected = &ra_kernels_avx512;
    else if (level == 1) selected = &ra_kernels_avx2;
#else
    (void)cap;
#endif
}

const ra_kernels *ra_kernels_get(void)
{
    pthread_once(&once, select_kernels);
    return selected;
}

RA_API const char *ra_simd_name(void) { return ra_kernels_get()->name; }

RA_API ra_status ra_simd_check_environment(void)
{
    ra_error_reset();
    ra_kernels_get();
    if (force_unknown)
        return ra_fail(RA_ERR_ARGUMENT, "RA_FORCE_ISA is not avx512, avx2, base or empty");
    return RA_OK;
}
