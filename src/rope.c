/*
 * rope.c — the rope object (config, inverse frequencies, cos/sin table),
 * argument checks, and the fast rotation's split into tasks over tokens; the
 * task itself (SIMD, per ISA) is cpu/rope_impl.h, chosen by cpu/dispatch.c.
 *
 *   x, out: [B, S, heads, D] strided views; pair i of a head is
 *   (2i, 2i + 1) interleaved or (i, i + rotary_dim/2) half-split; features
 *   [rotary_dim, D) pass through unchanged.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"
#include "parallel.h"
#include "rope_internal.h"

/* Copies longrope's factor lists into the rope, so the caller's may go. */
static ra_status copy_longrope_factors(ra_rope *rope)
{
    ra_rope_config *s = &rope->config;
    if (rope->config.type != RA_ROPE_LONGROPE) {
        s->short_factor = s->long_factor = NULL;
        return RA_OK;
    }
    if (!s->short_factor || !s->long_factor)
        return ra_fail(RA_ERR_NULL, "ra_rope_config: longrope: %s is NULL",
                       s->short_factor ? "long_factor" : "short_factor");
    rope->short_long = ra_malloc(2 * (size_t)rope->n_pairs * sizeof(double));
    if (!rope->short_long) return ra_fail(RA_ERR_NOMEM, "allocating longrope's factor lists");
    memcpy(rope->short_long, s->short_factor, (size_t)rope->n_pairs * sizeof(double));
    memcpy(rope->short_long + rope->n_pairs, s->long_factor, (size_t)rope->n_pairs * sizeof(double));
    s->short_factor = rope->short_long;
    s->long_factor = rope->short_long + rope->n_pairs;
    return RA_OK;
}

/* Every angle m * theta_i for m up to RA_MAX_POSITION must be a finite
 * number and the attention factor in (0, FLT_MAX], so that cos and sin
 * times it are finite float32 numbers; parameters whose numbers overflow
 * (yarn with theta 1 or mscale 1e58, a factor of 1e-320, a tiny theta)
 * would otherwise give tables of NaN or Inf. */
static ra_status check_frequencies(const ra_rope *rope)
{
    double af = rope->attention_factor;
    if (!(af > 0 && af <= FLT_MAX))
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: the attention factor %g (given or "
                       "derived) is not in (0, FLT_MAX]", af);
    for (int64_t i = 0; i < rope->n_pairs; i++)
        if (!(rope->inv_freq[i] >= 0 && isfinite(rope->inv_freq[i] * (double)RA_MAX_POSITION)))
            return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: theta %g and the type's parameters "
                           "give inverse frequency %lld = %g, whose angles overflow before 2^32",
                           rope->config.theta, (long long)i, rope->inv_freq[i]);
    return RA_OK;
}

