"""A campaign turns every fault into a verdict, keeps going, and resumes without recomputing.

The C here is hand-written (the ``dir:`` prebuilt generator), so each fault is
exactly one we chose; the model and both references are real.
"""

import json
import os

import numpy as np
import pytest

from harness.stages.semantic import run as campaign
from harness.core.results import ResultStore

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture(scope="module")
def dense_model(tmp_path_factory):
    """A real Keras file: 3 inputs -> Dense(2) with non-zero weights and biases."""
    import keras

    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    weights = np.array([[0.5, -1.0], [0.25, 2.0], [-0.75, 0.125]], np.float32)
    bias = np.array([0.1, -0.2], np.float32)
    model.set_weights([weights, bias])
    model.save(path)
    return path, weights, bias


def c_dense(weights, bias, extra=""):
    """Hand-written C for the dense layer; ``extra`` is spliced in before the return."""
    rows = []
    for j in range(2):
        terms = " + ".join(f"input[{i}] * {float(weights[i, j])!r}f" for i in range(3))
        rows.append(f"    output[{j}] = {terms} + {float(bias[j])!r}f;")
    return "void dense(const float *input, float *output) {\n" + "\n".join(rows) + f"\n{extra}}}\n"


def prebuilt(root, name, source):
    directory = root / name
    directory.mkdir()
    (directory / "net.c").write_text(source)
    (directory / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2}))
    return f"dir:{directory}"


@pytest.fixture(scope="module")
def generators(tmp_path_factory, dense_model):
    _, weights, bias = dense_model
    root = tmp_path_factory.mktemp("c")
    return {
        "good": prebuilt(root, "good", c_dense(weights, bias)),
        "segfault": prebuilt(root, "segfault", c_dense(weights, bias, "    if (input[0] > 0.0f) *(volatile int *)0 = 1;\n")),
        "nan": prebuilt(root, "nan", c_dense(weights, bias, "    if (input[1] > 0.0f) output[1] = 0.0f / 0.0f;\n")),
        "hang": prebuilt(root, "hang", c_dense(weights, bias, "    while (input[2] > -2.0f) {}\n")),
        "wrong": prebuilt(root, "wrong", c_dense(weights, bias, "    output[0] += 1e-3f;\n")),
        "broken": prebuilt(root, "broken", "void dense(const float *input, float *output) { oops }\n"),
    }


@pytest.mark.tor("TOR-SEM-004")
def test_every_fault_is_a_verdict_and_the_campaign_goes_on(tmp_path, dense_model, generators):
    settings = campaign.Settings(n_inputs=50, seed=1, work_dir=tmp_path / "work", timeout=3)
    store = ResultStore(tmp_path / "out" / "results.json")
    plan = campaign.plan([str(dense_model[0])], list(generators.values()), ["keras", "onnxruntime"], ["host"],
                         settings)
    assert not plan.bad_input and len(plan.items) == len(generators)
    for item in plan.items:
        campaign.run_item(item, settings, store)
    verdicts = {(r["generator"], r["reference"]): (r["verdict"], r["cause"]) for r in store.records()}
    assert len(verdicts) == 2 * len(generators)
    for reference in ("keras", "onnxruntime"):
        assert verdicts[(generators["good"], reference)][0] == "pass", verdicts[(generators["good"], reference)]
        assert verdicts[(generators["segfault"], reference)] == ("error", "crashed with SIGSEGV")
        assert verdicts[(generators["nan"], reference)][0] == "error"
        assert "generated code produced NaN" in verdicts[(generators["nan"], reference)][1]
        assert verdicts[(generators["hang"], reference)] == ("error", "timed out after 3 s (50 inputs)")
        assert verdicts[(generators["wrong"], reference)][0] == "fail"
        assert verdicts[(generators["broken"], reference)][0] == "error"
        assert verdicts[(generators["broken"], reference)][1].startswith("compile error: ")
    good = next(r for r in store.records() if r["generator"] == generators["good"])
    assert good["n_inputs"] == 50 and good["seed"] == 1 and good["tolerance"] == 1e-5
    assert good["max_abs_error"] <= 1e-6
    assert {"generate_s", "compile_s", "run_s", "reference_s"} <= set(good["timings"])
    assert good["provenance"]["compiler"].startswith("gcc") and "-O0" in good["provenance"]["flags"]
    assert "net.c" in good["provenance"]["sources_sha256"]


@pytest.mark.tor("TOR-RES-001")
def test_a_rerun_skips_finished_items_and_redo_recomputes(tmp_path, dense_model, generators):
    settings = campaign.Settings(n_inputs=20, work_dir=tmp_path / "work")
    store = ResultStore(tmp_path / "results.json")
    (item,) = campaign.plan([str(dense_model[0])], [generators["good"]], ["keras"], ["host"], settings).items
    first = campaign.run_item(item, settings, store)
    again = campaign.run_item(item, settings, store)
    assert again == first  # taken from results.json, not recomputed
    redone = campaign.run_item(item, campaign.Settings(n_inputs=20, work_dir=tmp_path / "work", redo=True), store)
    assert redone[0]["timings"] != first[0]["timings"]
    assert len(store.records()) == 1


@pytest.mark.tor("TOR-CLI-001")
def test_an_unloadable_model_is_recorded_as_an_error_and_flagged_as_bad_input(tmp_path, generators):
    settings = campaign.Settings(n_inputs=5, work_dir=tmp_path / "work")
    missing = str(tmp_path / "missing.onnx")
    plan = campaign.plan([missing], [generators["good"]], ["keras"], ["host"], settings)
    assert len(plan.bad_input) == 1 and "missing.onnx" in plan.bad_input[0]
    store = ResultStore(tmp_path / "results.json")
    (record,) = campaign.run_item(plan.items[0], settings, store)
    assert record["verdict"] == "error" and "missing.onnx" in record["cause"]
