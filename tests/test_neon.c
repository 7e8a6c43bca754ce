/*
 * test_neon.c — the SIMD kernels as compiled for aarch64 (NEON), run under
 * qemu-user: `make neon-test` cross-compiles the library without the layer
 * (CBLAS) and the file formats (cJSON), links this program static and runs
 * it with qemu-aarch64.  Not part of the native build.
 *
 *   rope:  the fast path against the scalar reference, bit for bit
 *          (rope_exact.h, as test_rope.c checks every x86 path)
 *   flash: the flash path against the reference path, to 2e-5 of max|out|,
 *          with f32 and f16/bf16 keys and values
 *   flash backward: dq, dk, dv against the reference backward, to 1e-5 of
 *          max|grad| (tests/test_attention_backward.c says why)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rope_exact.h"
#include "ropeattn.h"

static void test_dispatch(void)
{
#if defined(__aarch64__)
    CHECK(strcmp(ra_simd_name(), "neon") == 0, "dispatched to %s", ra_simd_name());
#else
    CHECK(ra_simd_name()[0] != '\0', "no SIMD path name");
#endif
}

/* Causal GQA attention, flash against reference, on shapes that cross key
 * tiles and leave vector tails; keys and values in each storage type.
 *   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D] */
static void test_flash_matches_reference(void)
{
    const int64_t shapes[][5] = {/* B, S, H, Hkv, D */
                                 {1, 1, 1, 1, 2}, {2, 7, 4, 1, 16}, {1, 65, 8, 2, 32},
                                 {1, 130, 4, 4, 64}, {1, 70, 8, 1, 128}, {3, 17, 6, 3, 10}};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int dt = RA_F32; dt <= RA_BF16; dt++) {
            const int64_t *sh = shapes[t];
            int64_t b = sh[0], s = sh[1], h = sh[2], hkv = sh[3], d = sh[4];
            int64_t nq = b * s * h * d, nk = b * s * hkv * d;
            size_t es = ra_dtype_size((ra_dtype)dt);
            float *q = malloc(sizeof(float) * nq), *kv = malloc(sizeof(float) * 2 * nk);
            float *o_ref = malloc(sizeof(float) * nq), *o_fl = malloc(sizeof(float) * nq);
            void *kv_stored = malloc(es * 2 * nk);
            ra_test_fill(q, nq, 10 + t);
            ra_test_fill(kv, 2 * nk, 20 + t);
            for (int64_t i = 0; i < nq; i++) q[i] *= 3.0f; /* peakier softmax */
            ra_convert(kv_stored, (ra_dtype)dt, kv, RA_F32, 2 * nk);
            ra_tensor tq = ra_tensor_4d(q, RA_F32, b, s, h, d);
            ra_tensor tk = ra_tensor_4d(kv_stored, (ra_dtype)dt, b, s, hkv, d);
            ra_tensor tv = ra_tensor_4d((char *)kv_stored + es * nk, (ra_dtype)dt, b, s, hkv, d);
            ra_tensor t_ref = ra_tensor_4d(o_ref, RA_F32, b, s, h, d);
            ra_tensor t_fl = ra_tensor_4d(o_fl, RA_F32, b, s, h, d);
            CHECK(ra_attention(NULL, &t_ref, &tq, &tk, &tv, PATH_OPTS(RA_PATH_REFERENCE)) == RA_OK,
                  "ref");
            CHECK(ra_attention(ctx, &t_fl, &tq, &tk, &tv, PATH_OPTS(RA_PATH_FLASH)) == RA_OK,
                  "flash");
            double e = ra_test_max_rel_diff(o_fl, o_ref, nq);
            CHECK(e <= 2e-5, "shape %zu dtype %d: flash vs reference %.3g", t, dt, e);
            free(q);
            free(kv);
            free(o_ref);
            free(o_fl);
            free(kv_stored);
        }
    ra_context_destroy(ctx);
}

/* The flash backward against the reference backward on shapes that cross
 * query and key tiles, with GQA, odd D and f16/bf16 keys and values.
 *   q, out, dout, dq: [B, S, H, D]   k, v, dk, dv: [B, S, Hkv, D] */
