#!/usr/bin/env python3
"""make_hf_cases.py: reference cases made by Hugging Face transformers itself.

    .venv-hf/bin/python tests/hf/make_hf_cases.py OUT_DIR     (make hf-fixtures)
    .venv-hf/bin/python tests/hf/make_hf_cases.py OUT_DIR CASE...  (those cases alone)

Made with the versions pinned in tests/hf/requirements.txt (transformers
5.23.0, torch 2.15.0; scripts/setup-hf-venv.sh installs them into .venv-hf);
each case.json records the versions that wrote it.  The cases are committed
under tests/hf/, and tests/test_hf.sh runs the CLI on them without
transformers.  Each case is a tiny checkpoint saved by the model class's own
save_pretrained, so its config.json and tensor names are what that
transformers version writes, and the outputs its own modeling code computes:

    OUT_DIR/<case>/config.json         save_pretrained's config (kimi_k2: a
                                       DeepSeek-V3 one with Kimi K2's model_type,
                                       case.json "config_edit"; the *_multimodal
                                       cases: a ForConditionalGeneration's, the
                                       text model's in its text_config)
    OUT_DIR/<case>/model.safetensors   save_pretrained's weights (F32, F16 or BF16;
                                       the *_multimodal cases: a tiny vision
                                       tower's beside the text model's)
    OUT_DIR/<case>/case.json           {"layer": L, "rotary_dim": R, "grads": bool,
                                        "freqs": bool, "mla": bool (latent
                                        attention), "prefill": P, "family",
                                        "table": "half" (cos = [c, c]) or
                                        "interleaved" (each c twice: Cohere), ...}
    OUT_DIR/<case>/x.npy               f32 [B, S, hidden]: layer L's self_attn input
    OUT_DIR/<case>/pos.npy             i64 [B, S]: the position_ids given to the model
                                       ([3, B, S] for the Qwen-VL cases: M-RoPE's
                                       temporal, height and width rows)
    OUT_DIR/<case>/y.npy               f32 [B, S, hidden]: layer L's self_attn output
    OUT_DIR/<case>/y_cache.npy         f32 [B, S, hidden]: the same layer's outputs
                                       when the model generates through its own
                                       DynamicCache: the first P tokens as a
                                       prefill, then one token a step
                                       (case.json "prefill": P; absent where
                                       transformers' cached generation is not
                                       the layer of the whole input: a dynamic
                                       rope past its length)
    OUT_DIR/<case>/cos.npy, sin.npy    f32 [B, S, R]: the rotary embedding it used
                                       (case.json "freqs": when it is the config's)
    OUT_DIR/<case>/dy.npy, grads.npz   (grads cases) DY, and dL/dX ("x") and each
                                       of the attention's parameters' dL/dW for
                                       L = sum(Y * DY), by torch autograd through
                                       the module

The model runs in float32 with eager attention, on the CPU, in eval mode; X is
captured by a forward hook on layer L's attention module while the whole model
runs on random inputs_embeds with explicit position_ids.  Weights are random
(normal, std 0.3), wider than the default init so that the softmax is far
from uniform; the rest (MoE experts' 3-D weights, a vision tower's patch
embeddings) as the class initializes them, torch's generator seeded per
case.  BF16 and F16 cases round the weights before computing.  Positions
stay below 64, where float32 rotary angles are exact to ~4e-6.
case.json's "f32_vs_f64" is the attention module's float32 output against
the same module in float64 on the same inputs (the MoE layers around it do
not run in float64: their grouped_mm refuses it).
"""
import copy
import inspect
import json
import os
import re
import sys
import zlib

import numpy as np
import torch
import transformers
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

B, S = 2, 12
PREFILL = S // 2  # the cached run: a prefill of 6 tokens, then 6 steps of one
# The families' cases: hidden 32 and head_dim 8 (4 query heads, 2 key/value
# heads), to keep the committed files small; pad_token_id 0 within vocab 16.
TINY = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            num_hidden_layers=1, intermediate_size=16, vocab_size=16,
            max_position_embeddings=64, pad_token_id=0)
# Ling's (bailing_hybrid) layers: a linear-attention layer, then latent attention
BAILING_TINY = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=8,
                    qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, head_dim=4,
                    num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
                    intermediate_size=16, moe_intermediate_size=8, num_experts=2,
                    num_experts_per_tok=1, n_group=1, topk_group=1, first_k_dense_replace=2,
                    vocab_size=16, pad_token_id=0)


def positions(row1_start):
    # [B, S] int64: row 0 counts from 0, row 1 from row1_start.  Each row
    # counts up by one: given position_ids with a jump and no attention
    # mask, transformers' masks start another packed sequence at the jump,
    # while a layer of ropeattn attends causally by index.
    pos = torch.arange(S, dtype=torch.int64).repeat(B, 1)
    pos[1] += row1_start
    return pos


def make_config(config_cls, theta, rope, **kw):
    """A config with rope type `rope` (dict without rope_theta, or None),
    in the form this transformers version takes: rope_parameters (v5) or
    rope_theta + rope_scaling (v4).  A rope keyed by layer type
    ({"full_attention": {...}, "sliding_attention": {...}}: Gemma 3, OLMo 3
    in transformers 5) is passed as it is."""
    params = inspect.signature(config_cls.__init__).parameters
    if theta is None and rope is None:  # a family whose rope is fixed (GPT-J)
        return config_cls(**kw)
    if rope is not None and "full_attention" in rope:
        return config_cls(rope_parameters=copy.deepcopy(rope), **kw)
    if "rope_parameters" in params:
        rp = {"rope_type": "default", "rope_theta": theta}
        rp.update(rope or {})
        if "partial_rotary_factor" in kw and "partial_rotary_factor" not in params:
            rp["partial_rotary_factor"] = kw.pop("partial_rotary_factor")
        return config_cls(rope_parameters=rp, **kw)
    return config_cls(rope_theta=theta, rope_scaling=rope, **kw)


def build(model_cls, config):
    try:
        model = model_cls._from_config(config, attn_implementation="eager")
    except Exception:
        config._attn_implementation = "eager"
        model = model_cls(config)
    return model.float().eval()


