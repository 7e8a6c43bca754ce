"""M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) in the package: apply_rotary and
RotaryEmbedding.cos_sin on 3-D positions against a float64 transcription
of transformers' chunked and interleaved code (1e-6: float32 rotation of
values in [-1, 1]), text positions as the plain rope bit for bit, a Layer
with 3-D positions through the KV cache (1e-5 of max|y|: the same sums in
another order), and the refusals.

Positions: get_rope_index's for 2 text tokens, an image of 2 x 2 x 2
patches, 2 text tokens: the grid offset by the text before it, the text
after it from the grid's largest position + 1.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import ropeattn

HF = Path(__file__).resolve().parents[2] / "tests" / "hf"
D, S = 16, 12
POS3 = np.array([[0, 1, 2, 2, 2, 2, 3, 3, 3, 3, 5, 6],
                 [0, 1, 2, 2, 3, 3, 2, 2, 3, 3, 5, 6],
                 [0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 5, 6]])
ROPES = {"chunked": {"mrope_section": [2, 3, 3]},
         "interleaved": {"mrope_section": [3, 3, 2], "mrope_interleaved": True}}


def transformers_cos_sin(pos3, theta, section, interleaved):
    """cos, sin [..., D] as transformers puts them together from 3-D
    positions: Qwen2-VL's apply_multimodal_rotary_pos_emb (cat(freqs, freqs)
    per component, split by section * 2, piece k from component k % 3) or
    Qwen3-VL's apply_interleaved_mrope (frequencies 1, 4, ... below 3 s1 from
    height, 2, 5, ... below 3 s2 from width, then cat(f, f))."""
    inv = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    freqs = np.asarray(pos3, dtype=np.float64)[..., None] * inv
    if interleaved:
        f = freqs[0].copy()
        for dim in (1, 2):
            f[..., dim:section[dim] * 3:3] = freqs[dim][..., dim:section[dim] * 3:3]
        emb = np.concatenate([f, f], -1)
        return np.cos(emb), np.sin(emb)
    emb = np.concatenate([freqs, freqs], -1)
    bounds = np.cumsum(section * 2)[:-1]

    def pick(t):
        return np.concatenate([m[i % 3] for i, m in enumerate(np.split(t, bounds, -1))], -1)
    return pick(np.cos(emb)), pick(np.sin(emb))


@pytest.mark.parametrize("arrangement", sorted(ROPES))
def test_apply_and_tables_against_transformers(arrangement):
    kw = ROPES[arrangement]
    rope = ropeattn.RotaryEmbedding(D, theta=1e6, **kw)
    assert rope.mrope_section == tuple(kw["mrope_section"])
    x = np.random.default_rng(3).uniform(-1, 1, (2, S, 3, D)).astype(np.float32)
    cos, sin = transformers_cos_sin(POS3, 1e6, kw["mrope_section"],
                                    kw.get("mrope_interleaved", False))
    rot = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1).astype(np.float64)
    want = x * cos[None, :, None, :] + rot * sin[None, :, None, :]
    for positions in (POS3, np.stack([POS3, POS3], 1)):  # [3, S] and [3, B, S]
        got = ropeattn.apply_rotary(x, positions, rope=rope)
        assert np.max(np.abs(got - want)) <= 1e-6
    back = ropeattn.apply_rotary(got, POS3, rope=rope, inverse=True)
    assert np.max(np.abs(back - x)) <= 1e-6
    c, s = rope.cos_sin(POS3)
    assert c.shape == (S, D) and np.max(np.abs(c - cos)) <= 1e-6
    assert np.max(np.abs(s - sin)) <= 1e-6


def test_text_positions_are_the_plain_rope():
    m = ropeattn.RotaryEmbedding(D, theta=1e6, type="mrope", mrope_section=[2, 3, 3])
    plain = ropeattn.RotaryEmbedding(D, theta=1e6)
    x = np.random.default_rng(4).uniform(-1, 1, (2, S, 2, D)).astype(np.float32)
    ids = np.arange(S) + 4
    want = ropeattn.apply_rotary(x, ids, rope=plain)
    assert np.array_equal(ropeattn.apply_rotary(x, ids, rope=m), want)
    assert np.array_equal(ropeattn.apply_rotary(x, np.stack([ids] * 3), rope=m), want)
    assert np.array_equal(m.cos_sin(ids)[0], plain.cos_sin(ids)[0])


def test_refusals():
    x = np.zeros((3, S, 1, D), np.float32)
    plain = ropeattn.RotaryEmbedding(D)
    m = ropeattn.RotaryEmbedding(D, mrope_section=[2, 3, 3])
    with pytest.raises(ropeattn.ArgumentError, match="need a rope with mrope_section"):
        ropeattn.apply_rotary(x, np.stack([POS3] * 3, 1), rope=plain)
    with pytest.raises(ropeattn.ArgumentError, match="with batch 3"):
        ropeattn.apply_rotary(x, POS3, rope=m)
    with pytest.raises(ropeattn.ArgumentError, match="negative"):
        ropeattn.apply_rotary(x[:1], -POS3, rope=m)
    with pytest.raises(ropeattn.ArgumentError, match="sums to 9"):
        ropeattn.RotaryEmbedding(D, mrope_section=[2, 3, 4])


def test_layer_through_the_cache(tmp_path):
    """tests/hf's Qwen2 layer read as Qwen2-VL (the same tensors, with
    sections): 3-D positions with equal rows give the 1-D positions' y bit
    for bit; an image's give another y, which the KV cache (prefill 5, then
    decode steps, each given its 3-D positions) gives too."""
    d = tmp_path / "qwen2_vl"
    shutil.copytree(HF / "qwen2_bias", d)
    config = json.loads((d / "config.json").read_text())
    config["model_type"] = "qwen2_vl"
    config["rope_parameters"]["mrope_section"] = [2, 3, 3]
    (d / "config.json").write_text(json.dumps(config))
    layer = ropeattn.Layer.from_pretrained(d, layer=0, max_position=int(POS3.max()) + 1)
    x = np.load(d / "x.npy")
    b, s = x.shape[:2]
    pos3 = np.ascontiguousarray(np.stack([POS3[:, :s]] * b, 1))
    text = layer(x, positions=np.arange(s))
    assert np.array_equal(layer(x, positions=np.stack([np.arange(s)] * 3)), text)
    y = layer(x, positions=pos3)
    assert np.max(np.abs(y - text)) > 1e-3
    cache = ropeattn.KVCache(layer, b, s)
    parts = [layer(x[:, :5], positions=pos3[:, :, :5], cache=cache)]
    for t in range(5, s):
        parts.append(layer(x[:, t:t + 1], positions=pos3[:, :, t:t + 1], cache=cache))
    got = np.concatenate(parts, 1)
    assert np.max(np.abs(got - y)) <= 1e-5 * np.max(np.abs(y))
