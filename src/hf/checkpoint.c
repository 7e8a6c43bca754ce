/*
 * checkpoint.c — the .safetensors files of a checkpoint, and the attention
 * tensors of one layer in them, under the names its family gives them (its
 * row in families.c: Phi's dense, Phi-3's fused qkv_proj, GPT-NeoX's,
 * Falcon's, ChatGLM's query_key_value, DBRX's Wqkv, Moshi's ...) or the
 * common ones:
 *   Meta's LLaMA reference code      wq.weight  wk.weight  wv.weight  wo.weight,
 *                                    attention.wq.weight, layers.N.attention.wq.weight
 *   Hugging Face Llama               q_proj.weight  k_proj.weight  v_proj.weight
 *                                    o_proj.weight, also under self_attn.,
 *                                    model.layers.N.self_attn., layers.N.self_attn.,
 *                                    and a multimodal model's language_model
 *   DeepSeek-V2, V3, Kimi K2         kv_a_proj_with_mqa.weight kv_a_layernorm.weight
 *   (latent attention)               kv_b_proj.weight o_proj.weight and q_proj.weight,
 *                                    or q_a_proj, q_a_layernorm, q_b_proj; under
 *                                    model.layers.N.self_attn. as Hugging Face's
 * with their biases (Qwen2: q_proj.bias ...), an output gate (AfMoE:
 * gate_proj.weight beside q_proj), q/k norms (Qwen3: q_norm.weight;
 * StableLM 2: q_layernorm.norms.N.weight; HunYuan-V1:
 * query_layernorm.weight; Persimmon: q_layernorm.weight and
 * q_layernorm.bias) and a norm before o_proj (BitNet's
 * attn_sub_norm.weight).  Meta's names
 * imply the interleaved RoPE layout; Hugging Face names the half layout
 * (its conversion permutes the rows of wq and wk).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf.h"
#include "memory.h"

#define NAME_LEN 256

typedef ra_hf_names naming_scheme;

#define SEED_NAMES {"wq.weight", "wk.weight", "wv.weight", "wo.weight"}
#define HF_NAMES {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}
/* Latent attention's: the four tensors every such layer has (q's are
 * looked for beside them: find_latent). */
#define MLA_NAMES {"kv_a_proj_with_mqa.weight", "kv_b_proj.weight", \
                   "kv_a_layernorm.weight", "o_proj.weight"}
/* Hugging Face's prefixes: a file of one layer's, or of a model's layers
 * (a multimodal model's text layers under language_model: transformers 5's
 * model.language_model.layers.N, 4's language_model.model.layers.N). */
#define HF_SCHEMES(names)                                                         \
    {"", NULL, names, RA_LAYOUT_HALF, FUSED_NONE, NULL},                          \
    {"self_attn.", NULL, names, RA_LAYOUT_HALF, FUSED_NONE, NULL},                \
    {"model.layers.", ".self_attn.", names, RA_LAYOUT_HALF, FUSED_NONE, NULL},    \
    {"layers.", ".self_attn.", names, RA_LAYOUT_HALF, FUSED_NONE, NULL},          \
    {"model.language_model.layers.", ".self_attn.", names, RA_LAYOUT_HALF,        \
     FUSED_NONE, NULL},                                                           \
    {"language_model.model.layers.", ".self_attn.", names, RA_LAYOUT_HALF,        \
     FUSED_NONE, NULL}

/* The common schemes, for a family without names of its own (its row's
 * names) and a file without a config: Meta's and Hugging Face's. */
static const naming_scheme common_schemes[] = {
    {"", NULL, SEED_NAMES, RA_LAYOUT_INTERLEAVED, FUSED_NONE, NULL},
    {"attention.", NULL, SEED_NAMES, RA_LAYOUT_INTERLEAVED, FUSED_NONE, NULL},
    {"layers.", ".attention.", SEED_NAMES, RA_LAYOUT_INTERLEAVED, FUSED_NONE, NULL},
    HF_SCHEMES(HF_NAMES),
};
static const naming_scheme latent_schemes[] = {HF_SCHEMES(MLA_NAMES)};
#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

/* The schemes one layer is looked for under (tried in order; the one whose
 * four projections are all there is read, two such: refused, two_schemes),
 * and what a file without any holds instead. */
#define MAX_SCHEMES 64
typedef struct scheme_list {
    const naming_scheme *at[MAX_SCHEMES];
    int n;
    const char *expected; /* NULL: the family's first scheme */
    const ra_hf_family *family; /* the config's, or NULL */
} scheme_list;

/* Whether two schemes name the same tensors the same way. */
static int same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}
static int same_scheme(const naming_scheme *a, const naming_scheme *b)
{
    int same = same_str(a->prefix, b->prefix) && same_str(a->infix, b->infix) &&
               a->layout == b->layout && a->fused == b->fused &&
               same_str(a->returned_bias, b->returned_bias);
    for (int p = 0; p < 4 && same; p++) same = same_str(a->proj[p], b->proj[p]);
    return same;
}

/* at's schemes into list, but those it holds already (a family's table may
 * repeat the common ones: Granite-Docling's model.layers.N) */
static void add_schemes(scheme_list *list, const naming_scheme *at, int n)
{
    for (int i = 0; i < n && list->n < MAX_SCHEMES; i++) {
        int seen = 0;
        for (int s = 0; s < list->n && !seen; s++) seen = same_scheme(list->at[s], &at[i]);
        if (!seen) list->at[list->n++] = &at[i];
    }
}

static int count_names(const ra_hf_names *names)
{
    int n = 0;
    while (names[n].prefix) n++;
    return n;
}

/* A family's own names where its row has them, else the common ones
 * (latent attention's for its families); without a family (no config),
 * the common ones and every family's. */