def randomize(model, gen, dtype):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 or name.endswith("bias") or name.endswith("sinks"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
            elif re.search(r"q_norm|k_norm|a_layernorm|[qk]_layernorm|query_layernorm|"
                           r"key_layernorm|attn_sub_norm|rope_only_layernorm", name):
                p.copy_(1.0 + torch.randn(p.shape, generator=gen) * 0.3)
            if dtype is not None:
                p.copy_(p.to(dtype).float())


def stack_layer(model, layer):
    """(stack prefix, layer in it) of layer `layer`: ("", layer), or in a
    model whose two stacks run in cycles (HRM-Text), each run of a layer a
    cache slot of its own, slot `layer`'s (HrmTextModel.forward's
    cycle_offset): "H_module." or "L_module.", and layer mod
    num_layers_per_stack ("", layer past the slots)."""
    config = model.config.get_text_config(decoder=True)
    per_stack = getattr(config, "num_layers_per_stack", None)
    if per_stack is None or layer >= config.num_hidden_layers:
        return "", layer
    cycle, index = divmod(layer, per_stack)
    return ("H_module." if cycle % (config.L_cycles + 1) == config.L_cycles else "L_module."), index


def attention_name(model, layer):
    """The module name of layer `layer`'s attention, whatever the family
    calls it: model.layers.L.self_attn (Llama), gpt_neox.layers.L.attention,
    transformer.h.L.self_attention (Falcon), transformer.h.L.attn (GPT-J),
    the Qwen-VL text models' layers.L.self_attn, DBRX's
    transformer.blocks.L.norm_attn_norm.attn; a multimodal model's text
    layer (under language_model), not its vision tower's; in a model of
    several text models (PE-AV's), the one under text_model; else a
    model's own layers (at the top) beside other models' (PE-AV's encoder's
    embedder holds two encoders); in a model of
    several stacks of text layers and none under language_model (BLT's
    local_encoder, global_transformer ...), the first stack's (the library
    then reads that one, or its numbers differ); HRM's (H_module, L_module,
    run in cycles): cache slot `layer`'s (stack_layer)."""
    stack, layer = stack_layer(model, layer)
    pattern = re.compile(rf"(^|\.){re.escape(stack)}(layers|h|blocks)\.{layer}\.(norm_attn_norm\.)?"
                         rf"(self_attn|attention|self_attention|attn|temporal_block)$")
    names = [n for n, _ in model.named_modules() if pattern.search(n)]
    if len(names) > 1:
        text = [n for n in names if "language_model" in n or "text_model" in n]
        # (PE-AV's: its audio and video models' text models, tied to its own, beside it)
        top = [n for n in text if n.startswith("text_model.")]
        # (PE-AV's encoder: its own layers at the top, its embedder's encoders' beside them)
        own = [n for n in names if re.match(r"(layers|h|blocks)\.", n)]
        names = top if len(text) > 1 and top else (text or own or names[:1])
    if len(names) != 1:
        raise ValueError(f"layer {layer}'s attention: {names or 'none'}")
    return names[0]


def attention_of(model, layer):
    return model.get_submodule(attention_name(model, layer))


def capture(model, layer):
    """A forward hook on layer `layer`'s attention: returns (handle, calls),
    calls a list of (args, kwargs, output) per forward."""
    calls = []

    def hook(module, args, kwargs, output):
        calls.append((args, dict(kwargs), output[0] if isinstance(output, tuple) else output))

    return attention_of(model, layer).register_forward_hook(hook, with_kwargs=True), calls


def mask_for(pos, length):
    """3-D position_ids (Qwen-VL) go with an all-ones attention_mask over the
    `length` tokens so far: without one, transformers versions that read row
    0 as text positions would take an image's repeated temporal ids for
    packed sequences."""
    return torch.ones(B, length, dtype=torch.int64) if pos.dim() == 3 else None


def runner(model):
    """What runs the model: itself, or the thinker of a model that has no
    forward of its own (Qwen2.5-Omni's and Qwen3-Omni's generate through it)."""
    return getattr(model, "thinker", model)


def run_layer(model, layer, embeds, pos):
    """Runs the model; returns (args, kwargs, x, y, cos, sin) of layer
    `layer`'s attention."""
    handle, calls = capture(model, layer)
    with torch.no_grad():
        runner(model)(inputs_embeds=embeds, position_ids=pos, attention_mask=mask_for(pos, S),
                      use_cache=False)
    handle.remove()
    args, kwargs, y = slot_calls(model, layer, calls)[0]
    x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
    emb = kwargs.get("position_embeddings")
    # (cos, sin) as Llama gives them; None where the layer takes another form
    # (Llama 4's complex freqs_cis, Qwen2-VL's per component) or none
    cos, sin = emb if isinstance(emb, tuple) else (None, None)
    return args, kwargs, x, y, cos, sin


def run_cached(model, layer, embeds, pos):
    """[B, S, hidden]: the layer's outputs as the model generates through
    transformers' DynamicCache (made from the model's config: sliding and
    chunked layers as transformers caches them): tokens 0..PREFILL-1 in one
    call, then each further token alone, with its position_ids."""
    cache = DynamicCache(config=runner(model).config)
    handle, calls = capture(model, layer)
    steps = [(0, PREFILL)] + [(t, t + 1) for t in range(PREFILL, S)]
    with torch.no_grad():
        for a, b in steps:
            runner(model)(inputs_embeds=embeds[:, a:b], position_ids=pos[..., a:b],
                          attention_mask=mask_for(pos, b), past_key_values=cache,
                          use_cache=True)
    handle.remove()
    return torch.cat([y for _, _, y in slot_calls(model, layer, calls)], 1)


def slot_calls(model, layer, calls):
    """The calls of layer `layer`'s attention module (capture's) that are
    that layer's: all of them, or in a model whose stacks run in cycles
    (HRM-Text: stack_layer), those of its cache slot, the k-th of the n
    calls in each forward."""
    stack, index = stack_layer(model, layer)
    if not stack:
        return calls
    slots = [s for s in range(model.config.get_text_config(decoder=True).num_hidden_layers)
             if stack_layer(model, s) == (stack, index)]
    return calls[slots.index(layer)::len(slots)]


def to_double(v):
    """Floating tensors (also inside tuples, lists, dicts) in float64,
    complex ones in complex128; the rest as it is."""
    if isinstance(v, torch.Tensor):
        if v.is_complex():
            return v.to(torch.complex128)
        return v.double() if v.is_floating_point() else v
    if isinstance(v, (tuple, list)):
        return type(v)(to_double(e) for e in v)
    if isinstance(v, dict):
        return {k: to_double(e) for k, e in v.items()}
    return v


def f64_distance(model, layer, args, kwargs, y):
    """max|Y - Y64| / max|Y64|: the attention module in float64 on the same
    inputs (its caller's float32 mask and rotary tables, widened)."""
    attn64 = copy.deepcopy(attention_of(model, layer)).double()
    with torch.no_grad():
        out = attn64(*to_double(args), **to_double(kwargs))
    y64 = out[0] if isinstance(out, tuple) else out
    return float((y.double() - y64).abs().max() / y64.abs().max())


def saved_names(d):
    """The tensor names (and the metadata key) of d's model.safetensors."""
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        return json.loads(f.read(int.from_bytes(f.read(8), "little")))


def by_saved_names(d, grads):
    """grads by the names d's model.safetensors gives them, where
    save_pretrained renames a parameter (MiMo-V2-Flash's sinks, saved as
    attention_sink_bias): a name not saved takes the one saved name under
    the same module that no gradient has, of its shape."""
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    out = {}
    for k, g in grads.items():
        module = k.rsplit(".", 1)[0] + "."
        spare = [n for n in header if n.startswith(module) and n not in grads
                 and "." not in n[len(module):] and tuple(header[n]["shape"]) == g.shape]
        out[spare[0] if k != "x" and k not in header and len(spare) == 1 else k] = g
    return out


def saved_prefix(d, model, layer):
    """The name layer `layer`'s attention has in d's model.safetensors: its
    module name, or (a multimodal model that save_pretrained writes in an
    older layout: Gemma 3's and Mistral 3's language_model.model.layers.L,
    Qwen2-VL's model.layers.L for model.language_model.layers.L) the one
    saved name ending as it does."""
    name = attention_name(model, layer)
    header = saved_names(d)
    if any(k.startswith(name + ".") for k in header):
        return name + "."
    tail = re.search(r"(layers|h)\.\d+\.\w+$", name).group(0) + "."
    found = {k[:k.index(tail) + len(tail)] for k in header
             if tail in k and "vision" not in k and "visual" not in k}
    if len(found) != 1:
        raise ValueError(f"{name}: saved as {sorted(found) or 'nothing'}")
    return found.pop()


def saved_grads(model, grads):
    """grads (x's, and each weight's by its parameter name in the model) by
    the names save_pretrained gives those weights: transformers' conversion
    mapping reverted (Ling's bailing_hybrid saves self_attn.o_proj as
    attention.dense)."""
    from transformers.core_model_loading import revert_weight_conversion
    weights = {k: torch.from_numpy(g) for k, g in grads.items() if k != "x"}
    saved = revert_weight_conversion(model, weights)
    return {"x": grads["x"], **{k: g.numpy() for k, g in saved.items()}}


def grads_of(model, layer, args, kwargs, x, dy, prefix):
    """dL/dX and dL/dW of layer `layer`'s attention, the weights named with
    `prefix` as saved."""
    attn = attention_of(model, layer)
    xg = x.detach().clone().requires_grad_(True)
    kwargs = dict(kwargs)
    if "hidden_states" in kwargs:
        kwargs["hidden_states"] = xg
    else:
        args = (xg,) + tuple(args[1:])
    model.zero_grad()
    out = attn(*args, **kwargs)
    y = out[0] if isinstance(out, tuple) else out
    (y * dy).sum().backward()
    grads = {"x": xg.grad.numpy().astype(np.float32)}
    for pname, p in attn.named_parameters():
        if p.grad is not None:  # None: not on the output's path (a returned dense_bias)
            grads[prefix + pname] = p.grad.numpy().astype(np.float32)
        if p.grad is None:  # not on y's graph: DeepSeek sparse attention's indexer (no_grad)
            continue
        grads[prefix + pname] = p.grad.numpy().astype(np.float32)
    return grads


def save(d, name, array):
    np.save(os.path.join(d, name), array.detach().numpy().astype(
        np.int64 if array.dtype == torch.int64 else np.float32))


# config_keys' value for a key written as JSON null (None removes the key)
JSON_NULL = "null in config.json"


def edit_config(d, keys):
    """Sets the saved config.json's keys to `keys`' values (None: removes them; JSON_NULL:
    null); "text_config/model_type": the key in text_config."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    for path, value in keys.items():
        *parents, key = path.split("/")
        obj = cfg
        for parent in parents:
            obj = obj[parent]
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = None if value == JSON_NULL else value
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def latent(config):
    """Whether the config's attention is latent (kv_lora_rank), read from its dict where the
    class lets no one read a key that its per_layer_config may set (dots.note's)."""
    config = config.get_text_config(decoder=True)  # a multimodal one's text model's
    try:
        return getattr(config, "kv_lora_rank", None) is not None
    except Exception:  # transformers' AmbiguousGlobalPerLayerAttributeError
        return config.to_dict().get("kv_lora_rank") is not None


def write_case(out_dir, name, model_cls, config, layer, pos, seed, grads=True, dtype=None,
               freqs=True, cached=True, model_type=None, half_table=False, config_keys=None,
               causal=True):
    """dtype: None (F32 weights), torch.bfloat16 or torch.float16: the weights
    are rounded to it, computed with in float32, and saved in it.  freqs:
    whether the layer rotates by the config's global rope (test_hf.sh then
    checks `ropeattn freqs` against its tables; not so for Gemma 3's sliding
    layers, with a rope of their own, nor Llama 4's complex table).  cached:
    whether to write y_cache.npy.  model_type: written into the saved
    config.json in place of the class's (Kimi K2, whose config class is
    remote code: transformers runs it as DeepSeek-V3).  half_table: the
    layer's cos and sin are [.., R/2] (gpt-oss rotates the two halves by
    one table), written as Llama's [c, c].  config_keys: the saved
    config.json's keys set to these values (None: removed), where
    transformers reads the edited file as the config it saved (dots.note's
    sliding layers' sizes as swa_* keys in place of per_layer_config), in
    case.json "config_edit".  causal False: an encoder's layer (case.json
    "causal" false; with cached False)."""
    gen = torch.Generator().manual_seed(seed)
    # the parameters randomize leaves (MoE experts' 3-D weights, a vision
    # tower's patch embeddings ...) as the class initializes them, from
    # torch's global generator
    torch.manual_seed(seed)
    model = build(model_cls, config)
    randomize(model, gen, dtype)
    embeds = torch.randn(B, S, config.get_text_config().hidden_size, generator=gen)
    args, kwargs, x, y, cos, sin = run_layer(model, layer, embeds, pos)
    rel64 = f64_distance(model, layer, args, kwargs, y)
    if half_table:
        cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)

    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    (copy.deepcopy(model).to(dtype) if dtype is not None else model).save_pretrained(
        d, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))
    if model_type is not None:
        edit_config(d, {"model_type": model_type})
    if config_keys is not None:
        edit_config(d, config_keys)
        # against the config the model ran with (a model may run a copy: Mellum's); a key
        # one lacks and the other holds as None is the same (a null the class keeps as an
        # attribute and never reads: MellumConfig's rope_theta)
        reread, ran = type(config).from_pretrained(d).to_dict(), model.config.to_dict()
        if any(reread.get(k) != ran.get(k) for k in set(reread) | set(ran)):
            raise ValueError(f"{name}: transformers reads the edited config.json otherwise")
    save(d, "x.npy", x)
    save(d, "pos.npy", pos)
    save(d, "y.npy", y)
    cache_vs_y = None
    if cached:
        y_cache = run_cached(model, layer, embeds, pos)
        save(d, "y_cache.npy", y_cache)
        cache_vs_y = float((y_cache - y).abs().max() / y.abs().max())
    freqs = freqs and cos is not None
    if freqs:
        save(d, "cos.npy", cos)
        save(d, "sin.npy", sin)
    if grads:
        dy = torch.randn(y.shape, generator=gen)
        save(d, "dy.npy", dy)
        # the weights' names as save_pretrained renames them (LFM3's g_proj
        # saved as gate_proj), else as an older layout saves them (saved_prefix),
        # a parameter saved under another name by its module's spare one
        # (MiMo-V2-Flash's sinks as attention_sink_bias)
        found = saved_grads(model, grads_of(model, layer, args, kwargs, x, dy,
                                            attention_name(model, layer) + "."))
        if not all(k in saved_names(d) for k in found if k != "x"):
            found = by_saved_names(d, grads_of(model, layer, args, kwargs, x, dy,
                                               saved_prefix(d, model, layer)))
        np.savez(os.path.join(d, "grads.npz"), **found)
    table = None
    if freqs:  # Llama's [c, c], or each c twice in a row (Cohere's)
        table = ("interleaved" if torch.equal(cos[..., ::2], cos[..., 1::2]) and
                 not torch.equal(cos[..., :cos.shape[-1] // 2], cos[..., cos.shape[-1] // 2:])
                 else "half")
    info = {"layer": layer, "rotary_dim": int(cos.shape[-1]) if freqs else None, "table": table,
            "grads": grads, "freqs": freqs, "mla": latent(config),
            "weights": {None: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}[dtype],
            "f32_vs_f64": rel64, "prefill": PREFILL if cached else None,
            "cache_vs_y": cache_vs_y, "family": model_type or config.model_type,
            "transformers": transformers.__version__, "torch": torch.__version__}
    if not causal:
        info["causal"] = False
    if model_type is not None:
        info["config_edit"] = f"model_type {config.model_type} -> {model_type}"
    if config_keys is not None:
        info["config_edit"] = ", ".join(
            f"{k} removed" if v is None else f"{k} null" if v == JSON_NULL
            else f"{k} {json.dumps(v)}" for k, v in sorted(config_keys.items()))
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name} ({info['family']}): max|y| {float(y.abs().max()):.3g}, rotary_dim "
          f"{info['rotary_dim']}, HF float32 vs float64 {rel64:.2e}, cached vs not "
          f"{cache_vs_y if cache_vs_y is None else f'{cache_vs_y:.2e}'}")


