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
