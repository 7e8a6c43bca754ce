/*
 * layer_keys.c — ra_layer_config.max_keys: the keys each query of a layer
 * call attends to, counted before the call writes anything.  A query
 * attends to the keys its masks leave it: keys first .. i (the causal
 * mask, then the window, the chunk and the document raise first:
 * ra_mask_first_key), those of them that are real under the padding mask;
 * a padding query attends to none.
 */
#include "attention_internal.h"
#include "layer_internal.h"

static ra_status too_many(const ra_layer *layer, const char *what, int64_t id, int64_t query,
                          int64_t keys)
{
    return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: max_keys %lld: query %lld of %s %lld "
                   "attends to %lld keys, more than the layer's bound",
                   (long long)layer->config.max_keys, (long long)query, what, (long long)id,
                   (long long)keys);
}

ra_status ra_layer_check_keys_engine(const ra_layer *layer)
{
    if (!layer->config.max_keys) return RA_OK;
    return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: max_keys %lld with an attention engine "
                   "(its queries' keys are the whole sequence's, not the call's)",
                   (long long)layer->config.max_keys);
}

/* Real keys in [first_i, i] for each query i of row b, first_i
 * nondecreasing in i (window, chunk and documents all move forward): a
 * count kept as i grows and first_i catches up. */
static ra_status check_row(const ra_layer *layer, const ra_attention_mask *mask, int64_t b,
                           int64_t seq)
{
    const int64_t lp = ra_mask_leading_padding(mask, b);
    int64_t first = 0, keys = 0;
    for (int64_t i = 0; i < seq; i++) {
        keys += ra_mask_real(mask, b, i);
        for (const int64_t lo = ra_mask_first_key(mask, i, lp); first < lo; first++)
            keys -= ra_mask_real(mask, b, first);
        if (keys > layer->config.max_keys && ra_mask_query_real(mask, b, i))
            return too_many(layer, "sequence", b, i, keys);
    }
    return RA_OK;
}

ra_status ra_layer_check_keys(const ra_layer *layer, const ra_layer_call *call)
{
    if (!layer->config.max_keys) return RA_OK;
    if (call->attn.engine) return ra_layer_check_keys_engine(layer);
    const ra_layer_config *c = &layer->config;
    const int64_t q_shape[4] = {call->batch, call->seq, c->n_heads, c->head_dim};
    ra_attention_mask mask;
    RA_TRY(ra_attention_mask_read(&mask, &call->attn, q_shape));
    for (int64_t b = 0; b < call->batch; b++) RA_TRY(check_row(layer, &mask, b, call->seq));
    return RA_OK;
}

ra_status ra_layer_check_new_keys(const ra_layer *layer, const char *what, int64_t id,
                                  int64_t length, int64_t n)
{
    if (!layer->config.max_keys) return RA_OK;
    ra_attention_mask mask = {0}; /* the layer's window and chunk; no padding nor documents */
    mask.window = layer->config.window;
    mask.chunk = layer->config.chunk;
    for (int64_t t = 0; t < n; t++) {
        const int64_t i = length + t, keys = i - ra_mask_first_key(&mask, i, 0) + 1;
        if (keys > layer->config.max_keys) return too_many(layer, what, id, t, keys);
    }
    return RA_OK;
}
