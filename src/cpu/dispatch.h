/*
 * dispatch.h — test-only control of the SIMD dispatch (cpu/dispatch.c), so
 * that a test program checks every SIMD path in one process
 * (tests/harness.h: ra_test_each_isa) instead of being run again under each
 * RA_FORCE_ISA.  Internal: hidden in the shared library, reachable from
 * programs linked with libropeattn.a; not part of the API in ropeattn.h.
 *
 * Not for concurrent use: switch only while no other thread is inside the
 * library.  A call in progress on another thread may finish on the kernels
 * it started with, and calls on different threads may use different ones;
 * nothing faults (the choice is one atomic pointer), but nothing promises
 * which path ran.  Programs that never call these see what they always did:
 * the kernels chosen once from the CPU and RA_FORCE_ISA.
 */
#ifndef RA_CPU_DISPATCH_H
#define RA_CPU_DISPATCH_H

/* The SIMD paths, in the order RA_FORCE_ISA caps them: each runs on every
 * CPU that runs the next.  Off x86-64 only RA_ISA_BASE (NEON on aarch64).
 * RA_ISA_AVX512BF16 and RA_ISA_AMX are avx512's kernels but the flash
 * forward, which runs q, k and v in bf16 on AVX512-BF16's dot products or
 * AMX-BF16's tiles (cpu/flash_bf16_impl.h). */
enum { RA_ISA_BASE, RA_ISA_AVX2, RA_ISA_AVX512, RA_ISA_AVX512BF16, RA_ISA_AMX, RA_ISA_COUNT };

/* The highest path this process may run: what the CPU and OS support,
 * capped by RA_FORCE_ISA.  Every path from RA_ISA_BASE up to it runs. */
int ra_cpu_isa_max(void);

/* isa's RA_FORCE_ISA spelling: "base", "avx2", "avx512", "avx512bf16",
 * "amx"; "?" past them. */
const char *ra_cpu_isa_name(int isa);

/* Every later call uses isa's kernels (as RA_FORCE_ISA=isa would have
 * chosen them) until the next switch.  Returns 0, or -1 and changes nothing
 * when isa is not in RA_ISA_BASE .. ra_cpu_isa_max(). */
int ra_cpu_force_isa(int isa);

/* Every later call uses the base kernels wrapped to note that one of them
 * ran, until the next switch; ra_cpu_kernels_ran() says whether one did
 * since this call.  The tests run their path-independent cases so, and
 * fail one that reaches a kernel (it would check one path of several). */
void ra_cpu_watch_kernels(void);
int ra_cpu_kernels_ran(void);

#endif
