"""``assay mutate`` on a ``dir:`` folder, the path every third-party generator takes: assay-v2's C of acas-reg50
copied with an ``assay.json`` (``harness.generators.generated.copy_as_prebuilt``) that lists its layers' output
buffers and its data arrays, with and without its order of accumulation.

Real parts: the assay-v2 generator, gcc on the host, Keras as the reference, the float64 evaluation and the
bounds of ``harness.references.bounds``. Few inputs and a seeded sample of the mutants keep each test under
20 s (12 to 17 s each, the generation included, at load average 4 to 5; two to three times that at 15).
"""

from __future__ import annotations

import json
import os

import pytest

from harness.core.plan import Settings as PlanSettings, load_model
from harness.generators import get as get_generator
from harness.generators.generated import GeneratedCode, copy_as_prebuilt
from harness.stages.mutate import run as mutate

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

MODEL = "acas-reg50"
N_INPUTS = 10
MUTANTS = 20  # of 322: the seeded sample holds code mutants and weight mutants of every relative amount


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> GeneratedCode:
    """assay-v2's keras code of acas-reg50, as its generator hands it over (the full manifest)."""
    root = tmp_path_factory.mktemp("generated")
    return get_generator("assay-v2").generate(load_model(MODEL, PlanSettings(work_dir=root / "work")), "keras",
                                              root / "code")


def _settings(tolerance: str, work) -> mutate.Settings:
    return mutate.Settings(n_inputs=N_INPUTS, seeds=1, sanitize=0, input_sets=("uniform",), max_mutants=MUTANTS,
                           tolerance=tolerance, work_dir=work)


def _mutate(folder, tolerance: str, tmp_path) -> dict:
    settings = _settings(tolerance, tmp_path / f"work-{tolerance}")
    (item,) = mutate.plan([MODEL], [f"dir:{folder}"], settings).items
    record = mutate.run_item(item, settings, mutate.open_store(tmp_path / f"{tolerance}.json"))
    assert "summary" in record, record["cause"]
    return record


def _killed(record: dict) -> set[str]:
    return {m["id"] for m in record["mutants"] if m["status"] == "killed"}


def test_a_dir_folder_gets_its_generators_mutants_and_the_declared_orders_layer_local_verdict(tmp_path, generated):
    folder = copy_as_prebuilt(generated, tmp_path / "declared")
    record = _mutate(folder, "derived", tmp_path)
    assert record["generator"] == f"dir:{folder}" and record["variant"] == "prebuilt"
    # the same seeded mutants as assay-v2's own code: code mutants of the C, weight mutants of the arrays that
    # assay.json's symbols.data names
    expected = mutate._mutants(generated, _settings("derived", tmp_path))
    assert [(m["operator"], m["file"], m["line"], m["description"]) for m in record["mutants"]] == \
        [(m.operator, m.file, m.line, m.description) for m in expected]
    weights = [m for m in record["mutants"] if mutate.is_weight(m)]
    assert {m["operator"] for m in weights} == {"weight-1e-03", "weight-1e-05", "weight-1e-07"}
    assert {m["weight"]["symbol"] for m in weights} <= set(json.loads((folder / "assay.json").read_text())
                                                          ["symbols"]["data"])
    clean = record["tolerance_rule"]["layer_local"]
    assert record["tolerance_rule"]["rule"] == "derived" and clean["judged"] and clean["verdict"] == "pass"
    assert clean["accumulation"] == "sequential;taps=;flatten="  # the declaration in assay.json
    # a weight mutant inside the end-to-end bound that a layer's own bound fails
    by_layer = [m for m in weights if m["status"] == "killed" and m.get("above_tolerance") is False]
    assert by_layer and all(m["cause"].startswith("layer dense") for m in by_layer), by_layer


@pytest.mark.slow
def test_without_a_declared_order_the_derived_rule_still_kills_every_mutant_the_fixed_one_kills(tmp_path,
                                                                                                generated):
    """Issue 40's claim on a sample, for the any-order bounds a folder without ``accumulation`` gets."""
    folder = copy_as_prebuilt(generated, tmp_path / "undeclared", declare_order=False)
    assert "accumulation" not in json.loads((folder / "assay.json").read_text())
    fixed, derived = (_mutate(folder, rule, tmp_path) for rule in ("fixed", "derived"))
    assert derived["tolerance_rule"]["layer_local"]["accumulation"] == "any"
    assert [m["description"] for m in fixed["mutants"]] == [m["description"] for m in derived["mutants"]]
    assert _killed(fixed) <= _killed(derived)
    weights = {m["id"] for m in fixed["mutants"] if mutate.is_weight(m)}
    assert len(_killed(derived) & weights) > len(_killed(fixed) & weights)
