"""The float64 arbiter in ``assay conformance --suite onnx-node``: every result whose C ran carries the C's, ONNX
Runtime's and the expected outputs' distance to float64, or a visible reason why not (conformance.md, stderr)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.core import plan
from harness.stages.conformance import onnx_node
from harness.stages.conformance.report import write_conformance_report
from harness.stages.conformance.run import Settings, write_document


@pytest.fixture(scope="module")
def batchnorm(tmp_path_factory):
    """test_batchnorm_example prepared (its scale, bias, mean and variance as initialisers) and run on assay-v2."""
    folder = tmp_path_factory.mktemp("onnx-node-arbiter")
    op, case = next((op, case) for op, case in onnx_node.collect(("BatchNormalization",))
                    if case.name == "test_batchnorm_example")
    prepared = onnx_node.prepare(op, case, 0, case.name, folder / case.name)
    settings = Settings(generators=["assay-v2"], out=folder / "out", suite=onnx_node.SUITE, work_dir=folder)
    return prepared, onnx_node.run_case(prepared, "assay-v2", settings)


def _float64_by_hand(prepared) -> np.ndarray:
    """The spec's formula on the case's own float32 values, in float64: (x - mean) / sqrt(var + eps) * s + bias."""
    model = onnx.load(prepared.model)
    values = {t.name: onnx.numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    epsilon = next((a.f for a in model.graph.node[0].attribute if a.name == "epsilon"), 1e-5)
    x = np.load(prepared.data)["x"].astype(np.float64)

    def per_channel(name):
        return values[name].reshape(1, -1, 1, 1)

    return (x - per_channel("mean")) / np.sqrt(per_channel("var") + np.float64(np.float32(epsilon))) \
        * per_channel("s") + per_channel("bias")


def test_a_result_carries_the_arbiter_figure(batchnorm):
    prepared, results = batchnorm
    assert [r["verdict"] for r in results] == ["pass"]
    judged = results[0]["arbiter"]
    exact = _float64_by_hand(prepared)
    expected = np.load(prepared.data)["expected"].astype(np.float64)
    assert set(judged["errors"]) == {"C", "onnxruntime", "expected"}
    # the expected outputs' distance to float64, measured here without the harness's float64 reference
    assert judged["errors"]["expected"] == pytest.approx(np.max(np.abs(expected - exact)), rel=1e-6, abs=1e-12)
    assert 0 < judged["errors"]["expected"] < 1e-5  # float32 rounding of the case's NumPy expectation, not zero
    assert all(0 <= value < 1e-5 for value in judged["errors"].values())
    assert judged["closer"] in ("C", "onnxruntime", "expected", "tie")
    assert judged["text"].startswith(f"{judged['closer']} closer to float64 than" if judged["closer"] != "tie"
                                     else "")
    assert judged["n_inputs"] == 2  # the batch of two split into samples


def test_the_report_shows_each_figure(batchnorm, tmp_path):
    _, results = batchnorm
    document = {"suite": onnx_node.SUITE, "onnx_version": onnx.__version__, "generators": ["assay-v2"],
                "references": list(onnx_node.REFERENCES), "target": "host",
                "cases": [{"name": "test_batchnorm_example", "checks": "BatchNormalization",
                           "op": "BatchNormalization", "split": True, "file": "x.onnx"}], "results": results}
    write_document(document, Settings(generators=["assay-v2"], out=tmp_path, suite=onnx_node.SUITE))
    stored = json.loads((tmp_path / "conformance.json").read_text())
    assert stored["results"][0]["arbiter"]["errors"] == results[0]["arbiter"]["errors"]
    write_conformance_report(tmp_path / "conformance.json", tmp_path)
    report = (tmp_path / "conformance.md").read_text()
    errors = results[0]["arbiter"]["errors"]
    assert "## Float64 arbiter" in report and "1 of 1 results whose C ran have a figure." in report
    nearest = ", ".join(sorted((name for name in errors if errors[name] == min(errors.values())),
                               key=["C", "onnxruntime", "expected"].index))
    assert (f"| `test_batchnorm_example` | assay-v2 (onnx) | {errors['C']:.4e} | {errors['onnxruntime']:.4e} | "
            f"{errors['expected']:.4e} | {nearest} |") in report


def _hardmax_case(folder) -> onnx_node.NodeCase:
    """A one-node Hardmax model: an op neither ONNX Runtime (no double kernel) nor the numpy evaluator runs."""
    graph = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"])], "hardmax",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    folder.mkdir(parents=True)
    path = folder / "test_hardmax.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return onnx_node.NodeCase("test_hardmax", "Hardmax", str(path), "", True, 1e-3, 1e-7)


def test_without_a_figure_the_reason_is_shown(tmp_path, capsys):
    case = _hardmax_case(tmp_path / "hardmax")
    model = plan.load_model(case.model, plan.Settings(work_dir=tmp_path / "work"))
    samples = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    exact = onnx_node._float64(case, model, samples)  # noqa: SLF001 - the arbiter's own evaluation, unmocked
    assert exact.startswith("arbiter not available: ") and "Hardmax" in exact
    assert str(tmp_path) not in exact  # the case's file name, not the cache's path
    judged = onnx_node._arbitrate(samples, {"expected": samples, "onnxruntime": samples}, exact)  # noqa: SLF001
    assert judged == {"error": exact}
    result = {"case": "test_hardmax", "generator": "assay-v2", "variant": "onnx", "verdict": "pass",
              "max_abs_error": 0.0, "errors": {}, "cause": None, "arbiter": judged}
    onnx_node._show_unavailable([result])  # noqa: SLF001
    assert capsys.readouterr().err == f"conformance: test_hardmax / assay-v2 (onnx): {exact}\n"
    document = {"suite": onnx_node.SUITE, "onnx_version": onnx.__version__, "generators": ["assay-v2"],
                "references": list(onnx_node.REFERENCES), "target": "host",
                "cases": [{"name": "test_hardmax", "checks": "Hardmax", "op": "Hardmax", "split": True,
                           "file": case.model}],
                "results": [result]}
    write_document(document, Settings(generators=["assay-v2"], out=tmp_path / "out", suite=onnx_node.SUITE))
    write_conformance_report(tmp_path / "out" / "conformance.json", tmp_path / "out")
    report = (tmp_path / "out" / "conformance.md").read_text()
    assert "0 of 1 results whose C ran have a figure, 1 none (listed below)." in report
    assert f"- `test_hardmax` on assay-v2 (onnx): {exact}" in report


def test_many_results_without_a_figure_make_one_summary_line(capsys):
    results = [{"case": f"test_{k}", "generator": "assay-v2", "variant": "onnx",
                "arbiter": {"error": "arbiter not available: X"}} for k in range(onnx_node.STDERR_LINES + 1)]
    results.append({"case": "test_other", "generator": "assay-v2", "variant": "onnx",
                    "arbiter": {"errors": {"C": 0.0}}})
    onnx_node._show_unavailable(results)  # noqa: SLF001
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"conformance: arbiter not available for {len(results) - 1} results")
    assert "test_0" in err[0] and "test_other" not in err[0]
