"""The twelfth session's encoder, audio and vision rows, for make_family_cases.py: what they
refuse, each with its message (their runs are checked against transformers itself:
tests/hf/encoder_audio_rows_cases.py).

  ultrabert  attention_windows (older checkpoints' windows per layer, which its config class
             turns into sliding_window and layer_types; null: transformers raises TypeError);
             rope_theta a number without rope_parameters (TypeError), or a list of bases per
             layer that leaves a layer type none (its list read: tests/hf's
             ultrabert_rope_theta_list)
  mimi, kyutai_speech_to_text, dinov3_vit, parakeet_ctc, wav2vec2-conformer, vjepa2,
  timesfm2_5, neucodec, pixtral (a vision tower alone) ...  audio and vision families whose attention ropeattn does not run: refused by
             name, each naming what it lacks
  unknown_nested  a model_type ropeattn does not know whose attention keys sit one level down
             (encoder_config): refused naming that key
  glmasr_encoder  a k_proj bias (GLM-ASR's encoder builds none); runs: tests/hf
  nemotron3_diarization(_audio)  v_proj of key/value heads other than the query heads (its
             v_proj has a row per query head); runs: tests/hf
  sam3_tracker_video_mask_decoder  a mask decoder saved alone
  pe_audio_encoder, pe_video_encoder, pe_audio_video_encoder  a missing k_norm (q and k always
             normed), a scaled rope over part of each head (transformers fails), a bias without
             attention_bias; run: tests/hf's pe_*_encoder*
  nemotron3_5_transcribe_asr_audio  a q/k LayerNorm without its bias (runs: tests/hf);
             nemotron3_5_transcribe_audio: two encoders (asr_config's, diarization_config's)
  lasr_ctc   its encoder_config read (runs: tests/hf's lasr_ctc_bias), its layers under
             encoder.layers.N: others refused naming the names looked for
"""
import numpy as np

from make_family_cases import B, S, f32, named, save, weights

RNG = np.random.default_rng(20261208)
DIM, H, K, D = 32, 4, 2, 8
BASE = {"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": K,
        "max_position_embeddings": 64}
ULTRABERT = dict(BASE, model_type="ultrabert", num_hidden_layers=2, sliding_window=2,
                 layer_types=["sliding_attention", "full_attention"])


