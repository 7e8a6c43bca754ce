/*
 * cmd_attention.c — `ropeattn attention`: LLaMA's Attention.forward on a
 * real checkpoint and real activations, in inference mode.  With --prefill P
 * the first P tokens of each sequence go through the layer as one prefill
 * into a KV cache and the rest one token at a time, as a generator would.
 * With --grad-output and --grads it also runs the backward
 * (attention_grads.c).
 *
 *   X: [B, S, dim] or [S, dim] (batch 1)  ->  Y: the same shape, float32
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_grads.h"
#include "checkpoint.h"
#include "cli.h"
#include "io/io.h"
#include "outputs.h"
#include "progress.h"
#include "rope_cli.h"
#include "timer.h"

static const char usage[] =
    "usage: ropeattn attention --weights W.safetensors|INDEX.json --input X.npy\n"
    "                          --output Y.npy\n"
    "                          [--config config.json] [--layer N] [--n-heads H]\n"
    "                          [--n-kv-heads K] [--layout interleaved|half]\n"
    "                          [--start-pos P | --positions P.npy] [--threads N]\n"
    "                          [--path flash|reference] [--rope-parameters JSON]\n"
    "                          [--theta T] [--max-position-embeddings M] [--seq-len L]\n"
    "                          [--prefill P [--cache-dtype f32|f16|bf16]]\n"
    "                          [--grad-output DY.npy --grads G.safetensors]\n"
    "                          [--quiet] [--stats]\n"
    "\n"
    "Runs one attention layer (the Attention module of Meta's LLaMA reference\n"
    "code, inference mode):\n"
    "x -> wq, wk, wv -> RoPE -> causal grouped-query attention -> wo.\n"
    "\n"
    "  --weights W     safetensors with wq/wk/wv/wo.weight (Meta's LLaMA code) or\n"
    "                  q/k/v/o_proj.weight (Hugging Face, also under\n"
    "                  model.layers.N.self_attn. or a multimodal model's\n"
    "                  language_model; Phi's dense, Phi-3's fused qkv_proj,\n"
    "                  GPT-J, GPT-NeoX, Falcon, InternLM2 and ChatGLM names, the\n"
    "                  fused ones read in place);\n"
    "                  F32, F16, BF16 or F64; or a sharded checkpoint's\n"
    "                  model.safetensors.index.json\n"
    "  --input X       float32 .npy, [batch, seq, dim] or [seq, dim]\n"
    "  --output Y      float32 .npy of X's shape, written only on success\n"
    "  --layer N       which layer, when W holds several\n"
    "  --n-heads H     query heads (required unless --config gives them)\n"
    "  --n-kv-heads K  key/value heads (default: config, else wk's rows / head_dim)\n"
    "  --layout L      interleaved (default for Meta's names) or half (default for\n"
    "                  Hugging Face names, whose wq and wk rows are permuted)\n"
    "  --start-pos P   position of the first token (default 0)\n"
    "  --positions P   .npy of int32 or int64 positions, [seq] (every batch row)\n"
    "                  or [batch, seq]; the causal mask still follows token order\n"
    "  --threads N     threads (default: one per processor)\n"
    "  --path P        flash (default) or reference (the masked softmax of the\n"
    "                  reference code)\n"
    "  --prefill P     generate through a KV cache: the first P tokens of each\n"
    "                  sequence (1 <= P <= seq) as one prefill, then the others one\n"
    "                  at a time (decode steps), each attending over the cache;\n"
    "                  Y is the full layer's up to float32 rounding (P = seq: one\n"
    "                  prefill).  Positions as without it; flash path only\n"
    "  --cache-dtype T the KV cache's element type with --prefill: f32 (default),\n"
    "                  f16 or bf16 (keys and values rounded to it when cached)\n"
    "  --stats         with --prefill: print the prefill's and the decode steps'\n"
    "                  tokens per second (all sequences') on stdout\n"
    "  --quiet         no progress line (shown on a terminal, on stderr, when the\n"
    "                  decode steps take more than a second)\n"
    "  --grad-output DY\n"
    "                  float32 .npy of Y's shape: the gradient of a loss L with\n"
    "                  respect to Y (L = sum(Y * DY)); needs --grads\n"
    "  --grads G       also run the layer's backward and write G (.safetensors,\n"
    "                  F32): tensor 'x' = dL/dX in X's shape, and each weight's\n"
    "                  and bias's gradient under its own name in W (e.g.\n"
    "                  model.layers.0.self_attn.q_proj.weight); written only on\n"
    "                  success, with Y.  Not with --prefill\n"
    ROPE_CLI_USAGE
    "\n"
    "--config also gives hidden_size, num_attention_heads, num_key_value_heads,\n"
    "head_dim and rms_norm_eps; flags override it.  dim is wq's in_features;\n"
    "head_dim is the config's, else wq's rows / n_heads (H * head_dim may differ\n"
    "from dim, as in Qwen3).  With partial_rotary_factor only the first\n"
    "rotary_dim = int(head_dim * partial_rotary_factor) features of q and k rotate.\n"
    "Biases (q_proj.bias ...) are added; q_norm.weight and k_norm.weight (Qwen3)\n"
    "normalize each head of q and k before RoPE.\n"
    "\n"
    "The config's model_type (its text_config's, for a multimodal model) says how\n"
    "the family is read: its layout (interleaved for Cohere, GLM, ChatGLM and\n"
    "Llama 4), softmax scale (Granite, Gemma 3), norms (Gemma 3, OLMo 2;\n"
    "LayerNorms per head: Cohere, StableLM 2), clip_qkv (OLMo), rope per layer\n"
    "(Gemma 3, SmolLM3), Falcon's packing, Llama 4's L2 norm, NoPE layers and\n"
    "temperature.  A family, config key or tensor of the layer that ropeattn\n"
    "does not run (gpt-oss's sinks, soft-capping ...) is refused,\n"
    "naming it: never run as something else.\n";

typedef struct attention_options {
    const char *weights, *input, *output;
    const char *grad_output, *grads; /* --grad-output, --grads: NULL unless given */
    int64_t layer, n_heads, n_kv_heads, start_pos, threads;
    int64_t prefill; /* 0: no KV cache */
    int layout, path, cache_dtype; /* cache_dtype: index in cache_dtype_names */
    int has_n_heads, has_n_kv_heads, has_layout, has_start_pos, has_cache_dtype;
    int quiet, stats; /* --quiet, --stats */
    rope_cli rope;
} attention_options;