def llama(theta, rope, hidden=32, heads=4, kv=2, head_dim=16, layers=1, max_pos=64):
    """head_dim 16 with hidden 32 and 4 heads: H * head_dim = 64 != hidden, as
    in Qwen3 or Gemma; head_dim None: hidden / heads."""
    extra = {} if head_dim is None else {"head_dim": head_dim}
    return make_config(LlamaConfig, theta, rope, hidden_size=hidden, num_attention_heads=heads,
                       num_key_value_heads=kv, num_hidden_layers=layers, intermediate_size=32,
                       vocab_size=32, max_position_embeddings=max_pos, **extra)


def config_of(family, config_kw, rope=None, theta=10000.0):
    """transformers' <family>Config made by make_config, or None where this
    transformers lacks it."""
    config_cls = getattr(transformers, family + "Config", None)
    return None if config_cls is None else make_config(config_cls, theta, rope, **config_kw)


def family(name, family, config_kw, layer=0, pos=None, rope=None, theta=10000.0, model=None,
           **opts):
    """A case of transformers' <family>Config and <family>ForCausalLM (or
    the class `model` names), or None where this transformers lacks them."""
    config = config_of(family, config_kw, rope, theta)
    model_cls = getattr(transformers, model or family + "ForCausalLM", None)
    if config is None or model_cls is None:
        print(f"{family} is not in this transformers: no {name} case")
        return None
    return (name, model_cls, config, layer, positions(7) if pos is None else pos, opts)


def cases():
    """(name, model class, config, layer, positions, options): every rope
    type on Llama, then one case per family of the README's table that
    transformers has a class for."""
    longrope = {"rope_type": "longrope", "original_max_position_embeddings": 16,
                "short_factor": [1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0],
                "long_factor": [1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 16.0]}
    yield ("llama_default", LlamaForCausalLM,
           llama(10000.0, None, head_dim=None, layers=2), 1, positions(3), {})
    yield ("llama_f16", LlamaForCausalLM,
           llama(10000.0, None, kv=1, head_dim=None), 0, positions(40), {"dtype": torch.float16})
    yield ("llama_linear_mha", LlamaForCausalLM,
           llama(10000.0, {"rope_type": "linear", "factor": 4.0}, kv=4), 0, positions(20), {})
    dyn = {"rope_type": "dynamic", "factor": 2.0}
    # past max_position_embeddings each step's length gives the dynamic rope
    # other frequencies than the whole input's: no y_cache
    yield ("llama_dynamic_long", LlamaForCausalLM,
           llama(10000.0, dyn, kv=1, max_pos=16), 0, positions(29), {"cached": False})
    yield ("llama_dynamic_short", LlamaForCausalLM,
           llama(10000.0, dyn, kv=1, max_pos=16), 0, positions(3), {})
    yield ("llama_yarn", LlamaForCausalLM,
           llama(10000.0, {"rope_type": "yarn", "factor": 2.0,
                           "original_max_position_embeddings": 16}), 0, positions(48), {})
    yield ("llama_yarn_mscale", LlamaForCausalLM,
           llama(10000.0, {"rope_type": "yarn", "factor": 8.0, "mscale": 1.0,
                           "mscale_all_dim": 0.5, "beta_fast": 16.0, "beta_slow": 2.0},
                 max_pos=16), 0, positions(40), {})
    yield ("llama3_bf16", LlamaForCausalLM,
           llama(500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                 layers=2), 1, positions(50), {"dtype": torch.bfloat16})
    yield ("llama_longrope_long", LlamaForCausalLM, llama(10000.0, longrope), 0,
           positions(28), {})
    yield ("llama_longrope_short", LlamaForCausalLM, llama(10000.0, longrope), 0,
           positions(2), {})
    small = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                 num_hidden_layers=1, intermediate_size=32, vocab_size=32,
                 max_position_embeddings=64)
    # Other families with Llama's tensor names: partial rotary (StableLM),
    # q/k/v biases (Qwen2), per-head q/k RMSNorm (Qwen3).
    yield family("stablelm_partial", "StableLm", dict(small, partial_rotary_factor=0.25))
    yield family("qwen2_bias", "Qwen2", small)
    yield family("qwen3_qknorm", "Qwen3", dict(small, head_dim=16))
    yield from family_cases()


def family_cases():
    """One case for each other family (TINY; MoE layers with 2 experts),
    each setting what makes its family differ from Llama."""
    tiny = TINY
    no_head_dim = {k: v for k, v in tiny.items() if k != "head_dim"}
    yield family("mixtral_moe", "Mixtral", dict(tiny, num_local_experts=2, num_experts_per_tok=1))
    yield family("ministral_window", "Ministral", dict(tiny, sliding_window=4))
    yield family("qwen2_moe", "Qwen2Moe", dict(no_head_dim, num_experts=2, num_experts_per_tok=1,
                                               moe_intermediate_size=8,
                                               shared_expert_intermediate_size=8))
    yield family("starcoder2_bias", "Starcoder2", dict(no_head_dim, use_bias=True))
    yield family("qwen3_moe", "Qwen3Moe", dict(tiny, num_experts=2, num_experts_per_tok=1,
                                               moe_intermediate_size=8))
    yield family("gemma", "Gemma", tiny)
    yield family("granite_multiplier", "Granite", dict(no_head_dim, attention_multiplier=0.2))
    yield family("granitemoe", "GraniteMoe", dict(no_head_dim, attention_multiplier=0.2,
                                                  num_local_experts=2, num_experts_per_tok=1))
    yield family("granitemoeshared", "GraniteMoeShared",
                 dict(no_head_dim, attention_multiplier=0.2, num_local_experts=2,
                      num_experts_per_tok=1, shared_intermediate_size=8))
    yield family("olmo_clip", "Olmo", dict(no_head_dim, clip_qkv=1.5))
    yield family("olmo2_norms", "Olmo2", no_head_dim)
    # layer 0 slides (rope without the yarn scaling), layer 3 is full
    olmo3_rope = {"full_attention": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0,
                                     "original_max_position_embeddings": 16},
                  "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    yield family("olmo3_sliding", "Olmo3", dict(no_head_dim, sliding_window=4),
                 rope=olmo3_rope, freqs=False)
    yield family("smollm3_nope", "SmolLM3", dict(tiny, num_hidden_layers=2, no_rope_layers=[1, 0]),
                 layer=1)
    yield family("cohere_qknorm", "Cohere", dict(no_head_dim, use_qk_norm=True))
    yield family("glm", "Glm", tiny)
    yield family("glm4_partial", "Glm4", tiny)
    yield family("phi_dense", "Phi", dict(no_head_dim, partial_rotary_factor=0.5))
    yield family("phi3_fused", "Phi3", no_head_dim)
    yield family("gpt_neox_packed", "GPTNeoX",
                 dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=1,
                      intermediate_size=16, vocab_size=16, max_position_embeddings=64,
                      rotary_pct=0.5))
    yield family("falcon_mqa", "Falcon",
                 dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=1,
                      vocab_size=16, max_position_embeddings=64))
    yield family("falcon_new_arch", "Falcon",
                 dict(hidden_size=32, num_attention_heads=4, num_kv_heads=2,
                      new_decoder_architecture=True, num_hidden_layers=1, vocab_size=16,
                      max_position_embeddings=64))
    yield family("gptj_interleaved", "GPTJ",
                 dict(n_embd=32, n_head=4, rotary_dim=4, n_layer=1, n_inner=16, vocab_size=16,
                      n_positions=64), theta=None)


