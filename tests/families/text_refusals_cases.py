"""The twelfth session's text rows, for make_family_cases.py: what they refuse, each with its
message (the rows that run are checked against transformers itself: tests/hf/text_rows_cases.py).

  glm5_next, kimi_linear  latent attention without any rotary embedding (NoPE) beside
             linear-attention layers: refused by name
  step3p7 (its text_config step3p5), diffusion_gemma, embedding_gemma2, neomme,
  unlimited_ocr, muse_glimmer_assistant, mistral_large4  refused naming what their
             attention needs
  voxtral_realtime  a text_config naming another model_type (its class merges its own text
             defaults under it): refused
  glm4v_text  no mrope_section, where its code's default [8, 12, 12] does not split the
             rotary pairs (transformers fails): refused
  exaone4_5  a text_config without model_type (Exaone4_5_Config reads
             text_config["model_type"]: transformers fails): refused

and two wrappers that run, their text_config without model_type (read as the class the
wrapper gives it; their whole models, too large to save here, are checked through their text
rows in tests/hf): deepseek_ocr2 (DeepseekOcr2TextAttention: Llama's, attention_bias on all
four, head_dim hidden_size / num_attention_heads) and granite4_vision (Granite's
attention_multiplier the softmax scale).
"""
import numpy as np

from make_family_cases import B, S, attention, f32, inv_freq, named, save, weights

RNG = np.random.default_rng(20261212)
DIM, H, K, D = 32, 4, 2, 8
BASE = {"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": K,
        "max_position_embeddings": 64, "rope_theta": 1e4}


def text_refusals_cases(out):
    x = f32(RNG.normal(0, 1, (B, S, DIM)))
    plain = named(weights(DIM, H, K, D), "model.layers.0.self_attn.")
    refused = lambda t: 'model_type "%s" is refused: ' % t
    refusals = [
        ("glm5_next", dict(BASE, model_type="glm5_next_text"), plain,
         refused("glm5_next_text") + "its attention layers are latent attention without any "
         "rotary embedding"),
        ("kimi_linear", dict(BASE, model_type="kimi_linear"), plain,
         refused("kimi_linear") + "its attention layers are latent attention without any "
         "rotary embedding (NoPE), beside Kimi Delta Attention layers"),
        ("step3p7", {"model_type": "step3p7", "text_config": dict(BASE, model_type="step3p5")},
         plain, refused("step3p5") + "its attention (Gemma's q/k norms"),
        ("diffusion_gemma", dict(BASE, model_type="diffusion_gemma_text"), plain,
         refused("diffusion_gemma_text") + "its text model is an encoder stack and a decoder"),
        ("embedding_gemma2", dict(BASE, model_type="embedding_gemma2_text"), plain,
         refused("embedding_gemma2_text") + "an encoder whose sliding layers see a window"),
        ("neomme", dict(BASE, model_type="neomme"), plain,
         refused("neomme") + "its attention (exclusive self-attention"),
        ("unlimited_ocr", {"model_type": "unlimited_ocr", "text_config": dict(BASE)}, plain,
         refused("unlimited_ocr") + "its reference sliding window"),
        ("muse_glimmer_assistant", dict(BASE, model_type="muse_glimmer_assistant"), plain,
         refused("muse_glimmer_assistant") + "its keys and values include the target model's"),
        ("mistral_large4", {"model_type": "mistral_large4", "text_config": dict(BASE)}, plain,
         refused("mistral_large4") + "its latent attention scales each head's queries"),
        ("voxtral_realtime_text_other_type",
         {"model_type": "voxtral_realtime", "text_config": dict(BASE, model_type="mistral")},
         plain, 'text_config\'s "model_type" is not "voxtral_realtime_text", and model_type '
         '"voxtral_realtime" merges its own text defaults under it'),
        ("glm4v_text_default_sections",
         dict(BASE, model_type="glm4v_text", rope_parameters={"rope_type": "default",
                                                             "rope_theta": 1e4}),
         dict(plain, **{"model.layers.0.self_attn." + p + "_proj.bias": f32(np.zeros(n))
                        for p, n in (("q", H * D), ("k", K * D), ("v", K * D))}),
         'no "mrope_section", and model_type "glm4v_text"\'s code splits the rotary pairs by '
         'its default [8, 12, 12]'),
        ("exaone4_5_untyped_text_config",
         {"model_type": "exaone4_5", "text_config": dict(BASE, head_dim=D)}, plain,
         'text_config has no "model_type", which model_type "exaone4_5"\'s config class reads'),
    ]
    for name, config, tensors, refused_msg in refusals:
        save(out, name, config, tensors, x, None, 0, refused=refused_msg)

    wrapped = {k: v for k, v in BASE.items() if k != "rope_theta"}
    w = weights(DIM, H, K, D, biases="qkvo")
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half"}
    save(out, "deepseek_ocr2_wrapped",
         {"model_type": "deepseek_ocr2", "text_config": dict(wrapped, attention_bias=True)},
         named(w, "model.language_model.layers.0.self_attn."), x, attention(x, w, f), 0)
    w = weights(DIM, H, K, D)
    save(out, "granite4_vision_wrapped",
         {"model_type": "granite4_vision", "text_config": dict(wrapped, attention_multiplier=0.2)},
         named(w, "model.language_model.layers.0.self_attn."), x,
         attention(x, w, dict(f, scale=0.2)), 0)
