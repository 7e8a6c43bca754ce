/*
 * rope_scaling.c — inverse frequencies and the attention factor for every
 * rope type, as Hugging Face transformers' modeling_rope_utils defines them,
 * but in double throughout (transformers forms them in float32).
 *
 * d is rotary_dim; theta_i = 1 / base^(2i/d) for i in [0, d/2) is the
 * default, which every other type adjusts.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "rope_internal.h"

/* A finite number no smaller than DBL_MIN: a subnormal factor or base
 * (1e-320) is refused as the command line refuses it. */
static int positive(double x) { return isfinite(x) && x >= DBL_MIN; }

/* The detail for a parameter that positive() refuses. */
static ra_status not_positive(const char *type, const char *field, double x)
{
    return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: %s: %s %g is not a finite number >= DBL_MIN",
                   type, field, x);
}

/* theta_i = 1 / base^(2i / d), as Meta's LLaMA code writes it (in double). */
static void default_frequencies(double *inv_freq, int64_t n_pairs, int64_t d, double base)
{
    for (int64_t i = 0; i < n_pairs; i++) inv_freq[i] = 1.0 / pow(base, (double)(2 * i) / (double)d);
}

/* Dynamic NTK: for L = max(seq_len, L0) the base grows to
 *   base * ((factor * L / L0) - (factor - 1))^(d / (d - 2))
 * which is the base itself while L <= L0. */
static ra_status dynamic_frequencies(const ra_rope_config *c, double *inv_freq, int64_t n_pairs)
{
    const ra_rope_config *s = c;
    if (!positive(s->factor)) return not_positive("dynamic", "factor", s->factor);
    if (s->max_position_embeddings <= 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: dynamic: max_position_embeddings %lld: "
                       "must be >= 1", (long long)s->max_position_embeddings);
    if (s->seq_len < 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: dynamic: seq_len %lld: must be >= 0",
                       (long long)s->seq_len);
    double l0 = (double)s->max_position_embeddings, d = (double)c->rotary_dim;
    double len = s->seq_len > s->max_position_embeddings ? (double)s->seq_len : l0;
    double base = c->theta;
    if (c->rotary_dim > 2) /* d = 2 has no exponent d / (d - 2); only theta_0 = 1 exists */
        base *= pow(s->factor * len / l0 - (s->factor - 1.0), d / (d - 2.0));
    if (!positive(base))
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: dynamic: theta %g, factor %g and "
                       "seq_len %lld make the base %g", c->theta, s->factor,
                       (long long)s->seq_len, base);
    default_frequencies(inv_freq, n_pairs, c->rotary_dim, base);
    return RA_OK;
}

