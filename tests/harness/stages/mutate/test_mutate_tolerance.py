"""``assay mutate --tolerance derived``: the oracle's rule |C - float64| <= bound, on a tiny real model.

Real parts: a Keras Dense layer, hand-written C for it (the ``dir:`` generator) compiled by gcc and run on the
host, the float64 evaluation and the derived bound of ``harness.references.bounds``. The rule's unit test
(``Rule``) uses arrays only.
"""

import json
import os

import numpy as np
import pytest

from harness.core import oracle
from harness.core.inputs import make_inputs
from harness.core.plan import load_model
from harness.references import bounds
from harness.stages.mutate import run as mutate

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _code(tmp_path, source: str):
    code = tmp_path / "code"
    code.mkdir()
    (code / "net.c").write_text(source)
    (code / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2,
                                                 "symbols": {"data": ["W", "B"]}}))
    return code


def test_the_rule_fails_an_output_beyond_the_bound_and_passes_one_within():
    exact = np.array([[1.0, -2.0], [0.5, 0.0]])
    bound = np.full_like(exact, 1e-6)
    rule = mutate.Rule(mutate.DERIVED, 1e-5, 5e-6, exact, bound)
    expected = exact.astype(np.float32)
    assert rule.judge(exact + 0.9e-6, expected)[0] == oracle.PASS
    moved = exact.copy()
    moved[1, 1] += 1e-5  # within the fixed tolerance, ten times the bound
    verdict, cause, _ = rule.judge(moved, expected)
    assert verdict == oracle.FAIL and "input #1, output 1" in cause and "derived bound" in cause
    assert mutate.Rule(mutate.FIXED, 1e-5, 5e-6).judge(moved, expected)[0] == oracle.PASS
    assert rule.above(moved, exact) and not rule.above(exact + 0.9e-6, exact)
    assert rule.judge(moved[:1], expected)[0] == oracle.PASS  # a first batch: the rows it ran


def test_a_survivor_of_the_derived_rule_outside_the_fixed_tolerance_is_classed_review():
    exact = np.array([[1.0, -2.0], [0.5, 0.0]])
    clean = exact.astype(np.float32)
    clean_errors = oracle.infinity_norm_errors(clean, clean)
    derived = mutate.Rule(mutate.DERIVED, 1e-5, 0.0, exact, np.full_like(exact, 1e-4))
    fixed = mutate.Rule(mutate.FIXED, 1e-5, 0.0)
    beyond = clean.copy()
    beyond[1, 1] += 3e-5  # within the bound, three times the fixed tolerance: the default verdict's review line
    within = clean.copy()
    within[0, 0] += 4e-6  # within both
    assert mutate.survivor_class(beyond, clean, clean, clean_errors, derived) == mutate.REVIEW
    assert mutate.survivor_class(beyond, clean, clean, clean_errors, fixed) == "tolerance"
    assert mutate.survivor_class(within, clean, clean, clean_errors, derived) == "tolerance"
    assert mutate.survivor_class(clean.copy(), clean, clean, clean_errors, derived) == "not_reached"


def test_derived_mutation_kills_outputs_beyond_the_bound_and_passes_the_clean_code(tmp_path, dense_keras_model,
                                                                                   loop_dense_source):
    loop_dense_c, _ = loop_dense_source
    code = _code(tmp_path, loop_dense_c())
    settings = mutate.Settings(n_inputs=20, seeds=1, sanitize=0, input_sets=("uniform",), weights_per_array=1,
                               tolerance="derived", work_dir=tmp_path / "work")
    (item,) = mutate.plan([dense_keras_model], [f"dir:{code}"], settings).items
    record = mutate.run_item(item, settings, mutate.open_store(tmp_path / "mutation.json"))
    assert "summary" in record, record["cause"]
    rule = record["tolerance_rule"]
    assert rule["rule"] == "derived" and rule["fallback"] is None
    assert record["false_alarms"] == [{"seed": 0, "verdict": "pass", "max_abs_error": pytest.approx(
        record["clean"]["max_abs_error"]), "cause": None, "rule": "derived"}]
    assert rule["c_distance"] <= rule["bound"] and rule["tightness"] >= 1
    assert {m["rule"] for m in record["mutants"]} == {"derived"}

    # the bound, recomputed here from the model and inputs, is what the kills were judged against
    model = load_model(dense_keras_model, settings)
    inputs = make_inputs(model, 20, 0)
    bound = bounds.derive(model, inputs).bound
    assert rule["bound"] == pytest.approx(float(bound.max()))
    assert float(bound.max()) < 1e-5 < 1e-2  # far below every move a code mutant of this layer makes
    by_change = {m["description"]: m for m in record["mutants"]}
    flipped = by_change["+= -> -="]  # the accumulation subtracts: outputs move by about |x . w|
    assert flipped["status"] == "killed" and flipped["detected_by"] == "oracle", flipped
    assert flipped["cause"].startswith("|C - float64| = ") and "above the derived bound" in flipped["cause"]
    assert flipped["max_abs_error"] > 1e3 * float(bound.max())


def test_a_model_without_a_bound_rule_falls_back_to_fixed_visibly(tmp_path, capsys, loop_dense_source, monkeypatch):
    import keras

    from harness.references import bounds

    # Elu has a rule since issue 40; taken away here, it stands for an op without one
    monkeypatch.delitem(bounds._FORWARD, "Elu")
    monkeypatch.delitem(bounds._REVERSE, "Elu")

    loop_dense_c, (weights, bias) = loop_dense_source

    path = tmp_path / "elu.keras"
    network = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="elu")])
    network.set_weights([weights, bias])
    network.save(path)
    source = loop_dense_c().replace("        output[o] = scratch[o];",
                                    "        output[o] = scratch[o] > 0.0f ? scratch[o] : expf(scratch[o]) - 1.0f;")
    code = _code(tmp_path, "#include <math.h>\n" + source)
    settings = mutate.Settings(n_inputs=10, seeds=1, sanitize=0, input_sets=("uniform",), max_mutants=3,
                               tolerance="derived", work_dir=tmp_path / "work")
    (item,) = mutate.plan([str(path)], [f"dir:{code}"], settings).items
    record = mutate.run_item(item, settings, mutate.open_store(tmp_path / "mutation.json"))
    assert "summary" in record, record["cause"]
    why = "no derived bound for Elu: the fixed tolerance decides this model's verdicts"
    assert record["tolerance_rule"] == {"rule": "fixed", "fallback": why}
    assert {m["rule"] for m in record["mutants"]} == {"fixed"} and record["false_alarms"][0]["rule"] == "fixed"
    lines = [line for line in capsys.readouterr().err.splitlines() if "no derived bound" in line]
    assert lines == [f"{item.id}: {why}"]
