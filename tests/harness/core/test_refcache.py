"""The reference outputs cache: a figure is served only as this user's Assay computed and sealed it."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core import refcache
from harness.core.plan import Settings, load_model


@pytest.mark.tor("TOR-RES-003")
def test_reference_outputs_planted_in_the_cache_are_computed_again(tmp_path, monkeypatch):
    """Issue 39, B2: the cache file of a reference's outputs is named by content (model, inputs, tools), so anyone
    who can write the work folder can put there the outputs of wrong C, which would then pass against them. Served
    only under this user's seal, a planted or edited file is computed again."""
    monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "user.key"))
    settings = Settings(n_inputs=4, work_dir=tmp_path / "work")
    model = load_model("acas-reg50", settings)
    calls = []

    def compute(inputs: np.ndarray) -> np.ndarray:
        calls.append(len(inputs))
        return inputs[:, :2] * 2.0

    first = refcache.cached_outputs("keras", model, settings, compute)
    assert refcache.cached_outputs("keras", model, settings, compute).tolist() == first.tolist() and calls == [4]
    [path] = (settings.work_dir / "references").rglob("keras-n4-*.npy")
    np.save(path, np.zeros_like(first))  # the planted file: a wrong C's outputs, in the format and at the name
    np.testing.assert_array_equal(refcache.cached_outputs("keras", model, settings, compute), first)
    assert calls == [4, 4]
    np.testing.assert_array_equal(np.load(path), first)  # and the entry is the computed one again
