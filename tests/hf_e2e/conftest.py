"""The end-to-end suite's setup: two threads, quiet transformers, one saved
checkpoint per family for the whole session, and the backend under test.

Run by `make hf-e2e` (the venv's Python, the package installed for it);
RA_CLI names the ropeattn CLI (default: build/ropeattn).
"""
import os
import sys

import pytest
import torch
import transformers

sys.path.insert(0, os.path.dirname(__file__))
import models  # noqa: E402

THREADS = 2


def pytest_configure(config):
    torch.set_num_threads(THREADS)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def pytest_collection_modifyitems(items):
    """A family's known bug (Family.xfail) marks its test xfail, strict."""
    for item in items:
        family = getattr(item, "callspec", None) and item.callspec.params.get("family")
        bugs = getattr(family, "xfail", {})
        if item.originalname in bugs:
            item.add_marker(pytest.mark.xfail(strict=True, reason=bugs[item.originalname]))


@pytest.fixture(scope="session")
def backend():
    """ropeattn.transformers, imported: it registers "ropeattn" with
    transformers' AttentionInterface."""
    import ropeattn.transformers
    return ropeattn.transformers


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory):
    """family -> its checkpoint's folder, saved on first use."""
    root = tmp_path_factory.mktemp("checkpoints")
    saved = {}

    def path_of(family):
        if family.name not in saved:
            saved[family.name] = models.save_checkpoint(family, root / family.name)
        return saved[family.name]
    return path_of


@pytest.fixture(scope="session")
def loaded(checkpoints, backend):
    """(family, attn_implementation, dtype) -> the model from_pretrained
    loads from the family's checkpoint (eval mode), loaded on first use and
    shared by the inference tests (the training test loads its own)."""
    cache = {}

    def model_of(family, attn_implementation, dtype=torch.float32):
        key = (family.name, attn_implementation, dtype)
        if key not in cache:
            cache[key] = models.load(checkpoints(family), attn_implementation, dtype)
        return cache[key]
    return model_of


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("RA_CLI") or os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "ropeattn")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no ropeattn CLI at {path}: build it (make) or set RA_CLI")
    return os.path.abspath(path)
