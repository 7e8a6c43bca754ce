"""The family table of the end-to-end suite: one tiny random config per
family of docs/FAMILIES.md's table that transformers has a
causal-LM class for.  Adding a family is one entry of FAMILIES.

The multimodal families that transformers 5.23 builds only as
...ForConditionalGeneration (qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_vl_moe,
mistral3, gemma3, llama4) are here with a tiny vision tower (Family.vision)
and run on text-only prompts: COMMON and the entry's keys are their
text_config.  Not here: internlm2, baichuan, chatglm, kimi_k2 and qwen,
which are not in transformers (remote code).

Every config starts from COMMON (hidden 64, 2 layers, 4 heads of 16, 2
key/value heads, vocabulary 128) and the entry's keys replace or add to it.
Windows (8 tokens), chunks (8) and soft-caps are small enough that the
suite's sequences (24 to 44 tokens) run past them, so a mask the backend got
wrong changes the numbers.
"""
from dataclasses import dataclass, field

# Token ids inside the vocabulary (the classes' defaults are a real
# tokenizer's, beyond 128); generation runs a fixed number of tokens.
COMMON = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, intermediate_size=128, vocab_size=128, max_position_embeddings=256,
              bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)

SLIDING_FULL = ["sliding_attention", "full_attention"]
WINDOW = 8
MOE = dict(num_local_experts=4, num_experts_per_tok=2)
# M-RoPE: sections of the 8 frequencies of head_dim 16 (temporal, height,
# width); text-only prompts give the three the same positions, which
# the model computes from input_ids itself (get_rope_index).  Qwen3-VL's
# interleaved sections take pairs 1, 4, .. (height) and 2, 5, .. (width):
# 3 * section <= 8 each (the library refuses more, which transformers cuts)
MROPE = dict(rope_type="default", rope_theta=10000.0, mrope_section=[2, 3, 3])
MROPE_INTERLEAVED = dict(MROPE, mrope_section=[4, 2, 2], mrope_interleaved=True)
# the vision towers: one layer, never run (no images)
QWEN_VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64)
VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)


@dataclass
class Family:
    """name: the test id; model_type: transformers' config.model_type.
    config: keys over COMMON (None removes a key of COMMON).  refuses: a
    pattern of the message with which the backend refuses the family at load
    time (test_refusals asserts it; None: the family runs, and every test
    runs it).  cli: whether `ropeattn attention` runs its layers (the
    families table: "runs: yes").  xfail: test function name -> the known bug that
    fails it (conftest marks it xfail, strict: it fails once the bug is
    fixed, and the entry goes).  vision: None, or the vision_config of a
    multimodal family (...ForConditionalGeneration), whose text_config is
    then COMMON and config."""
    name: str
    model_type: str
    config: dict = field(default_factory=dict)
    refuses: str | None = None
    cli: bool = True
    xfail: dict = field(default_factory=dict)
    vision: dict | None = None

    def config_kwargs(self):
        kw = dict(COMMON)
        for key, value in self.config.items():
            if value is None:
                kw.pop(key, None)
            else:
                kw[key] = value
        return kw


