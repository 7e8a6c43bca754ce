#!/usr/bin/env python3
"""list_families.py: transformers' decoder model types whose attention is
softmax attention with rotary embeddings, and what each one's attention needs.

    .venv-hf/bin/python tests/hf_sweep/list_families.py [OUT.json]
                                          (make hf-families; default stdout)

A model type is listed when transformers has a causal-LM class for it
(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) and the modeling source of its decoder
(the causal-LM class's module; a composite model's: its text_config's model
type's) defines apply_rotary_pos_emb or a ...RotaryEmbedding class and runs a
softmax (eager_attention_forward or a softmax call).  What each needs is read
from the config class's defaults (its text config's, for composite models)
and from the source of the attention classes that apply the rotary
embedding: a heuristic summary, for people and for the sweep's sizes, not a
specification; the sweep (sweep.py) is what checks a family.

The output is deterministic: sorted by model type, keys sorted.
"""
import inspect
import json
import os
import re
import sys

import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                    MODEL_MAPPING_NAMES)

ROPE_SOURCE = re.compile(r"def apply_rotary_pos_emb|class \w*RotaryEmbedding\b")
SOFTMAX = re.compile(r"def eager_attention_forward|softmax\(")
QK_NORM = re.compile(r"self\.(q_norm|k_norm|q_layernorm|k_layernorm|query_layernorm|key_layernorm"
                     r"|q_ln|k_ln)\b")
FUSED_QKV = ("qkv_proj", "query_key_value", "Wqkv", "W_pack", "c_attn", "qkv")
# config keys (of the text config) copied as they are, grouped by feature
CONFIG_FEATURES = {
    "partial_rotary": ("partial_rotary_factor", "rotary_pct", "rotary_dim", "rotary_emb_base"),
    "bias": ("attention_bias", "attention_out_bias", "use_qkv_bias", "qkv_bias", "bias",
             "add_qkv_bias", "use_bias", "add_bias_linear"),
    "window": ("sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern",
               "layer_types"),
    "softcap": ("attn_logit_softcapping",),
    "chunks": ("attention_chunk_size",),
    "mla": ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"),
    "nope": ("no_rope_layers", "no_rope_layer_interval", "nope_layer_interval", "use_rope"),
    "kv_sharing": ("num_kv_shared_layers",),
    "gating": ("attn_output_gate", "headwise_attn_output_gate", "use_attn_gate"),
    "scaling": ("query_pre_attn_scalar", "attention_multiplier", "attn_scale", "floor_scale",
                "logit_scale", "clip_qkv", "attn_temperature_tuning", "attention_scale"),
    "moe": ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"),
}


def class_source(name):
    """The source of the module that defines transformers.<name>."""
    cls = getattr(transformers, name)
    return open(inspect.getsourcefile(cls), encoding="utf-8").read()


def first_name(names):
    """A mapping's value is a class name or a tuple of them."""
    return names[0] if isinstance(names, (tuple, list)) else names


def text_config_of(config):
    """A composite config's text config (its decoder's), else config."""
    text = config.get_text_config(decoder=True)
    return text if text is not None else config


def decoder_source(model_type, text_type):
    """The source of the module holding the decoder's attention."""
    source = class_source(first_name(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]))
    if text_type != model_type and ROPE_SOURCE.search(source) is None:
        name = MODEL_MAPPING_NAMES.get(text_type) or MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(text_type)
        if name:
            source = class_source(first_name(name))
    return source


def classes(source):
    """{class name: its source} of the module's top-level classes."""
    parts = re.split(r"(?m)^class ", source)[1:]
    return {re.match(r"\w+", p).group(0): p for p in parts}


def rope_attention(source):
    """The top-level classes that apply the rotary embedding and look like
    attention modules (vision towers' too: their names hold Vision/Visual/
    Patch/Audio, and they are dropped when a text one is there)."""
    found = {n: s for n, s in classes(source).items()
             if "Attention" in n and re.search(r"apply_rotary\w*\(|rotary_emb\(|rope\w*\(", s)}
    text = {n: s for n, s in found.items()
            if not re.search(r"Vision|Visual|Patch|Audio|Encoder|Speech|Image|Depth", n)}
    return text or found


def layout(source):
    """half (rotate_half: pairs (i, i + d/2)) or interleaved (pairs (2i, 2i+1))."""
    if re.search(r"view_as_complex|x\[\.\.\., ::2\]|x\[:, :, :, ::2\]|repeat_interleave\(2", source):
        return "interleaved"
    return "half"


def qk_norm(attention):
    """Where q/k norms sit in the attention forward: before or after the
    rotary embedding, per head (a head_dim norm) or over the whole
    projection; None without."""
    init = [line for line in attention.splitlines() if QK_NORM.search(line) and "=" in line
            and "Norm" in line.split("=", 1)[1]]
    if not init:
        return None
    forward = attention[attention.find("def forward"):]
    use = re.search(r"self\.(q_norm|q_layernorm|query_layernorm|q_ln|k_norm|k_layernorm|"
                    r"key_layernorm|k_ln)\(", forward)
    rope = re.search(r"apply_rotary\w*\(|rotary_emb\(", forward)
    where = None
    if use and rope:
        where = "before_rope" if use.start() < rope.start() else "after_rope"
    whole = any(re.search(r"num_(attention_|key_value_)?heads\s*\*|hidden_size|num_heads_per", line)
                for line in init)
    return {"where": where, "scope": "whole" if whole else "per_head"}


