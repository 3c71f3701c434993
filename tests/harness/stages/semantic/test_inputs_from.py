"""``assay semantic --inputs-from FILE`` (issue 40, item 6): the user's own test set runs beside or instead of the
uniform draw; a classifier's records give top-1 agreement, flips, accuracy with labels and the decisions the
derived bound guarantees; a file that does not fit the model is one line and exit status 2.

The flip is planted in hand-written C (the ``dir:`` prebuilt generator) that swaps the two class scores when its
first input is above 0.9; the Keras model, the references, the float64 arbiter, the derived bound and gcc are real.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from harness.cli import main
from harness.core.results import ResultStore
from harness.models import trained
from harness.stages.semantic import run as campaign

SWAP = "    if (input[0] > 0.9f) { float t = output[0]; output[0] = output[1]; output[1] = t; }\n"
FLIPPED = 4  # the row of the test set whose first input is above 0.9


def _prebuilt(root, source: str) -> str:
    directory = root / "prebuilt"
    directory.mkdir()
    (directory / "net.c").write_text(source)
    (directory / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2}))
    return f"dir:{directory}"


def _test_set(weights: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Six inputs of Dense(3 -> 2), all in [-1, 1], row FLIPPED with x0 = 0.95, and one on the two classes' tie
    (x = (a, 0, 0) with a W[0, 0] + b0 = a W[0, 1] + b1), whose decision no bound can guarantee; labels are the
    exact model's classes but for row 0, mislabelled, so both accuracies are 5 / 6. Returns (x, y, tie row)."""
    x = np.random.default_rng(3).uniform(-0.5, 0.5, size=(6, 3)).astype(np.float32)
    x[FLIPPED, 0] = 0.95
    tie = 5
    x[tie] = [(bias[1] - bias[0]) / (weights[0, 0] - weights[0, 1]), 0.0, 0.0]
    labels = (x.astype(np.float64) @ weights + bias).argmax(axis=1)
    labels[0] = 1 - labels[0]
    return x, labels, tie


def _semantic(tmp_path, model: str, generator: str, inputs_from, *more: str) -> int:
    return main(["semantic", "--models", model, "--generators", generator, "--references", "keras",
                 "--inputs-from", str(inputs_from), "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
                 "--quiet", *more])


def test_a_planted_flip_is_reported_with_agreement_accuracy_and_guarantees(tmp_path, dense_keras_model,
                                                                         loop_dense_source):
    source, (weights, bias) = loop_dense_source
    c = source()
    generator = _prebuilt(tmp_path, c[:c.rstrip().rindex("}")] + SWAP + "}\n")
    x, labels, tie = _test_set(weights, bias)
    np.savez(tmp_path / "test.npz", x=x, y=labels)
    assert _semantic(tmp_path, dense_keras_model, generator, tmp_path / "test.npz", "--inputs", "0") == 1
    (record,) = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert record["verdict"] == "fail"  # the swap moves the outputs; the flip itself is reported, not judged
    assert record["inputs_from"]["inputs"] == 6 and record["inputs_from"]["labels"]
    decisions = record["decisions"]
    exact_class = int((x[FLIPPED].astype(np.float64) @ weights + bias).argmax())
    assert decisions["flips"] == [{"input": FLIPPED, "c": 1 - exact_class, "reference": exact_class}]
    assert decisions["agreement"] == pytest.approx(5 / 6)
    # row 0 is mislabelled for both; row FLIPPED is right for the reference only
    assert decisions["accuracy"] == {"c": pytest.approx(4 / 6), "reference": pytest.approx(5 / 6), "labels": 6}
    assert [n["input"] for n in decisions["not_guaranteed"]] == [tie] and decisions["guaranteed"] == 5
    (short,) = decisions["not_guaranteed"]
    assert short["margin"] <= short["bound"] and short["bound"] > 0
    table = (tmp_path / "out" / "table1.md").read_text()
    assert "## Decisions on the user's data" in table and f"flips at inputs #{FLIPPED} (C " in table
    assert f"decision not guaranteed at inputs #{tie} " in table and "| 83.33 % | 1 | 66.67 % | 83.33 % | 5 of 6 |" \
        in table
    assert "Decisions on the user&#x27;s data" in (tmp_path / "out" / "index.html").read_text()


def test_the_same_set_beside_the_uniform_draw_on_correct_code(tmp_path, dense_keras_model, loop_dense_dir,
                                                            loop_dense_source):
    _source, (weights, bias) = loop_dense_source
    x, _labels, tie = _test_set(weights, bias)
    np.save(tmp_path / "test.npy", x)
    assert _semantic(tmp_path, dense_keras_model, loop_dense_dir("correct"), tmp_path / "test.npy",
                     "--inputs", "20", "--tolerance", "derived") == 0
    (record,) = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert record["verdict"] == "pass" and record["n_inputs"] == 20 and record["inputs_from"]["inputs"] == 6
    decisions = record["decisions"]
    assert decisions["flips"] == [] and decisions["agreement"] == 1.0 and decisions["accuracy"] is None
    assert decisions["inputs"] == 6 and [n["input"] for n in decisions["not_guaranteed"]] == [tie]


