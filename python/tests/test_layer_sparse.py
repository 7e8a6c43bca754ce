"""Layer on block-sparse indexers' checkpoints made by transformers
(tests/hf/qwen4_exp_qsa: Qwen4-Exp's QSA, every key kept up to
indexer_budget + indexer_compress_ratio - 1 = 19; tests/hf/minimax_m3_sparse:
MiniMax-M3's "minimax_m3_sparse" layer, up to index_topk_blocks *
index_block_size = 12): the layer runs within the bound and every call past
it is refused (max_keys), at once or through a cache."""
from pathlib import Path

import numpy as np
import pytest

import ropeattn

HF = Path(__file__).resolve().parents[2] / "tests" / "hf"


@pytest.mark.parametrize("name,bound", [("qwen4_exp_qsa", 19), ("minimax_m3_sparse", 12)])
def test_call_past_indexer_bound_refused(name, bound):
    x = np.load(HF / name / "x.npy")
    layer = ropeattn.Layer.from_pretrained(HF / name, layer=0, n_tokens=6)
    assert layer.config["max_keys"] == bound
    longer = np.concatenate([x] * 2, axis=1)[:, :bound + 1]  # its last query sees bound + 1
    with pytest.raises(ropeattn.UnsupportedError, match=f"max_keys {bound}"):
        layer(longer)
    cache = ropeattn.KVCache(layer, batch=2, capacity=bound + 4)
    layer(longer[:, :bound], cache=cache)
    with pytest.raises(ropeattn.UnsupportedError, match=f"max_keys {bound}"):
        layer(longer[:, bound:], cache=cache)
    assert cache.length(0) == bound  # the refused step appended nothing


def test_within_indexer_bound():
    """MiniMax-M3's sparse layer on its 12 tokens (positions from 0): the
    dense layer, transformers' y."""
    d = HF / "minimax_m3_sparse"
    x, y = np.load(d / "x.npy"), np.load(d / "y.npy")
    layer = ropeattn.Layer.from_pretrained(d, layer=0, n_tokens=12)
    assert np.max(np.abs(layer(x) - y)) <= 1e-5 * np.max(np.abs(y))


@pytest.mark.parametrize("name,keys", [("qwen4_exp_qsa", 20), ("minimax_m3_sparse", 13)])
def test_built_past_indexer_bound_refused(name, keys):
    with pytest.raises(ropeattn.UnsupportedError, match="block-sparse indexer"):
        ropeattn.Layer.from_pretrained(HF / name, layer=0, n_tokens=keys)


def test_positions_not_slots_refused():
    """MiniMax-M3's indexer blocks keys by slot and masks them by position
    id: a real query whose position is not its index in its sequence (after
    a cache's tokens) is refused (positions_are_slots), through a cache too;
    Qwen4-Exp's QSA selects among the keys its mask leaves, and runs."""
    d = HF / "minimax_m3_sparse"
    x = np.load(d / "x.npy")
    layer = ropeattn.Layer.from_pretrained(d, layer=0, n_tokens=12)
    assert layer.config["positions_are_slots"] is True
    s = x.shape[1]
    for positions, message in [(np.arange(s) + 1, "query 0 of sequence 0 has position 1, "
                                "not its slot 0"),
                               (np.r_[np.arange(6), np.arange(s - 6)], "query 6 of sequence 0 "
                                "has position 0, not its slot 6")]:
        with pytest.raises(ropeattn.UnsupportedError, match=f"positions_are_slots: {message}"):
            layer(x, positions=positions)
    # left padding with Hugging Face's positions (0 at each row's first token)
    mask = np.ones(x.shape[:2], dtype=np.int64)
    mask[0, :2] = 0
    hf_positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    with pytest.raises(ropeattn.UnsupportedError, match="query 2 of sequence 0 has position 0"):
        layer(x, positions=hf_positions, attention_mask=mask)
    cache = ropeattn.KVCache(layer, batch=2, capacity=s)
    layer(x[:, :4], cache=cache)
    with pytest.raises(ropeattn.UnsupportedError, match="position 0, not its slot 4"):
        layer(x[:, 4:5], positions=[0], cache=cache)
    assert cache.length(0) == 4  # the refused step appended nothing
    layer(x[:, 4:5], positions=[4], cache=cache)
    qsa = ropeattn.Layer.from_pretrained(HF / "qwen4_exp_qsa", layer=0, n_tokens=6)
    assert qsa.config["positions_are_slots"] is False
