/*
 * cmd_convert.c — `ropeattn convert-layout`: permutes the rows of wq and wk
 * (and q/k biases and norms) per head between the interleaved and the
 * half-split RoPE layouts, what Hugging Face's Llama conversion does, and
 * copies every other tensor unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ropeattn_hf.h"
#include "ropeattn_io.h"
#include "outputs.h"
#include "rope_cli.h"

static const char usage[] =
    "usage: ropeattn convert-layout --weights IN.safetensors|DIR\n"
    "                               --output OUT.safetensors --to interleaved|half\n"
    "                               [--config config.json | --n-heads H [--n-kv-heads K]]\n"
    "                               [--layer N]\n"
    "\n"
    "Permutes the rows of every query and key projection, per head, from one RoPE\n"
    "layout to the other, so that attention with the target layout gives what the\n"
    "source layout gave on the original file:\n"
    "  --to half         interleaved rows (a0 b0 a1 b1 ...) become (a0 a1 ... b0 b1 ...),\n"
    "                    as Hugging Face's convert_llama_weights_to_hf.py does\n"
    "  --to interleaved  the reverse\n"
    "A file does not record its layout and it cannot be detected from the numbers:\n"
    "--to names the target, and the file is assumed to be in the other layout.\n"
    "Converting to half and back reproduces the input bit for bit.\n"
    "\n"
    "Tensors permuted: wq.weight, wk.weight (Meta's names) and q_proj.weight,\n"
    "k_proj.weight (Hugging Face's; Moshi's q_proj.linear.weight, k_proj.linear.weight;\n"
    "ESM's and RoFormer's attention.self.query.weight, attention.self.key.weight;\n"
    "Cosmos3-Edge's to_q.weight, to_k.weight), with any prefix (every layer), and their\n"
    ".bias vectors and q_norm.weight, k_norm.weight (Qwen3: one head's weights;\n"
    "Cohere: [heads, head_dim]; Chameleon's q_norm.bias, k_norm.bias too),\n"
    "query_layernorm.weight, key_layernorm.weight\n"
    "(HunYuan-V1), q_layernorm.norms.N.weight (StableLM 2) and\n"
    "q_layernorm.weight, q_layernorm.bias (Persimmon; k_... alike);\n"
    "the q and k heads' rows of fused projections and their biases: Phi-3's\n"
    "qkv_proj, DBRX's Wqkv, InternLM2's wqkv, HRM-Text's gqkv_proj (its gate's rows first),\n"
    "CodeGen's qkv_proj (q, v, k per model-parallel group: give its config),\n"
    "and query_key_value packed as the config's\n"
    "family says (GPT-NeoX, Falcon, ChatGLM); F32, F16 or BF16, whose rows move\n"
    "as they are.  Every other tensor is copied unchanged (same dtype, same\n"
    "bytes), and a file without q or k projections (a shard of MLP weights) is\n"
    "copied whole.  Latent attention's tensors (DeepSeek's) are refused, and so,\n"
    "without a config, is a q_proj without its k_proj in the file.  Of the metadata only\n"
    "{\"format\": \"pt\"} is written.  Names are kept, so run `ropeattn attention` on\n"
    "the result with --layout set to the target.\n"
    "\n"
    "  --weights IN    input .safetensors, or a checkpoint folder (its\n"
    "                  model.safetensors)\n"
    "  --output OUT    output .safetensors, written only on success\n"
    "  --to L          the target layout: interleaved or half\n"
    "  --config C      Hugging Face config.json (default: the config.json beside\n"
    "                  IN, if any, as transformers reads it): head_dim (else\n"
    "                  hidden_size / num_attention_heads, else the query\n"
    "                  projection's rows / num_attention_heads),\n"
    "                  num_key_value_heads, partial_rotary_factor (then only the\n"
    "                  first int(head_dim * partial_rotary_factor) rows of each\n"
    "                  head move)\n"
    "  --n-heads H     query heads: head_dim = rows of the query projection / H;\n"
    "                  required without a config, every row of each head then\n"
    "                  moving\n"
    "  --n-kv-heads K  key/value heads, checked against the key projection's rows\n"
    "  --layer N       convert layer N only (names with layers.N.); the other\n"
    "                  layers are copied unchanged\n";

typedef struct convert_options {
    const char *weights, *output, *config;
    int to, has_to;
    int64_t n_heads, n_kv_heads, layer;
    int has_n_heads, has_n_kv_heads, has_layer;
} convert_options;

/* Which projection a tensor name is. */
/* NORM: q_norm or k_norm (HunYuan-V1: query_layernorm, key_layernorm), one
 * head's weights (Qwen3) or each head's [H, D] (Cohere; Chameleon's with
 * their biases), StableLM 2's
 * q_layernorm.norms.N (one head's), or Persimmon's q_layernorm weight and
 * bias (one head's), permuted as heads. */
