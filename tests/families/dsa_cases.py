"""DeepSeek sparse attention (DeepSeek-V3.2, GLM-MoE-DSA) for
make_family_cases.py: latent attention (mla_cases.py's layer, A.X K1's:
always q_a_proj, pairs interleaved) beside an indexer, whose tensors are
random here (the indexer does not change a layer it keeps every key of).

What the indexer does (modeling_deepseek_v32.py's DeepseekV32Indexer; GLM-MoE-
DSA's rotates its pairs interleaved, and its "shared" layers take the top-k
of the full layer before them):
  scores[b, s, t] = sum_h weights_proj(x)[h] H^-1/2 relu(q_h . k_t D^-1/2),
      q = wq_b(q_resid) [H, D] and k = k_norm(wk(x)) [D], their first
      qk_rope_head_dim features rotated; the attention mask added (-inf
      for a masked key)
  each query keeps topk = min(index_topk, keys) of them, and every other key
      is masked out of the attention
So a query that sees at most index_topk keys keeps all it sees (the masked
ones score -inf and rank below), and the layer is mla_cases.py's: y and
the gradients are that layer's.  Past index_topk the layer is refused.
"""
import numpy as np

from make_family_cases import S, f32, save
from mla_cases import DIM, DN, DR, RQ, RNG, mla, named, save_grads, weights

IH, ID = 2, DR + 4  # the indexer's heads and head size


def indexer(prefix):
    """The indexer's tensors under prefix (random: they select every key)."""
    def normal(*shape):
        return f32(RNG.normal(0, 0.3, shape))
    return {prefix + "indexer.wq_b.weight": normal(IH * ID, RQ),
            prefix + "indexer.wk.weight": normal(ID, DIM),
            prefix + "indexer.k_norm.weight": f32(1 + normal(ID)),
            prefix + "indexer.k_norm.bias": normal(ID),
            prefix + "indexer.weights_proj.weight": normal(IH, DIM)}


def dsa_cases(out, x, base):
    layers = lambda n: "model.layers.%d.self_attn." % n  # noqa: E731
    f = {"inv": 1.0 / 1e4 ** (np.arange(0, DR, 2) / DR), "att": 1.0, "kind": "interleave",
         "scale": (DN + DR) ** -0.5}
    v32 = dict(base, model_type="deepseek_v32", q_lora_rank=RQ, index_topk=S, index_n_heads=IH,
               index_head_dim=ID, rope_parameters={"rope_type": "default", "rope_theta": 1e4},
               max_position_embeddings=4096, attention_bias=False,
               layer_types=["indexed_attention"] * 2)
    # every query sees at most index_topk = S keys: the dense layer
    w = weights(q_lora=True)
    ckpt = dict(named(w, layers(0)), **indexer(layers(0)))
    save(out, "deepseek_v32", v32, ckpt, x, mla(x, w, f), 0)
    save_grads(out, "deepseek_v32", x, w, f, layers(0))
    # GLM-MoE-DSA's layer 1 shares layer 0's top-k: no indexer of its own
    glm = dict(v32, model_type="glm_moe_dsa", indexer_types=["full", "shared"])
    w = weights(q_lora=True)
    save(out, "glm_moe_dsa_shared", glm, named(w, layers(1)), x, mla(x, w, f), 1)

    # ---- refused ----
    refusals = [
        # the last queries see S = 12 keys, of which the indexer keeps 8
        ("deepseek_v32_past_index_topk", dict(v32, index_topk=8), ckpt,
         'model_type "deepseek_v32"\'s indexer (DeepSeek sparse attention) keeps each query\'s '
         'index_topk = 8 best-scoring keys, all of them only while a query sees at most that '
         'many: the layer\'s queries see up to 12 keys'),
        ("glm_moe_dsa_past_index_topk", dict(glm, index_topk=11), ckpt, "index_topk = 11"),
        ("deepseek_v32_indexer_tensor_unknown", v32,
         dict(ckpt, **{layers(0) + "indexer.extra.weight": f32(np.ones(2))}),
         "tensor 'model.layers.0.self_attn.indexer.extra.weight' in"),
        ("deepseek_v32_index_head_dim", dict(v32, index_head_dim=DR - 2), ckpt,
         '"index_head_dim" 6 is less than qk_rope_head_dim 8'),
        ("deepseek_v32_rope_interleave_false", dict(v32, rope_interleave=False), ckpt,
         '"rope_interleave" is false, and model_type "deepseek_v32" pairs'),
        ("glm_moe_dsa_first_layer_shared", dict(glm, indexer_types=["shared", "full"]), ckpt,
         '"indexer_types" makes the first layer "shared"'),
        ("glm_moe_dsa_indexer_types", dict(glm, indexer_types=["full", "dense"]), ckpt,
         '"indexer_types" must be an array of "full" and "shared"'),
        ("llama_index_topk", {"model_type": "llama", "num_attention_heads": 4, "index_topk": 8},
         ckpt, '"index_topk" (a sparse-attention indexer\'s top-k keys) changes attention'),
    ] + hy_v4_refusals(v32, ckpt, layers(0))
    for name, cfg, tensors, refused in refusals:
        save(out, name, cfg, tensors, x, None, 0, refused=refused)


def hy_v4_refusals(v32, ckpt, prefix):
    """HY V4 (DeepSeek-V3.2's layer, its output gated per feature by
    gate_proj, sinks: tests/hf/hy_v4_gate_sinks): without sinks, a gate of
    the wrong shape; sinks where the family reads none."""
    hy = dict(v32, model_type="hy_v4", indexer_types=["full", "full"])
    gate = {prefix + "linear_gate.weight": f32(np.ones((4 * 6 + 1, DIM)))}  # not H Dv rows
    sinks = {prefix + "learnable_sink_param": f32(np.zeros(4))}
    return [
        ("hy_v4_without_sinks", hy, dict(ckpt, **{prefix + "gate_proj.weight": f32(np.ones(
            (4 * 6, DIM)))}),
         "has no sinks beside 'model.layers.0.self_attn.o_proj.weight': model_type \"hy_v4\""),
        ("hy_v4_gate_shape", hy, dict(ckpt, **gate, **sinks),
         "tensor 'model.layers.0.self_attn.linear_gate.weight' in"),
        ("deepseek_v32_stray_sinks", v32, dict(ckpt, **{prefix + "sinks": f32(np.zeros(4))}),
         'model_type "deepseek_v32" reads no sinks beside latent attention'),
    ]
