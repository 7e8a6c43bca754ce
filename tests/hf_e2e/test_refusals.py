"""Families the backend refuses by design (fail closed): loading one with
attn_implementation="ropeattn" raises, naming what it cannot run, rather
than running it as something else."""
import pytest

import ropeattn
import models
from families import FAMILIES, names

REFUSED = [f for f in FAMILIES if f.refuses]


@pytest.mark.parametrize("family", REFUSED, ids=names(REFUSED))
def test_refused_at_load(family, checkpoints, backend):
    path = checkpoints(family)
    with pytest.raises(ropeattn.UnsupportedError, match=family.refuses):
        models.load(path, "ropeattn")