/* FUSED: q, k and v in one weight (or its bias), whose q and k heads move. */
typedef enum proj_kind { NOT_QK, QUERY, KEY, NORM, FUSED } proj_kind;

/* How a fused q/k/v weight packs its rows: all of q's rows, then k's, then
 * v's (RA_HF_QKV_ROWS); per key/value head, its query heads' rows, then its
 * key's, then its value's (RA_HF_QKV_GROUPED); the output gate's rows, then
 * q's, k's and v's (HRM-Text's gqkv_proj); 4 model-parallel groups, each a
 * quarter of the heads' q rows, then v's, then k's (CodeGen's qkv_proj, as
 * its config's model_type says: RA_HF_QKV_QVK_GROUPS). */
typedef enum fused_packing {
    FUSED_NONE,
    FUSED_ROWS = RA_HF_QKV_ROWS,
    FUSED_GROUPED = RA_HF_QKV_GROUPED,
    FUSED_QVK_GROUPS = RA_HF_QKV_QVK_GROUPS,
    FUSED_GATE_ROWS,
} fused_packing;

/* Whether name is suffix or ends with "." suffix. */
static int ends_with_part(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    if (n < s || strcmp(name + n - s, suffix) != 0) return 0;
    return n == s || name[n - s - 1] == '.';
}

/* The fused q/k/v projections: Phi-3's qkv_proj, GPT-NeoX's, Falcon's and
 * ChatGLM's query_key_value, InternLM2's wqkv, DBRX's Wqkv (and their
 * biases); others (Baichuan's W_pack, GPT-2's c_attn ...) are refused. */
static const char *const fused_names[] = {"qkv_proj", "query_key_value", "wqkv", "Wqkv",
                                          "W_pack", "c_attn", "qkv", "gqkv_proj"};

/* Which of fused_names name is ("<...>.<fused>.weight" or ".bias"), or -1. */
static int fused_index(const char *name)
{
    char part[64];
    for (size_t i = 0; i < sizeof fused_names / sizeof fused_names[0]; i++)
        for (int bias = 0; bias < 2; bias++) {
            snprintf(part, sizeof part, "%s.%s", fused_names[i], bias ? "bias" : "weight");
            if (ends_with_part(name, part)) return (int)i;
        }
    return -1;
}
static proj_kind kind_of(const char *name)
{
    static const char *const queries[] = {"wq.weight", "q_proj.weight", "wq.bias", "q_proj.bias",
                                          "q_proj.linear.weight", /* (Moshi's) */
                                          "self.query.weight", "self.query.bias", /* (ESM's) */
                                          "to_q.weight", "to_q.bias"}; /* (Cosmos3-Edge's) */
    static const char *const keys[] = {"wk.weight", "k_proj.weight", "wk.bias", "k_proj.bias",
                                       "k_proj.linear.weight", "self.key.weight",
                                       "self.key.bias", "to_k.weight", "to_k.bias"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        if (ends_with_part(name, queries[i])) return QUERY;
        if (ends_with_part(name, keys[i])) return KEY;
    }
    static const char *const head_norms[] = {
        "q_norm.weight", "k_norm.weight", "query_layernorm.weight", "key_layernorm.weight",
        "q_layernorm.weight", "k_layernorm.weight", "q_layernorm.bias", "k_layernorm.bias",
        "q_norm.bias", "k_norm.bias"};
    /* (query_layernorm, key_layernorm: HunYuan-V1's; q_layernorm's bias: Persimmon's;
     * q_norm's bias: Chameleon's) */
    for (size_t i = 0; i < sizeof head_norms / sizeof head_norms[0]; i++)
        if (ends_with_part(name, head_norms[i])) return NORM;
    if (fused_index(name) >= 0) return FUSED;
    const char *norms = strstr(name, "_layernorm.norms.");
    if (norms && norms > name && (norms[-1] == 'q' || norms[-1] == 'k') &&
        (norms - 1 == name || norms[-2] == '.') && ends_with_part(name, "weight"))
        return NORM;
    return NOT_QK;
}