FAMILIES = [
    Family("llama", "llama", dict(rope_parameters=dict(
        rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
        high_freq_factor=4.0, original_max_position_embeddings=64))),
    Family("mistral", "mistral", dict(sliding_window=WINDOW)),
    Family("mixtral", "mixtral", dict(sliding_window=WINDOW, **MOE)),
    Family("ministral", "ministral", dict(sliding_window=WINDOW, layer_types=SLIDING_FULL)),
    Family("qwen2", "qwen2", dict(use_sliding_window=True, sliding_window=WINDOW,
                                  max_window_layers=1)),
    Family("qwen2_moe", "qwen2_moe", dict(num_experts=4, num_experts_per_tok=2,
                                          moe_intermediate_size=32,
                                          shared_expert_intermediate_size=64)),
    Family("starcoder2", "starcoder2", dict(sliding_window=WINDOW)),
    Family("qwen3", "qwen3", dict(use_sliding_window=True, sliding_window=WINDOW,
                                  max_window_layers=1, rope_parameters=dict(
                                      rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                      original_max_position_embeddings=64))),
    Family("qwen3_moe", "qwen3_moe", dict(num_experts=4, num_experts_per_tok=2,
                                          moe_intermediate_size=32)),
    Family("gemma", "gemma"),
    Family("stablelm", "stablelm", dict(partial_rotary_factor=0.25, use_qkv_bias=True,
                                        qk_layernorm=True, head_dim=None)),
    Family("granite", "granite", dict(rope_parameters=dict(rope_type="linear", rope_theta=10000.0,
                                                           factor=2.0),
                                      attention_multiplier=0.3, embedding_multiplier=2.0,
                                      residual_multiplier=0.5, logits_scaling=2.0)),
    Family("granitemoe", "granitemoe", dict(attention_multiplier=0.3, **MOE)),
    Family("granitemoeshared", "granitemoeshared", dict(attention_multiplier=0.3,
                                                        shared_intermediate_size=64, **MOE)),
    Family("gemma2", "gemma2", dict(sliding_window=WINDOW, layer_types=SLIDING_FULL,
                                    attn_logit_softcapping=5.0, final_logit_softcapping=30.0,
                                    query_pre_attn_scalar=16)),
    Family("gemma3_text", "gemma3_text", dict(sliding_window=WINDOW, layer_types=SLIDING_FULL,
                                              query_pre_attn_scalar=16)),
    Family("olmo", "olmo", dict(clip_qkv=2.0)),
    # dynamic: generation runs past max_position_embeddings (12 + 32 > 32)
    Family("olmo2", "olmo2", dict(max_position_embeddings=32, rope_parameters=dict(
        rope_type="dynamic", rope_theta=10000.0, factor=2.0))),
    Family("olmo3", "olmo3", dict(sliding_window=WINDOW, layer_types=SLIDING_FULL)),
    Family("smollm3", "smollm3", dict(no_rope_layers=[1, 0])),
    Family("cohere", "cohere", dict(use_qk_norm=True, logit_scale=0.5)),
    Family("glm", "glm", dict(partial_rotary_factor=0.5)),
    Family("glm4", "glm4", dict(partial_rotary_factor=0.5)),
    Family("phi", "phi", dict(partial_rotary_factor=0.5, head_dim=None)),
    # longrope: past original_max_position_embeddings, the long factors
    Family("phi3", "phi3", dict(sliding_window=WINDOW, head_dim=None, max_position_embeddings=64,
                                original_max_position_embeddings=16, rope_parameters=dict(
                                    rope_type="longrope", rope_theta=10000.0,
                                    short_factor=[1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0],
                                    long_factor=[1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 16.0],
                                    original_max_position_embeddings=16))),
    Family("gpt_oss", "gpt_oss", dict(sliding_window=WINDOW, layer_types=SLIDING_FULL, **MOE,
                                      rope_parameters=dict(
                                          rope_type="yarn", rope_theta=150000.0, factor=4.0,
                                          beta_fast=32.0, beta_slow=1.0, truncate=False,
                                          original_max_position_embeddings=64))),
    Family("llama4_text", "llama4_text", dict(attention_chunk_size=WINDOW, no_rope_layers=[1, 0],
                                              layer_types=["chunked_attention", "full_attention"],
                                              floor_scale=4, attn_scale=0.5,
                                              intermediate_size_mlp=128, num_local_experts=4,
                                              num_experts_per_tok=1)),
    # multimodal (...ForConditionalGeneration), text-only prompts
    Family("qwen2_vl", "qwen2_vl", dict(rope_parameters=MROPE),
           vision=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2)),
    Family("qwen2_5_vl", "qwen2_5_vl", dict(rope_parameters=MROPE),
           vision=dict(QWEN_VISION, fullatt_block_indexes=[0])),
    Family("qwen3_vl", "qwen3_vl", dict(rope_parameters=MROPE_INTERLEAVED),
           vision=dict(QWEN_VISION, deepstack_visual_indexes=[0])),
    Family("qwen3_vl_moe", "qwen3_vl_moe", dict(rope_parameters=MROPE_INTERLEAVED,
                                                num_experts=4, num_experts_per_tok=2,
                                                moe_intermediate_size=32),
           vision=dict(QWEN_VISION, deepstack_visual_indexes=[0])),
    # Gemma 3's image tokens attend bidirectionally (token_type_ids): with
    # no images, its masks are the text model's
    Family("gemma3", "gemma3", dict(sliding_window=WINDOW, layer_types=SLIDING_FULL,
                                    query_pre_attn_scalar=16),
           vision=dict(VISION, image_size=28, patch_size=14)),
    Family("llama4", "llama4", dict(attention_chunk_size=WINDOW, no_rope_layers=[1, 0],
                                    layer_types=["chunked_attention", "full_attention"],
                                    floor_scale=4, attn_scale=0.5, intermediate_size_mlp=128,
                                    num_local_experts=4, num_experts_per_tok=1),
           vision=dict(VISION, image_size=28, patch_size=14, vision_output_dim=32,
                       projector_input_dim=32, projector_output_dim=32)),
    Family("deepseek_v2", "deepseek_v2", dict(
        num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None, qk_nope_head_dim=8,
        qk_rope_head_dim=8, v_head_dim=12, head_dim=None, moe_intermediate_size=16,
        n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
        n_group=1, topk_group=1)),
    Family("deepseek_v3", "deepseek_v3", dict(
        num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=8,
        qk_rope_head_dim=8, v_head_dim=12, head_dim=None, moe_intermediate_size=16,
        n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
        n_group=1, topk_group=1, attention_bias=True)),
    Family("gpt_neox", "gpt_neox", dict(rotary_pct=0.25, head_dim=None,
                                        num_key_value_heads=None)),
    # docs/FAMILIES.md: refused by the CLI (cohere2: RoPE-less full layers;
    # persimmon: no loader; qwen3_next: gated and linear attention); the
    # backend runs only their attention cores, the rest stays transformers'
    Family("cohere2", "cohere2", dict(sliding_window=WINDOW, layer_types=SLIDING_FULL), cli=False),
    Family("persimmon", "persimmon", dict(head_dim=None, num_key_value_heads=None), cli=False),
    Family("qwen3_next", "qwen3_next", dict(
        layer_types=["linear_attention", "full_attention"], linear_key_head_dim=16,
        linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        shared_expert_intermediate_size=32), cli=False),
    # transformers' Falcon and GPT-J pick an attention class by name, not
    # through AttentionInterface: the backend cannot run them
    Family("falcon", "falcon", dict(head_dim=None, num_key_value_heads=None),
           refuses="Falcon"),
    Family("falcon_gqa", "falcon", dict(new_decoder_architecture=True, num_kv_heads=2,
                                        head_dim=None, num_key_value_heads=None),
           refuses="Falcon"),
    Family("gptj", "gptj", dict(rotary_dim=8, head_dim=None, num_key_value_heads=None),
           refuses="GPTJ"),
    Family("mistral3", "mistral3", dict(sliding_window=WINDOW),
           vision=dict(VISION, head_dim=16)),
]


def names(families):
    """pytest ids of a list of families."""
    return [f.name for f in families]