/* --cache-dtype values, indexed as ra_dtype. */
static const char *const cache_dtype_names[] = {
    [RA_F32] = "f32", [RA_F16] = "f16", [RA_BF16] = "bf16", NULL};

/* The layer's float32 weights: 4 projections, 4 biases, 2 norms. */
enum { N_WEIGHTS = 2 * N_PROJ + 2 };

/* The projections of one layer as found in the checkpoint, and the file. */
typedef struct checkpoint {
    const char *path;
    checkpoint_files files;
    attention_tensors tensors;
} checkpoint;

static int shape_mismatch(const checkpoint *ckpt, int proj, int64_t rows, int64_t cols,
                          const char *why)
{
    const ra_st_tensor *t = ckpt->tensors.proj[proj];
    if (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols) return 0;
    char shape[128] = "";
    for (int i = 0; i < t->ndim; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld",
                 i ? ", " : "", (long long)t->shape[i]);
    return cli_fail(EXIT_FAIL, "tensor '%s' in %s has shape [%s]; expected [%lld, %lld] (%s)",
                    t->name, ckpt->path, shape, (long long)rows, (long long)cols, why);
}

/* query_key_value packed as the config says (checkpoint_config_packing);
 * --n-kv-heads must agree.  Sets the packing and *n_kv_heads. */
static int config_packing(const attention_options *opts, const ra_hf_config *hf,
                          checkpoint *ckpt, int64_t n_heads, int64_t *n_kv_heads)
{
    int failed = checkpoint_config_packing(hf, opts->rope.config_path, ckpt->tensors.fused->name,
                                           ckpt->path, n_heads, &ckpt->tensors.packing,
                                           n_kv_heads);
    if (!failed && opts->has_n_kv_heads && opts->n_kv_heads != *n_kv_heads)
        return cli_fail(EXIT_USAGE, "attention: --n-kv-heads %lld, but the config packs %lld "
                        "key/value heads", (long long)opts->n_kv_heads, (long long)*n_kv_heads);
    return failed;
}

/* A fused q/k/v weight split into wq, wk, wv views by the head counts of
 * the flags or config and head_dim (the config's, else hidden_size /
 * n_heads, as transformers, else in_features / n_heads). */
static int resolve_fused(const attention_options *opts, const ra_hf_config *hf, checkpoint *ckpt)
{
    const ra_st_tensor *fused = ckpt->tensors.fused;
    if (!fused) return 0;
    int64_t n_heads = opts->has_n_heads ? opts->n_heads : hf->num_attention_heads;
    if (!opts->has_n_heads && !hf->has_num_attention_heads)
        return cli_fail(EXIT_USAGE, "attention: --n-heads is required (or --config)");
    int64_t n_kv_heads = opts->has_n_kv_heads ? opts->n_kv_heads
                         : hf->has_num_key_value_heads ? hf->num_key_value_heads
                                                       : n_heads;
    if (ckpt->tensors.packing == FUSED_BY_CONFIG) {
        int failed = config_packing(opts, hf, ckpt, n_heads, &n_kv_heads);
        if (failed) return failed;
    }
    int64_t dim = fused->ndim == 2 ? fused->shape[1] : 0;
    int64_t head_dim = hf->has_head_dim      ? hf->head_dim
                       : hf->has_hidden_size ? hf->hidden_size / n_heads
                                             : dim / n_heads;
    if (head_dim <= 0)
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s: no head_dim follows from its shape and "
                        "%lld heads", fused->name, ckpt->path, (long long)n_heads);
    return checkpoint_split_fused(&ckpt->tensors, ckpt->path, n_heads * head_dim,
                                  n_kv_heads * head_dim);
}

/* The q/k norm tensors the family reads, and nothing else:
 *   RMSNorm, weight [head_dim] shared by the heads (Qwen3, Gemma 3), or over
 *     the whole projection (OLMo 2): q_norm.weight, k_norm.weight;
 *   LayerNorm per head, each head its own weights, when the family's key
 *     says so: q_norm.weight [H, head_dim] (Cohere's use_qk_norm), or
 *     q_layernorm.norms.N.weight [head_dim] (StableLM's qk_layernorm);
 * a config without model_type may have the first kind.  Sets config's norm
 * fields. */
