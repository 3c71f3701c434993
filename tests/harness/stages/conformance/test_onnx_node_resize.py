"""Resize's ONNX backend node cases through ``assay-v2`` and ``assay-v3`` on the host (issue 26): one case per
mode that used to be refused (cubic with A = -0.5 and exclude_outside, linear and cubic antialias,
``tf_crop_and_resize`` with an extrapolation value, ``half_pixel_symmetric``, ``keep_aspect_ratio_policy``),
each compiled and run against the case's expected outputs and ONNX Runtime with the suite's tolerance, and
the ``align_corners`` downsampling case where ONNX Runtime departs from ONNX's expected outputs."""

from __future__ import annotations

import numpy as np
import pytest

from harness import references
from harness.core.plan import Settings as PlanSettings
from harness.core.plan import load_model
from harness.stages.conformance import onnx_node
from harness.stages.conformance.run import Settings

PASSING = ["test_resize_downsample_scales_cubic_A_n0p5_exclude_outside", "test_resize_downsample_sizes_linear_antialias",
           "test_resize_downsample_scales_cubic_antialias", "test_resize_tf_crop_and_resize_extrapolation_value",
           "test_resize_tf_crop_and_resize_axes_3_2", "test_resize_upsample_scales_linear_half_pixel_symmetric",
           "test_resize_downsample_sizes_nearest_not_smaller", "test_resize_upsample_scales_cubic_asymmetric"]
# ONNX's reference (the expected outputs) divides by in * scale - 1 = 1.4, ONNX Runtime by the rounded length - 1
DISPUTED = "test_resize_downsample_scales_linear_align_corners"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resize-node-cases")
    return {case.name: onnx_node.prepare(op, case, 0, case.name, folder / case.name)
            for op, case in onnx_node.collect(("Resize",)) if case.name in (*PASSING, DISPUTED)}


@pytest.mark.parametrize("generator", ["assay-v2", "assay-v3"])
def test_every_resize_mode_passes_both_references(prepared, generator, tmp_path):
    settings = Settings(generators=[generator], out=tmp_path / "out", work_dir=tmp_path / "work")
    results = {name: onnx_node.run_case(prepared[name], generator, settings) for name in PASSING}
    wrong = {name: [(r["verdict"], r["cause"]) for r in records] for name, records in results.items()
             if [r["verdict"] for r in records] != ["pass"]}
    assert not wrong, wrong
    # the float64 arbiter evaluates every mode too (no "arbiter not available")
    assert all("errors" in records[0]["arbiter"] for records in results.values()), results


def test_align_corners_downsampling_follows_onnx_expected_outputs(prepared, tmp_path):
    """The C equals the expected outputs and the float64 arbiter; ONNX Runtime alone is 0.86 away: a reference
    defect, so the result passes and says so."""
    settings = Settings(generators=["assay-v2"], out=tmp_path / "out", work_dir=tmp_path / "work")
    (record,) = onnx_node.run_case(prepared[DISPUTED], "assay-v2", settings)
    assert record["errors"]["expected"] == 0.0 and record["errors"]["onnxruntime"] > 0.8
    assert record["arbiter"]["errors"]["C"] < 1e-6 < record["arbiter"]["errors"]["onnxruntime"]
    assert record["verdict"] == "pass" and record["cause"] is None
    (defect,) = record["reference_defects"]
    assert defect.startswith("onnxruntime: departs from the case's expected outputs and from float64 by 0.857")


def test_a_c_that_departs_as_onnx_runtime_does_still_fails(prepared, tmp_path):
    """The rule pardons the reference, never the generator: C equal to ONNX Runtime's outputs (the rounded
    length) is far from the expected outputs and float64, so the result fails against the expected outputs."""
    case = prepared[DISPUTED]
    settings = Settings(generators=["assay-v2"], out=tmp_path / "out", work_dir=tmp_path / "work")
    (honest,) = onnx_node.run_case(case, "assay-v2", settings)
    model = load_model(case.model, PlanSettings(work_dir=tmp_path / "w"))
    samples = np.load(case.data)["x"].reshape(-1, *model.input_shape)
    runtime = references.get("onnxruntime").run(model, samples)
    wanted = {onnx_node.EXPECTED: np.load(case.data)["expected"].reshape(runtime.shape), "onnxruntime": runtime}
    exact = references.get(onnx_node.ARBITER).run(model, samples)
    records = [onnx_node._record(name, runtime, wanted[name], "pass", None, case) for name in onnx_node.REFERENCES]
    judged = [onnx_node._judge_reference(r, runtime, wanted, exact, case) for r in records]
    assert [r["verdict"] for r in judged] == ["fail" if r["reference"] == onnx_node.EXPECTED else "pass"
                                              for r in judged]
    assert not any(r.get("reference_defect") for r in judged) and honest["verdict"] == "pass"
