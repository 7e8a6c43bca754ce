"""`ropeattn attention` on the checkpoint save_pretrained wrote equals the
layer's output inside the model: layers[L]'s attention module's input and
output captured by a forward hook while transformers ("eager", float32) runs
the whole model, for each layer of each family the CLI runs."""
import subprocess

import numpy as np
import pytest
import torch

import check
import models
from families import FAMILIES, names

CLI_FAMILIES = [f for f in FAMILIES if f.cli]
CLI_TOL = 1e-5  # of max|y|: both float32 (test_families.sh's bound)
ATTENTION_NAMES = ("self_attn", "self_attention", "attn", "attention")


def attention_modules(model):
    """Each decoder layer's attention module: the decoder's layers (Llama's
    model.layers, GPT-J's and Falcon's transformer.h; not a vision tower's),
    in each its self_attn (Falcon: self_attention, GPT-J: attn, GPT-NeoX:
    attention)."""
    layers = next(m for n, m in model.named_modules()
                  if n.rsplit(".", 1)[-1] in ("layers", "h") and "vision" not in n
                  and isinstance(m, torch.nn.ModuleList))
    return [next(getattr(layer, n) for n in ATTENTION_NAMES if hasattr(layer, n))
            for layer in layers]


def captured_layers(model, ids, mask):
    """[(x, y)] of every layer's attention module in one forward of ids."""
    seen = []

    def hook(module, args, kwargs, output):
        x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        y = output[0] if isinstance(output, tuple) else output
        seen.append((x.detach().clone(), y.detach().clone()))
    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in attention_modules(model)]
    try:
        with torch.no_grad():
            model(ids, attention_mask=mask, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return seen


def run_cli(cli, path, work, layer, x, mask):
    """`ropeattn attention` on layer `layer` of the checkpoint at path
    (its config.json beside it), X [B, S, hidden]: Y [B, S, hidden]."""
    np.save(work / "x.npy", x.numpy().astype(np.float32))
    cmd = [cli, "attention", "--weights", str(path), "--input", str(work / "x.npy"),
           "--output", str(work / "y.npy"), "--layer", str(layer), "--threads", "2", "--quiet"]
    if mask is not None:
        np.save(work / "mask.npy", mask.numpy().astype(np.int64))
        cmd += ["--attention-mask", str(work / "mask.npy")]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, f"{' '.join(cmd)}: exit {run.returncode}\n{run.stderr}"
    return torch.from_numpy(np.load(work / "y.npy"))


@pytest.mark.parametrize("padded", [False, True], ids=["full", "left_padded"])
@pytest.mark.parametrize("family", CLI_FAMILIES, ids=names(CLI_FAMILIES))
def test_cli_layer_equals_hook(family, padded, checkpoints, loaded, cli, tmp_path):
    """2 x 24 tokens (past the windows and chunks); left_padded: the second
    row's first 7 tokens padding, given to both as attention_mask, compared
    on the real tokens (the CLI writes 0 for padding rows, transformers
    whatever its masked softmax gives)."""
    path = checkpoints(family)
    ids = models.prompt_ids(2, 24)
    mask = None
    if padded:
        mask = torch.ones_like(ids)
        mask[1, :7] = 0
    layers = captured_layers(loaded(family, "eager"), ids, mask)
    real = torch.ones(ids.shape, dtype=torch.bool) if mask is None else mask.bool()
    for layer, (x, want) in enumerate(layers):
        got = run_cli(cli, path, tmp_path, layer, x, mask)
        check.assert_close(got[real], want[real], CLI_TOL,
                           f"{family.name} layer {layer}: ropeattn attention against the hook")
