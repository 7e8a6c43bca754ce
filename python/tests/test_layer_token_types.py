"""Layer.from_pretrained(path, layer, token_types=True) and Layer(x,
token_type_ids=...): Gemma 3's image blocks (tests/fixtures/token_types, made
by tests/fixtures/make_token_type_fixtures.py from transformers' own
Gemma3Attention and create_masks_for_vision_model in float64, on
tests/hf/gemma3_multimodal's checkpoint): the sliding layer 0 and the full
layer 1, two rows with two image blocks each, one right-padded, y within
1e-5 of max|y| on the tokens (float32 sums over 32 features and 12 keys;
padding rows are 0, as attention_mask says); a block of 6 on the window-4
layer; through a KVCache as generate() runs it (a prefill in chunks of 7 and
3 with the token_type_ids so far, blocks cut by the chunks' edge, then two
text decode steps without them) against a transformers DynamicCache's y;
the refusals.
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
    assert not m.config["non_causal"]  # the causal layer; token_type_ids make the whole mask
    y = m(x, attention_mask=pad, token_type_ids=tt)
    keep = pad.astype(bool)
    assert np.abs(y - want)[keep].max() / np.abs(want).max() <= 1e-5
    assert not y[~keep].any()
    # one row as 2-D x, [S] token_type_ids, no padding
    y0 = m(x[0], token_type_ids=tt[0])
    assert np.abs(y0 - want[0]).max() / np.abs(want).max() <= 1e-5


@pytest.mark.parametrize("layer", [0, 1])
def test_block_longer_than_window(layer):
    x = np.load(FIXTURES / "x.npy")
    tt = np.load(FIXTURES / "long_token_type_ids.npy")
    pad = np.load(FIXTURES / "attention_mask.npy")
    want = np.load(FIXTURES / f"long_y{layer}.npy")
    m = ropeattn.Layer.from_pretrained(CKPT, layer, token_types=True)
    y = m(x, attention_mask=pad, token_type_ids=tt)
    keep = pad.astype(bool)
    assert np.abs(y - want)[keep].max() / np.abs(want).max() <= 1e-5


@pytest.mark.parametrize("layer", [0, 1])
def test_cached(layer):
    x = np.load(FIXTURES / "x.npy")
    tt = np.load(FIXTURES / "cached_token_type_ids.npy")
    want = np.load(FIXTURES / f"cached_y{layer}.npy")
    m = ropeattn.Layer.from_pretrained(CKPT, layer, token_types=True)
    cache = ropeattn.KVCache(m, batch=2, capacity=12)
    ys = [m(x[:, :7], cache=cache, token_type_ids=tt[:, :7]),
          m(x[:, 7:10], cache=cache, token_type_ids=tt[:, :10])]  # every token so far
    ys += [m(x[:, t:t + 1], cache=cache) for t in (10, 11)]  # text: no token_type_ids
    y = np.concatenate(ys, axis=1)
    assert np.abs(y - want).max() / np.abs(want).max() <= 1e-5
    # without the blocks the prefill differs (the mask was used)
    cache.reset()
    plain = m(x[:, :10], cache=cache)
    assert np.abs(plain - want[:, :10]).max() / np.abs(want).max() > 1e-3
    with pytest.raises(ropeattn.ArgumentError, match=r"\[2, 11\] \(every token so far"):
        m(x[:, 10:11], cache=cache, token_type_ids=tt[:, 10:11])


def test_refused():
    x = np.load(FIXTURES / "x.npy")
    tt = np.load(FIXTURES / "token_type_ids.npy")
    m = ropeattn.Layer.from_pretrained(CKPT, 0, token_types=True)
    plain = ropeattn.Layer.from_pretrained(CKPT, 0)
    assert np.array_equal(m(x), plain(x))  # no token_type_ids: text, the causal layer
    with pytest.raises(ropeattn.ArgumentError, match="not with attn_mask"):
        m(x, token_type_ids=tt, attn_mask=np.ones((12, 12), dtype=bool))
    with pytest.raises(ropeattn.UnsupportedError, match="token_type_ids: not with a pool"):
        pool = ropeattn.KVPool(m, n_pages=4)
        m(x, pool=pool, ids=[pool.add(), pool.add()], token_type_ids=tt)
    with pytest.raises(ropeattn.ArgumentError, match="token_types=True"):
        plain(x, token_type_ids=tt)
    with pytest.raises(ropeattn.UnsupportedError, match="token_type_ids"):
        ropeattn.Layer.from_pretrained(ROOT / "hf" / "gemma3_window", 0, token_types=True)