static int check_norms(const ra_hf_config *hf, const checkpoint *ckpt, int64_t n_heads,
                       int64_t n_kv_heads, int64_t head_dim, ra_layer_config *config)
{
    const attention_tensors *t = &ckpt->tensors;
    const ra_hf_family *family = hf->family;
    const unsigned features = family ? family->features : 0;
    const int rms = !family || (features & RA_HF_QK_NORM);
    const int cohere = hf->head_layer_norms && (features & RA_HF_USE_QK_NORM);
    const int stablelm = hf->head_layer_norms && (features & RA_HF_QK_LAYERNORM);
    const int whole = (features & RA_HF_NORM_OVER_PROJECTION) != 0;
    for (int i = 0; i < 2; i++) {
        const ra_st_tensor *n = t->norm[i];
        const ra_st_tensor *head = t->n_head_norms[i] ? t->head_norms[i][0] : NULL;
        const ra_st_tensor *stray = !rms && !cohere && n ? n : !stablelm ? head : NULL;
        const int64_t heads = i ? n_kv_heads : n_heads;
        const char *kind = i ? "k" : "q";
        if (stray)
            return cli_fail(EXIT_FAIL, "tensor '%s' in %s: %s%s%s reads no such q/k norm "
                            "(transformers would not use it)", stray->name, ckpt->path,
                            family ? "model_type \"" : "a config without model_type",
                            family ? family->model_type : "", family ? "\"" : "");
        if ((features & RA_HF_QK_NORM) || cohere) {
            if (!n)
                return cli_fail(EXIT_FAIL, "%s has no %s_norm.weight beside '%s': model_type "
                                "\"%s\"%s normalizes q and k (transformers would initialize "
                                "the missing weight)", ckpt->path, kind,
                                t->proj[PROJ_Q] ? t->proj[PROJ_Q]->name : t->fused->name,
                                family->model_type, cohere ? " with use_qk_norm" : " always");
        }
        if (n && cohere && (n->ndim != 2 || n->shape[0] != heads || n->shape[1] != head_dim))
            return cli_fail(EXIT_FAIL, "tensor '%s' in %s is not [%lld, %lld] (a LayerNorm of "
                            "each head, [heads, head_dim])", n->name, ckpt->path,
                            (long long)heads, (long long)head_dim);
        int64_t want = whole ? t->proj[i]->shape[0] : head_dim;
        if (n && !cohere && (n->ndim != 1 || n->shape[0] != want))
            return cli_fail(EXIT_FAIL, "tensor '%s' in %s is not a vector of %lld values (%s)",
                            n->name, ckpt->path, (long long)want,
                            whole ? "the projection's rows" : "head_dim");
        if (stablelm && t->n_head_norms[i] != heads)
            return cli_fail(EXIT_FAIL, "%s has %lld of the %s_layernorm.norms.N.weight beside "
                            "'%s'; model_type \"stablelm\" with qk_layernorm has one per head "
                            "(%lld)", ckpt->path, (long long)t->n_head_norms[i], kind,
                            t->proj[PROJ_Q]->name, (long long)heads);
        for (int64_t h = 0; h < t->n_head_norms[i]; h++) {
            const ra_st_tensor *w = t->head_norms[i][h];
            if (w->ndim != 1 || w->shape[0] != head_dim)
                return cli_fail(EXIT_FAIL, "tensor '%s' in %s is not a vector of %lld values "
                                "(head_dim)", w->name, ckpt->path, (long long)head_dim);
        }
    }
    /* The LayerNorms' epsilon is layer_norm_eps; the RMSNorms', rms_norm_eps. */
    config->norm_layer = config->norm_head_weights = cohere || stablelm;
    config->norm_whole = whole;
    config->norm_eps = config->norm_layer ? hf->layer_norm_eps
                       : hf->has_rms_norm_eps ? hf->rms_norm_eps
                                              : 0; /* 0: 1e-6 */
    return 0;
}

/* n_heads, n_kv_heads and head_dim from flags, config and the weights'
 * shapes, in that order of precedence; each weight's shape checked. */
