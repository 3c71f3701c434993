"""A model file replaced at one path between runs into one ``--out`` (issue 44): a good export, a broken one, then
the fixed one. The last run and ``assay report --check`` judge the current content only; the records of the
earlier contents are superseded, counted (or, with ``--keep-history``, kept whole) with their content hash.
Real ONNX files, our real generator, ONNX Runtime, the real CLI."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def _matmul(seed: int) -> bytes:
    weights = numpy_helper.from_array(np.random.default_rng(seed).uniform(-1, 1, (4, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _assay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=600)


def test_good_then_garbage_then_fixed_file_at_one_path(tmp_path):
    path, out = tmp_path / "exports" / "net.onnx", tmp_path / "out"
    path.parent.mkdir()
    contents = [_matmul(0), _matmul(0)[: 40], _matmul(1)]  # the export, a truncated one, the fixed one
    statuses = []
    for data, history in zip(contents, ([], ["--keep-history"], [])):
        path.write_bytes(data)
        done = _assay("semantic", "--models", str(path), "--references", "onnxruntime", "--inputs", "3", "--quiet",
                      "--out", str(out), "--work", str(tmp_path / "work"), *history)
        statuses.append(done.returncode)
    assert statuses == [0, 2, 0], done.stdout + done.stderr
    assert "1 records of earlier contents of a replaced model file superseded" in done.stdout  # the broken one's

    document = json.loads((out / "results.json").read_text())
    digests = [hashlib.sha256(data).hexdigest() for data in contents]
    assert [(r["model"], r["source_sha256"], r["verdict"]) for r in document["records"]] == [
        (str(path), digests[2], "pass")]
    first, second = document["superseded"]
    assert (first["source_sha256"], first["superseded_by"], first["verdicts"]) == (digests[0], digests[1], {"pass": 1})
    assert [r["source_sha256"] for r in first["records"]] == [digests[0]]  # --keep-history on the second run
    assert (second["source_sha256"], second["superseded_by"], second["verdicts"]) == (digests[1], digests[2],
                                                                                      {"error": 1})
    assert "records" not in second

    check = _assay("report", "--results", str(out / "results.json"), "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "1 of 1 records pass; 2 records of earlier contents of a replaced model file superseded, not judged" \
        in check.stdout
    table = (out / "table1.md").read_text()
    assert "## Superseded records" in table and f"SHA-256 {digests[0][:12]}; 1 pass" in table
