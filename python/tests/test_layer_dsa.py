"""Layer on DeepSeek sparse attention checkpoints (deepseek_v32: latent
attention beside an indexer), written by tests/families/dsa_cases.py with
mla_cases.py's float64 reference: the layer runs while no query sees more
than index_topk keys (12 here; the indexer then keeps them all), and
Layer.from_pretrained refuses it beyond, or without a length."""
import sys
from pathlib import Path

import numpy as np
import pytest

import ropeattn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "families"))
import dsa_cases  # noqa: E402  (with mla_cases' helpers, writes the checkpoint)
import mla_cases  # noqa: E402


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """A deepseek_v32 checkpoint (index_topk 12, its indexer's tensors
    beside layer 0's) and the float64 y over 12 tokens."""
    m = mla_cases
    d = tmp_path_factory.mktemp("dsa")
    x = m.f32(np.random.default_rng(8).normal(0, 1, (2, 12, m.DIM)))
    base = {"hidden_size": m.DIM, "num_attention_heads": m.H, "num_key_value_heads": m.H,
            "kv_lora_rank": m.R, "qk_nope_head_dim": m.DN, "qk_rope_head_dim": m.DR,
            "v_head_dim": m.DV}
    dsa_cases.dsa_cases(str(d), x, base)
    return d / "deepseek_v32", x.astype(np.float32), np.load(d / "deepseek_v32" / "y.npy")


@pytest.mark.parametrize("length", [{"max_position": 11}, {"n_tokens": 12}])
def test_within_index_topk(case, length):
    path, x, y = case
    layer = ropeattn.Layer.from_pretrained(path, layer=0, **length)
    assert np.max(np.abs(layer(x) - y)) <= 1e-5 * np.max(np.abs(y))


@pytest.mark.parametrize("length,error,text", [
    ({}, ropeattn.ArgumentError, "give the tokens the layer runs on"),
    ({"n_tokens": 13}, ropeattn.UnsupportedError, "see up to 13 keys"),
    ({"max_position": 12}, ropeattn.UnsupportedError, "see up to 13 keys")])
def test_past_index_topk_refused(case, length, error, text):
    with pytest.raises(error, match="index_topk = 12") as e:
        ropeattn.Layer.from_pretrained(case[0], layer=0, **length)
    assert text in str(e.value)


def test_call_past_index_topk_refused(case):
    """A layer built for 6 tokens runs on 12 (index_topk: each query still
    sees them all), and is refused on 13, at once or through a cache
    (max_keys), where the dense answer would differ from the indexer's."""
    path, x, y = case
    layer = ropeattn.Layer.from_pretrained(path, layer=0, n_tokens=6)
    assert layer.config["max_keys"] == 12
    assert np.max(np.abs(layer(x) - y)) <= 1e-5 * np.max(np.abs(y))
    longer = np.concatenate([x, x[:, :1]], axis=1)  # 13 tokens: its last sees 13 keys
    with pytest.raises(ropeattn.UnsupportedError, match="max_keys 12"):
        layer(longer)
    cache = ropeattn.KVCache(layer, batch=2, capacity=16)
    layer(x, cache=cache)  # 12 keys cached
    with pytest.raises(ropeattn.UnsupportedError, match="max_keys 12"):
        layer(x[:, :1], cache=cache)
    assert cache.length(0) == 12  # the refused step appended nothing
