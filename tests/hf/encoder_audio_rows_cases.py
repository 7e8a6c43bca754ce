"""encoder_audio_rows_cases.py: make_hf_cases.py's cases of the twelfth session's encoder and
audio rows, each written by make_hf_cases.write_case from transformers' own model (the encoders
without the causal mask: case.json "causal" false, no y_cache.npy):

  gte_kv_heads_ignored, nomic_bert_kv_heads_ignored, jina_embeddings_v3_kv_heads_ignored
      a num_key_value_heads of 2 beside 4 query heads in config.json, which these models never
      read (their config classes have no such attribute): every head its own keys
  ultrabert_sliding, ultrabert_full
      UltraBERT's sliding layer (|i - j| <= sliding_window, 2 here) and full layer, each with its
      rope (rope_parameters per layer type), grouped key/value heads and biases; the full one's
      config.json without layer_types (its class's rule: every third layer full);
  ultrabert_rope_theta_list
      older checkpoints' rope_theta, a base per layer, in place of rope_parameters
  openai_privacy_filter_window
      OpenAI's privacy filter: GPT-OSS's sinks, biases and yarn rope on interleaved pairs, q and k
      each scaled by head_dim^-0.25, every layer seeing |i - j| <= sliding_window (3 here)
  higgs_audio_v2_llama3, pocket_tts_bias
      audio decoders with Llama's attention (Higgs Audio v2's llama3 rope; Pocket TTS's
      attention_bias)
  codegen_qvk_groups_bf16
      CodeGen's qkv_proj (q, v, k per model-parallel group) saved in BF16
  lasr_ctc_bias, lasr_encoder
      LASR's (MedASR's) conformer self-attention: Llama's without a causal mask, at positions
      0 .. S-1; LasrForCTC's encoder_config, and the encoder saved alone
  glmasr_encoder_partial
      GLM-ASR's audio encoder saved alone: biases on q, v and o, half of each head rotated by
      its config class's default factor (config.json's rope_parameters without one)
  nemotron3_diarization_default_factor
      Nemotron-3 diarization saved whole, its audio tower's layer through audio_config: a bias
      on o_proj alone, the whole head rotated by its config class's default factor (1.0; its
      config.json's rope_parameters without partial_rotary_factor)
  nemotron3_5_transcribe_asr_audio_partial, nemotron3_5_transcribe_word_timestamp
      Nemotron 3.5 Transcribe's speech recognition and word timestamp encoders saved alone:
      Nemotron-3 diarization's attention with q and k LayerNormed per head (nn.LayerNorm's
      weight and bias, shared by the heads) before RoPE; the config class's rope (half of
      each head) and a rope_parameters without partial_rotary_factor (all of each head)
  glmasr_text, musicflamingo_text
      speech and music models saved whole with a tiny audio encoder: their text layer (Llama's,
      Qwen2's) read through text_config, under language_model.model.layers.N
"""
import torch
import transformers

import make_hf_cases as m
from rope_rows_cases import encoder


