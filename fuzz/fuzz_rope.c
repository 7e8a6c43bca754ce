/*
 * fuzz_rope.c — the RoPE part of the C API on fuzzed arguments:
 * ra_rope_create (every type, layout, rotary_dim, theta, table size and
 * scaling parameter), ra_rope_table, ra_rope_apply on strided views of
 * every dtype, in place or not, with every form of positions, forward or
 * inverse, on the calling thread or two, and the seed's functions
 * (ra_precompute_freqs, ra_apply_rotary_emb, ra_repeat_kv).
 *
 * The fast path must return what the scalar reference
 * (ra_rope_apply_reference) returns, and on success write the same bits;
 * both must match this file's reading of the header (each token's position,
 * features past rotary_dim copied); a failure must be a documented status
 * and leave every buffer as it was; a call built only of valid arguments
 * must succeed.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "fuzz_positions.h"
#include "fuzz_views.h"
#include "rope_internal.h"

static ra_context *two_threads;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    FUZZ_CHECK(ra_context_create(&two_threads, 2) == RA_OK, "context");
    return 0;
}

static double take_parameter(fuzz_input *in)
{
    static const double values[] = {2, 1, 4, 8, 0.5, 1.25, 32, 40, 4096, 0, 1e-300, 1e300, -1,
                                    NAN, INFINITY};
    return take_range(in, 0, 15) == 15 ? take_double(in) : TAKE_ONE_OF(in, values);
}

static int64_t take_length(fuzz_input *in)
{
    static const int64_t values[] = {64, 4096, 16, 8192, 100000, 0, 0, -1};
    return TAKE_ONE_OF(in, values);
}

/* A rope configuration, its longrope factor lists in *factors (free it). */
static ra_rope_config take_config(fuzz_input *in, double **factors)
{
    static const int64_t dims[] = {2, 4, 6, 8, 8, 10, 16, 32, 34, 64, 66, 128, 514, 0, 3, -2};
    static const double thetas[] = {10000, 10000, 500000, 1e6, 2, 1, 0.5, 1e-3, 1e300, 0, -1,
                                    NAN, INFINITY};
    static const int64_t tables[] = {0, 1, 3, 8, 40, 100, -1, RA_MAX_POSITION + 2};
    ra_rope_config c = ra_rope_config_default(TAKE_ONE_OF(in, dims));
    c.type = (ra_rope_type)take_range(in, 0, RA_ROPE_TYPE_COUNT);
    c.layout = (ra_layout)take_range(in, 0, 8) % (RA_LAYOUT_COUNT + 1);
    int rot = take_range(in, 0, 7);
    c.rotary_dim = rot < 3 ? 0 : rot == 3 ? (c.head_dim / 2) & ~(int64_t)1 : rot == 4 ? 2
                 : rot == 5 ? c.head_dim : rot == 6 ? c.head_dim + 2 : 1;
    c.theta = take_range(in, 0, 15) == 15 ? take_double(in) : TAKE_ONE_OF(in, thetas);
    c.table_size = TAKE_ONE_OF(in, tables);
    ra_rope_config *s = &c;
    if (c.type != RA_ROPE_DEFAULT) {
        s->factor = take_parameter(in);
        s->original_max_position_embeddings = take_length(in);
        s->max_position_embeddings = take_length(in);
        s->seq_len = take_length(in);
        s->attention_factor = take_range(in, 0, 1) ? 0 : take_parameter(in);
        s->beta_fast = take_range(in, 0, 1) ? 0 : take_parameter(in);
        s->beta_slow = take_range(in, 0, 1) ? 0 : take_parameter(in);
        s->mscale = take_range(in, 0, 1) ? 0 : take_parameter(in);
        s->mscale_all_dim = take_range(in, 0, 1) ? 0 : take_parameter(in);
        s->yarn_no_truncate = take_range(in, 0, 1);
        s->low_freq_factor = take_parameter(in);
        s->high_freq_factor = take_parameter(in);
    }
    int64_t n = c.head_dim > 0 ? c.head_dim / 2 + 1 : 1; /* covers any accepted rotary_dim */
    *factors = malloc(2 * (size_t)n * sizeof **factors);
    for (int64_t i = 0; i < 2 * n; i++) {
        static const double f[] = {1, 1, 1.5, 4, 1.02, 0, -1, NAN};
        (*factors)[i] = TAKE_ONE_OF(in, f);
    }
    int lists = take_range(in, 0, 7);
    s->short_factor = lists != 7 ? *factors : NULL;
    s->long_factor = lists < 6 ? *factors + n : NULL;
    return c;
}