static ra_status scheme_list_for(const ra_hf_family *family, scheme_list *list)
{
    list->n = 0;
    list->family = family;
    if (family && family->names) {
        add_schemes(list, family->names, count_names(family->names));
        list->expected = NULL;
        return RA_OK;
    }
    if (family && (family->features & RA_HF_MLA)) {
        add_schemes(list, latent_schemes, COUNT(latent_schemes));
        list->expected = "latent attention's kv_a_proj_with_mqa.weight, kv_a_layernorm.weight, "
                         "kv_b_proj.weight and o_proj.weight (the config's model_type says so), "
                         "optionally under model.layers.N.self_attn.";
        return RA_OK;
    }
    add_schemes(list, common_schemes, COUNT(common_schemes));
    list->expected = "wq.weight .. wo.weight (Meta's LLaMA code) or q_proj.weight .. "
                     "o_proj.weight (Hugging Face), optionally under model.layers.N.self_attn.";
    for (int64_t i = 0; !family && ra_hf_family_at(i); i++) {
        const ra_hf_names *names = ra_hf_family_at(i)->names;
        if (ra_hf_family_at(i)->features & RA_HF_MLA) continue; /* read with their config */
        if (names) add_schemes(list, names, count_names(names)); /* (LFM2's rows share one) */
    }
    if (list->n == MAX_SCHEMES) /* the table outgrew the list: never silently fewer */
        return hf_fail(RA_ERR_UNSUPPORTED, "more than %d naming schemes: raise MAX_SCHEMES in "
                       "checkpoint.c", MAX_SCHEMES - 1);
    return RA_OK;
}

static void tensor_name(char *name, const naming_scheme *scheme, int64_t layer, int proj)
{
    if (scheme->infix)
        snprintf(name, NAME_LEN, "%s%lld%s%s", scheme->prefix, (long long)layer,
                 scheme->infix, scheme->proj[proj]);
    else
        snprintf(name, NAME_LEN, "%s%s", scheme->prefix, scheme->proj[proj]);
}

int64_t hf_layer_number(const char *text, size_t len)
{
    if (len == 0 || (text[0] == '0' && len > 1)) return -1;
    int64_t layer = 0;
    for (size_t i = 0; i < len; i++) {
        int digit = text[i] - '0';
        if (digit < 0 || digit > 9 || layer > (INT32_MAX - digit) / 10) return -1;
        layer = layer * 10 + digit;
    }
    return layer;
}

/* layer_of's answer for "<prefix>N<infix>wq" whose N is digits and signs
 * but no layer number (007, +1, -1, beyond int64, empty). */
#define NOT_CANONICAL (-2)

/* The layer number in name if name is scheme's wq for some layer,
 * NOT_CANONICAL, else -1. */
static int64_t layer_of(const char *name, const naming_scheme *scheme)
{
    char tail[NAME_LEN];
    snprintf(tail, sizeof tail, "%s%s", scheme->infix, scheme->proj[PROJ_Q]);
    size_t len = strlen(name), prefix_len = strlen(scheme->prefix), tail_len = strlen(tail);
    if (len < prefix_len + tail_len || strncmp(name, scheme->prefix, prefix_len) != 0 ||
        strcmp(name + len - tail_len, tail) != 0)
        return -1;
    const char *number = name + prefix_len;
    size_t number_len = len - prefix_len - tail_len;
    if (strspn(number, "+-0123456789") < number_len) return -1;
    int64_t layer = hf_layer_number(number, number_len);
    return layer >= 0 ? layer : NOT_CANONICAL;
}

const ra_st_tensor *hf_find_tensor(const ra_hf_checkpoint *files, const char *name,
                                   int64_t *file)
{
    for (int64_t i = 0; i < files->n; i++) {
        const ra_st_tensor *t = ra_safetensors_find(files->files[i], name);
        if (t && file) *file = i;
        if (t) return t;
    }
    return NULL;
}

/* Opens path, naming it in any message. */
static ra_status open_file(ra_safetensors **out, const char *path)
{
    char msg[512];
    ra_status status = ra_safetensors_open(out, path, msg, sizeof msg);
    return status == RA_OK ? RA_OK : hf_fail(status, "%s", msg);
}

/* Opens the shards index names, beside it, into out->files (n of them so
 * far: out->n); refuses a tensor found in two shards. */
static ra_status open_shards(ra_hf_checkpoint *out, const ra_st_index *index, const char *path)
{
    const char *slash = strrchr(path, '/');
    int folder = slash ? (int)(slash - path + 1) : 0; /* keeps the '/' */
    for (int64_t i = 0; i < index->n_shards; i++) {
        size_t len = (size_t)folder + strlen(index->shards[i]) + 1;
        char *shard = ra_malloc(len);
        if (!shard) return hf_fail(RA_ERR_NOMEM, "out of memory for the shards' paths");
        snprintf(shard, len, "%.*s%s", folder, path, index->shards[i]);
        ra_status status = open_file(&out->files[out->n], shard);
        if (status != RA_OK) {
            ra_free(shard);
            return status;
        }
        out->paths[out->n++] = shard;
        const ra_safetensors *last = out->files[out->n - 1];
        for (int64_t t = 0; t < ra_safetensors_count(last); t++) {
            const char *name = ra_safetensors_at(last, t)->name;
            for (int64_t j = 0; j < out->n - 1; j++)
                if (ra_safetensors_find(out->files[j], name))
                    return hf_fail(RA_ERR_FORMAT, "%s: tensor '%s' is in two shards, %s and %s",
                                   path, name, index->shards[j], index->shards[i]);
        }
    }
    return RA_OK;
}

/* The files: path itself, or the shards its index names. */
static ra_status open_files(ra_hf_checkpoint *out, const char *path)
{
    size_t len = strlen(path);
    if (len < 5 || strcmp(path + len - 5, ".json") != 0) {
        out->files = ra_malloc(sizeof *out->files);
        out->paths = ra_malloc(sizeof *out->paths);
        if (!out->files || !out->paths) return hf_fail(RA_ERR_NOMEM, "out of memory");
        ra_status status = open_file(&out->files[0], path);
        if (status != RA_OK) return status;
        out->n = 1;
        if (!(out->paths[0] = ra_strdup(path))) return hf_fail(RA_ERR_NOMEM, "out of memory");
        return RA_OK;
    }
    char msg[512];
    ra_st_index index;
    ra_status status = ra_st_index_read(path, &index, msg, sizeof msg);
    if (status != RA_OK) return hf_fail(status, "%s", msg);
    out->files = ra_calloc((size_t)index.n_shards, sizeof *out->files);
    out->paths = ra_calloc((size_t)index.n_shards, sizeof *out->paths);
    status = out->files && out->paths ? open_shards(out, &index, path)
                                      : hf_fail(RA_ERR_NOMEM, "out of memory");
    ra_st_index_free(&index);
    return status;
}

