/*
 * freqs.c — precompute_freqs_cis of Meta's LLaMA code, and the angle helper every
 * rope table entry comes from (the frequencies themselves: rope_scaling.c).
 *
 * Precision: angles are formed in double (m * theta_i has a relative error
 * of 2^-53, so an absolute error under 5e-7 for m <= 2^32) and cos/sin are
 * rounded to float once.  Forming m * theta_i in float32, as LLaMA's code does,
 * is off by ~5e-3 already at m = 1e5.
 */
#include <float.h>
#include <math.h>

#include "rope_internal.h"

/* theta_i = 1 / theta^(2i / dim), as Meta's LLaMA code writes it (in double). */
static double inverse_frequency(double theta, int64_t i, int64_t dim)
{
    return 1.0 / pow(theta, (double)(2 * i) / (double)dim);
}

/* A finite base no smaller than DBL_MIN, as ra_rope_create, the Python
 * package and the CLI take it: a subnormal one (1e-320) gives frequencies
 * near 1e240 whose angles hold no correct digit. */
static ra_status check_theta(double theta)
{
    if (isfinite(theta) && theta >= DBL_MIN) return RA_OK;
    return ra_fail(RA_ERR_THETA, "theta %g: must be a finite number > 0%s", theta,
                   theta > 0 && theta < DBL_MIN ? " and not subnormal (below DBL_MIN)" : "");
}

RA_API ra_status ra_precompute_freqs(float *cos_out, float *sin_out, int64_t dim, int64_t end,
                                     double theta)
{
    ra_error_reset();
    if (!cos_out || !sin_out) return ra_fail(RA_ERR_NULL, "%s is NULL", cos_out ? "sin" : "cos");
    if (dim <= 0) return ra_fail(RA_ERR_SIZE, "dim %lld: must be >= 1", (long long)dim);
    if (end <= 0) return ra_fail(RA_ERR_SIZE, "end %lld: must be >= 1", (long long)end);
    if (dim % 2) return ra_fail(RA_ERR_HEAD_DIM, "dim %lld is odd", (long long)dim);
    RA_TRY(check_theta(theta));
    if (end - 1 > RA_MAX_POSITION)
        return ra_fail(RA_ERR_POSITION, "end %lld exceeds the 2^32 + 1 positions", (long long)end);
    int64_t n_pairs = dim / 2, total;
    if (ra_mul(end, n_pairs, &total) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "end %lld * dim / 2 %lld: too many elements",
                       (long long)end, (long long)n_pairs);
    if (ra_floats_overlap(cos_out, total, sin_out, total))
        return ra_fail(RA_ERR_ARGUMENT, "cos overlaps sin");
    for (int64_t i = 0; i < n_pairs; i++) {
        double freq = inverse_frequency(theta, i, dim);
        for (int64_t m = 0; m < end; m++) {
            double angle = (double)m * freq;
            cos_out[m * n_pairs + i] = (float)cos(angle);
            sin_out[m * n_pairs + i] = (float)sin(angle);
        }
    }
    return RA_OK;
}

