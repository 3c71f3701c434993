"""The exact integer arbiter (``harness.references.integer``) as two references, one per requantization rule:
``integer-fixed-point`` (TFLite's and CMSIS-NN's fixed-point multiplier, the rule Assay's generated C declares) and
``integer-onnxruntime`` (ONNX Runtime's float32 requantization). They play for a quantized model the part the
float64 arbiter plays for a float one: the yardstick of the semantic stage's verdict, which for integers is bit for
bit (docs/semantic.md, "Quantized models"). Like every reference they run only quantized ONNX graphs they support
(``supports``), in the canonical layouts, and are cached and sealed by ``harness.core.refcache``.
"""

from __future__ import annotations

import numpy as np

from harness.errors import ModelError
from harness.models.model import Model
from harness.references import check_inputs, integer
from harness.tensors import convert, shape_in


class _IntegerReference:
    fmt = "onnx"
    rule = ""

    def supports(self, model: Model) -> bool:
        return self.fmt in model.files and integer.quantized(model.file(self.fmt))

    def run(self, model: Model, inputs: np.ndarray) -> np.ndarray:
        """The graph's output (float32, after its DequantizeLinear) under this reference's rule, canonical layout."""
        if model.is_packed:
            raise ModelError(f"{model.name}: the integer arbiter runs graphs of one input and one output")
        in_layout, out_layout = model.layouts_of(self.fmt)
        batch = convert(check_inputs(model, inputs), model.layout, in_layout)
        path = model.file(self.fmt)
        if _declared_rank(path) == batch.ndim - 1:  # no batch axis (docs/zoo.md): one sample per run, as declared
            outputs = np.stack([integer.evaluate(path, sample, self.rule).outputs[0] for sample in batch])
        else:
            (outputs,) = integer.evaluate(path, batch, self.rule).outputs
        expected = shape_in(model.output_shape, model.output_layout, out_layout)
        return convert(np.asarray(outputs, np.float32).reshape(len(batch), *expected), out_layout,
                       model.output_layout)


def _declared_rank(path) -> int:
    """The rank the graph declares for its one input (a per-axis or blocked QuantizeLinear's axis counts from it)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    constants = {tensor.name for tensor in graph.initializer}
    return len(next(value for value in graph.input if value.name not in constants).type.tensor_type.shape.dim)


class FixedPointReference(_IntegerReference):
    rule = integer.FIXED_POINT


class OnnxRuntimeRuleReference(_IntegerReference):
    rule = integer.ONNXRUNTIME
