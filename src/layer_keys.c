/*
 * layer_keys.c — ra_layer_config.max_keys: the keys each query of a layer
 * call attends to, counted before the call writes anything.  A query
 * attends to the keys its masks leave it: keys first .. i (the causal
 * mask, then the window, the chunk and the document raise first:
 * ra_mask_first_key), those of them that are real under the padding mask;
 * a padding query attends to none.
 * And ra_layer_config.positions_are_slots: each real query's position is
 * its slot (its index in its row, after the tokens its cache held), and
 * max_keys then counts every slot up to the query's own.
 * And ra_layer_config.max_document: a windowed encoder's calls give their
 * documents, none longer.
 * And the calls whose keys a cache holds, refused for a 2-D rope.
 */
#include "attention_internal.h"
#include "layer_internal.h"
#include "rope_internal.h"

static ra_status too_many(const ra_layer *layer, const char *what, int64_t id, int64_t query,
                          int64_t keys)
{
    return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: max_keys %lld: query %lld of %s %lld "
                   "attends to %lld keys, more than the layer's bound",
                   (long long)layer->config.max_keys, (long long)query, what, (long long)id,
                   (long long)keys);
}

/* Query `token` of the [rows, seq] grid's row `row` (sequence `id`, named
 * what), at index t = row * seq + token of pos: RA_ERR_UNSUPPORTED where a
 * component of its position is not slot. */
static ra_status check_slot(const ra_positions *pos, const char *what, int64_t id,
                            int64_t row, int64_t seq, int64_t token, int64_t slot)
{
    int64_t hint = 0, p[3];
    ra_position3(pos, row * seq + token, seq, &hint, p);
    for (int c = 0; c < 3; c++)
        if (p[c] != slot)
            return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: positions_are_slots: query "
                           "%lld of %s %lld has position %lld, not its slot %lld (the layer's "
                           "indexer selects keys by slot; its answer at other positions is "
                           "not supported)", (long long)token, what, (long long)id,
                           (long long)p[c], (long long)slot);
    return RA_OK;
}

ra_status ra_layer_refuse_axial(const ra_layer *layer, const char *what)
{
    if (layer->rope->config.axial == RA_AXIAL_NONE) return RA_OK;
    return ra_fail(RA_ERR_UNSUPPORTED, "%s with a 2-D (axial) rope: not supported (a "
                   "vision encoder attends over the whole image in one ra_layer_forward)", what);
}

ra_status ra_layer_refuse_non_causal(const ra_layer *layer, const char *what)
{
    if (!layer->config.non_causal) return RA_OK;
    return ra_fail(RA_ERR_UNSUPPORTED, "%s with ra_layer_config.non_causal: a cache holds a "
                   "decoder's keys (an encoder attends over its whole input in one "
                   "ra_layer_forward)", what);
}

ra_status ra_layer_read_whole_mask(const ra_layer *layer, const ra_attention_options *o)
{
    const ra_layer_config *c = &layer->config;
    if (!o->non_causal && o->attn_mask && c->whole_masks)
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: attn_mask without non_causal on a "
                       "layer with ra_layer_config.whole_masks (ra_hf_options.token_types: the "
                       "mask is the call's whole mask, and the causal mask would cut its later "
                       "keys)");
    if (!o->non_causal) return RA_OK;
    if (c->non_causal)
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: non_causal on a layer with "
                       "ra_layer_config.non_causal (it has no causal mask to replace)");
    if (!o->attn_mask)
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: non_causal on a layer's call "
                       "without an attn_mask (non_causal says the attn_mask is the call's whole "
                       "mask, in place of the layer's causal mask)");
    if (c->chunk)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: non_causal (the attn_mask as "
                       "the whole mask) on a layer with chunk %lld", (long long)c->chunk);
    return RA_OK;
}

ra_status ra_layer_check_keys_elsewhere(const ra_layer *layer, const char *what)
{
    if (layer->config.positions_are_slots)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: positions_are_slots with %s (the "
                       "call's positions are not its keys' slots)", what);
    if (!layer->config.max_keys) return RA_OK;
    return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: max_keys %lld with %s (its queries' "
                   "keys are not the call's)", (long long)layer->config.max_keys, what);
}

