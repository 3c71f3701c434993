"""Low-level requirements derived from a model and its code's manifest (``requirements.py``): ids, what each says,
and which input sets verify each."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.models.model import Model
from harness.stages.evidence import layererror, requirements

MANIFEST = {"layers": [
    {"index": 0, "name": "dense1", "op": "Dense", "file": "net.c", "lines": [10, 18], "input_shapes": [[5]],
     "output_shape": [50], "inputs": [None]},
    {"index": 1, "name": "dense2", "op": "Dense", "file": "net.c", "lines": [20, 28], "input_shapes": [[50]],
     "output_shape": [5], "inputs": [0]}]}
MODEL = Model(name="net", files={"onnx": Path("net.onnx")}, input_shape=(5,), output_shape=(5,), layout="C",
              output_layout="C", input_domain=(-1.0, 2.0), tolerance=1e-5, rtol=5e-6)


@pytest.mark.tor("TOR-EVD-009")
def test_one_requirement_for_the_network_and_one_per_layer_with_its_operation_shapes_domain_and_tolerance():
    found = requirements.derive(MODEL, MANIFEST)
    assert [r["id"] for r in found] == ["LLR-000", "LLR-001", "LLR-002"]
    network, first, second = found
    assert network["layer"] is None and network["input_domain"] == [-1.0, 2.0]
    assert network["tolerance"] == {"atol": 1e-5, "rtol": 5e-6, "derived_per_layer": False}
    assert (first["layer"], first["op"], first["input_shapes"], first["output_shape"]) == ("dense1", "Dense", [[5]],
                                                                                          [50])
    assert first["input_domain"] == [-1.0, 2.0] and "the network's inputs" in first["text"]
    assert "the outputs of dense1" in second["text"] and second["c_lines"] == [20, 28]


@pytest.mark.tor("TOR-EVD-009")
def test_a_layer_requirement_states_its_derived_tolerance_or_why_it_keeps_the_fixed_one():
    rows = [{"index": 0, "layer": "dense1", "compared": True, "judged_by": "derived bound", "largest_bound": 3e-7},
            {"index": 1, "layer": "dense2", "compared": True, "judged_by": "derived bound", "largest_bound": 2e-5}]
    measured = {"available": True, "tolerance": layererror.DERIVED, "layers": rows}
    _, first, second = requirements.derive(MODEL, MANIFEST, measured)
    assert first["tolerance"] == {"derived_per_layer": True, "rule": requirements.LAYER_TOLERANCE,
                                  "largest_bound_met": 3e-7}
    assert second["tolerance"]["largest_bound_met"] == 2e-5 and "derived tolerance" in second["text"]
    fallback = "fixed tolerance: no derived bound for Elu"
    _, first, _ = requirements.derive(MODEL, MANIFEST, {"available": True, "tolerance": fallback, "layers": [
        {**row, "judged_by": fallback} for row in rows]})
    assert first["tolerance"] == {"atol": 1e-5, "rtol": 5e-6, "derived_per_layer": False, "rule": fallback}
    assert fallback in first["text"]
    _, first, _ = requirements.derive(MODEL, MANIFEST)
    assert not first["tolerance"]["derived_per_layer"] and "not measured" in first["tolerance"]["rule"]


@pytest.mark.tor("TOR-EVD-009")
def test_each_input_set_traces_to_the_requirements_it_is_made_to_verify():
    found = requirements.derive(MODEL, MANIFEST)
    assert requirements.traced(found, ["uniform", "corners", "thresholds", "coverage"]) == {
        "LLR-000": ["uniform", "corners"], "LLR-001": ["uniform", "corners", "thresholds", "coverage"],
        "LLR-002": ["uniform", "thresholds", "coverage"]}
    assert requirements.traced(found, ["uniform"]) == {"LLR-000": ["uniform"], "LLR-001": ["uniform"],
                                                       "LLR-002": ["uniform"]}
