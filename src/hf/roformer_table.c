/*
 * roformer_table.c — RoFormer's saved sinusoidal table
 * (roformer.encoder.embed_positions.weight, [max_position_embeddings,
 * head_dim]) checked against the formula the library rotates by.
 *
 * transformers' RoFormerSinusoidalPositionalEmbedding.create_weight:
 * column c < h = ceil(D / 2) holds sin(p / 10000^(2c / D)), column h + k
 * cos(p / 10000^(2k / D)), computed in float64 and rounded to the
 * parameter's dtype.  A checkpoint that saves the table is loaded with it
 * (create_weight runs only for a missing one), so a table that is not the
 * formula's would rotate by other angles: refused.  Tolerance: one unit in
 * the last place at 1 of the dtype it is saved in (float32 2^-23, float16
 * 2^-10, bfloat16 2^-7), above the rounding to it (half that) and libm's
 * sin and cos against numpy's (an ulp of float64).
 */
#include <math.h>
#include <string.h>

#include "hf/hf.h"

/* Element i of x as a double; x is F32, F64, F16 or BF16. */
static double element(const ra_st_tensor *x, int64_t i)
{
    const unsigned char *p = (const unsigned char *)x->data + (size_t)i * ra_st_dtype_size(x->dtype);
    uint16_t h;
    float f;
    double d;
    switch (x->dtype) {
    case RA_ST_F32: memcpy(&f, p, 4); return f;
    case RA_ST_F64: memcpy(&d, p, 8); return d;
    case RA_ST_F16: memcpy(&h, p, 2); return ra_f16_to_f32(h);
    default: memcpy(&h, p, 2); return ra_bf16_to_f32(h); /* RA_ST_BF16 */
    }
}

static ra_status check_table(const ra_st_tensor *x, int64_t n_pos, int64_t dim, const char *path)
{
    double tol = x->dtype == RA_ST_F16 ? 0x1p-10 : x->dtype == RA_ST_BF16 ? 0x1p-7 : 0x1p-23;
    if (x->dtype != RA_ST_F32 && x->dtype != RA_ST_F64 && x->dtype != RA_ST_F16 &&
        x->dtype != RA_ST_BF16)
        return hf_fail(RA_ERR_FORMAT, "%s: %s is %s: RoFormer's sinusoidal table holds float "
                       "values", path, x->name, ra_st_dtype_name(x->dtype));
    if (x->ndim != 2 || x->shape[0] != n_pos || x->shape[1] != dim)
        return hf_fail(RA_ERR_SHAPE, "%s: %s must be [%lld, %lld] (max_position_embeddings, "
                       "head_dim), as transformers loads it", path, x->name, (long long)n_pos,
                       (long long)dim);
    int64_t half = (dim + 1) / 2;
    for (int64_t p = 0; p < n_pos; p++)
        for (int64_t c = 0; c < dim; c++) {
            int64_t k = c < half ? c : c - half;
            double angle = (double)p / pow(10000.0, (double)(2 * k) / (double)dim);
            double want = c < half ? sin(angle) : cos(angle);
            double got = element(x, p * dim + c);
            if (!(fabs(got - want) <= tol))
                return hf_fail(RA_ERR_UNSUPPORTED, "%s: %s[%lld, %lld] is %.9g, and the "
                               "formula's (transformers' create_weight) %.9g: the library "
                               "rotates by the formula, and this table by other angles",
                               path, x->name, (long long)p, (long long)c, got, want);
        }
    return RA_OK;
}

ra_status hf_check_roformer_table(const ra_hf_checkpoint *ckpt, const ra_hf_config *config,
                                  int64_t head_dim)
{
    /* a model's (RoFormerForMaskedLM ...) and a bare RoFormerModel's */
    static const char *const names[] = {"roformer.encoder.embed_positions.weight",
                                        "encoder.embed_positions.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const ra_st_tensor *x = hf_find_tensor(ckpt, names[i], NULL);
        if (x)
            RA_HF_TRY(check_table(x, config->fields.max_position_embeddings, head_dim,
                                  ckpt->path));
    }
    return RA_OK;
}
