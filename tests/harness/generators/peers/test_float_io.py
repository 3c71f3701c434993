"""A peer's entry is called with Assay's float32 buffers: an integer input or output must be bridged exactly or
refused by name, never read through a ``float *`` (before, the ONNX node case ``test_quantizelinear`` "failed" on
Aidge by 8.3e31: its ``uint8_t`` output read as float32 bytes). emx-onnx-cgen's entry takes the graph's own types,
so a graph with another type than float32 is refused; Aidge casts an integer input from float itself and writes an
integer output in its own type, which the wrapper converts exactly. No peer environment is needed."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from harness import generators
from harness.errors import NotSupported
from harness.generators import aidge


def _graph(path, x_type: int, y_type: int):
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", x_type, [1, 4])],
                              [helper.make_tensor_value_info("y", y_type, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_emx_onnx_cgen_refuses_an_integer_input_or_output_by_name(tmp_path):
    adapter = generators.get("emx-onnx-cgen")
    with pytest.raises(NotSupported, match="emx-onnx-cgen: the graph's input 'x' is UINT8; this peer's adapter passes "
                                           "float32 buffers"):
        adapter.float_io(_graph(tmp_path / "in.onnx", TensorProto.UINT8, TensorProto.FLOAT))
    with pytest.raises(NotSupported, match="the graph's output 'y' is FLOAT8E4M3FN"):
        adapter.float_io(_graph(tmp_path / "out.onnx", TensorProto.FLOAT, TensorProto.FLOAT8E4M3FN))
    adapter.float_io(_graph(tmp_path / "float.onnx", TensorProto.FLOAT, TensorProto.FLOAT))  # float32: no refusal


def test_aidge_entry_types_are_bridged_exactly_or_refused():
    """The signatures Aidge 0.10.1 wrote for the node cases test_quantizelinear and test_dequantizelinear."""
    assert aidge.entry_output_type("void model_forward (const float* _0_Cast_0_input_0,\n    uint8_t** "
                                   "_5_Cast_1_output_0);") == "uint8_t"
    assert aidge.entry_output_type("void model_forward (const float* x, float** y);") == "float"
    with pytest.raises(NotSupported, match="aidge: the export's entry writes int32_t values, which a float32 does "
                                           "not hold exactly"):
        aidge.entry_output_type("void model_forward (const float* x, int32_t** y);")
    with pytest.raises(NotSupported, match="aidge: the export's entry takes uint8_t values; Assay passes float32"):
        aidge.entry_output_type("void model_forward (const uint8_t* x, float** y);")
