"""The float64 arbiter on ONNX backend node cases of the ops ONNX Runtime has no double kernel for (so the numpy
evaluator runs them) and of Resize/Upsample, whose ``scales`` and ``roi`` the spec keeps float32.

Each case is prepared as ``assay conformance --suite onnx-node`` prepares it and evaluated in float64 on its own
inputs; the figure must agree with ONNX Runtime's float32 result to what any float32 implementation meets
(a few float32 ulps of the outputs' scale), and Resize's scales must reach the graph as float32.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from harness.core import plan
from harness.errors import ModelError
from harness.references import float64, get
from harness.stages.conformance import onnx_node

OPS = ("Resize", "Upsample", "LRN", "ConvTranspose", "HardSwish", "PRelu", "LogSoftmax", "ReduceMean")
RTOL = 1e-5  # about 80 float32 ulps: far above a float32 kernel's rounding, far below any wrong formula
ATOL = 1e-6


@pytest.fixture(scope="module")
def node_cases():
    return {case.name: (op, case) for op, case in onnx_node.collect(OPS)}


@pytest.fixture(scope="module")
def prepared(node_cases, tmp_path_factory):
    """Every case of ``OPS`` the harness loads: (prepared case, model, samples)."""
    folder = tmp_path_factory.mktemp("float64-node-cases")
    loaded = {}
    for name, (op, case) in sorted(node_cases.items()):
        for output in onnx_node.outputs_of(case, op)[:1]:
            ready = onnx_node.prepare(op, case, output, name, folder / name)
            try:
                model = plan.load_model(ready.model, plan.Settings(work_dir=folder / "work"))
                samples = np.load(ready.data)["x"].reshape(-1, *model.input_shape)
            except (ModelError, ValueError):
                continue  # a case the harness refuses to load has no record to arbitrate
            loaded[name] = (ready, model, samples)
    return loaded


def test_every_op_has_loadable_cases(prepared):
    ops = {ready.op for ready, _, _ in prepared.values()}
    assert ops == set(OPS), f"no loadable case of {sorted(set(OPS) - ops)}"
    assert len(prepared) > 40


def test_float64_agrees_with_onnxruntime_float32_on_each_case(prepared):
    """Each case has a figure that agrees (a refusal would name its op and attribute; none is left)."""
    wrong, reasons = [], {}
    for name, (ready, model, samples) in prepared.items():
        try:
            exact = get("float64").run(model, samples)
        except ModelError as error:
            reasons[name] = str(error)
            assert str(error).startswith(f"{ready.op} with "), (name, str(error))
            continue
        single = get("onnxruntime").run(model, samples).astype(np.float64)
        expected = np.load(ready.data)["expected"].astype(np.float64).reshape(exact.shape)
        assert exact.dtype == np.float64 and exact.shape == single.shape, name
        scale = np.max(np.abs(exact)) if exact.size else 0.0
        # ONNX Runtime or, where it departs from ONNX's own reference (Resize align_corners downsampling: it
        # rounds the resized length), the case's expected outputs, which that reference computed
        if not any(np.all(np.abs(exact - other) <= ATOL + RTOL * scale) for other in (single, expected)):
            wrong.append(f"{name}: |float64 - onnxruntime| = {np.max(np.abs(exact - single)):.3e}, "
                         f"|float64 - expected| = {np.max(np.abs(exact - expected)):.3e}")
    assert not wrong, wrong
    assert not reasons, reasons  # every mode of Resize (cubic, antialias, tf_crop_and_resize...) included


def test_resize_scales_and_roi_stay_float32(prepared):
    ready, model, samples = prepared["test_resize_upsample_scales_linear"]
    converted = float64.to_float64(onnx.load(ready.model))
    types = {t.name: t.data_type for t in converted.graph.initializer}
    node = converted.graph.node[0]
    assert types[node.input[2]] == onnx.TensorProto.FLOAT  # scales: float32 by the spec
    cropped = float64.to_float64(onnx.load(prepared["test_resize_tf_crop_and_resize"][0].model))
    roi = cropped.graph.node[0].input[1]
    assert {t.name: t.data_type for t in cropped.graph.initializer}[roi] == onnx.TensorProto.FLOAT  # roi too
    assert converted.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    # 2x2 -> 4x4 bilinear, half_pixel: the corner cells repeat the input, the second cell is 3/4 x0 + 1/4 x1
    x = samples[0, 0, 0]
    exact = get("float64").run(model, samples)[0, 0, 0]
    assert exact[0] == x[0] and exact[1] == 0.75 * np.float64(x[0]) + 0.25 * np.float64(x[1])