/* layer_of's answer for a "layers.N." part whose N is digits and signs but
 * no layer number (007, +1, -1, beyond int64, empty). */
#define MALFORMED_LAYER (-2)

/* The N of a "layers.N." part of name, MALFORMED_LAYER, or -1 (none). */
static int64_t layer_of(const char *name)
{
    int64_t layer;
    return ra_hf_tensor_layer(name, &layer) == RA_OK ? layer : MALFORMED_LAYER;
}

/* The geometry every converted tensor shares. */
typedef struct geometry {
    int64_t head_dim, rotary_dim;
    int64_t n_kv_heads; /* the layer's own (per_layer_config), else 0 */
    int gated; /* the family's query projections give a gate per head after its
                  head_dim query rows (gated_queries): [H, 2, head_dim] rows, the
                  gate rows copied unchanged */
} geometry;

/* head_dim: the config's, else the first query projection's rows / n_heads
 * (--n-heads, else the config's num_attention_heads). */
static int resolve_geometry(const convert_options *opts, const rope_source *src,
                            const ra_safetensors *st, geometry *g)
{
    ra_hf_attention_info c = ra_hf_attention_info_init();
    if (ra_hf_config_attention(src->config, opts->has_layer ? opts->layer : -1, &c) != RA_OK)
        return cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
    int64_t n_heads = opts->has_n_heads ? opts->n_heads : c.n_heads;
    g->head_dim = c.head_dim;
    /* Gemma 4: the layers' own head sizes (per_layer_config): --layer N's */
    if (c.layer_head_dim < 0)
        return cli_fail(EXIT_FAIL, "%s gives some layers a head size or key/value heads of "
                        "their own (per_layer_config, global_head_dim): convert one layer at "
                        "a time (--layer N)", opts->config);
    if (c.layer_head_dim) g->head_dim = c.layer_head_dim;
    g->n_kv_heads = c.layer_n_kv_heads;
    /* attention_k_eq_v: k_proj's rows are the values' too, which o_proj reads in order */
    if (c.values_from_keys != 0)
        return cli_fail(EXIT_FAIL, "%s: %s takes its values from k_proj (attention_k_eq_v), "
                        "whose rows permuted would permute the values o_proj reads: not "
                        "supported", opts->config, opts->has_layer ? "the layer" : "a layer");
    g->gated = (int)c.gated_queries;
    if (g->head_dim == 0 && n_heads) {
        for (int64_t i = 0; i < ra_safetensors_count(st) && g->head_dim == 0; i++) {
            const ra_st_tensor *t = ra_safetensors_at(st, i);
            if (kind_of(t->name) != QUERY || t->ndim < 1) continue;
            if (t->shape[0] == 0 || t->shape[0] % (n_heads << g->gated) != 0)
                return cli_fail(EXIT_FAIL, "tensor '%s' in %s has %lld rows, not a positive "
                                "multiple of n_heads %lld%s", t->name, opts->weights,
                                (long long)t->shape[0], (long long)n_heads,
                                g->gated ? " times 2 (a query and a gate per head)" : "");
            g->head_dim = t->shape[0] / (n_heads << g->gated);
        }
    }
    if (g->head_dim == 0) {
        if (!src->has_config && !opts->has_n_heads)
            return cli_fail(EXIT_USAGE, "convert-layout: --config or --n-heads is required "
                            "(see 'ropeattn convert-layout --help')");
        if (!n_heads)
            return cli_fail(EXIT_FAIL, "%s has neither head_dim nor num_attention_heads: give "
                            "--n-heads", opts->config);
        return cli_fail(EXIT_FAIL, "%s has no query projection (wq.weight or q_proj.weight)",
                        opts->weights);
    }
    /* the rows of each head that move: the rope's pairs */
    ra_status status = ra_hf_config_rotary_dim(src->config, g->head_dim, &g->rotary_dim);
    if (status == RA_ERR_UNSUPPORTED)
        return cli_fail(EXIT_FAIL, "convert-layout: %s: not converted", ra_hf_last_error());
    return status == RA_OK ? 0 : cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
}

