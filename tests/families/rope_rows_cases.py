"""The eleventh session's rows, for make_family_cases.py: what they refuse, each with its
message (their runs are checked against transformers itself: tests/hf/rope_rows_cases.py).

  chameleon  ChameleonAttention: head_dim is hidden_size / num_attention_heads, whatever a
             head_dim key says (its rotary embedding would read the key: refused); q_norm and
             k_norm each with a weight and a bias of [heads, head_dim] (one missing: refused)
  codegen    its fused qkv_proj (q, v, k per model-parallel group): refused by name
  jamba, nemotron_h  attention without any rotary embedding: refused by name
"""
import numpy as np

from make_family_cases import B, S, f32, named, save, weights

RNG = np.random.default_rng(20261207)
DIM, H, K, D = 32, 4, 2, 8
BASE = {"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": K,
        "max_position_embeddings": 64, "rope_theta": 1e4}


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
        ("codegen", dict(BASE, model_type="codegen"), plain,
         'model_type "codegen" is refused: its fused qkv_proj'),
        ("jamba", dict(BASE, model_type="jamba"), plain,
         'model_type "jamba" is refused: its attention layers'),
        ("nemotron_h", dict(BASE, model_type="nemotron_h"), plain,
         'model_type "nemotron_h" is refused: its attention layers'),
    ]
    for name, config, tensors, refused in refusals:
        save(out, name, config, tensors, x, None, 0, refused=refused)
