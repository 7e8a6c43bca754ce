"""Layer's attn_mask (SDPA's, over [B, n_heads, S, S]) and config's
non_causal (issue 43), on a checkpoint transformers saved (tests/hf):
a decoder's layer is causal, and the calls that take no mask refuse one
by name."""
import numpy as np
import pytest

import ropeattn
from test_layer import build

NAME = "llama_default"


def test_decoders_are_causal():
    layer, *_ = build(NAME)
    assert layer.config["non_causal"] is False


def test_attn_mask_refused_where_the_call_takes_none():
    layer, x, pos, _ = build(NAME)
    b, s = x.shape[:2]
    cache = ropeattn.KVCache(layer, batch=b, capacity=s)
    with pytest.raises(NotImplementedError, match="attn_mask"):
        layer(x, cache=cache, attn_mask=np.ones((s, s), bool))
    with pytest.raises(ValueError, match="attn_mask: shape"):
        layer(x, positions=pos, attn_mask=np.ones((s, s + 1), bool))
    with pytest.raises(TypeError, match="attn_mask"):
        layer(x, positions=pos, attn_mask=np.ones((s, s), np.int64))
