"""``assay semantic --cores N --schedule FILE [--delays K]`` end to end: records carry the trace check's
verdict and the bit comparison with the sequential code; a bad option is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runners"))
from parallel_support import SPLIT_SCHEDULE  # noqa: E402


def _assay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, check=False)


def _schedule_file(path: Path) -> Path:
    path.write_text(json.dumps({"schema": "assay-schedule/1", "model": "lenet5-split", "variant": "keras",
                                "algorithm": "hand",
                                "cores": 2, "makespan": 110, "sequential": 130, "speedup": 130 / 110,
                                "valid": True, "violations": [],
                                "schedule": [{"core": k, "tasks": tasks} for k, tasks in enumerate(SPLIT_SCHEDULE)]}))
    return path


@pytest.mark.parametrize("target", ["host", pytest.param("cortex-a15x4", marks=pytest.mark.arm)])
def test_parallel_campaign_records_the_trace_verdict(target, tmp_path):
    schedule = _schedule_file(tmp_path / "schedule.json")
    done = _assay("semantic", "--models", "lenet5-split", "--generators", "assay-v2", "--cores", "2",
                  "--schedule", str(schedule), "--targets", target, "--delays", "1", "--inputs", "8",
                  "--references", "onnxruntime", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"),
                  "--quiet")
    assert done.returncode == 1, done.stderr[-2000:]  # the onnx variant's layers have other names
    records = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert {(r["variant"], r["verdict"]) for r in records} == {("keras", "pass"), ("onnx", "error")}
    assert "a schedule of the keras variant's layers, not onnx's" in next(
        r["cause"] for r in records if r["variant"] == "onnx")
    for record in [r for r in records if r["variant"] == "keras"]:
        checked = record["parallel"]
        assert checked["cores"] == 2 and checked["trace"] == {"verdict": "pass", "violations": []}
        assert [run["delay_seed"] for run in checked["runs"]] == [None, 0]
        assert all(run["bits_vs_sequential"]["differing_values"] == 0 for run in checked["runs"])
        petri = checked["petri"]  # every inference of both runs replayed on the NNEF items' Petri net
        assert petri["verdict"] == "pass" and petri["inferences"] == 16 and petri["items"] == 2
        assert 1 <= petri["distinct_interleavings"] <= 16
        assert petri["picture"] is None or Path(petri["picture"]).read_text().lstrip().startswith(("<?xml", "<svg"))
        measured = checked.get("measured")  # instruction counts per vCPU: under QEMU only
        if target == "host":
            assert measured is None
        else:
            assert measured["inputs"] == 3 and len(measured["per_core"]) == 2 and measured["critical_core"] == 0
            # the composition waits for core 1 where the critical core's own count does not (it leaves out
            # the few instructions of its function outside any item: hence the tolerance)
            assert 1 < measured["speedup_composed"] <= measured["speedup_critical_core"] * 1.001 < 2
            assert measured["per_core_waits"][1] < measured["per_core_waits"][0]


def test_parallel_options_are_checked(tmp_path):
    done = _assay("semantic", "--models", "lenet5-split", "--delays", "2", "--out", str(tmp_path))
    assert done.returncode == 2 and "--schedule and --delays need --cores" in done.stderr
    assert "Traceback" not in done.stderr