def encoder_audio_rows_cases(out):
    x = f32(RNG.normal(0, 1, (B, S, DIM)))
    plain = named(weights(DIM, H, K, D), "model.layers.0.self_attn.")
    refusals = [
        ("ultrabert_attention_windows", dict(ULTRABERT, attention_windows=[2, 0]), plain,
         '"attention_windows" (a window per layer'),
        ("ultrabert_rope_theta", dict(ULTRABERT, rope_theta=50000.0), plain,
         '"rope_theta" is not a list: model_type "ultrabert"\'s config class zips it'),
        ("ultrabert_rope_theta_short", dict(ULTRABERT, rope_theta=[300.0]), plain,
         '"rope_theta" lists 1 bases, which give layer 1\'s kind "full_attention" none'),
        ("ultrabert_attention_windows_null", dict(ULTRABERT, attention_windows=None), plain,
         '"attention_windows" is null'),
        ("mimi", dict(BASE, model_type="mimi"), plain,
         'model_type "mimi" is refused: its attention layers sit in two stacks'),
        ("kyutai_speech_to_text", dict(BASE, model_type="kyutai_speech_to_text"), plain,
         'model_type "kyutai_speech_to_text" is refused: transformers\' full forward masks no '
         "window"),
        ("dinov3_vit", dict(BASE, model_type="dinov3_vit"), plain,
         'model_type "dinov3_vit" is refused: its 2-D RoPE'),
        ("parakeet_ctc", {"model_type": "parakeet_ctc", "encoder_config": BASE}, plain,
         'model_type "parakeet_ctc" is refused: its conformer self-attention adds relative'),
        ("wav2vec2_conformer", dict(BASE, model_type="wav2vec2-conformer"), plain,
         'model_type "wav2vec2-conformer" is refused: its conformer self-attention'),
        ("gradium_phonon_tts", dict(BASE, model_type="gradium_phonon_tts"), plain,
         'model_type "gradium_phonon_tts" is refused: its checkpoints keep q, k and v fused'),
        ("neucodec", dict(BASE, model_type="neucodec"), plain,
         'model_type "neucodec" is refused: its RoPE turns each head by the head\'s index'),
        ("pixtral", dict(BASE, model_type="pixtral"), plain,
         'model_type "pixtral" is refused: a vision tower saved alone'),
        ("vjepa2", dict(BASE, model_type="vjepa2"), plain,
         'model_type "vjepa2" is refused: its 3-D RoPE'),
        ("timesfm2_5", dict(BASE, model_type="timesfm2_5"), plain,
         'model_type "timesfm2_5" is refused: its attention scales each feature of q'),
        ("unknown_nested", {"model_type": "unknown_speech_ctc", "encoder_config": BASE}, plain,
         'model_type "unknown_speech_ctc" is not a family ropeattn knows, and its config '
         'describes attention ("encoder_config.num_attention_heads")'),
        ("lasr_ctc_names", {"model_type": "lasr_ctc", "encoder_config": BASE}, plain,
         'holds no attention weights under the names of model_type "lasr_ctc"'),
    ]
    # GLM-ASR's encoder: k_proj never biased; Nemotron-3 diarization's v_proj has a row per
    # query head (key/value heads other than them: transformers fails)
    glmasr = named(weights(DIM, H, H, D, biases="qkvo"), "layers.0.self_attn.")
    nemotron = named(weights(DIM, H, K, D, biases="o"), "layers.0.self_attn.")
    refusals += [
        ("glmasr_encoder_k_bias", dict(BASE, model_type="glmasr_encoder",
                                       num_key_value_heads=H), glmasr,
         "builds k_proj without a bias whatever the config says"),
        ("nemotron3_diarization_kv_heads", dict(BASE, model_type="nemotron3_diarization_audio"),
         nemotron, '"num_key_value_heads" is 2, not num_attention_heads (4)'),
    ]
    refusals.append(("sam3_tracker", dict(BASE, model_type="sam3_tracker"), plain,
                     'model_type "sam3_tracker" is refused: its only RoPE attention is its '
                     "vision encoder's ViT"))
    refusals.append(("sam3_tracker_video_mask_decoder",
                     dict(BASE, model_type="sam3_tracker_video_mask_decoder"), plain,
                     'model_type "sam3_tracker_video_mask_decoder" is refused: a part of a '
                     "composite model saved alone (a segmentation model's mask decoder)"))
    # Perception Encoder's encoders: q and k RMS-normed always; all of head_dim rotating
    # (a scaled rope's cos and sin of part of it: transformers fails); biases by attention_bias
    pe = dict(BASE, head_dim=D, rope_parameters={"rope_type": "default", "rope_theta": 300.0})
    pe_tensors = named(weights(DIM, H, K, D, biases="qkvo", norms="head"), "layers.0.self_attn.")
    refusals += [
        ("pe_audio_encoder_no_k_norm", dict(pe, model_type="pe_audio_encoder",
                                            attention_bias=True),
         {k: t for k, t in pe_tensors.items() if "k_norm" not in k},
         'model_type "pe_audio_encoder" always normalizes q and k'),
        ("pe_video_encoder_partial", dict(pe, model_type="pe_video_encoder", attention_bias=True,
                                          rope_parameters={"rope_type": "linear", "factor": 2.0,
                                                           "rope_theta": 300.0,
                                                           "partial_rotary_factor": 0.5}),
         pe_tensors, '"partial_rotary_factor" is 0.5 with rope type linear, and model_type '
         '"pe_video_encoder" rotates all of head_dim'),
        ("pe_audio_video_encoder_bias", dict(pe, model_type="pe_audio_video_encoder"),
         pe_tensors, "is a bias that transformers would not load"),
    ]
    # Nemotron 3.5 Transcribe: q and k LayerNormed with weight and bias (a missing bias: what
    # transformers would initialize); its audio model's two encoders
    n35 = named(weights(DIM, H, H, D, biases="o", norms="head"), "layers.0.self_attn.")
    n35["layers.0.self_attn.q_norm.bias"] = f32(RNG.normal(0, 0.1, D))
    refusals += [
        ("nemotron3_5_transcribe_asr_audio_k_norm_bias",
         dict(BASE, model_type="nemotron3_5_transcribe_asr_audio", num_key_value_heads=H), n35,
         "has no k_norm.bias beside 'layers.0.self_attn.q_proj.weight': model_type "
         '"nemotron3_5_transcribe_asr_audio" normalizes q and k by a LayerNorm with weight and '
         "bias"),
        ("nemotron3_5_transcribe_audio", {"model_type": "nemotron3_5_transcribe_audio",
                                          "asr_config": BASE}, plain,
         'model_type "nemotron3_5_transcribe_audio" is refused: its speech recognition encoder'),
    ]
    for name, config, tensors, refused in refusals:
        save(out, name, config, tensors, x, None, 0, refused=refused)
