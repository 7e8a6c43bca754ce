#!/usr/bin/env python3
"""make_hf_cases.py: reference cases made by Hugging Face transformers itself.

    python3 tests/hf/make_hf_cases.py OUT_DIR

Needs torch, transformers and safetensors (not in Debian 12: run it where they
are installed; the cases it writes are committed under tests/hf/, and
tests/test_hf.sh runs the CLI on them).  Each case
is a tiny checkpoint saved by the model class's own save_pretrained, so its
config.json and tensor names are what that transformers version writes, and
the outputs its own modeling code computes:

    OUT_DIR/<case>/config.json         save_pretrained's config
    OUT_DIR/<case>/model.safetensors   save_pretrained's weights (F32 or BF16)
    OUT_DIR/<case>/case.json           {"layer": L, "rotary_dim": R, "grads": bool,
                                        "freqs": bool, "mla": bool (latent
                                        attention), ...}
    OUT_DIR/<case>/x.npy               f32 [B, S, hidden]: layer L's self_attn input
    OUT_DIR/<case>/pos.npy             i64 [B, S]: the position_ids given to the model
                                       ([3, B, S] for the Qwen-VL cases: M-RoPE's
                                       temporal, height and width rows)
    OUT_DIR/<case>/y.npy               f32 [B, S, hidden]: layer L's self_attn output
    OUT_DIR/<case>/cos.npy, sin.npy    f32 [B, S, R]: the rotary embedding it used
                                       (case.json "freqs": when it is the config's)
    OUT_DIR/<case>/dy.npy, grads.npz   (grads cases) DY, and dL/dX ("x") and each
                                       projection weight's dL/dW for L = sum(Y * DY)

The model runs in float32 with eager attention, on the CPU, in eval mode; X is
captured by a forward hook on layers[L].self_attn while the whole model runs
on random inputs_embeds with explicit position_ids.  Weights are random
(normal, std 0.3), wider than the default init so that the softmax is far
from uniform.  BF16 and F16 cases round the weights before computing.
Positions stay below 64, where float32 rotary angles are exact to ~4e-6.
"""
import copy
import inspect
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

B, S = 2, 12


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
    rope_theta + rope_scaling (v4)."""
    params = inspect.signature(config_cls.__init__).parameters
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
            elif "q_norm" in name or "k_norm" in name or "a_layernorm" in name:
                p.copy_(1.0 + torch.randn(p.shape, generator=gen) * 0.3)
            if dtype is not None:
                p.copy_(p.to(dtype).float())


def attention_of(model, layer):
    """layers[layer].self_attn of a ForCausalLM (model.model.layers) or of a
    text model (model.layers: the Qwen-VL cases)."""
    return getattr(model, "model", model).layers[layer].self_attn


def run_layer(model, layer, embeds, pos):
    """Runs the model; returns (args, kwargs, x, y, cos, sin) of layers[layer].self_attn.
    3-D position_ids (Qwen-VL) go with an all-ones attention_mask: without
    one, transformers versions that read row 0 as text positions would take
    an image's repeated temporal ids for packed sequences."""
    seen = {}

    def hook(module, args, kwargs, output):
        seen["args"], seen["kwargs"] = args, dict(kwargs)
        seen["y"] = output[0] if isinstance(output, tuple) else output

    attn = attention_of(model, layer)
    handle = attn.register_forward_hook(hook, with_kwargs=True)
    mask = torch.ones(B, S, dtype=torch.int64) if pos.dim() == 3 else None
    with torch.no_grad():
        model(inputs_embeds=embeds, position_ids=pos, attention_mask=mask, use_cache=False)
    handle.remove()
    args, kwargs = seen["args"], seen["kwargs"]
    x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
    emb = kwargs.get("position_embeddings")
    # (cos, sin) as Llama gives them; None where the layer takes another form
    # (Llama 4's complex freqs_cis) or none
    cos, sin = emb if isinstance(emb, tuple) else (None, None)
    return args, kwargs, x, seen["y"], cos, sin


