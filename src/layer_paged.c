/*
 * layer_paged.c — ra_layer_forward_paged: the layer over sequences of a
 * paged KV pool (continuous batching): each call projects every row's new
 * tokens, appends them to their sequences' pages (RoPE fused) and attends
 * each over its sequence through the decode kernel's paged view
 * (decode_paged.c), then projects the outputs.  Only the new tokens are
 * projected: a call that mixes a prefill of S tokens with N - 1 decode
 * steps multiplies S + N - 1 rows by the weights, not N S.
 *
 *   x, y: [N, S, dim]    N = n_ids sequences, n_new[i] <= S tokens of row i
 *   packed rows: [T, dim], [T, H D], ...   T = sum of n_new
 */
#include <string.h>

#include "kvpool_internal.h"
#include "layer_internal.h"
#include "parallel.h"
#include "rope_internal.h"

static ra_status check_call(const ra_layer *layer, const ra_kv_pool *pool, const int64_t *ids,
                            int64_t n_ids, const float *y, const float *x, int64_t seq,
                            const int64_t *n_new)
{
    if (!layer || !pool || !ids || !y || !x)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !layer ? "layer" : !pool ? "pool"
                                                  : !ids ? "ids" : !y ? "y" : "x");
    const ra_layer_config *c = &layer->config;
    RA_TRY(ra_layer_refuse_axial(layer, "ra_layer_forward_paged"));
    RA_TRY(ra_layer_refuse_non_causal(layer, "ra_layer_forward_paged"));
    if (c->kv_lora_rank)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_forward_paged: latent attention "
                       "(kv_lora_rank %lld) caches latents, which a pool does not hold: use "
                       "ra_layer_forward_cached with a latent cache", (long long)c->kv_lora_rank);
    if (pool->n_kv_heads != c->n_kv_heads || pool->head_dim != c->head_dim)
        return ra_fail(RA_ERR_SHAPE, "the pool holds %lld kv heads of %lld; the layer needs %lld "
                       "of %lld", (long long)pool->n_kv_heads, (long long)pool->head_dim,
                       (long long)c->n_kv_heads, (long long)c->head_dim);
    RA_TRY(ra_kv_pool_check_ids(pool, ids, n_ids));
    static const char *const names[3] = {"n_ids", "seq", "n_heads * head_dim"};
    int64_t n, dims[3] = {n_ids, seq, c->n_heads * c->head_dim};
    RA_TRY(ra_count_named(dims, names, 3, &n));
    dims[2] = c->dim;
    RA_TRY(ra_count_named(dims, names, 3, &n));
    RA_TRY(ra_layer_check_y_apart(layer, y, n));
    for (int64_t i = 0; n_new && i < n_ids; i++)
        if (n_new[i] < 0 || n_new[i] > seq)
            return ra_fail(RA_ERR_ARGUMENT, "n_new[%lld] %lld: not in [0, seq %lld]",
                           (long long)i, (long long)n_new[i], (long long)seq);
    for (int64_t i = 0; i < n_ids; i++)
        RA_TRY(ra_layer_check_new_keys(layer, "sequence id", ids[i],
                                       ra_kv_pool_seq(pool, ids[i])->length,
                                       n_new ? n_new[i] : seq));
    return RA_OK;
}

/* Rows [i, 0 .. n_new[i]) of a [N, S, width] array, to (gather) or from
 * (scatter) packed [T, width] rows in row order. */
static void gather_rows(float *packed, const float *rows, const int64_t *n_new, int64_t n_ids,
                        int64_t seq, int64_t width)
{
    for (int64_t i = 0, t = 0; i < n_ids; t += n_new[i], i++)
        memcpy(packed + t * width, rows + i * seq * width, (size_t)(n_new[i] * width) * sizeof(float));
}

