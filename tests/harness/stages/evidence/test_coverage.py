"""Structural coverage with gcc --coverage and gcovr on real C: what the inputs never reach is listed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.generators.generated import GeneratedCode
from harness.stages.evidence import coverage

C = """void net(const float *input, float *output) {
    for (int i = 0; i < 2; ++i) {
        output[i] = input[i];
        if (input[i] > 5.0f) {
            output[i] = 5.0f;
        }
    }
}
"""


@pytest.mark.tor("TOR-EVD-003")
def test_lines_and_branches_the_inputs_never_reach_are_listed(tmp_path):
    source = tmp_path / "code"
    source.mkdir()
    (source / "net.c").write_text(C)
    (source / "manifest.json").write_text(json.dumps({
        "schema": "assay-manifest/1", "entry": {"symbol": "net", "file": "net.c"},
        "inputs": [{"size": 2, "layout": "C"}], "outputs": [{"size": 2, "layout": "C"}], "sources": ["net.c"],
        "layers": [{"index": 0, "name": "clip", "file": "net.c", "lines": [2, 7]}]}))
    code = GeneratedCode.from_directory(source)
    inputs = np.array([[0.0, 1.0], [2.0, -3.0]], np.float32)  # never above 5: the clip is not reached
    summary = coverage.measure(code, inputs, tmp_path / "build", tmp_path / "report", timeout=60)
    assert summary["unreached_lines"] == [{"file": "net.c", "line": 5, "layer": "clip"}]
    assert summary["line_percent"] < 100 and summary["branch_percent"] < 100
    assert all(branch["layer"] == "clip" for branch in summary["unreached_branches"])
    assert (tmp_path / "report" / "coverage.html").is_file()

    reached = coverage.measure(code, np.array([[9.0, 0.0]], np.float32), tmp_path / "build", tmp_path / "r2", 60)
    assert reached["unreached_lines"] == [] and reached["line_percent"] == 100.0


MCDC_C = """void net(const float *input, float *output) {
    output[0] = 0.0f;
    if (input[0] > 0.0f && input[1] > 0.0f) {
        output[0] = 1.0f;
    }
}
"""


@pytest.mark.tor("TOR-EVD-004")
@pytest.mark.skipif(coverage.llvm_tools() is None, reason="clang-19/llvm-19 not installed; run .ci/setup")
def test_mcdc_lists_the_conditions_the_inputs_do_not_show_independent(tmp_path):
    source = tmp_path / "code"
    source.mkdir()
    (source / "net.c").write_text(MCDC_C)
    (source / "manifest.json").write_text(json.dumps({
        "schema": "assay-manifest/1", "entry": {"symbol": "net", "file": "net.c"},
        "inputs": [{"size": 2, "layout": "C"}], "outputs": [{"size": 1, "layout": "C"}], "sources": ["net.c"],
        "layers": [{"index": 0, "name": "gate", "file": "net.c", "lines": [2, 5]}]}))
    code = GeneratedCode.from_directory(source)
    # (T, T) and (T, F): only the second condition is shown to change the outcome on its own
    partial = coverage.measure_mcdc(code, np.array([[1.0, 1.0], [1.0, -1.0]], np.float32), tmp_path / "b1",
                                    tmp_path / "r1", 60)
    assert partial["available"] and partial["decisions"] == 1 and partial["conditions"] == 2
    assert partial["conditions_shown"] == 1 and partial["mcdc_percent"] == 50.0
    assert partial["not_shown"] == [{"file": "net.c", "decision": "input[0] > 0.0f && input[1] > 0.0f",
                                     "decision_lines": [3, 3], "condition": "C1", "line": 3, "column": 9,
                                     "layer": "gate"}]
    assert "MC/DC Decision Region" in (tmp_path / "r1" / "mcdc.txt").read_text()
    # adding (F, T) shows the first condition too
    full = coverage.measure_mcdc(code, np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0]], np.float32),
                                 tmp_path / "b2", tmp_path / "r2", 60)
    assert full["mcdc_percent"] == 100.0 and full["not_shown"] == []
    assert full["figure"] == "100.0 % (2/2 conditions, 1 decisions)"


@pytest.mark.tor("TOR-EVD-004")
def test_mcdc_of_code_without_decisions_is_not_applicable_never_a_percentage():
    assert coverage.mcdc_figure(0, 0, 0) == "not applicable: 0 decisions"


def test_mcdc_without_clang_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(coverage, "LLVM_VERSIONS", ())
    result = coverage.measure_mcdc(None, np.zeros((1, 1), np.float32), tmp_path, tmp_path, 1)
    assert result["available"] is False and "clang-19" in result["reason"]