/* ra_rope_table against cos and sin formed here from the rope's own
 * frequencies (attention factor applied), or untouched outputs. */
static void check_table(fuzz_input *in, const ra_rope *rope, const double *inv_freq,
                        double af, int64_t n_pairs)
{
    int valid = 1;
    int64_t n = take_size(in, 5, &valid);
    int64_t positions[5], size = (n > 0 ? n : 1) * n_pairs;
    for (int64_t t = 0; t < n; t++)
        positions[t] = take_position(in, ra_rope_get_config(rope)->table_size, &valid);
    int beyond = 0; /* a position past a dynamic or longrope rope's length */
    for (int64_t t = 0; valid && t < n; t++)
        beyond |= positions[t] > rope_last_position(ra_rope_get_config(rope));
    float *cos_out = malloc((size_t)size * sizeof(float));
    float *sin_out = malloc((size_t)size * sizeof(float));
    for (int64_t i = 0; i < size; i++) cos_out[i] = sin_out[i] = 7.0f;
    ra_status st = ra_rope_table(rope, cos_out, sin_out, positions, n);
    if (beyond) FUZZ_CHECK(st == RA_ERR_POSITION, "a position past the rope's length: %d", (int)st);
    if (valid && !beyond) {
        FUZZ_CHECK(st == RA_OK, "ra_rope_table refused valid arguments: %d", (int)st);
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < n_pairs; i++) {
                double angle = (double)positions[t] * inv_freq[i];
                FUZZ_CHECK(cos_out[t * n_pairs + i] == (float)(cos(angle) * af) &&
                               sin_out[t * n_pairs + i] == (float)(sin(angle) * af),
                           "table at position %lld pair %lld", (long long)positions[t],
                           (long long)i);
            }
    } else {
        FUZZ_CHECK(st == RA_ERR_SIZE || st == RA_ERR_POSITION, "ra_rope_table: status %d", (int)st);
        for (int64_t i = 0; i < size; i++)
            FUZZ_CHECK(cos_out[i] == 7.0f && sin_out[i] == 7.0f, "a refused call wrote");
    }
    free(cos_out);
    free(sin_out);
}

/* out = R x as the header describes it, element by element (features past
 * rotary_dim copied), computed here with the rope's frequencies. */
static void expected_rotation(const ra_rope *rope, const double *inv_freq, double af,
                              const ra_tensor *y, const ra_tensor *x, const ra_positions *p,
                              float sign)
{
    const ra_rope_config *c = ra_rope_get_config(rope);
    const int64_t half = c->rotary_dim / 2, seq = x->shape[1];
    for (int64_t b = 0; b < x->shape[0]; b++)
        for (int64_t s = 0; s < seq; s++) {
            int64_t m = position_of(p, b * seq + s, seq);
            for (int64_t h = 0; h < x->shape[2]; h++) {
                int64_t xo = b * x->stride[0] + s * x->stride[1] + h * x->stride[2];
                int64_t yo = b * y->stride[0] + s * y->stride[1] + h * y->stride[2];
                for (int64_t i = 0; i < half; i++) {
                    double angle = (double)m * inv_freq[i];
                    float co = (float)(cos(angle) * af), si = sign * (float)(sin(angle) * af);
                    int64_t ia = c->layout == RA_LAYOUT_INTERLEAVED ? 2 * i : i;
                    int64_t ib = c->layout == RA_LAYOUT_INTERLEAVED ? 2 * i + 1 : i + half;
                    float a = load_elem(x->data, x->dtype, xo + ia);
                    float bv = load_elem(x->data, x->dtype, xo + ib);
                    store_elem(y->data, y->dtype, yo + ia, a * co - bv * si);
                    store_elem(y->data, y->dtype, yo + ib, a * si + bv * co);
                }
                for (int64_t j = c->rotary_dim; j < c->head_dim; j++)
                    store_elem(y->data, y->dtype, yo + j, load_elem(x->data, x->dtype, xo + j));
            }
        }
}

