"""attn_implementation="ropeattn" (ropeattn.transformers) against transformers'
own "eager" and "sdpa" on tiny random models saved with save_pretrained and
loaded with from_pretrained: Llama, Qwen2 (sliding-window layers beside
full ones), Mistral (a window shorter than the generation), Gemma 2
(soft-capping, sliding and full layers) and gpt-oss (sinks).  Needs the
transformers venv (scripts/setup-hf-venv.sh), with the package installed
where its python finds it:

    .venv-hf/bin/python -m pytest -q tests/hf_e2e/test_backend.py
"""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import ropeattn  # noqa: E402
import ropeattn.transformers  # noqa: E402,F401  (registers "ropeattn")
from transformers import AutoModelForCausalLM  # noqa: E402

torch.set_num_threads(2)
VOCAB = 97
SMALL = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             max_position_embeddings=256, pad_token_id=0, eos_token_id=None,
             bos_token_id=None)

# family: (config class, extra fields, transformers' implementation to compare with:
# sdpa raises on softcap and ignores sinks)
FAMILIES = {
    "llama": ("LlamaConfig", {}, ("eager", "sdpa")),
    "qwen2": ("Qwen2Config", dict(use_sliding_window=True, sliding_window=6,
                                  max_window_layers=1,
                                  layer_types=["full_attention", "sliding_attention"]),
              ("eager", "sdpa")),
    "mistral": ("MistralConfig", dict(sliding_window=6), ("eager", "sdpa")),
    "gemma2": ("Gemma2Config", dict(sliding_window=6, attn_logit_softcapping=5.0,
                                    final_logit_softcapping=30.0, query_pre_attn_scalar=16),
               ("eager",)),
    "gpt_oss": ("GptOssConfig", dict(sliding_window=6, num_local_experts=4,
                                     num_experts_per_tok=2,
                                     layer_types=["sliding_attention", "full_attention"]),
                ("eager",)),
}


def close(got, want, rel=1e-4):
    """max |got - want| within rel of max |want|."""
    got, want = got.double(), want.double()
    return float((got - want).abs().max()) <= rel * float(want.abs().max())


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory):
    """(name, path of the saved tiny model, the implementations to compare with)."""
    name = request.param
    config_class, extra, references = FAMILIES[name]
    config = getattr(transformers, config_class)(**{**SMALL, **extra})
    torch.manual_seed(40)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # sinks start at zero: give them values
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape))
    path = tmp_path_factory.mktemp(name)
    model.save_pretrained(path)
    return name, path, references


def load(path, impl, dtype=torch.float32):
    return AutoModelForCausalLM.from_pretrained(path, attn_implementation=impl,
                                                dtype=dtype).eval()


def ids(batch, length, seed=1):
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_logits_float32(family):
    _, path, references = family
    x = ids(2, 16)
    with torch.no_grad():
        got = load(path, "ropeattn")(x).logits
        for impl in references:
            assert close(got, load(path, impl)(x).logits), impl


def test_greedy_generate_beyond_the_window(family):
    """20 new tokens after 12: past every sliding window (6), through the
    caches generate() makes (dynamic, sliding-window, hybrid)."""
    _, path, references = family
    x = ids(1, 12, seed=2)
    got = load(path, "ropeattn").generate(x, max_new_tokens=20, do_sample=False)
    for impl in references:
        want = load(path, impl).generate(x, max_new_tokens=20, do_sample=False)
        assert torch.equal(got, want), impl


def test_left_padded_batch(family):
    _, path, references = family
    x = ids(3, 10, seed=3)
    mask = torch.ones_like(x)
    mask[0, :4] = 0
    mask[2, :7] = 0
    real = mask.bool()
    with torch.no_grad():
        got = load(path, "ropeattn")(x, attention_mask=mask).logits
        for impl in references:
            want = load(path, impl)(x, attention_mask=mask).logits
            assert close(got[real], want[real]), impl  # padding rows: 0 here, not compared
    gen = load(path, "ropeattn").generate(x, attention_mask=mask, max_new_tokens=8,
                                          do_sample=False)
    want = load(path, references[0]).generate(x, attention_mask=mask, max_new_tokens=8,
                                              do_sample=False)
    assert torch.equal(gen, want)


def test_packed_position_ids(family):
    """Three documents in one row, told by position_ids restarting (no
    attention_mask, no cache: transformers' packed-sequence masks)."""
    _, path, references = family
    x = ids(1, 15, seed=4)
    positions = torch.cat((torch.arange(5), torch.arange(7), torch.arange(3)))[None]
    with torch.no_grad():
        got = load(path, "ropeattn")(x, position_ids=positions, use_cache=False).logits
        want = load(path, "eager")(x, position_ids=positions, use_cache=False).logits
    assert close(got, want)


def test_training_step_gradients(family):
    _, path, references = family
    x = ids(2, 12, seed=5)
    grads = {}
    for impl in ("ropeattn", references[0]):
        model = load(path, impl).train()
        model(x, labels=x, use_cache=False).loss.backward()
        grads[impl] = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    want = grads[references[0]]
    assert grads["ropeattn"].keys() == want.keys()
    for n, g in grads["ropeattn"].items():
        assert close(g, want[n]), n


def test_bfloat16(family):
    """A bfloat16 model: every layer's attention output is bfloat16 (o_proj
    takes it); logits within bfloat16's rounding of eager's."""
    _, path, _ = family
    x = ids(2, 10, seed=6)
    with torch.no_grad():
        got = load(path, "ropeattn", torch.bfloat16)(x).logits
        want = load(path, "eager", torch.bfloat16)(x).logits
    assert got.dtype == torch.bfloat16 and close(got, want, 0.1)


def test_threads_give_the_same_bits(family):
    _, path, _ = family
    x = ids(1, 12, seed=7)
    model = load(path, "ropeattn")
    with torch.no_grad():
        one = model(x).logits
        ropeattn.transformers.register(context=ropeattn.Context(2))
        try:
            two = model(x).logits
        finally:
            ropeattn.transformers.register()
    assert torch.equal(one, two)


def test_refused_at_load(tmp_path):
    config = transformers.LlamaConfig(**SMALL, alibi=True)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    with pytest.raises(ropeattn.UnsupportedError, match="alibi"):
        load(tmp_path, "ropeattn")
    model = load(tmp_path, "eager")
    with pytest.raises(ropeattn.UnsupportedError, match="alibi"):
        model.set_attn_implementation("ropeattn")


def test_a_4d_mask_the_library_does_not_form_goes_whole(family):
    """A 4-D mask passed as it is that no causal, window or padding mask
    equals (here bidirectional, as over image tokens) reaches the library
    whole, as SDPA's attn_mask: transformers' numbers with it."""
    _, path, references = family
    x = ids(1, 6, seed=8)
    bidirectional = torch.zeros(1, 1, 6, 6)  # a 4-D float mask, passed as it is
    with torch.no_grad():
        got = load(path, "ropeattn")(x, attention_mask=bidirectional).logits
        for impl in references:
            want = load(path, impl)(x, attention_mask=bidirectional).logits
            assert close(got, want), impl


def test_refused_at_the_first_call(family):
    _, path, _ = family
    model = load(path, "ropeattn")
    x = ids(1, 6, seed=8)
    integers = torch.ones(1, 1, 6, 6, dtype=torch.long)  # neither sdpa's nor eager's reading
    with pytest.raises(ropeattn.UnsupportedError, match="attention_mask"), torch.no_grad():
        model(x, attention_mask=integers)
    with pytest.raises((ropeattn.UnsupportedError, ValueError), match="output_attentions"):
        model(x, output_attentions=True)