RA_API ra_status ra_rope_create(ra_rope **out, const ra_rope_config *config)
{
    ra_error_reset();
    if (!out || !config) return ra_fail(RA_ERR_NULL, "%s is NULL", out ? "config" : "out");
    *out = NULL;
    ra_rope_config c;
    RA_TRY(RA_READ_STRUCT(c, config, ra_rope_config));
    if ((unsigned)c.type >= RA_ROPE_TYPE_COUNT)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: type %d is not a ra_rope_type",
                       (int)c.type);
    if ((unsigned)c.layout >= RA_LAYOUT_COUNT)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: layout %d is not a ra_layout",
                       (int)c.layout);
    if (c.head_dim <= 0)
        return ra_fail(RA_ERR_SIZE, "ra_rope_config: head_dim %lld: must be >= 1",
                       (long long)c.head_dim);
    if (c.rotary_dim < 0)
        return ra_fail(RA_ERR_SIZE, "ra_rope_config: rotary_dim %lld: must be >= 0",
                       (long long)c.rotary_dim);
    if (c.table_size < 0)
        return ra_fail(RA_ERR_SIZE, "ra_rope_config: table_size %lld: must be >= 0",
                       (long long)c.table_size);
    if (c.rotary_dim == 0) c.rotary_dim = c.head_dim;
    if (c.head_dim % 2)
        return ra_fail(RA_ERR_HEAD_DIM, "ra_rope_config: head_dim %lld is odd",
                       (long long)c.head_dim);
    if (c.rotary_dim % 2)
        return ra_fail(RA_ERR_HEAD_DIM, "ra_rope_config: rotary_dim %lld is odd",
                       (long long)c.rotary_dim);
    if (c.rotary_dim > c.head_dim)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: rotary_dim %lld exceeds head_dim %lld",
                       (long long)c.rotary_dim, (long long)c.head_dim);
    if (c.table_size > RA_MAX_POSITION + 1)
        return ra_fail(RA_ERR_POSITION, "ra_rope_config: table_size %lld exceeds the 2^32 + 1 "
                       "positions", (long long)c.table_size);
    int64_t n_pairs = c.rotary_dim / 2, table;
    if (c.rotating_pairs < 0 || c.rotating_pairs > n_pairs)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: rotating_pairs %lld: must be in [0, "
                       "rotary_dim / 2 = %lld]", (long long)c.rotating_pairs, (long long)n_pairs);
    if (ra_mul(c.table_size, n_pairs, &table) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "ra_rope_config: table_size %lld * rotary_dim / 2 %lld: "
                       "too many elements", (long long)c.table_size, (long long)n_pairs);

    if (!(isfinite(c.theta) && c.theta > 0))
        return ra_fail(RA_ERR_THETA, "ra_rope_config: theta %g: must be a finite number > 0",
                       c.theta);
    /* Normal numbers only, as for every other positive parameter
     * (rope_scaling.c) and the CLI's --theta: a subnormal base is out of
     * range even where its frequencies stay finite (rotary_dim 2). */
    if (c.theta < DBL_MIN)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: theta %g is below DBL_MIN", c.theta);

    /* Frequencies first (they validate the type's parameters), the table
     * only once everything else has been accepted. */
    ra_rope *rope = ra_calloc(1, sizeof *rope);
    if (!rope) return ra_fail(RA_ERR_NOMEM, "allocating the rope");
    rope->config = c;
    rope->n_pairs = n_pairs;
    rope->inv_freq = ra_malloc((size_t)n_pairs * sizeof *rope->inv_freq);
    ra_status status = rope->inv_freq
                           ? copy_longrope_factors(rope)
                           : ra_fail(RA_ERR_NOMEM, "allocating the rope's frequencies");
    if (status == RA_OK)
        status = ra_rope_frequencies(&rope->config, rope->inv_freq, &rope->attention_factor);
    for (int64_t i = c.rotating_pairs; status == RA_OK && c.rotating_pairs && i < n_pairs; i++)
        rope->inv_freq[i] = 0.0; /* proportional RoPE: these pairs do not turn */
    if (status == RA_OK) status = check_frequencies(rope);
    rope->last_position = ra_rope_last_position(&rope->config);
    if (status == RA_OK) status = ra_rope_axial_init(rope);
    if (status == RA_OK) status = ra_rope_mrope_init(rope);
    if (status == RA_OK && table) { /* cos and sin rows alternate (rope_job.h) */
        if (ra_mul(table, 2 * (int64_t)sizeof(float), &table) != RA_OK)
            status = ra_fail(RA_ERR_OVERFLOW, "ra_rope_config: table_size %lld: the table's "
                             "bytes overflow", (long long)c.table_size);
        else if (!(rope->cos = ra_alloc((size_t)table)))
            status = ra_fail(RA_ERR_NOMEM, "allocating %zu bytes of rope tables", (size_t)table);
        else
            rope->sin = rope->cos + n_pairs;
    }
    if (status != RA_OK) {
        ra_rope_destroy(rope);
        return status;
    }
    for (int64_t m = 0; m < c.table_size; m++)
        ra_rope_angles(rope, m, 0, n_pairs, rope->cos + ra_rope_table_row(rope, m),
                       rope->sin + ra_rope_table_row(rope, m));
    *out = rope;
    return RA_OK;
}

void ra_rope_zero_angles(ra_rope *rope)
{
    for (int64_t i = 0; i < rope->n_pairs; i++) rope->inv_freq[i] = 0.0;
    rope->attention_factor = 1.0;
    rope->last_position = RA_MAX_POSITION; /* the identity, at every position */
    for (int64_t m = 0; m < rope->config.table_size; m++)
        ra_rope_angles(rope, m, 0, rope->n_pairs, rope->cos + ra_rope_table_row(rope, m),
                       rope->sin + ra_rope_table_row(rope, m));
}

RA_API void ra_rope_destroy(ra_rope *rope)
{
    if (!rope) return;
    ra_free(rope->inv_freq);
    ra_free(rope->short_long);
    ra_free(rope->component);
    ra_free(rope->cos); /* sin included */
    ra_free(rope);
}