static void check_apply(fuzz_input *in, const ra_rope *rope, const double *inv_freq, double af)
{
    const ra_rope_config *c = ra_rope_get_config(rope);
    int valid = 1;
    ra_tensor x;
    x.dtype = (ra_dtype)take_range(in, 0, RA_DTYPE_COUNT * 4) % (RA_DTYPE_COUNT + 1);
    if ((unsigned)x.dtype >= RA_DTYPE_COUNT) valid = 0;
    x.shape[0] = take_size(in, 3, &valid);
    x.shape[1] = take_size(in, 9, &valid);
    x.shape[2] = take_size(in, 4, &valid);
    x.shape[3] = take_range(in, 0, 15) == 15 ? c->head_dim + 2 : c->head_dim;
    if (x.shape[3] != c->head_dim) valid = 0;
    int in_place = take_range(in, 0, 1);
    ra_tensor y = x;
    take_strides(in, &x, !in_place, &valid);
    if (in_place && take_range(in, 0, 15) == 15) {
        y = x; /* the same data with other strides: refused */
        y.stride[0] += 1;
        valid = 0;
    } else if (in_place)
        y = x;
    else
        take_strides(in, &y, 0, &valid);
    if (!in_place && take_range(in, 0, 15) == 15) {
        y.dtype = (ra_dtype)((x.dtype + 1) % RA_DTYPE_COUNT);
        valid = 0;
    }
    int64_t x_span = view_span(&x), y_span = view_span(&y), lead = take_range(in, 0, 3);
    if (x_span == 0 || y_span == 0) x_span = y_span = 1, valid = 0; /* refused before use */
    /* Out of place: another buffer, or after x in the same one (sharing
     * bytes with x when `overlap` is chosen, which is refused). */
    int shared = !in_place && take_range(in, 0, 3) == 3;
    int64_t overlap = shared && take_range(in, 0, 1) ? 1 + take_range(in, 0, x_span - 1) : 0;
    if (overlap) valid = 0;
    int64_t total = lead + x_span + (shared ? y_span - overlap : 0);
    size_t bytes, y_bytes = 0;
    void *buf = take_buffer(in, x.dtype, total, &bytes), *ybuf = NULL;
    x.data = (char *)buf + lead * (int64_t)(ra_dtype_size(x.dtype) ? ra_dtype_size(x.dtype) : 4);
    if (in_place) y.data = x.data;
    else if (shared) {
        size_t ye = ra_dtype_size(y.dtype) ? ra_dtype_size(y.dtype) : 4;
        size_t xe = ra_dtype_size(x.dtype) ? ra_dtype_size(x.dtype) : 4;
        int64_t at = (int64_t)(((size_t)(lead + x_span - overlap) * xe + ye - 1) / ye);
        if ((size_t)(at + y_span) * ye > bytes) { /* another dtype: keep it inside */
            y_span = 1, valid = 0;
            at = 0;
        }
        y.data = (char *)buf + at * (int64_t)ye;
    } else {
        ybuf = take_buffer(in, y.dtype, y_span, &y_bytes);
        y.data = ybuf;
    }

    fuzz_positions fp;
    take_positions(in, &fp, x.shape[0], x.shape[1], c->table_size, 1, &valid);
    ra_direction dir = (ra_direction)take_range(in, 0, 8) % 3;
    if ((unsigned)dir > RA_INVERSE) valid = 0;
    ra_context *ctx = take_range(in, 0, 1) ? two_threads : NULL;
    /* NULL: start 0 (the positions fp describes are then not used) */
    const ra_positions *pos = take_range(in, 0, 31) == 31 ? NULL : &fp.p;
    ra_positions zero = ra_positions_start(0);

    /* Three copies of the buffers: fast, reference, and what they held. */
    void *bufs[3] = {buf, malloc(bytes), malloc(bytes)}, *ybufs[3] = {ybuf, NULL, NULL};
    memcpy(bufs[1], buf, bytes);
    memcpy(bufs[2], buf, bytes);
    if (ybuf) {
        ybufs[1] = malloc(y_bytes), ybufs[2] = malloc(y_bytes);
        memcpy(ybufs[1], ybuf, y_bytes);
        memcpy(ybufs[2], ybuf, y_bytes);
    }
    ra_tensor xr = rebase(x, buf, bufs[1]);
    ra_tensor yr = ybuf ? rebase(y, ybuf, ybufs[1]) : rebase(y, buf, bufs[1]);
    /* positions past a dynamic or longrope rope's length: RA_ERR_POSITION */
    const int beyond = valid && pos &&
                       grid_last_position(pos, x.shape[0], x.shape[1]) > rope_last_position(c);
    if (beyond) valid = 0;
    ra_status fast = ra_rope_apply(ctx, rope, &y, &x, pos, dir);
    ra_status ref = ra_rope_apply_reference(rope, &yr, &xr, pos, dir);
    FUZZ_CHECK(fast == ref, "fast path status %d, reference %d", (int)fast, (int)ref);
    if (valid && pos) FUZZ_CHECK(fast == RA_OK, "valid arguments refused: %d", (int)fast);
    if (beyond) FUZZ_CHECK(fast == RA_ERR_POSITION, "a position past the rope's length: %d",
                           (int)fast);
    if (fast == RA_OK) {
        FUZZ_CHECK(memcmp(bufs[0], bufs[1], bytes) == 0 &&
                       (!ybuf || memcmp(ybufs[0], ybufs[1], y_bytes) == 0),
                   "fast path and reference differ (dtype %d, layout %d, rotary %lld of %lld)",
                   (int)x.dtype, (int)c->layout, (long long)c->rotary_dim, (long long)c->head_dim);
        /* this file's reading of the header, from the original input */
        ra_tensor xo = rebase(x, buf, bufs[2]);
        ra_tensor yo = ybuf ? rebase(y, ybuf, ybufs[2]) : rebase(y, buf, bufs[2]);
        expected_rotation(rope, inv_freq, af, &yo, &xo, pos ? pos : &zero,
                          dir == RA_INVERSE ? -1.0f : 1.0f);
        FUZZ_CHECK(memcmp(bufs[1], bufs[2], bytes) == 0 &&
                       (!ybuf || memcmp(ybufs[1], ybufs[2], y_bytes) == 0),
                   "the rotation is not what the header describes");
    } else {
        FUZZ_CHECK(fast == RA_ERR_NULL || fast == RA_ERR_SIZE || fast == RA_ERR_ARGUMENT ||
                       fast == RA_ERR_SHAPE || fast == RA_ERR_DTYPE || fast == RA_ERR_POSITION ||
                       fast == RA_ERR_OVERFLOW, "undocumented status %d", (int)fast);
        FUZZ_CHECK(memcmp(bufs[0], bufs[2], bytes) == 0 && memcmp(bufs[1], bufs[2], bytes) == 0 &&
                       (!ybuf || (memcmp(ybufs[0], ybufs[2], y_bytes) == 0 &&
                                  memcmp(ybufs[1], ybufs[2], y_bytes) == 0)),
                   "a refused call (status %d) wrote", (int)fast);
    }
    for (int i = 0; i < 3; i++) free(bufs[i]), free(ybufs[i]);
    fuzz_positions_free(&fp);
}

