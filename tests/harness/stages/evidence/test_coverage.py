"""Structural coverage with gcc --coverage and gcovr on real C: what the inputs never reach is listed."""

from __future__ import annotations

import json

import numpy as np

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