/* Real keys in [first_i, i] for each query i of row b, first_i
 * nondecreasing in i (window, chunk and documents all move forward): a
 * count kept as i grows and first_i catches up; with positions_are_slots,
 * the slots 0 .. i, and each real query's position i. */
static ra_status check_row(const ra_layer *layer, const ra_attention_mask *mask,
                           const ra_positions *pos, int64_t b, int64_t seq)
{
    const ra_layer_config *c = &layer->config;
    const int64_t lp = ra_mask_leading_padding(mask, b);
    int64_t first = 0, keys = 0;
    for (int64_t i = 0; i < seq; i++) {
        keys += ra_mask_real(mask, b, i);
        for (const int64_t lo = ra_mask_first_key(mask, i, lp); first < lo; first++)
            keys -= ra_mask_real(mask, b, first);
        if (!ra_mask_query_real(mask, b, i)) continue;
        if (c->positions_are_slots) RA_TRY(check_slot(pos, "sequence", b, b, seq, i, i));
        const int64_t seen = c->positions_are_slots ? i + 1 : keys;
        if (c->max_keys && seen > c->max_keys) return too_many(layer, "sequence", b, i, seen);
    }
    return RA_OK;
}

/* max_document: the call's documents given, none longer. */
static ra_status check_documents(const ra_layer *layer, const ra_attention_options *o)
{
    const int64_t bound = layer->config.max_document;
    if (!bound) return RA_OK;
    if (!o->cu_seqlens)
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: max_document %lld: a call without "
                       "documents (ra_attention_options.cu_seqlens: the windows of a windowed "
                       "encoder's layer)", (long long)bound);
    for (int64_t d = 0; d < o->n_documents; d++) /* cu_seqlens read: nondecreasing */
        if (o->cu_seqlens[d + 1] - o->cu_seqlens[d] > bound)
            return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: max_document %lld: document "
                           "%lld holds %lld tokens (a windowed encoder's layer attends inside "
                           "windows of at most max_document)", (long long)bound, (long long)d,
                           (long long)(o->cu_seqlens[d + 1] - o->cu_seqlens[d]));
    return RA_OK;
}

ra_status ra_layer_check_keys(const ra_layer *layer, const ra_layer_call *call)
{
    const ra_layer_config *c = &layer->config;
    RA_TRY(check_documents(layer, &call->attn));
    if (!c->max_keys && !c->positions_are_slots) return RA_OK;
    if (call->attn.non_causal || call->attn.attn_mask)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: %s with %s (its count of keys "
                       "per query is a causal one's)", c->max_keys ? "max_keys"
                       : "positions_are_slots", call->attn.non_causal ? "non_causal"
                       : "an attn_mask");
    const int64_t q_shape[4] = {call->batch, call->seq, c->n_heads, c->head_dim};
    ra_attention_mask mask;
    RA_TRY(ra_attention_mask_read(&mask, &call->attn, q_shape));
    for (int64_t b = 0; b < call->batch; b++)
        RA_TRY(check_row(layer, &mask, &call->pos, b, call->seq));
    return RA_OK;
}

ra_status ra_layer_check_new_keys(const ra_layer *layer, const char *what, int64_t id,
                                  int64_t length, int64_t n)
{
    const ra_layer_config *c = &layer->config;
    if (!c->max_keys) return RA_OK;
    ra_attention_mask mask = {0}; /* the layer's window and chunk; no padding nor documents */
    mask.window = c->window;
    mask.chunk = c->chunk;
    for (int64_t t = 0; t < n; t++) {
        const int64_t i = length + t;
        const int64_t keys = c->positions_are_slots ? i + 1 : i - ra_mask_first_key(&mask, i, 0) + 1;
        if (keys > c->max_keys) return too_many(layer, what, id, t, keys);
    }
    return RA_OK;
}

ra_status ra_layer_check_new_slots(const ra_layer *layer, const ra_positions *pos,
                                   const char *what, int64_t id, int64_t row, int64_t seq,
                                   int64_t length, int64_t n)
{
    if (!layer->config.positions_are_slots || !pos) return RA_OK;
    for (int64_t t = 0; t < n; t++) RA_TRY(check_slot(pos, what, id, row, seq, t, length + t));
    return RA_OK;
}
