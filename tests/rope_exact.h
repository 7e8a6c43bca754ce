/*
 * rope_exact.h — the fast rope (the SIMD kernels this process dispatched to)
 * against the scalar reference, bit for bit; shared by test_rope.c (every
 * x86 path) and test_neon.c (NEON under qemu-user).
 *
 *   test_fast_matches_reference: layouts, dtypes, strides, positions inside
 *     and beyond the table, directions, partial rotary, head_dim with vector
 *     tails and past one chunk of the cos/sin row, in and out of place, 1-3
 *     threads.
 *   test_mrope_fast_matches_reference: the same with M-RoPE's 3-D ids, every
 *     arrangement of the sections.
 *   test_axial_fast_matches_reference: the same with 2-D (row, column) ids,
 *     both frequency splits, either axis first.
 *   test_alignments: every start offset from a 64-byte boundary, short and
 *     long runs, in and out of place.
 *   test_rounding_sweep: every f16 and every bf16 value through the vector
 *     widening, rotation and rounding.
 */
#ifndef RA_TEST_ROPE_EXACT_H
#define RA_TEST_ROPE_EXACT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rope_internal.h"
#include "ropeattn.h"

/* A strided view inside a bigger buffer: token stride padded, heads apart. */
static ra_tensor padded_view(void *data, ra_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d,
                             int64_t pad)
{
    ra_tensor t = {data, dt, {b, s, h, d}, {0, 0, d + pad, 1}};
    t.stride[1] = h * (d + pad) + pad;
    t.stride[0] = s * t.stride[1] + pad;
    return t;
}

static int64_t view_elements(const ra_tensor *t)
{
    int64_t last = 0;
    for (int d = 0; d < 4; d++) last += (t->shape[d] - 1) * t->stride[d];
    return last + 1;
}

/* The shapes [B, S, heads, D] the fast path is compared on: D = 34 and 6
 * leave vector tails, D = 1030 spans two chunks of the cos/sin row. */
static const int64_t exact_shapes[][4] = {{1, 1, 1, 2},  {2, 7, 3, 8},   {1, 33, 4, 64},
                                          {3, 5, 2, 128}, {1, 70, 8, 6},  {2, 3, 1, 256},
                                          {1, 9, 3, 34},  {1, 3, 2, 1030}};

/* The contexts check_fast_exact runs on: the caller's thread (NULL), 2 and
 * 3 threads (three_contexts_destroy destroys them). */
static void three_contexts(ra_context *ctxs[3])
{
    ctxs[0] = NULL;
    CHECK(ra_context_create(&ctxs[1], 2) == RA_OK, "ctx");
    CHECK(ra_context_create(&ctxs[2], 3) == RA_OK, "ctx");
}

static void three_contexts_destroy(ra_context *ctxs[3])
{
    ra_context_destroy(ctxs[1]);
    ra_context_destroy(ctxs[2]);
}

/* x [B, S, heads, D] = sh of dtype dt (token stride padded by pad; values
 * from seed) rotated by rope at pos in direction dir: the fast path on each
 * of ctxs (1, 2, 3 threads; in place for even c, out of place for odd)
 * equal to the reference bit for bit; what names the case in a failure. */
static void check_fast_exact(ra_context *const ctxs[3], const ra_rope *rope, int dt,
                             const int64_t sh[4], int64_t pad, uint64_t seed,
                             const ra_positions *pos, ra_direction dir, const char *what)
{
    const size_t es = ra_dtype_size((ra_dtype)dt);
    ra_tensor probe = padded_view(NULL, (ra_dtype)dt, sh[0], sh[1], sh[2], sh[3], pad);
    const int64_t n = view_elements(&probe);
    float *src = malloc(sizeof(float) * n);
    void *in = malloc(es * n), *fast = malloc(es * n), *ref = malloc(es * n);
    ra_test_fill(src, n, seed);
    ra_convert(in, (ra_dtype)dt, src, RA_F32, n);
    for (int c = 0; c < 3; c++) {
        memcpy(fast, in, es * n);
        memcpy(ref, in, es * n);
        ra_tensor x = padded_view(in, (ra_dtype)dt, sh[0], sh[1], sh[2], sh[3], pad);
        ra_tensor yf = padded_view(fast, (ra_dtype)dt, sh[0], sh[1], sh[2], sh[3], pad);
        ra_tensor yr = padded_view(ref, (ra_dtype)dt, sh[0], sh[1], sh[2], sh[3], pad);
        ra_tensor *xf = c % 2 ? &x : &yf, *xr = c % 2 ? &x : &yr;
        CHECK(ra_rope_apply(ctxs[c], rope, &yf, xf, pos, dir) == RA_OK, "fast");
        CHECK(ra_rope_apply_reference(rope, &yr, xr, pos, dir) == RA_OK, "ref");
        CHECK(memcmp(fast, ref, es * n) == 0, "%s ctx %d differs", what, c);
    }
    free(src);
    free(in);
    free(fast);
    free(ref);
}

