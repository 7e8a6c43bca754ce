"""RoFormer and Llama 4's vision model against transformers itself (issue
43 item 5), through the real clients: transformers' own model (float32,
from a checkpoint save_pretrained wrote) runs with hooks on one attention
layer, and on the same checkpoint
  - ropeattn.Layer.from_pretrained(path, layer) gives the layer's output
    (RoFormer: attention.self then attention.output.dense, before the
    residual and LayerNorm; Llama 4: Llama4VisionAttention, o_proj
    included),
  - `ropeattn attention --grads` gives dL/dx and every weight's and
    bias's gradient of L = sum(y * dy), against autograd through
    transformers' modules on the captured input.
RoFormer's modules do not call transformers' attention interface (the
backend cannot reach them); Llama 4's vision attention does, and
test_vision_backend.py runs it there too.

RoFormer: rotary_value off and on, bidirectional with right padding (its
extended additive mask), and is_decoder (causal).  Llama 4: one image of
4 x 4 patches and its CLS token, positions (row, column) as
Llama4VisionRotaryEmbedding forms them (patch (r, c) at (r + 1, c + 1),
the CLS token, last, at (0, 0)).

Tolerances, relative to each tensor's largest value: both sides float32
over at most 17 keys and 64 features, in other orders: seen 6e-7 (outputs)
and 3e-6 (gradients, 2.6e-6 for a RoFormer bias); 1e-5 (test_cli.py's
bound) leaves room, far below a wrong rope or mask (1e-1).
"""
import subprocess

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file

import check
import models
import ropeattn

TOL = 1e-5


def randomized(model):
    """model in eval mode, randomized as the suite's checkpoints
    (models.randomize), fixed tables (RoFormer's sinusoidal
    embed_positions, requires_grad False) restored."""
    fixed = {n: p.clone() for n, p in model.named_parameters() if not p.requires_grad}
    models.randomize(model, torch.Generator().manual_seed(43))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n in fixed:
                p.copy_(fixed[n])
    return model.eval()


def run_cli(cli, path, work, layer, x, dy, extra):
    """`ropeattn attention --grads` on layer `layer` of the checkpoint at
    path: (Y, {name: gradient}) with dL/dX as "x"."""
    np.save(work / "x.npy", x.numpy())
    np.save(work / "dy.npy", dy.numpy())
    cmd = [cli, "attention", "--weights", str(path), "--input", str(work / "x.npy"),
           "--output", str(work / "y.npy"), "--layer", str(layer), "--threads", "2",
           "--quiet", "--grad-output", str(work / "dy.npy"), "--grads",
           str(work / "g.safetensors"), *extra]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, f"{' '.join(cmd)}: exit {run.returncode}\n{run.stderr}"
    return torch.from_numpy(np.load(work / "y.npy")), load_file(work / "g.safetensors")


def check_grads(got, x, params, prefix, what):
    """The CLI's gradients against autograd's: x.grad as "x", each
    parameter's under prefix + its name."""
    want = {"x": x.grad, **{prefix + n: p.grad for n, p in params}}
    assert set(got) == set(want), what
    for name, grad in want.items():
        check.assert_close(got[name], grad, TOL, f"{what}: d L / d {name}")


# ---- RoFormer ---------------------------------------------------------------

ROFORMER = {"bidirectional": dict(rotary_value=False), "rotary_value": dict(rotary_value=True),
            "decoder": dict(rotary_value=False, is_decoder=True)}


@pytest.fixture(scope="module", params=sorted(ROFORMER))
def roformer(request, tmp_path_factory):
    """(name, model, path, ids, mask): a 2-layer RoFormerModel saved by
    save_pretrained; ids [2, 16], the second row right-padded after 11
    tokens (the decoder: no padding)."""
    config = transformers.RoFormerConfig(
        vocab_size=37, embedding_size=64, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=96, max_position_embeddings=64,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0,
        **ROFORMER[request.param])
    model = randomized(transformers.RoFormerModel(config))
    path = tmp_path_factory.mktemp("roformer") / request.param
    model.save_pretrained(path)
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(1, 37, (2, 16), generator=gen)
    mask = torch.ones_like(ids)
    if not config.is_decoder:
        mask[1, 11:] = 0
    return request.param, model, path, ids.masked_fill(mask == 0, 0), mask


