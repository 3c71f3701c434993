"""``assay explore`` end to end: a small exploration (J = 2) of the trained digits MLP on the Cortex-M4F
under QEMU, through the real stages, then the same command again reusing every result."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from harness.stages.explore import run

_TOOLS = ("arm-none-eabi-gcc", "qemu-arm", "qemu-system-arm")
needs_arm = pytest.mark.skipif(not all(shutil.which(tool) for tool in _TOOLS),
                               reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")
FIELDS = {"j", "quality", "rom", "ram", "wcet_cycles", "max_measured_cycles", "verdict", "pareto"}


def explore(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "explore", "--model", "digits-mlp", "--steps", "2",
         "--target", "cortex-m4f", "--timing", "cortex-m4", "--inputs", "2", "--semantic-inputs", "10",
         "--ram-limit", "1k", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"), *extra],
        capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.slow
@pytest.mark.arm
@needs_arm
def test_small_exploration_and_its_rerun(tmp_path):
    done = explore(tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    document = json.loads((out / "explore.json").read_text())
    assert document["schema"] == "assay-explore/1" and document["model"] == "digits-mlp"
    configurations = document["configurations"]
    assert [c["j"] for c in configurations] == [0, 1, 2]
    assert all(FIELDS <= c.keys() and c["verdict"] == "pass" and not c["causes"] for c in configurations)
    # pruning shrinks the layers, so the code and its data do too
    units = [list(c["units"].values()) for c in configurations]
    assert units[0] == [64, 32] and all(a >= b for a, b in zip(units[0], units[1])) and units[1] != units[2]
    roms = [c["rom"] for c in configurations]
    assert roms[0] > roms[1] > roms[2] > 0
    assert all(c["wcet_cycles"] >= c["max_measured_cycles"] > 0 and c["ram"] > 0 for c in configurations)
    assert configurations[0]["quality"] == pytest.approx(document["baseline_quality"])
    assert [c["j"] for c in configurations if c["pareto"]] == run.front(configurations, run.AXES)
    assert [c["fits"] for c in configurations] == [c["ram"] <= 1024 for c in configurations]
    for stage, name in (("semantic", "results.json"), ("memory", "memory.json"), ("met", "met.json"),
                        ("wcet", "wcet.json")):
        assert (out / stage / name).is_file()
    assert "## Non-dominated configurations" in (out / "pareto.md").read_text()
    assert (out / "index.html").is_file() and (out / "fronts.png").is_file()

    finished = {stage: [r["finished_at"] for r in json.loads((out / stage / f"{stage}.json").read_text())["records"]]
                for stage in ("met", "wcet")}
    again = explore(tmp_path)
    assert again.returncode == 0, again.stderr
    redone = json.loads((out / "explore.json").read_text())
    for before, after in zip(configurations, redone["configurations"]):
        assert {k: before[k] for k in FIELDS} == {k: after[k] for k in FIELDS}
    for stage in finished:  # content-keyed: the records were reused, not recomputed
        assert [r["finished_at"] for r in json.loads((out / stage / f"{stage}.json").read_text())["records"]] \
            == finished[stage]