static ra_dtype library_dtype(ra_st_dtype dtype, int *ok)
{
    *ok = 1;
    switch (dtype) {
    case RA_ST_F32: return RA_F32;
    case RA_ST_F16: return RA_F16;
    case RA_ST_BF16: return RA_BF16;
    default: *ok = 0; return RA_F32;
    }
}

/* How fused tensor t packs its heads (n_heads query heads): *packing and
 * *n_kv_heads; refused (one message) where the name or config do not say. */
static int fused_layout(const convert_options *opts, const rope_source *src,
                        const ra_st_tensor *t, int64_t n_heads, int64_t n_kv_heads,
                        fused_packing *packing, int64_t *kv)
{
    int which = fused_index(t->name);
    *kv = n_kv_heads ? n_kv_heads : n_heads; /* transformers: num_attention_heads */
    int64_t by_family, family_kv;
    if (which == 0 && src->has_config && /* CodeGen's qkv_proj; another family's: rows */
        ra_hf_config_qkv_packing(src->config, t->name, opts->weights, n_heads, &by_family,
                                 &family_kv) == RA_OK && by_family == RA_HF_QKV_QVK_GROUPS) {
        *packing = FUSED_QVK_GROUPS, *kv = family_kv;
        return 0;
    }
    if (which == 0 || which == 2 || which == 3) { /* qkv_proj, Wqkv: rows; wqkv: per
                                                     key/value head */
        *packing = which == 2 ? FUSED_GROUPED : FUSED_ROWS;
        return 0;
    }
    if (which == 7) { /* HRM-Text's gqkv_proj: the output gate's rows, then q's, k's, v's */
        *packing = FUSED_GATE_ROWS;
        return 0;
    }
    if (which == 1) {
        int failed = 0;
        int64_t by_config;
        if (ra_hf_config_qkv_packing(src->has_config ? src->config : NULL, t->name,
                                     opts->weights, n_heads, &by_config, kv) != RA_OK)
            failed = cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
        *packing = (fused_packing)by_config;
        if (!failed && opts->has_n_kv_heads && opts->n_kv_heads != *kv)
            return cli_fail(EXIT_USAGE, "convert-layout: --n-kv-heads %lld, but the config "
                            "packs %lld key/value heads", (long long)opts->n_kv_heads,
                            (long long)*kv);
        return failed;
    }
    return cli_fail(EXIT_FAIL, "tensor '%s' in %s is a fused q/k/v projection that "
                    "convert-layout does not read (%s)", t->name, opts->weights,
                    fused_names[which]);
}

/* The first row of q head h (h < H) or of k head h - H in a fused weight. */
static int64_t fused_head_row(fused_packing packing, int64_t h, int64_t H, int64_t kv,
                              int64_t head_dim)
{
    if (packing == FUSED_ROWS) return h * head_dim; /* k's heads follow q's */
    if (packing == FUSED_GATE_ROWS) return (H + h) * head_dim; /* after the gate's H heads */
    if (packing == FUSED_QVK_GROUPS) { /* group g: its G q heads, G v heads, G k heads */
        const int64_t G = H / 4, q = h < H ? h : h - H;
        return ((q / G) * 3 * G + (h < H ? 0 : 2 * G) + q % G) * head_dim;
    }
    const int64_t rep = H / kv; /* each group: rep q heads, a k head, a v head */
    return (h < H ? (h / rep) * (rep + 2) + h % rep : (h - H) * (rep + 2) + rep) * head_dim;
}

/* out = fused t with the first rotary_dim rows of each q and k head
 * permuted, v's rows copied. */
