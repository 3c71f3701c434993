"""``assay export``: NNEF folder, item descriptions, Petri nets, and the V2 code's layer order as a trace."""

from __future__ import annotations

import json
import subprocess
import sys

import codegen
from harness.formal import nnef_items as ni
from harness.formal import petri


def assay(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_export_with_items_writes_checked_descriptions_and_the_v2_trace_is_accepted(tmp_path):
    out = tmp_path / "lenet5"
    partition = {"A": ["conv1_conv", "conv1_tanh", "avgpool1_avgpool"],
                 "B": ["conv2_conv", "conv2_tanh", "avgpool2_avgpool", "flatten1_flatten"],
                 "C": ["dense1_gemm", "dense1_tanh", "dense2_gemm", "dense2_tanh", "dense3_gemm", "dense3_softmax"]}
    (tmp_path / "part.json").write_text(json.dumps(partition))
    result = assay("export", "--model", "lenet5", "--format", "nnef", "--out", str(out), "--items",
                   str(tmp_path / "part.json"), "--work", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr
    assert "13 layers, 10 variables; 3 items, 2 send_var" in result.stdout
    record = json.loads((out / "export.json").read_text())
    assert record["schema"] == "assay-export/1" and record["items"]["files"]["B"] == "items/B.nnef"
    # which Assay, on which configuration (assay doctor), wrote it
    assert record["provenance"]["configuration"]["verdict"] in ("tested", "untested")
    assert record["provenance"]["assay"]["requirements_lock_sha256"] is not None
    (whole,) = ni.parse((out / "graph.nnef").read_text())
    items = [ni.parse((out / "items" / f"{item}.nnef").read_text())[0] for item in partition]
    ni.check_composition(whole, items)
    # The sequential V2 code generated from the exported NNEF runs its layers in a valid order of both nets.
    manifest = codegen.generate(out, tmp_path / "c")
    trace = petri.sequential_trace([layer["name"] for layer in manifest["layers"]])
    assert petri.check_trace(petri.translate(whole), trace).accepted
    assert petri.check_trace(petri.translate_items(items), trace).accepted
    reordered = trace[:2] + trace[4:6] + trace[2:4] + trace[6:]  # the pooling before the tanh it reads
    verdict = petri.check_trace(petri.translate(whole), reordered)
    assert not verdict.accepted and verdict.index == 2 and "avgpool1_avgpool" in verdict.reason


def test_a_partition_that_misses_a_layer_is_one_line_exit_2(tmp_path):
    (tmp_path / "part.json").write_text(json.dumps({"A": ["dense1_gemm"]}))
    result = assay("export", "--model", "acas-reg50", "--out", str(tmp_path / "x"), "--items",
                   str(tmp_path / "part.json"), "--work", str(tmp_path / "work"))
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "assay: error: partition: layer 'dense1_relu' is in no item (13 more)"]
