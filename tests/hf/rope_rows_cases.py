"""rope_rows_cases.py: make_hf_cases.py's cases of the eleventh session's rows: the encoders
of Llama's attention (EuroBERT, GTE, Nomic BERT, Jina Embeddings v3, ESMC: no causal
mask, case.json "causal" false, no y_cache.npy), Chameleon's text layer (q and k
LayerNormed per head, each head its own weight and bias) and scaled ropes over part of each
head (GLM-4, MiMo-V2-Flash), each written by make_hf_cases.write_case.

GTE's, Nomic BERT's and Jina's cases remove rope_parameters from the saved config.json
(config_keys: transformers reads the edited file as the config it saved), so that the
library's default rope_theta for the family (160000, 1000, 20000) is checked against the
config class's.
"""
import torch
import transformers

import make_hf_cases as m

ENCODER = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=16,
               vocab_size=16, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
               eos_token_id=2)
NO_ROPE = {"rope_parameters": None}


def encoder(name, family, model, layer=1, config_keys=None, **kw):
    """A case of transformers' <family>Config (its defaults, then kw) and `model`."""
    config_cls = getattr(transformers, family + "Config", None)
    model_cls = getattr(transformers, model, None)
    if config_cls is None or model_cls is None:
        print(f"{family} is not in this transformers: no {name} case")
        return None
    config = config_cls(**dict(ENCODER, **kw))
    return (name, model_cls, config, layer, m.positions(7),
            dict(cached=False, causal=False, config_keys=config_keys))


def esmc_by_embeds():
    """EsmcForMaskedLM taking inputs_embeds (its model reads input_ids only): the embedding
    module's output replaced by them; the same class name, so save_pretrained's config.json
    and weights are EsmcForMaskedLM's."""
    base = getattr(transformers, "EsmcForMaskedLM", None)
    if base is None:
        return None

    class EsmcForMaskedLM(base):
        def forward(self, inputs_embeds=None, **kw):
            ids = torch.zeros(inputs_embeds.shape[:2], dtype=torch.int64)
            hook = self.get_input_embeddings().register_forward_hook(
                lambda module, args, out: inputs_embeds)
            try:
                return super().forward(input_ids=ids, **kw)
            finally:
                hook.remove()

    return EsmcForMaskedLM


def chameleon():
    """ChameleonForConditionalGeneration with a tiny VQ-VAE beside its text layers (not run:
    inputs_embeds only), saved in BF16 to keep the file small."""
    vq = dict(embed_dim=4, num_embeddings=8, latent_channels=4, resolution=8, base_channels=32,
              channel_multiplier=[1], num_res_blocks=0)
    config = transformers.ChameleonConfig(**dict(m.TINY, num_key_value_heads=2, head_dim=None,
                                                 num_hidden_layers=2, attention_bias=True,
                                                 vq_config=vq, vocabulary_map={"<image>": 3}))
    return ("chameleon_qk_head_layernorm_bf16", transformers.ChameleonForConditionalGeneration,
            config, 1, m.positions(7), {"dtype": torch.bfloat16})


def rope_rows_cases():
    # EuroBERT: grouped key/value heads, biases, rope_theta 500
    yield encoder("eurobert_gqa_bias", "EuroBert", "EuroBertForMaskedLM",
                  num_key_value_heads=2, attention_bias=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    # GTE, Nomic BERT, Jina: each class's default rope_theta (rope_parameters removed)
    yield encoder("gte_default_theta", "Gte", "GteForMaskedLM", config_keys=NO_ROPE)
    yield encoder("nomic_bert_default_theta", "NomicBert", "NomicBertForMaskedLM",
                  config_keys=NO_ROPE)
    yield encoder("jina_embeddings_v3_default_theta", "JinaEmbeddingsV3",
                  "JinaEmbeddingsV3Model", layer=0, config_keys=NO_ROPE)
    # ESMC: q and k LayerNormed over the whole projection
    case = encoder("esmc_qk_layernorm", "Esmc", "EsmcForMaskedLM",
                   rope_parameters={"rope_type": "default", "rope_theta": 300.0})
    yield case and (case[0], esmc_by_embeds()) + case[2:]
    if hasattr(transformers, "ChameleonConfig"):
        yield chameleon()
    yield m.family("codegen_qvk_groups", "CodeGen",
                   dict(n_embd=64, n_head=8, rotary_dim=4, n_layer=1, n_inner=16, vocab_size=16,
                        n_positions=64), theta=None)
    yield from scaled_partial_cases()


def scaled_partial_cases():
    """A scaled rope over part of each head, where the family's rotary embedding reads
    partial_rotary_factor for every rope type: GLM-4's yarn over half of head_dim
    (interleaved), MiMo-V2-Flash's rope per layer type (yarn in the full layers, the
    sliding ones' default), each over half of head_dim."""
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
            "partial_rotary_factor": 0.5}
    yield m.family("glm4_yarn_partial", "Glm4", dict(m.TINY, head_dim=16), rope=yarn,
                   pos=m.positions(20))
    config_cls = getattr(transformers, "MiMoV2FlashConfig", None)
    if config_cls is None:
        return
    ropes = {"full_attention": dict(yarn, rope_theta=10000.0),
             "sliding_attention": {"rope_type": "default", "rope_theta": 500.0,
                                   "partial_rotary_factor": 0.5}}
    config = config_cls(**dict(m.TINY, head_dim=16, v_head_dim=8, num_hidden_layers=2,
                               layer_types=["full_attention", "sliding_attention"],
                               sliding_window=4, n_routed_experts=2, num_experts_per_tok=1,
                               moe_intermediate_size=8, mlp_layer_types=["dense", "dense"],
                               rope_parameters=ropes))
    for kind, layer in (("full", 0), ("sliding", 1)):
        yield (f"mimo_v2_flash_yarn_partial_{kind}", transformers.MiMoV2FlashForCausalLM, config,
               layer, m.positions(20), {"freqs": False})