static int permute_fused(const convert_options *opts, void *out, const ra_st_tensor *t,
                         const geometry *g, fused_packing packing, int64_t H, int64_t kv)
{
    int ok;
    ra_dtype dtype = library_dtype(t->dtype, &ok);
    const int64_t in_features = t->ndim == 2 ? t->shape[1] : 1;
    const int64_t gate = packing == FUSED_GATE_ROWS ? H : 0; /* the gate's heads */
    if (packing == FUSED_QVK_GROUPS && (H % 4 != 0 || kv != H))
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s packs q, v and k in mp_num = 4 "
                        "model-parallel groups of whole heads: %lld query heads and %lld "
                        "key/value heads do not split so", t->name, opts->weights,
                        (long long)H, (long long)kv);
    if (!ok || t->ndim < 1 || t->ndim > 2 || H % kv != 0 ||
        t->shape[0] != (gate + H + 2 * kv) * g->head_dim || in_features == 0)
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s is not an F32, F16 or BF16 fused "
                        "projection of (%s%lld + 2 x %lld) heads of head_dim %lld", t->name,
                        opts->weights, gate ? "2 x " : "", (long long)H, (long long)kv,
                        (long long)g->head_dim);
    const size_t row_bytes = (size_t)in_features * ra_dtype_size(dtype);
    memcpy(out, t->data, t->nbytes);
    for (int64_t h = 0; h < H + kv; h++) {
        size_t at = (size_t)fused_head_row(packing, h, H, kv, g->head_dim) * row_bytes;
        ra_status status = ra_permute_rows((char *)out + at, (const char *)t->data + at, dtype,
                                           1, g->rotary_dim, in_features,
                                           (ra_layout)opts->to);
        if (status != RA_OK)
            return cli_fail(EXIT_FAIL, "cannot permute '%s' in %s: %s", t->name, opts->weights,
                            ra_status_string(status));
    }
    return 0;
}

/* Checks t's shape and heads against the geometry and the head counts. */
static int check_tensor(const convert_options *opts, const ra_st_tensor *t, proj_kind kind,
                        const geometry *g, int64_t n_heads, int64_t n_kv_heads)
{
    int known;
    library_dtype(t->dtype, &known);
    if (!known)
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s has dtype %s; convert-layout permutes "
                        "F32, F16 or BF16 rows", t->name, opts->weights,
                        ra_st_dtype_name(t->dtype));
    int is_bias = ends_with_part(t->name, "wq.bias") || ends_with_part(t->name, "wk.bias") ||
                  ends_with_part(t->name, "q_proj.bias") || ends_with_part(t->name, "k_proj.bias") ||
                  ends_with_part(t->name, "self.query.bias") ||
                  ends_with_part(t->name, "self.key.bias");
    if (kind == NORM) { /* [head_dim], or (Cohere) [heads, head_dim] */
        int64_t heads = ends_with_part(t->name, "q_norm.weight") ||
                                ends_with_part(t->name, "q_norm.bias") ||
                                ends_with_part(t->name, "query_layernorm.weight")
                            ? n_heads
                            : n_kv_heads;
        if ((t->ndim == 1 && t->shape[0] == g->head_dim) ||
            (t->ndim == 2 && t->shape[0] > 0 && t->shape[1] == g->head_dim &&
             (!heads || t->shape[0] == heads)))
            return 0;
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s is not a norm of each head: [head_dim = "
                        "%lld] or [heads, head_dim]%s", t->name, opts->weights,
                        (long long)g->head_dim, heads ? " with as many heads as its projection"
                                                      : "");
    }
    if (t->ndim != (is_bias ? 1 : 2))
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s is %d-D; expected %s", t->name,
                        opts->weights, t->ndim,
                        is_bias ? "a 1-D bias" : "a 2-D [out_features, in_features] matrix");
    const int64_t rows = g->head_dim << (kind == QUERY && g->gated); /* per head */
    if (t->shape[0] == 0 || t->shape[0] % rows != 0)
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s has %lld rows, not a multiple of %s%lld",
                        t->name, opts->weights, (long long)t->shape[0],
                        rows == g->head_dim ? "head_dim " : "2 head_dim (a query and a gate) ",
                        (long long)g->head_dim);
    int64_t heads = t->shape[0] / rows;
    int64_t expected = kind == QUERY ? n_heads : n_kv_heads;
    if (expected && heads != expected)
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s has %lld rows = %lld heads of head_dim "
                        "%lld%s; expected %lld %s heads", t->name, opts->weights,
                        (long long)t->shape[0], (long long)heads, (long long)g->head_dim,
                        rows == g->head_dim ? "" : " and a gate", (long long)expected,
                        kind == QUERY ? "query" : "key/value");
    return 0;
}

