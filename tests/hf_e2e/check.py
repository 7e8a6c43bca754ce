"""Comparisons of the end-to-end suite, and a count of the backend's calls."""
import contextlib

import torch
from transformers import AttentionInterface


def relative_error(got, want):
    """max|got - want| / max|want| (float64), and the worst index."""
    got, want = got.detach().double(), want.detach().double()
    diff = (got - want).abs()
    worst = int(diff.argmax())
    scale = float(want.abs().max())
    return float(diff.max()) / (scale if scale > 0 else 1.0), worst


def assert_close(got, want, tol, what):
    """|got - want| <= tol * max|want| everywhere (NaN and Inf first)."""
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert torch.isfinite(got).all(), f"{what}: not finite"
    err, worst = relative_error(got, want)
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), want.shape))
    assert err <= tol, (f"{what}: max|got - want| / max|want| = {err:.3g} > {tol:g}; worst at "
                        f"{index}: {float(got.flatten()[worst]):.7g} against "
                        f"{float(want.flatten()[worst]):.7g}")
    return err


@contextlib.contextmanager
def counting_calls(name="ropeattn"):
    """Wraps the attention function registered as `name` (transformers looks
    it up at every layer's forward): yields a dict module -> calls."""
    registered = AttentionInterface._global_mapping[name]
    calls = {}

    def counted(module, *args, **kwargs):
        calls[module] = calls.get(module, 0) + 1
        return registered(module, *args, **kwargs)
    AttentionInterface.register(name, counted)
    try:
        yield calls
    finally:
        AttentionInterface.register(name, registered)
