/*
 * test_rope_backward.c — RA_INVERSE is RoPE's backward: the exact adjoint
 * (transpose) of RA_FORWARD, for every layout, rope type (with its attention
 * factor a), full and partial rotary, f32/f16/bf16 storage, every way of
 * giving positions, in and out of place.
 *
 * Forward is y = a R x (per token, R a block rotation), so the backward of a
 * loss L(y) is dL/dx = a R^T dL/dy.  The test checks the defining identity
 *
 *   <a R x, g> = <x, a R^T g>        for random x, g
 *
 * which holds for one linear map only if the other is its transpose.
 *
 *   x, g: [B, S, H, D]
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { B = 2, S = 5, H = 3, D = 24, N = B * S * H * D };

/* A rope config for each type, scaled enough that a != 1 where the type has
 * an attention factor (yarn, longrope) and the frequencies move. */
static ra_rope_config config_for(ra_rope_type type, ra_layout layout, int64_t rotary_dim,
                                 const double *factors)
{
    ra_rope_config c = ra_rope_config_default(D);
    c.type = type;
    c.layout = layout;
    c.rotary_dim = rotary_dim;
    c.table_size = 8; /* positions 8 and up take the on-the-fly path */
    ra_rope_config *s = &c;
    switch (type) {
    case RA_ROPE_LINEAR: s->factor = 2.0; break;
    case RA_ROPE_DYNAMIC:
        s->factor = 2.0;
        s->max_position_embeddings = 16;
        s->seq_len = 40;
        break;
    case RA_ROPE_YARN:
        s->factor = 4.0;
        s->original_max_position_embeddings = 16;
        break;
    case RA_ROPE_LLAMA3:
        s->factor = 8.0;
        s->low_freq_factor = 1.0;
        s->high_freq_factor = 4.0;
        s->original_max_position_embeddings = 16;
        break;
    case RA_ROPE_LONGROPE:
        s->short_factor = factors;
        s->long_factor = factors + D / 2;
        s->original_max_position_embeddings = 16;
        s->max_position_embeddings = 64;
        s->seq_len = 40;
        break;
    default: break;
    }
    return c;
}

/* Inner product in double of two [N] buffers of the given dtype. */
static double inner(const void *a, const void *b, ra_dtype dt)
{
    float fa[N], fb[N];
    ra_convert(fa, RA_F32, a, dt, N);
    ra_convert(fb, RA_F32, b, dt, N);
    double s = 0;
    for (int i = 0; i < N; i++) s += (double)fa[i] * fb[i];
    return s;
}

/* y = rope(x) in the given direction, in place (through a copy of x) or out
 * of place; the positions given four ways that all place token (b, s). */
static ra_status apply(const ra_rope *rope, ra_context *ctx, void *y, const void *x, ra_dtype dt,
                       int in_place, const ra_positions *pos, ra_direction dir)
{
    ra_tensor tx = ra_tensor_4d((void *)x, dt, B, S, H, D), ty = ra_tensor_4d(y, dt, B, S, H, D);
    if (!in_place) return ra_rope_apply(ctx, rope, &ty, &tx, pos, dir);
    memcpy(y, x, (size_t)N * ra_dtype_size(dt));
    return ra_rope_apply(ctx, rope, &ty, &ty, pos, dir);
}

/* Tolerance: each output element is rounded once to the storage dtype
 * (relative eps/2: 2^-24 f32, 2^-11 f16, 2^-8 bf16) after float32
 * arithmetic (a few 2^-24), so each side of the identity is within
 * (eps/2 + 2^-22) a |x| |g| of exact (Cauchy-Schwarz, |R x| = |x|); the two
 * sides together within 2 (eps/2 + 2^-22) a |x| |g|. */
static double tolerance(ra_dtype dt, double a, double nx, double ng)
{
    double half_eps = dt == RA_F32 ? 0x1p-24 : dt == RA_F16 ? 0x1p-11 : 0x1p-8;
    return 2.0 * (half_eps + 0x1p-22) * a * nx * ng;
}