def encoder_audio_rows_cases():
    kv = {"num_key_value_heads": 2}
    yield encoder("gte_kv_heads_ignored", "Gte", "GteForMaskedLM", **kv)
    yield encoder("nomic_bert_kv_heads_ignored", "NomicBert", "NomicBertForMaskedLM", **kv)
    yield encoder("jina_embeddings_v3_kv_heads_ignored", "JinaEmbeddingsV3",
                  "JinaEmbeddingsV3Model", layer=0, **kv)
    ropes = {"sliding_attention": {"rope_type": "default", "rope_theta": 300.0},
             "full_attention": {"rope_type": "default", "rope_theta": 50000.0}}
    # (the full layer's config without layer_types: the class's rule, layers 2, 5 ... full)
    for kind, layer, keys in (("sliding", 0, None), ("full", 2, {"layer_types": None})):
        case = encoder(f"ultrabert_{kind}", "Ultrabert", "UltrabertForMaskedLM", layer=layer,
                       config_keys=keys, num_hidden_layers=3, num_key_value_heads=2,
                       attention_bias=True, sliding_window=2, rope_parameters=ropes)
        # (a rope per layer type: no freqs table of the config's)
        yield case and case[:5] + (dict(case[5], freqs=False),)
    # older checkpoints' rope_theta, a base per layer (UltrabertConfig zips it with
    # layer_types, a later layer's over an earlier one's: sliding 300, full 50000) in place
    # of rope_parameters; transformers reads the edited file as the config it saved
    case = encoder("ultrabert_rope_theta_list", "Ultrabert", "UltrabertForMaskedLM", layer=0,
                   config_keys={"rope_parameters": None, "rope_theta": [100.0, 300.0, 50000.0]},
                   num_hidden_layers=3, num_key_value_heads=2, sliding_window=2,
                   rope_parameters=ropes)
    yield case and case[:5] + (dict(case[5], freqs=False),)
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8}
    higgs = dict(m.TINY, head_dim=16, audio_token_id=12, audio_bos_token_id=13,
                 audio_delay_token_id=14, bos_token_id=1, eos_token_id=2, num_codebooks=2,
                 codebook_size=8)
    yield m.family("higgs_audio_v2_llama3", "HiggsAudioV2", higgs, rope=llama3,
                   pos=m.positions(20), model="HiggsAudioV2ForConditionalGeneration")
    flow = {"condition_dim": m.TINY["hidden_size"], "latent_dim": 4, "hidden_size": 8,
            "num_hidden_layers": 1}
    # (its special tokens inside TINY's vocabulary of 16)
    tokens = dict(audio_prompt_token_id=12, audio_latent_token_id=13, audio_prompt_bos_token_id=14,
                  audio_bos_token_id=15)
    yield m.family("pocket_tts_bias", "PocketTTS", dict(m.TINY, attention_bias=True, latent_dim=4,
                                                        flow_head_config=flow, **tokens),
                   model="PocketTTSForConditionalGeneration")
    yield m.family("codegen_qvk_groups_bf16", "CodeGen",
                   dict(n_embd=64, n_head=8, rotary_dim=4, n_layer=1, n_inner=16, vocab_size=16,
                        n_positions=64), theta=None, dtype=torch.bfloat16)
    yield from audio_text_cases()
    yield from lasr_cases()
    yield from glmasr_encoder_case()
    yield from nemotron3_diarization_case()
    yield from nemotron3_5_transcribe_cases()
    config_cls = getattr(transformers, "OpenAIPrivacyFilterConfig", None)
    if config_cls is None:
        return
    config = config_cls(**dict(m.TINY, num_hidden_layers=1, head_dim=16, sliding_window=3,
                               num_local_experts=2, num_experts_per_tok=1,
                               rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                                "beta_fast": 32.0, "beta_slow": 1.0,
                                                "truncate": False, "rope_theta": 1000.0,
                                                "original_max_position_embeddings": 16}))
    yield ("openai_privacy_filter_window", transformers.OpenAIPrivacyFilterForTokenClassification,
           config, 0, m.positions(7), dict(cached=False, causal=False, half_table=True))


def lasr_layers(base):
    """A LASR (or GLM-ASR encoder) model class run on inputs_embeds: its encoder's blocks on
    them (the subsampler or convolutions, which read mel features, passed over), at positions
    0 .. S-1 as its encoder gives them, no mask; the same class name, so save_pretrained's
    config.json and weights are its own."""
    class Lasr(base):
        def forward(self, inputs_embeds=None, **kw):
            encoder = getattr(self, "encoder", self)
            h = inputs_embeds
            # (its arange(S)[None] given per row: the same table, [B, S, D] as pos.npy's rows)
            cos, sin = encoder.rotary_emb(h, torch.arange(h.shape[1]).repeat(h.shape[0], 1))
            for block in encoder.layers:
                h = block(h, attention_mask=None, position_embeddings=(cos, sin))
            return h

    Lasr.__name__ = Lasr.__qualname__ = base.__name__
    return Lasr


def lasr_cases():
    """LASR (MedASR): its conformer blocks' self-attention, Llama's without a causal mask, with
    attention_bias; LasrForCTC (encoder_config nested) and the encoder saved alone."""
    if not hasattr(transformers, "LasrForCTC"):
        return
    encoder = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                   intermediate_size=16, conv_kernel_size=3, subsampling_conv_channels=8,
                   num_mel_bins=16, attention_bias=True)
    opts = dict(cached=False, causal=False)
    class LasrCTCConfig(transformers.LasrCTCConfig):  # (write_case's embeddings: the encoder's)
        def get_text_config(self, *args, **kw):
            return self.encoder_config

    config = LasrCTCConfig(encoder_config=encoder, vocab_size=16, pad_token_id=0)
    yield ("lasr_ctc_bias", lasr_layers(transformers.LasrForCTC), config, 1, m.positions(0), opts)
    config = transformers.LasrEncoderConfig(**dict(encoder, attention_bias=False),
                                            rope_parameters={"rope_type": "default",
                                                             "rope_theta": 300.0})
    yield ("lasr_encoder", lasr_layers(transformers.LasrEncoder), config, 0, m.positions(0), opts)


def glmasr_encoder_case():
    """GLM-ASR's audio encoder saved alone (GlmAsrEncoder): Llama's attention without a causal
    mask, biases on q, v and o, rotate_half on the first half of each head (its default
    partial_rotary_factor 0.5), two key/value heads."""
    if not hasattr(transformers, "GlmAsrEncoder"):
        return
    config = transformers.GlmAsrEncoderConfig(hidden_size=32, num_attention_heads=4,
                                              num_key_value_heads=2, intermediate_size=16,
                                              num_hidden_layers=2, num_mel_bins=16)
    yield ("glmasr_encoder_partial", lasr_layers(transformers.GlmAsrEncoder), config, 1,
           m.positions(0), dict(cached=False, causal=False,
                                config_keys={"rope_parameters/partial_rotary_factor": None}))