RA_HF_API ra_status ra_hf_checkpoint_open(ra_hf_checkpoint **out, const char *path)
{
    hf_reset();
    if (!out || !path) return hf_fail(RA_ERR_NULL, "%s is NULL", out ? "path" : "out");
    *out = NULL;
    ra_hf_checkpoint *ckpt = ra_calloc(1, sizeof *ckpt);
    char *copy = ra_strdup(path);
    if (!ckpt || !copy) {
        ra_free(ckpt);
        ra_free(copy);
        return hf_fail(RA_ERR_NOMEM, "out of memory");
    }
    ckpt->path = copy;
    ra_status status = open_files(ckpt, path);
    if (status != RA_OK) {
        ra_hf_checkpoint_close(ckpt);
        return status;
    }
    *out = ckpt;
    return RA_OK;
}

RA_HF_API void ra_hf_checkpoint_close(ra_hf_checkpoint *ckpt)
{
    if (!ckpt) return;
    for (int64_t i = 0; i < ckpt->n; i++) {
        ra_safetensors_close(ckpt->files[i]);
        ra_free(ckpt->paths[i]);
    }
    ra_free(ckpt->files);
    ra_free(ckpt->paths);
    ra_free(ckpt->path);
    ra_free(ckpt);
}

RA_HF_API int64_t ra_hf_checkpoint_file_count(const ra_hf_checkpoint *ckpt)
{
    return ckpt ? ckpt->n : 0;
}

RA_HF_API const char *ra_hf_checkpoint_file_path(const ra_hf_checkpoint *ckpt, int64_t i)
{
    return ckpt && i >= 0 && i < ckpt->n ? ckpt->paths[i] : NULL;
}

/* The layers that per-layer names in the files cover: how many, lowest,
 * highest; and the first name whose layer number is not canonical. */
typedef struct layer_census {
    int64_t count, lowest, highest;
    const char *not_canonical;
} layer_census;

/* Counts name in census if it is some scheme's wq for a layer. */
static void count_name(layer_census *census, const scheme_list *list, const char *name)
{
    for (int s = 0; s < list->n; s++) {
        if (!list->at[s]->infix) continue;
        int64_t layer = layer_of(name, list->at[s]);
        if (layer == NOT_CANONICAL && !census->not_canonical) census->not_canonical = name;
        if (layer < 0) continue;
        census->count++;
        if (layer < census->lowest) census->lowest = layer;
        if (layer > census->highest) census->highest = layer;
        return; /* schemes that share wq's name count it once */
    }
}

static layer_census count_layers(const ra_hf_checkpoint *files, const scheme_list *list)
{
    layer_census census = {0, INT64_MAX, -1, NULL};
    for (int64_t f = 0; f < files->n; f++)
        for (int64_t i = 0; i < ra_safetensors_count(files->files[f]); i++)
            count_name(&census, list, ra_safetensors_at(files->files[f], i)->name);
    return census;
}

/* How many of scheme's projections for layer are in the files, counted
 * in order up to the first missing one. */
static int count_found(const ra_hf_checkpoint *files, const naming_scheme *scheme,
                       int64_t layer)
{
    char name[NAME_LEN];
    int found = 0;
    for (int p = 0; p < N_PROJ && found == p; p++) {
        tensor_name(name, scheme, layer, p);
        found += hf_find_tensor(files, name, NULL) != NULL;
    }
    return found;
}

static int has_all(const ra_hf_checkpoint *files, const naming_scheme *scheme, int64_t layer)
{
    return count_found(files, scheme, layer) == N_PROJ;
}

/* The scheme (per layer or not, as asked) whose four projections are in
 * the files, else the first whose wq is (its message names what is
 * missing), else NULL; *second, another scheme whose four are there too
 * (NULL: none). */
static const naming_scheme *find_scheme(const ra_hf_checkpoint *files,
                                        const scheme_list *list, int per_layer, int64_t layer,
                                        const naming_scheme **second)
{
    const naming_scheme *complete = NULL, *partial = NULL;
    *second = NULL;
    for (int s = 0; s < list->n && !*second; s++) {
        if ((list->at[s]->infix != NULL) != per_layer) continue;
        int found = count_found(files, list->at[s], layer);
        if (found == N_PROJ && complete) *second = list->at[s];
        else if (found == N_PROJ) complete = list->at[s];
        else if (found > 0 && !partial) partial = list->at[s];
    }
    return complete ? complete : partial;
}

/* Refuses a layer whose attention weights are there under two naming
 * schemes (which one transformers loads depends on its model class, and
 * the other set would be left out): names both sets' wq. */
static ra_status two_schemes(const char *path, const naming_scheme *a, int64_t layer_a,
                             const naming_scheme *b, int64_t layer_b)
{
    char name_a[NAME_LEN], name_b[NAME_LEN];
    tensor_name(name_a, a, layer_a, PROJ_Q);
    tensor_name(name_b, b, layer_b, PROJ_Q);
    return hf_fail(RA_ERR_UNSUPPORTED, "%s holds two sets of attention weights, named as "
                   "'%s' and as '%s': refused rather than run one of them (keep one set)",
                   path, name_a, name_b);
}

/* Whether the files hold all four of scheme's projections for a layer. */
static int names_some_layer(const ra_hf_checkpoint *files, const naming_scheme *scheme)
{
    scheme_list one = {{scheme}, 1, NULL, NULL};
    layer_census census = count_layers(files, &one);
    return scheme->infix ? census.count > 0 && has_all(files, scheme, census.lowest)
                         : has_all(files, scheme, 0);
}

/* Whether scheme is one of the common ones (a family's table may repeat one). */
static int is_common(const naming_scheme *scheme)
{
    for (int s = 0; s < COUNT(common_schemes); s++)
        if (same_scheme(&common_schemes[s], scheme)) return 1;
    return 0;
}

