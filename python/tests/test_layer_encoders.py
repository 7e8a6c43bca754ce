"""The encoders of issue 43 through Layer.from_pretrained, on checkpoints
transformers saved (tests/hf): ModernBERT's global layer, ESM-2's rotary
layer and RoFormer's with rotary_value, against their y.npy within 1e-5 of
the largest (float32 sums against transformers' float64 reference:
tests/test_hf.sh's tolerance); their config says non_causal and, for
RoFormer's rotary_value, rope_values."""
import pytest

from test_layer import build, rel

CASES = {"modernbert_global": False, "esm_rotary": False, "roformer_rotary_value": True}


@pytest.mark.parametrize("name", sorted(CASES))
def test_encoder_layer(name):
    layer, x, pos, y = build(name)
    c = layer.config
    assert c["non_causal"] is True
    assert c["rope_values"] is CASES[name]
    assert rel(layer(x, positions=pos), y) < 1e-5


def test_decoders_rotate_no_values():
    layer, *_ = build("llama_default")
    assert layer.config["rope_values"] is False