static int resolve_config(const attention_options *opts, const ra_hf_config *hf,
                          const checkpoint *ckpt, ra_layer_config *config)
{
    const ra_st_tensor *wq = ckpt->tensors.proj[PROJ_Q], *wk = ckpt->tensors.proj[PROJ_K];
    for (int p = 0; p < N_PROJ; p++) {
        const ra_st_tensor *w = ckpt->tensors.proj[p];
        if (w->ndim != 2)
            return cli_fail(EXIT_FAIL, "tensor '%s' in %s is %d-D; expected a 2-D "
                            "[out_features, in_features] matrix", w->name, ckpt->path, w->ndim);
        if (w->count == 0) /* then head_dim or n_kv_heads could come out 0 */
            return cli_fail(EXIT_FAIL, "tensor '%s' in %s has shape [%lld, %lld]: it is empty",
                            w->name, ckpt->path, (long long)w->shape[0], (long long)w->shape[1]);
    }
    int64_t dim = wq->shape[1];
    if (hf->has_hidden_size && hf->hidden_size != dim)
        return cli_fail(EXIT_FAIL, "config hidden_size %lld does not match dim %lld "
                        "(the in_features of '%s')", (long long)hf->hidden_size,
                        (long long)dim, wq->name);

    int64_t n_heads = opts->has_n_heads ? opts->n_heads : hf->num_attention_heads;
    if (!opts->has_n_heads && !hf->has_num_attention_heads)
        return cli_fail(EXIT_USAGE, "attention: --n-heads is required (or --config)");
    /* head_dim: the config's (H * D may differ from dim, as in Qwen3),
     * else wq's rows / n_heads (dim / n_heads for LLaMA's square wq). */
    int64_t head_dim = hf->head_dim;
    if (!hf->has_head_dim) {
        if (wq->shape[0] % n_heads != 0)
            return cli_fail(EXIT_FAIL, "n_heads %lld does not divide the %lld rows of '%s'",
                            (long long)n_heads, (long long)wq->shape[0], wq->name);
        head_dim = wq->shape[0] / n_heads;
    }
    if (head_dim % 2 != 0)
        return cli_fail(EXIT_FAIL, "head_dim %lld is odd; RoPE needs it even", (long long)head_dim);

    int64_t n_kv_heads = opts->has_n_kv_heads ? opts->n_kv_heads : hf->num_key_value_heads;
    if (!opts->has_n_kv_heads && !hf->has_num_key_value_heads) {
        if (wk->shape[0] % head_dim != 0)
            return cli_fail(EXIT_FAIL, "tensor '%s' in %s has %lld rows, not a multiple of "
                            "head_dim %lld", wk->name, ckpt->path, (long long)wk->shape[0],
                            (long long)head_dim);
        n_kv_heads = wk->shape[0] / head_dim;
    }
    if (n_heads % n_kv_heads != 0)
        return cli_fail(EXIT_FAIL, "n_heads %lld is not a multiple of n_kv_heads %lld",
                        (long long)n_heads, (long long)n_kv_heads);

    char why[128];
    snprintf(why, sizeof why, "dim %lld, n_heads %lld, n_kv_heads %lld, head_dim %lld",
             (long long)dim, (long long)n_heads, (long long)n_kv_heads, (long long)head_dim);
    int failed = shape_mismatch(ckpt, PROJ_Q, n_heads * head_dim, dim, why);
    if (!failed) failed = shape_mismatch(ckpt, PROJ_K, n_kv_heads * head_dim, dim, why);
    if (!failed) failed = shape_mismatch(ckpt, PROJ_V, n_kv_heads * head_dim, dim, why);
    if (!failed) failed = shape_mismatch(ckpt, PROJ_O, dim, n_heads * head_dim, why);
    for (int p = 0; !failed && p < N_PROJ; p++) {
        const ra_st_tensor *b = ckpt->tensors.bias[p], *w = ckpt->tensors.proj[p];
        if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
            failed = cli_fail(EXIT_FAIL, "tensor '%s' in %s is not a vector of %lld values "
                              "(the rows of '%s')", b->name, ckpt->path,
                              (long long)w->shape[0], w->name);
    }
    /* transformers builds the projections without biases then, and does
     * not load these: refused rather than added or dropped silently. */
    const ra_st_tensor *bias = ckpt->tensors.fused_bias;
    for (int p = 0; !bias && p < N_PROJ; p++) bias = ckpt->tensors.bias[p];
    if (!failed && bias && hf->has_attention_bias && !hf->attention_bias)
        failed = cli_fail(EXIT_FAIL, "tensor '%s' in %s is a bias, but %s sets attention_bias "
                          "false (transformers would not load it): remove one or the other",
                          bias->name, ckpt->path, opts->rope.config_path);
    if (!failed) failed = check_norms(hf, ckpt, n_heads, n_kv_heads, head_dim, config);
    if (failed) return failed;

    config->dim = dim;
    config->n_heads = n_heads;
    config->n_kv_heads = n_kv_heads;
    config->head_dim = head_dim;
    config->clip_qkv = hf->has_clip_qkv ? hf->clip_qkv : 0.0; /* OLMo */
    /* The softmax scale: Granite's attention_multiplier, Gemma's
     * query_pre_attn_scalar^-1/2, else 1/sqrt(head_dim) (0). */
    config->scale = hf->has_attention_multiplier ? hf->attention_multiplier
                    : hf->has_query_pre_attn_scalar ? 1.0 / sqrt(hf->query_pre_attn_scalar)
                                                    : 0.0;
    return 0;
}

/* no_rope_layers (SmolLM3): layer N runs without RoPE when its entry is 0;
 * without the list, when N + 1 is a multiple of no_rope_layer_interval. */
static int resolve_no_rope(const ra_hf_config *hf, int64_t layer, ra_layer_config *config)
{
    if (!hf->no_rope_layers && hf->has_no_rope_layer_interval) {
        if (layer < 0 && hf->no_rope_layer_interval > 0)
            return cli_fail(EXIT_FAIL, "the config's no_rope_layer_interval turns RoPE off in "
                            "some layers, and the checkpoint's names carry no layer number");
        config->no_rope = (layer + 1) % hf->no_rope_layer_interval == 0;
        return 0;
    }
    if (!hf->no_rope_layers) return 0;
    if (layer < 0) {
        for (int64_t i = 0; i < hf->n_no_rope_layers; i++)
            if (!hf->no_rope_layers[i])
                return cli_fail(EXIT_FAIL, "the config's no_rope_layers turns RoPE off in some "
                                "layers, and the checkpoint's names carry no layer number");
        return 0;
    }
    if (layer >= hf->n_no_rope_layers)
        return cli_fail(EXIT_FAIL, "the config's no_rope_layers has %lld entries; layer %lld "
                        "has none", (long long)hf->n_no_rope_layers, (long long)layer);
    config->no_rope = !hf->no_rope_layers[layer];
    return 0;
}

/* Llama 4 (Llama4TextAttention): RoPE layers apply the L2 norm after RoPE
 * (use_qk_norm) and attend within chunks of attention_chunk_size tokens
 * (layer_types may say chunked_attention too): tokens within one chunk are
 * unaffected, others refused.  NoPE layers scale q by the
 * temperature at each token's position (attn_temperature_tuning), which
 * transformers takes from cache_position: --positions is refused there. */