/* Whose names the files give some layer's four projections: another
 * family's own ("model_type \"X\"'s") or the common ones, into who; "" for
 * neither. */
static void named_otherwise(const ra_hf_checkpoint *files, const ra_hf_family *family,
                            char *who, size_t size)
{
    *who = '\0';
    for (int64_t i = 0; ra_hf_family_at(i); i++) {
        const ra_hf_names *names = ra_hf_family_at(i)->names;
        if (names == family->names) continue;
        for (int s = 0; names && names[s].prefix; s++)
            if (!is_common(&names[s]) && names_some_layer(files, &names[s])) {
                snprintf(who, size, "model_type \"%s\"'s", ra_hf_family_at(i)->model_type);
                return;
            }
    }
    for (int s = 0; s < COUNT(common_schemes); s++)
        if (names_some_layer(files, &common_schemes[s])) {
            snprintf(who, size, "the common names (Meta's or Hugging Face's)");
            return;
        }
}

static ra_status no_attention_weights(const ra_hf_checkpoint *files, const scheme_list *list)
{
    char expected[2 * NAME_LEN + 64], first[NAME_LEN], last[NAME_LEN], who[128] = "";
    if (list->expected) {
        snprintf(expected, sizeof expected, "%s", list->expected);
    } else { /* the family's own names: its first scheme's */
        tensor_name(first, list->at[0], 0, PROJ_Q);
        tensor_name(last, list->at[0], 0, PROJ_O);
        snprintf(expected, sizeof expected, "%s .. %s (layer 0's)", first, last);
    }
    if (list->family) named_otherwise(files, list->family, who, sizeof who);
    if (*who)
        return hf_fail(RA_ERR_NOT_FOUND, "%s holds no attention weights under the names of "
                       "model_type \"%s\" (%s), but a layer's under %s: is the config's "
                       "model_type right?", files->path, list->family->model_type, expected,
                       who);
    return hf_fail(RA_ERR_NOT_FOUND, "%s holds no attention weights: expected %s", files->path,
                   expected);
}

/* Picks the scheme and layer when no layer was asked for. */
static ra_status pick_without_layer(const ra_hf_checkpoint *files, const scheme_list *list,
                                    const layer_census *census, const naming_scheme **scheme,
                                    int64_t *layer)
{
    const char *path = files->path;
    const naming_scheme *second, *per_layer;
    *scheme = find_scheme(files, list, 0, 0, &second);
    *layer = 0;
    if (second) return two_schemes(path, *scheme, 0, second, 0);
    if (census->count == 0 && *scheme) return RA_OK;
    if (census->count == 0) return no_attention_weights(files, list);
    per_layer = find_scheme(files, list, 1, census->lowest, &second);
    if (*scheme && per_layer && has_all(files, *scheme, 0) &&
        has_all(files, per_layer, census->lowest))
        return two_schemes(path, *scheme, 0, per_layer, census->lowest);
    if (*scheme) return RA_OK;
    if (second) return two_schemes(path, per_layer, census->lowest, second, census->lowest);
    if (census->count > 1)
        return hf_fail(RA_ERR_ARGUMENT,
                       "%s holds attention weights for %lld layers (numbered %lld to %lld): "
                       "choose one", path, (long long)census->count,
                       (long long)census->lowest, (long long)census->highest);
    *layer = census->lowest;
    *scheme = per_layer;
    return RA_OK;
}

/* Picks the scheme for the layer asked for. */
static ra_status pick_with_layer(const ra_hf_checkpoint *files, const scheme_list *list,
                                 const layer_census *census, int64_t layer,
                                 const naming_scheme **scheme)
{
    const char *path = files->path;
    const naming_scheme *second, *ignored; /* two bare sets: refused without a layer */
    *scheme = find_scheme(files, list, 1, layer, &second);
    if (second) return two_schemes(path, *scheme, layer, second, layer);
    const naming_scheme *bare = find_scheme(files, list, 0, 0, &ignored);
    if (*scheme && bare && has_all(files, bare, 0) && has_all(files, *scheme, layer))
        return two_schemes(path, bare, 0, *scheme, layer);
    if (*scheme) return RA_OK;
    if (bare) {
        char name[NAME_LEN];
        tensor_name(name, bare, 0, PROJ_Q);
        return hf_fail(RA_ERR_ARGUMENT,
                       "layer %lld was asked for, but %s names one layer only ('%s'): "
                       "ask for none", (long long)layer, path, name);
    }
    if (census->count == 0) return no_attention_weights(files, list);
    return hf_fail(RA_ERR_NOT_FOUND, "%s has no attention weights for layer %lld "
                   "(it has layers numbered %lld to %lld)", path, (long long)layer,
                    (long long)census->lowest, (long long)census->highest);
}

/* Modules beside attention in a file of one layer's tensors without a
 * prefix (the projections at the top level). */
static const char *const other_modules[] = {
    "mlp.", "input_layernorm.", "post_attention_layernorm.", "pre_feedforward_layernorm.",
    "post_feedforward_layernorm.", "feed_forward.", "attention_norm.", "ffn_norm.",
    "block_sparse_moe.", "model.", "lm_head.", "embed_tokens.", "norm.", "tok_embeddings.",
    "output.", "layers.", "attention.", "self_attn.", "transformer.", "gpt_neox.",
};

/* Whether name, in a file whose attention tensors have prefix stem (the
 * first stem_len bytes of wq's name), belongs to that attention module. */
static int in_module(const char *name, const char *stem, int stem_len)
{
    if (stem_len > 0) return strncmp(name, stem, (size_t)stem_len) == 0;
    for (size_t i = 0; i < sizeof other_modules / sizeof other_modules[0]; i++)
        if (strncmp(name, other_modules[i], strlen(other_modules[i])) == 0) return 0;
    return 1;
}

/* Buffers older checkpoints saved that transformers recomputes and ignores:
 * rotary_emb.inv_freq (ESM's self.rotary_embeddings.inv_freq), and GPT-J's and GPT-NeoX's causal mask ("bias", of
 * booleans) and masked_bias (one number). */
