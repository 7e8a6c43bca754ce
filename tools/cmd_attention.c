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
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attention_grads.h"
#include "attention_full_mask.h"
#include "attention_masks.h"
#include "attention_token_types.h"
#include "attention_vision.h"
#include "attention_sharded.h"
#include "cli.h"
#include "comm.h"
#include "ropeattn_io.h"
#include "outputs.h"
#include "progress.h"
#include "rope_cli.h"
#include "timer.h"

static const char usage[] =
    "usage: ropeattn attention --weights DIR|W.safetensors|INDEX.json --input X.npy\n"
    "                          --output Y.npy\n"
    "                          [--config config.json] [--layer N] [--n-heads H]\n"
    "                          [--n-kv-heads K] [--layout interleaved|half]\n"
    "                          [--start-pos P | --positions P.npy] [--threads N]\n"
    "                          [--path flash|reference] [--rope-parameters JSON]\n"
    "                          [--theta T] [--max-position-embeddings M] [--seq-len L]\n"
    "                          [--prefill P [--cache-dtype f32|f16|bf16|int8|fp8]\n"
    "                          [--cache-scale S]]\n"
    "                          [--attention-mask M.npy | --packed] [--no-causal]\n"
    "                          [--vision [--cu-seqlens CU.npy | --grid-thw G.npy]]\n"
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
    "                  fused ones read in place; latent attention's q_proj or\n"
    "                  q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa,\n"
    "                  kv_a_layernorm, kv_b_proj, o_proj with a DeepSeek config);\n"
    "                  F32, F16, BF16 or F64; or a sharded checkpoint's\n"
    "                  model.safetensors.index.json; or a checkpoint folder DIR:\n"
    "                  its model.safetensors, else its model.safetensors.index.json\n"
    "                  (transformers' from_pretrained's order)\n"
    "  --input X       float32 .npy, [batch, seq, dim] or [seq, dim] (float64 is\n"
    "                  rounded to float32; beyond its range, refused)\n"
    "  --output Y      float32 .npy of X's shape, written only on success\n"
    "  --layer N       which layer, when W holds several (HRM-Text's: a cache slot of\n"
    "                  its two stacks run in cycles, as transformers numbers them)\n"
    "  --n-heads H     query heads (required unless --config gives them)\n"
    "  --n-kv-heads K  key/value heads (default: config, else wk's rows / head_dim)\n"
    "  --layout L      interleaved (default for Meta's names) or half (default for\n"
    "                  Hugging Face names, whose wq and wk rows are permuted)\n"
    "  --start-pos P   position of the first token (default 0)\n"
    "  --positions P   .npy of int32 or int64 positions, [seq] (every batch row)\n"
    "                  or [batch, seq]; the causal mask still follows token order.\n"
    "                  With an M-RoPE rope (mrope_section: Qwen2-VL, Qwen2.5-VL,\n"
    "                  Qwen3-VL) also 3-D positions, [3, seq] or [3, batch, seq]:\n"
    "                  (temporal, height, width), as transformers' position_ids\n"
    "                  from get_rope_index (text tokens: three equal rows); or\n"
    "                  [4, ...]: text positions, then those three rows\n"
    "  --attention-mask M\n"
    "                  .npy of int32 or int64 [batch, seq]: 1 for a token, 0 for\n"
    "                  padding (Hugging Face's attention_mask; left or right\n"
    "                  padding): no token attends to padding, and a padding\n"
    "                  token's output row (and gradient) is 0.  Or a full mask,\n"
    "                  PyTorch SDPA's attn_mask: bool ('|b1', true = may attend)\n"
    "                  or float32/float16/float64 (added to the scaled logits;\n"
    "                  finite or -inf), [batch, heads, seq, seq] or its last 1 to\n"
    "                  3 dimensions, each extent the input's or 1 (a 2-D one with\n"
    "                  batch = seq, or [seq] and [1, seq] with batch 1, which a\n"
    "                  padding mask's shape would be too, is refused: give it\n"
    "                  4-D); it masks with the causal mask (--no-causal: alone;\n"
    "                  --token-type-ids: with their mask), and a query that sees\n"
    "                  no key gives a zero row.  Not with --prefill\n"
    "  --packed        each row holds several documents, a new one wherever a\n"
    "                  --positions id (of [4, ...], a text position) is not the\n"
    "                  one before plus one (each row its own); no token attends\n"
    "                  across documents, as transformers masks a packed batch.\n"
    "                  Needs --positions; not with --prefill\n"
    "  --vision        the attention layer --layer N of the vision encoder\n"
    "                  (vision_config: Pixtral, Qwen2-VL, Qwen2.5-VL, Llama 4),\n"
    "                  bidirectional, with its 2-D rope; --positions gives each\n"
    "                  patch's (row, column), [seq, 2] or [batch, seq, 2] (each batch\n"
    "                  row one image), or --grid-thw; its heads, layout and rope are\n"
    "                  vision_config's (docs/FAMILIES.md \"Vision encoders\")\n"
    "  --cu-seqlens CU with --vision: .npy of int32 or int64 [n + 1], the images\n"
    "                  packed in each row: 0, then where each ends (the last: seq);\n"
    "                  a patch attends to its own image's, as transformers' block\n"
    "                  mask (Pixtral) and cu_seqlens (Qwen2-VL, Qwen2.5-VL) do\n"
    "  --grid-thw G    with --vision, Qwen2.5-VL: .npy of int32 or int64 [n, 3], the\n"
    "                  images' grid_thw (t, h, w in patches); --input holds their\n"
    "                  patches in window order, as transformers' vision tower\n"
    "                  runs every block on them (its window_index); each row the\n"
    "                  same images.  The positions are theirs (window order), the\n"
    "                  documents a window layer's windows (cu_window_seqlens; the\n"
    "                  layers not in fullatt_block_indexes, which need it) or a\n"
    "                  full layer's frames (cu_seqlens).  Not with --positions or\n"
    "                  --cu-seqlens\n"
    "  --no-causal     no causal mask: every token sees the later ones too (the\n"
    "                  config's encoders, ModernBERT, ESM-2 and RoFormer, have\n"
    "                  none without it); a layer with a sliding window or chunks\n"
    "                  is refused.  Not with --prefill\n"
    "  --token-type-ids T\n"
    "                  .npy of int32 or int64 [batch, seq], Gemma 3's token_type_ids\n"
    "                  (model_type gemma3; other families refused): each run of 1s\n"
    "                  is an image block whose tokens see each other both ways,\n"
    "                  causal elsewhere; a sliding layer's window bounds the keys\n"
    "                  before a query only (a block may be longer than it), and\n"
    "                  --attention-mask's padding its keys, as transformers'\n"
    "                  create_masks_for_vision_model (a full --attention-mask: a\n"
    "                  key seen where both masks let it).  With --prefill P the\n"
    "                  prefill takes the mask and the decode steps are text (as\n"
    "                  generate() runs them): every token from P on must be 0.\n"
    "                  Not with --packed, --vision or --no-causal\n"
    "  --threads N     threads (default: one per processor)\n"
    "  --path P        flash (default) or reference (the masked softmax of the\n"
    "                  reference code)\n"
    "  --prefill P     generate through a KV cache: the first P tokens of each\n"
    "                  sequence (1 <= P <= seq) as one prefill, then the others one\n"
    "                  at a time (decode steps), each attending over the cache;\n"
    "                  Y is the full layer's up to float32 rounding (P = seq: one\n"
    "                  prefill).  Positions as without it; flash path only.\n"
    "                  Latent attention caches each token's latent and rotated\n"
    "                  shared key only, and decodes with kv_b_proj absorbed\n"
    "                  into q and the output\n"
    "  --cache-dtype T the KV cache's element type with --prefill: f32 (default),\n"
    "                  f16 or bf16 (keys and values rounded to it when cached), int8\n"
    "                  (a scale per token and kv head) or fp8 (e4m3, one scale S);\n"
    "                  the prefill attends over its own f32 keys and values, the\n"
    "                  decode steps over the 8-bit cache (latent attention: one\n"
    "                  int8 scale per token's row; under mpirun the prefill too\n"
    "                  attends over the 8-bit cache)\n"
    "  --cache-scale S with --cache-dtype fp8: keys and values are stored as\n"
    "                  e4m3(x / S), saturating beyond +-448 S (default 1, as vLLM\n"
    "                  without calibrated scales)\n"
    "  --stats         with --prefill: print the prefill's and the decode steps'\n"
    "                  tokens per second (all sequences') on stdout\n"
    "  --quiet         no progress line (shown on a terminal, on stderr, when the\n"
    "                  decode steps or --grads take more than a second)\n"
    "  --grad-output DY\n"
    "                  float32 (or float64) .npy of Y's shape: the gradient of a\n"
    "                  loss L with respect to Y (L = sum(Y * DY)); needs --grads\n"
    "  --grads G       also run the layer's backward and write G (.safetensors,\n"
    "                  F32): tensor 'x' = dL/dX in X's shape, and each weight's\n"
    "                  and bias's gradient under its own name in W (e.g.\n"
    "                  model.layers.0.self_attn.q_proj.weight); written only on\n"
    "                  success, with Y.  Not with --prefill\n"
    ROPE_CLI_USAGE
    "\n"
    "Without --config, the config.json beside the weights (in W's folder, the\n"
    "index's, or DIR) is read, as transformers' from_pretrained reads it.  With\n"
    "none there the rope must be given: --theta (or --rope-parameters with\n"
    "rope_theta), --n-heads, and --layout for Hugging Face names (their pairing is\n"
    "the family's: Cohere's and GLM's q_proj are interleaved); never theta 10000\n"
    "or a layout by default.\n"
    "\n"
    "The config also gives hidden_size, num_attention_heads, num_key_value_heads,\n"
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
    "temperature, latent attention (DeepSeek-V2, V3, Kimi K2: kv_lora_rank,\n"
    "q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, rope_interleave,\n"
    "yarn's mscale_all_dim in the softmax scale), sliding windows (Mistral, Qwen2,\n"
    "Phi-3, Gemma 2 and 3, gpt-oss; layer_types, sliding_window_pattern,\n"
    "use_sliding_window, max_window_layers),\n"
    "Gemma 2's soft-capped logits, gpt-oss's sinks and Llama 4's chunks.  Windows\n"
    "and chunks count tokens by their place in the sequence, not their position\n"
    "ids, as transformers does.  A family, config key or tensor of the layer that\n"
    "ropeattn does not run is refused, naming it: never run as something else.\n";

