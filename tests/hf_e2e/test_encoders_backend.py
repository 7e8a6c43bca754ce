"""attn_implementation="ropeattn" on RoPE encoders (issue 43): ModernBERT
(global and local layers, its bidirectional sliding window) and ESM-2
(rotary, bidirectional), tiny random models built by transformers, against
its own "sdpa" and "eager": outputs and gradients, with and without
padding.  Their modules have is_causal False: the backend runs them
without the causal mask, transformers' bidirectional mask as attn_mask.

    .venv-hf/bin/python -m pytest -q tests/hf_e2e/test_encoders_backend.py
"""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import ropeattn.transformers  # noqa: E402,F401  (registers "ropeattn")

VOCAB = 37
ENCODERS = {
    # local_attention 6 over 16 tokens: the window matters; layers 0 and 2 global
    "modernbert": (transformers.ModernBertConfig, transformers.ModernBertModel, dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, local_attention=6, global_attn_every_n_layers=2,
        max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        cls_token_id=1, sep_token_id=2)),
    "esm": (transformers.EsmConfig, transformers.EsmModel, dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, position_embedding_type="rotary", max_position_embeddings=64,
        pad_token_id=0, mask_token_id=3, token_dropout=False)),
}
# float32 throughout, the same weights: attention by the library against
# PyTorch's kernels, a few layers deep; 1e-4 of the largest value (issue 43's
# bar) leaves room for float32 sums in another order, far below a wrong mask
REL = 1e-4


def close(got, want, rel=REL):
    got, want = got.double(), want.double()
    return float((got - want).abs().max()) <= rel * float(want.abs().max())


@pytest.fixture(scope="module", params=sorted(ENCODERS))
def encoder(request):
    config_class, model_class, fields = ENCODERS[request.param]
    torch.manual_seed(43)
    model = model_class(config_class(**fields)).eval()
    with torch.no_grad():  # norms and biases start at 1 and 0: give them values
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    return request.param, model


def run(model, impl, ids, mask, dy):
    """(last_hidden_state, the parameters' gradients of sum(out * dy))."""
    model.set_attn_implementation(impl)
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    (out * dy).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                          if p.grad is not None}


def batch(padded):
    """(ids [3, 16], attention_mask, dy): right padding when padded, as
    tokenizers give encoders; dy 0 on padding rows (no loss there)."""
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(4, VOCAB, (3, 16), generator=gen)
    mask = torch.ones_like(ids)
    if padded:
        mask[0, 11:] = 0
        mask[2, 5:] = 0
        ids[mask == 0] = 0
    return ids, mask, torch.randn(3, 16, 64, generator=gen) * mask[..., None]


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_outputs_match_transformers(encoder, padded):
    name, model = encoder
    ids, mask, _ = batch(padded)
    real = mask.bool()
    outs = {}
    with torch.no_grad():
        for impl in ("ropeattn", "sdpa", "eager"):
            model.set_attn_implementation(impl)
            outs[impl] = model(input_ids=ids, attention_mask=mask).last_hidden_state
    for impl in ("sdpa", "eager"):
        assert close(outs["ropeattn"][real], outs[impl][real]), (name, impl)


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_gradients_match_transformers(encoder, padded):
    name, model = encoder
    ids, mask, dy = batch(padded)
    real = mask.bool()
    got, grads = run(model, "ropeattn", ids, mask, dy)
    for impl in ("sdpa", "eager"):
        want, want_grads = run(model, impl, ids, mask, dy)
        assert close(got[real], want[real]), (name, impl)  # as the forward's test
        assert grads.keys() == want_grads.keys()
        for key, g in grads.items():
            assert close(g, want_grads[key]), (name, impl, key)