RA_API const ra_rope_config *ra_rope_get_config(const ra_rope *rope)
{
    return rope ? &rope->config : NULL;
}

RA_API ra_status ra_rope_inverse_frequencies(const ra_rope *rope, double *inv_freq)
{
    ra_error_reset();
    if (!rope || !inv_freq) return ra_fail(RA_ERR_NULL, "%s is NULL", rope ? "inv_freq" : "rope");
    memcpy(inv_freq, rope->inv_freq, (size_t)rope->n_pairs * sizeof(double));
    return RA_OK;
}

RA_API double ra_rope_attention_factor(const ra_rope *rope)
{
    return rope ? rope->attention_factor : 0.0;
}

ra_status ra_rope_check_last(const ra_rope *rope, int64_t last)
{
    if (last <= rope->last_position) return RA_OK;
    const ra_rope_config *c = &rope->config;
    const int dynamic = c->type == RA_ROPE_DYNAMIC;
    return ra_fail(RA_ERR_POSITION, "position %lld: a %s rope made for seq_len %lld (%s %lld) "
                   "rotates positions up to %lld only; transformers gives a sequence of "
                   "%lld tokens other frequencies: make the rope for that length",
                   (long long)last, dynamic ? "dynamic" : "longrope", (long long)c->seq_len,
                   dynamic ? "max_position_embeddings" : "original_max_position_embeddings",
                   (long long)(dynamic ? c->max_position_embeddings
                                       : c->original_max_position_embeddings),
                   (long long)rope->last_position, (long long)last + 1);
}

ra_status ra_rope_check_table_outputs(const float *cos_out, const float *sin_out,
                                      int64_t n_entries, const int64_t *positions,
                                      int64_t n_positions)
{
    size_t table = (size_t)n_entries * sizeof(float), ids = (size_t)n_positions * sizeof(int64_t);
    if (ra_bytes_overlap(cos_out, table, sin_out, table))
        return ra_fail(RA_ERR_ARGUMENT, "cos overlaps sin");
    if (ra_bytes_overlap(cos_out, table, positions, ids) ||
        ra_bytes_overlap(sin_out, table, positions, ids))
        return ra_fail(RA_ERR_ARGUMENT, "%s overlaps positions",
                       ra_bytes_overlap(cos_out, table, positions, ids) ? "cos" : "sin");
    return RA_OK;
}

RA_API ra_status ra_rope_table(const ra_rope *rope, float *cos_out, float *sin_out,
                               const int64_t *positions, int64_t n)
{
    ra_error_reset();
    if (!rope || !cos_out || !sin_out || !positions)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !rope ? "rope" : !cos_out ? "cos"
                                                  : !sin_out ? "sin" : "positions");
    if (rope->config.axial != RA_AXIAL_NONE)
        return ra_fail(RA_ERR_ARGUMENT, "the rope is 2-D (ra_rope_config.axial): its tables "
                       "are ra_rope_table_axial's");
    if (n <= 0) return ra_fail(RA_ERR_SIZE, "n %lld: must be >= 1", (long long)n);
    int64_t total;
    if (ra_mul(n, rope->n_pairs, &total) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "n %lld * rotary_dim / 2 %lld: too many elements",
                       (long long)n, (long long)rope->n_pairs);
    RA_TRY(ra_rope_check_table_outputs(cos_out, sin_out, total, positions, n));
    int64_t last = 0;
    for (int64_t t = 0; t < n; t++) {
        if (positions[t] < 0 || positions[t] > RA_MAX_POSITION)
            return ra_fail(RA_ERR_POSITION, "positions[%lld] is %lld, not in [0, 2^32]",
                           (long long)t, (long long)positions[t]);
        last = positions[t] > last ? positions[t] : last;
    }
    RA_TRY(ra_rope_check_last(rope, last));
    for (int64_t t = 0; t < n; t++)
        ra_rope_angles(rope, positions[t], 0, rope->n_pairs, cos_out + t * rope->n_pairs,
                       sin_out + t * rope->n_pairs);
    return RA_OK;
}

/* ---- argument checks ---------------------------------------------------- */

static int same_view(const ra_tensor *a, const ra_tensor *b)
{
    for (int d = 0; d < 4; d++)
        if (a->stride[d] != b->stride[d]) return 0;
    return 1;
}

/* The first array of p (read by ra_positions_read for batch x seq tokens)
 * that out overlaps, or NULL: the kernels read the positions while they
 * write out, so positions written over would be read changed (past the
 * checks: out-of-range table rows). */