/* The seed's functions on a default interleaved rope over all of D:
 * ra_precompute_freqs must be its table at positions 0 .. end - 1, and
 * ra_apply_rotary_emb (contiguous f32, positions 0 .. S - 1) its rotation,
 * bit for bit; ra_repeat_kv must copy kv head h / n_rep into head h. */
static void check_seed_functions(fuzz_input *in, const ra_rope *rope)
{
    const ra_rope_config *c = ra_rope_get_config(rope);
    const int64_t d = c->head_dim, half = d / 2;
    int valid = 1;
    int64_t end = take_size(in, 9, &valid), b = take_size(in, 2, &valid);
    int64_t hkv = take_size(in, 2, &valid), rep = take_size(in, 3, &valid);
    if (!valid) return;
    float *cos_s = malloc((size_t)(end * half) * 4), *sin_s = malloc((size_t)(end * half) * 4);
    float *cos_t = malloc((size_t)(end * half) * 4), *sin_t = malloc((size_t)(end * half) * 4);
    int64_t *ids = malloc((size_t)end * sizeof *ids);
    for (int64_t m = 0; m < end; m++) ids[m] = m;
    FUZZ_CHECK(ra_precompute_freqs(cos_s, sin_s, d, end, c->theta) == RA_OK, "precompute");
    FUZZ_CHECK(ra_rope_table(rope, cos_t, sin_t, ids, end) == RA_OK, "table");
    FUZZ_CHECK(memcmp(cos_s, cos_t, (size_t)(end * half) * 4) == 0 &&
                   memcmp(sin_s, sin_t, (size_t)(end * half) * 4) == 0,
               "ra_precompute_freqs differs from the rope's table (D %lld, theta %g)",
               (long long)d, c->theta);
    int64_t nq = b * end * hkv * rep * d, nk = b * end * hkv * d;
    size_t bytes;
    float *q = take_buffer(in, RA_F32, nq, &bytes), *k = take_buffer(in, RA_F32, nk, &bytes);
    float *q2 = malloc((size_t)nq * 4), *k2 = malloc((size_t)nk * 4), *r = malloc((size_t)nq * 4);
    memcpy(q2, q, (size_t)nq * 4);
    memcpy(k2, k, (size_t)nk * 4);
    FUZZ_CHECK(ra_apply_rotary_emb(q, k, cos_s, sin_s, b, end, hkv * rep, hkv, d) == RA_OK, "seed");
    ra_tensor tq = ra_tensor_4d(q2, RA_F32, b, end, hkv * rep, d);
    ra_tensor tk = ra_tensor_4d(k2, RA_F32, b, end, hkv, d);
    ra_positions p = {.struct_size = sizeof p};
    FUZZ_CHECK(ra_rope_apply(NULL, rope, &tq, &tq, &p, RA_FORWARD) == RA_OK &&
                   ra_rope_apply(NULL, rope, &tk, &tk, &p, RA_FORWARD) == RA_OK, "apply");
    FUZZ_CHECK(memcmp(q, q2, (size_t)nq * 4) == 0 && memcmp(k, k2, (size_t)nk * 4) == 0,
               "ra_apply_rotary_emb differs from ra_rope_apply");
    FUZZ_CHECK(ra_repeat_kv(r, k, b, end, hkv, d, rep) == RA_OK, "repeat_kv");
    for (int64_t t = 0; t < b * end; t++)
        for (int64_t h = 0; h < hkv * rep; h++)
            FUZZ_CHECK(memcmp(r + (t * hkv * rep + h) * d, k + (t * hkv + h / rep) * d,
                              (size_t)d * 4) == 0, "repeat_kv head %lld", (long long)h);
    free(cos_s), free(sin_s), free(cos_t), free(sin_t), free(ids);
    free(q), free(k), free(q2), free(k2), free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    double *factors = NULL;
    ra_rope_config cfg = take_config(&in, &factors);
    ra_rope *rope = (ra_rope *)&rope;
    ra_status st = ra_rope_create(&rope, &cfg);
    if (st != RA_OK) {
        FUZZ_CHECK(st == RA_ERR_NULL || st == RA_ERR_SIZE || st == RA_ERR_HEAD_DIM ||
                       st == RA_ERR_ARGUMENT || st == RA_ERR_POSITION || st == RA_ERR_THETA ||
                       st == RA_ERR_OVERFLOW, "ra_rope_create: undocumented status %d", (int)st);
        FUZZ_CHECK(rope == NULL, "out not NULL after a failure");
        free(factors);
        return 0;
    }
    free(factors); /* the rope keeps copies */
    const ra_rope_config *c = ra_rope_get_config(rope);
    FUZZ_CHECK(c->rotary_dim == (cfg.rotary_dim ? cfg.rotary_dim : cfg.head_dim) &&
                   c->head_dim == cfg.head_dim && c->type == cfg.type &&
                   c->layout == cfg.layout && c->table_size == cfg.table_size,
               "the rope's config differs from the one given");
    int64_t n_pairs = c->rotary_dim / 2;
    double *inv_freq = malloc((size_t)n_pairs * sizeof *inv_freq);
    double af = ra_rope_attention_factor(rope);
    FUZZ_CHECK(ra_rope_inverse_frequencies(rope, inv_freq) == RA_OK, "inverse frequencies");
    FUZZ_CHECK(isfinite(af) && af > 0, "attention factor %g", af);
    for (int64_t i = 0; i < n_pairs; i++)
        FUZZ_CHECK(isfinite(inv_freq[i]) && inv_freq[i] >= 0, "theta_%lld = %g, type %d",
                   (long long)i, inv_freq[i], (int)c->type);
    check_table(&in, rope, inv_freq, af, n_pairs);
    if (c->type == RA_ROPE_DEFAULT && c->layout == RA_LAYOUT_INTERLEAVED &&
        c->rotary_dim == c->head_dim)
        check_seed_functions(&in, rope);
    for (int calls = 0; calls < 2 && in.n > 0; calls++) check_apply(&in, rope, inv_freq, af);
    free(inv_freq);
    ra_rope_destroy(rope);
    return 0;
}
