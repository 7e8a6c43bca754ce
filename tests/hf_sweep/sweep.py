#!/usr/bin/env python3
"""sweep.py: `ropeattn attention` on a tiny checkpoint of every family that
list_families.py lists, against transformers' own layers.

    .venv-hf/bin/python tests/hf_sweep/sweep.py FAMILIES.json WORK_DIR CLI [MODEL_TYPE...]
                                                   [--update] [--expected FILE]
                                                            (make hf-sweep)

For each family: a model built by transformers from its config class with
shrunk sizes (tiny_config below: hidden 64, 2 layers, 4 heads of 16, 2
key/value heads, vocabulary 128, 4 experts; a composite model's vision or
audio parts shrunk too), random weights (tests/hf_e2e/models.py's), saved by
save_pretrained under WORK_DIR/<model_type>/ (kept for the next run while
its config and transformers' version are the same), and each layer's
attention module's input and output captured by a forward hook while the
whole model runs on 2 x 24 tokens (float32, eager), and torch autograd's
dL/dX and dL/dW of the module called again on those arguments, for
L = sum(Y * DY) with a random DY.  Then, per layer, the CLI on the
checkpoint folder with --grads (Y and the gradients) and with --prefill 12
(its KV cache; past a longrope's original length where the input is past
it: prefill_length), each compared within TOL of the largest |value| of
its tensor:

    runs      every layer's attention, forward, cached and its gradients,
              within TOL; a hybrid model's other layers (linear attention,
              Mamba, convolutions: hybrid_layers below), and layers that
              take their keys and values from an earlier one (Gemma 3n's
              KV sharing), refused by the CLI
    refused   the CLI exits non-zero (its message is recorded; the
              standard: it names what the library lacks)
    MISMATCH  the CLI exits 0 with an output off by more than TOL: the
              worst bug; the table gives the command that shows it
    no model  transformers could not build the tiny model (the sweep's
              config, not the library: the reason is recorded)

Writes WORK_DIR/summary.json and WORK_DIR/summary.md, prints the table,
compares each family's verdict with tests/hf_sweep/expected.tsv
(verdicts.py; --expected FILE names another) and exits 1 when any family
is a MISMATCH or crashes, or its verdict (or the gist of why) differs from
the expected one: a regression, a new family that runs, or a change of a
transformers release shows at once.  --update writes this run's verdicts
into the file instead (only the families swept, where MODEL_TYPEs are given).

--variant NAME (VARIANTS below: a rope type, the q/k/v biases, a partial
rotary factor) sweeps each family's tiny config with that change on its text
config; a family's verdict must be runs, refused or no model (transformers
cannot build it: the family's model ignores or rejects the key), never a
MISMATCH, and expected.tsv is not read.  Use its own WORK_DIR.
"""
import argparse
import copy
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import traceback

import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hf_e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
import families as e2e_families  # noqa: E402
import verdicts  # noqa: E402
import models  # noqa: E402
from make_hf_cases import attention_name, saved_grads, saved_prefix  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

TOL = 1e-4  # of max|y|
MAX_PARAMETERS = 4_000_000  # a bigger "tiny" model has a size the sweep did not shrink
BATCH, SEQ, PREFILL = 2, 24, 12
SAVED = "x y dy grads; others: KV-shared too"  # what save() writes (else remade)
# The text model's sizes, set where the config class has the key.
TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, intermediate_size=128, vocab_size=128, max_position_embeddings=256,
            bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
            # experts
            num_experts=4, num_local_experts=4, n_routed_experts=4, moe_num_experts=4,
            num_experts_per_tok=2, moe_topk=2, moe_k=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=32, shared_intermediate_size=32,
            intermediate_size_mlp=128, n_shared_experts=1, n_group=1, topk_group=1,
            first_k_dense_replace=1,
            # latent attention
            kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=16,
            # windows, chunks: shorter than SEQ
            sliding_window=8, attention_chunk_size=8,
            # linear attention and state-space layers
            linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
            linear_num_value_heads=4, mamba_d_state=16, mamba_n_heads=4, mamba_d_head=32,
            mamba_n_groups=1, mamba_expand=2, mamba_d_conv=4, mamba_chunk_size=16,
            hidden_size_per_layer_input=16, vocab_size_per_layer_input=128,
            laurel_rank=8, altup_num_inputs=2)