/* check_fast_exact for the cases of ids (M-RoPE's, axial's): variant's bit
 * 0 pads the token stride, variants 2 and 3 run the inverse; rope is then
 * destroyed. */
static void check_ids_variant(ra_context *const ctxs[3], ra_rope *rope, int dt,
                              const int64_t sh[4], int variant, uint64_t seed,
                              const ra_positions *pos, const char *what)
{
    check_fast_exact(ctxs, rope, dt, sh, variant & 1 ? 3 : 0, seed, pos,
                     variant >= 2 ? RA_INVERSE : RA_FORWARD, what);
    ra_rope_destroy(rope);
}

/* Fast path == reference, bit for bit, across layouts, dtypes, strides,
 * positions inside and beyond the table, directions and thread counts, on
 * exact_shapes. */
static void test_fast_matches_reference(void)
{
    const int64_t(*shapes)[4] = exact_shapes;
    ra_context *ctxs[3];
    three_contexts(ctxs);
    for (size_t si = 0; si < sizeof exact_shapes / sizeof exact_shapes[0]; si++)
        for (int layout = 0; layout < 2; layout++)
            for (int dt = 0; dt < 3; dt++)
                for (int variant = 0; variant < 4; variant++) {
                    const int64_t *sh = shapes[si];
                    ra_rope_config cfg = ra_rope_config_default(sh[3]);
                    cfg.layout = (ra_layout)layout;
                    cfg.table_size = 40; /* some positions fall beyond the table */
                    cfg.rotary_dim = variant == 3 && sh[3] >= 4 ? (sh[3] / 2) & ~(int64_t)1 : 0;
                    ra_rope *rope;
                    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
                    int64_t *ids = malloc(sizeof(int64_t) * sh[0] * sh[1]);
                    for (int64_t t = 0; t < sh[0] * sh[1]; t++) ids[t] = (t * 37 + 5) % 97;
                    ra_positions pos = {.struct_size = sizeof pos,
                                        .start = variant == 2 ? 0 : 11 + 13 * variant,
                                        .ids = variant == 2 ? ids : NULL};
                    char what[80];
                    snprintf(what, sizeof what, "shape %zu layout %d dtype %d variant %d", si,
                             layout, dt, variant);
                    check_fast_exact(ctxs, rope, dt, sh, variant & 1 ? 3 : 0,
                                     si * 100 + layout * 10 + dt, &pos,
                                     variant == 1 ? RA_INVERSE : RA_FORWARD, what);
                    free(ids);
                    ra_rope_destroy(rope);
                }
    three_contexts_destroy(ctxs);
}

/* M-RoPE sections for n pairs: arrangement 0 chunked halves and quarters,
 * 1 chunked with an empty height section, 2 interleaved (Qwen3-VL's rule at
 * its widest: height and width floor(n / 3) pairs each). */
static void mrope_sections(ra_rope_config *cfg, int64_t n, int arrangement)
{
    int64_t *s = cfg->mrope_section;
    cfg->mrope_interleaved = arrangement == 2;
    if (arrangement == 0) s[0] = n / 2, s[1] = (n - n / 2) / 2;
    if (arrangement == 1) s[0] = n / 3, s[1] = 0;
    if (arrangement == 2) s[1] = n / 3, s[2] = n / 3, s[0] = n - 2 * (n / 3);
    if (arrangement != 2) s[2] = n - s[0] - s[1];
}

