/*
 * test_fuzz_regressions.c — the C API inputs on which the fuzzers (fuzz/)
 * found a broken promise, each fixed in the library and kept here so that
 * it stays fixed.  The file readers' findings are in test_io.c.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

/* ra_rope_create must refuse c with RA_ERR_ARGUMENT and leave *out NULL. */
static void expect_refused(const ra_rope_config *c, const char *what)
{
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, c);
    CHECK(st == RA_ERR_ARGUMENT && rope == NULL, "%s: status %d", what, (int)st);
    ra_rope_destroy(rope);
}

/* A rope whose parameters make the frequencies or the attention factor
 * non-finite, or the angles overflow before RA_MAX_POSITION, used to be
 * accepted and give tables of NaN; it is refused with RA_ERR_ARGUMENT. */
static void test_rope_nonfinite_frequencies(void)
{
    /* fuzz_config: yarn with rope_theta 1 divides by ln(1) = 0 */
    ra_rope_config c = ra_rope_config_default(14);
    c.type = RA_ROPE_YARN;
    c.theta = 1.0;
    c.scaling.factor = 40;
    c.scaling.original_max_position_embeddings = 4096;
    expect_refused(&c, "yarn, theta 1");
    /* fuzz_rope: linear with a subnormal factor makes theta_0 infinite */
    c = ra_rope_config_default(8);
    c.type = RA_ROPE_LINEAR;
    c.scaling.factor = 1e-320;
    expect_refused(&c, "linear, factor 1e-320");
    /* a tiny theta: theta_31 ~ 2e300, finite, but 2^32 theta_31 is not */
    c = ra_rope_config_default(64);
    c.theta = 1e-310;
    expect_refused(&c, "theta 1e-310");
    /* yarn's derived attention factor below zero */
    c = ra_rope_config_default(64);
    c.type = RA_ROPE_YARN;
    c.scaling.factor = 40;
    c.scaling.original_max_position_embeddings = 4096;
    c.scaling.mscale = -10;
    c.scaling.mscale_all_dim = 1;
    expect_refused(&c, "yarn, mscale -10");
    /* the same types with sane numbers still work, to the last position */
    c.scaling.mscale = 1;
    c.theta = 1e-3;
    ra_rope *rope = NULL;
    CHECK(ra_rope_create(&rope, &c) == RA_OK, "yarn, theta 1e-3");
    float cos[32], sin[32];
    int64_t last = RA_MAX_POSITION;
    if (rope == NULL) return;
    CHECK(ra_rope_table(rope, cos, sin, &last, 1) == RA_OK, "table");
    for (int i = 0; i < 32; i++) CHECK(isfinite(cos[i]) && isfinite(sin[i]), "pair %d", i);
    ra_rope_destroy(rope);
}

int main(void)
{
    RUN(test_rope_nonfinite_frequencies);
    return ra_test_summary("fuzz_regressions");
}
