"""Exit status of a campaign with generator refusals (issue 26): a refusal is a ``not supported`` record that
fails nothing; when no selected generator supports any selected model, nothing ran and the status is 2 (bad
input), the refusal's line naming the op. Real ONNX files, our real generator, ONNX Runtime."""

from __future__ import annotations

import json
import subprocess
import sys

import onnx
from onnx import TensorProto, helper


def _one_op_model(path, op: str) -> str:
    vector = ["N", 4]
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], op.lower(),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, vector)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, vector)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def _semantic(tmp_path, *models: str, references: str = "onnxruntime") -> subprocess.CompletedProcess:
    arguments = [a for m in models for a in ("--models", m)]
    return subprocess.run([sys.executable, "-m", "harness.cli", "semantic", *arguments, "--generators", "assay-v2",
                           "--references", references, "--inputs", "3", "--out", str(tmp_path / "out"),
                           "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=600)


def test_only_refusals_exit_2_naming_the_op(tmp_path):
    done = _semantic(tmp_path, _one_op_model(tmp_path / "sine.onnx", "Sin"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not supported" in done.stderr and "Sin" in done.stderr
    (record,) = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert record["verdict"] == "not supported"


def test_a_refusal_beside_a_pass_fails_nothing(tmp_path):
    done = _semantic(tmp_path, _one_op_model(tmp_path / "sine.onnx", "Sin"),
                     _one_op_model(tmp_path / "rectifier.onnx", "Relu"))
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = sorted(r["verdict"] for r in json.loads((tmp_path / "out" / "results.json").read_text())["records"])
    assert verdicts == ["not supported", "pass"]


def test_a_model_no_selected_reference_can_run_is_an_error_never_a_silent_pass(tmp_path):
    """An ONNX-only model with ``--references keras`` has nothing to be compared with. Before, the campaign made
    no record and said "0 failed" with exit 0; now one line names the model and the status is 2 when nothing else
    ran, 1 beside a model that was checked."""
    alone = _semantic(tmp_path / "alone", _one_op_model(tmp_path / "rectifier.onnx", "Relu"), references="keras")
    assert alone.returncode == 2, alone.stdout + alone.stderr
    line = next(line for line in alone.stderr.splitlines() if "none of the selected references" in line)
    assert "rectifier" in line and "(keras)" in line and "nothing was compared" in line
    beside = _semantic(tmp_path / "beside", str(tmp_path / "rectifier.onnx"), "acas-reg50", references="keras")
    assert beside.returncode == 1, beside.stdout + beside.stderr
    verdicts = {r["model"]: r["verdict"] for r in json.loads((tmp_path / "beside" / "out" / "results.json")
                                                              .read_text())["records"]}
    assert verdicts == {"acas-reg50": "pass"}


def test_a_generator_that_reads_none_of_the_models_files_is_named_not_left_out(tmp_path):
    """keras2c reads Keras files only: on an ONNX file it has no item, and a line says so (before, nothing did)."""
    model = _one_op_model(tmp_path / "relu.onnx", "Relu")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", model, "--generators",
                           "keras2c", "--references", "onnxruntime", "--inputs", "3", "--out", str(tmp_path / "out"),
                           "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{model}: keras2c has no variant for it (it reads none of the model's files: onnx)" in done.stderr