static int ignored_buffer(const ra_st_tensor *x, const char *suffix)
{
    return strcmp(suffix, "rotary_emb.inv_freq") == 0 ||
           strcmp(suffix, "self.rotary_embeddings.inv_freq") == 0 || /* ESM's */
           (strcmp(suffix, "bias") == 0 && (x->dtype == RA_ST_BOOL || x->dtype == RA_ST_U8)) ||
           (strcmp(suffix, "masked_bias") == 0 && x->count == 1);
}

/* Whether name ends in suffix. */
static int ends_with(const char *name, const char *suffix)
{
    size_t len = strlen(name), n = strlen(suffix);
    return len >= n && strcmp(name + len - n, suffix) == 0;
}

/* Whether suffix (a tensor's name after the attention module's stem) is
 * one of a sparse-attention indexer's tensors (DeepseekV32Indexer: wq_b,
 * wk, k_norm, weights_proj; Qwen4ExpTextQSAIndexer: index_qk_proj,
 * q_layernorm, k_layernorm; MiniMaxM3VLIndexer: q_proj, k_proj, q_norm,
 * k_norm, or index_q_proj .. index_k_norm beside the layer's as MiniMax-M3's
 * release names them), or the block-FP8 scale of one. */
static int indexer_tensor(const char *suffix)
{
    static const char *const names[] = {
        "indexer.wq_b.weight",          "indexer.wk.weight",
        "indexer.k_norm.weight",        "indexer.k_norm.bias",
        "indexer.weights_proj.weight",  "indexer.index_qk_proj.weight",
        "indexer.q_layernorm.weight",   "indexer.k_layernorm.weight",
        "indexer.q_proj.weight",        "indexer.k_proj.weight",
        "indexer.q_norm.weight",
        /* MiniMax-M3's release (transformers' conversion renames them indexer.*) */
        "index_q_proj.weight",          "index_k_proj.weight",
        "index_q_norm.weight",          "index_k_norm.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(suffix, names[i], n) == 0 &&
            (suffix[n] == 0 || strcmp(suffix + n, "_scale_inv") == 0))
            return 1;
    }
    return 0;
}

/* Whether x is one of the tensors t uses. */
static int is_used(const attention_tensors *t, const ra_st_tensor *x)
{
    int used = 0;
    for (int p = 0; p < N_PROJ; p++) used |= x == t->proj[p] || x == t->bias[p];
    for (int m = 0; m < N_MLA; m++) used |= x == t->latent[m] || x == t->latent_bias[m];
    used |= x == t->norm[0] || x == t->norm[1] || x == t->sinks || x == t->o_norm || x == t->gate ||
            x == t->gate_bias;
    for (int n = 0; n < 2; n++) used |= x == t->layer_norm[n] || x == t->layer_norm_bias[n];
    for (int n = 0; n < 2; n++)
        for (int64_t h = 0; h < t->n_head_norms[n]; h++) used |= x == t->head_norms[n][h];
    return used;
}

/* Whether x is "<w>_scale_inv" beside a weight w that t uses (block-FP8
 * scales: the layer checks and reads them, hf/fp8.c). */
static int scales_used(const ra_hf_checkpoint *files, const attention_tensors *t,
                       const ra_st_tensor *x)
{
    char name[NAME_LEN];
    size_t len = strlen(x->name), tail = strlen("_scale_inv");
    if (!ends_with(x->name, ".weight_scale_inv") || len - tail >= sizeof name) return 0;
    snprintf(name, sizeof name, "%.*s", (int)(len - tail), x->name);
    const ra_st_tensor *w = hf_find_tensor(files, name, NULL);
    return w && is_used(t, w);
}

/* Every tensor of the layer's attention module must be one ropeattn uses
 * (a tensor it left out would change the layer), a buffer transformers
 * ignores, the scheme's returned_bias, the family's block_norm (NULL: none), or (indexer set) the
 * indexer's, whose selection the layer does not need where it runs
 * (hf/layer.c).  The block scales of a used weight (weight_scale_inv beside an
 * F8_E4M3 weight, as DeepSeek-V3's release) are read with it; any other
 * scale (compressed-tensors' weight_scale, input scales) is refused. */
static ra_status check_consumed(const ra_hf_checkpoint *files, const attention_tensors *t,
                                int stem_len, const naming_scheme *scheme,
                                const ra_hf_family *family, int indexer)
{
    const char *returned_bias = scheme->returned_bias;
    const char *norm = family ? family->block_norm : NULL;
    const char *stem = t->proj[PROJ_O]->name;
    for (int64_t f = 0; f < files->n; f++)
        for (int64_t i = 0; i < ra_safetensors_count(files->files[f]); i++) {
            const ra_st_tensor *x = ra_safetensors_at(files->files[f], i);
            if (!in_module(x->name, stem, stem_len) || ignored_buffer(x, x->name + stem_len) ||
                (returned_bias && strcmp(x->name + stem_len, returned_bias) == 0) ||
                (norm && strncmp(x->name + stem_len, norm, strlen(norm)) == 0) ||
                (indexer && indexer_tensor(x->name + stem_len)))
                continue;
            int used = is_used(t, x) || scales_used(files, t, x);
            if (!used && (ends_with(x->name, "_scale_inv") || ends_with(x->name, "_scale")))
                return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s scales a quantized "
                               "weight or input in a way ropeattn does not read (it reads "
                               "block-FP8 weight_scale_inv beside a weight it uses): refused",
                               x->name, files->paths[f]);
            if (!used)
                return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s belongs to the attention "
                               "layer and ropeattn does not use it: refused rather than run "
                               "without it", x->name, files->paths[f]);
        }
    return RA_OK;
}

/* StableLM 2's q_layernorm.norms.N.weight (k_...) beside wq, N = 0, 1 ...
 * while they are there (a later one after a gap is left for check_consumed
 * to refuse). */