/* out = t's rows with the first rotary_dim rows of every head permuted (a
 * norm's weights are its rows; a gated query projection's heads are
 * 2 head_dim rows, its gate's copied). */
static ra_status permute(void *out, const ra_st_tensor *t, proj_kind kind, const geometry *g,
                         ra_layout to)
{
    int ok;
    ra_dtype dtype = library_dtype(t->dtype, &ok);
    int64_t in_features = t->ndim == 2 && kind != NORM ? t->shape[1] : 1;
    size_t row_bytes = (size_t)in_features * ra_dtype_size(dtype);
    const int64_t rows = g->head_dim << (kind == QUERY && g->gated); /* per head */
    int64_t heads = (kind == NORM ? t->count : t->shape[0]) / rows;
    if (g->rotary_dim == rows)
        return ra_permute_rows(out, t->data, dtype, heads, g->head_dim, in_features, to);
    /* Partial rotary (or gates): each head's rotating rows as a head of
     * rotary_dim, the rest copied. */
    memcpy(out, t->data, t->nbytes);
    for (int64_t h = 0; h < heads; h++) {
        size_t at = (size_t)(h * rows) * row_bytes;
        ra_status status = ra_permute_rows((char *)out + at, (const char *)t->data + at, dtype, 1,
                                           g->rotary_dim, in_features, to);
        if (status != RA_OK) return status;
    }
    return RA_OK;
}

/* The query heads of the layer a tensor's name numbers (layer; -1: none;
 * MALFORMED_LAYER: none a list of the config names): the config's
 * num_attention_heads_per_layer entry where it has one (-1 where it names
 * no layer the list has), else its num_attention_heads (0: none). */
static int64_t layer_heads(const rope_source *src, int64_t layer)
{
    ra_hf_attention_info a = ra_hf_attention_info_init();
    if (ra_hf_config_attention(src->config, layer == MALFORMED_LAYER ? INT64_MAX : layer, &a) !=
        RA_OK)
        return -1;
    return a.layer_n_heads;
}

