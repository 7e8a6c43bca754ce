"""null_theta_cases.py: make_hf_cases.py's cases of a config.json whose rope_theta is null,
as transformers 5 reads it (modeling_rope_utils.RotaryEmbeddingConfigMixin): its
convert_rope_params_to_dict sets the null into each rope that has no rope_theta of its own
(rope_parameters', else the config class's default rope), which then fails on None; a rope
with its own keeps it, and the null changes nothing.

Each case is the config class's defaults for the rope, saved by transformers and edited
(config_keys: rope_parameters removed, rope_theta null; make_hf_cases.write_case checks that
transformers reads the edited file as the config it saved):

  apertus   ApertusConfig's default rope: llama3 at 12e6
  cwm       CwmConfig's: llama3 at 1e6, factor 16
  mellum    MellumConfig's: a rope per layer type (500000 full, 10000 sliding), each layer's
  ministral3  Ministral3Config's: yarn at 1e6, factor 16, with its q scaling

and Llama's rope_parameters holding rope_theta beside a null rope_theta (kept as saved);
OLMo 3's sliding layer of a config giving rope_theta 10000 alone (rope_parameters removed), which
Olmo3Config's sliding layers run at its default_theta, 500000 (it pops rope_theta for the full
layers' rope first).
"""
import make_hf_cases as m

NULL_THETA = {"rope_parameters": None, "rope_theta": m.JSON_NULL}


def null_theta_cases():
    tiny = dict(m.TINY)
    yield m.family("apertus_null_theta", "Apertus", tiny, theta=None,
                   config_keys=NULL_THETA)
    yield m.family("cwm_null_theta", "Cwm", dict(tiny, sliding_window=4), theta=None,
                   config_keys=NULL_THETA)
    mellum = dict(tiny, num_hidden_layers=2, sliding_window=4, num_experts=2,
                  num_experts_per_tok=1, moe_intermediate_size=8,
                  layer_types=["sliding_attention", "full_attention"])
    for kind, layer in (("sliding", 0), ("full", 1)):
        yield m.family(f"mellum_null_theta_{kind}", "Mellum", mellum, layer=layer, theta=None,
                       freqs=False, config_keys=NULL_THETA)
    yield m.family("ministral3_null_theta", "Ministral3", dict(tiny, sliding_window=6),
                   theta=None, pos=m.positions(20), config_keys=NULL_THETA)
    yield m.family("llama_null_theta_beside_rope", "Llama", tiny, theta=500.0,
                   config_keys={"rope_theta": m.JSON_NULL})
    olmo3 = dict(tiny, num_hidden_layers=2, sliding_window=4,
                 layer_types=["sliding_attention", "full_attention"], rope_theta=10000.0)
    for kind, layer in (("sliding", 0), ("full", 1)):
        yield m.family(f"olmo3_theta_alone_{kind}", "Olmo3", olmo3, layer=layer, theta=None,
                       freqs=False, config_keys={"rope_parameters": None, "rope_theta": 10000.0})
