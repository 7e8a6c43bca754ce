"""Layer's attn_mask (SDPA's, over [B, n_heads, S, S]) and config's
non_causal (issue 43), on a checkpoint transformers saved (tests/hf):
masks that say what the layer's own masks say give its output, and the
calls that take none refuse one by name."""
import numpy as np
import pytest

import ropeattn
from test_layer import build, rel

NAME = "llama_default"


def test_decoders_are_causal():
    layer, *_ = build(NAME)
    assert layer.config["non_causal"] is False


def test_a_mask_saying_what_the_layer_does_gives_its_output():
    """The causal mask again ([S, S] bool, or additive -inf [1, 1, S, S]),
    and padding keys as [B, 1, 1, S] instead of attention_mask: the same
    rows to float32 rounding (1e-6 of the largest; a wrong mask is 1e-1)."""
    layer, x, pos, _ = build(NAME)
    b, s = x.shape[:2]
    want = layer(x, positions=pos)
    causal = np.tril(np.ones((s, s), bool))
    assert rel(layer(x, positions=pos, attn_mask=causal), want) < 1e-6
    additive = np.where(causal, 0, -np.inf).astype(np.float32)[None, None]
    assert rel(layer(x, positions=pos, attn_mask=additive), want) < 1e-6
    padding = np.ones((b, s), np.uint8)
    padding[0, -3:] = 0  # right padding: real rows never see it
    padded = layer(x, positions=pos, attention_mask=padding)
    keys = padding.astype(bool)[:, None, None, :]
    got = layer(x, positions=pos, attn_mask=keys)
    real = padding.astype(bool)
    assert rel(got[real], padded[real]) < 1e-6


def test_attn_mask_refused_where_the_call_takes_none():
    layer, x, pos, _ = build(NAME)
    b, s = x.shape[:2]
    cache = ropeattn.KVCache(layer, batch=b, capacity=s)
    with pytest.raises(NotImplementedError, match="attn_mask"):
        layer(x, cache=cache, attn_mask=np.ones((s, s), bool))
    with pytest.raises(ValueError, match="attn_mask: shape"):
        layer(x, positions=pos, attn_mask=np.ones((s, s + 1), bool))
    with pytest.raises(TypeError, match="attn_mask"):
        layer(x, positions=pos, attn_mask=np.ones((s, s), np.int64))


def test_an_encoders_layer_is_not_causal_and_takes_a_mask():
    """A vision encoder's layer (config non_causal, from its checkpoint):
    its packed images as a block-diagonal attn_mask [S, S] give what
    cu_seqlens gives (1e-6 of the largest; a causal or leaking mask is off
    by 1e-1)."""
    from test_layer_vision import FIXTURES, build as build_vision
    d = FIXTURES / "pixtral"
    x, pos, cu = np.load(d / "x.npy"), np.load(d / "positions.npy"), np.load(d / "cu_seqlens.npy")
    layer = build_vision("pixtral")
    assert layer.config["non_causal"] is True
    want = layer(x, positions=pos, cu_seqlens=cu)
    image = np.searchsorted(cu[1:], np.arange(x.shape[-2]), side="right")
    blocks = image[:, None] == image[None, :]
    assert rel(layer(x, positions=pos, attn_mask=blocks), want) < 1e-6
