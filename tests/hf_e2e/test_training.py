"""A training step end to end: the causal-LM loss of a batch and its
backward through ropeattn, against "eager" and "sdpa": the loss, and every
parameter's gradient within 1e-4 of that tensor's max|gradient|."""
import pytest
import torch

import check
import models
from families import names
from test_generate import RUNS, references

GRAD_TOL = 1e-4


def gradients(path, attn_implementation, ids, mask):
    """(loss, {name: gradient}) of one training step's backward (train mode;
    every dropout of the suite's configs is 0)."""
    model = models.load(path, attn_implementation).train()
    labels = ids.masked_fill(unscored(mask), -100)
    loss = model(ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}


def unscored(mask):
    """Tokens no loss is taken on: padding, and the first real token of a
    left-padded row, whose prediction is a padding row's output (0 under
    ropeattn and transformers' sdpa and flash paths, a mean of values under
    eager: no implementation's is right).  [B, S] bool."""
    before = torch.nn.functional.pad(mask[:, :-1], (1, 0), value=1)
    return (mask == 0) | (before == 0)


@pytest.mark.parametrize("family", RUNS, ids=names(RUNS))
def test_training_step_gradients(family, checkpoints, backend):
    """A batch of 2 x 24 tokens, the second row left-padded by 6 (label -100
    where unscored): each reference's loss and gradient of every parameter;
    no parameter left without one (a gradient that stopped at the backend
    shows as None)."""
    path = checkpoints(family)
    ids = models.prompt_ids(2, 24)
    mask = torch.ones_like(ids)
    mask[1, :6] = 0
    loss, got = gradients(path, "ropeattn", ids, mask)
    for reference in references(family):
        want_loss, want = gradients(path, reference, ids, mask)
        check.assert_close(loss, want_loss, 1e-5, f"{family.name} loss against {reference}")
        assert got.keys() == want.keys()
        missing = [n for n in want if want[n] is not None and got[n] is None]
        assert not missing, f"{family.name}: no gradient for {missing}"
        for name, grad in want.items():
            if grad is not None:
                check.assert_close(got[name], grad, GRAD_TOL,
                                   f"{family.name} d loss / d {name} against {reference}")
