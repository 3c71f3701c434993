"""LiteRT (TensorFlow Lite's interpreter) running a model's ``.tflite`` file: the reference of a TensorFlow Lite model
(issue 42; docs/quantized.md, "TensorFlow Lite models").

It runs TensorFlow's ``tf.lite.Interpreter`` with the builtin *reference* kernels (``BUILTIN_REF``), one thread:
the optimised kernels (ruy, XNNPACK) may reorder, fuse or requantize in float, the reference kernels are the
arithmetic TFLite's sources state (``reference_integer_ops``), deterministic. That arithmetic is the integer
arbiter's ``litert`` rule (``harness.references.integer``: the fixed-point rule of Assay's C, but for
FULLY_CONNECTED, which TFLite's reference kernel requantizes in double with one rounding). The rule is this
reference's own: for a quantized model the semantic stage holds its outputs bit for bit to the arbiter under
``integer_rule`` (``harness.core.quantized``), as it holds ONNX Runtime to its float32 rule, so a LiteRT output 1 LSB
from its rule is a reference defect, never a tolerance; the C is held bit for bit to the rule its manifest declares.

Integer inputs and outputs cross the float32 ABI as their integer values (docs/quantized.md, "Integer graph inputs
and outputs"), in the model's canonical layouts; the file is NHWC, its layouts are the ``tflite`` file's.
"""

from __future__ import annotations

import warnings

import numpy as np

from harness.errors import ModelError
from harness.models.model import Model
from harness.references import as_graph_input, check_inputs
from harness.references.integer import LITERT
from harness.tensors import convert, shape_in


class LiteRtReference:
    fmt = "tflite"
    integer_rule = LITERT  # TFLite's reference kernels: the arbiter's "litert" rule (module docstring)

    def supports(self, model: Model) -> bool:
        return self.fmt in model.files

    def run(self, model: Model, inputs: np.ndarray) -> np.ndarray:
        """Outputs (N, *model.output_shape), float32, canonical layout: one sample per invocation, at the file's
        own batch of 1."""
        if model.is_packed:
            raise ModelError(f"{model.name}: the LiteRT reference runs models of one input and one output")
        interpreter = _interpreter(str(model.file(self.fmt)))
        (source,), (result,) = interpreter.get_input_details(), interpreter.get_output_details()
        in_layout, out_layout = model.layouts_of(self.fmt)
        batch = as_graph_input(convert(check_inputs(model, inputs), model.layout, in_layout), source["dtype"])
        rows = []
        for sample in batch:
            interpreter.set_tensor(source["index"], sample.reshape(source["shape"]))
            interpreter.invoke()
            rows.append(np.array(interpreter.get_tensor(result["index"]), dtype=np.float32).reshape(-1))
        expected = shape_in(model.output_shape, model.output_layout, out_layout)
        outputs = np.stack(rows) if rows else np.zeros((0, model.output_size), np.float32)
        return convert(outputs.reshape(len(batch), *expected), out_layout, model.output_layout)


def _interpreter(path: str):
    """The interpreter of ``path`` with the reference kernels and one thread, its tensors allocated."""
    from harness.models.tf_runtime import tensorflow

    tf = tensorflow()
    reference = tf.lite.experimental.OpResolverType.BUILTIN_REF  # TFLite's reference kernels (module docstring)
    try:
        with warnings.catch_warnings():  # "tf.lite.Interpreter is deprecated": the one in the lock (docs/quantized.md)
            warnings.simplefilter("ignore", UserWarning)
            interpreter = tf.lite.Interpreter(model_path=path, num_threads=1, experimental_op_resolver_type=reference)
        interpreter.allocate_tensors()
    except Exception as error:  # noqa: BLE001 - the interpreter raises ValueError/RuntimeError for bad files
        from harness.models.user_files import cause

        raise ModelError(f"{path}: LiteRT cannot load it ({cause(error)})") from None
    return interpreter