# Only where the class's default is not None (q_lora_rank None: DeepSeek-V2-Lite's q_proj).
TEXT_IF_SET = dict(q_lora_rank=24)
# Dots3NoteTextConfig's sliding layers' sizes (its swa_* keys; the latent sizes of TEXT).
DOTS3_SLIDING = dict(swa_num_attention_heads=4, swa_num_key_value_heads=4, swa_q_lora_rank=24,
                     swa_kv_lora_rank=16, swa_head_dim=16, swa_qk_nope_head_dim=8,
                     swa_v_head_dim=16)
# Keys a family's config class checks beyond the common ones (by the text
# config's model type).
# (cohere_compass_text: its rotary embedding reads rope_parameters by layer type, which the class's
# default, a flat dict, lacks.)
# (dots3_note_text: an index_topk of SEQ keeps every key, which ropeattn runs)
OVERRIDES = {"dots3_note_text": dict(num_key_value_heads=4, index_n_heads=2, index_head_dim=16,
                                     index_topk=SEQ, **DOTS3_SLIDING),
             "qwen4_exp_text": dict(indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=16,
                                    indexer_budget=24, indexer_compress_ratio=4, hc_lowrank=16),
             "zaya": dict(num_experts_per_tok=1),
             # (Moshi's sliding_window bounds only transformers' cache, not its mask: the
             # CLI refuses --prefill past it; its default keeps the sweep's 24 tokens within)
             "moshi": dict(ffn_dim=128, sliding_window=3000),
             "blt": dict(encoder_hash_byte_group_vocab=128),
             # DbrxConfig's own names, and DbrxAttention reads attn_config.rope_theta,
             # which DbrxAttentionConfig lacks (transformers 5.23)
             "dbrx": dict(d_model=64, n_heads=4, max_seq_len=256,
                          attn_config=dict(kv_n_heads=2, rope_theta=10000.0, clip_qkv=0.5),
                          ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2)),
             # its window is local_attention // 2, whatever sliding_window says
             "modernbert-decoder": dict(local_attention=16),
             "cohere_compass_text": dict(rope_parameters={
                 "full_attention": {"rope_type": "default", "rope_theta": 10000.0}})}
# Keys of a composite model's parts that OTHER does not shrink, by family.
OTHER_OVERRIDES = {
    # Dots3NoteVisionConfig: no experts (its default's 42 layers name 25 .. 41 sparse); the
    # adapters' widths: the vision tower's in, the text model's out
    "dots3_note": {"vision_config": dict(mlp_layer_types=["dense"], adapter_in_dim=32,
                                         adapter_out_dim=64),
                   "audio_config": dict(adapter_input_size=32, adapter_out_dim=64)},
    "phi4_multimodal": {"audio_config": dict(num_blocks=1, ext_pw_out_channel=32,
                                             depthwise_separable_out_channel=32,
                                             nemo_conv_channels=32)},
    "blt": {part: dict(hidden_size_global=32) for part in ("encoder_config", "decoder_config")}}
# Composite families whose other parts transformers cannot build here
# (Gemma 3n's vision tower needs timm and PIL): their text model alone,
# from the composite config's text_config.
TEXT_MODEL_ONLY = {"gemma3n"}
# Hybrid models: an attention layer beside another kind, where the class's
# defaults would leave the tiny model none (or cannot build it shrunk).
OVERRIDES.update({
    "bamba": dict(attn_layer_indices=[1]),
    "granitemoehybrid": dict(layer_types=["mamba", "attention"], position_embedding_type="rope",
                             attention_multiplier=0.2),
    "falcon_h1": dict(mamba_d_head=32, mamba_n_heads=4, mamba_d_ssm=128, key_multiplier=0.7),
    "lfm2_moe": dict(layer_types=["conv", "full_attention"], num_dense_layers=1),
    "lfm2": dict(layer_types=["conv", "full_attention"], num_hidden_layers=2),
    "recurrent_gemma": dict(block_types=["recurrent", "attention"]),
    "zamba2": dict(layers_block_type=["mamba", "hybrid"]),
    "bailing_hybrid": dict(n_group=1, topk_group=1, num_experts_per_tok=2),
})
# A composite model's other parts (vision, audio): the keys each has.
OTHER = dict(hidden_size=32, num_hidden_layers=1, depth=1, num_attention_heads=2, num_heads=2,
             intermediate_size=64, embed_dim=32, out_hidden_size=64, projection_dim=64,
             vision_output_dim=64, text_hidden_size=64, num_key_value_heads=2, head_dim=16,
             vocab_size=128)