typedef struct attention_options {
    const char *weights, *input, *output;
    const char *grad_output, *grads; /* --grad-output, --grads: NULL unless given */
    const char *attention_mask;      /* --attention-mask: NULL unless given */
    int packed;                      /* --packed */
    int vision;                      /* --vision */
    const char *cu_seqlens;          /* --cu-seqlens: NULL unless given */
    const char *grid_thw;            /* --grid-thw: NULL unless given */
    int vision_windows;              /* --grid-thw on a window layer (run sets it) */
    int no_causal;                   /* --no-causal */
    const char *token_type_ids;      /* --token-type-ids: NULL unless given */
    int64_t layer, n_heads, n_kv_heads, start_pos, threads;
    int64_t prefill; /* 0: no KV cache */
    int layout, path, cache_dtype; /* cache_dtype: index in cache_dtype_names */
    int has_n_heads, has_n_kv_heads, has_layout, has_start_pos, has_cache_dtype;
    double cache_scale; /* --cache-scale: fp8's k and v scale */
    int has_cache_scale;
    int quiet, stats; /* --quiet, --stats */
    rope_cli rope;
} attention_options;

/* --cache-dtype values, and the dtype each names. */
static const char *const cache_dtype_names[] = {"f32", "f16", "bf16", "int8", "fp8", NULL};
static const ra_dtype cache_dtypes[] = {RA_F32, RA_F16, RA_BF16, RA_I8, RA_F8E4M3};