# Gemma 3's text model: layer 0 slides with the local rope, layer 1 is full
# with the linear one
GEMMA3_ROPE = {"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 50000.0},
               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
GEMMA3_TEXT = dict(TINY, num_hidden_layers=2, sliding_window=4, query_pre_attn_scalar=16,
                   layer_types=["sliding_attention", "full_attention"])
# Llama 4's text model: chunks of 8, a MoE layer of 2 experts
LLAMA4_TEXT = dict(TINY, attention_chunk_size=8, num_local_experts=2, num_experts_per_tok=1,
                   intermediate_size_mlp=16)


def mask_cases():
    """Issue 20's families beyond their windows (S = 12 tokens): Mistral's
    window on every layer, Qwen2's from max_window_layers on, Gemma 2's
    soft-cap and even sliding layers, Gemma 3's sliding layer (local rope),
    gpt-oss's sinks on a sliding and a full layer, Llama 4's chunks of 8."""
    small = TINY
    gpt_oss = dict(small, num_hidden_layers=2, sliding_window=4,
                   num_local_experts=2, num_experts_per_tok=1)
    gemma2 = dict(small, num_hidden_layers=2, sliding_window=4,
                  query_pre_attn_scalar=16, attn_logit_softcapping=1.0)
    yield family("mistral_window", "Mistral", dict(small, num_hidden_layers=1, sliding_window=4))
    yield family("qwen2_window", "Qwen2", dict(small, num_hidden_layers=2, use_sliding_window=True,
                                               sliding_window=4, max_window_layers=1), layer=1)
    yield family("gemma2_softcap_window", "Gemma2", gemma2)
    yield family("gemma2_softcap_full", "Gemma2", gemma2, layer=1)
    yield family("gemma3_window", "Gemma3Text", GEMMA3_TEXT, rope=GEMMA3_ROPE, freqs=False,
                 model="Gemma3ForCausalLM")
    yield family("gemma3_full", "Gemma3Text", GEMMA3_TEXT, layer=1, rope=GEMMA3_ROPE,
                 freqs=False, model="Gemma3ForCausalLM")
    yield family("gpt_oss_sliding", "GptOss", gpt_oss, half_table=True)
    yield family("gpt_oss_full", "GptOss", gpt_oss, layer=1, half_table=True)
    yield family("llama4_chunks", "Llama4Text", LLAMA4_TEXT, freqs=False,
                 model="Llama4ForCausalLM")


def mrope_positions():
    """[3, B, S] position_ids as Qwen2-VL's get_rope_index gives them: row 0
    is 2 text tokens, an image of 2 x 2 x 2 patches (after the spatial
    merge), 2 text tokens; row 1 is 4 text tokens, a 1 x 2 x 3 image, 2 text
    tokens.  An image's (t, h, w) grid is offset by the text before it; the
    text after it counts on from the grid's largest position + 1."""
    rows = []
    for parts in (((2,), (2, 2, 2), (2,)), ((4,), (1, 2, 3), (2,))):
        ids, start = [], 0
        for p in parts:
            if len(p) == 1:
                block = torch.arange(p[0]).repeat(3, 1) + start
            else:
                t, h, w = torch.meshgrid(torch.arange(p[0]), torch.arange(p[1]),
                                         torch.arange(p[2]), indexing="ij")
                block = torch.stack([t.flatten(), h.flatten(), w.flatten()]) + start
            ids.append(block)
            start = int(block.max()) + 1
        rows.append(torch.cat(ids, 1))
    return torch.stack(rows, 1).to(torch.int64)


# The Qwen-VL families' text models: (name, family, rope, config, options).
# Qwen2-VL's and Qwen2.5-VL's position_embeddings are per component
# ([3, B, S, D], put together inside its attention): no freqs tables;
# Qwen3-VL's are the interleaved [B, S, D] ropeattn freqs writes.
_SMALL = {k: v for k, v in TINY.items() if k != "head_dim"}  # head_dim 8: sections of 4
QWEN_VL = (
    ("qwen2_vl", "Qwen2VL", {"mrope_section": [2, 1, 1]}, _SMALL, {"freqs": False}),
    ("qwen2_5_vl", "Qwen2_5_VL", {"mrope_section": [1, 2, 1]}, _SMALL, {"freqs": False}),
    ("qwen3_vl", "Qwen3VL", {"mrope_section": [2, 1, 1], "mrope_interleaved": True},
     dict(_SMALL, head_dim=8, attention_bias=False), {}),
    ("qwen3_vl_moe", "Qwen3VLMoe", {"mrope_section": [2, 1, 1], "mrope_interleaved": True},
     dict(_SMALL, head_dim=8, attention_bias=False, num_experts=2, num_experts_per_tok=1,
          moe_intermediate_size=8), {}),
)


def vl_cases():
    """Issue 22's M-RoPE: the text model of Qwen2-VL and Qwen2.5-VL (chunked
    sections, q/k/v biases), Qwen3-VL and Qwen3-VL-MoE (interleaved
    sections, q/k norms) on 3-D position_ids."""
    for name, family, rope, config_kw, opts in QWEN_VL:
        config = config_of(family + "Text", config_kw, dict(rope, rope_type="default"))
        model_cls = getattr(transformers, family + "TextModel", None)
        if config is None or model_cls is None:
            print(f"{family} is not in this transformers: no {name}_mrope case")
            continue
        yield (name + "_mrope", model_cls, config, 0, mrope_positions(), opts)


def mla_cases():
    """Latent attention (DeepSeek-V2-Lite's shape: q_proj; V3's: q_a_proj ..
    q_b_proj, attention_bias; V3 with rope_interleave false, BF16 weights;
    Kimi K2: V3 saved with model_type kimi_k2, as its checkpoints' remote
    config names it, and yarn as its config.json has it; Mistral 4: V3's
    with q scaled by position, llama_4_scaling_beta),
    yarn with mscale / mscale_all_dim where the class applies it to the
    softmax scale.  transformers' DeepseekV2Attention does so since its PR
    #47435; an older one gets a V2 case without mscale_all_dim (its
    reference would otherwise be the scale DeepSeek's code does not use)."""
    small = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=8,
                 qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, intermediate_size=16,
                 moe_intermediate_size=8, n_routed_experts=2, num_experts_per_tok=1,
                 n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1,
                 vocab_size=16, max_position_embeddings=64, pad_token_id=0)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
            "beta_fast": 32.0, "beta_slow": 1.0}
    v2_scaled = False
    config_cls = getattr(transformers, "DeepseekV2Config", None)
    if config_cls is not None:
        from transformers.models.deepseek_v2 import modeling_deepseek_v2
        v2_scaled = "mscale_all_dim" in inspect.getsource(
            modeling_deepseek_v2.DeepseekV2Attention.__init__)
    v2_rope = dict(yarn, mscale=0.707, mscale_all_dim=0.707) if v2_scaled else dict(yarn)
    specs = (
        ("deepseek_v2_lite", "DeepseekV2", v2_rope, dict(num_hidden_layers=2, q_lora_rank=None),
         1, {"freqs": False}),
        ("deepseek_v3", "DeepseekV3", dict(yarn, mscale=1.0, mscale_all_dim=1.0),
         dict(num_hidden_layers=1, q_lora_rank=12, attention_bias=True), 0, {}),
        ("deepseek_v3_half_bf16", "DeepseekV3", None,
         dict(num_hidden_layers=1, q_lora_rank=12, rope_interleave=False), 0,
         {"dtype": torch.bfloat16}),
        ("kimi_k2", "DeepseekV3", dict(yarn, factor=8.0, mscale=1.0, mscale_all_dim=1.0,
                                       beta_fast=1.0),
         dict(num_hidden_layers=1, q_lora_rank=12), 0, {"model_type": "kimi_k2"}),
        # Mistral 4: V3's attention, q times 1 + beta log(1 + floor(position / original)):
        # original 4 and beta 0.3, so positions 0 .. 16 take five factors; its rope over
        # qk_nope + qk_rope at the config class's partial_rotary_factor (rope / that)
        ("mistral4_position_scale", "Mistral4",
         dict(yarn, original_max_position_embeddings=4, mscale=1.0, mscale_all_dim=1.0,
              llama_4_scaling_beta=0.3),
         dict(num_hidden_layers=1, q_lora_rank=12, attention_bias=True), 0, {}),
        ("mistral4_q_proj_half", "Mistral4",
         dict(yarn, original_max_position_embeddings=8, llama_4_scaling_beta=0.5),
         dict(num_hidden_layers=1, q_lora_rank=None, rope_interleave=False), 0, {}),
    )
    for name, family, rope, extra, layer, opts in specs:
        config_cls = getattr(transformers, family + "Config", None)
        model_cls = getattr(transformers, family + "ForCausalLM", None)
        if config_cls is None or model_cls is None:
            print(f"{family} is not in this transformers: no {name} case")
            continue
        yield (name, model_cls, make_config(config_cls, 10000.0, rope, **dict(small, **extra)),
               layer, positions(5), opts)


# Tiny vision towers for the multimodal models (one layer, hidden 8, an
# 8 x 8 image): <family>Config's vision_config, and its other arguments.
VISION = {
    "Gemma3": (dict(hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                    num_attention_heads=1, image_size=8, patch_size=4),
               {"mm_tokens_per_image": 4}),
    "Mistral3": (dict(hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                      num_attention_heads=1, head_dim=8, image_size=8, patch_size=4), {}),
    "Llama4": (dict(hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                    num_attention_heads=1, image_size=8, patch_size=4, vision_output_dim=8,
                    projector_input_dim=8, projector_output_dim=8), {}),
    "Qwen2VL": (dict(depth=1, embed_dim=8, hidden_size=32, num_heads=1, mlp_ratio=1,
                     patch_size=2), {}),
    "Qwen2_5_VL": (dict(depth=1, hidden_size=8, out_hidden_size=32, intermediate_size=8,
                        num_heads=1, patch_size=2, window_size=8, fullatt_block_indexes=[0]),
                   {}),
    "Qwen3VL": (dict(depth=1, hidden_size=8, out_hidden_size=32, intermediate_size=8,
                     num_heads=1, patch_size=2, num_position_embeddings=16,
                     deepstack_visual_indexes=[0]), {}),
}
VISION["Qwen3VLMoe"] = VISION["Qwen3VL"]


def multimodal(name, family, text_config, layer=0, pos=None, **opts):
    """A case of <family>ForConditionalGeneration: text_config (a config of
    its text model) beside a tiny vision tower, saved whole (its config.json
    with text_config and vision_config, the tower's weights beside the text
    model's, both named as this transformers saves them); or None where
    this transformers lacks them."""
    config_cls = getattr(transformers, family + "Config", None)
    model_cls = getattr(transformers, family + "ForConditionalGeneration", None)
    if text_config is None or config_cls is None or model_cls is None:
        print(f"{family} is not in this transformers: no {name} case")
        return None
    vision, extra = VISION[family]
    config = config_cls(text_config=text_config, vision_config=dict(vision), **extra)
    return (name, model_cls, config, layer, positions(7) if pos is None else pos, opts)


def late_cases():
    """Cases added after the first 52, kept last (a case's seed is its place
    in the list: the earlier ones stay as committed): StableLM's LayerNorm
    per head, then each multimodal model whose checkpoints put the text
    layers and config elsewhere than its text model's (Gemma 3, Mistral 3,
    Llama 4, the Qwen-VL families), with the text model of a case above."""
    yield family("stablelm_qk_layernorm", "StableLm",
                 dict(_SMALL, qk_layernorm=True, partial_rotary_factor=0.5,
                      use_parallel_residual=True))
    yield multimodal("gemma3_multimodal", "Gemma3",
                     config_of("Gemma3Text", GEMMA3_TEXT, GEMMA3_ROPE), freqs=False)
    yield multimodal("mistral3_multimodal", "Mistral3",
                     config_of("Mistral", dict(TINY, sliding_window=4)))
    yield multimodal("llama4_multimodal", "Llama4", config_of("Llama4Text", LLAMA4_TEXT),
                     freqs=False)
    for name, family_name, rope, config_kw, opts in QWEN_VL:
        text = config_of(family_name + "Text", config_kw, dict(rope, rope_type="default"))
        yield multimodal(name + "_multimodal", family_name, text, pos=mrope_positions(), **opts)


def rows_more_cases():
    """Issue 41's families on q_proj names: Helium's and ERNIE 4.5's
    interleaved pairs (q/k/v biases; all four by use_bias), Seed-OSS's
    output bias apart from q/k/v's, Phi-3.5-MoE's longrope (short factors
    at every length, cos and sin scaled by short_mscale up to
    original_max_position_embeddings, long_mscale past it)."""
    no_head_dim = {k: v for k, v in TINY.items() if k != "head_dim"}
    yield family("helium_interleaved", "Helium", dict(TINY, attention_bias=True))
    yield family("ernie4_5_bias", "Ernie4_5", dict(TINY, use_bias=True))
    yield family("seed_oss_out_bias", "SeedOss", dict(TINY, attention_bias=False,
                                                      attention_out_bias=True))
    phimoe = dict(no_head_dim, num_local_experts=2, num_experts_per_tok=1)
    longrope = {"rope_type": "longrope", "original_max_position_embeddings": 16,
                "short_factor": [1.0, 1.5, 2.0, 4.0], "long_factor": [1.0, 3.0, 8.0, 16.0],
                "short_mscale": 1.1, "long_mscale": 1.3}
    # every step of the cached run on the same side of the original length
    yield family("phimoe_longrope_short", "Phimoe", phimoe, rope=longrope, pos=positions(2))
    yield family("phimoe_longrope_long", "Phimoe", phimoe, rope=longrope, pos=positions(28))


