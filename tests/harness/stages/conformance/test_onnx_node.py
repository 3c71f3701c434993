"""``assay conformance --suite onnx-node``: the ONNX backend node tests of the installed onnx package, prepared
for the harness (weights as initialisers, batches split only where samples are independent, one model per
output) and a representative sample run end to end through our generator on the host."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

from harness.stages.conformance import onnx_node

# One case per kind of preparation and per family of ops; the clip case is the min > max bug of issue 26.
SAMPLE = ["test_relu", "test_conv_with_strides_padding", "test_batchnorm_example", "test_gemm_default_matrix_bias",
          "test_softmax_axis_0", "test_split_equal_parts_2d.*", "test_maxpool_with_argmax_2d_precomputed_pads",
          "test_clip_min_greater_than_max", "test_matmul_1d_1d", "test_averagepool_1d_default"]


@pytest.fixture(scope="module")
def collected():
    return {case.name: (op, case) for op, case in onnx_node.collect(("BatchNormalization", "Softmax", "Split",
                                                                       "MaxPool"))}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """One work folder for the module's runs: the cases are collected and prepared once (about 25 s)."""
    return tmp_path_factory.mktemp("onnx-node-work")


def _prepared(collected, name, tmp_path, output=0):
    op, case = collected[name]
    prepared = onnx_node.prepare(op, case, output, name, tmp_path / name)
    return prepared, onnx.load(prepared.model), np.load(prepared.data)


def _dims(value) -> list:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def test_weights_become_initialisers_and_independent_samples_split(collected, tmp_path):
    prepared, model, data = _prepared(collected, "test_batchnorm_example", tmp_path)
    assert [value.name for value in model.graph.input] == ["x"]
    assert sorted(init.name for init in model.graph.initializer) == ["bias", "mean", "s", "var"]
    assert prepared.split and _dims(model.graph.input[0])[0] == "N" and _dims(model.graph.output[0])[0] == "N"
    assert data["x"].shape == (2, 3, 4, 5) and data["expected"].shape == (2, 3, 4, 5)


def test_a_batch_the_op_mixes_keeps_its_declared_shape(collected, tmp_path):
    prepared, model, _ = _prepared(collected, "test_softmax_axis_0", tmp_path)  # softmax over axis 0
    assert not prepared.split and _dims(model.graph.input[0]) == [3, 4, 5]


def test_each_float_output_is_a_case_of_its_own(collected, tmp_path):
    _, case = collected["test_split_equal_parts_2d"]
    assert onnx_node.outputs_of(case, "Split") == [0, 1]
    _, model, data = _prepared(collected, "test_split_equal_parts_2d", tmp_path, output=1)
    assert [value.name for value in model.graph.output] == [case.model.graph.output[1].name]
    assert np.array_equal(data["expected"], case.data_sets[0][1][1])
    _, argmax = collected["test_maxpool_with_argmax_2d_precomputed_pads"]
    assert onnx_node.outputs_of(argmax, "MaxPool") == [0]  # the int64 indices are left out


def test_representative_sample_end_to_end(tmp_path, work):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "harness.cli", "conformance", "--suite", "onnx-node", "--generators", "assay-v2",
               "--cases", ",".join(SAMPLE), "--out", str(out), "--work", str(work), "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((out / "conformance.json").read_text())
    assert document["suite"] == "onnx-node" and document["references"] == ["expected", "onnxruntime"]
    verdicts = {r["case"]: r["verdict"] for r in document["results"]}
    split_outputs = [name for name in verdicts if name.startswith("test_split_equal_parts_2d.")]
    assert len(split_outputs) == 2
    passing = [name for name in verdicts if name not in ("test_matmul_1d_1d",)]
    assert {name: verdicts[name] for name in passing} == dict.fromkeys(passing, "pass")
    # the float64 arbiter's figure on every result that passed (issue 25): C, ONNX Runtime, expected vs float64
    assert all(set(r["arbiter"]["errors"]) == {"C", "onnxruntime", "expected"}
               for r in document["results"] if r["verdict"] == "pass")
    assert verdicts["test_matmul_1d_1d"] == "not supported"  # a scalar MatMul: loaded (one value), refused by name
    cause = next(r["cause"] for r in document["results"] if r["case"] == "test_matmul_1d_1d")
    assert "test_matmul_1d_1d" in cause and "produces a scalar" in cause
    report = (out / "conformance.md").read_text()
    assert "## Per op" in report and "| Clip | 1/1 |" in report and "| Split | 2/2 |" in report


def test_a_pattern_matching_no_case_is_bad_input(tmp_path, work):
    command = [sys.executable, "-m", "harness.cli", "conformance", "--suite", "onnx-node", "--generators", "assay-v2",
               "--cases", "test_no_such_case*", "--out", str(tmp_path / "out"), "--work", str(work)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 2 and "no onnx-node case matches 'test_no_such_case*'" in done.stderr