/* The layer of the checkpoint and config that the options name, for seq
 * tokens from --start-pos whose largest position is max_position. */
static int create_layer(const attention_options *opts, const rope_source *src,
                        const ra_hf_checkpoint *ckpt, int64_t seq, int64_t max_position,
                        ra_hf_layer **out)
{
    if (opts->vision) { /* the heads, rope and layout: vision_config's */
        ra_hf_options o = ra_hf_options_init();
        o.layer = opts->layer;
        o.vision = 1;
        o.vision_windows = opts->vision_windows;
        ra_status status = ra_hf_layer_create(out, ckpt, src->config, &o);
        return status == RA_OK ? 0 : rope_cli_fail("attention", status);
    }
    if (!opts->has_n_heads && !src->attention.n_heads && src->has_config)
        return cli_fail(EXIT_FAIL, "attention: %s has no \"num_attention_heads\" (nor a "
                        "default for it by its model_type): give it there, or --n-heads",
                        opts->rope.config_path);
    if (!opts->has_n_heads && !src->attention.n_heads)
        return cli_fail(EXIT_USAGE, "attention: --n-heads is required (or --config)");
    ra_hf_options o = ra_hf_options_init();
    o.layer = opts->layer;
    o.n_heads = opts->has_n_heads ? opts->n_heads : 0;
    o.n_kv_heads = opts->has_n_kv_heads ? opts->n_kv_heads : 0;
    o.layout = opts->has_layout ? opts->layout : -1;
    o.first_token = opts->start_pos;
    o.n_tokens = seq;
    o.max_position = max_position;
    o.seq_len = opts->rope.has_seq_len ? opts->rope.seq_len : 0;
    o.position_ids = opts->rope.positions_path != NULL;
    o.non_causal = opts->no_causal;
    o.token_types = opts->token_type_ids != NULL; /* refused but for gemma3 */
    ra_status status = ra_hf_layer_create(out, ckpt, src->config, &o);
    return status == RA_OK ? 0 : rope_cli_fail("attention", status);
}

/* X must be float32 [B, S, ...] or [S, ...], and hold at least --prefill
 * tokens per sequence. */
