"""encoder_cases.py: make_hf_cases.py's encoders (issue 43): ModernBERT, ESM-2, RoFormer.

Their layers see every token both ways (no causal mask): case.json "causal"
false, no y_cache.npy (test_hf.sh checks that `--prefill` is refused).
ModernBERT's attention module (attn: Wqkv, RoPE, attention, Wo) is the
layer, written by make_hf_cases.write_case.  ESM's and RoFormer's
attention module holds the residual block's LayerNorm (ESM's before
attention, RoFormer's after the residual) and adds the residual: their
layer is attention.self and attention.output.dense, written here
(write_bert_case): X is attention.self's input, Y output.dense's output
(before dropout, residual and LayerNorm), the gradients those of
query, key, value and output.dense.
"""
import json
import os

import numpy as np
import torch
import transformers

import make_hf_cases as m

# Three layers: ModernBERT's global_attn_every_n_layers (default 3) makes
# layer 0 global and 1, 2 local; local_attention 6: |i - j| <= 3 in the
# local layers, well inside the 12 tokens.
MODERNBERT = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=3,
                  intermediate_size=16, vocab_size=16, max_position_embeddings=64,
                  pad_token_id=0, local_attention=6, attention_bias=True)
BERT = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=16,
            vocab_size=16, max_position_embeddings=64, pad_token_id=0)


def modernbert_cases():
    ropes = {"full_attention": {"rope_type": "default", "rope_theta": 1000.0},
             "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}
    # (no freqs: `ropeattn freqs` refuses a config of two ropes without a layer)
    for kind, layer in (("global", 0), ("local", 1)):
        yield m.family(f"modernbert_{kind}", "ModernBert", MODERNBERT, layer=layer, rope=ropes,
                       model="ModernBertForMaskedLM", cached=False, causal=False,
                       freqs=False)
    # the config class's global_rope_theta / local_rope_theta defaults (160000, 10000)
    # and no attention biases
    kw = dict(MODERNBERT, attention_bias=False)
    config = transformers.ModernBertConfig(**kw)
    yield ("modernbert_local_default_rope", transformers.ModernBertModel, config, 2,
           m.positions(7), dict(cached=False, causal=False, freqs=False))


def bert_config(cls, **kw):
    config = cls(**dict(BERT, **kw))
    config.attention_probs_dropout_prob = config.hidden_dropout_prob = 0.0
    return config


def bert_cases():
    esm = bert_config(transformers.EsmConfig, position_embedding_type="rotary",
                      rope_theta=100.0)
    yield ("esm_rotary", transformers.EsmForMaskedLM, esm, 1, m.positions(7),
           dict(writer=write_bert_case))
    roformer = bert_config(transformers.RoFormerConfig, embedding_size=32)
    # RoFormer rotates by the tokens' places 0, 1 ... whatever position_ids say
    pos = torch.arange(m.S, dtype=torch.int64).repeat(m.B, 1)
    yield ("roformer", transformers.RoFormerForMaskedLM, roformer, 1, pos,
           dict(writer=write_bert_case))
    # rotary_value: RoPE on the values too
    rotary_value = bert_config(transformers.RoFormerConfig, rotary_value=True)
    yield ("roformer_rotary_value", transformers.RoFormerModel, rotary_value, 0, pos,
           dict(writer=write_bert_case))


def encoder_cases():
    yield from modernbert_cases()
    yield from bert_cases()


def bert_modules(model, layer):
    """(name of attention.self, attention.self, attention.output.dense) of layer `layer`."""
    names = [n for n, _ in model.named_modules() if n.endswith(f"encoder.layer.{layer}.attention")]
    if len(names) != 1:
        raise ValueError(f"layer {layer}'s attention: {names or 'none'}")
    attn = model.get_submodule(names[0])
    return names[0], attn.self, attn.output.dense


def bert_forward(self_attn, dense, x, args, kwargs):
    """attention.output.dense(attention.self(x, ...)): the layer, without the residual block."""
    out = self_attn(x, *args[1:], **{k: v for k, v in kwargs.items() if k != "hidden_states"})
    return dense(out[0] if isinstance(out, tuple) else out)


def write_bert_case(out_dir, name, model_cls, config, layer, pos, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = m.build(model_cls, config)
    m.randomize(model, gen, None)
    with torch.no_grad():  # RoFormer's sinusoidal table (a 2-D parameter randomize drew)
        for module in model.modules():
            if hasattr(module, "create_weight"):
                module.weight.copy_(module.create_weight())
    prefix, self_attn, dense = bert_modules(model, layer)
    calls = []

    def hook(module, args, kwargs, output):
        calls.append((args, dict(kwargs), output))

    handle = self_attn.register_forward_hook(hook, with_kwargs=True)
    embeds = torch.randn(m.B, m.S, config.hidden_size, generator=gen)
    with torch.no_grad():
        model(inputs_embeds=embeds, position_ids=pos)
    handle.remove()
    args, kwargs, _ = calls[0]
    x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
    with torch.no_grad():
        y = bert_forward(self_attn, dense, x, args, kwargs)
        import copy
        s64, d64 = copy.deepcopy(self_attn).double(), copy.deepcopy(dense).double()
        y64 = bert_forward(s64, d64, x.double(), m.to_double(args), m.to_double(kwargs))
    rel64 = float((y.double() - y64).abs().max() / y64.abs().max())

    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    if os.path.exists(os.path.join(d, "generation_config.json")):
        os.remove(os.path.join(d, "generation_config.json"))
    m.save(d, "x.npy", x)
    m.save(d, "pos.npy", pos)
    m.save(d, "y.npy", y)
    dy = torch.randn(y.shape, generator=gen)
    m.save(d, "dy.npy", dy)
    xg = x.detach().clone().requires_grad_(True)
    model.zero_grad()
    (bert_forward(self_attn, dense, xg, args, kwargs) * dy).sum().backward()
    grads = {"x": xg.grad.numpy().astype(np.float32)}
    for mod, sub in ((self_attn, "self."), (dense, "output.dense.")):
        for pname, p in mod.named_parameters():
            grads[f"{prefix}.{sub}{pname}"] = p.grad.numpy().astype(np.float32)
    missing = [k for k in grads if k != "x" and k not in m.saved_names(d)]
    if missing:
        raise ValueError(f"{name}: gradients of tensors not saved: {missing}")
    np.savez(os.path.join(d, "grads.npz"), **grads)
    info = {"layer": layer, "rotary_dim": None, "table": None, "grads": True, "freqs": False,
            "mla": False, "weights": "F32", "f32_vs_f64": rel64, "prefill": None,
            "cache_vs_y": None, "family": config.model_type, "causal": False,
            "transformers": transformers.__version__, "torch": torch.__version__}
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name} ({info['family']}): max|y| {float(y.abs().max()):.3g}, "
          f"HF float32 vs float64 {rel64:.2e}")
