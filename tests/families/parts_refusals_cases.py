"""The thirteenth session's refusals, for make_family_cases.py: transformers 5.23's model types
that use RoPE and were refused as unknown model types, each with its message.

  qwen3_vl_vision, glm4v_vision ...  a vision encoder's config saved alone
  qwen2_vl_vision, llama4_vision_model  alone; their layers run from a whole model's config
  qwen3_omni_moe_talker_text, voxtral_encoder ...  a part of a composite model saved alone
  blt_local_encoder, t5gemma2_encoder ...  one stack of a model refused for its several stacks
  sam3, pi0, chmv2  several stacks; an action expert over a cached prefix; DINOv3's backbone
  colpali, colqwen2, colmodernvbert  a vision-language model in vlm_config (read as no family
             before: their top level names no attention key)

and a refused model saved whole, its text_config naming a model_type of its own: refused as
the whole model's row where that model_type is not refused too (Gemma 4's assistant's
gemma4_unified_text ran as Gemma 4's text layers, where the assistant takes the target
model's keys and values; SAM 3's clip_text_model was an unknown model_type), else as the
text_config's (CLVP's clvp_encoder).
"""
import numpy as np

from make_family_cases import B, S, f32, named, save, weights

RNG = np.random.default_rng(20261213)
DIM, H, K, D = 32, 4, 2, 8
BASE = {"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": K,
        "max_position_embeddings": 64, "rope_theta": 1e4}


def parts_refusals_cases(out):
    x = f32(RNG.normal(0, 1, (B, S, DIM)))
    plain = named(weights(DIM, H, K, D), "model.layers.0.self_attn.")
    refused = lambda t: 'model_type "%s" is refused: ' % t
    vision = {"hidden_size": DIM, "num_heads": H, "depth": 1}
    refusals = [
        ("qwen3_vl_vision_alone", dict(vision, model_type="qwen3_vl_vision"),
         refused("qwen3_vl_vision") + "a vision encoder's config saved alone"),
        ("qwen2_vl_vision_alone", dict(vision, model_type="qwen2_vl_vision"),
         refused("qwen2_vl_vision") + "a vision tower saved alone: its layers run from a "
         "multimodal config's vision_config"),
        ("talker_alone", dict(BASE, model_type="qwen3_omni_moe_talker_text"),
         refused("qwen3_omni_moe_talker_text") + "a part of a composite model saved alone "
         "(the Omni model's talker"),
        ("blt_stack_alone", dict(BASE, model_type="blt_local_encoder"),
         refused("blt_local_encoder") + "one stack of layers of BLT saved alone"),
        ("t5gemma2_encoder_alone",
         {"model_type": "t5gemma2_encoder", "text_config": dict(BASE, model_type="t5gemma2_text")},
         refused("t5gemma2_text") + "one stack of layers of T5Gemma 2 saved alone"),
        ("sam3_whole", {"model_type": "sam3", "text_config": dict(BASE, model_type="clip_text_model")},
         refused("sam3") + "a segmentation model: its attention sits in several stacks"),
        ("pi0_whole", {"model_type": "pi0", "dit_config": dict(BASE, model_type="gemma")},
         refused("pi0") + "a vision-language-action model: its Gemma action expert"),
        ("chmv2_whole", {"model_type": "chmv2", "backbone_config": dict(BASE, model_type="dinov3_vit")},
         refused("chmv2") + "its backbone (backbone_config) is DINOv3's ViT"),
        ("colpali_whole",
         {"model_type": "colpali", "vlm_config": {"model_type": "paligemma",
                                                  "text_config": dict(BASE, model_type="gemma")}},
         refused("colpali") + "a retrieval model: its vision-language model's config sits in "
         "vlm_config"),
        ("clvp_whole", {"model_type": "clvp", "text_config": dict(BASE, model_type="clvp_encoder")},
         refused("clvp_encoder") + "one stack of layers of CLVP saved alone"),
        ("gemma4_unified_assistant_whole",
         {"model_type": "gemma4_unified_assistant",
          "text_config": dict(BASE, model_type="gemma4_unified_text")},
         refused("gemma4_unified_assistant") + "its layers all take their keys and values"),
    ]
    for name, config, refused_msg in refusals:
        save(out, name, config, plain, x, None, 0, refused=refused_msg)
