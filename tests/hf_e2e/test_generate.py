"""Inference end to end: a tiny checkpoint of each family, saved by
save_pretrained, loaded by from_pretrained with attn_implementation="ropeattn"
and run as a user would (generate(), a forward for the logits, a left-padded
batch) against the same checkpoint under transformers' "eager" and "sdpa".
"""
import pytest
import torch
import transformers
from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                    MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)

import check
import models
from families import FAMILIES, names

RUNS = [f for f in FAMILIES if not f.refuses]
PADDED = models.left_padded([5, 12, 9])  # (input_ids, attention_mask) [3, 12]
NEW_TOKENS = 32
LOGITS_TOL = 1e-4    # of max|logits|, float32
# bfloat16: ropeattn's logits may be at most BF16_FACTOR times as far from the
# float32 model's as transformers' own bf16 run ("eager" in bfloat16) is, plus
# BF16_FLOOR of max|logits| (a few of bf16's unit roundoff, 2^-8 = 3.9e-3,
# for a run whose eager error happens to be small).  Both runs round the same
# bf16 weights and activations; the bound says the backend adds no error of
# its own beyond bf16's.
BF16_FACTOR = 1.5
BF16_FLOOR = 2e-2


def references(family):
    """transformers' own implementations this family has ("sdpa": where its
    class supports it; Gemma 2, gpt-oss and GPT-J have none)."""
    classes = (MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES if family.vision
               else MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    cls = getattr(transformers, classes[family.model_type])
    return ["eager", "sdpa"] if cls._supports_sdpa else ["eager"]


def attention_layers(config):
    """How many layers of the text model attend (Qwen3-Next's
    linear-attention layers do not; a multimodal model's vision tower does
    not run on text-only prompts)."""
    config = config.get_text_config()
    types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
    return sum(t != "linear_attention" for t in types)


def greedy(model, ids, mask=None):
    """NEW_TOKENS greedy tokens (eos does not stop them): [B, NEW_TOKENS]."""
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, do_sample=False,
                             max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)
    return out[:, ids.shape[1]:]


def logits(model, ids, mask=None, position_ids=None):
    with torch.no_grad():
        return model(ids, attention_mask=mask, position_ids=position_ids).logits.float()


@pytest.mark.parametrize("family", RUNS, ids=names(RUNS))
def test_greedy_tokens(family, loaded):
    """Prompts of 5, 12 and 9 tokens, left-padded to 12 with attention_mask
    (the 12-token one past the 8-token windows and chunks: the prefill
    slides), then 32 greedy tokens (a prefill and 31 decode steps through
    generate()'s cache: dynamic, sliding or hybrid as the family's config
    says): the tokens of every reference; every attention layer ran through
    ropeattn in the prefill and in each decode step."""
    ids, mask = PADDED
    model = loaded(family, "ropeattn")
    with check.counting_calls() as calls:
        got = greedy(model, ids, mask)
    layers = attention_layers(model.config)
    assert len(calls) == layers and set(calls.values()) == {NEW_TOKENS}, (
        f"ropeattn ran {sorted(calls.values())} times in {len(calls)} attention modules; "
        f"expected {NEW_TOKENS} in each of {layers}")
    for reference in references(family):
        want = greedy(loaded(family, reference), ids, mask)
        assert torch.equal(got, want), (
            f"{family.name}: ropeattn's tokens differ from {reference}'s from step "
            f"{int((got != want).any(0).nonzero()[0])}:\n{got}\n{want}")


@pytest.mark.parametrize("family", RUNS, ids=names(RUNS))
def test_logits_float32(family, loaded):
    """A forward of 2 x 40 tokens: logits within 1e-4 of max|logits| of
    each reference's."""
    ids = models.prompt_ids(2, 40)
    got = logits(loaded(family, "ropeattn"), ids)
    for reference in references(family):
        want = logits(loaded(family, reference), ids)
        check.assert_close(got, want, LOGITS_TOL, f"{family.name} logits against {reference}")


@pytest.mark.parametrize("family", RUNS, ids=names(RUNS))
def test_logits_bfloat16(family, loaded):
    """The checkpoint loaded in bfloat16: ropeattn's logits (bf16, as the
    model's) no farther from the float32 model's than BF16_FACTOR times
    eager bf16's, plus BF16_FLOOR."""
    ids = models.prompt_ids(2, 40)
    exact = logits(loaded(family, "eager"), ids)
    model = loaded(family, "ropeattn", torch.bfloat16)
    with torch.no_grad():
        out = model(ids).logits
    assert out.dtype == torch.bfloat16, f"logits in {out.dtype}"
    eager = logits(loaded(family, "eager", torch.bfloat16), ids)
    if routed(model):
        got, want = median_position_error(out.float(), exact), median_position_error(eager, exact)
        assert got <= BF16_FACTOR * want + BF16_FLOOR, (
            f"{family.name} bf16 logits against float32: the median position's error {got:.3g},"
            f" eager bf16's {want:.3g}")
        return
    eager_err, _ = check.relative_error(eager, exact)
    check.assert_close(out.float(), exact, BF16_FACTOR * eager_err + BF16_FLOOR,
                       f"{family.name} bf16 logits against float32 (eager bf16: {eager_err:.3g})")


def routed(model):
    """Whether the model routes each token to its top experts (an MoE).  The
    choice is discrete: where two experts' router scores nearly tie, bf16's
    roundings pick either, and that token's logits move far, whichever
    backend ran the attention (qwen3_vl_moe on a Zen 3, avx2: eager bf16
    moved at one of 80 positions, ropeattn at two, 0.06 and 0.23 of
    max|logits|, the other positions' median 0.012 and 0.013).  For these the
    bf16 test bounds the median position's error."""
    config = model.config.get_text_config()
    return any((getattr(config, key, None) or 0) > 1
               for key in ("num_experts", "num_local_experts", "n_routed_experts"))


def median_position_error(got, want):
    """The median over positions of max|got - want| over the vocabulary, of
    max|want|."""
    diff = (got.double() - want.double()).abs().amax(-1)
    return float(diff.median()) / float(want.abs().max())


@pytest.mark.parametrize("family", RUNS, ids=names(RUNS))
def test_left_padded_logits(family, loaded):
    """The left-padded prompts in one forward (position_ids counting from
    each row's first token, as generate() makes them): each reference's
    logits on every real position.  (Not those of each prompt alone:
    transformers' own chunks and longrope change with the padding.)"""
    ids, mask = PADDED
    positions = models.padded_positions(mask)
    real = mask.bool()
    got = logits(loaded(family, "ropeattn"), ids, mask, positions)[real]
    for reference in references(family):
        want = logits(loaded(family, reference), ids, mask, positions)[real]
        check.assert_close(got, want, LOGITS_TOL,
                           f"{family.name} logits of the real positions against {reference}")
