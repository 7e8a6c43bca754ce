"""Families whose attention is Llama's under another model_type, for
make_family_cases.py: what their config classes (transformers 5.23) give
where config.json is silent, and the families refused, with their messages.

  cwm        CwmConfig: without rope_scaling and rope_parameters, llama3
             (theta 1e6, factor 16, low 1, high 4, original 8192), a top-level
             rope_theta ignored; without layer_types, layers 0, 4, 8 ... full
             and the others sliding (Qwen2's attention, no biases)
  internlm3  InternLM3Config: Llama's model; qkv_bias is attention_bias
             (attribute_map), biasing q, k, v and o
  nemotron   NemotronConfig: partial_rotary_factor 0.5, rotate_half over the
             first half of each head's features
  hyperclovax  attention_multiplier null: head_dim^-1/2
  mllama_text_model  MllamaTextConfig: rope_theta 500000; the layers of
             cross_attention_layers (by default 3, 8, ... 38) attend to the
             vision states: refused by layer; the others are Llama's
  diffllama, jetmoe, doge: refused, naming what their attention does
"""
import numpy as np

from make_family_cases import (B, S, attention, f32, inv_freq, llama3_inv_freq, named, save,
                               weights)

RNG = np.random.default_rng(20261206)
DIM, H, K, D = 32, 4, 2, 16
BASE = {"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": K, "head_dim": D,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6}


def prefix(layer):
    return "model.layers.%d.self_attn." % layer


def plain_rows_cases(out):
    x = f32(RNG.normal(0, 1, (B, S, DIM)))
    f = {"H": H, "K": K, "D": D, "layout": "half"}

    # CWM: its default rope (a top-level rope_theta changes nothing) and
    # window rule, without layer_types: layer 1 slides, layer 4 does not.
    cfg = dict(BASE, model_type="cwm", rope_theta=5.0, sliding_window=4)
    inv = llama3_inv_freq(1e6, D, 16.0, 1.0, 4.0, 8192)
    for layer, window in ((1, 4), (4, 0)):
        w = weights(DIM, H, K, D)
        save(out, "cwm_default_layer%d" % layer, cfg, named(w, prefix(layer)), x,
             attention(x, w, dict(f, inv=inv, window=window)), layer)

    # InternLM3: qkv_bias true (attention_bias absent) biases every projection.
    w = weights(DIM, H, K, D, biases="qkvo")
    cfg = dict(BASE, model_type="internlm3", qkv_bias=True, bias=True, rope_theta=1e4)
    save(out, "internlm3_qkv_bias", cfg, named(w, prefix(0)), x,
         attention(x, w, dict(f, inv=inv_freq(1e4, D))), 0)

    # Nemotron without partial_rotary_factor: half of each head rotates.
    w = weights(DIM, H, K, D)
    cfg = dict(BASE, model_type="nemotron", rope_theta=1e4)
    save(out, "nemotron_default_partial", cfg, named(w, prefix(0)), x,
         attention(x, w, dict(f, inv=inv_freq(1e4, D // 2))), 0)

    # HyperCLOVA X with attention_multiplier null: the usual scale.
    w = weights(DIM, H, K, D)
    cfg = dict(BASE, model_type="hyperclovax", attention_multiplier=None, rope_theta=1e4)
    save(out, "hyperclovax_null_multiplier", cfg, named(w, prefix(0)), x,
         attention(x, w, dict(f, inv=inv_freq(1e4, D))), 0)

    # Mllama's text model: a self-attention layer at its default rope_theta.
    w = weights(DIM, H, K, D)
    mllama = {k: v for k, v in BASE.items() if k != "head_dim"}
    cfg = {"model_type": "mllama", "text_config": dict(mllama, model_type="mllama_text_model",
                                                       cross_attention_layers=[1])}
    save(out, "mllama_self_attention", cfg,
         named(w, "model.language_model.layers.0.self_attn."), x,
         attention(x, w, dict(f, inv=inv_freq(5e5, D))), 0)

    plain = dict(named(weights(DIM, H, K, D), prefix(0)),
                 **named(weights(DIM, H, K, D), prefix(1)))
    refusals = [
        ("mllama_cross_attention_layer", cfg, 1, "layer 1 is a cross-attention layer"),
        ("mllama_default_cross_attention_layer", dict(mllama, model_type="mllama_text_model"),
         3, 'layer 3 is a cross-attention layer (cross_attention_layers of model_type '
         '"mllama_text_model")'),
        ("cross_attention_layers_outside_mllama", dict(BASE, model_type="llama",
                                                       cross_attention_layers=[1]), 0,
         '"cross_attention_layers" (cross-attention layers) changes attention'),
        ("internlm3_two_bias_names", dict(BASE, model_type="internlm3", qkv_bias=True,
                                          attention_bias=False), 0,
         '"qkv_bias" (another name for "attention_bias" in model_type "internlm3") and '
         '"attention_bias" differ'),
        ("cwm_window_null", dict(BASE, model_type="cwm", sliding_window=None), 1,
         'makes layer 1 a sliding layer and its "sliding_window" is null'),
        ("diffllama", dict(BASE, model_type="diffllama"), 0,
         'model_type "diffllama" is refused: its differential attention'),
        ("jetmoe", dict(BASE, model_type="jetmoe"), 0,
         'model_type "jetmoe" is refused: its mixture of attention heads'),
        ("doge", dict(BASE, model_type="doge"), 0,
         'model_type "doge" is refused: its dynamic mask attention'),
    ]
    for name, config, layer, refused in refusals:
        save(out, name, config, plain, x, None, layer, refused=refused)
