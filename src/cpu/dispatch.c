/*
 * dispatch.c — pick the best kernels once: CPUID says what the processor
 * has, XGETBV whether the OS saves the wider registers, and RA_FORCE_ISA
 * (amx, avx512bf16, avx512, avx2 or base) may cap the choice for testing.  Any other
 * non-empty value caps it at base, the safest choice, and
 * ra_simd_check_environment reports it, so that a misspelt cap can never
 * pass for a test of the path it meant.  The tests switch paths within one
 * process through cpu/dispatch.h (test-only; its header says what it does
 * not promise).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/dispatch.h"
#include "cpu/kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* 0 base, 1 AVX2 + FMA + F16C, 2 AVX-512 F/BW/VL/DQ as well, 3 AVX512-BF16
 * (CPUID leaf 7 subleaf 1, EAX bit 5; the same ZMM state) and AVX512-VNNI
 * (leaf 7 ECX bit 11: every CPU with the first has it) as well, 4
 * AMX-TILE and AMX-BF16 as well (leaf 7 EDX bits 24 and 22) with the OS's
 * tile state (XCR0 bits 17 and 18; Linux still asks each process to
 * request it: ra_cpu_amx_enable). */
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
    if (!avx512 || (xcr0 & 0xe6) != 0xe6) return 1; /* opmask, ZMM_Hi256, Hi16_ZMM */
    int amx = ((d >> 24) & 1) && ((d >> 22) & 1) && (xcr0 & 0x60000) == 0x60000;
    if (!((c >> 11) & 1)) return 2; /* no AVX512-VNNI */
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !((a >> 5) & 1)) return 2;
    return amx ? 4 : 3;
}

/* 1 on an AMD CPU (leaf 0's vendor) of family 25 (0x19: Zen 3, Zen 4) or
 * later (leaf 1's family, its extended family added), else 0. */
