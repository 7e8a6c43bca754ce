#!/usr/bin/env python3
"""sweep.py: `ropeattn attention` on a tiny checkpoint of every family that
list_families.py lists, against transformers' own layers.

    .venv-hf/bin/python tests/hf_sweep/sweep.py FAMILIES.json WORK_DIR CLI [MODEL_TYPE...]
                                                            (make hf-sweep)

For each family: a model built by transformers from its config class with
shrunk sizes (tiny_config below: hidden 64, 2 layers, 4 heads of 16, 2
key/value heads, vocabulary 128, 4 experts; a composite model's vision or
audio parts shrunk too), random weights (tests/hf_e2e/models.py's), saved by
save_pretrained under WORK_DIR/<model_type>/ (kept for the next run while
its config and transformers' version are the same), and each layer's
attention module's input and output captured by a forward hook while the
whole model runs on 2 x 24 tokens (float32, eager).  Then, per layer, the
CLI on the checkpoint folder, without and with --prefill 12 (its KV cache),
compared within TOL of max|y| (--prefill past a longrope's original length
where the input is past it: prefill_length):

    runs      every layer's attention, forward and cached, within TOL
    refused   the CLI exits non-zero (its message is recorded; the
              standard: it names what the library lacks)
    MISMATCH  the CLI exits 0 with an output off by more than TOL: the
              worst bug; the table gives the command that shows it
    no model  transformers could not build the tiny model (the sweep's
              config, not the library: the reason is recorded)

Writes WORK_DIR/summary.json and WORK_DIR/summary.md, prints the table and
exits 1 when any family is a MISMATCH.
"""
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
import models  # noqa: E402
from make_hf_cases import attention_name  # noqa: E402

TOL = 1e-4  # of max|y|
MAX_PARAMETERS = 4_000_000  # a bigger "tiny" model has a size the sweep did not shrink
BATCH, SEQ, PREFILL = 2, 24, 12
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
# Keys a family's config class checks beyond the common ones (by the text
# config's model type).
# (cohere_compass_text: its rotary embedding reads rope_parameters by layer type, which the class's
# default, a flat dict, lacks.)
OVERRIDES = {"dots3_note_text": dict(num_key_value_heads=4), "zaya": dict(num_experts_per_tok=1),
             "moshi": dict(ffn_dim=128), "blt": dict(encoder_hash_byte_group_vocab=128),
             # its window is local_attention // 2, whatever sliding_window says
             "modernbert-decoder": dict(local_attention=16),
             "cohere_compass_text": dict(rope_parameters={
                 "full_attention": {"rope_type": "default", "rope_theta": 10000.0}})}
# Keys of a composite model's parts that OTHER does not shrink, by family.
OTHER_OVERRIDES = {
    "phi4_multimodal": {"audio_config": dict(num_blocks=1, ext_pw_out_channel=32,
                                             depthwise_separable_out_channel=32,
                                             nemo_conv_channels=32)},
    "blt": {part: dict(hidden_size_global=32) for part in ("encoder_config", "decoder_config")}}
# Composite families whose other parts transformers cannot build here
# (Gemma 3n's vision tower needs timm and PIL): their text model alone,
# from the composite config's text_config.
TEXT_MODEL_ONLY = {"gemma3n"}
# A composite model's other parts (vision, audio): the keys each has.
OTHER = dict(hidden_size=32, num_hidden_layers=1, depth=1, num_attention_heads=2, num_heads=2,
             intermediate_size=64, embed_dim=32, out_hidden_size=64, projection_dim=64,
             vision_output_dim=64, text_hidden_size=64, num_key_value_heads=2, head_dim=16,
             vocab_size=128)


def stamp(model_type):
    """What a saved checkpoint depends on."""
    text = json.dumps([transformers.__version__, torch.__version__, models.SEED,
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
    parts = {}
    for key, sub in config.to_dict().items():
        sub_config = getattr(config, key, None)
        if isinstance(sub, dict) and hasattr(sub_config, "to_dict") and sub_config is not text:
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
    x<L>.npy, y<L>.npy of each attention layer beside it."""
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
    ids = models.prompt_ids(BATCH, SEQ)
    seen = {}
    handles = []
    for layer in range(layers):
        try:
            module = model.get_submodule(attention_name(model, layer))
        except ValueError:
            continue  # a layer without softmax attention (linear, state space)

        def hook(mod, args, kwargs, output, layer=layer):
            x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            y = output[0] if isinstance(output, tuple) else output
            seen[layer] = (x.detach().float().numpy(), y.detach().float().numpy())
        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    for layer, (x, y) in seen.items():
        np.save(os.path.join(path, f"x{layer}.npy"), x)
        np.save(os.path.join(path, f"y{layer}.npy"), y)
    return sorted(seen)


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
            return path, saved["layers"]
    subprocess.run(["rm", "-rf", path], check=True)
    layers = save(model_type, path)
    with open(meta, "w", encoding="utf-8") as f:
        json.dump({"stamp": key, "layers": layers}, f)
    return path, layers


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
    cmd = [cli, "attention", "--weights", path, "--input", os.path.join(path, f"x{layer}.npy"),
           "--output", os.path.join(path, f"got{layer}.npy"), "--layer", str(layer),
           "--threads", "1", "--quiet"]
    return cmd + (["--prefill", str(prefill_length(path))] if prefill else [])


def check_layer(cli, path, layer, prefill):
    """(status, detail): runs, refused, MISMATCH or crash."""
    cmd = cli_command(cli, path, layer, prefill)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode < 0 or run.returncode > 1:
        return "CRASH", f"exit {run.returncode}: {run.stderr.strip()[-300:]}; {shlex.join(cmd)}"
    if run.returncode != 0:
        message = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "exit 1"
        return "refused", message.replace(path + os.sep, "").replace("ropeattn: ", "", 1)
    got = np.load(os.path.join(path, f"got{layer}.npy")).astype(np.float64)
    want = np.load(os.path.join(path, f"y{layer}.npy")).astype(np.float64)
    if got.shape != want.shape:
        return "MISMATCH", f"shape {got.shape} != {want.shape}; {shlex.join(cmd)}"
    scale = float(np.abs(want).max()) or 1.0
    err = float(np.abs(got - want).max()) / scale if np.isfinite(got).all() else float("inf")
    if err > TOL:
        return "MISMATCH", f"max|got - want| / max|y| = {err:.3g}; {shlex.join(cmd)}"
    return "runs", f"{err:.2g}"


def sweep_family(model_type, work, cli):
    """{"model_type", "status", "detail", "layers": [...]} of one family."""
    try:
        path, layers = checkpoint(model_type, work)
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
    worst = next((r for s in ("MISMATCH", "CRASH", "refused") for r in results
                  if r["status"] == s), None)
    status = worst["status"] if worst else "runs"
    detail = worst["detail"] if worst else max(float(r["detail"]) for r in results)
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


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    with open(argv[1], encoding="utf-8") as f:
        listed = json.load(f)
    work, cli = os.path.abspath(argv[2]), os.path.abspath(argv[3])
    os.makedirs(work, exist_ok=True)
    wanted = set(argv[4:])
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
    sys.exit(1 if counts["MISMATCH"] or counts["CRASH"] else 0)


if __name__ == "__main__":
    main(sys.argv)
