"""The arena-region check on hand-written code with a manifest: correct code runs unchanged, a write into
arena floats no live tensor holds and a write into a live tensor are each reported with the layer and the
float, by the host runner's worker (real gcc, the real batch driver)."""

import json

import numpy as np
import pytest

from harness.generators.generated import GeneratedCode
from harness.runners import RunError, arenacheck, host

SOURCE = """static float net_arena[8];

void net(const float *input, float *output) {
    /* layer 0: a */
    for (int o = 0; o < 3; ++o) {
        net_arena[o] = input[o] * 2.0f;
    }
    /* layer 1: b */
    for (int o = 0; o < 3; ++o) {
        net_arena[4 + o] = net_arena[o] + 1.0f;
    }
    /* layer 2: c */
    for (int o = 0; o < 3; ++o) {
        output[o] = net_arena[4 + o] * net_arena[o];
    }
}
"""


LOOP = "for (int o = 0; o < 3; ++o) {\n        "  # layer b's loop, as the edits below change it


def _manifest() -> dict:
    def layer(index, first, last, inputs, symbol, offset):
        return {"index": index, "name": "abc"[index], "op": "Op", "function": "net", "file": "net.c",
                "lines": [first, last], "inputs": inputs,
                "output": {"tensor": "abc"[index], "symbol": symbol, "offset": offset, "size": 3}}

    vector = {"name": "x", "shape": [3], "layout": "C", "size": 3, "dtype": "float32"}
    return {"schema": "assay-manifest/1", "entry": {"symbol": "net", "file": "net.c"}, "inputs": [vector],
            "outputs": [vector], "sources": ["net.c"], "arena": {"symbol": "net_arena", "floats": 8},
            "layers": [layer(0, 4, 7, [None], "net_arena", 0), layer(1, 8, 11, [0], "net_arena", 4),
                       layer(2, 12, 15, [0, 1], "output", 0)]}


def _run(tmp_path, source: str) -> np.ndarray:
    manifest = _manifest()
    directory = tmp_path / "code"
    directory.mkdir()
    (directory / "net.c").write_text(arenacheck.instrument(source, manifest, "net.c"))
    (directory / "manifest.json").write_text(json.dumps(manifest))
    built = host.build(GeneratedCode.from_directory(directory), tmp_path / "build")
    return host.run(built, np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]], np.float32), 30).outputs


def test_regions_guard_what_no_live_tensor_holds_and_keep_the_live_ones():
    assert arenacheck.regions(_manifest()) == [
        (0, [(3, 8)], [], [(0, 3)]),  # before a: everything but its output is free; it must write [0, 3)
        (1, [(3, 4), (7, 8)], [(0, 3)], [(4, 7)]),  # b reads a and writes [4, 7)
        (2, [(3, 4), (7, 8)], [(0, 3), (4, 7)], []),  # c reads both; its output is the caller's buffer
    ]
    in_place = _manifest()
    in_place["layers"][1]["output"]["offset"] = 0  # b rewrites a's place: it starts from a's values
    assert arenacheck.regions(in_place)[1][3] == []


@pytest.mark.tor("TOR-SEM-005")
def test_correct_code_runs_unchanged_under_the_check(tmp_path):
    assert np.array_equal(_run(tmp_path, SOURCE), [[6.0, 20.0, 42.0], [2.0, 2.0, 72.0]])


@pytest.mark.tor("TOR-SEM-005")
@pytest.mark.parametrize("edit, message", [
    (f"{LOOP}net_arena[4 + o + 1] = net_arena[o]", "arena float 7 (no live tensor) written by layer 1"),
    (f"{LOOP}net_arena[4 + o - 4] = net_arena[o]", "arena float 0 (a live tensor) changed by layer 1"),
    (f"{LOOP.replace('3', '2')}net_arena[4 + o] = net_arena[o]", "arena float 6 not written by layer 1 (in its output)"),
])
def test_a_write_outside_the_layers_output_or_a_float_of_it_left_unwritten_is_reported(tmp_path, edit, message):
    source = SOURCE.replace(f"{LOOP}net_arena[4 + o] = net_arena[o]", edit)
    assert source != SOURCE
    with pytest.raises(RunError, match=r"exit 70\): " + message.replace("(", r"\(").replace(")", r"\)")):
        _run(tmp_path, source)