static double yarn_mscale(double scale, double mscale)
{
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

/* The dimension (in [0, d)) whose wavelength makes `rotations` full turns
 * over the original context. */
static double yarn_correction_dim(double rotations, double d, double base, double original)
{
    return d * log(original / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

/* YaRN: theta_i / factor below the correction range, theta_i above it, a
 * linear ramp between; attention factor 0.1 ln(factor) + 1 unless given. */
static ra_status yarn_frequencies(const ra_rope_config *c, double *inv_freq, int64_t n_pairs,
                                  double *attention_factor)
{
    const ra_rope_config *s = c;
    int64_t original = s->original_max_position_embeddings > 0 ? s->original_max_position_embeddings
                                                               : s->max_position_embeddings;
    if (s->original_max_position_embeddings < 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: yarn: original_max_position_embeddings "
                       "%lld: must be >= 0", (long long)s->original_max_position_embeddings);
    if (original <= 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: yarn: max_position_embeddings %lld: "
                       "must be >= 1 without original_max_position_embeddings",
                       (long long)s->max_position_embeddings);
    double factor = s->factor;
    if (factor == 0 && s->max_position_embeddings > 0)
        factor = (double)s->max_position_embeddings / (double)original;
    if (!positive(factor)) return not_positive("yarn", "factor", factor);
    /* NaN fails these too: it is no "0, not given" */
    if (!(s->attention_factor >= 0))
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: yarn: attention_factor %g: must be >= 0",
                       s->attention_factor);
    if (!(s->beta_fast >= 0) || !(s->beta_slow >= 0))
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: yarn: %s %g: must be >= 0",
                       !(s->beta_fast >= 0) ? "beta_fast" : "beta_slow",
                       !(s->beta_fast >= 0) ? s->beta_fast : s->beta_slow);
    if (!isfinite(s->mscale) || !isfinite(s->mscale_all_dim))
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: yarn: %s %g is not finite",
                       isfinite(s->mscale) ? "mscale_all_dim" : "mscale",
                       isfinite(s->mscale) ? s->mscale_all_dim : s->mscale);
    if (s->attention_factor > 0)
        *attention_factor = s->attention_factor;
    else if (s->mscale != 0 && s->mscale_all_dim != 0)
        *attention_factor = yarn_mscale(factor, s->mscale) / yarn_mscale(factor, s->mscale_all_dim);
    else
        *attention_factor = yarn_mscale(factor, 1.0);
    double beta_fast = s->beta_fast > 0 ? s->beta_fast : 32.0;
    double beta_slow = s->beta_slow > 0 ? s->beta_slow : 1.0;
    if (!isfinite(beta_fast) || !isfinite(beta_slow) || beta_fast < beta_slow)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: yarn: beta_fast %g and beta_slow %g "
                       "(0: 32 and 1) must be finite, beta_fast >= beta_slow", beta_fast,
                       beta_slow);

    double d = (double)c->rotary_dim, base = c->theta;
    double low = yarn_correction_dim(beta_fast, d, base, (double)original);
    double high = yarn_correction_dim(beta_slow, d, base, (double)original);
    if (!s->yarn_no_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    low = low > 0 ? low : 0;
    high = high < d - 1 ? high : d - 1;
    if (low == high) high += 0.001; /* as transformers: no division by zero */
    for (int64_t i = 0; i < n_pairs; i++) {
        double extrapolation = 1.0 / pow(base, (double)(2 * i) / d);
        double interpolation = extrapolation / factor;
        double ramp = ((double)i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double keep = 1.0 - ramp; /* share of the unscaled frequency */
        inv_freq[i] = interpolation * (1.0 - keep) + extrapolation * keep;
    }
    return RA_OK;
}

/* Llama 3.1: wavelengths longer than original / low_freq_factor are divided
 * by factor, shorter than original / high_freq_factor kept, and those in
 * between interpolated smoothly.  With low_freq_factor >= high_freq_factor
 * (Llama 4 Scout has them equal) there is no band between, as in
 * transformers: each wavelength is divided or kept. */
static ra_status llama3_frequencies(const ra_rope_config *c, double *inv_freq, int64_t n_pairs)
{
    const ra_rope_config *s = c;
    if (!positive(s->factor)) return not_positive("llama3", "factor", s->factor);
    if (!positive(s->low_freq_factor))
        return not_positive("llama3", "low_freq_factor", s->low_freq_factor);
    if (!positive(s->high_freq_factor))
        return not_positive("llama3", "high_freq_factor", s->high_freq_factor);
    if (s->original_max_position_embeddings <= 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: llama3: original_max_position_embeddings "
                       "%lld: must be >= 1", (long long)s->original_max_position_embeddings);
    double original = (double)s->original_max_position_embeddings;
    double low_freq_wavelen = original / s->low_freq_factor;
    double high_freq_wavelen = original / s->high_freq_factor;
    default_frequencies(inv_freq, n_pairs, c->rotary_dim, c->theta);
    for (int64_t i = 0; i < n_pairs; i++) {
        double wavelen = 2.0 * M_PI / inv_freq[i];
        if (wavelen > low_freq_wavelen) {
            inv_freq[i] /= s->factor;
        } else if (!(wavelen < high_freq_wavelen) && s->low_freq_factor < s->high_freq_factor) {
            double smooth = (original / wavelen - s->low_freq_factor) /
                            (s->high_freq_factor - s->low_freq_factor);
            inv_freq[i] = (1.0 - smooth) * inv_freq[i] / s->factor + smooth * inv_freq[i];
        }
    }
    return RA_OK;
}

/* LongRoPE: theta_i / ext_i with the long factors once L exceeds the
 * original context, the short ones before; attention factor
 * sqrt(1 + ln(s) / ln(original)), s = factor or max / original. */
static ra_status longrope_frequencies(const ra_rope_config *c, double *inv_freq, int64_t n_pairs,
                                      double *attention_factor)
{
    const ra_rope_config *s = c;
    if (!s->short_factor || !s->long_factor)
        return ra_fail(RA_ERR_NULL, "ra_rope_config: longrope: %s is NULL",
                       s->short_factor ? "long_factor" : "short_factor");
    if (s->original_max_position_embeddings <= 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: longrope: "
                       "original_max_position_embeddings %lld: must be >= 1",
                       (long long)s->original_max_position_embeddings);
    if (s->seq_len < 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: longrope: seq_len %lld: must be >= 0",
                       (long long)s->seq_len);
    if (!(s->attention_factor >= 0)) /* NaN too */
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: longrope: attention_factor %g: must be "
                       ">= 0", s->attention_factor);
    if (s->factor < 0 || !isfinite(s->factor))
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: longrope: factor %g: must be a finite "
                       "number >= 0", s->factor);
    double original = (double)s->original_max_position_embeddings, factor = s->factor;
    if (factor == 0 && s->max_position_embeddings > 0)
        factor = (double)s->max_position_embeddings / original;
    if (s->attention_factor > 0)
        *attention_factor = s->attention_factor;
    else if (factor == 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: longrope: neither factor, "
                       "max_position_embeddings nor attention_factor is given");
    else
        *attention_factor = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log(original));
    const double *ext = s->seq_len > s->original_max_position_embeddings ? s->long_factor
                                                                          : s->short_factor;
    for (int64_t i = 0; i < n_pairs; i++)
        if (!positive(s->short_factor[i]) || !positive(s->long_factor[i])) {
            char field[40];
            int is_short = !positive(s->short_factor[i]);
            snprintf(field, sizeof field, "%s[%lld]", is_short ? "short_factor" : "long_factor",
                     (long long)i);
            return not_positive("longrope", field,
                                is_short ? s->short_factor[i] : s->long_factor[i]);
        }
    for (int64_t i = 0; i < n_pairs; i++)
        inv_freq[i] = 1.0 / (ext[i] * pow(c->theta, (double)(2 * i) / (double)c->rotary_dim));
    return RA_OK;
}