def grads_of(model, layer, args, kwargs, x, dy):
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
    prefix = next(n for n, m in model.named_modules() if m is attn) + "."  # as saved
    for pname, p in attn.named_parameters():
        grads[prefix + pname] = p.grad.numpy().astype(np.float32)
    return grads


def write_case(out_dir, name, model_cls, config, layer, pos, seed, grads=False, dtype=None,
               freqs=True):
    """dtype: None (F32 weights), torch.bfloat16 or torch.float16: the weights
    are rounded to it, computed with in float32, and saved in it.  freqs:
    whether the layer rotates by the config's global rope (test_hf.sh then
    checks `ropeattn freqs` against its tables; not so for Gemma 3's sliding
    layers, with a rope of their own, nor Llama 4's complex table)."""
    gen = torch.Generator().manual_seed(seed)
    model = build(model_cls, config)
    randomize(model, gen, dtype)
    embeds = torch.randn(B, S, config.hidden_size, generator=gen)
    args, kwargs, x, y, cos, sin = run_layer(model, layer, embeds, pos)

    # The same in float64, to show how far float32 HF is from exact.
    model64 = copy.deepcopy(model).double()
    _, _, _, y64, _, _ = run_layer(model64, layer, embeds.double(), pos)
    rel64 = float((y.double() - y64).abs().max() / y64.abs().max())

    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    (copy.deepcopy(model).to(dtype) if dtype is not None else model).save_pretrained(
        d, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))
    np.save(os.path.join(d, "x.npy"), x.detach().numpy().astype(np.float32))
    np.save(os.path.join(d, "pos.npy"), pos.numpy().astype(np.int64))
    np.save(os.path.join(d, "y.npy"), y.detach().numpy().astype(np.float32))
    freqs = freqs and cos is not None
    if freqs:
        np.save(os.path.join(d, "cos.npy"), cos.numpy().astype(np.float32))
        np.save(os.path.join(d, "sin.npy"), sin.numpy().astype(np.float32))
    if grads:
        dy = torch.randn(y.shape, generator=gen)
        np.save(os.path.join(d, "dy.npy"), dy.numpy().astype(np.float32))
        np.savez(os.path.join(d, "grads.npz"), **grads_of(model, layer, args, kwargs, x, dy))
    info = {"layer": layer, "rotary_dim": int(cos.shape[-1]) if freqs else None,
            "grads": grads, "freqs": freqs, "mla": getattr(config, "kv_lora_rank", None) is not None,
            "weights": {None: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}[dtype],
            "f32_vs_f64": rel64,
            "transformers": transformers.__version__, "torch": torch.__version__}
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: max|y| {float(y.abs().max()):.3g}, rotary_dim {info['rotary_dim']}, "
          f"HF float32 vs float64 {rel64:.2e}")
    with open(os.path.join(d, "config.json")) as f:
        print("  config:", json.dumps(json.load(f), sort_keys=True))


def llama(theta, rope, hidden=32, heads=4, kv=2, head_dim=16, layers=1, max_pos=64):
    """head_dim 16 with hidden 32 and 4 heads: H * head_dim = 64 != hidden, as
    in Qwen3 or Gemma; head_dim None: hidden / heads."""
    extra = {} if head_dim is None else {"head_dim": head_dim}
    return make_config(LlamaConfig, theta, rope, hidden_size=hidden, num_attention_heads=heads,
                       num_key_value_heads=kv, num_hidden_layers=layers, intermediate_size=32,
                       vocab_size=32, max_position_embeddings=max_pos, **extra)