def test_the_files_bytes_key_the_records(tmp_path, dense_keras_model, loop_dense_dir, loop_dense_source):
    """The same file reuses the item's records; one label changed recomputes them (content-keyed like the draw)."""
    _source, (weights, bias) = loop_dense_source
    x, labels, _tie = _test_set(weights, bias)
    np.savez(tmp_path / "a.npz", x=x, y=labels)
    labels[1] = 1 - labels[1]
    np.savez(tmp_path / "b.npz", x=x, y=labels)
    settings = campaign.Settings(n_inputs=0, work_dir=tmp_path / "work", sanitize=0, inputs_from=tmp_path / "a.npz")
    store = ResultStore(tmp_path / "results.json")
    (item,) = campaign.plan([dense_keras_model], [loop_dense_dir("keyed")], ["keras"], ["host"], settings).items
    first = campaign.run_item(item, settings, store)
    assert campaign.run_item(item, settings, store) == first  # taken from results.json, not recomputed
    (relabelled,) = campaign.run_item(item, replace(settings, inputs_from=tmp_path / "b.npz"), store)
    assert relabelled["fingerprint"] != first[0]["fingerprint"]
    assert first[0]["decisions"]["accuracy"]["reference"] == pytest.approx(5 / 6)
    assert relabelled["decisions"]["accuracy"]["reference"] == pytest.approx(4 / 6)


BAD = {  # name -> (what the file holds, a word of the cause)
    "missing": (None, "no such file"),
    "text.txt": ("text", "not a .npy or .npz file"),
    "shape.npy": (np.zeros((4, 5), np.float32), "takes (N, 3)"),
    "dtype.npy": (np.array([["a", "b", "c"]]), "dtype <U1"),
    "nan.npy": (np.array([[0.1, np.nan, 0.2]], np.float32), "x[0, 1] is nan"),
    "domain.npy": (np.array([[0.1, 0.2, 1.5]], np.float32), "x[0, 2] = 1.5 is outside"),
    "no-x.npz": ({"inputs": np.zeros((2, 3), np.float32)}, "holds arrays inputs"),
    "labels.npz": ({"x": np.zeros((2, 3), np.float32), "y": np.array([0, 1, 1])}, "labels of shape (3,) for 2"),
    "classes.npz": ({"x": np.zeros((2, 3), np.float32), "y": np.array([0, 2])}, "label y[1] = 2 is not a class"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_file_is_one_line_and_exit_2(tmp_path_factory, dense_keras_model, loop_dense_dir, capsys, name):
    root = tmp_path_factory.mktemp("bad")
    content, cause = BAD[name]
    path = root / name
    if isinstance(content, dict):
        np.savez(path, **content)
    elif isinstance(content, np.ndarray):
        np.save(path, content)
    elif content is not None:
        path.write_text(content)
    assert _semantic(root, dense_keras_model, loop_dense_dir(name), path) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"assay: error: {path}: ") and cause in line, line


# trains digits-mlp in its work folder: 23 s in all on the 2-core machine (2026-12-06), so not marked slow
def test_the_trained_tiers_test_split_reports_agreement_accuracy_and_guarantees(tmp_path):
    split = trained.data("digits-mlp")
    np.savez(tmp_path / "digits-test.npz", x=split.x_test, y=split.y_test)
    status = _semantic(tmp_path, "digits-mlp", "assay-v2", tmp_path / "digits-test.npz", "--inputs", "0")
    assert status == 0
    records = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert {r["variant"] for r in records} == {"keras", "onnx"}
    for record in records:
        decisions = record["decisions"]
        assert decisions["inputs"] == len(split.x_test) == 450 and decisions["classes"] == 10
        assert decisions["agreement"] == 1.0 - len(decisions["flips"]) / 450
        assert decisions["accuracy"]["labels"] == 450 and decisions["accuracy"]["reference"] > 0.9
        assert abs(decisions["accuracy"]["c"] - decisions["accuracy"]["reference"]) <= len(decisions["flips"]) / 450
        assert decisions["guaranteed"] + len(decisions["not_guaranteed"]) == 450 and decisions["guaranteed"] > 400
    table = (tmp_path / "out" / "table1.md").read_text()
    assert "## Decisions on the user's data" in table and "digits-test.npz" in table


def test_no_input_at_all_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["semantic", "--models", "acas-reg50", "--inputs", "0", "--out", str(tmp_path / "out"),
                 "--work", str(tmp_path / "work")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == ("assay: error: --inputs must be at least 1 (0 only with --inputs-from: the file's inputs alone; "
                    "got 0)")
