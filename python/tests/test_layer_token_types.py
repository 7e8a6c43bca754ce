"""Layer.from_pretrained(path, layer, token_types=True) and Layer(x,
token_type_ids=...): Gemma 3's image blocks (tests/fixtures/token_types, made
by tests/fixtures/make_token_type_fixtures.py from transformers' own
Gemma3Attention and create_masks_for_vision_model in float64, on
tests/hf/gemma3_multimodal's checkpoint): the sliding layer 0 and the full
layer 1, two rows with two image blocks each, one right-padded, y within
1e-5 of max|y| on the tokens (float32 sums over 32 features and 12 keys;
padding rows are 0, as attention_mask says); the refusals.
"""
from pathlib import Path

import numpy as np
import pytest

import ropeattn

ROOT = Path(__file__).resolve().parents[2] / "tests"
FIXTURES = ROOT / "fixtures" / "token_types"
CKPT = ROOT / "hf" / "gemma3_multimodal"


@pytest.mark.parametrize("layer", [0, 1])
def test_forward(layer):
    x = np.load(FIXTURES / "x.npy")
    tt, pad = np.load(FIXTURES / "token_type_ids.npy"), np.load(FIXTURES / "attention_mask.npy")
    want = np.load(FIXTURES / f"y{layer}.npy")
    m = ropeattn.Layer.from_pretrained(CKPT, layer, token_types=True)
    assert m.config["non_causal"]
    y = m(x, attention_mask=pad, token_type_ids=tt)
    keep = pad.astype(bool)
    assert np.abs(y - want)[keep].max() / np.abs(want).max() <= 1e-5
    assert not y[~keep].any()
    # one row as 2-D x, [S] token_type_ids, no padding
    y0 = m(x[0], token_type_ids=tt[0])
    assert np.abs(y0 - want[0]).max() / np.abs(want).max() <= 1e-5


def test_refused():
    x = np.load(FIXTURES / "x.npy")
    tt = np.load(FIXTURES / "token_type_ids.npy")
    m = ropeattn.Layer.from_pretrained(CKPT, 0, token_types=True)
    with pytest.raises(ropeattn.ArgumentError, match="give token_type_ids"):
        m(x)
    with pytest.raises(ropeattn.ArgumentError, match="not with attn_mask"):
        m(x, token_type_ids=tt, attn_mask=np.ones((12, 12), dtype=bool))
    long = np.zeros_like(tt)
    long[:, 1:6] = 1
    with pytest.raises(ropeattn.UnsupportedError, match="longer than the sliding window 4"):
        m(x, token_type_ids=long)
    plain = ropeattn.Layer.from_pretrained(CKPT, 0)
    with pytest.raises(ropeattn.ArgumentError, match="token_types=True"):
        plain(x, token_type_ids=tt)
    with pytest.raises(ropeattn.UnsupportedError, match="token_type_ids"):
        ropeattn.Layer.from_pretrained(ROOT / "hf" / "gemma3_window", 0, token_types=True)