static void test_adjoint(void)
{
    double factors[D]; /* longrope: short factors then long ones, D/2 each */
    for (int i = 0; i < D; i++) factors[i] = 1.0 + 0.25 * i;
    float xf[N], gf[N];
    ra_test_fill(xf, N, 1);
    ra_test_fill(gf, N, 2);
    uint16_t x16[N], g16[N];
    unsigned char x[4 * N], g[4 * N], rx[4 * N], rg[4 * N];
    /* Positions: start 3; starts per row {0, 11}; ids in any order with a
     * repeat; cu_seqlens (two packed sequences of 4 and 6 tokens). */
    const int64_t starts[B] = {0, 11}, ids[B * S] = {7, 0, 30, 2, 2, 9, 1, 15, 4, 8};
    const int64_t cu[3] = {0, 4, 10}, cu_starts[2] = {5, 1};
    const ra_positions modes[] = {{.struct_size = sizeof(ra_positions),
                                   .start = 3}, {.struct_size = sizeof(ra_positions),
                                   .starts = starts}, {.struct_size = sizeof(ra_positions),
                                   .ids = ids},
                                  {.struct_size = sizeof(ra_positions), .cu_seqlens = cu,
                                   .starts = cu_starts, .n_seqs = 2}};
    const char *mode_names[] = {"start", "starts", "ids", "cu_seqlens"};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    int cases = 0;
    double worst = 0;
    for (int type = 0; type < RA_ROPE_TYPE_COUNT; type++)
        for (int layout = 0; layout < RA_LAYOUT_COUNT; layout++)
            for (int partial = 0; partial < 2; partial++) {
                ra_rope_config cfg = config_for((ra_rope_type)type, (ra_layout)layout,
                                                partial ? 10 : 0, factors);
                ra_rope *rope;
                ra_status st = ra_rope_create(&rope, &cfg);
                CHECK(st == RA_OK, "type %d: %s", type, ra_status_string(st));
                if (st != RA_OK) continue;
                double a = ra_rope_attention_factor(rope);
                CHECK(type == RA_ROPE_YARN || type == RA_ROPE_LONGROPE ? a > 1.0 : a == 1.0,
                      "type %d: attention factor %g", type, a);
                for (int dt = 0; dt < RA_DTYPE_COUNT; dt++) {
                    size_t bytes = (size_t)N * ra_dtype_size((ra_dtype)dt);
                    if (dt == RA_F32) {
                        memcpy(x, xf, bytes);
                        memcpy(g, gf, bytes);
                    } else {
                        ra_convert(x16, (ra_dtype)dt, xf, RA_F32, N);
                        ra_convert(g16, (ra_dtype)dt, gf, RA_F32, N);
                        memcpy(x, x16, bytes);
                        memcpy(g, g16, bytes);
                    }
                    double nx = sqrt(inner(x, x, (ra_dtype)dt)), ng = sqrt(inner(g, g, (ra_dtype)dt));
                    for (int m = 0; m < 4; m++)
                        for (int in_place = 0; in_place < 2; in_place++) {
                            ra_context *c = in_place ? NULL : ctx;
                            CHECK(apply(rope, c, rx, x, (ra_dtype)dt, in_place, &modes[m],
                                        RA_FORWARD) == RA_OK, "forward");
                            CHECK(apply(rope, c, rg, g, (ra_dtype)dt, in_place, &modes[m],
                                        RA_INVERSE) == RA_OK, "inverse");
                            double lhs = inner(rx, g, (ra_dtype)dt); /* <a R x, g> */
                            double rhs = inner(x, rg, (ra_dtype)dt); /* <x, a R^T g> */
                            double tol = tolerance((ra_dtype)dt, a, nx, ng);
                            CHECK(fabs(lhs - rhs) <= tol,
                                  "type %d layout %d partial %d dtype %d %s in_place %d: "
                                  "<Rx,g> %.9g vs <x,R'g> %.9g (tol %.3g)", type, layout,
                                  partial, dt, mode_names[m], in_place, lhs, rhs, tol);
                            worst = fmax(worst, fabs(lhs - rhs) / (a * nx * ng));
                            cases++;
                        }
                }
                ra_rope_destroy(rope);
            }
    ra_context_destroy(ctx);
    CHECK(cases == RA_ROPE_TYPE_COUNT * RA_LAYOUT_COUNT * 2 * RA_DTYPE_COUNT * 4 * 2, "%d cases",
          cases);
    printf("  adjoint: %d cases, worst |<Rx,g> - <x,R'g>| / (a |x| |g|) = %.2e\n", cases, worst);
}

/* The identity alone would also hold for R' = R^T plus anything orthogonal
 * to every (x, g) tried; a second check pins the map down: R^T (a R x) =
 * a^2 x exactly to rounding (a R is a scaled rotation), for a yarn rope with
 * a != 1 and partial rotary, where the pass-through features stay x. */
static void test_inverse_undoes_forward(void)
{
    ra_rope_config cfg = config_for(RA_ROPE_YARN, RA_LAYOUT_HALF, 10, NULL);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    double a = ra_rope_attention_factor(rope);
    float x[N], y[N];
    ra_test_fill(x, N, 3);
    ra_tensor tx = ra_tensor_4d(x, RA_F32, B, S, H, D), ty = ra_tensor_4d(y, RA_F32, B, S, H, D);
    ra_positions p = {.struct_size = sizeof p, .start = 100};
    CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, RA_FORWARD) == RA_OK, "forward");
    CHECK(ra_rope_apply(NULL, rope, &ty, &ty, &p, RA_INVERSE) == RA_OK, "inverse");
    double worst = 0;
    for (int i = 0; i < N; i++) {
        int rotary = i % D < 10;
        double want = rotary ? a * a * x[i] : x[i];
        worst = fmax(worst, fabs(y[i] - want));
        if (!rotary) CHECK(y[i] == x[i], "pass-through feature %d changed", i % D);
    }
    /* |x| <= 1 and a^2 ~ 1.3: float32 rounding of two rotations, ~1e-7 */
    CHECK(worst <= 1e-6, "R^T a R x differs from a^2 x by %.3g", worst);
    ra_rope_destroy(rope);
}

/* Both cases reach the SIMD kernels: each runs on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_adjoint);
    RUN(test_inverse_undoes_forward);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("rope_backward");
}