def roformer_layer_calls(model, ids, mask):
    """[(x, kwargs, y)] for each layer: attention.self's input and the
    keywords the encoder gave it (the additive mask, sinusoidal_pos), and
    attention.output.dense's output."""
    seen = []

    def take_input(module, args, kwargs):
        seen.append([args[0].detach().clone(), {k: kwargs[k] for k in
                                                ("attention_mask", "sinusoidal_pos")}])

    def take_output(module, args, output):
        seen[-1].append(output.detach().clone())
    handles = []
    for layer in model.encoder.layer:
        handles.append(layer.attention.self.register_forward_pre_hook(take_input,
                                                                      with_kwargs=True))
        handles.append(layer.attention.output.dense.register_forward_hook(take_output))
    try:
        with torch.no_grad():
            model(input_ids=ids, attention_mask=mask)
    finally:
        for h in handles:
            h.remove()
    return seen


def test_roformer_layers_match_transformers(roformer, cli, tmp_path):
    name, model, path, ids, mask = roformer
    real = mask.bool()
    calls = roformer_layer_calls(model, ids, mask)
    assert len(calls) == 2
    dy = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(11)) * mask[..., None]
    for n, (x, kwargs, want) in enumerate(calls):
        what = f"roformer {name} layer {n}"
        layer = ropeattn.Layer.from_pretrained(path, n)
        assert layer.config["non_causal"] is (name != "decoder")
        assert layer.config["rope_values"] is (name == "rotary_value")
        got = torch.from_numpy(layer(x.numpy(), attention_mask=mask.numpy()))
        check.assert_close(got[real], want[real], TOL, what + " (Layer)")
        # gradients: autograd through transformers' modules on the captured input
        module = model.encoder.layer[n].attention
        x = x.clone().requires_grad_(True)
        model.zero_grad()
        y = module.output.dense(module.self(x, **kwargs)[0])
        (y * dy).sum().backward()
        extra = ["--attention-mask", str(tmp_path / "mask.npy")]
        np.save(tmp_path / "mask.npy", mask.numpy())
        y_cli, grads = run_cli(cli, path, tmp_path, n, x.detach(), dy, extra)
        check.assert_close(y_cli[real], want[real], TOL, what + " (CLI)")
        params = [(f"self.{k}", p) for k, p in module.self.named_parameters()] + \
                 [(f"output.dense.{k}", p) for k, p in module.output.dense.named_parameters()]
        check_grads(grads, x, params, f"encoder.layer.{n}.attention.", what)


# ---- Llama 4's vision model ---------------------------------------------------

def test_llama4_vision_layers_match_transformers(cli, tmp_path):
    """Llama4ForConditionalGeneration's checkpoint; its vision model run on
    one image (32 x 32 pixels, patches of 8)."""
    vision = dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, image_size=32, patch_size=8, vision_output_dim=64,
                  projector_input_dim=64, projector_output_dim=64,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    text = dict(hidden_size=64, intermediate_size=96, intermediate_size_mlp=96,
                num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                head_dim=16, vocab_size=64, num_local_experts=2)
    config = transformers.Llama4Config(vision_config=vision, text_config=text)
    model = randomized(transformers.Llama4ForConditionalGeneration(config))
    path = tmp_path / "llama4"
    model.save_pretrained(path)
    seen = []

    def take(module, args, kwargs, output):
        seen.append((args[0].detach().clone(), kwargs["freqs_ci"], output[0].detach().clone()))
    layers = model.vision_model.model.layers
    handles = [layer.self_attn.register_forward_hook(take, with_kwargs=True) for layer in layers]
    pixels = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(7))
    try:
        with torch.no_grad():
            model.vision_model(pixels)
    finally:
        for h in handles:
            h.remove()
    assert len(seen) == 2
    side = 4
    patch = torch.arange(side * side)
    positions = torch.cat([torch.stack([patch // side + 1, patch % side + 1], -1),
                           torch.zeros(1, 2, dtype=torch.long)])  # the CLS token, last
    np.save(tmp_path / "positions.npy", positions.numpy())
    for n, (x, freqs_ci, want) in enumerate(seen):
        what = f"llama4 vision layer {n}"
        x, want = x[0], want[0]  # [17, 64]: one image
        layer = ropeattn.Layer.from_pretrained(path, n, vision=True)
        got = torch.from_numpy(layer(x.numpy(), positions=positions.numpy()))
        check.assert_close(got, want, TOL, what + " (Layer)")
        module = layers[n].self_attn
        x = x.clone().requires_grad_(True)
        model.zero_grad()
        y = module(x[None], freqs_ci)[0][0]
        dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(11))
        (y * dy).sum().backward()
        extra = ["--vision", "--positions", str(tmp_path / "positions.npy")]
        y_cli, grads = run_cli(cli, path, tmp_path, n, x.detach(), dy, extra)
        check.assert_close(y_cli, want, TOL, what + " (CLI)")
        check_grads(grads, x, list(module.named_parameters()),
                    f"vision_model.model.layers.{n}.self_attn.", what)
