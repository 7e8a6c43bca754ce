"""Layer.from_pretrained(path, layer, vision=True): the attention layer of a
checkpoint's vision encoder (tests/fixtures/vision, made by
tests/fixtures/make_vision_fixtures.py from transformers' own modules in
float64: Pixtral and Qwen2-VL with two images packed, cu_seqlens; Qwen2.5-VL
and Llama 4 with one), y within 1e-5 of max|y| (float32 sums over at most
48 features and 23 keys); positions (row, column) [S, 2] or [B, S, 2]; the
refusals.  Qwen2.5-VL's window-attention layer (vision_windows=True) on
three images in window order, with ropeattn.vision_windows' positions and
cu_window_seqlens, which equal those captured from transformers' tower
(the fixture's; tests/hf_e2e/test_vision_backend.py checks them against
get_vision_window_index on more grids); its calls without documents or
with whole frames refused (config["max_document"], the largest window).
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


def test_window_layer():
    d = FIXTURES / "qwen2_5_vl_window"
    grid = np.load(d / "grid_thw.npy")
    w = ropeattn.vision_windows(d, grid)
    assert np.array_equal(w.window_index, np.load(d / "window_index.npy"))
    assert np.array_equal(w.cu_window_seqlens, np.load(d / "cu_seqlens.npy"))
    assert np.array_equal(w.positions, np.load(d / "positions.npy"))
    # the processor's order, permuted: vision_positions' positions follow
    assert np.array_equal(w.positions, ropeattn.vision_positions("qwen2_vl", grid, 2)[w.patch_index])
    assert np.array_equal(ropeattn.vision_windows(d / "config.json", grid.tolist()).positions,
                          w.positions)
    layer = build("qwen2_5_vl_window", vision_windows=True)
    x, want = np.load(d / "x.npy"), np.load(d / "y.npy")  # x in window order
    y = layer(x, positions=w.positions, cu_seqlens=w.cu_window_seqlens)
    assert np.abs(y - want).max() / np.abs(want).max() <= 1e-5
    # the largest window's patches, (8 // 2 // 2)^2 2^2: no call attends past it
    assert layer.config["max_document"] == 16
    assert build("qwen2_5_vl").config["max_document"] == 0
    frames = np.concatenate([[0], np.cumsum(np.repeat(grid[:, 1] * grid[:, 2], grid[:, 0]))])
    with pytest.raises(ropeattn.ArgumentError, match="max_document 16: document 0 holds 60"):
        layer(x, positions=w.positions, cu_seqlens=frames)  # a full layer's documents
    with pytest.raises(ropeattn.ArgumentError, match="max_document 16: a call without documents"):
        layer(x, positions=w.positions)


def test_window_refused():
    d = FIXTURES / "qwen2_5_vl_window"
    with pytest.raises(ropeattn.UnsupportedError, match="vision_windows"):
        build("qwen2_5_vl_window")  # a window layer, not stated
    with pytest.raises(ropeattn.ArgumentError, match="vision_windows"):
        build("qwen2_5_vl", vision_windows=True)  # a full-attention layer
    with pytest.raises(ropeattn.UnsupportedError, match="no window attention"):
        ropeattn.vision_windows(FIXTURES / "qwen2_vl", [[1, 4, 4]])
    with pytest.raises(ropeattn.ArgumentError, match="spatial_merge_size"):
        ropeattn.vision_windows(d, [[1, 5, 4]])
    with pytest.raises(ropeattn.ArgumentError, match=r"\[n, 3\]"):
        ropeattn.vision_windows(d, [1, 4, 4])


def test_positions_refused():
    d = FIXTURES / "llama4"
    layer = build("llama4")
    x = np.load(d / "x.npy")
    with pytest.raises(ropeattn.ArgumentError):
        layer(x, positions=np.arange(x.shape[0]))  # 1-D positions on a 2-D rope
    with pytest.raises(ropeattn.ArgumentError):
        layer(x)  # no positions
