"""Layer and KVCache on DeepSeek checkpoints (latent attention): a tiny
DeepSeek-V3-shaped and a V2-Lite-shaped checkpoint written by
tests/families/mla_cases.py's float64 reference of transformers'
DeepseekV3Attention (numpy only), run whole and as a prefill and decode
steps through a latent cache.

Tolerances, relative to max|y| (float64 reference): 1e-5 for the layer and
a float32 latent cache (as tests/test_families.sh; seen under 1e-6), 5e-3
for a float16 latent cache (every latent and rotated key rounded once).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import ropeattn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "families"))
import mla_cases  # noqa: E402  (its helpers write the checkpoints)


def rel(got, want):
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.all(np.isfinite(got))
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def write_case(d, q_lora):
    """A DeepSeek-V3 (q_lora) or V2-Lite-shaped (q_proj) layer 0 under d;
    returns (x, y)."""
    m = mla_cases
    x = m.f32(np.random.default_rng(7).normal(0, 1, (2, 12, m.DIM)))
    rope = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
            "mscale": 1.0, "mscale_all_dim": 1.0}
    cfg = {"model_type": "deepseek_v3" if q_lora else "deepseek_v2",
           "hidden_size": m.DIM, "num_attention_heads": m.H, "num_key_value_heads": m.H,
           "kv_lora_rank": m.R, "q_lora_rank": m.RQ if q_lora else None,
           "qk_nope_head_dim": m.DN, "qk_rope_head_dim": m.DR, "v_head_dim": m.DV,
           "rope_theta": 10000, "max_position_embeddings": 163840, "rope_scaling": rope}
    inv, att = m.yarn(1e4, m.DR, 40.0, 4096, mscale=1.0, mscale_all_dim=1.0)
    f = {"inv": inv, "att": att, "kind": "interleave" if q_lora else "complex",
         "scale": (m.DN + m.DR) ** -0.5 * m.get_mscale(40.0, 1.0) ** 2}
    w = m.weights(q_lora=q_lora)
    y = m.mla(x, w, f)
    m.save(str(d), "case", cfg, m.named(w, "model.layers.0.self_attn."), x, y, 0)
    return x.astype(np.float32), y


@pytest.fixture(scope="module", params=[True, False], ids=["v3", "v2_lite"])
def case(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("mla")
    x, y = write_case(d, request.param)
    return ropeattn.Layer.from_pretrained(d / "case", layer=0, max_position=11), x, y, request.param


def test_config_and_tensors(case):
    layer, _, _, q_lora = case
    c = layer.config
    m = mla_cases
    assert (c["kv_lora_rank"], c["q_lora_rank"], c["qk_nope_head_dim"], c["v_head_dim"]) == (
        m.R, m.RQ if q_lora else 0, m.DN, m.DV)
    assert c["head_dim"] == m.DN + m.DR and c["n_kv_heads"] == c["n_heads"] == m.H
    assert c["rope"]["rotary_dim"] == m.DR and c["rope"]["layout"] == "interleaved"
    assert c["norm_eps"] == 1e-6
    shapes = layer.tensor_shapes
    p = "model.layers.0.self_attn."
    assert shapes[p + "kv_b_proj.weight"] == (m.H * (m.DN + m.DV), m.R)
    assert (p + "q_a_proj.weight" in shapes) == q_lora and (p + "q_proj.weight" in shapes) != q_lora


def test_forward(case):
    layer, x, y, _ = case
    assert rel(layer(x), y) <= 1e-5


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("float16", 5e-3)])
def test_latent_cache(case, dtype, tol):
    layer, x, y, _ = case
    cache = ropeattn.KVCache(layer, batch=2, capacity=12, dtype=dtype)
    got = np.concatenate([layer(x[:, :5], cache=cache)] +
                         [layer(x[:, s:s + 1], cache=cache) for s in range(5, 12)], axis=1)
    assert len(cache) == 12 and cache.slots == 12
    assert rel(got, y) <= tol
    with pytest.raises(ropeattn.CacheFullError):
        layer(x[:, :1], cache=cache)


def test_no_window_cache(case):
    layer = case[0]
    with pytest.raises(ropeattn.ArgumentError):
        ropeattn.KVCache(layer, batch=1, capacity=4, window=True)
