"""Object-code coverage under QEMU on a small program whose clip is never reached by some inputs: the clip's
instructions are listed as never executed at the clip's line, and its conditional branch as one-way, until an
input reaches it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from harness import targets
from harness.generators.generated import GeneratedCode
from harness.measurement import execcount
from harness.runners import qemu
from harness.stages.evidence import objcov

_MISSING = [tool for tool in ("arm-none-eabi-gcc", "qemu-arm", "gcc") if shutil.which(tool) is None]
pytestmark = [pytest.mark.arm,
              pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {', '.join(_MISSING)}; run .ci/setup")]

NET_C = """\
void net(const float *input, float *output)
{
    float s = 0.0f;
    for (int i = 0; i < 2; ++i) {
        s += input[i];
    }
    if (s > 100.0f) {
        s = 100.0f;
    }
    output[0] = s;
}
"""
LOOP_LINES, CLIP_LINES, CLIP_BODY = (4, 6), (7, 9), 8
MANIFEST = {
    "schema": "assay-manifest/1",
    "entry": {"symbol": "net", "signature": "void net(const float *input, float *output)", "file": "net.c"},
    "inputs": [{"name": "x", "shape": [2], "layout": "C", "size": 2, "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": [1], "layout": "C", "size": 1, "dtype": "float32"}],
    "sources": ["net.c"], "symbols": {"code": ["net"], "data": []},
    "layers": [{"index": 0, "name": "sum", "op": "Loop", "function": "net", "file": "net.c", "lines": list(LOOP_LINES)},
               {"index": 1, "name": "clip", "op": "Clip", "function": "net", "file": "net.c",
                "lines": list(CLIP_LINES)}],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("objcov")
    (root / "src").mkdir()
    (root / "src" / "net.c").write_text(NET_C)
    (root / "src" / "manifest.json").write_text(json.dumps(MANIFEST))
    code = GeneratedCode.from_directory(root / "src")
    return qemu.build(code, root / "build", targets.get("cortex-a15"), "-O0"), root / "plugin"


def coverage_of(built, rows):
    build, plugin = built
    counts = execcount.count(build, np.array(rows, np.float32), timeout=60, cache_dir=plugin)
    return objcov.measure(counts, MANIFEST, "net")


@pytest.mark.tor("TOR-EVD-005")
def test_the_unreached_clip_is_listed_until_an_input_reaches_it(built):
    low = coverage_of(built, [[1.0, 2.0], [-3.0, 4.0]])
    assert low["schema"] == objcov.SCHEMA and low["calls"] == 2 and low["functions"] == ["net"]
    never_lines = {row["line"] for row in low["never_executed"]}
    assert never_lines == {CLIP_BODY}, low["never_executed"]
    assert all(row["layer"] == "clip" for row in low["never_executed"])
    assert low["executed"] == low["instructions"] - len(low["never_executed"]) < low["instructions"]
    (clip,) = [b for b in low["branches_not_both_ways"] if b["layer"] == "clip"]
    assert clip["direction"] in ("always taken", "never taken") and clip["executions"] == 2
    assert clip["line"] == CLIP_LINES[0]
    # the loop's own branch went both ways: it is not listed
    assert not [b for b in low["branches_not_both_ways"] if b["layer"] == "sum"]
    assert low["both_ways"] >= 1 and low["branch_percent"] < 100

    high = coverage_of(built, [[1.0, 2.0], [90.0, 40.0]])
    assert high["never_executed"] == [] and high["instruction_percent"] == 100.0
    assert high["branches_not_both_ways"] == [] and high["branch_percent"] == 100.0