static int resolve_llama4(const attention_options *opts, const ra_hf_config *hf, int64_t layer,
                          int64_t seq, ra_layer_config *config)
{
    if (!hf->family || !(hf->family->features & RA_HF_LLAMA4)) return 0;
    /* The tokens' places in the sequence: --start-pos on (0 with --positions,
     * whose ids move only RoPE). */
    const int64_t first = opts->start_pos, last = first + seq - 1;
    const int64_t chunk = hf->attention_chunk_size;
    int chunked = !config->no_rope || ra_hf_layer_chunked(&hf->window, layer);
    if (chunked && hf->has_attention_chunk_size && first / chunk != last / chunk)
        return cli_fail(EXIT_FAIL, "the config gives this layer chunked attention of %lld tokens "
                        "and the input's tokens %lld .. %lld fall in more than one chunk: "
                        "chunked attention is not supported (tokens within one chunk are "
                        "unaffected by it)", (long long)chunk, (long long)first, (long long)last);
    config->qk_l2_norm = hf->qk_l2_norm && !config->no_rope;
    if (!hf->attn_temperature_tuning || !config->no_rope) return 0;
    if (!hf->has_floor_scale || !hf->has_attn_scale)
        return cli_fail(EXIT_FAIL, "%s: attn_temperature_tuning is on and %s is null",
                        opts->rope.config_path, hf->has_floor_scale ? "attn_scale" : "floor_scale");
    if (opts->rope.positions_path)
        return cli_fail(EXIT_USAGE, "attention: Llama 4's NoPE layers scale q by each token's "
                        "place in the sequence (attn_temperature_tuning), not by --positions: "
                        "give --start-pos");
    config->temperature_floor = hf->floor_scale;
    config->temperature_scale = hf->attn_scale;
    return 0;
}

/* A sliding window that the config gives this layer (transformers' reading
 * of it: config_window.c) changes Y only for inputs longer than the window;
 * those are refused, since the layer attends to every earlier token. */
static int check_window(const ra_hf_config *hf, int64_t layer, int64_t seq)
{
    char which[48] = "this layer";
    if (layer >= 0) snprintf(which, sizeof which, "layer %lld", (long long)layer);
    int64_t window = ra_hf_layer_window(&hf->window, layer);
    const unsigned features = hf->family ? hf->family->features : 0;
    if (window < 0 && (features & RA_HF_LLAMA4) && ra_hf_layer_chunked(&hf->window, layer))
        return 0; /* resolve_llama4 */
    if (window < 0)
        return cli_fail(EXIT_FAIL, "the config's layer_types gives %s a kind of attention "
                        "other than full_attention or sliding_attention: not supported", which);
    if (window > 0 && seq > window)
        return cli_fail(EXIT_FAIL, "the config gives %s a sliding window of %lld tokens and "
                        "the input has %lld tokens per sequence: sliding-window attention is "
                        "not supported (inputs of at most %lld tokens are unaffected by it)",
                        which, (long long)window, (long long)seq, (long long)window);
    return 0;
}

/* The rope of the layer: type, theta, partial rotary and scaling from the
 * config, --rope-parameters and flags; the layout from the flag or names.
 * max_position is the largest position of any token. */
static int resolve_rope(const attention_options *opts, const rope_source *src,
                        const checkpoint *ckpt, int64_t max_position, int64_t head_dim,
                        ra_rope_config *rope)
{
    /* Gemma 3's and OLMo 3's sliding layers: the default rope (the config's
     * scaling is the full layers'), at rope_local_base_freq (Gemma 3) or
     * rope_theta, as transformers; or their rope_parameters of transformers
     * 5.  A layer's kind: ra_hf_layer_slides. */
    const ra_hf_config *hf = &src->config;
    rope_source local = *src;
    if (hf->family && (hf->family->features & RA_HF_LOCAL_ROPE) && !opts->rope.rope_parameters) {
        int slides = ra_hf_layer_slides(&hf->window, ckpt->tensors.layer);
        if (slides < 0)
            return cli_fail(EXIT_FAIL, "the config gives sliding and full layers different "
                            "ropes, and does not say which kind %s is", ckpt->tensors.layer < 0
                            ? "this layer (its names carry no layer number)" : "this layer");
        if (slides && hf->has_local_rope) /* transformers 5: its own rope_parameters */
            local.rope = hf->local_rope;
        else if (slides)
            local.rope = (ra_hf_rope){.type = RA_ROPE_DEFAULT,
                                      .theta = hf->has_rope_local_base_freq
                                                   ? hf->rope_local_base_freq
                                               : src->rope.has_theta ? src->rope.theta
                                                                     : 10000.0,
                                      .has_theta = 1};
    }
    int failed = rope_cli_config("attention", &opts->rope, &local, head_dim, max_position + 1,
                                 rope);
    if (failed) return failed;
    /* The layout: the flag's, else the family's for Hugging Face names
     * (Cohere and GLM pair q_proj's features interleaved), else the names'. */
    ra_layout layout = ckpt->tensors.layout;
    if (hf->family && layout == RA_LAYOUT_HALF) layout = hf->family->layout;
    rope->layout = opts->has_layout ? (ra_layout)opts->layout : layout;
    rope->table_size = cli_rope_table_rows(0, max_position + 1);
    return 0;
}

/* X must be float32 [B, S, dim] or [S, dim], and hold at least --prefill
 * tokens per sequence. */