static void test_flash_backward_matches_reference(void)
{
    const int64_t shapes[][5] = {/* B, S, H, Hkv, D */
                                 {1, 1, 1, 1, 2}, {2, 65, 4, 2, 16}, {1, 130, 4, 1, 64},
                                 {1, 70, 2, 2, 128}, {3, 17, 6, 3, 10}};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int dt = RA_F32; dt <= RA_BF16; dt++) {
            const int64_t *sh = shapes[t];
            int64_t b = sh[0], s = sh[1], h = sh[2], hkv = sh[3], d = sh[4];
            int64_t nq = b * s * h * d, nk = b * s * hkv * d;
            size_t es = ra_dtype_size((ra_dtype)dt);
            float *q = malloc(4 * nq), *dout = malloc(4 * nq), *o = malloc(4 * nq);
            float *lse = malloc(4 * b * h * s), *kv = malloc(4 * 2 * nk);
            float *grads = malloc(4 * 2 * (nq + 2 * nk)); /* reference, then flash */
            void *kv_stored = malloc(es * 2 * nk);
            ra_test_fill(q, nq, 30 + t);
            ra_test_fill(dout, nq, 40 + t);
            ra_test_fill(kv, 2 * nk, 50 + t);
            for (int64_t i = 0; i < nq; i++) q[i] *= 3.0f;
            ra_convert(kv_stored, (ra_dtype)dt, kv, RA_F32, 2 * nk);
            ra_tensor tq = ra_tensor_4d(q, RA_F32, b, s, h, d);
            ra_tensor tk = ra_tensor_4d(kv_stored, (ra_dtype)dt, b, s, hkv, d);
            ra_tensor tv = ra_tensor_4d((char *)kv_stored + es * nk, (ra_dtype)dt, b, s, hkv, d);
            ra_tensor to = ra_tensor_4d(o, RA_F32, b, s, h, d);
            ra_tensor tdo = ra_tensor_4d(dout, RA_F32, b, s, h, d);
            CHECK(ra_attention_forward_lse(ctx, &to, lse, &tq, &tk, &tv,
                                           PATH_OPTS(RA_PATH_FLASH)) == RA_OK,
                  "forward");
            for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
                float *g = grads + (path - RA_PATH_REFERENCE) * (nq + 2 * nk);
                ra_tensor dq = ra_tensor_4d(g, RA_F32, b, s, h, d);
                ra_tensor dk = ra_tensor_4d(g + nq, RA_F32, b, s, hkv, d);
                ra_tensor dv = ra_tensor_4d(g + nq + nk, RA_F32, b, s, hkv, d);
                CHECK(ra_attention_backward(ctx, &dq, &dk, &dv, &tdo, &tq, &tk, &tv, &to, lse,
                                            PATH_OPTS((ra_attention_path)path)) == RA_OK,
                      "backward");
            }
            const float *ref = grads, *fl = grads + nq + 2 * nk;
            double eq = ra_test_max_rel_diff(fl, ref, nq);
            double ek = ra_test_max_rel_diff(fl + nq, ref + nq, nk);
            double ev = ra_test_max_rel_diff(fl + nq + nk, ref + nq + nk, nk);
            CHECK(eq <= 1e-5 && ek <= 1e-5 && ev <= 1e-5,
                  "shape %zu dtype %d: dq %.3g dk %.3g dv %.3g", t, dt, eq, ek, ev);
            free(q); free(dout); free(o); free(lse); free(kv); free(grads); free(kv_stored);
        }
    ra_context_destroy(ctx);
}

/* On every path this process runs (harness.h): on aarch64, NEON alone. */
static void simd_cases(void)
{
    RUN(test_dispatch);
    RUN(test_fast_matches_reference);
    RUN(test_mrope_fast_matches_reference);
    RUN(test_axial_fast_matches_reference);
    RUN(test_alignments);
    RUN(test_rounding_sweep);
    RUN(test_flash_matches_reference);
    RUN(test_flash_backward_matches_reference);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("neon");
}