def windows_cases():
    """Issue 41: a sliding layer with RoPE and a full-attention layer without
    it (Cohere 2: the full layers never rotate; EXAONE 4: while
    sliding_window is set), over a window of 4."""
    layers = dict(num_hidden_layers=2, sliding_window=4,
                  layer_types=["sliding_attention", "full_attention"])
    cohere2 = dict(TINY, **layers)
    yield family("cohere2_sliding", "Cohere2", cohere2)
    yield family("cohere2_full_nope", "Cohere2", cohere2, layer=1)
    exaone4 = dict(TINY, **layers)
    yield family("exaone4_sliding", "Exaone4", exaone4)
    yield family("exaone4_full_nope", "Exaone4", exaone4, layer=1)


def mla_fused_cases():
    """DBRX: DbrxConfig's own names, a nested attn_config (kv_n_heads,
    rope_theta, clip_qkv small enough to clip), a fused Wqkv (q's rows, k's,
    v's)."""
    dbrx = dict(d_model=32, n_heads=4, n_layers=1, max_seq_len=64, vocab_size=16, pad_token_id=0,
                attn_config=dict(kv_n_heads=2, rope_theta=500000.0, clip_qkv=2.0),
                ffn_config=dict(ffn_hidden_size=16, moe_num_experts=2, moe_top_k=1))
    yield family("dbrx_clip", "Dbrx", dbrx, theta=500000.0)


def rows_plain_cases():
    """Families of issue 41 whose attention is Llama's under another
    model_type: Arcee; Mllama's self-attention layers."""
    yield family("arcee", "Arcee", dict(TINY, num_hidden_layers=2), layer=1,
                 rope={"rope_type": "linear", "factor": 2.0})
    # Mllama's text model: a self-attention layer beside a cross-attention
    # one (cross_attention_layers; head_dim is hidden_size / heads).
    yield family("mllama_text_self_attention", "MllamaText",
                 dict({k: v for k, v in TINY.items() if k != "head_dim"}, num_hidden_layers=2,
                      cross_attention_layers=[1]), model="MllamaForCausalLM", theta=500000.0)


def hybrids_cases():
    """Hybrid models' attention layers: Qwen3-Next's gated attention (its
    layer 1, beside a linear-attention layer 0), with biases (q_proj's
    query and gate rows), partial rotary and q/k norms by 1 + weight."""
    yield family("qwen3_next_gated", "Qwen3Next",
                 dict(TINY, head_dim=16, num_hidden_layers=2, attention_bias=True,
                      layer_types=["linear_attention", "full_attention"],
                      linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2,
                      linear_num_value_heads=2, num_experts=2, num_experts_per_tok=1,
                      moe_intermediate_size=16, shared_expert_intermediate_size=16),
                 layer=1, rope={"partial_rotary_factor": 0.5})
    # LFM2: a convolution layer 0, attention layer 1 with q_layernorm,
    # k_layernorm (epsilon norm_eps) and out_proj
    yield family("lfm2_attention", "Lfm2",
                 dict(TINY, num_hidden_layers=2, layer_types=["conv", "full_attention"],
                      norm_eps=0.01, block_auto_adjust_ff_dim=False), layer=1)
    mamba = dict(mamba_d_state=8, mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1,
                 mamba_expand=2, mamba_d_conv=4, mamba_chunk_size=8)
    # Falcon-H1: every layer attention beside Mamba; key_multiplier scales k
    yield family("falcon_h1_key_multiplier", "FalconH1",
                 dict(TINY, key_multiplier=0.7, attention_bias=True, mamba_d_ssm=64, **mamba))
    # GraniteMoeHybrid: a Mamba layer 0, attention layer 1 without RoPE
    # (position_embedding_type null, its default) and attention_multiplier
    yield family("granitemoehybrid_nope", "GraniteMoeHybrid",
                 dict(TINY, num_hidden_layers=2, layer_types=["mamba", "attention"],
                      attention_multiplier=0.2, num_local_experts=2, num_experts_per_tok=1,
                      shared_intermediate_size=16, **mamba), layer=1)


def qk_norms_cases():
    """Issue 41's families with q/k norms, a norm before o_proj, or windows by
    layer type, each with the feature that makes it differ from Llama on."""
    no_head_dim = {k: v for k, v in TINY.items() if k != "head_dim"}
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 16,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    yield family("apertus_llama3", "Apertus", TINY, rope=llama3)
    # layer 1 of two slides, as layer_types says
    yield family("dots1_window", "Dots1",
                 dict(TINY, num_hidden_layers=2, sliding_window=4, n_routed_experts=2,
                      num_experts_per_tok=1, first_k_dense_replace=2,
                      layer_types=["full_attention", "sliding_attention"]), layer=1)
    # clip_qkv clamps q and k after the norms
    yield family("olmoe_norms_clip", "Olmoe",
                 dict(no_head_dim, num_experts=2, num_experts_per_tok=1, clip_qkv=1.0))
    yield family("glm4_moe_qknorm", "Glm4Moe",
                 dict(TINY, use_qk_norm=True, n_routed_experts=2, num_experts_per_tok=1,
                      first_k_dense_replace=1))
    # q/k norms after RoPE; a dynamic rope with alpha is NTK by a fixed alpha
    yield family("hunyuan_v1_dense_alpha", "HunYuanDenseV1", TINY,
                 rope={"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0})
    yield family("bitnet_sub_norm", "BitNet", no_head_dim)
    # rotary_dim 4 of head_dim 8: partial_rotary_factor 0.5 (MiniMaxM2Config)
    yield family("minimax_m2_rotary_dim", "MiniMaxM2",
                 dict(TINY, rotary_dim=4, num_local_experts=2, num_experts_per_tok=1))
    # layer 0 slides, with the sliding layers' rope (MellumConfig's defaults)
    mellum_rope = {"full_attention": {"rope_type": "default", "rope_theta": 500000.0},
                   "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    yield family("mellum_sliding", "Mellum",
                 dict(TINY, num_hidden_layers=2, sliding_window=4, num_experts=2,
                      num_experts_per_tok=1, moe_intermediate_size=8,
                      layer_types=["sliding_attention", "full_attention"]),
                 rope=mellum_rope, freqs=False)


def rows_more2_cases():
    """Issue 41: Ministral 3's q scaled by 1 + llama_4_scaling_beta log(1 +
    floor(position / original_max_position_embeddings)) after RoPE (yarn
    over 4 positions: the scale steps every 4 tokens, up to 1 + 0.5 log 5 at
    position 18), every layer sliding over 6 tokens."""
    yarn = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4,
            "llama_4_scaling_beta": 0.5}
    yield family("ministral3_q_scaling", "Ministral3", dict(TINY, sliding_window=6), rope=yarn)
    # ModernBERT's decoder: attn.q_proj .. attn.Wo with biases, a sliding
    # layer (local_attention 8: a window of 4) at its own rope_theta, and a
    # full one (freqs takes no layer: not checked)
    modernbert = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                      intermediate_size=16, vocab_size=16, max_position_embeddings=64,
                      local_attention=8, attention_bias=True,
                      layer_types=["sliding_attention", "full_attention"], pad_token_id=0,
                      bos_token_id=0, eos_token_id=0, cls_token_id=0, sep_token_id=0)
    ropes = {"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
             "sliding_attention": {"rope_type": "default", "rope_theta": 500.0}}
    for layer, kind in enumerate(("sliding", "full")):
        yield family(f"modernbert_decoder_{kind}", "ModernBertDecoder", modernbert, layer=layer,
                     rope=ropes, freqs=False)
    # GPT-NeoX-Japanese's last layer: its dense_bias is returned beside the
    # attention module's output, for the decoder layer to add
    yield family("gpt_neox_japanese_last_layer", "GPTNeoXJapanese",
                 dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                      intermediate_multiple_size=1, vocab_size=16, max_position_embeddings=64,
                      rotary_pct=0.5, pad_token_id=0, bos_token_id=0, eos_token_id=0),
                 layer=1)


def v_norm_cases():
    """Gemma 3n's text model: q/k RMSNorms of plain weights, v RMS-normed
    without weights, softmax scale 1, a rope per layer type (the sliding
    layers' window 4), AltUp and Laurel around the attention; no layer
    shares another's keys and values (num_kv_shared_layers 0)."""
    gemma3n = dict(TINY, num_hidden_layers=2, sliding_window=4, num_kv_shared_layers=0,
                   layer_types=["sliding_attention", "full_attention"], laurel_rank=4,
                   altup_num_inputs=2, hidden_size_per_layer_input=8,
                   vocab_size_per_layer_input=16, rms_norm_eps=1e-5)
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 50000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    for name, layer in (("gemma3n_sliding", 0), ("gemma3n_full", 1)):
        yield family(name, "Gemma3nText", gemma3n, layer=layer, rope=rope, freqs=False,
                     model="Gemma3nForCausalLM")


def dsa_short_cases():
    """DeepSeek sparse attention while every query sees at most index_topk
    keys (24 here, over 12 tokens, positions to 16): the indexer keeps them
    all, and the
    layer is the dense latent one.  DeepSeek-V3.2 (yarn with mscale_all_dim,
    the softmax scale's), GLM-MoE-DSA's layer 1, which shares layer 0's
    top-k (indexer_types "shared": no indexer of its own)."""
    small = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=8,
                 q_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
                 intermediate_size=16, moe_intermediate_size=8, n_routed_experts=2,
                 num_experts_per_tok=1, n_shared_experts=1, first_k_dense_replace=1, n_group=1,
                 topk_group=1, vocab_size=16, max_position_embeddings=64, pad_token_id=0,
                 index_topk=24, index_n_heads=2, index_head_dim=8)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
    yield family("deepseek_v32_short", "DeepseekV32", dict(small, num_hidden_layers=1),
                 rope=yarn, pos=positions(5))
    yield family("glm_moe_dsa_shared", "GlmMoeDsa",
                 dict(small, num_hidden_layers=2, indexer_types=["full", "shared"]), layer=1,
                 pos=positions(5))