static int check_input(const ra_npy *x, const char *path, int64_t dim, int64_t start_pos,
                       int64_t prefill, int64_t *batch, int64_t *seq)
{
    if (x->dtype != RA_NPY_F32)
        return cli_fail(EXIT_FAIL, "%s must hold float32 ('<f4') values", path);
    if (x->ndim != 2 && x->ndim != 3)
        return cli_fail(EXIT_FAIL, "%s is %d-D; expected [batch, seq, dim] or [seq, dim]",
                        path, x->ndim);
    if (x->shape[x->ndim - 1] != dim)
        return cli_fail(EXIT_FAIL, "%s has last axis %lld; the weights need dim %lld",
                        path, (long long)x->shape[x->ndim - 1], (long long)dim);
    *batch = x->ndim == 3 ? x->shape[0] : 1;
    *seq = x->shape[x->ndim - 2];
    if (*batch < 1 || *seq < 1)
        return cli_fail(EXIT_FAIL, "%s is empty", path);
    if (start_pos + *seq - 1 > RA_MAX_POSITION)
        return cli_fail(EXIT_USAGE, "attention: --start-pos %lld puts the last token beyond "
                        "position %lld", (long long)start_pos, (long long)RA_MAX_POSITION);
    if (prefill > *seq)
        return cli_fail(EXIT_USAGE, "attention: --prefill %lld is more than the %lld tokens "
                        "per sequence of %s (P must be from 1 to %lld)", (long long)prefill,
                        (long long)*seq, path, (long long)*seq);
    return 0;
}

/* Converts the four projections, their biases and the q and k norms to
 * float32 (weights[p], weights[N_PROJ + p], weights[2 N_PROJ + 0 or 1];
 * NULL where there is none) and builds the layer of the given family (NULL:
 * none). */
static int create_layer(const checkpoint *ckpt, const ra_hf_family *family,
                        const ra_layer_config *config, float *weights[N_WEIGHTS],
                        ra_layer **layer)
{
    const attention_tensors *t = &ckpt->tensors;
    /* A grouped fused weight is the layer's wqkv (in weights[PROJ_Q]) and
     * bqkv (weights[N_PROJ + PROJ_Q]). */
    const int grouped = t->packing == FUSED_GROUPED;
    for (int i = 0; i < 2 * N_PROJ; i++) {
        const ra_st_tensor *src = i < N_PROJ ? t->proj[i] : t->bias[i - N_PROJ];
        if (grouped && (i % N_PROJ) != PROJ_O)
            src = i == PROJ_Q ? t->fused : i == N_PROJ + PROJ_Q ? t->fused_bias : NULL;
        int failed = src ? checkpoint_load_f32(src, ckpt->path, &weights[i]) : 0;
        if (failed) return failed;
    }
    for (int i = 0; i < 2; i++) {
        int failed = checkpoint_load_norm(t, i, ckpt->path, &weights[2 * N_PROJ + i]);
        if (failed) return failed;
    }
    /* Gemma 3's norms scale by 1 + weight (in float32, as transformers). */
    for (int i = 0; family && (family->features & RA_HF_NORM_PLUS_ONE) && i < 2; i++)
        for (int64_t e = 0; weights[2 * N_PROJ + i] && e < t->norm[i]->count; e++)
            weights[2 * N_PROJ + i][e] += 1.0f;
    float *const *bias = weights + N_PROJ, *const *norm = weights + 2 * N_PROJ;
    ra_layer_weights w = {.struct_size = sizeof w, .wq = weights[PROJ_Q], .wk = weights[PROJ_K],
                          .wv = weights[PROJ_V],
                          .wo = weights[PROJ_O], .bq = bias[PROJ_Q], .bk = bias[PROJ_K],
                          .bv = bias[PROJ_V], .bo = bias[PROJ_O], .q_norm = norm[0],
                          .k_norm = norm[1]};
    if (grouped)
        w = (ra_layer_weights){.struct_size = sizeof(ra_layer_weights), .wo = weights[PROJ_O],
                               .bo = bias[PROJ_O], .q_norm = norm[0],
                               .k_norm = norm[1], .wqkv = weights[PROJ_Q],
                               .bqkv = bias[PROJ_Q]};
    ra_status status = ra_layer_create(layer, config, &w);
    return status == RA_OK ? 0 : cli_fail_status(status, "cannot create the attention layer");
}

/* Tokens [first, first + n) of every batch row: part [batch, n, width] from
 * full [batch, seq, width] (gather), or into it (scatter). */
static void gather_tokens(float *part, const float *full, int64_t batch, int64_t seq,
                          int64_t first, int64_t n, int64_t width)
{
    for (int64_t b = 0; b < batch; b++)
        memcpy(part + b * n * width, full + (b * seq + first) * width,
               (size_t)(n * width) * sizeof(float));
}

static void scatter_tokens(float *full, const float *part, int64_t batch, int64_t seq,
                           int64_t first, int64_t n, int64_t width)
{
    for (int64_t b = 0; b < batch; b++)
        memcpy(full + (b * seq + first) * width, part + b * n * width,
               (size_t)(n * width) * sizeof(float));
}

/* Y = layer(X) as a generator computes it: tokens [0, P) of every sequence
 * as one prefill into an empty KV cache of capacity seq, then each further
 * token as a decode step (S = 1) over the cache.  Every call gets its rows'
 * positions explicitly: start_pos + first (+ s), or the --positions ids of
 * those rows. */
