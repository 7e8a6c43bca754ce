"""Hostile uses of attn_implementation="ropeattn" (ropeattn.transformers)
that gave other numbers than transformers' "eager" and "sdpa" with no
error, or failed without naming the feature: each fails on the code before
its fix.  Tiny random models built by transformers.  Needs the
transformers venv (scripts/setup-hf-venv.sh), with the package installed
where its python finds it:

    .venv-hf/bin/python -m pytest -q tests/hf_e2e/test_attack.py
"""
import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import ropeattn  # noqa: E402
import ropeattn.transformers  # noqa: E402,F401  (registers "ropeattn")
from transformers import AutoModelForCausalLM  # noqa: E402

torch.set_num_threads(2)
VOCAB = 97
SMALL = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
             pad_token_id=0, eos_token_id=None, bos_token_id=None)
# family: (config class, fields beyond SMALL); windows of 4 below the tests' lengths
FAMILIES = {
    "llama": ("LlamaConfig", dict(head_dim=16)),
    "mistral": ("MistralConfig", dict(head_dim=16, sliding_window=4)),
    "qwen2": ("Qwen2Config", dict(head_dim=16, use_sliding_window=True, sliding_window=4,
                                  max_window_layers=1)),
    "gemma2": ("Gemma2Config", dict(head_dim=16, sliding_window=4, attn_logit_softcapping=5.0,
                                    query_pre_attn_scalar=16)),
}


def build(name, **extra):
    """A tiny random model of the family (eval mode, eager)."""
    config_class, fields = FAMILIES[name]
    config = getattr(transformers, config_class)(**{**SMALL, **fields, **extra})
    torch.manual_seed(40)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape))
    return model.eval()


def as_impl(model, impl):
    other = copy.deepcopy(model)
    other.set_attn_implementation(impl)
    return other


def ids(batch, length, seed=1):
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def close(got, want, rel=1e-4):
    got, want = got.double(), want.double()
    return float((got - want).abs().max()) <= rel * float(want.abs().max())


@pytest.mark.parametrize("name", ["mistral", "gemma2"])
def test_a_4d_mask_of_the_caller_on_sliding_layers(name):
    """A 4-D causal mask passed by the caller reaches every layer as it is:
    eager and sdpa let a sliding layer see every earlier key; the window
    was applied instead (relative error 1.1 for Mistral, 0.24 for Gemma 2)."""
    eager = build(name)
    ropeattn_model = as_impl(eager, "ropeattn")
    x = ids(2, 10)
    i, j = torch.arange(10)[:, None], torch.arange(10)[None, :]
    additive = torch.zeros(2, 1, 10, 10).masked_fill(j > i, torch.finfo(torch.float32).min)
    with torch.no_grad():
        got = ropeattn_model(x, attention_mask=additive).logits
        assert close(got, eager(x, attention_mask=additive).logits)
        if name == "mistral":  # sdpa reads a boolean mask (gemma2's softcap: eager only)
            seen = (j <= i).expand(2, 1, 10, 10)
            want = as_impl(eager, "sdpa")(x, attention_mask=seen).logits
            assert close(ropeattn_model(x, attention_mask=seen).logits, want)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_static_cache_generate(name):
    """generate() with cache_implementation="static" (the mask is made
    before the forward, then passed as a 4-D mask): the same tokens as
    eager's, a left-padded batch included (it raised AttributeError:
    'Mask' object has no attribute 'contiguous')."""
    eager = build(name)
    ropeattn_model = as_impl(eager, "ropeattn")
    x = ids(2, 10, seed=2)
    mask = torch.ones_like(x)
    mask[0, :3] = 0
    for kwargs in (dict(input_ids=x[:1]), dict(input_ids=x, attention_mask=mask)):
        got, want = (m.generate(**kwargs, max_new_tokens=12, do_sample=False,
                                cache_implementation="static")
                     for m in (ropeattn_model, eager))
        assert torch.equal(got, want)


