"""The weight mutants' detectability, decided on the input domain apart from the test inputs (``detect``): a large
change of the output layer's bias is detectable and the test inputs kill it; a change far below the rounding is not
detectable and its survival is no defect of the tests; a detectable survivor fails the stage."""

import os

import numpy as np
import pytest

from harness.core.plan import Settings as PlanSettings
from harness.core.plan import load_model
from harness.generators import get as get_generator
from harness.stages.mutate import detect, operators
from harness.stages.mutate import run as mutate_run

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def test_a_c_array_is_located_in_its_initialiser_in_its_own_order_or_transposed():
    kernel = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    constants = {"kernel": kernel, "bias": np.array([5.0, 6.0]), "shape": np.array([2, 3])}
    transposed = kernel.T.astype(np.float32).reshape(-1)  # the C keeps it (in, out): element 1 is kernel[1, 0]
    assert detect.locate(constants, transposed, 1) == ("kernel", (1, 0))
    assert detect.locate(constants, kernel.astype(np.float32).reshape(-1), 4) == ("kernel", (1, 1))
    assert detect.locate(constants, np.float32([5, 7]), 0) == "no initialiser of the model's graph holds the " \
                                                              "array's values"
    assert "all hold" in detect.locate({**constants, "copy": constants["bias"].copy()}, np.float32([5, 6]), 0)


def _results(*specs):
    """Weight mutant results as the stage writes them: (id, status, detectable, beyond tolerance, decided)."""
    return [{"id": ident, "operator": "weight-1e-03", "status": status,
             "detectability": {"decided": decided, "detectable": detectable if decided else None,
                               "beyond_tolerance": beyond}} for ident, status, detectable, beyond, decided in specs]


def _summary(results):
    """What ``verdict_of`` reads of a summary: no false alarm, no code mutant, the weights' detectability."""
    return {"false_alarms": 0, "code": {"kill_rate": None}, "rules_refuted": 0,
            "weights": mutate_run.weight_detectability(results)}


def test_a_kernel_whose_rows_the_export_reordered_is_located_by_value():
    """A Keras Dense kernel after a channels-last Flatten of (H, W, C) = (2, 3, 4) features: the export's initialiser
    holds its rows channels first. No order of the axes matches; the element's unique value does."""
    keras_kernel = np.arange(24 * 5, dtype=np.float32).reshape(24, 5) / 7.0
    rows = np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1).reshape(-1)  # CHW position -> HWC row
    exported = keras_kernel[rows]
    constants = {"dense_kernel": exported.astype(np.float64), "bias": np.zeros(5)}
    for position in (0, 7, 61, 119):
        name, element = detect.locate(constants, keras_kernel.reshape(-1), position)
        assert name == "dense_kernel" and exported[element] == keras_kernel.reshape(-1)[position]
    twice = keras_kernel.copy()
    twice[0, 0] = twice[1, 0]  # that value now occurs twice: which of the two the C's element is is unknown
    assert detect.locate({"dense_kernel": twice[rows].astype(np.float64)}, twice.reshape(-1), 0) == \
        "no initialiser of the model's graph holds the array's values"


def test_a_detectable_survivor_or_an_undecided_one_fails_the_stage_a_review_or_undetectable_one_does_not():
    results = _results(("M0001", "killed", True, True, True), ("M0002", "survived", False, True, True),
                       ("M0003", "survived", False, False, True), ("M0004", "killed", False, False, True))
    summary = _summary(results)
    assert summary["weights"] == {"mutants": 4, "detectable": 1, "detectable_killed": 1, "adequacy": 1.0,
                                  "detectable_survivors": [], "review_survivors": ["M0002"],
                                  "undetectable_survivors": 1, "killed_not_found_detectable": 1,
                                  "undecided_survivors": [], "undecided_killed": 0}
    assert mutate_run.verdict_of(summary, None)["verdict"] == "pass"
    failing = _summary(results + _results(("M0005", "survived", True, True, True),
                                          ("M0006", "survived", None, False, False)))
    assert failing["weights"]["adequacy"] == 0.5
    cause = mutate_run.verdict_of(failing, None)["cause"]
    assert "1 detectable weight mutants survived" in cause and "M0005" in cause and "not decided" in cause \
        and "M0006" in cause


@pytest.fixture(scope="module")
def acas(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    settings = PlanSettings(work_dir=work)
    model = load_model("acas-reg50", settings)
    return model, get_generator("assay-v2").generate(model, "onnx", work / "code")


@pytest.mark.tor("TOR-SEM-005")
def test_the_search_finds_a_witness_for_a_large_output_bias_change_not_for_one_below_rounding(acas, tmp_path,
                                                                                             monkeypatch):
    """Real compiled mutants of the acas-reg50 C: the output layer's largest bias x 1.5 (every input sees it) and a
    first-layer kernel weight x (1 + 2e-6) (a change of ~1e-7 at most, far below the tolerance)."""
    model, code = acas
    params = next(p for p in code.sources if p.name.endswith("params.c"))
    prefix = code.manifest["prefix"]
    text = params.read_text()
    bias = f"{prefix}dense8_gemm_bias"
    largest = int(np.argmax(np.abs(operators.array_values(text, bias))))
    assert abs(operators.array_values(text, bias)[largest]) > 0.01  # so that x 1.5 moves an output by > 5e-3
    big = next(m for m in operators.weight_mutants(params, [bias], (0.5,), 5, np.random.default_rng(0))
               if m.element == (bias, largest))
    small = operators.weight_mutants(params, [f"{prefix}dense1_gemm_kernel"], (2e-6,), 1,
                                     np.random.default_rng(0))[0]
    assert small.equivalent is None  # it does change the float32 constant
    monkeypatch.setattr(mutate_run, "_mutants", lambda _code, _settings: [big, small])
    settings = mutate_run.Settings(n_inputs=30, seeds=1, sanitize=0, input_sets=("uniform",), work_dir=tmp_path)
    (item,) = [i for i in mutate_run.plan(["acas-reg50"], ["assay-v2"], settings, ["onnx"]).items]
    record = mutate_run.run_item(item, settings, mutate_run.open_store(tmp_path / "mutation.json"))
    found_big, found_small = record["mutants"]
    assert found_big["status"] == "killed" and found_big["detectability"]["detectable"], found_big
    assert found_big["detectability"]["initialiser"] == "dense8_bias"
    assert len(found_big["detectability"]["witness_sha256"]) == 64
    assert found_big["detectability"]["difference"] > found_big["detectability"]["margin"] + model.tolerance
    assert found_small["status"] == "survived" and found_small["detectability"]["detectable"] is False
    assert not found_small["detectability"]["beyond_tolerance"]
    assert found_small["detectability"]["difference"] < model.tolerance
    weights = record["summary"]["weights"]
    assert (weights["detectable"], weights["detectable_killed"], weights["adequacy"]) == (1, 1, 1.0)
    assert weights["detectable_survivors"] == [] and weights["undetectable_survivors"] == 1
    assert record["verdict"] == "pass", record["cause"]  # the survivor below rounding is no defect of the tests
