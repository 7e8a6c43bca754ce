"""Layer.from_pretrained(path, layer, vision=True): the attention layer of a
checkpoint's vision encoder (tests/fixtures/vision, made by
tests/fixtures/make_vision_fixtures.py from transformers' own modules in
float64: Pixtral and Qwen2-VL with two images packed, cu_seqlens; Qwen2.5-VL
and Llama 4 with one), y within 1e-5 of max|y| (float32 sums over at most
48 features and 23 keys); positions (row, column) [S, 2] or [B, S, 2]; the
refusals.
"""
from pathlib import Path

import numpy as np
import pytest

import ropeattn

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "vision"
CASES = ["pixtral", "qwen2_vl", "qwen2_5_vl", "llama4"]


def build(name, layer=0, **kw):
    return ropeattn.Layer.from_pretrained(FIXTURES / name, layer, vision=True, **kw)


@pytest.mark.parametrize("name", CASES)
def test_forward(name):
    d = FIXTURES / name
    x, pos = np.load(d / "x.npy"), np.load(d / "positions.npy")
    cu, want = np.load(d / "cu_seqlens.npy"), np.load(d / "y.npy")
    layer = build(name)
    assert layer.config["rope"]["axial"] in (1, 2)
    y = layer(x, positions=pos, cu_seqlens=cu)
    assert np.abs(y - want).max() / np.abs(want).max() <= 1e-5
    # a batch of two rows, each the same images: [B, S, 2] positions
    # (other GEMM blocks: not the same bits)
    y2 = layer(np.stack([x, x]), positions=np.stack([pos, pos]), cu_seqlens=cu)
    assert np.abs(y2 - want).max() / np.abs(want).max() <= 1e-5


def test_refused():
    with pytest.raises(ropeattn.ArgumentError, match="needs the layer"):
        ropeattn.Layer.from_pretrained(FIXTURES / "pixtral", vision=True)
    with pytest.raises(ropeattn.UnsupportedError, match="fullatt_block_indexes"):
        ropeattn.Layer.from_pretrained(FIXTURES / "qwen2_5_vl", 1, vision=True)
    with pytest.raises(ropeattn.UnsupportedError, match="n_heads"):
        ropeattn.Layer.from_pretrained(FIXTURES / "qwen2_vl", 0, vision=True, n_heads=4)
    with pytest.raises(ropeattn.UnsupportedError, match="q_proj.bias"):
        ropeattn.Layer.from_pretrained(FIXTURES / "pixtral_bias", 0, vision=True)
    with pytest.raises(LookupError, match="layers.3.attention"):
        ropeattn.Layer.from_pretrained(FIXTURES / "pixtral", 3, vision=True)


def test_positions_refused():
    d = FIXTURES / "llama4"
    layer = build("llama4")
    x = np.load(d / "x.npy")
    with pytest.raises(ropeattn.ArgumentError):
        layer(x, positions=np.arange(x.shape[0]))  # 1-D positions on a 2-D rope
    with pytest.raises(ropeattn.ArgumentError):
        layer(x)  # no positions