def test_sparse_attention_refused_at_load():
    """DeepSeek V3.2's and MiniMax M3's indexers select each query's keys:
    under "ropeattn" transformers hands the selection to the attention
    function (indices=, block_indices=), which ran dense attention (MiniMax
    M3: logits off by 1.4 relative, no error) or failed on the mask's type
    (DeepSeek V3.2: TypeError 'Mask' object is not subscriptable)."""
    small = {k: v for k, v in SMALL.items()}
    configs = (
        transformers.DeepseekV32Config(**small, kv_lora_rank=16, q_lora_rank=24,
                                       qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12,
                                       head_dim=24, n_routed_experts=4, num_experts_per_tok=2,
                                       first_k_dense_replace=1, moe_intermediate_size=32,
                                       n_group=1, topk_group=1, index_topk=4,
                                       index_head_dim=16, index_n_heads=2),
        transformers.MiniMaxM3VLTextConfig(**small, head_dim=16, num_local_experts=2,
                                           num_experts_per_tok=1, dense_intermediate_size=96,
                                           shared_intermediate_size=32, rotary_dim=8,
                                           index_n_heads=2, index_head_dim=16,
                                           index_block_size=2, index_topk_blocks=2,
                                           layer_types=["minimax_m3_sparse"] * 2),
    )
    for config in configs:
        with pytest.raises(ropeattn.UnsupportedError, match="index_n_heads"):
            AutoModelForCausalLM.from_config(config, attn_implementation="ropeattn")


def test_a_sub_model_set_by_name_is_checked():
    """set_attn_implementation({"text_config": "ropeattn"}) on a built
    model sets each sub-model through get_correct_attn_implementation, not
    the check the backend wrapped: MiniMax M3 VL's sparse text model took
    "ropeattn" without the refusal its load gives."""
    text = dict(SMALL, head_dim=16, num_local_experts=2, num_experts_per_tok=1,
                dense_intermediate_size=96, shared_intermediate_size=32, rotary_dim=8,
                index_n_heads=2, index_head_dim=16, index_block_size=2, index_topk_blocks=2,
                layer_types=["minimax_m3_sparse"] * 2)
    config = transformers.MiniMaxM3VLConfig(text_config=text)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager")
    with pytest.raises(ropeattn.UnsupportedError, match="index_n_heads"):
        model.set_attn_implementation({"text_config": "ropeattn"})
    assert model.config.text_config._attn_implementation == "eager"


def test_a_mask_changed_in_place_after_it_was_made():
    """ropeattn.transformers.mask()'s tensor (what create_causal_mask gives
    under "ropeattn", which a caller may keep and pass on) changed in place
    after a layer used it, and the 2-D padding changed after the mask was
    made from it: the layers' blocks were kept from the first look (a key
    hidden in place still seen: 0.82 off sdpa) and the padding read where
    transformers' mask had not (the last token's row zeroed)."""
    from ropeattn.torch import eager_attention_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import causal_mask_function
    module = torch.nn.Module().eval()
    module.is_causal, module.num_key_value_groups = True, 2
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, h, 6, 8, generator=g) for h in (4, 2, 2))

    def check(mask):
        got, _ = eager_attention_forward(module, q, k, v, mask, scaling=0.3)
        want, _ = sdpa_attention_forward(module, q.double(), k.double(), v.double(), mask,
                                         scaling=0.3)
        assert close(got, want, 1e-5)

    mask = ropeattn.transformers.mask(1, 6, 6, mask_function=causal_mask_function)
    check(mask)
    mask[..., 2] = False  # key 2 hidden from every query
    check(mask)
    padding = torch.ones(1, 6, dtype=torch.bool)  # as create_causal_mask passes it
    mask = ropeattn.transformers.mask(1, 6, 6, mask_function=causal_mask_function,
                                      attention_mask=padding)
    padding[0, 5] = False  # after the mask was made: not in it
    check(mask)