def cases():
    """(name, model class, config, layer, positions, options)."""
    longrope = {"rope_type": "longrope", "original_max_position_embeddings": 16,
                "short_factor": [1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0],
                "long_factor": [1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 16.0]}
    yield ("llama_default", LlamaForCausalLM,
           llama(10000.0, None, head_dim=None, layers=2), 1, positions(3), {"grads": True})
    yield ("llama_f16", LlamaForCausalLM,
           llama(10000.0, None, kv=1, head_dim=None), 0, positions(40), {"dtype": torch.float16})
    yield ("llama_linear_mha", LlamaForCausalLM,
           llama(10000.0, {"rope_type": "linear", "factor": 4.0}, kv=4), 0, positions(20), {})
    dyn = {"rope_type": "dynamic", "factor": 2.0}
    yield ("llama_dynamic_long", LlamaForCausalLM,
           llama(10000.0, dyn, kv=1, max_pos=16), 0, positions(29), {})
    yield ("llama_dynamic_short", LlamaForCausalLM,
           llama(10000.0, dyn, kv=1, max_pos=16), 0, positions(3), {})
    yield ("llama_yarn", LlamaForCausalLM,
           llama(10000.0, {"rope_type": "yarn", "factor": 2.0,
                           "original_max_position_embeddings": 16}), 0, positions(48), {})
    yield ("llama_yarn_mscale", LlamaForCausalLM,
           llama(10000.0, {"rope_type": "yarn", "factor": 8.0, "mscale": 1.0,
                           "mscale_all_dim": 0.5, "beta_fast": 16.0, "beta_slow": 2.0},
                 max_pos=16), 0, positions(40), {"grads": True})
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
    # q/k/v biases (Qwen2), per-head q/k RMSNorm (Qwen3; its gradients are
    # not in the committed case, which was made before the CLI ran Qwen3).
    for name, family, extra, grads in (
            ("stablelm_partial", "StableLm", {"partial_rotary_factor": 0.25}, True),
            ("qwen2_bias", "Qwen2", {}, True),
            ("qwen3_qknorm", "Qwen3", {"head_dim": 16}, False)):
        config_cls = getattr(transformers, family + "Config", None)
        model_cls = getattr(transformers, family + "ForCausalLM", None)
        if config_cls is None or model_cls is None:
            print(f"{family} is not in this transformers: no {name} case")
            continue
        yield (name, model_cls, make_config(config_cls, 10000.0, None, **small, **extra),
               0, positions(7), {"grads": grads})


def mask_cases():
    """Issue 20's families beyond their windows (S = 12 tokens): Mistral's
    window on every layer, Qwen2's from max_window_layers on, Gemma 2's
    soft-cap and even sliding layers, Gemma 3's sliding layer (local rope),
    gpt-oss's sinks on a sliding and a full layer, Llama 4's chunks of 8."""
    small = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=32, vocab_size=32, max_position_embeddings=64)
    specs = (
        ("mistral_window", "Mistral", dict(num_hidden_layers=1, sliding_window=4), 0,
         {"grads": True}),
        ("qwen2_window", "Qwen2", dict(num_hidden_layers=2, use_sliding_window=True,
                                       sliding_window=4, max_window_layers=1), 1, {}),
        ("gemma2_softcap_window", "Gemma2", dict(num_hidden_layers=2, head_dim=16,
                                                 sliding_window=4, query_pre_attn_scalar=16,
                                                 attn_logit_softcapping=1.0), 0,
         {"grads": True}),
        ("gemma2_softcap_full", "Gemma2", dict(num_hidden_layers=2, head_dim=16,
                                               sliding_window=4, query_pre_attn_scalar=16,
                                               attn_logit_softcapping=1.0), 1, {}),
        ("gemma3_window", "Gemma3Text", dict(num_hidden_layers=1, head_dim=16,
                                             sliding_window=4, query_pre_attn_scalar=16,
                                             rope_local_base_freq=10000.0), 0,
         {"freqs": False}),
        ("gpt_oss_sliding", "GptOss", dict(num_hidden_layers=2, head_dim=16, sliding_window=4,
                                           num_local_experts=2, num_experts_per_tok=1), 0,
         {"grads": True}),
        ("gpt_oss_full", "GptOss", dict(num_hidden_layers=2, head_dim=16, sliding_window=4,
                                        num_local_experts=2, num_experts_per_tok=1), 1, {}),
        ("llama4_chunks", "Llama4Text", dict(num_hidden_layers=1, head_dim=16,
                                             attention_chunk_size=8, num_local_experts=2,
                                             num_experts_per_tok=1, intermediate_size_mlp=32),
         0, {"freqs": False, "grads": True}),
    )
    for name, family, extra, layer, opts in specs:
        config_cls = getattr(transformers, family + "Config", None)
        model_cls = getattr(transformers, family.replace("Text", "") + "ForCausalLM", None)
        if config_cls is None or model_cls is None:
            print(f"{family} is not in this transformers: no {name} case")
            continue
        yield (name, model_cls, make_config(config_cls, 10000.0, None, **dict(small, **extra)),
               layer, positions(5), opts)


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