ra_status ra_rope_frequencies(const ra_rope_config *c, double *inv_freq, double *attention_factor)
{
    if (!positive(c->theta))
        return ra_fail(RA_ERR_THETA, "ra_rope_config: theta %g is not a finite number >= DBL_MIN",
                       c->theta);
    int64_t n_pairs = c->rotary_dim / 2;
    *attention_factor = 1.0;
    switch (c->type) {
    case RA_ROPE_DEFAULT:
        default_frequencies(inv_freq, n_pairs, c->rotary_dim, c->theta);
        return RA_OK;
    case RA_ROPE_LINEAR:
        if (!positive(c->factor)) return not_positive("linear", "factor", c->factor);
        default_frequencies(inv_freq, n_pairs, c->rotary_dim, c->theta);
        for (int64_t i = 0; i < n_pairs; i++) inv_freq[i] /= c->factor;
        return RA_OK;
    case RA_ROPE_DYNAMIC: return dynamic_frequencies(c, inv_freq, n_pairs);
    case RA_ROPE_YARN: return yarn_frequencies(c, inv_freq, n_pairs, attention_factor);
    case RA_ROPE_LLAMA3: return llama3_frequencies(c, inv_freq, n_pairs);
    case RA_ROPE_LONGROPE: return longrope_frequencies(c, inv_freq, n_pairs, attention_factor);
    default:
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: type %d is not a ra_rope_type",
                       (int)c->type);
    }
}

/* transformers forms a dynamic or longrope rope's frequencies from the
 * length of the sequence it rotates, L = its largest position + 1
 * (dynamic_rope_update, modeling_rope_utils.py):
 *   dynamic:  from max(L, L0), L0 = max_position_embeddings;
 *   longrope: the long factors when L > L_orig, else the short ones.
 * A rope made for seq_len therefore agrees with it on every sequence up to
 * max(seq_len, L0) tokens (dynamic), or up to L_orig (longrope with the
 * short factors); longer ones get other frequencies.  Longrope's long
 * factors hold for every length beyond L_orig, and the other types do not
 * depend on L. */
int64_t ra_rope_last_position(const ra_rope_config *c)
{
    if (c->type == RA_ROPE_DYNAMIC)
        return (c->seq_len > c->max_position_embeddings ? c->seq_len
                                                        : c->max_position_embeddings) - 1;
    if (c->type == RA_ROPE_LONGROPE && c->seq_len <= c->original_max_position_embeddings)
        return c->original_max_position_embeddings - 1;
    return RA_MAX_POSITION;
}