static int detect_zen(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    if (b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u) return 0; /* "AuthenticAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned family = (a >> 8) & 0xf;
    if (family == 0xf) family += (a >> 20) & 0xff;
    return family >= 0x19;
}
#endif

/* Atomic only for the test-only switch below: the tables are constants,
 * so a relaxed load (a plain load on x86-64 and aarch64) is all a call
 * costs, and a switch cannot tear the pointer. */
static _Atomic(const ra_kernels *) selected;
static int max_isa;       /* the highest path: the CPU's, capped by RA_FORCE_ISA */
static int force_unknown; /* RA_FORCE_ISA held a value not listed above */
static int zen;           /* detect_zen's */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static ra_kernels watching; /* ra_cpu_watch_kernels: base, noting use (below) */
#if defined(__x86_64__)
static ra_kernels avx512bf16, amx; /* avx512's, but the flash tasks: filled below */
#endif

static const ra_kernels *isa_kernels(int isa)
{
    (void)isa; /* base is all there is elsewhere */
#if defined(__x86_64__)
    if (isa == RA_ISA_AMX) return &amx;
    if (isa == RA_ISA_AVX512BF16) return &avx512bf16;
    if (isa == RA_ISA_AVX512) return &ra_kernels_avx512;
    if (isa == RA_ISA_AVX2) return &ra_kernels_avx2;
#endif
    return &ra_kernels_base;
}

static void select_kernels(void)
{
    const char *force = getenv("RA_FORCE_ISA");
    int cap = RA_ISA_AMX; /* unset or empty: no cap */
    if (force && force[0] != '\0' && strcmp(force, "amx") != 0) {
        cap = strcmp(force, "avx512bf16") == 0 ? RA_ISA_AVX512BF16
              : strcmp(force, "avx512") == 0 ? RA_ISA_AVX512
              : strcmp(force, "avx2") == 0 ? RA_ISA_AVX2
                                           : RA_ISA_BASE;
        force_unknown = cap == RA_ISA_BASE && strcmp(force, "base") != 0;
    }
    int level = RA_ISA_BASE;
#if defined(__x86_64__)
    level = detect_level();
    zen = detect_zen();
#endif
    max_isa = level < cap ? level : cap;
    /* Here, so that a thread that passed the once sees it: not a constant
     * expression, so the initializer below cannot hold it. */
    watching.name = ra_kernels_base.name;
#if defined(__x86_64__)
    avx512bf16 = ra_kernels_avx512;
    avx512bf16.name = "avx512bf16";
    avx512bf16.flash_task = ra_flash_task_avx512bf16;
    avx512bf16.flash_backward_task = ra_flash_backward_task_avx512bf16;
    avx512bf16.decode_q8_task = ra_decode_q8_task_vnni;
    amx = ra_kernels_avx512;
    amx.name = "amx";
    amx.flash_task = ra_flash_task_amx;
    amx.flash_backward_task = ra_flash_backward_task_amx;
    amx.decode_q8_task = ra_decode_q8_task_vnni;
#endif
    atomic_store_explicit(&selected, isa_kernels(max_isa), memory_order_relaxed);
}

const ra_kernels *ra_kernels_get(void)
{
    pthread_once(&once, select_kernels);
    return atomic_load_explicit(&selected, memory_order_relaxed);
}

#if defined(__x86_64__)
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_granted;

/* ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA (Linux 5.16, asm/prctl.h):
 * refused (the kernel's, or a thread's signal stack too small for the
 * tiles), or not Linux, the flash task keeps to vdpbf16ps. */
static void amx_request(void)
{
#if defined(__linux__)
    amx_granted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
}
#endif

int ra_cpu_amx_enable(void)
{
#if defined(__x86_64__)
    if (ra_kernels_get() != &amx) return 0;
    pthread_once(&amx_once, amx_request);
    return amx_granted;
#else
    return 0;
#endif
}

int ra_cpu_zen(void)
{
    pthread_once(&once, select_kernels);
    return zen;
}

/* ---- test-only: cpu/dispatch.h ------------------------------------------ */

int ra_cpu_isa_max(void)
{
    pthread_once(&once, select_kernels);
    return max_isa;
}

const char *ra_cpu_isa_name(int isa)
{
    static const char *const names[RA_ISA_COUNT] = {"base", "avx2", "avx512", "avx512bf16",
                                                    "amx"};
    return isa >= 0 && isa < RA_ISA_COUNT ? names[isa] : "?";
}

int ra_cpu_force_isa(int isa)
{
    if (isa < RA_ISA_BASE || isa > ra_cpu_isa_max()) return -1;
    atomic_store_explicit(&selected, isa_kernels(isa), memory_order_relaxed);
    return 0;
}

static atomic_int kernels_ran;

/* Loads first: the threads that find it set do not fight over its line. */
static void note_ran(void)
{
    if (!atomic_load_explicit(&kernels_ran, memory_order_relaxed))
        atomic_store_explicit(&kernels_ran, 1, memory_order_relaxed);
}

static void watch_flash(void *arg, int64_t task, int thread)
{
    note_ran();
    ra_kernels_base.flash_task(arg, task, thread);
}

static void watch_flash_backward(void *arg, int64_t task, int thread)
{
    note_ran();
    ra_kernels_base.flash_backward_task(arg, task, thread);
}

static void watch_rope(void *arg, int64_t task, int thread)
{
    note_ran();
    ra_kernels_base.rope_task(arg, task, thread);
}

static void watch_decode(void *arg, int64_t task, int thread)
{
    note_ran();
    ra_kernels_base.decode_task(arg, task, thread);
}

static void watch_decode_merge(void *arg, int64_t task, int thread)
{
    note_ran();
    ra_kernels_base.decode_merge_task(arg, task, thread);
}

static void watch_decode_q8(void *arg, int64_t task, int thread)
{
    note_ran();
    ra_kernels_base.decode_q8_task(arg, task, thread);
}

static void watch_softmax(void *arg, int64_t task, int thread)
{
    note_ran();
    ra_kernels_base.softmax_task(arg, task, thread);
}

static void watch_gemv16(void *arg, int64_t task, int thread)
{
    note_ran();
    ra_kernels_base.gemv16_task(arg, task, thread);
}

static void watch_widen16(float *dst, const uint16_t *src, int64_t n, int bf16)
{
    note_ran();
    ra_kernels_base.widen16(dst, src, n, bf16);
}

static ra_kernels watching = {
    .name = "base",
    .flash_task = watch_flash,
    .flash_backward_task = watch_flash_backward,
    .rope_task = watch_rope,
    .decode_task = watch_decode,
    .decode_merge_task = watch_decode_merge,
    .decode_q8_task = watch_decode_q8,
    .softmax_task = watch_softmax,
    .gemv16_task = watch_gemv16,
    .widen16 = watch_widen16,
};

void ra_cpu_watch_kernels(void)
{
    pthread_once(&once, select_kernels);
    atomic_store_explicit(&kernels_ran, 0, memory_order_relaxed);
    atomic_store_explicit(&selected, &watching, memory_order_relaxed);
}

int ra_cpu_kernels_ran(void) { return atomic_load_explicit(&kernels_ran, memory_order_relaxed); }

RA_API const char *ra_simd_name(void) { return ra_kernels_get()->name; }

RA_API ra_status ra_simd_check_environment(void)
{
    ra_error_reset();
    ra_kernels_get();
    if (force_unknown)
        return ra_fail(RA_ERR_ARGUMENT, "RA_FORCE_ISA is not amx, avx512bf16, avx512, avx2, base "
                       "or empty");
    return RA_OK;
}