/* Fills out[] (one entry per tensor of st) and the buffers it points at. */
static int convert(const convert_options *opts, const rope_source *src,
                   const ra_safetensors *st, ra_st_tensor *out, void **buffers)
{
    /* A shard of a sharded checkpoint may hold no q or k projection at all
     * (only MLP weights, embeddings ...): it is copied unchanged. */
    int64_t qk = 0;
    for (int64_t i = 0; i < ra_safetensors_count(st); i++) {
        out[i] = *ra_safetensors_at(st, i);
        qk += kind_of(out[i].name) != NOT_QK;
        /* latent attention (DeepSeek's): its rope rows, in the query heads'
         * tails and kv_a_proj_with_mqa's, are not converted (whatever
         * --n-heads says) */
        static const char *const latent[] = {"kv_a_proj_with_mqa.weight", "kv_b_proj.weight",
                                             "q_a_proj.weight", "q_b_proj.weight",
                                             "kv_a_layernorm.weight"};
        for (size_t l = 0; l < sizeof latent / sizeof latent[0]; l++)
            if (ends_with_part(out[i].name, latent[l]))
                return cli_fail(EXIT_FAIL, "convert-layout: '%s' in %s is latent attention's, "
                                "whose rope rows are not converted", out[i].name, opts->weights);
        /* a sparse-attention indexer's (its q, k and norms rotate by the rope too,
         * in heads of their own size: Qwen4-Exp's, MiniMax-M3's) */
        if (strstr(out[i].name, ".indexer.") != NULL)
            return cli_fail(EXIT_FAIL, "convert-layout: '%s' in %s is a sparse-attention "
                            "indexer's, whose rope rows are not converted", out[i].name,
                            opts->weights);
        /* a shard with q_proj but not its k_proj may be latent attention's
         * without its other tensors (DeepSeek-V2-Lite's q_proj): the config
         * says */
        if (src->attention.layout < 0 && ends_with_part(out[i].name, "q_proj.weight")) {
            char key[512];
            const size_t n = strlen(out[i].name) - strlen("q_proj.weight");
            if (n < sizeof key - 16) {
                snprintf(key, sizeof key, "%.*sk_proj.weight", (int)n, out[i].name);
                if (!ra_safetensors_find(st, key))
                    return cli_fail(EXIT_FAIL, "convert-layout: '%s' in %s has no '%s' beside "
                                    "it, as latent attention's q_proj has none: give --config",
                                    out[i].name, opts->weights, key);
            }
        }
    }
    if (qk == 0 && !opts->has_layer) return 0;
    geometry g = {0, 0, 0, 0};
    int failed = resolve_geometry(opts, src, st, &g);
    if (failed) return failed;
    const ra_hf_attention_info *c = &src->attention;
    int64_t n_heads = opts->has_n_heads ? opts->n_heads : c->n_heads;
    int64_t n_kv_heads = opts->has_n_kv_heads ? opts->n_kv_heads
                         : g.n_kv_heads       ? g.n_kv_heads
                                              : c->n_kv_heads;
    int64_t converted = 0, layered = 0;
    for (int64_t i = 0; i < ra_safetensors_count(st); i++) {
        const ra_st_tensor *t = ra_safetensors_at(st, i);
        out[i] = *t;
        proj_kind kind = kind_of(t->name);
        if (kind == NOT_QK) continue;
        int64_t layer = layer_of(t->name);
        if (layer == MALFORMED_LAYER && opts->has_layer)
            return cli_fail(EXIT_FAIL, "tensor '%s' in %s has a malformed layer number "
                            "(expected 0, 1, 2 ... without signs or leading zeros)", t->name,
                            opts->weights);
        if (layer != -1) layered++;
        if (opts->has_layer && layer != opts->layer) continue;
        const int64_t heads = opts->has_n_heads ? n_heads : layer_heads(src, layer);
        if (heads < 0)
            return cli_fail(EXIT_FAIL, "convert-layout: %s gives its layers' query heads "
                            "(num_attention_heads_per_layer), and '%s' in %s names no layer "
                            "it lists", opts->config, t->name, opts->weights);
        fused_packing packing = FUSED_NONE;
        int64_t kv = 0;
        if (kind == FUSED && !heads)
            return cli_fail(EXIT_USAGE, "convert-layout: '%s' is fused: give --config or "
                            "--n-heads", t->name);
        if (kind == FUSED &&
            (failed = fused_layout(opts, src, t, heads, n_kv_heads, &packing, &kv)))
            return failed;
        if (kind != FUSED && (failed = check_tensor(opts, t, kind, &g, heads, n_kv_heads)))
            return failed;
        buffers[i] = malloc(t->nbytes > 0 ? t->nbytes : 1);
        if (!buffers[i])
            return cli_fail(EXIT_FAIL, "out of memory for '%s' from %s", t->name, opts->weights);
        if (kind == FUSED) {
            failed = permute_fused(opts, buffers[i], t, &g, packing, heads, kv);
            if (failed) return failed;
        } else {
            ra_status status = permute(buffers[i], t, kind, &g, (ra_layout)opts->to);
            if (status != RA_OK)
                return cli_fail(EXIT_FAIL, "cannot permute '%s' in %s: %s", t->name,
                                opts->weights, ra_status_string(status));
        }
        out[i].data = buffers[i];
        converted++;
    }
    if (converted > 0) return 0; /* (without --layer, every q/k tensor was) */
    if (layered > 0)
        return cli_fail(EXIT_FAIL, "%s has no query or key projection for layer %lld",
                        opts->weights, (long long)opts->layer);
    return cli_fail(EXIT_FAIL, "--layer %lld was given, but %s has no q/k projections with "
                    "layers.N. in their names: leave out --layer", (long long)opts->layer,
                    opts->weights);
}