def vl_cases():
    """Issue 22's M-RoPE: the text model of Qwen2-VL (chunked sections,
    q/k/v biases) and of Qwen3-VL (interleaved sections, q/k norms) on 3-D
    position_ids.  Qwen2-VL's position_embeddings are per component
    ([3, B, S, D], put together inside its attention): no freqs tables;
    Qwen3-VL's are the interleaved [B, S, D] ropeattn freqs writes."""
    small = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                 num_hidden_layers=1, intermediate_size=32, vocab_size=32,
                 max_position_embeddings=64)
    specs = (
        ("qwen2_vl_mrope", "Qwen2VL", {"mrope_section": [2, 3, 3]}, {}, {"freqs": False}),
        ("qwen3_vl_mrope", "Qwen3VL", {"mrope_section": [3, 3, 2], "mrope_interleaved": True},
         {"head_dim": 16, "attention_bias": False}, {}),
    )
    for name, family, rope, extra, opts in specs:
        config_cls = getattr(transformers, family + "TextConfig", None)
        model_cls = getattr(transformers, family + "TextModel", None)
        if config_cls is None or model_cls is None:
            print(f"{family} is not in this transformers: no {name} case")
            continue
        config = make_config(config_cls, 10000.0, dict(rope, rope_type="default"),
                             **dict(small, **extra))
        yield (name, model_cls, config, 0, mrope_positions(), dict(opts, grads=True))


def mla_cases():
    """Latent attention (DeepSeek-V2-Lite's shape: q_proj; V3's: q_a_proj ..
    q_b_proj, attention_bias; V3 with rope_interleave false, BF16 weights),
    yarn with mscale / mscale_all_dim where the class applies it to the
    softmax scale.  transformers' DeepseekV2Attention does so since its PR
    #47435; an older one gets a V2 case without mscale_all_dim (its
    reference would otherwise be the scale DeepSeek's code does not use)."""
    small = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16,
                 qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12, intermediate_size=32,
                 moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2,
                 n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1,
                 vocab_size=32, max_position_embeddings=64)
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
         1, {"grads": True, "freqs": False}),
        ("deepseek_v3", "DeepseekV3", dict(yarn, mscale=1.0, mscale_all_dim=1.0),
         dict(num_hidden_layers=1, q_lora_rank=24, attention_bias=True), 0, {"grads": True}),
        ("deepseek_v3_half_bf16", "DeepseekV3", None,
         dict(num_hidden_layers=1, q_lora_rank=24, rope_interleave=False), 0,
         {"dtype": torch.bfloat16}),
    )
    for name, family, rope, extra, layer, opts in specs:
        config_cls = getattr(transformers, family + "Config", None)
        model_cls = getattr(transformers, family + "ForCausalLM", None)
        if config_cls is None or model_cls is None:
            print(f"{family} is not in this transformers: no {name} case")
            continue
        yield (name, model_cls, make_config(config_cls, 10000.0, rope, **dict(small, **extra)),
               layer, positions(5), opts)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(1)
    failed = 0
    for seed, (name, model_cls, config, layer, pos, opts) in enumerate(
            list(cases()) + list(mask_cases()) + list(vl_cases()) + list(mla_cases())):
        try:
            write_case(out_dir, name, model_cls, config, layer, pos, 1000 + seed, **opts)
        except Exception as e:  # report every case, then fail
            import traceback
            traceback.print_exc()
            print(f"{name}: FAILED: {e}")
            failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