def misc_rows_cases():
    """Phi-4-multimodal's text layer: Phi-3's attention (fused qkv_proj) and
    longrope over 75% of each head, its vision and audio parts shrunk; each
    step of the cached run on one side of original_max_position_embeddings.
    Moshi's text decoder, its projections under .linear."""
    parts = dict(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    phi4 = dict({k: v for k, v in TINY.items() if k != "head_dim"},
                partial_rotary_factor=0.75, original_max_position_embeddings=16,
                vision_config=dict(parts, image_size=28, crop_size=28),
                audio_config=dict(parts, num_blocks=1, ext_pw_out_channel=8, input_size=8,
                                  depthwise_separable_out_channel=8, nemo_conv_channels=8,
                                  bias_max_distance=4))
    longrope = {"rope_type": "longrope", "original_max_position_embeddings": 16,
                "short_factor": [1.0, 1.5, 3.0], "long_factor": [1.0, 4.0, 12.0]}
    for name, start in (("short", 2), ("long", 28)):
        yield family(f"phi4_multimodal_longrope_{name}", "Phi4Multimodal", phi4, rope=longrope,
                     pos=positions(start))
    # Moshi's text decoder: each projection a MoshiLinear (q_proj.linear.weight ...)
    yield family("moshi_linear_names", "Moshi", dict(TINY, ffn_dim=16))


def qk_bias_gates_cases():
    """Persimmon: query_key_value packed per head ([H, 3, D]), biased, and
    q_layernorm / k_layernorm, one LayerNorm over head_dim with weight and
    bias shared by the heads (qk_layernorm, true by default), partial rotary
    0.5 (its default), rope_theta set (its default changed in transformers 5).
    AfMoE: an output gate of its own (gate_proj)."""
    persimmon = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=1,
                     intermediate_size=16, vocab_size=16, max_position_embeddings=64,
                     pad_token_id=0)
    yield family("persimmon_qk_layernorm", "Persimmon", persimmon, theta=25000.0)
    # AfMoE: the attention output times sigmoid(gate_proj(x)) before o_proj, q/k
    # RMSNorms, RoPE in the sliding layer (0), none in the full one (1)
    afmoe = dict(TINY, num_hidden_layers=2, sliding_window=4, attention_bias=True,
                 layer_types=["sliding_attention", "full_attention"], num_experts=2,
                 num_experts_per_tok=1, num_shared_experts=1, moe_intermediate_size=8)
    yield family("afmoe_gate_sliding", "Afmoe", afmoe)
    yield family("afmoe_gate_full_nope", "Afmoe", afmoe, layer=1)


def nanochat_cases():
    """NanoChat: rotate_half turned the other way (RoPE by the opposite
    angle), q and k RMS-normed without weights after RoPE; with biases
    (their negated values), GQA, and BF16 weights (their sign bits)."""
    yield family("nanochat_bias", "NanoChat", dict(TINY, num_hidden_layers=2, attention_bias=True),
                 layer=1)
    yield family("nanochat_bf16", "NanoChat", TINY, pos=positions(30), dtype=torch.bfloat16)


def gatefam_cases():
    """HRM-Text: two stacks of layers (L_module, H_module) run in cycles,
    each run of a layer a cache slot of its own (the layer number), its
    output gated by sigmoid(gate_proj(x)), saved as one attn.gqkv_proj (the
    gate's rows, q's, k's, v's): 2 layers a stack, H_cycles 2 of L_cycles 1
    (8 slots): slot 4, the L stack's layer 0 in the second cycle, and slot
    7, the H stack's layer 1 in the second."""
    hrm = dict({k: v for k, v in TINY.items() if k != "num_key_value_heads"},
               num_hidden_layers=2, H_cycles=2, L_cycles=1, L_bp_cycles=[1])
    yield family("hrm_text_slot_l", "HrmText", hrm, layer=4)
    yield family("hrm_text_slot_h", "HrmText", hrm, layer=7)
    # Laguna: the output times softplus(g_proj(x)), one gate per head (gating
    # true) or per feature, query heads per layer (layer 1's 2 of
    # num_attention_heads 4), q/k norms, a rope per layer type (the full
    # layer's over half of each head, base 500000), its sliding layer's window
    laguna = dict(TINY, num_hidden_layers=2, num_attention_heads_per_layer=[4, 2],
                  layer_types=["full_attention", "sliding_attention"], sliding_window=4,
                  num_experts=2, num_experts_per_tok=1, moe_intermediate_size=8,
                  shared_expert_intermediate_size=8)
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 500000.0,
                               "partial_rotary_factor": 0.5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    yield family("laguna_heads_sliding", "Laguna", laguna, layer=1, rope=rope, freqs=False)
    yield family("laguna_gate_per_feature", "Laguna", dict(laguna, gating="per-element"),
                 rope=rope, freqs=False)
    # Beam: its full layer without RoPE (rope_parameters' full_attention null),
    # q times (1 + (p + 1) / 2048)^0.1 (row 1 from position 3000: 1.09 ..),
    # the output times sigmoid(gate_proj(x) + gate_bias[h]), q/k norms
    beam = dict(TINY, num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"],
                sliding_window=4, num_experts=2, num_experts_per_tok=1, moe_intermediate_size=8,
                mlp_layer_types=["dense", "sparse"], n_group=1, topk_group=1)
    beam_rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                 "full_attention": None}
    yield family("beam_nope_scaled", "Beam", beam, layer=1, rope=beam_rope, freqs=False,
                 pos=positions(3000))
    # HY V4: DeepSeek-V3.2's latent attention and indexer (up to index_topk
    # keys: every key kept), rotate_half's rope, the output times
    # sigmoid(gate_proj(x)) per feature, sinks; saved as linear_gate and
    # learnable_sink_param
    hy = dict(hidden_size=32, num_attention_heads=4, kv_lora_rank=8, q_lora_rank=12,
              qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, intermediate_size=16,
              moe_intermediate_size=8, n_routed_experts=2, num_experts_per_tok=1,
              n_shared_experts=1, vocab_size=16, max_position_embeddings=64, pad_token_id=0,
              bos_token_id=1, eos_token_id=2, index_topk=24, index_n_heads=2, index_head_dim=8,
              num_hidden_layers=1, learnable_sink_init=0.5)
    yield family("hy_v4_gate_sinks", "HYV4", hy, pos=positions(5))


def gate_cases():
    """The attention output gated per head by a projection of its own,
    sigmoid(g_proj(x)) over each head's features: LFM3 (q/k norms, epsilon
    norm_eps; a convolution layer 0, a sliding layer 1, a full layer 2, each
    layer type's rope its own, default here: gate2_cases has the class's
    full layers' "proportional" rope), and Ling's latent attention
    (bailing_hybrid: a linear-attention layer 0, a latent one 1, saved
    under attention. with o_proj as dense)."""
    rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}
    lfm3 = dict(TINY, num_hidden_layers=3, sliding_window=4, norm_eps=0.01,
                layer_types=["conv", "sliding_attention", "full_attention"])
    yield family("lfm3_gate_sliding", "Lfm3", lfm3, layer=1, rope=rope, freqs=False)
    yield family("lfm3_gate_full", "Lfm3", lfm3, layer=2, rope=rope, freqs=False)
    bailing = dict(BAILING_TINY, max_position_embeddings=64)
    yield family("bailing_hybrid_gate", "BailingHybrid", bailing, layer=1, theta=600000.0)


def gemma4_cases():
    """Gemma 4's text model: a sliding layer (head_dim 8, 2 key/value
    heads, default rope) and full layers of their own shape (global_head_dim
    16 and num_global_key_value_heads 1, saved as per_layer_config), whose
    values come from k_proj (attention_k_eq_v: no v_proj, k_proj's gradient
    the sum) and whose rope is proportional (the first
    int(partial_rotary_factor * 16 // 2) of 8 pairs turn; with factor, their
    frequencies divided by it); q/k norms, v_norm, softmax scale 1; no
    per-layer inputs (they need input_ids)."""
    gemma4 = dict(TINY, num_hidden_layers=2, sliding_window=4, num_kv_shared_layers=0,
                  layer_types=["sliding_attention", "full_attention"], global_head_dim=16,
                  num_global_key_value_heads=1, attention_k_eq_v=True,
                  hidden_size_per_layer_input=0, rms_norm_eps=1e-5)
    sliding = {"rope_type": "default", "rope_theta": 10000.0}
    for name, layer, full in (
            ("gemma4_text_sliding", 0, {"rope_type": "proportional",
                                        "partial_rotary_factor": 0.25, "rope_theta": 1e6}),
            ("gemma4_text_full", 1, {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                     "rope_theta": 1e6}),
            ("gemma4_text_full_factor", 1, {"rope_type": "proportional", "factor": 4.0,
                                            "partial_rotary_factor": 0.5, "rope_theta": 1e4})):
        rope = {"sliding_attention": sliding, "full_attention": full}
        yield family(name, "Gemma4Text", gemma4, layer=layer, rope=rope, freqs=False,
                     model="Gemma4ForCausalLM")
    # Gemma4UnifiedTextConfig: no per-layer inputs; use_bidirectional_attention
    # "vision" by default (text tokens causal); the last case's full rope
    unified = {k: v for k, v in gemma4.items() if k != "hidden_size_per_layer_input"}
    yield family("gemma4_unified_text_full", "Gemma4UnifiedText", unified, layer=1,
                 rope={"sliding_attention": sliding, "full_attention": full}, freqs=False,
                 model="Gemma4UnifiedForCausalLM")


def sparse_cases():
    """Sparse attention's indexers while they keep every key: the dense layer.
    Qwen4-Exp's QSA (blocks of indexer_compress_ratio keys, indexer_budget of
    them kept, and the last incomplete block: every key up to 16 + 4 - 1 = 19,
    the keys to position 18), beside its gated q_proj, 1 + weight q/k norms
    and partial rotary; MiniMax-M3's "minimax_m3_sparse" layer (index_topk_blocks
    = 3 blocks of index_block_size = 4 keys by place: every key up to 12, the
    positions from 0), its rotary_dim read by no code.  And Cohere Compass's
    rope per layer type (its M-RoPE, or none), which needs no indexer."""
    qwen4 = dict(TINY, indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=8,
                 indexer_budget=16, indexer_compress_ratio=4, layer_types=["indexed_attention"],
                 hc_lowrank=4, num_experts=2, num_experts_per_tok=1, moe_intermediate_size=8,
                 shared_expert_intermediate_size=8, partial_rotary_factor=0.5)
    yield family("qwen4_exp_qsa", "Qwen4ExpText", qwen4, model="Qwen4ExpForCausalLM")
    minimax = dict(TINY, layer_types=["minimax_m3_sparse"], mlp_layer_types=["sparse"],
                   index_n_heads=2, index_head_dim=8, index_block_size=4, index_topk_blocks=3,
                   index_local_blocks=1, rotary_dim=4, num_local_experts=2,
                   num_experts_per_tok=1, shared_intermediate_size=8)
    yield family("minimax_m3_sparse", "MiniMaxM3VLText", minimax, model="MiniMaxM3VLForCausalLM",
                 pos=positions(0))
    # Cohere Compass: rope_parameters by layer type, the sliding layers' an
    # M-RoPE (interleaved sections, on 3-D positions), the full layers' null
    # (no RoPE); head_dim hidden_size / num_attention_heads
    compass = dict(TINY, num_hidden_layers=2, sliding_window=4,
                   layer_types=["sliding_attention", "full_attention"])
    by_type = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                     "mrope_section": [2, 1, 1]},
               "full_attention": None}
    yield family("cohere_compass_sliding_mrope", "CohereCompassText", compass, rope=by_type,
                 model="CohereCompassForCausalLM", pos=mrope_positions(), freqs=False)
    yield family("cohere_compass_full_nope", "CohereCompassText", compass, rope=by_type,
                 model="CohereCompassForCausalLM", layer=1)


