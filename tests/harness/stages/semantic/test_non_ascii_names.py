"""A valid ``.nnet`` in a folder and file of spaces and non-ASCII letters (issue 44): it passes with a float64
arbiter figure on every record, and no library's traceback reaches stderr, here or when the arbiter does fail."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from harness.models import nnet
from harness.references import keras_ref
from harness.stages.semantic import run as campaign
from harness.stages.semantic.settings import Settings


@pytest.fixture
def nnet_file(tmp_path):
    path = tmp_path / "dir with spaces ünï" / "réseau ñ 2.nnet"
    path.parent.mkdir()
    rng = np.random.default_rng(0)  # two inputs, three ReLU units, one linear output
    nnet.write(path, nnet.NNet([rng.uniform(-1, 1, (3, 2)), rng.uniform(-1, 1, (1, 3))],
                               [rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 1)], np.full(2, -1.0), np.full(2, 1.0),
                               np.zeros(3), np.ones(3)))
    return path


def test_an_arbiter_failure_is_one_line_and_the_library_text_stays_in_the_record(nnet_file, tmp_path, monkeypatch):
    """TensorFlow's refusal of a non-ASCII scope name, made real by giving the clone's names an accent: a
    traceback of "in user code" frames, of which stderr and the record's ``error`` get one line."""
    monkeypatch.setattr(keras_ref, "identifier", lambda name, _fallback: f"é{name}")
    settings = Settings(n_inputs=3, work_dir=tmp_path / "work")
    found = campaign.arbiter_outputs(campaign.load_model(str(nnet_file), settings), settings, {})
    assert found["error"].startswith("arbiter not available: ValueError: "), found
    assert "\n" not in found["error"] and 'File "' not in found["error"] and "not a valid root scope name" in \
        found["error"]
    assert "in user code" in found["detail"] and 'File "' in found["detail"]


@pytest.mark.slow
def test_the_campaign_passes_with_an_arbiter_figure_and_a_quiet_stderr(nnet_file, tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", str(nnet_file), "--inputs",
                           "5", "--quiet", "--out", str(out), "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(word in done.stderr for word in ("in user code", 'File "', "tensorflow", "arbiter")), done.stderr
    records = json.loads((out / "results.json").read_text())["records"]
    assert len(records) == 4 and all(r["model"] == str(nnet_file) and r["verdict"] == "pass" for r in records)
    assert all(r["arbiter"] and "text" in r["arbiter"] for r in records), [r["arbiter"] for r in records]
