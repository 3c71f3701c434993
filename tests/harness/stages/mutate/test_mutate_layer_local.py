"""``assay mutate --tolerance derived`` with the layer-local verdict: a mutant within the end-to-end derived bound
but outside a layer's local bound is killed, naming the layer.

Real parts: an ONNX network of two dense layers, hand-written C for it in a ``dir:`` folder whose ``assay.json``
names both layers' output buffers, gcc on the host, ONNX Runtime as the reference, the float64 evaluation and the
bounds of ``harness.references.bounds``. The second layer's bias is 2^24 (ulp 2), so its any-order end-to-end
bound is about gamma_65 x 2^24 (about 65) and hides every change of the first layer's output below about 100; the
first layer's own bound, from the C's own input, is about 1e-6, far below the 1e-3 relative change of one of its
weights.
"""

from __future__ import annotations

import pytest

import two_dense_support
from harness.stages.mutate import report
from harness.stages.mutate import run as mutate

N_INPUTS = 20


@pytest.mark.slow
def test_a_mutant_within_the_end_to_end_bound_but_outside_a_layers_bound_is_killed(tmp_path):
    w1, b1, w2, b2 = two_dense_support.weights()
    model = two_dense_support.onnx_file(tmp_path / "two.onnx", w1, b1, w2, b2)
    code = two_dense_support.c_folder(tmp_path / "code", w1, b1, w2, b2, symbols={"data": ["w1", "w2"]})
    settings = mutate.Settings(n_inputs=N_INPUTS, seeds=1, sanitize=0, input_sets=("uniform",), weights_per_array=1,
                               tolerance="derived", reference="onnxruntime", work_dir=tmp_path / "work")
    (item,) = mutate.plan([str(model)], [f"dir:{code}"], settings).items
    record = mutate.run_item(item, settings, mutate.open_store(tmp_path / "mutation.json"))
    assert "summary" in record, record["cause"]
    (written,) = report.write_mutation_report(tmp_path / "mutation.json", tmp_path)
    assert "and every layer within its local bound (any order;" in written.read_text()
    clean = record["tolerance_rule"]["layer_local"]
    assert record["tolerance_rule"]["rule"] == "derived" and clean["judged"] and clean["verdict"] == "pass"
    assert [row["layer"] for row in clean["layers"] if row["judged"]] == ["fc1", "fc2"]
    assert record["false_alarms"][0]["verdict"] == "pass" and record["false_alarms"][0]["layer_local"] == "pass"
    fc1_bound = next(row["bound"] for row in clean["layers"] if row["layer"] == "fc1")
    end_to_end = record["tolerance_rule"]["bound"]
    assert fc1_bound < 1e-4 < 1 < end_to_end  # the premise: the first layer's bound is the far tighter one

    weight = next(m for m in record["mutants"] if m["operator"].startswith("weight-") and
                  m["weight"]["symbol"] == "w1" and abs(m["weight"]["mutated"] / m["weight"]["value"] - 1) > 5e-4)
    assert weight["status"] == "killed" and weight["detected_by"] == "oracle", weight
    assert weight["above_tolerance"] is False  # the end-to-end derived rule alone would have let it live
    assert weight["cause"].startswith("layer fc1 (h) at input #") and "above the layer's local bound" in \
        weight["cause"]
    assert weight["layer_local"]["verdict"] == "fail" and weight["layer_local"]["first_failing"] == "fc1"
    by_layer = [m for m in record["mutants"] if m.get("layer_local", {}).get("first_failing") == "fc1"]
    assert len(by_layer) > 1  # code mutants of fc1 too
    # a survivor of the end-to-end rule that every layer's bound holds stays one, its figures recorded
    kept = [m for m in record["mutants"] if m["status"] == "survived" and "layer_local" in m]
    assert all(m["layer_local"]["verdict"] == "pass" and m["layer_local"]["inputs"] == N_INPUTS for m in kept)
