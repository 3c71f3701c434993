"""The trace matrix from a manifest and a coverage summary: one row per layer in the manifest's order with its
C lines and the lines the inputs never reached, one row for the code outside the layers, and every C line with
code outside the layer spans listed as untraced."""

from __future__ import annotations

import pytest

from harness.stages.evidence import trace

C = """/* generated */
void net(const float *input, float *output) {
    float t = input[0];
    output[0] = t * 2.0f;
    if (t > 9.0f) {
        output[0] = 9.0f;
    }
}
"""
MANIFEST = {"entry": {"symbol": "net", "file": "net.c"},
            "layers": [{"index": 0, "name": "scale", "op": "Dense", "file": "net.c", "lines": [4, 4]},
                       {"index": 1, "name": "clip", "op": "Clip", "file": "net.c", "lines": [5, 7]}]}


@pytest.mark.tor("TOR-EVD-007")
def test_one_row_per_layer_and_every_line_accounted_for(tmp_path):
    (tmp_path / "net.c").write_text(C)
    coverage = {"unreached_lines": [{"file": "net.c", "line": 6, "layer": "clip"}]}
    rows = trace.rows(MANIFEST, coverage, {}, [], "2 inputs, seed 0")
    assert [row["layer"] for row in rows] == ["scale", "clip", trace.OUTSIDE]
    assert [row["c_lines"] for row in rows] == [[4, 4], [5, 7], None]
    assert [row["lines_not_reached"] for row in rows] == [[], [6], []]
    assert all(row["tests"] == "2 inputs, seed 0" for row in rows)
    untraced = trace.untraced_lines(MANIFEST, tmp_path)
    assert [line["line"] for line in untraced] == [2, 3]
    assert trace.as_csv(rows).splitlines()[2].startswith("clip,,Clip,net.c,5-7,")
    # with the requirements: each layer's id and the tests verifying it, different per layer
    verified = {0: {"requirement": "LLR-001", "tests": "input sets uniform, corners"},
                1: {"requirement": "LLR-002", "tests": "input sets uniform, thresholds"}}
    rows = trace.rows(MANIFEST, coverage, {}, [], "2 inputs, seed 0", None, verified)
    assert [(row["requirement"], row["tests"]) for row in rows] == [
        ("LLR-001", "input sets uniform, corners"), ("LLR-002", "input sets uniform, thresholds"),
        (None, "2 inputs, seed 0")]
    assert trace.as_csv(rows).splitlines()[2].startswith("clip,LLR-002,Clip,net.c,5-7,")
