/*
 * fields_sparse.c — the keys that bound a sparse-attention indexer's layer:
 * the most keys a query may see while its indexer keeps every one of them
 * (the layer is then the dense one, which runs; beyond it the layer is
 * refused, call by call: ra_layer_config.max_keys, hf/layer.c).
 *   RA_HF_INDEXER_TOPK (DeepSeek sparse attention): index_topk
 *     (fields_indexer.c checks its other keys).
 *   RA_HF_BLOCK_INDEXER (Qwen4-Exp's QSA, Qwen4ExpTextQSAIndexer): a query's
 *     visible keys in blocks of indexer_compress_ratio, in order; it keeps
 *     the last, incomplete block and the indexer_budget /
 *     indexer_compress_ratio best of the complete ones: every key while it
 *     sees fewer than indexer_budget + indexer_compress_ratio.
 *   RA_HF_SPARSE_LAYER_INDEXER (MiniMax-M3, MiniMaxM3VLIndexer): the keys in
 *     blocks of index_block_size by their place; a query keeps
 *     min(index_topk_blocks, blocks) of the blocks not wholly after it (its
 *     index_local_blocks nearest first): every key while it sees at most
 *     index_topk_blocks * index_block_size.  Only the layers layer_types
 *     names "minimax_m3_sparse" have an indexer.  Its blocks are key slots
 *     (their index in the sequence) while it masks future keys and picks
 *     the local blocks by position id (key slot > position_id,
 *     position_id // index_block_size): the dense layer is its answer only
 *     where each query's position is its slot, and while its slots (padding
 *     too) number at most that bound: ra_layer_config.positions_are_slots.
 *     The other two select among the keys the attention mask leaves.
 */
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* A positive integer at key into *out, def where absent (def 0: required,
 * its absence or null refused: transformers cannot build the indexer). */
static ra_status read_count(const cJSON *root, const char *key, int64_t def, int64_t *out,
                            const ra_hf_fields *hf, const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, key, name, &item, msg, msg_len));
    *out = def;
    if (item == NULL && def == 0)
        return ra_io_fail(msg, msg_len, RA_ERR_NOT_FOUND, "%s: no \"%s\": model_type \"%s\" "
                          "builds its indexer from it (transformers fails without it)", name,
                          key, hf->family->model_type);
    if (item != NULL && (!ra_io_json_integer(item, out) || *out <= 0 || *out > INT32_MAX))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be a positive integer "
                          "(at most %d)", name, key, INT32_MAX);
    return RA_OK;
}

/* Qwen4ExpTextConfig's QSA keys, each required and positive (its
 * validate_architecture), indexer_kv_heads 1 and indexer_budget a multiple
 * of indexer_compress_ratio. */
static ra_status read_block_indexer(const cJSON *root, ra_hf_fields *out, const char *name,
                                    char *msg, size_t msg_len)
{
    static const char *const keys[] = {"indexer_n_heads", "indexer_kv_heads",
                                       "indexer_head_dim", "indexer_budget",
                                       "indexer_compress_ratio"};
    int64_t v[5];
    for (int i = 0; i < 5; i++)
        RA_TRY(read_count(root, keys[i], 0, &v[i], out, name, msg, msg_len));
    if (v[1] != 1)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"indexer_kv_heads\" is %lld; "
                          "model_type \"%s\" requires 1 (transformers raises)", name,
                          (long long)v[1], out->family->model_type);
    if (v[3] % v[4] != 0)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"indexer_budget\" %lld is not a "
                          "multiple of \"indexer_compress_ratio\" %lld (transformers raises)",
                          name, (long long)v[3], (long long)v[4]);
    out->sparse_keys = v[3] + v[4] - 1;
    return RA_OK;
}

/* MiniMaxM3VLTextConfig's indexer keys (its defaults where absent); its
 * legacy sparse_attention_config, whose keys replace them, is not read. */