static int check_input(const ra_npy *x, const char *path, int64_t start_pos, int64_t prefill,
                       int64_t *batch, int64_t *seq)
{
    if (x->dtype != RA_NPY_F32)
        return cli_fail(EXIT_FAIL, "%s must hold float32 or float64 values ('<f4', '<f8')", path);
    if (x->ndim != 2 && x->ndim != 3)
        return cli_fail(EXIT_FAIL, "%s is %d-D; expected [batch, seq, dim] or [seq, dim]",
                        path, x->ndim);
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

/* X's last axis must be the layer's dim. */
static int check_dim(const ra_npy *x, const char *path, const ra_layer *layer)
{
    int64_t dim = ra_layer_get_config(layer)->dim;
    if (x->shape[x->ndim - 1] == dim) return 0;
    return cli_fail(EXIT_FAIL, "%s has last axis %lld; the weights need dim %lld", path,
                    (long long)x->shape[x->ndim - 1], (long long)dim);
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

/* The KV cache a generator would give the layer: for latent attention, a
 * latent cache of seq (ra_kv_cache_create_latent: each token's latent and
 * rotated shared key); for a sliding window or chunk of W tokens (the
 * smaller, with both: what a query reaches), a rolling cache of W - 1 + P
 * slots (ra_kv_cache_create_window) when that is fewer than seq; else a
 * full cache of seq. */
static ra_status create_cache(ra_kv_cache **cache, const ra_layer_config *c, int64_t batch,
                              int64_t seq, int64_t prefill, ra_dtype dtype)
{
    if (c->kv_lora_rank > 0)
        return ra_kv_cache_create_latent(cache, batch, seq, c->kv_lora_rank,
                                         c->head_dim - c->qk_nope_head_dim, dtype);
    int64_t w = c->window && (!c->chunk || c->window < c->chunk) ? c->window : c->chunk;
    if (w > 0 && w - 1 < seq - prefill)
        return ra_kv_cache_create_window(cache, batch, w, prefill, c->n_kv_heads, c->head_dim,
                                         dtype);
    return ra_kv_cache_create(cache, batch, seq, c->n_kv_heads, c->head_dim, dtype);
}

/* create_cache (seq 0: a full cache of capacity tokens, a shard's), and an
 * fp8 cache's scale (one for the layer's k and v). */
static ra_status create_cache_scaled(ra_kv_cache **cache, const attention_options *opts,
                                     const ra_layer_config *c, int64_t batch, int64_t seq,
                                     int64_t capacity)
{
    const ra_dtype dtype = cache_dtypes[opts->cache_dtype];
    ra_status status = seq ? create_cache(cache, c, batch, seq, opts->prefill, dtype)
                           : ra_kv_cache_create(cache, batch, capacity, c->n_kv_heads,
                                                c->head_dim, dtype);
    const float scale = (float)opts->cache_scale;
    if (status == RA_OK && dtype == RA_F8E4M3)
        status = ra_kv_cache_set_scales(*cache, &scale, &scale, 1);
    return status;
}

/* Y = layer(X) as a generator computes it: tokens [0, P) of every sequence
 * as one prefill into an empty KV cache (create_cache), then each further
 * token as a decode step (S = 1) over the cache.  Every call gets its rows'
 * positions explicitly: start_pos + first (+ s), or the --positions ids of
 * those rows. */
/* The largest position of tokens [first, first + n) of every sequence
 * (every component of ids [components, B, S]; NULL: start_pos + s). */
static int64_t step_max_position(const int64_t *ids, int components, int64_t batch, int64_t seq,
                                 int64_t start_pos, int64_t first, int64_t n)
{
    if (!ids) return start_pos + first + n - 1;
    int64_t most = ids[first];
    for (int64_t r = 0; r < components * batch; r++)
        for (int64_t s = first; s < first + n; s++) most = ids[r * seq + s] > most ? ids[r * seq + s] : most;
    return most;
}

/* A dynamic or longrope rope is made for one length L (the input's largest
 * position + 1, or --seq-len), and the layer rotates every step's tokens
 * with it, so that Y is the no-cache Y.  Through a KV cache transformers
 * instead takes L from each step (its largest position + 1; dynamic keeps
 * the largest L so far, back to the original below it) and keeps each
 * cached key's rotation.  Where a step's frequencies would differ from L's
 * the two disagree: refused, naming the first such step.  --seq-len fixes L
 * for every step: run as asked. */
static int check_prefill_rope(const attention_options *opts, const ra_rope_config *r,
                              const int64_t *ids, int components, int64_t batch, int64_t seq)
{
    if (opts->rope.has_seq_len || (r->type != RA_ROPE_DYNAMIC && r->type != RA_ROPE_LONGROPE))
        return 0;
    const int dynamic = r->type == RA_ROPE_DYNAMIC;
    const int64_t original = dynamic ? r->max_position_embeddings
                                     : r->original_max_position_embeddings;
    int64_t cached = original; /* transformers' max_seq_len_cached (dynamic) */
    for (int64_t first = 0, n = opts->prefill; first < seq; first += n, n = 1) {
        const int64_t L = step_max_position(ids, components, batch, seq, opts->start_pos, first,
                                            n) + 1;
        int same;
        if (dynamic) {
            cached = L > cached ? L : cached;
            if (L < original && cached > original) cached = original;
            same = cached <= original ? r->seq_len <= original : cached == r->seq_len;
        } else {
            same = (L > original) == (r->seq_len > original);
        }
        if (!same)
            return cli_fail(EXIT_FAIL, "attention: --prefill with rope type %s: the step of "
                            "tokens %lld.. sees length %lld, whose frequencies differ from those "
                            "of the input's length %lld (%s %lld), so transformers' cached "
                            "generation differs from the no-cache Y: run without --prefill, or "
                            "fix the length with --seq-len", dynamic ? "dynamic" : "longrope",
                            (long long)first, (long long)(dynamic ? cached : L),
                            (long long)r->seq_len,
                            dynamic ? "max_position_embeddings" : "original_max_position_embeddings",
                            (long long)original);
    }
    return 0;
}

/* A cache window (ra_hf_attention_info.cache_window; Moshi's):
 * transformers' cache keeps the last sliding_window - 1 tokens while its
 * mask is causal, so a decode step that starts at token sliding_window or
 * later sees fewer keys through the cache than the no-cache Y does (the
 * prefill, run whole, sees them all). */
/* A layer without the causal mask (an encoder's: every token sees the later
 * ones too) has no cache to generate through. */
static int check_prefill_causal(const attention_options *opts, const ra_hf_layer *layer)
{
    if (!opts->prefill || !ra_layer_get_config(ra_hf_layer_get(layer))->non_causal) return 0;
    return cli_fail(EXIT_FAIL, "attention: --prefill: this layer has no causal mask (every token "
                    "sees the later ones too, as the config's model_type has it), so no KV "
                    "cache to generate through: run without --prefill");
}

static int check_prefill_window(const attention_options *opts, const rope_source *src,
                                int64_t seq)
{
    const int64_t window = src->attention.cache_window, last = seq - 1; /* the last step's token */
    if (!opts->prefill || !window || last < opts->prefill || last < window) return 0;
    return cli_fail(EXIT_FAIL, "attention: --prefill with %lld tokens: model_type \"%s\" masks "
                    "no earlier token, while transformers' cache keeps only the last "
                    "sliding_window - 1 = %lld of them, so its cached generation differs from "
                    "the no-cache Y from token %lld on: run without --prefill, or with at most "
                    "%lld tokens", (long long)seq, ra_hf_config_model_type(src->config),
                    (long long)(window - 1), (long long)(window > opts->prefill ? window
                                                                                : opts->prefill),
                    (long long)window);
}

/* One cached step of n tokens: across the ranks of a launch, each rank's
 * cache a shard of sequences of seq tokens; else this process's cache.  0,
 * or the exit code after one message. */
static int cached_step(ra_context *ctx, const ra_layer *layer, ra_kv_cache *cache, float *y,
                       const float *x, int64_t batch, int64_t n, const ra_positions *positions,
                       int64_t seq, const ra_attention_options *masked)
{
#ifdef RA_CLI_MPI
    if (cli_comm_size() > 1) /* --token-type-ids (masked) runs in one process */
        return attention_sharded_cached(ctx, seq, layer, cache, y, x, batch, n, positions);
#endif
    (void)seq;
    const ra_status status =
        masked ? ra_layer_forward_cached_mask(ctx, layer, cache, y, x, batch, n, positions, masked)
               : ra_layer_forward_cached(ctx, layer, cache, y, x, batch, n, positions);
    return status == RA_OK ? 0 : cli_fail_status(status, "attention forward through the KV "
                                                         "cache failed");
}

/* token_mask: --token-type-ids' [batch, 1, seq, seq] (NULL: none), the
 * prefill's mask its first P rows and keys; the decode steps are text. */
static int forward_cached(const attention_options *opts, const ra_layer *layer,
                          ra_context *ctx, float *y, const float *x, const int64_t *ids,
                          int components, int64_t batch, int64_t seq, const uint8_t *token_mask)
{
    const ra_layer_config *c = ra_layer_get_config(layer);
    const int64_t dim = c->dim, P = opts->prefill;
    int sharded = 0;        /* across the ranks of a launch: each rank's cache a shard, */
    int64_t capacity = seq; /* its share of the tokens */
#ifdef RA_CLI_MPI
    sharded = cli_comm_size() > 1;
    if (sharded) capacity = attention_sharded_capacity(seq, P);
#endif
    progress line;
    double t0 = timer_seconds(), t_prefill = 0;
    float *x_part = malloc((size_t)(batch * P * dim) * sizeof(float));
    float *y_part = malloc((size_t)(batch * P * dim) * sizeof(float));
    int64_t *ids_part = ids ? malloc((size_t)(components * batch * P) * sizeof(int64_t)) : NULL;
    ra_kv_cache *cache = NULL;
    ra_status status = RA_ERR_NOMEM;
    int failed = check_prefill_rope(opts, c->rope, ids, components, batch, seq);
    if (!failed && x_part && y_part && (ids_part || !ids))
        status = create_cache_scaled(&cache, opts, c, batch, sharded ? 0 : seq, capacity);
    if (!failed && status != RA_OK)
        failed = cli_fail_status(status, "attention forward through the KV cache failed");
    failed = cli_comm_agree(failed); /* a launch's ranks step together, or none does */
    progress_begin(&line, "attention --prefill", batch * seq, opts->quiet);
    for (int64_t first = 0, n = P; !failed && first < seq; first += n, n = 1) {
        if (first == P) t_prefill = timer_seconds() - t0;
        progress_update(&line, batch * first);
        gather_tokens(x_part, x, batch, seq, first, n, dim);
        for (int64_t r = 0; ids && r < components * batch; r++) /* [components, batch, n] */
            for (int64_t s = 0; s < n; s++) ids_part[r * n + s] = ids[r * seq + first + s];
        ra_positions positions = positions_of_ids(ids_part, components, opts->start_pos + first);
        ra_tensor mask = {(void *)token_mask, RA_BOOL, {batch, 1, P, P}, {seq * seq, 0, seq, 1}};
        ra_attention_options masked = ra_attention_options_init();
        masked.attn_mask = &mask;
        masked.non_causal = 1;
        failed = cached_step(ctx, layer, cache, y_part, x_part, batch, n, &positions, seq,
                             token_mask && first == 0 ? &masked : NULL);
        if (!failed) scatter_tokens(y, y_part, batch, seq, first, n, dim);
    }
    progress_end(&line);
    if (!failed && opts->stats) { /* tokens of all sequences, per second */
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
    return failed;
}

/* The forward's calls (packed_rows_call). */
typedef struct forward_calls {
    ra_context *ctx;
    const ra_layer *layer;
    int64_t seq, start_pos;
    int components;
} forward_calls;

static ra_status forward_rows(void *arg, int64_t n, const float *x, const float *dy,
                              const int64_t *ids, const ra_attention_options *attention,
                              int accumulate, float *y, float *dx)
{
    const forward_calls *c = arg;
    (void)dy, (void)accumulate, (void)dx;
    ra_positions positions = positions_of_ids(ids, c->components, c->start_pos);
    return ra_layer_forward(c->ctx, c->layer, y, x, n, c->seq, &positions, attention);
}

/* Y = layer(X), written only if the whole forward succeeded. */
static int forward_and_write(const attention_options *opts, cli_outputs *outputs,
                             const ra_layer *layer, ra_context *ctx, const ra_npy *x,
                             const int64_t *ids, int components,
                             const ra_attention_options *attention, const packed_rows *packed,
                             int64_t batch, int64_t seq)
{
    float *y = malloc((size_t)x->count * sizeof(float));
    int failed = y ? 0 : cli_fail(EXIT_FAIL, "out of memory for the output");
    failed = cli_comm_agree(failed); /* --prefill across a launch's ranks */
    forward_calls calls = {ctx, layer, seq, opts->start_pos, components};
    ra_status status = RA_OK;
    if (!failed && opts->prefill)
        failed = forward_cached(opts, layer, ctx, y, x->data, ids, components, batch, seq,
                                attention->non_causal ? attention->attn_mask->data : NULL);
    else if (!failed)
        status = packed_rows_run(packed, batch, seq, ra_layer_get_config(layer)->dim, components,
                                 x->data, NULL, ids, *attention, y, NULL, forward_rows, &calls);
    if (status != RA_OK) failed = cli_fail_status(status, "attention forward failed");
    /* across the ranks of a launch (--prefill: every rank has Y), rank 0 writes */
    if (!failed && cli_comm_rank() == 0 &&
        !(failed = cli_outputs_write_npy(outputs, 0, y, x->ndim, x->shape)))
        failed = cli_outputs_commit(outputs);
    free(y);
    return failed;
}

/* Y and, with --grads, the gradients of sum(Y * DY); the attention's path,
 * and its padding (pad: batch * seq, or NULL) or full mask (attn_mask, or
 * NULL) or documents (packed, or NULL). */
static int compute_and_write(const attention_options *opts, cli_outputs *outputs,
                             const ra_hf_layer *layer, ra_context *ctx, const ra_npy *x,
                             const ra_npy *dy, const int64_t *ids, int components,
                             const uint8_t *pad, const uint8_t *token_mask,
                             const ra_tensor *attn_mask,
                             const positions_file *cu, const packed_rows *packed,
                             int64_t batch, int64_t seq)
{
    ra_attention_options attention = ra_attention_options_init();
    attention.path = cli_attention_path(opts->path);
    attention.padding_mask = pad;
    /* --attention-mask's full mask (with --token-type-ids: joined with
     * theirs, run), else --token-type-ids' mask [batch, 1, seq, seq] */
    ra_tensor mask = ra_tensor_4d((void *)token_mask, RA_BOOL, batch, 1, seq, seq);
    attention.attn_mask = attn_mask ? attn_mask : token_mask ? &mask : NULL;
    attention.non_causal = token_mask != NULL; /* in place of the causal mask and window */
    if (cu->ids) { /* --cu-seqlens: the images packed in each row */
        attention.cu_seqlens = cu->ids;
        attention.n_documents = cu->count - 1;
    }
#ifdef RA_CLI_MPI
    if (cli_comm_size() > 1 && !opts->prefill) {
        attention_sharded_job job = {layer, ra_hf_layer_get(layer), x, opts->grads ? dy : NULL,
                                     batch, seq, ids, components, opts->start_pos, attention,
                                     packed, outputs};
        return attention_sharded_run(&job, ctx);
    }
#endif
    if (!opts->grads)
        return forward_and_write(opts, outputs, ra_hf_layer_get(layer), ctx, x, ids,
                                 components, &attention, packed, batch, seq);
    attention_grads_job job = {layer, x, dy, batch, seq, ids, components, opts->start_pos,
                               attention, packed, outputs, opts->quiet};
    return attention_grads_run(&job, ctx);
}

/* The outputs, checked, and every file named on the command line (and the
 * config beside the weights) checked against them. */
static int check_files(const attention_options *opts, const checkpoint_paths *paths,
                       cli_outputs *outputs)
{
    int failed = cli_outputs_add(outputs, "--output", opts->output);
    if (!failed && opts->grads) failed = cli_outputs_add(outputs, "--grads", opts->grads);
    const char *const inputs[][2] = {{"--weights", opts->weights},
                                     {"--input", opts->input},
                                     {"--grad-output", opts->grad_output},
                                     {paths->config_option, opts->rope.config_path},
                                     {"--positions", opts->rope.positions_path},
                                     {"--attention-mask", opts->attention_mask},
                                     {"--cu-seqlens", opts->cu_seqlens},
                                     {"--grid-thw", opts->grid_thw},
                                     {"--token-type-ids", opts->token_type_ids}};
    for (size_t i = 0; !failed && i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i][1]) failed = cli_outputs_check_input(outputs, inputs[i][0], inputs[i][1]);
    return failed;
}

/* The checkpoint's files, each checked against the outputs. */
static int open_checkpoint(const attention_options *opts, cli_outputs *outputs,
                           ra_hf_checkpoint **ckpt)
{
    if (ra_hf_checkpoint_open(ckpt, opts->weights) != RA_OK)
        return cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
    int failed = 0;
    for (int64_t i = 0; !failed && i < ra_hf_checkpoint_file_count(*ckpt); i++)
        failed = cli_outputs_check_input(outputs, "--weights shard",
                                         ra_hf_checkpoint_file_path(*ckpt, i));
    return failed;
}

/* A hash of what this rank read, for the ranks of a launch to compare
 * (0 for one process): X, DY, the positions and the mask, and the sizes of
 * the checkpoint's files and the config. */
static uint64_t inputs_signature(const attention_options *opts, const ra_hf_checkpoint *ckpt,
                                 const ra_npy *x, const ra_npy *dy, const int64_t *ids,
                                 int64_t n_ids, const uint8_t *pad)
{
    if (cli_comm_size() == 1) return 0;
    uint64_t h = cli_comm_hash(0, x->data, (size_t)x->count * sizeof(float));
    if (dy->data) h = cli_comm_hash(h, dy->data, (size_t)dy->count * sizeof(float));
    if (ids) h = cli_comm_hash(h, ids, (size_t)n_ids * sizeof *ids);
    if (pad) h = cli_comm_hash(h, pad, (size_t)(x->count / x->shape[x->ndim - 1]));
    for (int64_t i = 0; i <= ra_hf_checkpoint_file_count(ckpt); i++) {
        const char *path = i < ra_hf_checkpoint_file_count(ckpt)
                               ? ra_hf_checkpoint_file_path(ckpt, i) : opts->rope.config_path;
        struct stat st;
        int64_t size = path && stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
        h = cli_comm_hash(h, &size, sizeof size);
    }
    return h;
}

/* --attention-mask: a full mask (bool or float values, SDPA's attn_mask)
 * into *full, else (int32 or int64 values) a padding mask into *pad. */
static int attention_mask_load(const attention_options *opts, int64_t batch, int64_t seq,
                               uint8_t **pad, full_mask *full)
{
    const char *path = opts->attention_mask;
    int failed = full_mask_read(path, batch, seq, full);
    if (failed == -1) return attention_mask_read(path, batch, seq, pad);
    if (!failed && cli_comm_size() > 1)
        failed = cli_fail(EXIT_USAGE, "attention: a full --attention-mask (%s: bool or float "
                          "values) runs in one process, not across the %d ranks of an MPI "
                          "launch", path, cli_comm_size());
    return failed;
}

/* opts->weights and (without --config) opts->rope.config_path become the
 * checkpoint's files (checkpoint_paths_find), which run reads. */
static int run(attention_options *opts)
{
    char msg[CLI_MSG_LEN];
    checkpoint_paths paths;
    rope_source src = {0};
    ra_hf_checkpoint *ckpt = NULL;
    ra_npy x = {0}, dy = {0};
    positions_file file = {0}, cu = {0};
    int64_t *ids = NULL, *text = NULL;
    packed_rows packed = {0};
    uint8_t *pad = NULL, *token_mask = NULL;
    full_mask full = {0};
    ra_hf_layer *layer = NULL;
    ra_context *ctx = NULL;
    int64_t batch = 0, seq = 0;
    int components = 1; /* 3: --positions holds 3-D positions; 2: --vision's 2-D ones */
    cli_outputs outputs = {0};
    int failed = checkpoint_paths_find(&opts->weights, &opts->rope.config_path, &paths);
    if (!failed) failed = check_files(opts, &paths, &outputs);
    if (!failed) failed = rope_source_load(&opts->rope, &src);
    if (!failed) failed = open_checkpoint(opts, &outputs, &ckpt);
    if (!failed) failed = rope_cli_require_rope("attention", &opts->rope, &src, &paths);
    if (!failed && (ra_npy_read_float(opts->input, &x, msg, sizeof msg) != RA_OK ||
                    (opts->grad_output &&
                     ra_npy_read_float(opts->grad_output, &dy, msg, sizeof msg) != RA_OK)))
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    if (!failed &&
        !(failed = check_input(&x, opts->input, opts->start_pos, opts->prefill, &batch, &seq)) &&
        !(opts->grad_output &&
          (failed = attention_grads_check(&dy, opts->grad_output, &x, opts->input))) &&
        opts->rope.positions_path &&
        !(failed = positions_read(opts->rope.positions_path, &file)) && opts->vision) {
        failed = positions_axial(&file, opts->rope.positions_path, batch, seq, &ids);
        components = 2;
    } else if (!failed && opts->rope.positions_path && !opts->vision)
        failed = positions_for_batch(&file, opts->rope.positions_path, batch, seq,
                                     src.attention.position_components == 3, &ids, &components, &text);
    if (!failed && opts->grid_thw) {
        failed = vision_grid_read(opts->grid_thw, src.config, opts->layer, batch, seq, &ids,
                                  &cu, &opts->vision_windows);
        components = 2;
    } else if (!failed && opts->vision)
        failed = vision_check_full(src.config, opts->layer);
    if (!failed && opts->attention_mask)
        failed = attention_mask_load(opts, batch, seq, &pad, &full);
    if (!failed && opts->cu_seqlens && !(failed = positions_read(opts->cu_seqlens, &cu)) &&
        (cu.ndim != 1 || cu.count < 2))
        failed = cli_fail(EXIT_FAIL, "%s: --cu-seqlens is [n + 1]: 0, then where each of the "
                          "n images of a row ends", opts->cu_seqlens);
    if (!failed && opts->packed && components == 3 && !text)
        failed = cli_fail(EXIT_USAGE, "attention: --packed finds documents in 1-D positions "
                          "(or the text row of [4, ...] ones), and %s holds 3-D ones",
                          opts->rope.positions_path);
    if (!failed && opts->packed)
        failed = packed_rows_find(text ? text : ids, batch, seq, opts->rope.positions_path,
                                  &packed);
    else if (!failed && text && !opts->attention_mask && !opts->prefill)
        failed = text_positions_plain(text, batch, seq, opts->rope.positions_path);
    if (!failed &&
        !(failed = check_prefill_window(opts, &src, seq)) &&
        !(failed = create_layer(opts, &src, ckpt, seq,
                                ids ? positions_max(ids, components * batch * seq)
                                    : opts->start_pos + seq - 1,
                                &layer)) &&
        !(failed = check_prefill_causal(opts, layer)) &&
        !(failed = check_dim(&x, opts->input, ra_hf_layer_get(layer))) &&
        !(opts->packed && ra_layer_get_config(ra_hf_layer_get(layer))->chunk &&
          (failed = packed_chunks_align(text ? text : ids, batch, seq,
                                        ra_layer_get_config(ra_hf_layer_get(layer))->chunk,
                                        opts->rope.positions_path))) &&
        !(opts->token_type_ids &&
          (failed = token_type_mask_read(opts->token_type_ids, layer, pad, batch, seq,
                                         opts->prefill, &token_mask))) &&
        !(token_mask && full.npy.data &&
          (failed = full_mask_join(&full, token_mask, batch, seq))))
        failed = cli_context_create(&ctx, opts->threads);
    /* an MPI launch's ranks compute together, on the same data, or none
     * does (comm.h) */
    failed = cli_comm_agree_on(failed,
                               failed ? 0 : inputs_signature(opts, ckpt, &x, &dy, ids,
                                                             components * batch * seq, pad),
                               "inputs (X, DY, positions, mask or checkpoint files)");
    if (!failed)
        failed = compute_and_write(opts, &outputs, layer, ctx, &x, &dy, ids, components, pad,
                                   token_mask, full.npy.data ? &full.view : NULL, &cu,
                                   opts->packed ? &packed : NULL, batch, seq);
    cli_outputs_free(&outputs);
    packed_rows_free(&packed);
    free(pad);
    free(token_mask);
    full_mask_free(&full);
    free(text);
    ra_context_destroy(ctx);
    ra_hf_layer_destroy(layer);
    free(ids);
    positions_free(&file);
    positions_free(&cu);
    ra_npy_free(&dy);
    ra_npy_free(&x);
    ra_hf_checkpoint_close(ckpt);
    rope_source_free(&src);
    return failed;
}

int cmd_attention(int argc, char **argv)
{
    attention_options opts = {.layer = -1, .threads = 0, .path = CLI_PATH_FLASH,
                              .cache_dtype = 0, .cache_scale = 1.0};
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
        CLI_POSITIVE_OPTION("--cache-scale", &opts.cache_scale, .seen = &opts.has_cache_scale),
        CLI_FLAG_OPTION("--quiet", &opts.quiet),
        CLI_FLAG_OPTION("--stats", &opts.stats),
        CLI_STRING_OPTION("--grad-output", &opts.grad_output),
        CLI_STRING_OPTION("--grads", &opts.grads),
        CLI_STRING_OPTION("--attention-mask", &opts.attention_mask),
        CLI_FLAG_OPTION("--packed", &opts.packed),
        CLI_FLAG_OPTION("--vision", &opts.vision),
        CLI_STRING_OPTION("--cu-seqlens", &opts.cu_seqlens),
        CLI_STRING_OPTION("--grid-thw", &opts.grid_thw),
        CLI_FLAG_OPTION("--no-causal", &opts.no_causal),
        CLI_STRING_OPTION("--token-type-ids", &opts.token_type_ids),
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
    if (opts.vision) {
        const char *text = opts.has_n_heads    ? "--n-heads"
                           : opts.has_n_kv_heads ? "--n-kv-heads"
                           : opts.has_layout     ? "--layout"
                           : opts.has_start_pos  ? "--start-pos"
                           : opts.prefill        ? "--prefill"
                           : opts.packed         ? "--packed"
                           : opts.rope.has_seq_len ? "--seq-len"
                                                 : NULL;
        if (text)
            return cli_fail(EXIT_USAGE, "attention: %s is not taken with --vision (the vision "
                            "encoder's heads, layout and rope are its vision_config's, its "
                            "patches see each other: no cache)", text);
        if (opts.layer < 0)
            return cli_fail(EXIT_USAGE, "attention: --vision needs --layer (the vision "
                            "encoder's layer number)");
        if (!opts.rope.positions_path && !opts.grid_thw)
            return cli_fail(EXIT_USAGE, "attention: --vision needs --positions, the patches' "
                            "(row, column) pairs (or --grid-thw)");
        if (opts.grid_thw && (opts.rope.positions_path || opts.cu_seqlens))
            return cli_fail(EXIT_USAGE, "attention: give --grid-thw or %s, not both (the grid "
                            "gives the positions and documents)",
                            opts.rope.positions_path ? "--positions" : "--cu-seqlens");
        if (cli_comm_size() > 1)
            return cli_fail(EXIT_USAGE, "attention: --vision runs in one process, not across "
                            "the %d ranks of an MPI launch", cli_comm_size());
    }
    if (opts.grid_thw && !opts.vision)
        return cli_fail(EXIT_USAGE, "attention: --grid-thw is --vision's (a vision encoder's "
                        "images)");
    if (opts.cu_seqlens && !opts.vision)
        return cli_fail(EXIT_USAGE, "attention: --cu-seqlens is --vision's (the images packed in "
                        "a row); a text layer's packed documents: --packed");
    if (opts.has_start_pos && opts.rope.positions_path)
        return cli_fail(EXIT_USAGE, "attention: give --start-pos or --positions, not both");
    if (opts.has_cache_dtype && !opts.prefill)
        return cli_fail(EXIT_USAGE, "attention: --cache-dtype needs --prefill (without it "
                        "there is no KV cache)");
    if (opts.has_cache_scale && cache_dtypes[opts.cache_dtype] != RA_F8E4M3)
        return cli_fail(EXIT_USAGE, "attention: --cache-scale needs --cache-dtype fp8 (the "
                        "other caches have no fixed scale)");
    if (opts.has_cache_scale && !((float)opts.cache_scale >= FLT_MIN &&
                                  (float)opts.cache_scale <= FLT_MAX / 448.0f))
        return cli_fail(EXIT_USAGE, "attention: --cache-scale %g: must be a normal float at "
                        "most FLT_MAX / 448 (448 times it is the largest value stored)",
                        opts.cache_scale);
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
    if (opts.packed && !opts.rope.positions_path)
        return cli_fail(EXIT_USAGE, "attention: --packed finds the documents in --positions: "
                        "give it");
    if (opts.packed && opts.attention_mask)
        return cli_fail(EXIT_USAGE, "attention: give --attention-mask or --packed, not both "
                        "(transformers finds packed documents only without a mask)");
    if ((opts.packed || opts.attention_mask) && opts.prefill)
        return cli_fail(EXIT_USAGE, "attention: %s is not run with --prefill (the KV cache "
                        "holds each sequence's own tokens)",
                        opts.packed ? "--packed" : "--attention-mask");
    if (opts.token_type_ids) {
        const char *other = opts.vision      ? "--vision"
                            : opts.packed    ? "--packed"
                            : opts.no_causal ? "--no-causal"
                                             : NULL;
        if (other)
            return cli_fail(EXIT_USAGE, "attention: --token-type-ids is not run with %s (Gemma "
                            "3's image blocks mask a causal text layer)", other);
        if (cli_comm_size() > 1)
            return cli_fail(EXIT_USAGE, "attention: --token-type-ids runs in one process, not "
                            "across the %d ranks of an MPI launch", cli_comm_size());
    }
    if (opts.no_causal && opts.prefill)
        return cli_fail(EXIT_USAGE, "attention: --no-causal is not run with --prefill (a "
                        "layer without the causal mask has no cache to generate through)");
    if (opts.prefill && opts.path == CLI_PATH_REFERENCE)
        return cli_fail(EXIT_USAGE, "attention: --prefill runs the flash path only, not "
                        "--path reference");
    if (cli_comm_size() > 1 && opts.path == CLI_PATH_REFERENCE)
        return cli_fail(EXIT_USAGE, "attention: --path reference runs in one process, not "
                        "across the %d ranks of an MPI launch", cli_comm_size());
    return run(&opts);
}