/* M-RoPE, fast path == reference bit for bit: 3-D ids (an image's tokens,
 * components apart, and text tokens, components equal; inside and beyond
 * the table) in a [3, stride] array wider than the tokens, for each
 * arrangement of the sections, layout, dtype, direction, stride, partial
 * rotary and 1-3 threads, in and out of place.  Shapes as
 * test_fast_matches_reference's ([B, S, heads, D]); D = 1030's sections
 * span both chunks of the cos/sin row. */
static void test_mrope_fast_matches_reference(void)
{
    const int64_t(*shapes)[4] = exact_shapes;
    ra_context *ctxs[3];
    three_contexts(ctxs);
    for (size_t si = 0; si < sizeof exact_shapes / sizeof exact_shapes[0]; si++)
        for (int arrangement = 0; arrangement < 3; arrangement++)
            for (int layout = 0; layout < 2; layout++)
                for (int dt = 0; dt < 3; dt++) {
                    const int64_t *sh = shapes[si], tokens = sh[0] * sh[1];
                    const int variant = (int)(si + arrangement + layout + dt) % 4;
                    ra_rope_config cfg = ra_rope_config_default(sh[3]);
                    cfg.layout = (ra_layout)layout;
                    cfg.table_size = 40; /* some positions fall beyond the table */
                    cfg.rotary_dim = variant == 3 && sh[3] >= 4 ? (sh[3] / 2) & ~(int64_t)1 : 0;
                    mrope_sections(&cfg, (cfg.rotary_dim ? cfg.rotary_dim : sh[3]) / 2,
                                   arrangement);
                    ra_rope *rope;
                    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
                    const int64_t stride = tokens + 5 * (variant & 1);
                    /* every third token text (t, t, t), the others an image's
                     * (t, h, w) grid; -1 marks the stride's unused entries */
                    int64_t *ids = malloc(sizeof(int64_t) * 3 * stride);
                    for (int64_t e = 0; e < 3 * stride; e++) ids[e] = -1;
                    for (int64_t t = 0; t < tokens; t++) {
                        const int64_t base = (t * 37 + 5) % 97;
                        ids[t] = base;
                        ids[stride + t] = t % 3 ? base + t % 5 : base;
                        ids[2 * stride + t] = t % 3 ? (t * 11) % 53 : base;
                    }
                    ra_positions pos = {.struct_size = sizeof pos, .mrope_ids = ids,
                                        .mrope_stride = variant & 1 ? stride : 0};
                    char what[96];
                    snprintf(what, sizeof what, "mrope shape %zu arrangement %d layout %d dtype "
                             "%d variant %d", si, arrangement, layout, dt, variant);
                    check_ids_variant(ctxs, rope, dt, sh, variant,
                                      5000 + si * 100 + arrangement * 10 + dt, &pos, what);
                    free(ids);
                }
    three_contexts_destroy(ctxs);
}

/* 2-D (axial) RoPE, fast path == reference bit for bit: (row, column) ids
 * (components apart, and equal, where the fast path reads the table row
 * whole; inside and beyond the table), for both frequency splits, either
 * axis first, each layout and dtype, directions, strides, full and partial
 * rotary (rotary_dim the largest multiple of 4 that fits, or half of it)
 * and 1-3 threads, in and out of place.  Shapes as
 * test_fast_matches_reference's, D = 2 left out (no multiple of 4 fits). */
