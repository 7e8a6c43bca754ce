/* kernels_amx.c — the flash templates (forward and backward) compiled for
 * avx512 with AVX512-BF16 and AMX-BF16 (flags: Makefile): their tasks run
 * q, k and v in bf16 on AMX's tiles where the job says AMX is usable
 * (ra_cpu_amx_enable), else on vdpbf16ps (cpu/flash_bf16_impl.h,
 * cpu/flash_backward_bf16_impl.h), and everything else as avx512's do.
 * dispatch.c puts them in a copy of the avx512 table. */
#if defined(__x86_64__)
#define RA_SIMD_AVX512
#define RA_FLASH_BF16
#define RA_FLASH_AMX
#include "cpu/flash_impl.h"
#include "cpu/flash_backward_impl.h"

void ra_flash_task_amx(void *arg, int64_t task, int thread) { flash_task(arg, task, thread); }

void ra_flash_backward_task_amx(void *arg, int64_t task, int thread)
{
    flash_backward_task(arg, task, thread);
}
#endif
