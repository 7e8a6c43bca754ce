"""2-D (axial) RoPE of vision encoders in the package: apply_rotary and
RotaryEmbedding.cos_sin with (row, column) positions against transformers'
own modules in float64 (tests/fixtures/rope2d, made by
tests/fixtures/make_rope2d_fixtures.py: Pixtral, Qwen2-VL, Qwen2.5-VL,
Llama 4), within 1e-6 (float32 rotation of values in [-1, 1)) and tables
within 1e-7 (cos and sin rounded once to float32); the inverse, and the
refusals.
"""
import struct
from pathlib import Path

import numpy as np
import pytest

import ropeattn

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "rope2d"
CASES = ["pixtral_d32", "qwen2_vl_d80", "qwen2_5_vl_d48", "llama4_d88"]
KINDS = {1: "alternate", 2: "shared"}


def load(name):
    """A RAFX file (tests/fixture.h) of float64 and int64 tensors."""
    data = (FIXTURES / f"{name}.bin").read_bytes()
    assert data[:4] == b"RAFX" and struct.unpack_from("<I", data, 4)[0] == 1
    count, at, out = struct.unpack_from("<I", data, 8)[0], 12, {}
    for _ in range(count):
        n = struct.unpack_from("<H", data, at)[0]
        key = data[at + 2:at + 2 + n].decode()
        dtype, ndim = data[at + 2 + n], data[at + 3 + n]
        at += 4 + n
        shape = struct.unpack_from(f"<{ndim}q", data, at)
        at += 8 * ndim
        assert dtype in (0, 1)
        size = int(np.prod(shape, dtype=np.int64))
        out[key] = np.frombuffer(data, "<f8" if dtype == 0 else "<i8", size, at).reshape(shape)
        at += 8 * size
    assert at == len(data)
    return out


def rope_of(f):
    return ropeattn.RotaryEmbedding(
        int(f["head_dim"]), theta=float(f["theta"]), axial=KINDS[int(f["kind"])],
        axial_column_first=bool(f["column_first"]),
        layout="interleaved" if f["interleaved"] else "half")


@pytest.mark.parametrize("name", CASES)
def test_against_transformers(name):
    f = load(name)
    rope = rope_of(f)
    x = f["x"].astype(np.float32)[None]  # [1, N, H, D], exact
    y = ropeattn.apply_rotary(x, f["positions"], rope=rope)
    assert np.max(np.abs(y[0] - f["y"])) <= 1e-6
    y2 = ropeattn.apply_rotary(x, f["positions"][None], rope=rope)  # [B, S, 2]
    assert np.array_equal(y, y2)
    back = ropeattn.apply_rotary(y, f["positions"], rope=rope, inverse=True)
    assert np.max(np.abs(back - x)) <= 2e-6
    cos, sin = rope.cos_sin(f["positions"])
    half = rope.head_dim // 2
    assert cos.shape == (len(f["positions"]), rope.head_dim)
    first = (cos[:, :half], sin[:, :half]) if rope.layout == "half" else (cos[:, ::2], sin[:, ::2])
    assert np.max(np.abs(first[0] - f["cos"])) <= 1e-7
    assert np.max(np.abs(first[1] - f["sin"])) <= 1e-7


GRIDS = {"pixtral_d32": ("pixtral", [(3, 5), (4, 2)], 1),
         "qwen2_vl_d80": ("qwen2_vl", [(1, 4, 6), (2, 2, 4)], 2),
         "qwen2_5_vl_d48": ("qwen2_vl", [(1, 6, 4)], 2),
         "llama4_d88": ("llama4", [(4, 4)], 1)}


@pytest.mark.parametrize("name", CASES)
def test_vision_positions(name):
    """The fixtures' positions: transformers' own (Pixtral's forward,
    get_vision_position_ids), and Llama 4's, which give its freqs_ci."""
    model, grids, merge = GRIDS[name]
    got = ropeattn.vision_positions(model, grids, spatial_merge_size=merge)
    assert got.dtype == np.int64 and np.array_equal(got, load(name)["positions"])


def test_vision_positions_refused():
    with pytest.raises(ropeattn.ArgumentError, match="model"):
        ropeattn.vision_positions("clip", [(2, 2)])
    with pytest.raises(ropeattn.ArgumentError, match="multiples of spatial_merge_size 2"):
        ropeattn.vision_positions("qwen2_vl", [(1, 3, 4)], spatial_merge_size=2)
    with pytest.raises(ropeattn.ArgumentError, match="spatial_merge_size"):
        ropeattn.vision_positions("pixtral", [(2, 2)], spatial_merge_size=2)
    with pytest.raises(ropeattn.ArgumentError, match=r"\(h, w\)"):
        ropeattn.vision_positions("pixtral", [(2, 0)])
    with pytest.raises(ropeattn.ArgumentError, match=r"\(t, h, w\)"):
        ropeattn.vision_positions("qwen2_vl", [(2, 2)])


def test_refusals():
    rope = ropeattn.RotaryEmbedding(16, axial="shared")
    x = np.zeros((1, 4, 2, 16), np.float32)
    for bad in (None, 3, np.arange(4)):
        with pytest.raises(ropeattn.ArgumentError, match="row, column"):
            ropeattn.apply_rotary(x, bad, rope=rope)
    with pytest.raises(ropeattn.ArgumentError, match="negative"):
        ropeattn.apply_rotary(x, [[0, 0], [0, -1], [1, 1], [2, 2]], rope=rope)
    with pytest.raises(ropeattn.ArgumentError, match=r"axial_ids\[2, column\]"):
        ropeattn.apply_rotary(x, [[0, 0], [0, 1], [1, 2**32 + 1], [2, 2]], rope=rope)
    with pytest.raises(ropeattn.ArgumentError, match="rotary_dim 18"):
        ropeattn.RotaryEmbedding(18, axial="alternate")
    with pytest.raises(ropeattn.ArgumentError, match="axial"):
        ropeattn.RotaryEmbedding(16, axial="pixtral")
    with pytest.raises(ropeattn.UnsupportedError, match="type"):
        ropeattn.RotaryEmbedding(16, axial="shared", rope_type="linear", factor=2.0)
    with pytest.raises(ropeattn.ArgumentError, match=r"\[\.\.\., 2\]"):
        rope.cos_sin(np.arange(4))
    plain = ropeattn.RotaryEmbedding(16)
    with pytest.raises(ropeattn.ArgumentError):
        ropeattn.apply_rotary(x, np.zeros((4, 2), np.int64), rope=plain)
