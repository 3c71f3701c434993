"""Per-layer error: every layer's output of the generated C against the reference's intermediate output.

The network's output error says that the code is wrong, not where. Here each layer's output tensor
(read from the buffer the manifest names, at the end of the layer's code, by the instrumented host build of
``harness.runners.probed``, run in the host runner's worker) is compared with the same tensor of the
reference: the Keras model's layer output for code generated from Keras, ONNX Runtime's value of the
same tensor for code generated from ONNX. Both are in the source format's own layout, the one the C keeps,
so they are compared element by element. The first layer whose error exceeds the model's tolerance
(``|c - r| <= atol + rtol |r|``, the oracle's rule) is where a defect starts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.core.intermediate import reference_of, unavailable
from harness.core.pipeline import to_code_layout
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.runners import probed

def measure(code: GeneratedCode, model: Model, inputs: np.ndarray, work: Path, atol: float, rtol: float,
            timeout: float) -> dict:
    """Per layer: the largest |C - reference| over ``inputs`` (canonical layout), whether it is within the
    tolerance, and the first layer that is not; ``available: false`` with the reason when it cannot be
    measured (no output buffers in the manifest, no reference for the source format)."""
    missing = unavailable(code, model)
    if missing:
        return {"available": False, "reason": missing}
    reference, layer_outputs = reference_of(code)
    built = probed.build(code, work)
    worst = [0.0] * len(built.probes)
    ratio = [0.0] * len(built.probes)
    absent: dict[int, str] = {}
    code_inputs = to_code_layout(inputs, model, code)
    for start, outputs in probed.run(built, code_inputs, timeout):
        expected = layer_outputs(model, inputs[start:start + len(outputs[0])], [p.tensor for p in built.probes])
        for k, (probe, c, r) in enumerate(zip(built.probes, outputs, expected)):
            if r is None or r.shape != c.shape:
                absent[k] = f"the reference has no tensor {probe.tensor}" if r is None else \
                    f"the reference's {probe.tensor} has {r.shape[1]} values, the C's {c.shape[1]}"
                continue
            difference = np.abs(c.astype(np.float64) - r.astype(np.float64))
            bound = atol + rtol * np.abs(r.astype(np.float64))
            finite = np.isfinite(difference).all()
            worst[k] = max(worst[k], float(difference.max()) if finite else float("inf"))
            ratio[k] = max(ratio[k], float((difference / bound).max()) if finite else float("inf"))
    layers = []
    for k, probe in enumerate(built.probes):
        row = {"layer": probe.name, "index": probe.index, "tensor": probe.tensor, "size": probe.size}
        if k in absent:
            row.update(compared=False, reason=absent[k])
        else:
            row.update(compared=True, max_abs_error=worst[k], tolerance_ratio=ratio[k], within_tolerance=ratio[k] <= 1)
        layers.append(row)
    first = next((row["layer"] for row in layers if row["compared"] and not row["within_tolerance"]), None)
    return {"available": True, "reference": reference, "inputs": len(inputs), "atol": atol, "rtol": rtol,
            "layers": layers, "first_over_tolerance": first}