static ra_status read_sparse_layer_indexer(const cJSON *root, ra_hf_fields *out,
                                           const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "sparse_attention_config", name, &item, msg, msg_len));
    if (item != NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"sparse_attention_config\" "
                          "(its keys replace index_block_size, index_topk_blocks ...) is not "
                          "read: give those keys at the config's top level", name);
    int64_t block, topk, local;
    RA_TRY(read_count(root, "index_block_size", 128, &block, out, name, msg, msg_len));
    RA_TRY(read_count(root, "index_topk_blocks", 16, &topk, out, name, msg, msg_len));
    RA_TRY(ra_io_json_key(root, "index_local_blocks", name, &item, msg, msg_len));
    if (item != NULL && (!ra_io_json_integer(item, &local) || local < 0))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"index_local_blocks\" must be an "
                          "integer >= 0", name);
    out->sparse_keys = block * topk;
    return RA_OK;
}

const char *ra_hf_indexed_layer_type(const ra_hf_family *family)
{
    const ra_hf_features features = family ? family->features : 0;
    if (features & (RA_HF_INDEXER_TOPK | RA_HF_BLOCK_INDEXER)) return "indexed_attention";
    if (features & RA_HF_SPARSE_LAYER_INDEXER) return "minimax_m3_sparse";
    return NULL;
}

/* layer_types' name of layer i (i below n_layer_types). */
static const char *layer_type_name(const ra_hf_window *w, int64_t i)
{
    return cJSON_GetArrayItem(w->layer_type_names, (int)i)->valuestring;
}

/* Whether layer `layer` has an indexer: every layer but with
 * RA_HF_SPARSE_LAYER_INDEXER or RA_HF_INDEXED_LAYER_TYPES, where layer_types
 * names it (layer -1: any listed layer so named). */
static int has_indexer(const ra_hf_fields *hf, int64_t layer)
{
    if (!(hf->family->features & (RA_HF_SPARSE_LAYER_INDEXER | RA_HF_INDEXED_LAYER_TYPES)))
        return 1;
    const ra_hf_window *w = &hf->window;
    const char *sparse = ra_hf_indexed_layer_type(hf->family);
    for (int64_t i = layer < 0 ? 0 : layer; i < w->n_layer_types && (layer < 0 || i == layer);
         i++)
        if (strcmp(layer_type_name(w, i), sparse) == 0) return 1;
    return 0;
}

/* An indexed layer's mask is the full causal one, which its indexer narrows
 * (to nothing, where it runs): its layer_types entry read as full_attention
 * (ra_hf_indexed_layer_type; hf/layer.c's check of a layer's kind passes it
 * so too). */
static void indexed_layers_full(ra_hf_fields *out)
{
    const char *indexed = ra_hf_indexed_layer_type(out->family);
    ra_hf_window *w = &out->window;
    for (int64_t i = 0; indexed && i < w->n_layer_types; i++)
        if (strcmp(layer_type_name(w, i), indexed) == 0)
            w->layer_types[i] = RA_HF_FULL_ATTENTION;
}

ra_status ra_hf_sparse_read(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                            size_t msg_len)
{
    const ra_hf_features features = out->family ? out->family->features : 0;
    out->sparse_keys = 0;
    if (features & RA_HF_ROTARY_DIM_IGNORED) /* read by no code: not the rope's size */
        out->rotary_dim = 0, out->has_rotary_dim = 0;
    indexed_layers_full(out);
    if (features & RA_HF_INDEXER_TOPK) out->sparse_keys = out->index_topk;
    if (features & RA_HF_BLOCK_INDEXER) return read_block_indexer(root, out, name, msg, msg_len);
    if (features & RA_HF_SPARSE_LAYER_INDEXER)
        return read_sparse_layer_indexer(root, out, name, msg, msg_len);
    return RA_OK;
}

int64_t ra_hf_sparse_keys(const ra_hf_fields *hf, int64_t layer)
{
    if (!hf->family || hf->sparse_keys <= 0 || !has_indexer(hf, layer)) return 0;
    return hf->sparse_keys;
}

int ra_hf_sparse_by_slots(const ra_hf_fields *hf, int64_t layer)
{
    return ra_hf_sparse_keys(hf, layer) && (hf->family->features & RA_HF_SPARSE_LAYER_INDEXER);
}