static void scatter_rows(float *rows, const float *packed, const int64_t *n_new, int64_t n_ids,
                         int64_t seq, int64_t width)
{
    for (int64_t i = 0, t = 0; i < n_ids; t += n_new[i], i++)
        memcpy(rows + i * seq * width, packed + t * width, (size_t)(n_new[i] * width) * sizeof(float));
}

RA_API ra_status ra_layer_forward_paged(ra_context *ctx, const ra_layer *layer,
                                        ra_kv_pool *pool, const int64_t *ids, int64_t n_ids,
                                        float *y, const float *x, int64_t seq,
                                        const int64_t *n_new, const ra_positions *positions)
{
    ra_error_reset();
    RA_TRY(check_call(layer, pool, ids, n_ids, y, x, seq, n_new));
    const ra_layer_config *c = &layer->config;
    const int64_t H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim, tokens = n_ids * seq;
    ra_attention_options masks = ra_attention_options_init();
    masks.window = c->window;
    masks.chunk = c->chunk;
    masks.softcap = c->softcap;
    masks.sinks = layer->weights.sinks;
    const ra_tensor q_shape = ra_tensor_4d((void *)x, RA_F32, n_ids, seq, H, D);
    ra_attention_mask mask;
    const ra_kv_cache unwindowed = {0}; /* windows are per sequence in a pool: */
    RA_TRY(ra_attention_decode_mask(&mask, &unwindowed, &q_shape, &masks));
    RA_TRY(ra_kv_pool_check_reach(pool, ids, n_ids, &mask)); /* each keeps what q reaches */
    ra_positions given;
    if (positions) /* the rows' new tokens; their padding is never rotated */
        RA_TRY(ra_positions_read_new(&given, positions, layer->rope, n_ids, seq, n_new));
    for (int64_t i = 0; positions && i < n_ids; i++)
        RA_TRY(ra_layer_check_new_slots(layer, &given, "sequence id", ids[i], i, seq,
                                        ra_kv_pool_seq(pool, ids[i])->length,
                                        n_new ? n_new[i] : seq));

    /* Everything is acquired before the append changes the pool.  Outer
     * scratch: the view's arrays [3 N] and starts [N] (int64: head floats),
     * xq, xk, xv and the attention output; with rows past n_new, the new
     * tokens' rows packed: x (then y) [T, dim] and q, k, v (then the
     * attention's output) [T, (H + 2 Hkv) D].  The decode kernel's, sized
     * for the lengths after the append, from the first workspace. */
    const int64_t n_q = tokens * H * D, n_kv = tokens * Hkv * D, head = ra_round_up(8 * n_ids, 16);
    int64_t real = 0; /* T */
    for (int64_t i = 0; n_new && i < n_ids; i++) real += n_new[i];
    const int packed = n_new && real < tokens;
    const int64_t packed_floats = packed ? real * (c->dim + (H + 2 * Hkv) * D) : 0;
    int64_t own_floats;
    if (ra_mul(n_q, 4, &own_floats) != RA_OK || head > RA_MAX_ELEMENTS - own_floats ||
        packed_floats > RA_MAX_ELEMENTS - own_floats - head)
        return ra_fail(RA_ERR_OVERFLOW, "%lld sequences of %lld tokens: the layer's scratch "
                       "overflows", (long long)n_ids, (long long)seq);
    ra_scratch outer, scratch, panel;
    RA_TRY(ra_scratch_acquire_outer(
        ctx, (size_t)(head + 2 * n_q + 2 * n_kv + packed_floats) * sizeof(float), &outer));
    int64_t *arrays = outer.data, *starts = arrays + 3 * n_ids;
    float *buf = (float *)outer.data + head;
    for (int64_t i = 0; i < n_ids; i++) starts[i] = n_new ? n_new[i] : seq;
    /* the lengths after the append, for sizing */
    const ra_kv_cache after = ra_kv_pool_view(pool, ids, n_ids, starts, arrays);
    size_t kernel_bytes = 0;
    ra_status status = ra_attention_decode_scratch(&after, &q_shape, ra_parallel_threads(ctx), 0,
                                                   &kernel_bytes);
    if (status == RA_OK) status = ra_scratch_acquire(ctx, kernel_bytes, &scratch);
    if (status != RA_OK) {
        ra_scratch_release(&outer);
        return status;
    }
    ra_gemm_env mm;
    status = ra_layer_gemm_begin(layer, ctx, packed ? real : tokens, &panel, &mm);
    if (status != RA_OK) {
        ra_scratch_release(&scratch);
        ra_scratch_release(&outer);
        return status;
    }
    for (int64_t i = 0; i < n_ids; i++) starts[i] = ra_kv_pool_seq(pool, ids[i])->length;
    ra_positions pos = ra_positions_start(0);
    pos.starts = starts;
    if (positions) pos = given;
    status = ra_layer_check_rotation(layer, &pos, n_ids, seq, n_new);
    if (status != RA_OK) {
        ra_scratch_release(&panel);
        ra_scratch_release(&scratch);
        ra_scratch_release(&outer);
        return status;
    }
    ra_tensor xq = ra_tensor_4d(buf, RA_F32, n_ids, seq, H, D);
    ra_tensor xk = ra_tensor_4d(buf + n_q, RA_F32, n_ids, seq, Hkv, D);
    ra_tensor xv = ra_tensor_4d(buf + n_q + n_kv, RA_F32, n_ids, seq, Hkv, D);
    ra_tensor attn = ra_tensor_4d(buf + n_q + 2 * n_kv, RA_F32, n_ids, seq, H, D);
    float *px = buf + 2 * n_q + 2 * n_kv, *pq = px + real * c->dim; /* packed rows */
    float *pk = pq + real * H * D, *pv = pk + real * Hkv * D;
    if (!packed) {
        ra_layer_project_qkv(layer, &mm, xq.data, xk.data, xv.data, x, tokens, 1);
    } else if (real) {
        gather_rows(px, x, n_new, n_ids, seq, c->dim);
        ra_layer_project_qkv(layer, &mm, pq, pk, pv, px, real, 1);
        scatter_rows(xq.data, pq, n_new, n_ids, seq, H * D);
        scatter_rows(xk.data, pk, n_new, n_ids, seq, Hkv * D);
        scatter_rows(xv.data, pv, n_new, n_ids, seq, Hkv * D);
    }
    ra_layer_temperature(layer, xq.data, &pos, tokens, seq);
    const ra_rope *late = ra_layer_late_rope(layer);
    if (!late) ra_layer_rotate(layer, ctx, &xq, &xk, &pos, n_new);
    ra_layer_rotate_values(layer, ctx, &xv, &pos, n_new);
    /* the append checks everything and changes nothing when it refuses */
    status = ra_kv_pool_append(ctx, pool, late, ids, n_ids, &xq, &xk, &xv, &pos, n_new);
    if (status == RA_OK) {
        const ra_kv_cache view = ra_kv_pool_view(pool, ids, n_ids, NULL, arrays);
        ra_attention_decode_run(ctx, &view, &attn, &xq, n_new, &mask, scratch.data);
        if (!packed) {
            ra_layer_project_output(layer, &mm, y, attn.data, x, xq.data, tokens);
        } else {
            if (real) {
                gather_rows(pq, attn.data, n_new, n_ids, seq, H * D);
                ra_layer_project_output(layer, &mm, px, pq, px, xq.data, real);
            }
            for (int64_t i = 0; i < n_ids; i++) /* rows past a sequence's new tokens */
                memset(y + (i * seq + n_new[i]) * c->dim, 0,
                       (size_t)((seq - n_new[i]) * c->dim) * sizeof(float));
            scatter_rows(y, px, n_new, n_ids, seq, c->dim);
        }
    }
    ra_scratch_release(&panel);
    ra_scratch_release(&scratch);
    ra_scratch_release(&outer);
    return status;
}