static ra_status forward_cached(const attention_options *opts, const ra_layer *layer,
                                ra_context *ctx, float *y, const float *x, const int64_t *ids,
                                int64_t batch, int64_t seq)
{
    const ra_layer_config *c = ra_layer_get_config(layer);
    const int64_t dim = c->dim, P = opts->prefill;
    progress line;
    double t0 = timer_seconds(), t_prefill = 0;
    float *x_part = malloc((size_t)(batch * P * dim) * sizeof(float));
    float *y_part = malloc((size_t)(batch * P * dim) * sizeof(float));
    int64_t *ids_part = ids ? malloc((size_t)(batch * P) * sizeof(int64_t)) : NULL;
    ra_kv_cache *cache = NULL;
    ra_status status = RA_ERR_NOMEM;
    if (x_part && y_part && (ids_part || !ids))
        status = ra_kv_cache_create(&cache, batch, seq, c->n_kv_heads, c->head_dim,
                                    (ra_dtype)opts->cache_dtype);
    progress_begin(&line, "attention --prefill", batch * seq, opts->quiet);
    for (int64_t first = 0, n = P; status == RA_OK && first < seq; first += n, n = 1) {
        if (first == P) t_prefill = timer_seconds() - t0;
        progress_update(&line, batch * first);
        gather_tokens(x_part, x, batch, seq, first, n, dim);
        for (int64_t b = 0; ids && b < batch; b++)
            for (int64_t s = 0; s < n; s++) ids_part[b * n + s] = ids[b * seq + first + s];
        ra_positions positions = {.struct_size = sizeof positions, .start = opts->start_pos + first,
                                  .ids = ids_part};
        status = ra_layer_forward_cached(layer, ctx, cache, y_part, x_part, batch, n,
                                         &positions);
        if (status == RA_OK) scatter_tokens(y, y_part, batch, seq, first, n, dim);
    }
    progress_end(&line);
    if (status == RA_OK && opts->stats) { /* tokens of all sequences, per second */
        double total = timer_seconds() - t0;
        if (seq == P) t_prefill = total;
        printf("prefill: %lld tokens in %.6f s, %.0f tokens/s\n", (long long)(batch * P),
               t_prefill, (double)(batch * P) / t_prefill);
        if (seq > P)
            printf("decode: %lld steps of %lld tokens in %.6f s, %.0f tokens/s\n",
                   (long long)(seq - P), (long long)batch, total - t_prefill,
                   (double)(batch * (seq - P)) / (total - t_prefill));
    }
    ra_kv_cache_destroy(cache);
    free(ids_part);
    free(y_part);
    free(x_part);
    return status;
}

/* Y = layer(X), written only if the whole forward succeeded. */
static int forward_and_write(const attention_options *opts, cli_outputs *outputs,
                             const ra_layer *layer, ra_context *ctx, const ra_npy *x,
                             const int64_t *ids, int64_t batch, int64_t seq)
{
    float *y = malloc((size_t)x->count * sizeof(float));
    if (!y) return cli_fail(EXIT_FAIL, "out of memory for the output");
    ra_positions positions = {.struct_size = sizeof positions, .start = opts->start_pos,
                              .ids = ids};
    ra_attention_options forward = {.struct_size = sizeof forward,
                                  .path = cli_attention_path(opts->path)};
    ra_status status =
        opts->prefill
            ? forward_cached(opts, layer, ctx, y, x->data, ids, batch, seq)
            : ra_layer_forward(layer, ctx, y, x->data, batch, seq, &positions, &forward);
    int failed = 0;
    if (status != RA_OK)
        failed = cli_fail_status(status, opts->prefill
                                             ? "attention forward through the KV cache failed"
                                             : "attention forward failed");
    if (!failed && !(failed = cli_outputs_write_npy(outputs, 0, y, x->ndim, x->shape)))
        failed = cli_outputs_commit(outputs);
    free(y);
    return failed;
}

/* Y and, with --grads, the gradients of sum(Y * DY). */
static int compute_and_write(const attention_options *opts, cli_outputs *outputs,
                             const checkpoint *ckpt, const ra_layer *layer, ra_context *ctx,
                             const ra_npy *x, const ra_npy *dy, const int64_t *ids,
                             int64_t batch, int64_t seq)
{
    if (!opts->grads) return forward_and_write(opts, outputs, layer, ctx, x, ids, batch, seq);
    attention_grads_job job = {layer, &ckpt->tensors, x, dy, batch, seq,
                               {.struct_size = sizeof job.positions, .start = opts->start_pos,
                                .ids = ids},
                               cli_attention_path(opts->path), outputs};
    return attention_grads_run(&job, ctx);
}

/* The outputs, checked, and every file named on the command line checked
 * against them. */
static int check_files(const attention_options *opts, cli_outputs *outputs)
{
    int failed = cli_outputs_add(outputs, "--output", opts->output);
    if (!failed && opts->grads) failed = cli_outputs_add(outputs, "--grads", opts->grads);
    const char *const inputs[][2] = {{"--weights", opts->weights},
                                     {"--input", opts->input},
                                     {"--grad-output", opts->grad_output},
                                     {"--config", opts->rope.config_path},
                                     {"--positions", opts->rope.positions_path}};
    for (size_t i = 0; !failed && i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i][1]) failed = cli_outputs_check_input(outputs, inputs[i][0], inputs[i][1]);
    return failed;
}

