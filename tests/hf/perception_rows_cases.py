"""perception_rows_cases.py: make_hf_cases.py's cases of the fourteenth session's rows, Meta's
Perception Encoder audio and video models (PE-AV), each written by make_hf_cases.write_case from
transformers' own model (without the causal mask: case.json "causal" false, no y_cache.npy):

  pe_audio_encoder_bias
      PeAudioEncoder saved alone: Qwen3's attention (q and k RMS-normed per head) on interleaved
      pairs (stack_freqs: each pair (2i, 2i + 1) turned by frequency i), attention_bias on all
      four, two key/value heads, its default rope (rope_theta 20000), at positions 0 .. S-1
  pe_video_encoder, pe_audio_video_encoder
      PeVideoEncoder and PeAudioVideoEncoder saved alone, the same attention without biases,
      rope_theta 300; their embedders (a timm vision model, which reads pixel values and which
      transformers builds only with timm installed) left out of the model: the layers run on
      inputs_embeds and never read them
  pe_audio_text_local, pe_video_text_global
      PeAudioModel and PeVideoModel saved whole: their text model's layer (ModernBERT's, under
      text_model.layers.N) read through text_config, a local layer and a global one
  pe_audio_video_text
      PeAudioVideoModel saved whole: its text model (text_model.layers.N; the audio and video
      models' text models are tied to it and not saved)
"""
import torch
import transformers

import make_hf_cases as m
from encoder_audio_rows_cases import lasr_layers
from encoder_cases import MODERNBERT


class NoEmbedder(torch.nn.Module):
    """In place of an embedder that needs timm: the cases run the layers on inputs_embeds."""

    def __init__(self, config):
        super().__init__()


def without_timm(base):
    """base, built with PE Video's embedder (a timm vision model) left out."""
    from transformers.models.pe_video import modeling_pe_video

    class Model(base):
        def __init__(self, config):
            real = modeling_pe_video.PeVideoEncoderEmbedder
            modeling_pe_video.PeVideoEncoderEmbedder = NoEmbedder
            try:
                super().__init__(config)
            finally:
                modeling_pe_video.PeVideoEncoderEmbedder = real

    Model.__name__ = Model.__qualname__ = base.__name__
    return Model


def text_layers(base):
    """A PE model class run on inputs_embeds through its text model alone (the ModernBERT
    encoder its contrastive heads read), at the given position ids, no mask."""
    class Model(base):
        def forward(self, inputs_embeds=None, position_ids=None, **kw):
            return self.text_model(inputs_embeds=inputs_embeds, position_ids=position_ids)

    Model.__name__ = Model.__qualname__ = base.__name__
    return Model


PE = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
          intermediate_size=16, num_hidden_layers=2)
OPTS = dict(cached=False, causal=False)


def with_text(config_cls):
    """config_cls (whose get_text_config gives the encoder, for write_case's embeddings)."""
    class Config(config_cls):
        def get_text_config(self, *args, **kw):
            return self

    Config.__name__ = Config.__qualname__ = config_cls.__name__
    return Config


def perception_rows_cases():
    if not hasattr(transformers, "PeAudioEncoder"):
        return
    dac = dict(downsampling_ratios=[2], encoder_hidden_size=4, codebook_dim=4, hidden_size=8)
    config = with_text(transformers.PeAudioEncoderConfig)(dac_config=dac, attention_bias=True,
                                                          **PE)
    yield ("pe_audio_encoder_bias", lasr_layers(transformers.PeAudioEncoder), config, 1,
           m.positions(0), OPTS)
    rope = {"rope_type": "default", "rope_theta": 300.0}
    config = with_text(transformers.PeVideoEncoderConfig)(rope_parameters=rope, **PE)
    yield ("pe_video_encoder", lasr_layers(without_timm(transformers.PeVideoEncoder)), config, 0,
           m.positions(0), OPTS)
    config = with_text(transformers.PeAudioVideoEncoderConfig)(
        rope_parameters=rope, audio_config=dict(PE, dac_config=dac), video_config=PE, **PE)
    yield ("pe_audio_video_encoder", lasr_layers(without_timm(transformers.PeAudioVideoEncoder)),
           config, 1, m.positions(0), OPTS)
    text = dict(MODERNBERT, model_type="modernbert")
    ropes = {"full_attention": {"rope_type": "default", "rope_theta": 1000.0},
             "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}
    config = transformers.PeAudioConfig(text_config=dict(text, rope_parameters=ropes),
                                        audio_config=dict(PE, dac_config=dac))
    yield ("pe_audio_text_local", text_layers(transformers.PeAudioModel), config, 1,
           m.positions(7), dict(OPTS, freqs=False))
    config = transformers.PeVideoConfig(text_config=text, video_config=PE)
    yield ("pe_video_text_global", text_layers(without_timm(transformers.PeVideoModel)), config,
           0, m.positions(0), dict(OPTS, freqs=False))
    config = transformers.PeAudioVideoConfig(
        text_config=text, audio_video_config=dict(PE, audio_config=dict(PE, dac_config=dac),
                                                  video_config=PE))
    yield ("pe_audio_video_text", text_layers(without_timm(transformers.PeAudioVideoModel)),
           config, 2, m.positions(3), dict(OPTS, freqs=False))
