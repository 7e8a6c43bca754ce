/*
 * token_types.c — Gemma 3's attention mask over token_type_ids
 * (ra_hf_token_type_mask, ra_hf_token_type_mask_cached), as transformers'
 * Gemma3Model forms it:
 *   get_block_sequence_ids_for_mask: block id of token i = the number of
 *     runs of token_type_ids == 1 started at or before i, less 1, where
 *     token i is an image token; -1 for text;
 *   create_masks_for_vision_model: full layers create_causal_mask with
 *     blockwise_overlay OR'ed in; sliding layers the same OR, then AND
 *     sliding_window_overlay (kv > q - W: the keys before a query only, so
 *     a block longer than W keeps its later keys); sdpa_mask then ANDs the
 *     padding (padding_mask_function: the key's attention_mask).
 * A cached call's queries are tokens past .. past + seq - 1 of the row and
 * its keys 0 .. past + seq - 1, the mask functions evaluated at those
 * indices (create_causal_mask's q and kv offsets of a chunked prefill).
 * The mask is the call's whole mask (the layer's causal mask not applied:
 * ra_attention_options' non_causal on the layer's call; its window, the
 * same bound as the mask's, still applies to the earlier keys).
 */
#include "hf/hf.h"
#include "memory.h"

/* Block ids of one row, as get_block_sequence_ids_for_mask: ids [n]. */
static void block_ids(const int64_t *types, int64_t n, int64_t *ids)
{
    int64_t group = -1;
    for (int64_t i = 0; i < n; i++) {
        const int image = types[i] == 1;
        if (image && (i == 0 || types[i - 1] != 1)) group++;
        ids[i] = image ? group : -1;
    }
}

RA_HF_API ra_status ra_hf_token_type_mask_cached(const ra_hf_layer *layer,
                                                 const int64_t *token_type_ids,
                                                 const uint8_t *padding, int64_t batch,
                                                 int64_t past, int64_t seq, uint8_t *mask)
{
    hf_reset();
    if (!layer || !token_type_ids || !mask)
        return hf_fail(RA_ERR_NULL, "ra_hf_token_type_mask: %s is NULL",
                       !layer ? "layer" : !token_type_ids ? "token_type_ids" : "mask");
    if (!hf_layer_token_types(layer))
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_token_type_mask: the layer was not created with "
                       "ra_hf_options.token_types");
    const int64_t n = past + seq; /* keys */
    if (batch < 1 || seq < 1 || past < 0 || past > INT32_MAX - seq ||
        batch > INT64_MAX / n / seq)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_token_type_mask: batch %lld, past %lld, seq %lld",
                       (long long)batch, (long long)past, (long long)seq);
    const int64_t window = ra_layer_get_config(ra_hf_layer_get(layer))->window;
    int64_t *ids = ra_calloc((size_t)n, sizeof *ids);
    if (!ids) return hf_fail(RA_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; b < batch; b++) {
        block_ids(token_type_ids + b * n, n, ids);
        const uint8_t *pad = padding ? padding + b * n : NULL;
        for (int64_t q = 0; q < seq; q++) {
            const int64_t i = past + q;
            uint8_t *row = mask + (b * seq + q) * n;
            for (int64_t j = 0; j < n; j++) {
                const int seen = j <= i || (ids[i] >= 0 && ids[i] == ids[j]);
                const int in_window = !window || j > i - window;
                row[j] = (uint8_t)(seen && in_window && (!pad || pad[j]));
            }
        }
    }
    ra_free(ids);
    return RA_OK;
}

RA_HF_API ra_status ra_hf_token_type_mask(const ra_hf_layer *layer, const int64_t *token_type_ids,
                                          const uint8_t *padding, int64_t batch, int64_t seq,
                                          uint8_t *mask)
{
    return ra_hf_token_type_mask_cached(layer, token_type_ids, padding, batch, 0, seq, mask);
}