static const char *positions_under(const ra_positions *p, int64_t batch, int64_t seq,
                                   const ra_tensor *out)
{
    const int64_t n = batch * seq, runs = p->cu_seqlens ? p->n_seqs : batch;
    const struct {
        const int64_t *a;
        int64_t count;
        const char *name;
    } arrays[5] = {{p->ids, n, "ids"},
                   {p->starts, runs, "starts"},
                   {p->cu_seqlens, p->n_seqs + 1, "cu_seqlens"},
                   {p->mrope_ids, 2 * p->mrope_stride + n, "mrope_ids"},
                   {p->axial_ids, 2 * n, "axial_ids"}};
    for (int i = 0; i < 5; i++)
        if (arrays[i].a &&
            ra_tensor_overlaps_bytes(out, arrays[i].a, (size_t)arrays[i].count * sizeof(int64_t)))
            return arrays[i].name;
    return NULL;
}

ra_status ra_rope_check_apply(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                              const ra_positions *positions, ra_direction direction,
                              ra_positions *pos)
{
    if (!rope || !out || !x)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !rope ? "rope" : !out ? "out" : "x");
    RA_TRY(ra_tensor_check(x, "x"));
    RA_TRY(ra_tensor_check_output(out, "out"));
    if ((unsigned)direction > RA_INVERSE)
        return ra_fail(RA_ERR_ARGUMENT, "direction %d is not RA_FORWARD or RA_INVERSE",
                       (int)direction);
    for (int d = 0; d < 4; d++)
        if (out->shape[d] != x->shape[d])
            return ra_fail(RA_ERR_SHAPE, "out " RA_DIMS_FMT " and x " RA_DIMS_FMT " differ",
                           RA_DIMS(out->shape), RA_DIMS(x->shape));
    if (out->dtype != x->dtype)
        return ra_fail(RA_ERR_DTYPE, "out's dtype %s is not x's %s", ra_dtype_name(out->dtype),
                       ra_dtype_name(x->dtype));
    if (x->shape[3] != rope->config.head_dim)
        return ra_fail(RA_ERR_SHAPE, "x: shape[3] is %lld, not the rope's head_dim %lld",
                       (long long)x->shape[3], (long long)rope->config.head_dim);
    if (out->data == x->data && !same_view(out, x)) /* in place needs the same view */
        return ra_fail(RA_ERR_ARGUMENT, "out and x share data but not strides: out " RA_DIMS_FMT
                       ", x " RA_DIMS_FMT, RA_DIMS(out->stride), RA_DIMS(x->stride));
    if (out->data != x->data && ra_tensors_overlap(out, x)) /* else no sharing */
        return ra_fail(RA_ERR_ARGUMENT, "out overlaps x");
    RA_TRY(ra_positions_read(pos, positions, rope, x->shape[0], x->shape[1], 1));
    const char *under = positions_under(pos, x->shape[0], x->shape[1], out);
    if (under) return ra_fail(RA_ERR_ARGUMENT, "out overlaps the positions' %s", under);
    return RA_OK;
}

static int position_ok(int64_t first, int64_t count)
{
    return first >= 0 && first <= RA_MAX_POSITION && count - 1 <= RA_MAX_POSITION - first;
}

/* 3-D ids: with a rope that has sections, without ids, each component in
 * range; the stride resolved in *p. */
static ra_status read_mrope_ids(ra_positions *p, const ra_rope *rope, int64_t n_tokens)
{
    if (p->ids)
        return ra_fail(RA_ERR_ARGUMENT, "ra_positions: both ids and mrope_ids are set");
    if (!rope->component || rope->config.axial != RA_AXIAL_NONE)
        return ra_fail(RA_ERR_ARGUMENT, "ra_positions: mrope_ids (3-D positions) with a rope "
                       "that has no mrope_section");
    if (p->mrope_stride == 0) p->mrope_stride = n_tokens;
    if (p->mrope_stride < n_tokens || p->mrope_stride > RA_MAX_ELEMENTS)
        return ra_fail(RA_ERR_ARGUMENT, "ra_positions: mrope_stride %lld is not in [%lld "
                       "tokens, 2^61]", (long long)p->mrope_stride, (long long)n_tokens);
    for (int c = 0; c < 3; c++)
        for (int64_t t = 0; t < n_tokens; t++)
            if (!position_ok(p->mrope_ids[c * p->mrope_stride + t], 1))
                return ra_fail(RA_ERR_POSITION, "ra_positions: mrope_ids[%d, %lld] is %lld", c,
                               (long long)t, (long long)p->mrope_ids[c * p->mrope_stride + t]);
    return RA_OK;
}