def misc_cases():
    """RecurrentGemma's attention block (layer 1, beside a recurrent block):
    a window of 3 tokens, one key/value head, half of each head rotating,
    q/k/v biases by attention_bias and o_proj's always; MiMo-V2-Flash's
    layers."""
    yield family("recurrent_gemma_window", "RecurrentGemma",
                 dict(TINY, num_hidden_layers=2, block_types=["recurrent", "attention"],
                      attention_window_size=3, num_key_value_heads=1, attention_bias=True,
                      lru_width=32), layer=1, pos=positions(9))
    # MiMo-V2-Flash: value heads of 8 features beside q/k heads of 16 (padded
    # at load), v times attention_value_scale, a full layer (0) with one
    # key/value head and a sliding one (1) with two and sinks; 0.334 of 16
    # features rotating (int: 5, an odd count), a rope per layer type
    mimo = dict(TINY, head_dim=16, v_head_dim=8, num_key_value_heads=1, num_hidden_layers=2,
                layer_types=["full_attention", "sliding_attention"], sliding_window=4,
                attention_value_scale=0.6, attention_bias=True, n_routed_experts=2,
                num_experts_per_tok=1, moe_intermediate_size=8)
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 5e5,
                               "partial_rotary_factor": 0.334},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4,
                                  "partial_rotary_factor": 0.334}}
    yield family("mimo_v2_flash_full", "MiMoV2Flash", mimo, rope=rope, freqs=False)
    yield family("mimo_v2_flash_sliding", "MiMoV2Flash", mimo, layer=1, rope=rope, freqs=False)


def gate2_cases():
    """LFM3's ropes: its full layers' "proportional" rope (the class's
    default: partial_rotary_factor 0.5, the first 2 of head_dim 8's 4 pairs
    turning at base 1e6, the others not), and its sliding layers' default
    rope over all of head_dim whatever partial_rotary_factor says.  A.X-K2's
    q_gate_proj."""
    rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                  "partial_rotary_factor": 0.5},
            "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0,
                               "partial_rotary_factor": 0.5}}
    lfm3 = dict(TINY, num_hidden_layers=3, sliding_window=4, norm_eps=0.01,
                layer_types=["conv", "sliding_attention", "full_attention"])
    yield family("lfm3_proportional_full", "Lfm3", lfm3, layer=2, rope=rope, freqs=False)
    yield family("lfm3_default_rope_whole", "Lfm3", lfm3, layer=1, rope=rope, freqs=False)
    # A.X-K2: DeepSeek-V3.2's sparse latent attention (every query within index_topk keys:
    # the dense layer) whose q_gate_proj (saved as q_b_proj) reads the q latent after its norm
    # and before it, and gives each head its queries, then a sigmoid gate per output feature
    axk2 = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=8,
                q_lora_rank=6, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
                intermediate_size=16, moe_intermediate_size=8, n_routed_experts=2,
                num_experts_per_tok=1, n_shared_experts=1, gated_norm_rank=4,
                mlp_layer_types=["dense"], num_hidden_layers=1, vocab_size=16,
                max_position_embeddings=64, pad_token_id=0, index_topk=24, index_n_heads=2,
                index_head_dim=8)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
            "mscale": 1.0, "mscale_all_dim": 1.0}
    yield family("axk2_q_gate_proj", "AXK2", axk2, rope=yarn, pos=positions(5))


def dots3_cases():
    """dots.note's text model (Dots3NoteTextConfig): latent attention with
    the normed latents times (hidden_size / rank)^0.5, the rotated key
    RMS-normed (k_rope_only_layernorm), interleaved rope, a sigmoid gate per
    head (g_proj); an indexed_attention layer 0 (the indexer while it keeps
    every key: index_topk 24 over 12 tokens; head_dim 16 beside 8 + 4, which
    only the rope's partial_rotary_factor 4 / 16 reads) and a sliding layer
    1 (window 4, a rope of its own) whose heads, ranks and head dims all
    differ from layer 0's: given as per_layer_config, and as the swa_* keys
    that the config class turns into it (the saved config.json edited back:
    per_layer_config removed)."""
    sliding = dict(num_attention_heads=2, num_key_value_heads=2, q_lora_rank=10, kv_lora_rank=6,
                   head_dim=12, qk_nope_head_dim=6, qk_rope_head_dim=6, v_head_dim=4)
    dots3 = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=8,
                 q_lora_rank=12, head_dim=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                 v_head_dim=6, intermediate_size=16, moe_intermediate_size=8, n_routed_experts=2,
                 num_experts_per_tok=1, shared_experts_intermediate_size=8, vocab_size=16,
                 max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 index_topk=24, index_n_heads=2, index_head_dim=8, num_hidden_layers=2,
                 layer_types=["indexed_attention", "sliding_attention"], sliding_window=4,
                 rope_parameters={
                     "indexed_attention": {"rope_type": "default", "rope_theta": 10000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 50000.0}})
    per_layer = dict(dots3, per_layer_config={1: sliding})
    swa = dict(dots3, **{f"swa_{k}": v for k, v in sliding.items()})
    for name, kw, layer in (("dots3_note_text_indexed", per_layer, 0),
                            ("dots3_note_text_per_layer_sliding", per_layer, 1)):
        yield family(name, "Dots3NoteText", kw, layer=layer, rope=None, theta=None,
                     model="Dots3NoteForCausalLM", freqs=False)
    yield family("dots3_note_text_swa_sliding", "Dots3NoteText", swa, layer=1, rope=None,
                 theta=None, model="Dots3NoteForCausalLM", freqs=False,
                 config_keys=dict({f"swa_{k}": v for k, v in sliding.items()},
                                  per_layer_config=None))


def partial_whole_cases():
    """partial_rotary_factor where the family's default rope reads none
    (Mistral's, Llama's and most families' compute_default_rope_parameters):
    all of head_dim turns.  Ling's latent attention (bailing_hybrid) with a
    dynamic rope past max_position_embeddings, which its config saves as
    model_max_length."""
    yield family("mistral_partial_whole", "Mistral",
                 dict(TINY, head_dim=16, sliding_window=None),
                 rope={"rope_type": "default", "rope_theta": 10000.0,
                       "partial_rotary_factor": 0.5})
    bailing = dict(BAILING_TINY, max_position_embeddings=8)
    # past max_position_embeddings each step's length gives the dynamic rope
    # other frequencies than the whole input's: no y_cache
    yield family("bailing_hybrid_dynamic", "BailingHybrid", bailing, layer=1,
                 rope={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 600000.0},
                 pos=positions(9), cached=False)


def ignored_keys_cases():
    """A key a family's config keeps and its code reads nowhere: Gemma 3's
    attn_logit_softcapping (Gemma3Attention passes no softcap to any
    attention function); a cap of 1.0, which would flatten every logit,
    leaves the layer as it is."""
    yield family("gemma3_softcap_ignored", "Gemma3Text",
                 dict(GEMMA3_TEXT, attn_logit_softcapping=1.0), rope=GEMMA3_ROPE, freqs=False,
                 model="Gemma3ForCausalLM")


def glm_vl_cases():
    """The GLM vision-language families' text layers on 3-D positions
    (mrope_positions) and on text ones: GLM-4.1V's (interleaved pairs, q/k/v
    biases, head_dim hidden_size / num_attention_heads, half of each head
    rotating, M-RoPE in chunked sections), GLM-OCR's (the same, no biases),
    GLM-4.5V's (rotate_half pairs, partial_rotary_factor 0.5 by its config
    class's default, attention_bias) and GLM-Image's (rotate_half, attention_bias);
    GLM-4.1V whole, with a tiny vision tower (its config.json's text_config,
    model.language_model names)."""
    glm = dict(TINY, hidden_size=64, partial_rotary_factor=0.5)
    del glm["head_dim"]
    rope = {"rope_type": "default", "mrope_section": [2, 1, 1]}
    for name, family_name, kw in (("glm4v_text", "Glm4vText", glm),
                                  ("glm_ocr_text", "GlmOcrText", glm),
                                  ("glm_image_text", "GlmImageText", glm)):
        yield family(name + "_mrope", family_name, kw, rope=rope, model=family_name + "Model",
                     pos=mrope_positions(), freqs=False)
        yield family(name, family_name, kw, rope=rope, model=family_name + "Model")
    # GLM-4.5V: no partial_rotary_factor given (its class's 0.5), head_dim given
    moe = dict(TINY, head_dim=16, n_routed_experts=2, num_experts_per_tok=1,
               moe_intermediate_size=8, first_k_dense_replace=1, n_group=1, topk_group=1)
    yield family("glm4v_moe_text_mrope", "Glm4vMoeText", moe, rope=rope,
                 model="Glm4vMoeTextModel", pos=mrope_positions(), freqs=False)
    vision = dict(depth=1, hidden_size=8, out_hidden_size=64, intermediate_size=8, num_heads=1,
                  patch_size=2, image_size=8, spatial_merge_size=1, temporal_patch_size=1)
    config = transformers.Glm4vConfig(text_config=config_of("Glm4vText", glm, rope),
                                      vision_config=vision)
    yield ("glm4v_multimodal", transformers.Glm4vForConditionalGeneration, config, 0,
           mrope_positions(), {"freqs": False})


# A composite model's vision (or audio) tower shrunk: these keys, where its
# config class has them (an 8 x 8 image of 2 x 2 patches, one layer, a 4 x 4
# grid of learned positions); and its projector's.
SMALL_TOWER = dict(hidden_size=32, num_hidden_layers=1, depth=1, num_attention_heads=2,
                   num_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                   out_hidden_size=32, text_hidden_size=32, patch_size=2, image_size=8,
                   num_position_embeddings=16, num_patches=16, pos_emb_height=4,
                   pos_emb_width=4, deepstack_visual_indexes=[0])
SMALL_PROJECTOR = dict(projector_hidden_size=32, projection_hidden_size=32)


# Qwen-Omni's audio tower shrunk likewise (one layer of 32 features)
SMALL_AUDIO = dict(d_model=32, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=64,
                   output_dim=32, num_mel_bins=16, downsample_hidden_size=16,
                   max_source_positions=64, n_window=4)


