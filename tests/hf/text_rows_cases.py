"""text_rows_cases.py: make_hf_cases.py's cases of the twelfth session's text rows, each
written by make_hf_cases.write_case from transformers' own classes:

  idefics    IdeficsForVisionText2Text: its decoder layers' self-attention is Llama's
             without biases or key/value groups (head_dim hidden_size / heads); its gated
             cross-attention layers are other modules (gated_cross_attn_layers), not read
  evolla     EvollaForProteinText2Text: Llama's attention (rope_theta 500000 by default)
  voxtral_realtime  its text decoder: Mistral's attention, every layer sliding by
             sliding_window; the whole model's text_config merged over the class's own
             defaults (sliding_window 8192, head_dim 128 ...)
  the multimodal wrappers whose text model is a row already (Aria, Emu3, Mllama,
             DeepSeek-OCR 2, Granite 4 Vision, HyperCLOVA X Vision V2), saved whole with
             text_config without model_type (the wrapper's row reads it)
"""
import torch
import transformers

import make_hf_cases as m


def model_class(module, name):
    """transformers' class `name` from models/<module>, or None."""
    import importlib
    try:
        return getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"),
                       name)
    except (ImportError, AttributeError):
        return None


def whole(name, model_type, model, config_kw, layer=0, pos=None, **opts):
    """A case of transformers' config class of model_type (config_kw, its towers shrunk)
    and the model class `model`, saved whole."""
    config_cls = m.config_class(model_type)
    config = config_cls(**dict(m.small_parts(config_cls), **config_kw))
    model_cls = getattr(transformers, model)
    return (name, model_cls, config, layer, m.positions(7) if pos is None else pos, opts)


def idefics():
    """IdeficsForVisionText2Text on text alone: each call given one image's encoder output
    (zeros, two tokens) that no token attends to (image_attention_mask 0: the gated
    cross-attention's output is zeroed); the same class name, so save_pretrained's config.json
    and weights are its own."""
    base = transformers.IdeficsForVisionText2Text

    class IdeficsForVisionText2Text(base):
        def forward(self, inputs_embeds=None, **kw):
            B, S = inputs_embeds.shape[:2]
            image = torch.zeros(B, 1, 2, self.config.vision_config.embed_dim)
            return super().forward(inputs_embeds=inputs_embeds, image_encoder_embeddings=image,
                                   image_attention_mask=torch.zeros(B, S, 1), **kw)

    return IdeficsForVisionText2Text


def voxtral_realtime():
    """VoxtralRealtimeForConditionalGeneration's text decoder on inputs_embeds alone (its model
    takes audio too: the text decoder run as the model runs it, t_cond from the default delay
    tokens); the same class name, so save_pretrained's config.json and weights are its own."""
    base = getattr(transformers, "VoxtralRealtimeForConditionalGeneration", None)
    if base is None:
        return None

    class VoxtralRealtimeForConditionalGeneration(base):
        def forward(self, **kw):
            model = self.model
            delay = torch.full((1,), float(self.config.default_num_delay_tokens))
            return model.language_model(t_cond=model.time_embedding(delay)[None, ...], **kw)

    return VoxtralRealtimeForConditionalGeneration


def text_rows_cases():
    tiny = m.TINY
    no_head_dim = {k: v for k, v in tiny.items() if k != "head_dim"}
    mha = dict(no_head_dim, num_key_value_heads=4)
    rope = {"rope_type": "default", "rope_theta": 10000.0}
    config_cls = m.config_class("idefics")
    config = config_cls(**dict({k: v for k, v in mha.items() if k != "num_key_value_heads"},
                     num_hidden_layers=2, cross_layer_interval=2,
                     freeze_text_layers=False,  # (frozen by default: no gradients)
                     vision_config=dict(embed_dim=32, image_size=28, patch_size=14,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=16),
                     perceiver_config=dict(use_resampler=False),
                     rope_parameters=rope))
    yield ("idefics_self_attention", idefics(), config, 1, m.positions(7), {})
    yield whole("evolla_llama", "evolla", "EvollaForProteinText2Text",
                dict(tiny, num_hidden_layers=2, aligner_num_add_layers=1, resampler_depth=1,
                     resampler_dim_head=8, resampler_heads=2, resampler_num_latents=2,
                     protein_encoder_config=dict(hidden_size=32, num_hidden_layers=1,
                                                 num_attention_heads=2, intermediate_size=16,
                                                 vocab_size=16, max_position_embeddings=64),
                     rope_parameters=dict(rope, rope_theta=500.0)), layer=0)
    # Voxtral Realtime: every layer slides (4 of 12 tokens); text_config without model_type
    # and head_dim (the class's default, 128, where it names none: 8 here)
    voxtral = transformers.VoxtralRealtimeConfig(
        text_config=dict(no_head_dim, head_dim=8, num_hidden_layers=2, sliding_window=4,
                         rope_parameters=rope),
        audio_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                          num_key_value_heads=2, head_dim=16, intermediate_size=16,
                          num_mel_bins=16, sliding_window=8))
    yield ("voxtral_realtime_sliding", voxtral_realtime(), voxtral, 1, m.positions(7),
           {"config_keys": {"text_config/model_type": None}})
    # the wrappers: their text_config without model_type
    yield m.wrapped("aria_multimodal", "aria", m.config_of("AriaText", dict(tiny, attention_bias=True)))
    # (Emu3's VQ-VAE shrunk; its vocabulary_map names the tokens its model looks up)
    emu3 = transformers.Emu3Config(
        text_config=m.config_of("Emu3Text", tiny), vocabulary_map={"<|extra_200|>": 5, "<image>": 6},
        vq_config=dict(codebook_size=8, embed_dim=4, latent_channels=4, base_channels=32,
                       channel_multiplier=[1], num_res_blocks=0, attn_resolutions=[],
                       hidden_size=32))
    yield ("emu3_multimodal", transformers.Emu3ForConditionalGeneration, emu3, 0, m.positions(7),
           {"config_keys": {"text_config/model_type": None}})
    # (Mllama's vision tower shrunk: one global layer, one intermediate layer's features)
    mllama = transformers.MllamaConfig(
        text_config=m.config_of("MllamaText", dict(no_head_dim, num_hidden_layers=2,
                                                   cross_attention_layers=[1])),
        vision_config=dict(hidden_size=32, num_hidden_layers=1, num_global_layers=1,
                           attention_heads=2, intermediate_size=16, image_size=8, patch_size=4,
                           intermediate_layers_indices=[0], vision_output_dim=64))
    yield ("mllama_multimodal", transformers.MllamaForConditionalGeneration, mllama, 0,
           m.positions(7), {"config_keys": {"text_config/model_type": None}})
    granite = dict(tiny, attention_multiplier=0.2, attention_bias=True)
    yield m.wrapped("granite4_vision_multimodal", "granite4_vision",
                    m.config_of("Granite4VisionText", granite))
    yield m.wrapped("hyperclovax_vision_v2_multimodal", "hyperclovax_vision_v2",
                    m.config_of("HyperCLOVAX", dict(no_head_dim, attention_multiplier=0.2)))
    # GLM-4.1V's text model without mrope_section: its code's [8, 12, 12] over the 32 rotary
    # pairs of head_dim 128 at partial_rotary_factor 0.5, on 3-D positions
    glm = dict(no_head_dim, hidden_size=128, num_attention_heads=1, num_key_value_heads=1)
    yield m.family("glm4v_text_default_sections", "Glm4vText", glm,
                   rope={"rope_type": "default", "partial_rotary_factor": 0.5},
                   model="Glm4vTextModel", pos=m.mrope_positions(), freqs=False)
