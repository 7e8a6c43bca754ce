/*
 * attention_masks.c — two library bugs fuzz/fuzz_attention.c found in
 * ra_attention's options, not yet fixed (src/ is not the fuzzers' to edit),
 * each as the smallest call that shows it.  Not part of the suite: once a
 * fix lands, move the case into tests/test_fuzz_regressions.c and give
 * the fuzzer back the values it now avoids (take_span's INT64_MAX chunk,
 * take_softcap's FLT_MAX).  Exits 1 if either shows.
 *
 *   make build/fuzz/libropeattn.a
 *   clang -std=c11 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
 *     -Iinclude tests/fuzz_findings/attention_masks.c build/fuzz/libropeattn.a \
 *     -fsanitize=fuzzer-no-link -lm -pthread -o /tmp/attention_masks && /tmp/attention_masks
 *
 * (1) chunk near INT64_MAX with leading padding: ra_mask_first_key
 *     (src/attention_internal.h) takes the ceiling of -rel / chunk as
 *     (-rel + chunk - 1) / chunk, which overflows int64 for a padding query
 *     i < lp once chunk > INT64_MAX - (lp - i): undefined behaviour
 *     (UBSan: "signed integer overflow: 1 + 9223372036854775807"), on both
 *     paths.  The header allows any chunk >= 1.
 * (2) soft-cap c near FLT_MAX on the flash path: vtanh (src/cpu/simd.h)
 *     returns x * p / q, and for |x| = |s / c| < 2.4e-36 the product x * p
 *     (p ~ 4.9e-3) is subnormal, so tanh loses up to c * 3e-43 absolute:
 *     logits off by ~2.5e-5 at c = FLT_MAX, where the reference is exact
 *     (c tanh(s / c) = s to float32 there).  Also 1 / c is subnormal for
 *     c > 2^126.  x * (p / q), and s / c rather than s * (1 / c), would keep
 *     the documented 4e-7.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "ropeattn.h"

/* out = attention of S = 3 tokens, one head of D = 2, on a path. */
static ra_status attend(float out[6], const ra_attention_options *o)
{
    static float q[6] = {0.01f, 0.02f, -0.03f, 0.01f, 0.02f, 0.05f};
    static float k[6] = {0.5f, -0.25f, 0.125f, 0.75f, -0.5f, 0.25f};
    static float v[6] = {0, 1, 1, 0, 2, -1};
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 3, 1, 2), tk = ra_tensor_4d(k, RA_F32, 1, 3, 1, 2);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, 3, 1, 2), to = ra_tensor_4d(out, RA_F32, 1, 3, 1, 2);
    return ra_attention(NULL, &to, &tq, &tk, &tv, o);
}

int main(void)
{
    /* (2): the soft-cap FLT_MAX must not move the flash path's out */
    ra_attention_options plain = ra_attention_options_init(), capped = plain;
    plain.path = capped.path = RA_PATH_FLASH;
    capped.softcap = FLT_MAX;
    float a[6], b[6];
    if (attend(a, &plain) != RA_OK || attend(b, &capped) != RA_OK) return 1;
    double worst = 0;
    for (int i = 0; i < 6; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    printf("(2) flash, softcap FLT_MAX vs none: max |out difference| %.3g\n", worst);
    fflush(stdout);
    int failed = worst > 1e-6;
    /* (1): under UBSan this aborts inside the call, on either path */
    static const uint8_t padding[3] = {0, 0, 1};
    for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
        ra_attention_options o = ra_attention_options_init();
        float out[6];
        o.path = (ra_attention_path)path;
        o.chunk = INT64_MAX;
        o.padding_mask = padding;
        ra_status st = attend(out, &o);
        printf("(1) path %d, chunk INT64_MAX: status %d, no overflow seen\n", path, (int)st);
    }
    return failed;
}