/* 2-D ids: with a 2-D rope, without other ids, each component in range. */
static ra_status read_axial_ids(const ra_positions *p, const ra_rope *rope, int64_t n_tokens)
{
    if (rope->config.axial == RA_AXIAL_NONE)
        return ra_fail(RA_ERR_ARGUMENT, "ra_positions: axial_ids (2-D positions) with a rope "
                       "that is not 2-D (ra_rope_config.axial)");
    if (p->ids || p->mrope_ids)
        return ra_fail(RA_ERR_ARGUMENT, "ra_positions: both axial_ids and %s are set",
                       p->ids ? "ids" : "mrope_ids");
    for (int64_t t = 0; t < 2 * n_tokens; t++)
        if (!position_ok(p->axial_ids[t], 1))
            return ra_fail(RA_ERR_POSITION, "ra_positions: axial_ids[%lld, %s] is %lld, not in "
                           "[0, 2^32]", (long long)(t / 2), t % 2 ? "column" : "row",
                           (long long)p->axial_ids[t]);
    return RA_OK;
}

/* ra_positions_read without the rope's last_position. */
static ra_status read_grid(ra_positions *out, const ra_positions *positions, const ra_rope *rope,
                           int64_t batch, int64_t seq, int packed)
{
    *out = ra_positions_start(0);
    if (positions) RA_TRY(RA_READ_STRUCT(*out, positions, ra_positions));
    ra_positions *p = out;
    if (p->cu_seqlens && !packed)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_positions: packed sequences (cu_seqlens) here, "
                       "where attention would cross them");
    int64_t n_tokens = batch * seq;
    if (p->axial_ids) return read_axial_ids(p, rope, n_tokens);
    if (rope->config.axial != RA_AXIAL_NONE)
        return ra_fail(RA_ERR_ARGUMENT, "ra_positions: a 2-D (axial) rope takes 2-D positions "
                       "(axial_ids, (row, column)) only");
    if (p->mrope_ids) return read_mrope_ids(p, rope, n_tokens);
    if (p->ids) {
        for (int64_t t = 0; t < n_tokens; t++)
            if (!position_ok(p->ids[t], 1))
                return ra_fail(RA_ERR_POSITION, "ra_positions: ids[%lld] is %lld", (long long)t,
                               (long long)p->ids[t]);
        return RA_OK;
    }
    if (p->cu_seqlens) {
        const int64_t *cu = p->cu_seqlens;
        if (p->n_seqs <= 0)
            return ra_fail(RA_ERR_SIZE, "ra_positions: n_seqs %lld: must be >= 1",
                           (long long)p->n_seqs);
        if (cu[0] != 0)
            return ra_fail(RA_ERR_SHAPE, "ra_positions: cu_seqlens[0] is %lld, not 0",
                           (long long)cu[0]);
        if (cu[p->n_seqs] != n_tokens)
            return ra_fail(RA_ERR_SHAPE, "ra_positions: cu_seqlens[%lld] is %lld, not the %lld "
                           "tokens", (long long)p->n_seqs, (long long)cu[p->n_seqs],
                           (long long)n_tokens);
        for (int64_t i = 0; i < p->n_seqs; i++) {
            if (cu[i + 1] < cu[i])
                return ra_fail(RA_ERR_SHAPE, "ra_positions: cu_seqlens[%lld] %lld is below "
                               "cu_seqlens[%lld] %lld", (long long)(i + 1), (long long)cu[i + 1],
                               (long long)i, (long long)cu[i]);
            if (!position_ok(p->starts ? p->starts[i] : p->start, cu[i + 1] - cu[i]))
                return ra_fail(RA_ERR_POSITION, "ra_positions: %s %lld with %lld tokens leaves "
                               "[0, 2^32]", p->starts ? "a start" : "start",
                               (long long)(p->starts ? p->starts[i] : p->start),
                               (long long)(cu[i + 1] - cu[i]));
        }
        return RA_OK;
    }
    for (int64_t b = 0; b < (p->starts ? batch : 1); b++)
        if (!position_ok(p->starts ? p->starts[b] : p->start, seq))
            return ra_fail(RA_ERR_POSITION, "ra_positions: %s %lld with %lld tokens leaves "
                           "[0, 2^32]", p->starts ? "a start" : "start",
                           (long long)(p->starts ? p->starts[b] : p->start), (long long)seq);
    return RA_OK;
}