static ra_status find_head_norms(const ra_hf_checkpoint *files, attention_tensors *out,
                                 int stem)
{
    static const char *const modules[] = {"q_layernorm", "k_layernorm"};
    const char *wq = out->proj[PROJ_Q]->name;
    char name[NAME_LEN];
    for (int i = 0; i < 2; i++) {
        int64_t n = 0;
        for (;; n++) {
            snprintf(name, NAME_LEN, "%.*s%s.norms.%lld.weight", stem, wq, modules[i],
                     (long long)n);
            if (!hf_find_tensor(files, name, NULL)) break;
        }
        if (n == 0) continue;
        out->head_norms[i] = ra_malloc((size_t)n * sizeof *out->head_norms[i]);
        if (!out->head_norms[i]) return hf_fail(RA_ERR_NOMEM, "out of memory");
        out->n_head_norms[i] = n;
        for (int64_t h = 0; h < n; h++) {
            snprintf(name, NAME_LEN, "%.*s%s.norms.%lld.weight", stem, wq, modules[i],
                     (long long)h);
            out->head_norms[i][h] = hf_find_tensor(files, name, NULL);
        }
    }
    return RA_OK;
}

/* The tensor stem + module + ".weight" (and its ".bias" unless a norm's),
 * or NULL. */
static void find_module(const ra_hf_checkpoint *files, const char *stem, int stem_len,
                        const char *module, int norm, const ra_st_tensor **weight,
                        const ra_st_tensor **bias)
{
    char name[NAME_LEN];
    snprintf(name, NAME_LEN, "%.*s%s.weight", stem_len, stem, module);
    *weight = hf_find_tensor(files, name, NULL);
    snprintf(name, NAME_LEN, "%.*s%s.bias", stem_len, stem, module);
    *bias = norm ? NULL : hf_find_tensor(files, name, NULL);
}

/* The output gate's weight, under the names the family's model loads it
 * by: g_proj (a gate per head: LFM3, Ling; Laguna's softplus), or as LFM3's
 * checkpoints save it, gate_proj; else gate_proj (AfMoE), or as HY V4's
 * checkpoints save it beside latent attention, linear_gate; NULL: none.  (Another name is
 * left unused: refused, check_consumed.)  The layer checks it against the
 * family (hf/gate.c). */
static void find_gate(const ra_hf_checkpoint *files, attention_tensors *out, int stem,
                      ra_hf_features features)
{
    const int g_proj = (features & (RA_HF_GATE_PER_HEAD | RA_HF_SOFTPLUS_G_PROJ)) != 0;
    const char *names[2] = {g_proj ? "g_proj.weight" : "gate_proj.weight",
                            features & RA_HF_GATE_SAVED_AS_GATE_PROJ ? "gate_proj.weight"
                            : !g_proj && (features & RA_HF_MLA) ? "linear_gate.weight" /* HY V4 */
                                                                 : NULL};
    char name[NAME_LEN];
    out->gate = NULL;
    for (int i = 0; i < 2 && names[i] && !out->gate; i++) {
        snprintf(name, NAME_LEN, "%.*s%s", stem, out->proj[PROJ_Q]->name, names[i]);
        out->gate = hf_find_tensor(files, name, NULL);
    }
}

/* Latent attention's tensors beside o_proj: the four of its scheme, found,
 * in proj[PROJ_Q .. PROJ_O] (kv_a_proj_with_mqa, kv_b_proj, kv_a_layernorm,
 * o_proj), moved to latent[]; q's looked for by name (q_b_proj also under
 * the family's row's name for it). */
static void find_latent(const ra_hf_checkpoint *files, attention_tensors *out, int stem,
                        const ra_hf_family *family)
{
    static const char *const modules[N_MLA] = {
        [MLA_Q] = "q_proj", [MLA_Q_A] = "q_a_proj", [MLA_Q_A_NORM] = "q_a_layernorm",
        [MLA_Q_B] = "q_b_proj", [MLA_KV_A] = "kv_a_proj_with_mqa",
        [MLA_KV_A_NORM] = "kv_a_layernorm", [MLA_KV_B] = "kv_b_proj",
        [MLA_K_ROPE_NORM] = "k_rope_only_layernorm"};
    const char *wo = out->proj[PROJ_O]->name;
    for (int m = 0; m < N_MLA; m++)
        find_module(files, wo, stem, modules[m],
                    m == MLA_Q_A_NORM || m == MLA_KV_A_NORM || m == MLA_K_ROPE_NORM,
                    &out->latent[m], &out->latent_bias[m]);
    if (!out->latent[MLA_Q_B] && family->latent_q_b)
        find_module(files, wo, stem, family->latent_q_b, 0, &out->latent[MLA_Q_B],
                    &out->latent_bias[MLA_Q_B]);
    for (int p = PROJ_Q; p <= PROJ_V; p++) out->proj[p] = out->bias[p] = NULL;
    out->mla = 1;
    /* HY V4's sinks, as transformers names them or as its checkpoints do
     * (hf/layer_mla.c checks them; both names: check_consumed) */
    static const char *const sinks[2] = {"sinks", "learnable_sink_param"};
    char name[NAME_LEN];
    for (int n = 0; n < 2 && !out->sinks; n++) {
        snprintf(name, NAME_LEN, "%.*s%s", stem, wo, sinks[n]);
        out->sinks = hf_find_tensor(files, name, NULL);
    }
}

/* A stack's layers (RA_HF_LAYER_STACKS): model.<stack>.layers.N.self_attn.
 * as transformers names them, or as HRM-Text's checkpoints do:
 * model.<stack>.layers.N.attn.gqkv_proj (the gate's rows, q's, k's, v's) and
 * attn.o_proj. */
#define GQKV_NAMES {"gqkv_proj.weight", "gqkv_proj.weight", "gqkv_proj.weight", "o_proj.weight"}
typedef struct stack_scheme {
    char prefix[64], expected[256];
    naming_scheme schemes[2];
} stack_scheme;