def nemotron3_diarization_case():
    """Nemotron-3 diarization saved whole: its audio tower on inputs_embeds at the given
    position ids (its feature stacking passed over, as the tower takes inputs_embeds), whose
    layers' self-attention is Llama's without a causal mask, a bias on o_proj alone, the whole
    head rotated: Nemotron3DiarizationAudioConfig's partial_rotary_factor 1.0 (its
    __post_init__'s first setdefault; its second, 0.5, sets nothing), which config.json's
    rope_parameters then lack, as an older or hand-written one may; the same class name, so
    save_pretrained's config.json and weights are its own."""
    base = getattr(transformers, "Nemotron3DiarizationForAudioFrameClassification", None)
    if base is None:
        return

    class Nemotron3DiarizationForAudioFrameClassification(base):
        def forward(self, inputs_embeds=None, position_ids=None, **kw):
            return self.model.audio_tower(inputs_embeds=inputs_embeds, position_ids=position_ids)

    class Nemotron3DiarizationConfig(transformers.Nemotron3DiarizationConfig):
        def get_text_config(self, *args, **kw):  # (write_case's embeddings: the tower's)
            return self.audio_config

    config = Nemotron3DiarizationConfig(
        audio_config=dict(hidden_size=32, num_attention_heads=4, intermediate_size=16,
                          num_hidden_layers=2, num_mel_bins=16),
        head_config=dict(audio_hidden_size=32, hidden_size=16))
    yield ("nemotron3_diarization_default_factor",
           Nemotron3DiarizationForAudioFrameClassification, config, 1, m.positions(7),
           dict(cached=False, causal=False,
                config_keys={"audio_config/rope_parameters/partial_rotary_factor": None}))


def nemotron3_5_transcribe_cases():
    """Nemotron 3.5 Transcribe's speech recognition encoder and word timestamp encoder saved
    alone: Nemotron-3 diarization's attention with q and k LayerNormed per head (weight and bias
    shared by the heads) before RoPE; the first with its config class's rope (half of each head
    rotated), the second with rope_parameters of no partial_rotary_factor (all of it)."""
    module = getattr(transformers.models, "nemotron3_5_transcribe", None)
    if module is None:
        return
    from transformers.models.nemotron3_5_transcribe import modeling_nemotron3_5_transcribe as nm
    sizes = dict(hidden_size=32, num_attention_heads=4, intermediate_size=16, num_hidden_layers=2)

    def alone(config_cls):
        class Config(config_cls):  # (write_case's embeddings: its own)
            def get_text_config(self, *args, **kw):
                return self
        Config.__name__ = Config.__qualname__ = config_cls.__name__
        return Config

    config = alone(transformers.Nemotron3_5TranscribeAsrAudioConfig)(num_mel_bins=16, **sizes)
    yield ("nemotron3_5_transcribe_asr_audio_partial",
           lasr_layers(nm.Nemotron3_5TranscribeAsrAudioModel), config, 1, m.positions(0),
           dict(cached=False, causal=False))
    config = alone(transformers.Nemotron3_5TranscribeWordTimestampConfig)(
        vocab_size=16, blank_token_id=15,
        rope_parameters={"rope_type": "default", "rope_theta": 300.0}, **sizes)
    yield ("nemotron3_5_transcribe_word_timestamp",
           lasr_layers(nm.Nemotron3_5TranscribeWordTimestampModel), config, 0, m.positions(0),
           dict(cached=False, causal=False))


def audio_text_cases():
    """GLM-ASR (Llama's text model) and Music Flamingo (Qwen2's), each with a one-layer audio
    encoder beside it."""
    if not hasattr(transformers, "GlmAsrConfig"):
        return
    audio = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                 intermediate_size=16, num_hidden_layers=1, head_dim=8)
    config = transformers.GlmAsrConfig(text_config=transformers.LlamaConfig(**m.TINY).to_dict(),
                                       audio_config=audio)
    yield ("glmasr_text", transformers.GlmAsrForConditionalGeneration, config, 0,
           m.positions(7), {})
    if not hasattr(transformers, "MusicFlamingoConfig"):
        return
    config = transformers.MusicFlamingoConfig(
        text_config=transformers.Qwen2Config(**m.TINY).to_dict(),
        audio_config=dict(model_type="audioflamingo3_encoder", num_hidden_layers=1, d_model=32,
                          encoder_attention_heads=4, encoder_ffn_dim=16))
    yield ("musicflamingo_text", transformers.MusicFlamingoForConditionalGeneration, config, 0,
           m.positions(7), {})