/* The largest position (of any component) of the first n_new[b] (NULL:
 * seq) tokens of each row b of a [batch, seq] grid that read_grid has
 * checked; -1 when there are none. */
static int64_t last_position_of(const ra_positions *p, int64_t batch, int64_t seq,
                                const int64_t *n_new)
{
    int64_t last = -1, hint = 0, pos[3];
    for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 0; s < (n_new ? n_new[b] : seq); s++) {
            ra_position3(p, b * seq + s, seq, &hint, pos);
            for (int c = 0; c < 3; c++) last = pos[c] > last ? pos[c] : last;
        }
    return last;
}

ra_status ra_positions_read(ra_positions *out, const ra_positions *positions,
                            const ra_rope *rope, int64_t batch, int64_t seq, int packed)
{
    RA_TRY(read_grid(out, positions, rope, batch, seq, packed));
    if (rope->last_position >= RA_MAX_POSITION) return RA_OK; /* every position: no scan */
    return ra_rope_check_last(rope, last_position_of(out, batch, seq, NULL));
}

ra_status ra_positions_read_new(ra_positions *out, const ra_positions *positions,
                                const ra_rope *rope, int64_t batch, int64_t seq,
                                const int64_t *n_new)
{
    if (rope->config.axial != RA_AXIAL_NONE)
        return ra_fail(RA_ERR_UNSUPPORTED, "a KV cache or decoding step with a 2-D (axial) "
                       "rope: not supported (vision encoders attend over the whole image)");
    RA_TRY(read_grid(out, positions, rope, batch, seq, 0));
    if (rope->last_position >= RA_MAX_POSITION) return RA_OK;
    return ra_rope_check_last(rope, last_position_of(out, batch, seq, n_new));
}

/* ---- the fast path ------------------------------------------------------- */

/* Tokens per task: about 8 tasks per thread (the threads finish apart by
 * up to a task, so fewer leave a longer tail: in alternating bench runs on
 * 2 threads, half-split f32 in place read a median 1.10 of its limit
 * against 0.98 with 4; bf16 0.97 with either), but at least 64 KiB of
 * work per task so that small calls (decode) stay on the calling thread. */
static int64_t tokens_per_task(const ra_tensor *x, int threads)
{
    int64_t n_tokens = x->shape[0] * x->shape[1];
    int64_t token_bytes = x->shape[2] * x->shape[3] * (int64_t)ra_dtype_size(x->dtype);
    int64_t min_tokens = (65536 + token_bytes - 1) / token_bytes;
    int64_t per = (n_tokens + 8 * threads - 1) / (8 * threads);
    return per < min_tokens ? min_tokens : per;
}

RA_API ra_status ra_rope_apply(ra_context *ctx, const ra_rope *rope, const ra_tensor *out,
                               const ra_tensor *x, const ra_positions *positions,
                               ra_direction direction)
{
    ra_error_reset();
    ra_positions pos;
    RA_TRY(ra_rope_check_apply(rope, out, x, positions, direction, &pos));
    ra_rope_job job = {rope, out, x, &pos, direction == RA_INVERSE ? -1.0f : 1.0f, 0};
    job.tokens_per_task = tokens_per_task(x, ra_parallel_threads(ctx));
    int64_t n_tokens = x->shape[0] * x->shape[1];
    ra_parallel_for(ctx, (n_tokens + job.tokens_per_task - 1) / job.tokens_per_task,
                    ra_kernels_get()->rope_task, &job);
    return RA_OK;
}

RA_API ra_status ra_rope_apply_f32(ra_context *ctx, const ra_rope *rope, float *x, int64_t batch,
                                   int64_t seq, int64_t heads, int64_t start_pos)
{
    ra_error_reset();
    if (!rope || !x) return ra_fail(RA_ERR_NULL, "%s is NULL", rope ? "x" : "rope");
    static const char *const names[4] = {"batch", "seq", "heads", "head_dim"};
    int64_t dims[4] = {batch, seq, heads, rope->config.head_dim}, n;
    RA_TRY(ra_count_named(dims, names, 4, &n)); /* as ra_tensor_check would, naming them */
    ra_tensor t = ra_tensor_4d(x, RA_F32, batch, seq, heads, rope->config.head_dim);
    ra_positions p = ra_positions_start(start_pos);
    return ra_rope_apply(ctx, rope, &t, &t, &p, RA_FORWARD);
}