static void stack_list(stack_scheme *s, const char *stack, const ra_hf_family *family,
                       scheme_list *list)
{
    snprintf(s->prefix, sizeof s->prefix, "model.%.40s.layers.", stack);
    snprintf(s->expected, sizeof s->expected, "q_proj.weight .. o_proj.weight under "
             "%sN.self_attn., or gqkv_proj.weight and o_proj.weight under %sN.attn.",
             s->prefix, s->prefix);
    s->schemes[0] = (naming_scheme){s->prefix, ".self_attn.", HF_NAMES, RA_LAYOUT_HALF, 0, NULL};
    s->schemes[1] = (naming_scheme){s->prefix, ".attn.", GQKV_NAMES, RA_LAYOUT_HALF,
                                    FUSED_GATE_ROWS, NULL};
    *list = (scheme_list){{&s->schemes[0], &s->schemes[1]}, 2, s->expected, family};
}

ra_status hf_find_attention(const ra_hf_checkpoint *files, int64_t layer, const char *stack,
                            const ra_hf_family *family, attention_tensors *out)
{
    const ra_hf_features features = family ? family->features : 0;
    const int mla = (features & RA_HF_MLA) != 0;
    const int indexer = (features & (RA_HF_INDEXER_TOPK | RA_HF_BLOCK_INDEXER |
                                     RA_HF_SPARSE_LAYER_INDEXER)) != 0;
    const char *path = files->path;
    scheme_list schemes, *list = &schemes;
    stack_scheme in_stack;
    memset(out, 0, sizeof *out);
    if (stack) stack_list(&in_stack, stack, family, list);
    else RA_HF_TRY(scheme_list_for(family, list));
    /* A layer number written otherwise (model.layers.007...) could name the
     * wrong layer, or the one asked for twice. */
    layer_census census = count_layers(files, list);
    if (census.not_canonical)
        return hf_fail(RA_ERR_FORMAT, "tensor '%s' in %s has a malformed layer number "
                       "(expected 0, 1, 2 ... without signs or leading zeros)",
                       census.not_canonical, path);
    const naming_scheme *scheme;
    ra_status status = layer < 0 ? pick_without_layer(files, list, &census, &scheme, &layer)
                                 : pick_with_layer(files, list, &census, layer, &scheme);
    if (status != RA_OK) return status;
    char name[NAME_LEN];
    for (int p = 0; p < N_PROJ; p++) {
        tensor_name(name, scheme, layer, p);
        out->proj[p] = hf_find_tensor(files, name, NULL);
        /* attention_k_eq_v: values from k_proj (hf_layer_config says where) */
        if (!out->proj[p] && p == PROJ_V && (features & RA_HF_VALUES_FROM_KEYS)) continue;
        if (!out->proj[p])
            return hf_fail(RA_ERR_NOT_FOUND, "%s has '%s' but no tensor '%s'", path,
                           out->proj[PROJ_Q]->name, name);
        size_t len = strlen(name); /* "...q_proj.weight" -> "...q_proj.bias" */
        snprintf(name + len - strlen("weight"), NAME_LEN - (len - strlen("weight")), "bias");
        out->bias[p] = hf_find_tensor(files, name, NULL);
    }
    /* Qwen3's names, else HunYuan-V1's (layer_config.c checks them
     * against the family) */
    static const char *const qk_norms[][2] = {{"q_norm.weight", "k_norm.weight"},
                                              {"query_layernorm.weight", "key_layernorm.weight"},
                                              {"q_layernorm.weight", "k_layernorm.weight"}};
    const char *wq = out->proj[PROJ_Q]->name;
    int stem = (int)(strlen(wq) - strlen(scheme->proj[PROJ_Q]));
    out->layer = scheme->infix ? layer : -1;
    find_gate(files, out, stem, features);
    if (mla) {
        find_latent(files, out, stem, family);
        return check_consumed(files, out, stem, scheme, family, indexer);
    }
    const int head_bias = (features & (RA_HF_QK_NORM_HEAD_BIAS | RA_HF_QK_NORM_BIAS_SHARED)) != 0;
    for (int i = 0; i < 2; i++) /* Persimmon's LayerNorms, with biases; Chameleon's per head,
                                   Nemotron 3.5 Transcribe's shared, under q_norm */
        find_module(files, wq, stem, head_bias ? (i ? "k_norm" : "q_norm")
                                               : (i ? "k_layernorm" : "q_layernorm"),
                    0, &out->layer_norm[i], &out->layer_norm_bias[i]);
    for (int i = 0; i < 2; i++)
        for (int kind = 0; kind < 3 && !out->norm[i]; kind++) {
            snprintf(name, NAME_LEN, "%.*s%s", stem, wq, qk_norms[kind][i]);
            out->norm[i] = hf_find_tensor(files, name, NULL);
        }
    /* q_layernorm.weight: Persimmon's LayerNorm (with its bias), else LFM2's
     * RMSNorm; Chameleon's and Nemotron 3.5 Transcribe's q_norm.weight, its
     * LayerNorm's (with q_norm.bias) */
    for (int i = 0; i < 2; i++)
        if (out->norm[i] == out->layer_norm[i]) {
            if (features & (RA_HF_QK_LAYERNORM_BIAS | RA_HF_QK_NORM_HEAD_BIAS |
                            RA_HF_QK_NORM_BIAS_SHARED))
                out->norm[i] = NULL;
            else out->layer_norm[i] = NULL;
        }
    snprintf(name, NAME_LEN, "%.*ssinks", stem, wq); /* gpt-oss */
    out->sinks = hf_find_tensor(files, name, NULL);
    static const char *const sinks_aliases[] = HF_SINKS_ALIASES; /* Flint's, MiMo's */
    for (size_t i = 0; !out->sinks && i < sizeof sinks_aliases / sizeof *sinks_aliases; i++) {
        snprintf(name, NAME_LEN, "%.*s%s", stem, wq, sinks_aliases[i]);
        out->sinks = hf_find_tensor(files, name, NULL);
    }
    snprintf(name, NAME_LEN, "%.*sattn_sub_norm.weight", stem, wq); /* BitNet */
    out->o_norm = hf_find_tensor(files, name, NULL);
    snprintf(name, NAME_LEN, "%.*sgate_bias", stem, wq); /* Beam's, one per head */
    out->gate_bias = hf_find_tensor(files, name, NULL);
    status = find_head_norms(files, out, stem);
    out->layout = scheme->layout;
    if (status == RA_OK) status = check_consumed(files, out, stem, scheme, family, indexer);
    if (scheme->fused) { /* split later, once the head counts are known */
        out->fused = out->proj[PROJ_Q];
        out->fused_bias = out->bias[PROJ_Q];
        out->packing = scheme->fused;
        for (int p = PROJ_Q; p <= PROJ_V; p++) out->proj[p] = out->bias[p] = NULL;
    }
    return status;
}