static void test_axial_fast_matches_reference(void)
{
    const int64_t(*shapes)[4] = exact_shapes;
    ra_context *ctxs[3];
    three_contexts(ctxs);
    for (size_t si = 0; si < sizeof exact_shapes / sizeof exact_shapes[0]; si++)
        for (int kind = RA_AXIAL_ALTERNATE; kind <= RA_AXIAL_SHARED; kind++)
            for (int layout = 0; layout < 2; layout++)
                for (int dt = 0; dt < 3; dt++) {
                    const int64_t *sh = shapes[si], tokens = sh[0] * sh[1];
                    const int variant = (int)(si + kind + layout + dt) % 4;
                    const int64_t rot = variant == 3 ? (sh[3] / 2) & ~(int64_t)3 : sh[3] & ~(int64_t)3;
                    if (rot == 0) continue;
                    ra_rope_config cfg = ra_rope_config_default(sh[3]);
                    cfg.layout = (ra_layout)layout;
                    cfg.table_size = 40; /* some positions fall beyond the table */
                    cfg.rotary_dim = rot;
                    cfg.axial = (ra_rope_axial)kind;
                    cfg.axial_column_first = (int)(si + dt) % 2;
                    ra_rope *rope;
                    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create: %s", ra_last_error());
                    /* every fourth token on the diagonal (row == column) */
                    int64_t *ids = malloc(sizeof(int64_t) * 2 * tokens);
                    for (int64_t t = 0; t < tokens; t++) {
                        ids[2 * t] = (t * 37 + 5) % 97;
                        ids[2 * t + 1] = t % 4 ? (t * 11) % 53 : ids[2 * t];
                    }
                    ra_positions pos = {.struct_size = sizeof pos, .axial_ids = ids};
                    char what[80];
                    snprintf(what, sizeof what, "axial shape %zu kind %d layout %d dtype %d "
                             "variant %d", si, kind, layout, dt, variant);
                    check_ids_variant(ctxs, rope, dt, sh, variant,
                                      7000 + si * 100 + kind * 10 + dt, &pos, what);
                    free(ids);
                }
    three_contexts_destroy(ctxs);
}

/* Where the data sits: x and out starting at every element offset from a
 * 64-byte boundary (the vector loops align on out, with an unaligned
 * vector at each end of a run that overlaps its neighbour, or fall back to
 * plain loops for short runs), for runs of a few to hundreds of pairs —
 * one head, or all heads of a token when they are contiguous — in and out
 * of place, every layout and dtype: fast == reference, bit for bit.
 *   x, out: [1, 3, heads, D] at element offsets ox, oy of 64-byte aligned
 *   buffers */
static void test_alignments(void)
{
    const int64_t dims[] = {2, 6, 8, 16, 34, 66, 96, 128}, head_counts[] = {1, 3, 4}, seq = 3;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (size_t hi = 0; hi < sizeof head_counts / sizeof head_counts[0]; hi++)
            for (int layout = 0; layout < 2; layout++)
                for (int dt = 0; dt < 3; dt++)
                    for (int64_t ox = 0; ox < 16; ox++) {
                        const int64_t d = dims[di], h = head_counts[hi], n = seq * h * d;
                        const int64_t oy = ox % 2 ? (ox * 5 + 3) % 16 : ox; /* odd: out of place */
                        const size_t es = ra_dtype_size((ra_dtype)dt);
                        ra_rope_config cfg = ra_rope_config_default(d);
                        cfg.layout = (ra_layout)layout;
                        cfg.table_size = 8; /* positions 5, 6, 7 */
                        ra_rope *rope;
                        CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
                        size_t bytes = ((size_t)(n + 16) * es + 63) / 64 * 64;
                        char *in = aligned_alloc(64, bytes), *fast = aligned_alloc(64, bytes);
                        char *ref = aligned_alloc(64, bytes);
                        float *src = malloc(sizeof(float) * (n + 16));
                        ra_test_fill(src, n + 16, (uint64_t)(di * 1000 + hi * 100 + ox));
                        ra_convert(in, (ra_dtype)dt, src, RA_F32, n + 16);
                        memcpy(fast, in, bytes);
                        memcpy(ref, in, bytes);
                        ra_tensor x = ra_tensor_4d(in + ox * es, (ra_dtype)dt, 1, seq, h, d);
                        ra_tensor yf = ra_tensor_4d(fast + oy * es, (ra_dtype)dt, 1, seq, h, d);
                        ra_tensor yr = ra_tensor_4d(ref + oy * es, (ra_dtype)dt, 1, seq, h, d);
                        ra_tensor xf = ox % 2 ? x : yf, xr = ox % 2 ? x : yr;
                        ra_positions pos = {.struct_size = sizeof pos, .start = 5};
                        CHECK(ra_rope_apply(NULL, rope, &yf, &xf, &pos, RA_FORWARD) == RA_OK,
                              "fast");
                        CHECK(ra_rope_apply_reference(rope, &yr, &xr, &pos, RA_FORWARD) == RA_OK,
                              "ref");
                        CHECK(memcmp(fast, ref, bytes) == 0,
                              "D %lld heads %lld layout %d dtype %d offsets %lld %lld differ",
                              (long long)d, (long long)h, layout, dt, (long long)ox, (long long)oy);
                        free(in);
                        free(fast);
                        free(ref);
                        free(src);
                        ra_rope_destroy(rope);
                    }
}