SCALING_KEYS = ("factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
                "beta_slow", "short_factor", "long_factor", "low_freq_factor", "high_freq_factor",
                "mscale", "mscale_all_dim", "truncate")


def rope_variant(**change):
    """A text config's change of rope: change merged into each of its
    rope_parameters' dicts (one per layer type where they are nested), a
    new rope_type's in place of the old one's keys."""
    def apply(defaults, kw):
        rope = copy.deepcopy(kw.get("rope_parameters") or defaults.get("rope_parameters") or {})
        nested = [v for v in rope.values() if isinstance(v, dict)]
        for part in nested or [rope]:
            if "rope_type" in change:
                for key in SCALING_KEYS:
                    part.pop(key, None)
            part.update(change)
            part.setdefault("rope_theta", 10000.0)
        return dict(kw, rope_parameters=rope)
    return apply


def longrope_variant(defaults, kw):
    """longrope: a factor per rotary pair, past original_max_position_embeddings (16)."""
    head_dim = kw.get("head_dim", defaults.get("head_dim")) or (
        kw.get("hidden_size", defaults.get("hidden_size"))
        // kw.get("num_attention_heads", defaults.get("num_attention_heads")))
    rope = kw.get("rope_parameters") or defaults.get("rope_parameters") or {}
    parts = [v for v in rope.values() if isinstance(v, dict)] or [rope]
    partial = parts[0].get("partial_rotary_factor", defaults.get("partial_rotary_factor")) or 1.0
    pairs = int(head_dim * partial) // 2
    return rope_variant(rope_type="longrope", original_max_position_embeddings=16,
                        short_factor=[1.0 + 0.1 * i for i in range(pairs)],
                        long_factor=[1.5 + 0.3 * i for i in range(pairs)])(defaults, kw)


def keys_variant(**change):
    """Keys set where the text config's class has them."""
    return lambda defaults, kw: dict(kw, **{k: v for k, v in change.items() if k in defaults})


# --variant: a change of each family's text config (a key its class lacks is
# left out: that family then sweeps as it is).
VARIANTS = {
    "linear": rope_variant(rope_type="linear", factor=2.0),
    # (dynamic rescales past max_position_embeddings: 16 of the 24 tokens)
    "dynamic": lambda d, kw: dict(rope_variant(rope_type="dynamic", factor=2.0)(d, kw),
                                  max_position_embeddings=16),
    "yarn": rope_variant(rope_type="yarn", factor=4.0, original_max_position_embeddings=16),
    "yarn_mscale": rope_variant(rope_type="yarn", factor=4.0, original_max_position_embeddings=16,
                                mscale=0.8, mscale_all_dim=0.6, beta_fast=16.0, beta_slow=2.0),
    "llama3": rope_variant(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                           high_freq_factor=4.0, original_max_position_embeddings=16),
    "longrope": longrope_variant,
    "theta": rope_variant(rope_theta=500.0),
    "bias": keys_variant(attention_bias=True, use_bias=True, use_qkv_bias=True, qkv_bias=True,
                         bias=True, add_qkv_bias=True, attention_out_bias=True),
    "partial": lambda d, kw: rope_variant(partial_rotary_factor=0.5)(
        d, keys_variant(partial_rotary_factor=0.5)(d, kw)),
    # head_dim left to the config class (its default, or hidden_size / heads)
    "no_head_dim": lambda d, kw: {k: v for k, v in kw.items() if k != "head_dim"},
    "window": keys_variant(use_sliding_window=True, max_window_layers=1, sliding_window=8),
    "scales": keys_variant(query_pre_attn_scalar=20, attention_multiplier=0.3,
                           attn_logit_softcapping=3.0, logit_scale=0.3, clip_qkv=0.5,
                           attn_scale=0.5, floor_scale=4, attn_temperature_tuning=True),
}
VARIANT = None  # the name given to --variant


def stamp(model_type):
    """What a saved checkpoint depends on."""
    text = json.dumps([transformers.__version__, torch.__version__, models.SEED, SAVED,
                       tiny_kwargs_of(model_type)], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def e2e_family(model_type):
    """tests/hf_e2e's entry for the model type (its config is known to
    run), or None."""
    return next((f for f in e2e_families.FAMILIES
                 if f.model_type == model_type and f.name == model_type), None)


def shrink_layers(kw, default_layers, extra=0):
    """Per-layer lists (layer_types, no_rope_layers, ...) of the default
    config: each kind once, in order of first appearance; as many layers as
    the list with the most kinds (at least 2), and extra more, the lists
    padded by cycling."""
    lists = {k: v for k, v in kw.items()
             if isinstance(v, list) and len(v) == default_layers and default_layers > 2}
    kinds = {k: list(dict.fromkeys(json.dumps(x) for x in v)) for k, v in lists.items()}
    n = max([2] + [len(v) for v in kinds.values()]) + extra
    for key, values in kinds.items():
        kw[key] = [json.loads(values[i % len(values)]) for i in range(n)]
    return n


def shrunk(defaults, sizes, if_set=None):
    """sizes' keys that the config has (if_set's: where not None), over the
    config's own defaults."""
    kw = {}
    for key, value in sizes.items():
        if key in defaults:
            kw[key] = value
    for key, value in (if_set or {}).items():
        if defaults.get(key) is not None:
            kw[key] = value
    return kw


def text_kwargs(text_config):
    """The keys of a shrunk text config (from the class's defaults)."""
    defaults = text_config.to_dict()
    kw = shrunk(defaults, TEXT, TEXT_IF_SET)
    layers = defaults.get("num_hidden_layers", 2)
    lists = {k: copy.deepcopy(v) for k, v in defaults.items()
             if isinstance(v, list) and len(v) == layers}
    lists.update(kw)
    # KV sharing (Gemma 3n, 4): the last layer takes its keys and values
    # from the last earlier one of its kind, so every kind comes before it
    shared = 1 if defaults.get("num_kv_shared_layers") else 0
    kw["num_hidden_layers"] = shrink_layers(lists, layers, extra=shared)
    if shared:
        kw["num_kv_shared_layers"] = shared
    kw.update({k: v for k, v in lists.items() if k in defaults and isinstance(v, list)
               and k not in TEXT})
    if "kv_lora_rank" in defaults:  # latent attention: head_dim is the rotary part
        kw.update({k: v for k, v in dict(head_dim=8, qk_head_dim=16, num_key_value_heads=4).items()
                   if k in defaults})
    kw.update(OVERRIDES.get(text_config.model_type, {}))
    if defaults.get("sliding_window") is None:
        kw.pop("sliding_window", None)
    return kw


def tiny_kwargs_of(model_type):
    """{"text": kwargs, "<sub config key>": kwargs, "composite": bool}."""
    family = e2e_family(model_type)
    config = AutoConfig.for_model(model_type)
    text = config.get_text_config(decoder=True)
    if family is not None:
        out = {"text": family.config_kwargs()}
    else:
        out = {"text": text_kwargs(text)}
    if VARIANT is not None:
        out["text"] = VARIANTS[VARIANT](text.to_dict(), out["text"])
    parts = {}
    for key, sub in config.to_dict().items():
        # (only a dict's: a heterogeneous config raises on reading a per-layer key)
        sub_config = getattr(config, key, None) if isinstance(sub, dict) else None
        if hasattr(sub_config, "to_dict") and sub_config is not text:
            parts[key] = dict(shrunk(sub_config.to_dict(), OTHER),
                              **OTHER_OVERRIDES.get(model_type, {}).get(key, {}))
    if text is not config:
        out.update(parts)
        out["text_key"] = next(k for k in config.to_dict()
                               if getattr(config, k, None) is text)
    elif model_type in OTHER_OVERRIDES:  # a text model with parts of its own (BLT's
        out["text"] = dict(out["text"], **parts)  # encoder, Phi-4-multimodal's audio)
    return out


def make_config(model_type):
    """The tiny config: every dropout 0 (as models.make_config)."""
    kw = tiny_kwargs_of(model_type)
    if "text_key" in kw:
        parts = {k: v for k, v in kw.items() if k not in ("text", "text_key")}
        parts[kw["text_key"]] = dict(kw["text"], model_type=text_model_type(model_type))
        config = AutoConfig.for_model(model_type, **parts)
    else:
        config = AutoConfig.for_model(model_type, **kw["text"])
    for part in {id(config): config, id(config.get_text_config()): config.get_text_config()}.values():
        for key in list(part.to_dict()):
            if ("dropout" in key or key.endswith("pdrop")) and isinstance(getattr(part, key, None),
                                                                          float):
                setattr(part, key, 0.0)
    return config


def text_model_type(model_type):
    return AutoConfig.for_model(model_type).get_text_config(decoder=True).model_type


def save(model_type, path):
    """Builds, randomizes and saves the family's tiny model; writes
    x<L>.npy, y<L>.npy, dy<L>.npy and grads<L>.npz (layer_grads) of each
    attention layer beside it."""
    gen = torch.Generator().manual_seed(models.SEED)
    torch.manual_seed(models.SEED)
    config = make_config(model_type)
    if model_type in TEXT_MODEL_ONLY:
        config = config.get_text_config(decoder=True)
    with torch.device("meta"):
        size = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    if size > MAX_PARAMETERS:
        raise ValueError(f"{size} parameters: a size the sweep does not shrink")
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").float().eval()
    models.randomize(model, gen)
    model.save_pretrained(path)
    layers = config.get_text_config(decoder=True).num_hidden_layers
    seen, others = capture_layers(model, layers, models.prompt_ids(BATCH, SEQ))
    for layer, (name, args, kwargs, x, y) in seen.items():
        dy = torch.randn(y.shape, generator=gen)
        prefix = grads_prefix(path, model, layer, name)
        grads = layer_grads(model.get_submodule(name), args, kwargs, dy, prefix or name + ".")
        if prefix is None or not saved_as_named(path, grads):  # (HY V4's linear_gate ...)
            grads = saved_grads(model, grads)
        for name, value in (("x", x), ("y", y), ("dy", dy)):
            np.save(os.path.join(path, f"{name}{layer}.npy"), value.detach().float().numpy())
        np.savez(os.path.join(path, f"grads{layer}.npz"), **grads)
    return sorted(seen), others


def capture_layers(model, layers, ids):
    """({layer: (name, args, kwargs, x, y)} of each softmax-attention
    layer's call while the model runs on ids (no grad): the module's name
    and arguments, with its input hidden states x, and its output y; [the
    other layers])."""
    seen, others = {}, []
    handles = []
    for layer in range(layers):
        name = softmax_attention(model, layer)
        if name is None or getattr(model.get_submodule(name), "is_kv_shared_layer", False):
            # no softmax attention (linear, state space), or keys and values
            # another layer's (Gemma 3n's KV sharing: refused by name)
            others.append(layer)
            continue
        module = model.get_submodule(name)

        def hook(mod, args, kwargs, output, layer=layer, name=name):
            x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            y = output[0] if isinstance(output, tuple) else output
            seen[layer] = (name, args, dict(kwargs), x.detach(), y.detach())
        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return seen, others


# A module named as attention whose class is not softmax attention (MiniMax's
# lightning attention, Bailing's delta attention).
NOT_SOFTMAX = re.compile(r"Lightning|Delta|Linear|Mamba|RecurrentBlock|Conv|Rglru")


def softmax_attention(model, layer):
    """The module name of layer `layer`'s softmax attention, or None where
    the layer has none (a hybrid model's linear-attention, Mamba, recurrent
    or convolution layer): attention_name's, or a hybrid model's other
    names for it (RecurrentGemma's temporal_block, Zamba2's
    shared_transformer.self_attn), by the module's class."""
    try:
        names = [attention_name(model, layer)]
    except ValueError:
        pattern = re.compile(rf"(^|\.)layers\.{layer}\.(temporal_block|shared_transformer\.self_attn)$")
        names = [n for n, _ in model.named_modules() if pattern.search(n)]
    names = [n for n in names if type(model.get_submodule(n)).__name__.endswith("Attention")
             and not NOT_SOFTMAX.search(type(model.get_submodule(n)).__name__)]
    return names[0] if len(names) == 1 else None


def grads_prefix(path, model, layer, name):
    """The name the layer's attention weights have in the saved checkpoint
    (make_hf_cases.saved_prefix), or, where save_pretrained renames them
    past finding, the module's own (None: the gradients are renamed as
    save_pretrained renames the weights, saved_grads)."""
    try:
        return saved_prefix(path, model, layer)
    except ValueError:
        return None


def saved_as_named(path, grads):
    """Whether path's model.safetensors has a tensor of each name of grads
    (but x)."""
    with open(os.path.join(path, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    return all(k in header for k in grads if k != "x")


def layer_grads(module, args, kwargs, dy, prefix):
    """{"x": dL/dX, prefix + name: dL/dW of each parameter} (float32) of
    the attention module called again on its captured arguments, for
    L = sum(Y * dy), by torch autograd; a parameter the call leaves unused
    (no gradient) is left out."""
    kwargs = dict(kwargs)
    x = (kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]).clone()
    x.requires_grad_(True)
    if "hidden_states" in kwargs:
        kwargs["hidden_states"] = x
    else:
        args = (x,) + tuple(args[1:])
    names = [n for n, _ in module.named_parameters()]
    params = tuple(p for _, p in module.named_parameters())
    with torch.enable_grad():
        out = module(*args, **kwargs)
        y = out[0] if isinstance(out, tuple) else out
        found = torch.autograd.grad((y * dy).sum(), (x,) + params, allow_unused=True)
    grads = {"x": found[0]}
    grads.update({prefix + n: g for n, g in zip(names, found[1:]) if g is not None})
    return {k: g.detach().float().numpy() for k, g in grads.items()}


def checkpoint(model_type, work):
    """The family's folder and its attention layers, saved unless a
    checkpoint of the same stamp is there."""
    path = os.path.join(work, model_type)
    meta = os.path.join(path, "sweep.json")
    key = stamp(model_type)
    if os.path.exists(meta):
        with open(meta, encoding="utf-8") as f:
            saved = json.load(f)
        if saved.get("stamp") == key:
            return path, saved["layers"], saved["others"]
    subprocess.run(["rm", "-rf", path], check=True)
    layers, others = save(model_type, path)
    with open(meta, "w", encoding="utf-8") as f:
        json.dump({"stamp": key, "layers": layers, "others": others}, f)
    return path, layers, others


def prefill_length(path):
    """PREFILL, or past a longrope's original_max_position_embeddings where
    PREFILL is within it and the whole input past it: transformers' cached
    generation rotates each step by its own length (short factors up to the
    original length, long past it, keys kept as written), so the cache
    agrees with the no-cache Y only when every step is past it as the input
    is (the CLI refuses --prefill otherwise)."""
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config = config.get("text_config") or config
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type")) not in ("longrope", "su"):
        return PREFILL
    original = rope.get("original_max_position_embeddings",
                        config.get("original_max_position_embeddings"))
    return original + 1 if original is not None and PREFILL <= original < SEQ - 1 else PREFILL


def cli_command(cli, path, layer, prefill):
    """The CLI on layer `layer`: with --prefill, or else with --grads (Y and
    the gradients of L = sum(Y * DY) in one run)."""
    cmd = [cli, "attention", "--weights", path, "--input", os.path.join(path, f"x{layer}.npy"),
           "--output", os.path.join(path, f"got{layer}.npy"), "--layer", str(layer),
           "--threads", "1", "--quiet"]
    if prefill:
        return cmd + ["--prefill", str(prefill_length(path))]
    return cmd + ["--grad-output", os.path.join(path, f"dy{layer}.npy"),
                  "--grads", os.path.join(path, f"got_grads{layer}.safetensors")]


def relative_error(got, want):
    """max|got - want| / max|want| (inf for a shape that differs or a value
    that is not finite)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.isfinite(got).all():
        return float("inf")
    return float(np.abs(got - want).max()) / (float(np.abs(want).max()) or 1.0)


def saved_names(want, got):
    """want (torch's gradients by parameter name) by the names the
    checkpoint saves, where transformers renames a tensor on load (Flint's
    softmax_offset is its module's sinks): a name the CLI lacks takes the
    one name under the same module that only the CLI has, of its shape, else
    the one such name of a sibling module's tensor of its kind (LFM3's
    g_proj.weight saved as gate_proj.weight)."""
    out = {}
    for k, w in want.items():
        if k in got or "." not in k:
            out[k] = w
            continue
        module, leaf = k.rsplit(".", 1)
        parent = module.rsplit(".", 1)[0] + "." if "." in module else ""
        only_cli = [g for g in got if g not in want and got[g].shape == w.shape]
        spare = [g for g in only_cli if g.rsplit(".", 1)[0] == module]
        if not spare:
            spare = [g for g in only_cli if g.startswith(parent) and g.endswith("." + leaf)
                     and g[len(parent):].count(".") == 1]
        out[spare[0] if len(spare) == 1 else k] = w
    return out


def grads_error(path, layer):
    """(worst relative error, its tensor's name) of the CLI's gradients
    against torch's; a tensor torch has and the CLI lacks is an infinite
    error, one the CLI adds must be all zeros (a weight the layer does not
    use: torch gives it no gradient)."""
    got = load_file(os.path.join(path, f"got_grads{layer}.safetensors"))
    want = saved_names(dict(np.load(os.path.join(path, f"grads{layer}.npz"))), got)
    # A gradient that is zero in exact arithmetic (k_proj's bias in a layer
    # without RoPE: q . b is the same for every key) is float32's rounding
    # on both sides: it is judged against the layer's largest gradient.
    largest = max(float(np.abs(w).max()) for w in want.values())
    errors = [(relative_error(got[k], w) if k not in got or np.abs(w).max() > 1e-5 * largest
               else float(np.abs(got[k] - w).max()) / largest if got[k].shape == w.shape
               else float("inf"), k)
              for k, w in want.items()]
    errors += [(float(np.abs(g).max()), k) for k, g in got.items() if k not in want]
    return max(errors)


def check_layer(cli, path, layer, prefill):
    """(status, detail): runs, refused, MISMATCH or crash, of Y (and,
    without prefill, of the gradients)."""
    cmd = cli_command(cli, path, layer, prefill)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode < 0 or run.returncode > 1:
        return "CRASH", f"exit {run.returncode}: {run.stderr.strip()[-300:]}; {shlex.join(cmd)}"
    if run.returncode != 0:
        message = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "exit 1"
        return "refused", message.replace(path + os.sep, "").replace("ropeattn: ", "", 1)
    err = relative_error(np.load(os.path.join(path, f"got{layer}.npy")),
                         np.load(os.path.join(path, f"y{layer}.npy")))
    if err > TOL:
        return "MISMATCH", f"max|got - want| / max|y| = {err:.3g}; {shlex.join(cmd)}"
    if not prefill:
        grad_err, name = grads_error(path, layer)
        if grad_err > TOL:
            return "MISMATCH", (f"gradient {name}: max|got - want| / max|want| = {grad_err:.3g};"
                                f" {shlex.join(cmd)}")
        err = max(err, grad_err)
    return "runs", f"{err:.2g}"


def check_other_layer(cli, path, layer, attention_layer):
    """(status, detail) of a layer that is not softmax attention: refused
    (its message), or MISMATCH where the CLI runs it (on an attention
    layer's input), or CRASH."""
    cmd = cli_command(cli, path, attention_layer, False)
    cmd[cmd.index("--layer") + 1] = str(layer)
    cmd[cmd.index("--output") + 1] = os.path.join(path, f"got{layer}.npy")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode < 0 or run.returncode > 1:
        return "CRASH", f"exit {run.returncode}: {run.stderr.strip()[-300:]}; {shlex.join(cmd)}"
    if run.returncode == 0:
        return "MISMATCH", f"layer {layer} is not softmax attention and ran; {shlex.join(cmd)}"
    message = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "exit 1"
    return "refused", message.replace(path + os.sep, "").replace("ropeattn: ", "", 1)


def hybrid_layers(cli, path, layers, others):
    """The results of a hybrid model's layers that are not softmax
    attention: each must be refused."""
    return [dict(zip(("status", "detail"), check_other_layer(cli, path, layer, layers[0])),
                 layer=layer, prefill=False, other=True) for layer in others]


def verdict(results):
    """(status, detail) of a family from its layers' results: the worst
    attention layer's; a hybrid's other layers count only where one ran or
    crashed (their refusal is what is wanted)."""
    attention = [r for r in results if not r.get("other")]
    bad = [r for r in results if r.get("other") and r["status"] != "refused"]
    worst = next((r for s in ("MISMATCH", "CRASH", "refused") for r in bad + attention
                  if r["status"] == s), None)
    if worst:
        return worst["status"], worst["detail"]
    return "runs", max(float(r["detail"]) for r in attention)


def sweep_family(model_type, work, cli):
    """{"model_type", "status", "detail", "layers": [...]} of one family."""
    try:
        path, layers, others = checkpoint(model_type, work)
    except Exception as err:  # the sweep's tiny config, not the library
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        return {"model_type": model_type, "status": "no model", "detail": " ".join(last.split())[:300]}
    if not layers:
        return {"model_type": model_type, "status": "no model",
                "detail": "no attention module found by name"}
    results = []
    for layer in layers:
        for prefill in (False, True):
            status, detail = check_layer(cli, path, layer, prefill)
            results.append({"layer": layer, "prefill": prefill, "status": status,
                            "detail": detail})
    results += hybrid_layers(cli, path, layers, others)
    status, detail = verdict(results)
    return {"model_type": model_type, "status": status, "detail": detail, "layers": results}


def table(rows, version):
    listed = len(rows)
    counts = {s: sum(r["status"] == s for r in rows)
              for s in ("runs", "refused", "MISMATCH", "CRASH", "no model")}
    lines = [f"# `ropeattn attention` on tiny checkpoints of transformers {version}'s RoPE families",
             "", f"{counts['runs']} of {listed} listed families run "
             f"({100.0 * counts['runs'] / max(listed, 1):.0f}%); "
             + ", ".join(f"{v} {k}" for k, v in counts.items() if k != "runs"), "",
             "| family | result | detail |", "|---|---|---|"]
    for r in rows:
        detail = r["detail"] if r["status"] != "runs" else f"max err {r['detail']:.2g} of max|y|"
        lines.append(f"| {r['model_type']} | {r['status']} | {str(detail).replace('|', '/')} |")
    lines += ["", "| refusals | reason (model types elided) |", "|---|---|"]
    for reason, n in refusal_reasons(rows):
        lines.append(f"| {n} | {reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n", counts


def refusal_reasons(rows):
    """[(reason, count)] of the refused families, the commonest first."""
    reasons = {}
    for r in rows:
        if r["status"] == "refused":
            reason = re.sub(r'model_type "[^"]+"', 'model_type "..."', r["detail"])
            reasons[reason] = reasons.get(reason, 0) + 1
    return sorted(reasons.items(), key=lambda item: (-item[1], item[0]))


def compare_verdicts(rows, version, expected_path, complete, update):
    """The families' verdicts against expected_path's (verdicts.py): the
    lines that differ (printed), or, with update, none (the file then
    records this run's verdicts, a MISMATCH or crash left as it was).
    complete: every listed family was swept."""
    got = {r["model_type"]: (r["status"], verdicts.gist(r["status"], r["detail"]))
           for r in rows if r["status"] in verdicts.VERDICTS}
    old_version, expected = (verdicts.read(expected_path) if os.path.exists(expected_path)
                             else (None, {}))
    if update:
        kept = {t: v for t, v in expected.items()
                if not complete or any(r["model_type"] == t for r in rows)}
        verdicts.write(version, {**kept, **got}, expected_path)
        print(f"{expected_path}: {len(got)} verdicts written")
        return []
    lines = verdicts.differences(expected, got,
                                 {r["model_type"] for r in rows} if complete else None)
    if lines:
        print(f"\n{len(lines)} verdicts differ from {expected_path} (transformers {old_version}; "
              f"this run {version}); where the change is meant, `--update` records it:")
        print("\n".join("  " + line for line in lines))
    return lines


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s FAMILIES.json WORK_DIR CLI [MODEL_TYPE...] "
                                     "[--update] [--expected FILE]")
    parser.add_argument("families")
    parser.add_argument("work")
    parser.add_argument("cli")
    parser.add_argument("model_types", nargs="*")
    parser.add_argument("--expected", default=verdicts.PATH,
                        help="the expected verdicts (default: %(default)s)")
    parser.add_argument("--update", action="store_true",
                        help="write this run's verdicts into the expected ones")
    parser.add_argument("--variant", choices=sorted(VARIANTS),
                        help="sweep each family with this change of its config")
    return parser.parse_args(argv[1:])


def main(argv):
    global VARIANT
    args = parse_args(argv)
    VARIANT = args.variant
    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    with open(args.families, encoding="utf-8") as f:
        listed = json.load(f)
    work, cli = os.path.abspath(args.work), os.path.abspath(args.cli)
    os.makedirs(work, exist_ok=True)
    wanted = set(args.model_types)
    unknown = wanted - {e["model_type"] for e in listed["families"]}
    if unknown:
        sys.exit(f"sweep.py: not in {args.families}: {', '.join(sorted(unknown))}")
    rows = []
    for entry in listed["families"]:
        if wanted and entry["model_type"] not in wanted:
            continue
        row = sweep_family(entry["model_type"], work, cli)
        print(f"{row['model_type']}: {row['status']}: {str(row['detail'])[:200]}", flush=True)
        rows.append(row)
    text, counts = table(rows, listed["transformers"])
    with open(os.path.join(work, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1, sort_keys=True)
    with open(os.path.join(work, "summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    sys.stdout.write(text)
    differ = (compare_verdicts(rows, listed["transformers"], args.expected, not wanted, args.update)
              if VARIANT is None else [])
    sys.exit(1 if counts["MISMATCH"] or counts["CRASH"] or differ else 0)


if __name__ == "__main__":
    main(sys.argv)