/* view = rows [first, first + n) of t (a matrix, or a vector of rows). */
static void row_view(ra_st_tensor *view, const ra_st_tensor *t, int64_t first, int64_t n)
{
    *view = *t;
    int64_t row = t->ndim == 2 ? t->shape[1] : 1;
    size_t row_bytes = (size_t)row * ra_st_dtype_size(t->dtype);
    view->shape[0] = n;
    view->count = n * row;
    view->data = (const char *)t->data + (size_t)first * row_bytes;
    view->nbytes = (size_t)n * row_bytes;
}

void hf_tensors_free(attention_tensors *t)
{
    for (int i = 0; i < 2; i++) {
        ra_free(t->head_norms[i]);
        t->head_norms[i] = NULL;
        t->n_head_norms[i] = 0;
    }
}

ra_status hf_config_packing(const ra_hf_fields *hf, const char *config_path, const char *tensor,
                            const char *path, int64_t n_heads, fused_packing *packing,
                            int64_t *n_kv_heads)
{
    const ra_hf_family *family = hf ? hf->family : NULL;
    const ra_hf_features features = family ? family->features : 0;
    int64_t kv = n_heads;
    *packing = FUSED_GROUPED; /* per head, unless the config says otherwise */
    for (const ra_hf_names *n = family ? family->names : NULL; n && n->prefix; n++)
        if (n->fused == FUSED_QVK_GROUPS) { /* CodeGen's: its names say it */
            *packing = FUSED_QVK_GROUPS;
            *n_kv_heads = n_heads;
            return RA_OK;
        }
    if (features & RA_HF_MULTI_QUERY_GROUPS) {
        if (hf->multi_query) kv = hf->num_key_value_heads;
        if (hf->multi_query) *packing = FUSED_ROWS;
    } else if (features & RA_HF_QKV_BY_MULTI_QUERY) {
        if (hf->has_num_key_value_heads)
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" reads num_kv_heads, "
                           "not num_key_value_heads (transformers would ignore it): refused",
                           config_path, family->model_type);
        if (hf->has_num_kv_heads) kv = hf->num_kv_heads;
        if (!hf->new_decoder_architecture && hf->multi_query) {
            *packing = FUSED_ROWS;
            kv = 1;
        }
        if (!hf->new_decoder_architecture && !hf->multi_query && kv != n_heads)
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: num_kv_heads %lld with neither multi_query "
                           "nor new_decoder_architecture: Falcon packs q, k and v per query "
                           "head", config_path, (long long)kv);
    } else if (!(features & RA_HF_QKV_PER_HEAD)) {
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: how it packs q, k and v is in "
                       "its config (Falcon's multi_query, new_decoder_architecture; ChatGLM's "
                       "multi_query_attention): give the config with its model_type", tensor,
                       path);
    }
    *n_kv_heads = kv;
    return RA_OK;
}

ra_status hf_split_fused(attention_tensors *t, const char *path, int64_t q_rows, int64_t kv_rows)
{
    const ra_st_tensor *fused[2] = {t->fused, t->fused_bias};
    for (int i = 0; i < 2; i++) {
        const ra_st_tensor *f = fused[i];
        if (!f) continue;
        const int gate = t->packing == FUSED_GATE_ROWS; /* the gate's q_rows first */
        if (gate && i)
            return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: the output gate's bias (its "
                           "first rows) is not supported", f->name, path);
        int64_t rest = f->shape[0] - (1 + gate) * q_rows; /* kv rows twice, or wrong */
        if (f->ndim != 2 - i || f->count == 0 || rest < 0 || rest % 2 != 0 ||
            rest / 2 != kv_rows)
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not %s of %s%lld + 2 x %lld rows "
                           "(%swq's, wk's and wv's)", f->name, path, i ? "a vector" : "a matrix",
                           gate ? "2 x " : "", (long long)q_rows, (long long)kv_rows,
                           gate ? "the gate's, " : "");
        ra_st_tensor *views = i ? t->bias_views : t->views;
        const ra_st_tensor **to = i ? t->bias : t->proj;
        const int64_t at = gate * q_rows;
        row_view(&views[0], f, at, q_rows);
        row_view(&views[1], f, at + q_rows, kv_rows);
        row_view(&views[2], f, at + q_rows + kv_rows, kv_rows);
        if (gate) row_view(&views[3], f, 0, q_rows);
        if (gate) t->gate = &views[3];
        for (int p = PROJ_Q; p <= PROJ_V; p++) {
            if (t->packing == FUSED_GROUPED || t->packing == FUSED_QVK_GROUPS)
                views[p].data = NULL; /* shapes only (the layer reads the fused weight) */
            to[p] = &views[p];
        }
    }
    return RA_OK;
}

ra_status hf_load_f32(const ra_st_tensor *t, const char *path, float *dst)
{
    if (t->dtype != RA_ST_F32 && t->dtype != RA_ST_F16 && t->dtype != RA_ST_BF16 &&
        t->dtype != RA_ST_F64)
        return hf_fail(RA_ERR_DTYPE, "tensor '%s' in %s has dtype %s; expected F32, F16, BF16 "
                       "or F64", t->name, path, ra_st_dtype_name(t->dtype));
    ra_status status = ra_st_tensor_to_f32(t, dst);
    if (status == RA_ERR_FORMAT) /* F64's range */
        return hf_fail(status, "tensor '%s' in %s holds a value beyond float32's range "
                       "(+-3.4028235e38): refused rather than read as Inf", t->name, path);
    if (status != RA_OK)
        return hf_fail(status, "cannot convert '%s' in %s to float32: %s", t->name, path,
                       ra_status_string(status));
    return RA_OK;
}
