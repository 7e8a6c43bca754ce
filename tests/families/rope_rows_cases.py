"""The eleventh session's rows, for make_family_cases.py: what they refuse, each with its
message (their runs are checked against transformers itself: tests/hf/rope_rows_cases.py).

  chameleon  ChameleonAttention: head_dim is hidden_size / num_attention_heads, whatever a
             head_dim key says (its rotary embedding would read the key: refused); q_norm and
             k_norm each with a weight and a bias of [heads, head_dim] (one missing: refused)
  codegen    its fused qkv_proj packs q, v, k in mp_num = 4 groups of whole heads: heads
             not a multiple of 4, or key/value heads other than the query heads (a
             num_key_value_heads key, which CodeGen reads none of): refused (its runs:
             tests/hf/codegen_qvk_groups)
  jamba, nemotron_h  attention without any rotary embedding: refused by name
  longcat_flash, mistral_large4_text  latent attention with what ropeattn's latent layers
             do not run (two modules a layer, a learned q scale per head): refused by name
             (mistral4 runs: tests/families/mla_cases.py)
  dia, moonshine(_streaming), t5gemma(2)  encoder-decoder models: refused by name
  csm        two stacks of RoPE layers (backbone, depth decoder): refused by name
"""
import numpy as np

from make_family_cases import B, S, f32, named, save, weights

RNG = np.random.default_rng(20261207)
DIM, H, K, D = 32, 4, 2, 8
BASE = {"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": K,
        "max_position_embeddings": 64, "rope_theta": 1e4}


CODEGEN = {"model_type": "codegen", "n_embd": 32, "n_head": 4, "rotary_dim": 4,
           "n_positions": 64}


def codegen(dim):
    """CodeGen's layer 0: qkv_proj [3 dim, dim] and out_proj."""
    prefix = "transformer.h.0.attn."
    return {prefix + "qkv_proj.weight": f32(RNG.normal(0, dim ** -0.5, (3 * dim, dim))),
            prefix + "out_proj.weight": f32(RNG.normal(0, dim ** -0.5, (dim, dim)))}


def rope_rows_cases(out):
    x = f32(RNG.normal(0, 1, (B, S, DIM)))
    prefix = "model.layers.0.self_attn."
    plain = named(weights(DIM, H, K, D), prefix)
    chameleon = dict(named(weights(DIM, H, K, D, norms="heads"), prefix),
                     **{prefix + "q_norm.bias": f32(RNG.normal(0, 0.1, (H, D))),
                        prefix + "k_norm.bias": f32(RNG.normal(0, 0.1, (K, D)))})
    no_bias = {k: v for k, v in chameleon.items() if not k.endswith("k_norm.bias")}
    refusals = [
        ("chameleon_head_dim_key", dict(BASE, model_type="chameleon", head_dim=16), chameleon,
         '"head_dim"'),
        ("chameleon_no_k_norm_bias", dict(BASE, model_type="chameleon"), no_bias,
         "has no k_norm.bias"),
        ("chameleon_without_norms", dict(BASE, model_type="chameleon"), plain,
         "has no q_norm.weight"),
        ("codegen_six_heads", dict(CODEGEN, n_embd=48, n_head=6), codegen(48),
         "6 query heads and 6 key/value heads do not split so"),
        ("codegen_kv_heads", dict(CODEGEN, num_key_value_heads=2), codegen(32),
         "4 query heads and 2 key/value heads do not split so"),
        ("jamba", dict(BASE, model_type="jamba"), plain,
         'model_type "jamba" is refused: its attention layers'),
        ("nemotron_h", dict(BASE, model_type="nemotron_h"), plain,
         'model_type "nemotron_h" is refused: its attention layers'),
        ("csm", dict(BASE, model_type="csm"), plain,
         'model_type "csm" is refused: its backbone and its depth decoder'),
        ("longcat_flash", dict(BASE, model_type="longcat_flash"), plain,
         'model_type "longcat_flash" is refused: its decoder layers hold two latent attention'),
        ("mistral_large4_text", {"model_type": "mistral_large4",
                                 "text_config": dict(BASE, model_type="mistral_large4_text")},
         plain, 'model_type "mistral_large4_text" is refused: its latent attention scales each '
         "head's queries"),
    ] + [(t, dict(BASE, model_type=t), plain,
          'model_type "%s" is refused: an encoder-decoder model' % t)
         for t in ("dia", "moonshine", "moonshine_streaming", "t5gemma", "t5gemma2")]
    for name, config, tensors, refused in refusals:
        save(out, name, config, tensors, x, None, 0, refused=refused)