static int run(const attention_options *opts)
{
    char msg[CLI_MSG_LEN];
    rope_source src = {0};
    checkpoint ckpt = {.path = opts->weights};
    ra_npy x = {0}, dy = {0};
    positions_file file = {0};
    int64_t *ids = NULL;
    float *weights[N_WEIGHTS] = {0}; /* weights, biases, norms */
    ra_layer *layer = NULL;
    ra_context *ctx = NULL;
    ra_layer_config config = ra_layer_config_init();
    ra_rope_config rope = ra_rope_config_default(0);
    config.rope = &rope;
    int64_t batch = 0, seq = 0;
    cli_outputs outputs = {0};
    int failed = check_files(opts, &outputs);
    if (!failed) failed = rope_source_load(&opts->rope, &src);
    if (!failed) failed = checkpoint_files_open(&ckpt.files, ckpt.path);
    for (int64_t i = 0; !failed && i < ckpt.files.n; i++)
        failed = cli_outputs_check_input(&outputs, "--weights shard", ckpt.files.paths[i]);
    if (!failed && (ra_npy_read(opts->input, &x, msg, sizeof msg) != RA_OK ||
                    (opts->grad_output &&
                     ra_npy_read(opts->grad_output, &dy, msg, sizeof msg) != RA_OK)))
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    if (!failed &&
        !(failed = checkpoint_find_attention(&ckpt.files, opts->layer, &ckpt.tensors)) &&
        !(failed = resolve_fused(opts, &src.config, &ckpt)) &&
        !(failed = resolve_config(opts, &src.config, &ckpt, &config)) &&
        !(failed = check_input(&x, opts->input, config.dim, opts->start_pos, opts->prefill,
                                 &batch, &seq)) &&
        !(failed = check_window(&src.config, ckpt.tensors.layer, seq)) &&
        !(opts->grad_output &&
          (failed = attention_grads_check(&dy, opts->grad_output, &x, opts->input))) &&
        opts->rope.positions_path &&
        !(failed = positions_read(opts->rope.positions_path, &file)))
        failed = positions_for_batch(&file, opts->rope.positions_path, batch, seq, &ids);
    if (!failed &&
        !(failed = resolve_rope(opts, &src, &ckpt, ids ? file.max : opts->start_pos + seq - 1,
                                config.head_dim, &rope)) &&
        !(failed = resolve_no_rope(&src.config, ckpt.tensors.layer, &config)) &&
        !(failed = resolve_llama4(opts, &src.config, ckpt.tensors.layer, seq, &config)) &&
        !(failed = create_layer(&ckpt, src.config.family, &config, weights, &layer)) &&
        !(failed = cli_context_create(&ctx, opts->threads)))
        failed = compute_and_write(opts, &outputs, &ckpt, layer, ctx, &x, &dy, ids, batch, seq);
    cli_outputs_free(&outputs);
    ra_context_destroy(ctx);
    ra_layer_destroy(layer);
    for (int i = 0; i < N_WEIGHTS; i++) free(weights[i]);
    free(ids);
    positions_free(&file);
    ra_npy_free(&dy);
    ra_npy_free(&x);
    checkpoint_tensors_free(&ckpt.tensors);
    checkpoint_files_close(&ckpt.files);
    rope_source_free(&src);
    return failed;
}

int cmd_attention(int argc, char **argv)
{
    attention_options opts = {.layer = -1, .threads = 0, .path = CLI_PATH_FLASH,
                              .cache_dtype = RA_F32};
    const cli_option options[] = {
        CLI_STRING_OPTION("--weights", &opts.weights),
        CLI_STRING_OPTION("--input", &opts.input),
        CLI_STRING_OPTION("--output", &opts.output),
        CLI_INT_OPTION("--layer", &opts.layer, 0, INT32_MAX),
        CLI_INT_OPTION("--n-heads", &opts.n_heads, 1, INT32_MAX, .seen = &opts.has_n_heads),
        CLI_INT_OPTION("--n-kv-heads", &opts.n_kv_heads, 1, INT32_MAX,
                       .seen = &opts.has_n_kv_heads),
        CLI_CHOICE_OPTION("--layout", &opts.layout, cli_layout_names, .seen = &opts.has_layout),
        CLI_INT_OPTION("--start-pos", &opts.start_pos, 0, RA_MAX_POSITION,
                       .seen = &opts.has_start_pos),
        CLI_INT_OPTION("--threads", &opts.threads, 1, CLI_MAX_THREADS),
        CLI_CHOICE_OPTION("--path", &opts.path, cli_path_names),
        CLI_INT_OPTION("--prefill", &opts.prefill, 1, INT32_MAX),
        CLI_CHOICE_OPTION("--cache-dtype", &opts.cache_dtype, cache_dtype_names,
                          .seen = &opts.has_cache_dtype),
        CLI_FLAG_OPTION("--quiet", &opts.quiet),
        CLI_FLAG_OPTION("--stats", &opts.stats),
        CLI_STRING_OPTION("--grad-output", &opts.grad_output),
        CLI_STRING_OPTION("--grads", &opts.grads),
        ROPE_CLI_OPTIONS(opts.rope),
    };
    switch (cli_parse("attention", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    if (!opts.weights) return cli_require("attention", "--weights");
    if (!opts.input) return cli_require("attention", "--input");
    if (!opts.output) return cli_require("attention", "--output");
    if (opts.has_start_pos && opts.rope.positions_path)
        return cli_fail(EXIT_USAGE, "attention: give --start-pos or --positions, not both");
    if (opts.has_cache_dtype && !opts.prefill)
        return cli_fail(EXIT_USAGE, "attention: --cache-dtype needs --prefill (without it "
                        "there is no KV cache)");
    if (opts.stats && !opts.prefill)
        return cli_fail(EXIT_USAGE, "attention: --stats times --prefill's prefill and decode "
                        "steps: give --prefill");
    if (opts.grads && !opts.grad_output)
        return cli_fail(EXIT_USAGE, "attention: --grads needs --grad-output (the gradient of "
                        "the loss with respect to Y)");
    if (opts.grad_output && !opts.grads)
        return cli_fail(EXIT_USAGE, "attention: --grad-output needs --grads (where to write "
                        "the gradients)");
    if (opts.grads && opts.prefill)
        return cli_fail(EXIT_USAGE, "attention: --grads runs the layer's training forward and "
                        "backward; --prefill (the KV-cache generator) has no backward");
    if (opts.prefill && opts.path == CLI_PATH_REFERENCE)
        return cli_fail(EXIT_USAGE, "attention: --prefill runs the flash path only, not "
                        "--path reference");
    return run(&opts);
}