/* Every f16 and every bf16 bit pattern — zeros, subnormals, normals, Inf,
 * NaN — in one slot of a pair whose other slot holds a finite number, at
 * positions 0, 1 and 2 of ropes whose attention factor scales cos and sin
 * so that the float32 results land on rounding ties (1.25, 1 + 2^-11), in
 * the f16 subnormal range (1.5 * 2^-11), on both sides of the f16 overflow
 * boundary 65520 (1.25, 1.0001), on inexact products (1.2345678) and in the
 * f32 subnormal range (2^-130), then round back: the fast path equals the
 * reference bit for bit.
 *   x: [1, 2048, 1, 64], 65536 swept values and 65536 finite partners */
static void test_rounding_sweep(void)
{
    const double factors[] = {1.25, 1.0 + 0x1p-11, 0x1.8p-11, 1.0001, 1.2345678, 0x1p-130};
    const int64_t d = 64, pairs = d / 2, tokens = 65536 / pairs, n = tokens * d;
    /* 64-byte aligned, so that interleaved tokens go two in step
     * (cpu/rope_impl.h), as they do on aligned buffers */
    uint16_t *in = aligned_alloc(64, 2 * n), *fast = aligned_alloc(64, 2 * n);
    uint16_t *ref = aligned_alloc(64, 2 * n);
    float *partner = malloc(sizeof(float) * n);
    int64_t *ids = malloc(sizeof(int64_t) * tokens);
    for (int64_t t = 0; t < tokens; t++) ids[t] = t % 3;
    ra_test_fill(partner, n, 77);
    ra_positions pos = {.struct_size = sizeof pos, .ids = ids};
    for (int dt = RA_F16; dt <= RA_BF16; dt++)
        for (int layout = 0; layout < 2; layout++)
            for (int slot = 0; slot < 2; slot++)
                for (size_t f = 0; f < sizeof factors / sizeof factors[0]; f++) {
                    ra_rope_config cfg = ra_rope_config_default(d);
                    cfg.layout = (ra_layout)layout;
                    cfg.table_size = 4;
                    cfg.type = RA_ROPE_YARN;
                    cfg.factor = 4.0;
                    cfg.original_max_position_embeddings = 64;
                    cfg.attention_factor = factors[f];
                    ra_rope *rope;
                    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
                    ra_convert(in, (ra_dtype)dt, partner, RA_F32, n);
                    for (int64_t v = 0; v < 65536; v++) {
                        int64_t t = v / pairs, i = v % pairs;
                        int64_t ia = layout == RA_LAYOUT_INTERLEAVED ? 2 * i : i;
                        int64_t ib = layout == RA_LAYOUT_INTERLEAVED ? 2 * i + 1 : i + pairs;
                        in[t * d + (slot ? ib : ia)] = (uint16_t)v;
                    }
                    memcpy(fast, in, 2 * n);
                    ra_tensor x = ra_tensor_4d(in, (ra_dtype)dt, 1, tokens, 1, d);
                    ra_tensor yf = ra_tensor_4d(fast, (ra_dtype)dt, 1, tokens, 1, d);
                    ra_tensor yr = ra_tensor_4d(ref, (ra_dtype)dt, 1, tokens, 1, d);
                    /* in place for even factors, out of place for odd */
                    ra_tensor *xf = f % 2 ? &x : &yf;
                    CHECK(ra_rope_apply(NULL, rope, &yf, xf, &pos, RA_FORWARD) == RA_OK, "fast");
                    CHECK(ra_rope_apply_reference(rope, &yr, &x, &pos, RA_FORWARD) == RA_OK, "ref");
                    int64_t bad = 0;
                    for (int64_t e = 0; e < n; e++) bad += fast[e] != ref[e];
                    CHECK(bad == 0, "dtype %d layout %d slot %d factor %g: %lld values differ", dt,
                          layout, slot, factors[f], (long long)bad);
                    ra_rope_destroy(rope);
                }
    free(in);
    free(fast);
    free(ref);
    free(partner);
    free(ids);
}

#endif
