/*
 * token_types.c — Gemma 3's attention mask over token_type_ids
 * (ra_hf_token_type_mask), as transformers' Gemma3Model forms it:
 *   get_block_sequence_ids_for_mask: block id of token i = the number of
 *     runs of token_type_ids == 1 started at or before i, less 1, where
 *     token i is an image token; -1 for text;
 *   create_masks_for_vision_model: full layers create_causal_mask with
 *     blockwise_overlay OR'ed in; sliding layers the same OR, then AND
 *     sliding_window_overlay (kv > q - W); sdpa_mask then ANDs the padding
 *     (padding_mask_function: the key's attention_mask).
 * The layer (ra_hf_options.token_types) is non_causal with its window both
 * ways: |i - j| < W, which equals transformers' window on every key this
 * mask keeps except keys W or more ahead inside a block: refused.
 */
#include "hf/hf.h"
#include "memory.h"

/* Block ids of one row, as get_block_sequence_ids_for_mask: ids [seq]. */
static void block_ids(const int64_t *types, int64_t seq, int64_t *ids)
{
    int64_t group = -1;
    for (int64_t i = 0; i < seq; i++) {
        const int image = types[i] == 1;
        if (image && (i == 0 || types[i - 1] != 1)) group++;
        ids[i] = image ? group : -1;
    }
}

/* A block longer than the window on a sliding layer (see above). */
static ra_status check_blocks(const int64_t *ids, int64_t seq, int64_t window, int64_t b)
{
    for (int64_t i = 0; window && i < seq;) {
        int64_t end = i + 1;
        while (ids[i] >= 0 && end < seq && ids[end] == ids[i]) end++;
        if (ids[i] >= 0 && end - i > window)
            return hf_fail(RA_ERR_UNSUPPORTED, "ra_hf_token_type_mask: row %lld's image block at "
                           "tokens %lld..%lld is %lld tokens, longer than the sliding window %lld: "
                           "the layer's window (both ways) would drop keys %lld or more ahead "
                           "inside it, which transformers keeps", (long long)b, (long long)i,
                           (long long)(end - 1), (long long)(end - i), (long long)window,
                           (long long)window);
        i = end;
    }
    return RA_OK;
}

RA_HF_API ra_status ra_hf_token_type_mask(const ra_hf_layer *layer, const int64_t *token_type_ids,
                                          const uint8_t *padding, int64_t batch, int64_t seq,
                                          uint8_t *mask)
{
    hf_reset();
    if (!layer || !token_type_ids || !mask)
        return hf_fail(RA_ERR_NULL, "ra_hf_token_type_mask: %s is NULL",
                       !layer ? "layer" : !token_type_ids ? "token_type_ids" : "mask");
    if (!hf_layer_token_types(layer))
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_token_type_mask: the layer was not created with "
                       "ra_hf_options.token_types");
    if (batch < 1 || seq < 1 || seq > INT32_MAX || batch > INT64_MAX / seq / seq)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_token_type_mask: batch %lld, seq %lld",
                       (long long)batch, (long long)seq);
    const int64_t window = ra_layer_get_config(ra_hf_layer_get(layer))->window;
    int64_t *ids = ra_calloc((size_t)seq, sizeof *ids);
    if (!ids) return hf_fail(RA_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; b < batch; b++) {
        block_ids(token_type_ids + b * seq, seq, ids);
        ra_status status = check_blocks(ids, seq, window, b);
        if (status != RA_OK) {
            ra_free(ids);
            return status;
        }
        const uint8_t *pad = padding ? padding + b * seq : NULL;
        for (int64_t i = 0; i < seq; i++) {
            uint8_t *row = mask + (b * seq + i) * seq;
            for (int64_t j = 0; j < seq; j++) {
                const int seen = j <= i || (ids[i] >= 0 && ids[i] == ids[j]);
                const int in_window = !window || j > i - window;
                row[j] = (uint8_t)(seen && in_window && (!pad || pad[j]));
            }
        }
    }
    ra_free(ids);
    return RA_OK;
}
