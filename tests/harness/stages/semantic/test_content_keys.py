"""Resume is keyed by content: a changed model file, edited prebuilt C or other inputs is recomputed, never
served from an earlier run; the report shows exactly the records of the current run.

Real Keras files, real generated C (``assay generate``), real references; the CLI runs as a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.core.results import ResultStore
from harness.models.model import file_sha256
from harness.stages.semantic import run as campaign

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def dense_keras(path: Path, seed: int) -> Path:
    """A 4 -> 8 ReLU -> 3 Keras file whose weights come from ``seed``."""
    import keras

    rng = np.random.default_rng(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.get_weights()])
    model.save(path)
    return path


def assay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=600)


def records(out: Path) -> list[dict]:
    return ResultStore(out / "results.json").records()


@pytest.mark.tor("TOR-RES-001")
def test_swapping_the_model_file_recomputes_and_reports_the_new_verdict(tmp_path):
    model = dense_keras(tmp_path / "net.keras", seed=1)
    work, out, generated = tmp_path / "work", tmp_path / "out", tmp_path / "gen"
    assert assay("generate", "--model", str(model), "--out", str(generated), "--work", str(work)).returncode == 0
    common = ("semantic", "--models", str(model), "--generators", f"dir:{generated}", "--references", "keras",
              "--inputs", "20", "--quiet", "--out", str(out), "--work", str(work))
    first = assay(*common)
    assert first.returncode == 0, first.stderr
    (before,) = records(out)
    assert before["verdict"] == "pass" and before["provenance"]["model_sha256"]["keras"] == file_sha256(model)

    dense_keras(model, seed=2)  # same path and shapes, other weights: the C generated from seed 1 is now wrong
    second = assay(*common)
    assert second.returncode == 1, second.stderr
    (after,) = records(out)
    assert after["verdict"] == "fail" and after["provenance"]["model_sha256"]["keras"] == file_sha256(model)
    assert after["fingerprint"] != before["fingerprint"]
    assert "its manifest says it was generated from a model with SHA-256" in second.stderr
    table = (out / "table1.md").read_text()
    assert "| fail " in table and f"pass {before['max_abs_error']:.4e} |" not in table


@pytest.mark.tor("TOR-RES-001")
def test_edited_prebuilt_c_is_checked_again(tmp_path):
    model = dense_keras(tmp_path / "net.keras", seed=3)
    work, generated = tmp_path / "work", tmp_path / "gen"
    assert assay("generate", "--model", str(model), "--out", str(generated), "--work", str(work)).returncode == 0
    settings = campaign.Settings(n_inputs=10, work_dir=work, arbiter=False)
    store = ResultStore(tmp_path / "out" / "results.json")
    (item,) = campaign.plan([str(model)], [f"dir:{generated}"], ["keras"], ["host"], settings).items
    (first,) = campaign.run_item(item, settings, store)
    (again,) = campaign.run_item(item, settings, store)
    assert first["verdict"] == again["verdict"] == "pass" and again["finished_at"] == first["finished_at"]

    source = generated / json.loads((generated / "manifest.json").read_text())["entry"]["file"]
    text = source.read_text()
    assert "output[o] = acc + " in text  # the last dense layer writes the outputs
    source.write_text(text.replace("output[o] = acc + ", "output[o] = 0.5f + acc + "))
    (edited,) = campaign.run_item(item, settings, store)
    assert edited["fingerprint"] != first["fingerprint"]
    assert edited["verdict"] in ("fail", "error"), edited["cause"]


@pytest.mark.tor("TOR-RES-001")
def test_model_seed_and_input_seed_are_separate(tmp_path):
    """C generated from the zoo model of model-seed 0 checks against other inputs (--seed 1) and passes."""
    work, generated = tmp_path / "work", tmp_path / "gen"
    made = assay("generate", "--model", "acas-reg50", "--out", str(generated), "--work", str(work))
    assert made.returncode == 0, made.stderr
    checked = assay("semantic", "--models", "acas-reg50", "--generators", f"dir:{generated}", "--references",
                    "onnxruntime", "--inputs", "20", "--seed", "1", "--quiet", "--out", str(tmp_path / "out"),
                    "--work", str(work))
    assert checked.returncode == 0, checked.stderr
    (record,) = records(tmp_path / "out")
    assert (record["seed"], record["model_seed"], record["verdict"]) == (1, 0, "pass")
    other = assay("semantic", "--models", "acas-reg50", "--generators", f"dir:{generated}", "--references",
                  "onnxruntime", "--inputs", "20", "--model-seed", "1", "--quiet", "--out", str(tmp_path / "o2"),
                  "--work", str(work))
    assert other.returncode == 1 and "generated from a model with SHA-256" in other.stderr


@pytest.mark.parametrize("name", ["with,comma.keras"])
def test_a_model_file_name_with_a_comma_can_be_given(tmp_path, name):
    model = dense_keras(tmp_path / name, seed=4)
    result = assay("semantic", "--models", str(model), "--models", "acas-reg50", "--references", "onnxruntime",
                   "--inputs", "5", "--quiet", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr
    assert {r["model"] for r in records(tmp_path / "out")} == {str(model), "acas-reg50"}
