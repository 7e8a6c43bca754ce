/* kernels_avx512bf16.c — the flash templates (forward and backward)
 * compiled for avx512 with AVX512-BF16 (flags: Makefile): their tasks run
 * q, k and v in bf16 on vdpbf16ps (cpu/flash_bf16_impl.h,
 * cpu/flash_backward_bf16_impl.h) and everything else as avx512's do; and
 * the decode template's task for quantize_q, its scores on AVX512-VNNI's
 * vpdpbusd (RA_DECODE_VNNI; cpu/decode_impl.h).  dispatch.c puts them in
 * copies of the avx512 table (the amx one takes this decode task too). */
#if defined(__x86_64__)
#define RA_SIMD_AVX512
#define RA_FLASH_BF16
#include "cpu/flash_impl.h"
#include "cpu/flash_backward_impl.h"
#define RA_DECODE_VNNI
#include "cpu/decode_impl.h"

void ra_flash_task_avx512bf16(void *arg, int64_t task, int thread)
{
    flash_task(arg, task, thread);
}

void ra_flash_backward_task_avx512bf16(void *arg, int64_t task, int thread)
{
    flash_backward_task(arg, task, thread);
}

void ra_decode_q8_task_vnni(void *arg, int64_t task, int thread)
{
    decode_task(arg, task, thread);
}
#endif