def rope_condition(attention):
    """The `if` that guards the rotary embedding's call, when there is one
    (Cohere 2's sliding layers only, Llama 4's use_rope, ...): RoPE on some
    layers only."""
    lines = attention.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"= apply_rotary\w*\(", line) and i > 0:
            before = lines[i - 1].strip()
            if before.startswith("if "):
                return before.rstrip(":")
    return None


def output_gate(attention):
    """Where the sigmoid gate on the attention output comes from: its own
    projection's name (g_proj, gate_proj ...: a gate per head or per
    feature), or "q_proj" (gate rows beside the query's, Qwen3-Next's);
    None without a gate."""
    if not re.search(r"sigmoid\(|\.sigmoid\b", attention):
        return None
    own = re.search(r"self\.(\w*(?:gate|g)_proj)\s*=", attention)
    return own.group(1) if own else "q_proj"


def code_features(source, attention):
    both = "\n".join(attention.values())
    features = {}
    fused = sorted(n for n in FUSED_QKV if re.search(rf"self\.{n}\s*=", both))
    if fused:
        features["fused_qkv"] = fused
    norms = sorted({json.dumps(qk_norm(s), sort_keys=True) for s in attention.values()} - {"null"})
    if norms:
        features["qk_norm"] = [json.loads(n) for n in norms]
    conditions = sorted({c for c in map(rope_condition, attention.values()) if c})
    if conditions:
        features["rope_if"] = conditions
    if re.search(r"self\.sinks\b", both):
        features["sinks"] = True
    gate = output_gate(both)
    if gate:
        features["output_gate"] = gate
    if re.search(r"self\.\w*sub_norm\(attn_output|o_norm\(|attn_output = self\.\w*norm\(", both):
        features["norm_before_o_proj"] = True
    hybrid = sorted(set(re.findall(r"Mamba|linear_attention|GatedDeltaNet|ShortConv|RecurrentBlock",
                                   source)))
    if hybrid:  # the kinds of layer beside softmax attention
        features["hybrid_layers"] = hybrid
    if re.search(r"kv_shared|shared_kv", both):
        features["kv_sharing"] = True
    if re.search(r"(?m)^class \w*Indexer\b", source) and re.search(r"self\.indexer\b", source):
        features["indexed_attention"] = True
    return features


def rope_types(text):
    """The rope types of the config's defaults: one, or one per layer type."""
    rp = getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None) or {}
    if isinstance(rp, dict) and rp and all(isinstance(v, dict) for v in rp.values()):
        return {k: v.get("rope_type", "default") for k, v in sorted(rp.items())}
    kind = rp.get("rope_type", rp.get("type", "default")) if isinstance(rp, dict) else "default"
    if isinstance(rp, dict) and "mrope_section" in rp:
        kind += "+mrope"
    return kind


def jsonable(value):
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in sorted(value.items())}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return repr(value)


def config_features(text):
    keys = text.to_dict()
    features = {}
    for feature, names in CONFIG_FEATURES.items():
        found = {n: jsonable(keys[n]) for n in names if n in keys}
        if feature == "window" and "layer_types" in found:
            found["layer_types"] = sorted(set(found["layer_types"] or []))
        if found:
            features[feature] = found
    return features


def describe(model_type):
    """The entry of a model type, or None when it is not listed."""
    try:
        config = CONFIG_MAPPING[model_type]()
    except Exception as err:  # a config class that needs arguments
        return {"model_type": model_type, "error": f"config: {type(err).__name__}: {err}"}
    text = text_config_of(config)
    text_type = getattr(text, "model_type", model_type) or model_type
    source = decoder_source(model_type, text_type)
    if not ROPE_SOURCE.search(source) or not SOFTMAX.search(source):
        return None
    attention = rope_attention(source)
    if not attention:
        return None
    entry = {
        "model_type": model_type,
        "causal_lm": first_name(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]),
        "config_class": type(config).__name__,
        "attention_classes": sorted(attention),
        "rope_type": rope_types(text),
        "layout": layout(source),
    }
    if text is not config:
        entry["text_config"] = text_type
    entry.update(config_features(text))
    entry.update(code_features(source, attention))
    return entry


def list_families():
    transformers.utils.logging.set_verbosity_error()
    found = [describe(t) for t in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)]
    return {"transformers": transformers.__version__,
            "families": [e for e in found if e is not None]}


def main(argv):
    text = json.dumps(list_families(), indent=1, sort_keys=True) + "\n"
    if len(argv) > 1:
        with open(argv[1], "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv)