def wrapped(name, model_type, text_config, layer=0, pos=None, **opts):
    """A case of the multimodal model `model_type` (its image-text-to-text
    class) whose text_config is text_config, beside a tiny vision tower
    (SMALL_TOWER, SMALL_PROJECTOR), saved whole; its config.json's text_config without
    model_type (the wrapper's row reads it: the class the wrapper gives it,
    case.json "config_edit")."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    config_cls = config_class(model_type)
    config = config_cls(text_config=text_config, **small_parts(config_cls))
    model_cls = getattr(transformers, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES[model_type])
    opts.setdefault("config_keys", {"text_config/model_type": None})
    return (name, model_cls, config, layer, positions(7) if pos is None else pos, opts)


def small_parts(config_cls):
    """config_cls's keyword arguments that shrink its vision and audio
    towers and its projector (SMALL_TOWER, SMALL_AUDIO, SMALL_PROJECTOR)."""
    parts = {}
    for part in ("vision_config", "audio_config"):
        sub = getattr(config_cls(), part, None)
        if sub is not None:
            keys = sub.to_dict()
            small = dict(SMALL_TOWER, **SMALL_AUDIO) if part == "audio_config" else SMALL_TOWER
            parts[part] = {k: v for k, v in small.items() if k in keys}
    top = config_cls().to_dict()
    parts.update({k: v for k, v in SMALL_PROJECTOR.items() if k in top})
    return parts


def omni_cases():
    """Qwen2.5-Omni's and Qwen3-Omni's thinker text models (Qwen2.5-VL's
    attention and chunked M-RoPE; Qwen3-MoE's q/k norms with Qwen3-VL's
    interleaved M-RoPE) on 3-D positions: the text model, the thinker (its
    config's text_config, without model_type), and the whole model without its talker
    (enable_audio_output false: thinker_config's text_config, its layers
    under thinker.)."""
    rope = {"rope_type": "default", "mrope_section": [2, 1, 1]}
    moe = dict(TINY, num_experts=2, num_experts_per_tok=1, moe_intermediate_size=8)
    for prefix, family_name, thinker, whole, kw in (
            ("qwen2_5_omni", "Qwen2_5OmniText", "qwen2_5_omni_thinker", "qwen2_5_omni", TINY),
            ("qwen3_omni_moe", "Qwen3OmniMoeText", "qwen3_omni_moe_thinker", "qwen3_omni_moe",
             moe)):
        text = config_of(family_name, kw, rope)
        yield family(prefix + "_text_mrope", family_name, kw, rope=rope,
                     model=family_name.replace("Text", "ThinkerTextModel"),
                     pos=mrope_positions(), freqs=False)
        thinker_cls = config_class(thinker)
        thinker_config = thinker_cls(text_config=text, **small_parts(thinker_cls))
        yield (prefix + "_thinker_mrope", getattr(transformers, thinker_cls.__name__.replace(
            "Config", "ForConditionalGeneration")), thinker_config, 0, mrope_positions(),
            {"freqs": False, "config_keys": {"text_config/model_type": None}})
        whole_cls = config_class(whole)
        config = whole_cls(thinker_config=thinker_config, enable_audio_output=False)
        yield (prefix + "_mrope", getattr(transformers, whole_cls.__name__.replace(
            "Config", "ForConditionalGeneration")), config, 0, mrope_positions(), {"freqs": False})


def config_class(model_type):
    """transformers' config class of model_type."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type]


def wrapper_cases():
    """Vision-language models whose text model is another family's, their
    text_config without model_type (read as the class the wrapper gives
    it): EXAONE 4.5 (EXAONE 4's sliding layer; its text_config named
    exaone4_5_text), Kimi K2.5 (DeepSeek-V3's latent attention, its
    layers saved as language_model.model.blocks.N), LFM3-VL (LFM3's sliding layer), VideoLLaMA 3
    (Qwen2's), Cohere Compass (its M-RoPE sliding layer), MiniMax-M3-VL
    (its sparse layer while it keeps every key), Cosmos3-Edge (Llama's
    attention with Qwen3-VL's interleaved M-RoPE, default rope only),
    PaddleOCR-VL (Qwen2.5-VL's attention, all four projections biased by
    use_bias), Granite-Docling and Granite 4 Vision (Granite's attention:
    attention_multiplier the softmax scale, attention_bias on all four), each
    on 3-D positions where its text model takes them."""
    layers = dict(num_hidden_layers=2, sliding_window=4,
                  layer_types=["sliding_attention", "full_attention"])
    # (Exaone4_5_Config fails on a text_config without model_type, and renames
    # the "exaone4_5_text" its checkpoints give exaone4)
    yield wrapped("exaone4_5_sliding", "exaone4_5", config_of("Exaone4", dict(TINY, **layers)),
                  config_keys={"text_config/model_type": "exaone4_5_text"})
    kimi = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=8,
                qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, intermediate_size=16,
                moe_intermediate_size=8, n_routed_experts=2, num_experts_per_tok=1,
                n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1,
                vocab_size=16, max_position_embeddings=64, pad_token_id=0, num_hidden_layers=1,
                q_lora_rank=12)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
    yield wrapped("kimi_k25_yarn", "kimi_k25", config_of("DeepseekV3", kimi, yarn),
                  pos=positions(5))
    lfm3 = dict(TINY, num_hidden_layers=2, sliding_window=4, norm_eps=0.01,
                layer_types=["sliding_attention", "full_attention"])
    lfm3_rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                 "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0,
                                    "partial_rotary_factor": 0.5}}
    yield wrapped("lfm3_vl_sliding", "lfm3_vl", config_of("Lfm3", lfm3, lfm3_rope), freqs=False)
    yield wrapped("video_llama_3_qwen2", "video_llama_3", config_of("Qwen2", TINY))
    compass = dict(TINY, num_hidden_layers=2, sliding_window=4,
                   layer_types=["sliding_attention", "full_attention"])
    by_type = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                     "mrope_section": [2, 1, 1]},
               "full_attention": None}
    yield wrapped("cohere_compass_sliding_mrope_vl", "cohere_compass",
                  config_of("CohereCompassText", compass, by_type), pos=mrope_positions(),
                  freqs=False)
    minimax = dict(TINY, layer_types=["minimax_m3_sparse"], mlp_layer_types=["sparse"],
                   index_n_heads=2, index_head_dim=8, index_block_size=4, index_topk_blocks=3,
                   index_local_blocks=1, num_local_experts=2, num_experts_per_tok=1,
                   shared_intermediate_size=8)
    yield wrapped("minimax_m3_vl_sparse", "minimax_m3_vl", config_of("MiniMaxM3VLText", minimax),
                  pos=positions(0))
    paddle = dict(TINY, use_bias=True)
    paddle_rope = {"rope_type": "default", "mrope_section": [2, 1, 1]}
    yield family("paddleocr_vl_text_mrope", "PaddleOCRText", paddle, rope=paddle_rope,
                 model="PaddleOCRTextModel", pos=mrope_positions(), freqs=False)
    yield wrapped("paddleocr_vl_bias", "paddleocr_vl",
                  config_of("PaddleOCRText", paddle, paddle_rope), pos=mrope_positions(),
                  freqs=False)
    granite = dict(TINY, attention_multiplier=0.2, attention_bias=True)
    yield family("granite_docling_text_multiplier", "GraniteDoclingText", granite,
                 model="GraniteDoclingTextModel")
    yield wrapped("granite_docling_multiplier", "granite_docling",
                  config_of("GraniteDoclingText", granite))
    yield family("granite4_vision_text_multiplier", "Granite4VisionText", granite,
                 model="Granite4VisionTextModel")
    ocr2 = dict(_SMALL, attention_bias=True, mlp_layer_types=["dense"])
    yield family("deepseek_ocr2_text_bias", "DeepseekOcr2Text", ocr2, model="DeepseekOcr2TextModel")
    cosmos = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]}
    cosmos_kw = dict(TINY, attention_bias=True)
    yield family("cosmos3_edge_text_mrope", "Cosmos3EdgeText", cosmos_kw, rope=cosmos,
                 model="Cosmos3EdgeTextModel", pos=mrope_positions(), freqs=False)
    yield family("cosmos3_edge_text", "Cosmos3EdgeText", cosmos_kw, rope=cosmos,
                 model="Cosmos3EdgeTextModel")
    yield wrapped("cosmos3_edge_mrope", "cosmos3_edge", config_of("Cosmos3EdgeText", TINY, cosmos),
                  pos=mrope_positions(), freqs=False)


def named_seed_cases():
    """Cases seeded by their name (name_seed), not their place, so that cases
    added side by side keep their fixtures: the families of issue 41 on."""
    yield from rows_more_cases()
    yield from windows_cases()
    yield from mla_fused_cases()
    yield from rows_plain_cases()
    yield from hybrids_cases()
    yield from qk_norms_cases()
    yield from rows_more2_cases()
    yield from v_norm_cases()
    yield from dsa_short_cases()
    yield from misc_rows_cases()
    yield from qk_bias_gates_cases()
    yield from nanochat_cases()
    yield from gatefam_cases()
    yield from gate_cases()
    yield from gemma4_cases()
    yield from sparse_cases()
    yield from misc_cases()
    yield from gate2_cases()
    yield from dots3_cases()
    yield from partial_whole_cases()
    yield from ignored_keys_cases()
    yield from glm_vl_cases()
    yield from wrapper_cases()
    yield from omni_cases()
    from encoder_cases import encoder_cases  # (it imports this module)
    yield from encoder_cases()
    from rope_rows_cases import rope_rows_cases  # (it imports this module too)
    yield from rope_rows_cases()
    from text_rows_cases import text_rows_cases  # (and this one)
    yield from text_rows_cases()
    from encoder_audio_rows_cases import encoder_audio_rows_cases  # (it imports this module)
    yield from encoder_audio_rows_cases()
    from perception_rows_cases import perception_rows_cases  # (and this one)
    yield from perception_rows_cases()
    from null_theta_cases import null_theta_cases  # (it imports this module too)
    yield from null_theta_cases()


def name_seed(name):
    return 1000 + zlib.crc32(name.encode()) % 1_000_000


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir, only = sys.argv[1], set(sys.argv[2:])
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    failed = 0
    specs = [c for c in list(cases()) + list(mask_cases()) + list(vl_cases()) + list(mla_cases())
             + list(late_cases()) if c is not None]
    placed = len(specs)
    specs += [c for c in named_seed_cases() if c is not None]
    unknown = only - {c[0] for c in specs}
    if unknown:
        sys.exit(f"no case {' '.join(sorted(unknown))}")
    for i, (name, model_cls, config, layer, pos, opts) in enumerate(specs):
        if only and name not in only:
            continue
        seed = 1000 + i if i < placed else name_seed(name)
        try:
            opts = dict(opts)
            writer = opts.pop("writer", write_case)  # encoder_cases' write_bert_case
            writer(out_dir, name, model_cls, config, layer, pos, 1000 + seed, **opts)
        except Exception as e:  # report every case, then fail
            import traceback
            traceback.print_exc()
            print(f"{name}: FAILED: {e}")
            failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