/* opts->weights and (without --config) opts->config become the
 * checkpoint's files (checkpoint_paths_find), which run reads. */
static int run(convert_options *opts)
{
    char msg[CLI_MSG_LEN];
    checkpoint_paths paths;
    rope_source src = {0};
    ra_safetensors *st = NULL;
    ra_st_tensor *out = NULL;
    void **buffers = NULL;
    cli_outputs outputs = {0};
    int failed = checkpoint_paths_find(&opts->weights, &opts->config, &paths);
    rope_cli rope_opts = {.config_path = opts->config};
    if (!failed) failed = cli_outputs_add(&outputs, "--output", opts->output);
    if (!failed) failed = cli_outputs_check_input(&outputs, "--weights", opts->weights);
    if (!failed && opts->config)
        failed = cli_outputs_check_input(&outputs, paths.config_option, opts->config);
    if (!failed) failed = rope_source_load(&rope_opts, &src);
    /* A family's checkpoint is stored in its own layout (Cohere and GLM:
     * interleaved): converting "to" it would permute rows already there. */
    if (!failed && src.attention.latent)
        failed = cli_fail(EXIT_FAIL, "convert-layout: %s: model_type \"%s\" is latent "
                          "attention, whose rope rows (in q's heads and kv_a_proj_with_mqa) "
                          "are not converted", opts->config, ra_hf_config_model_type(src.config));
    if (!failed && src.attention.layout == opts->to)
        failed = cli_fail(EXIT_FAIL, "convert-layout: %s: model_type \"%s\" stores q_proj and "
                          "k_proj rows %s already", opts->config,
                          ra_hf_config_model_type(src.config), cli_layout_names[opts->to]);
    size_t len = strlen(opts->weights);
    if (!failed && len >= 5 && strcmp(opts->weights + len - 5, ".json") == 0)
        failed = cli_fail(EXIT_FAIL, "convert-layout: %s: give one .safetensors file (convert "
                          "each shard of a sharded checkpoint; its index stays as it is)",
                          opts->weights);
    if (!failed && ra_safetensors_open(&st, opts->weights, msg, sizeof msg) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    int64_t n = st ? ra_safetensors_count(st) : 0;
    if (!failed) {
        out = calloc(n > 0 ? (size_t)n : 1, sizeof *out);
        buffers = calloc(n > 0 ? (size_t)n : 1, sizeof *buffers);
        if (!out || !buffers) failed = cli_fail(EXIT_FAIL, "out of memory");
    }
    if (!failed) failed = convert(opts, &src, st, out, buffers);
    if (!failed && !(failed = cli_outputs_write_safetensors(&outputs, 0, out, n)))
        failed = cli_outputs_commit(&outputs);
    cli_outputs_free(&outputs);
    for (int64_t i = 0; buffers && i < n; i++) free(buffers[i]);
    free(buffers);
    free(out);
    ra_safetensors_close(st);
    rope_source_free(&src);
    return failed;
}

int cmd_convert_layout(int argc, char **argv)
{
    convert_options opts = {0};
    const cli_option options[] = {
        CLI_STRING_OPTION("--weights", &opts.weights),
        CLI_STRING_OPTION("--output", &opts.output),
        CLI_CHOICE_OPTION("--to", &opts.to, cli_layout_names, .seen = &opts.has_to),
        CLI_STRING_OPTION("--config", &opts.config),
        CLI_INT_OPTION("--n-heads", &opts.n_heads, 1, INT32_MAX, .seen = &opts.has_n_heads),
        CLI_INT_OPTION("--n-kv-heads", &opts.n_kv_heads, 1, INT32_MAX,
                       .seen = &opts.has_n_kv_heads),
        CLI_INT_OPTION("--layer", &opts.layer, 0, INT32_MAX, .seen = &opts.has_layer),
    };
    const char *name = "convert-layout";
    switch (cli_parse(name, argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    if (!opts.weights) return cli_require(name, "--weights");
    if (!opts.output) return cli_require(name, "--output");
    if (!opts.has_to) return cli_require(name, "--to");
    return run(&opts);
}
