"""``assay evidence`` end to end on acas-reg50, host and cortex-m4f under QEMU: the package holds what it
claims, rebuilding it gives the same bytes (but for the declared volatile file), and verify catches damage."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.core import configuration

pytestmark = [pytest.mark.arm,
              pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("gcovr") is None,
                                 reason="qemu-system-arm or gcovr not installed; run .ci/setup")]


def assay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=1200)


def hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.tor("TOR-EVD-001", "TOR-EVD-002", "TOR-EVD-007", "TOR-EVD-008", "TOR-EVD-009")
def test_evidence_package_for_acas_reg50_on_cortex_m4f(tmp_path):
    out, work = tmp_path / "pkg", tmp_path / "work"
    args = ("evidence", "--models", "acas-reg50", "--targets", "host,cortex-m4f", "--inputs", "50",
            "--wcet-inputs", "5", "--set-inputs", "20", "--mutants", "0", "--out", str(out), "--work", str(work),
            "--tor-tests", "tests/harness/stages/evidence/test_tor.py -m tor")
    # on a configuration other than the tested one (assay doctor), the package says so and does not pass
    tested = configuration.report()["verdict"] == "tested"
    first = assay(*args)
    assert first.returncode == (0 if tested else 1), first.stderr[-2000:]
    index = json.loads((out / "evidence.json").read_text())
    assert index["schema"] == "assay-evidence/2" and index["verdict"] == ("pass" if tested else "fail")
    assert set(index["verdicts"]) == {"semantic", "memory", "met", "wcet", "coverage", "inputs",
                                      "tested-configuration"}
    assert {part for part, verdict in index["verdicts"].items() if verdict != "pass"} == \
        (set() if tested else {"tested-configuration"})
    # a subset of Assay's own tests ran: a requirement all of whose tests ran passes, one with some of its tests
    # run is incomplete, the others are "not run"
    assert index["tool_qualification"] == "incomplete"
    matrix = json.loads((out / "tool-qualification" / "tor-matrix.json").read_text())
    status = {row["id"]: row["status"] for row in matrix["rows"]}
    assert status["TOR-EVD-006"] == "pass" and status["TOR-CLI-001"] == "incomplete"
    assert status["TOR-EVD-001"] == status["TOR-SEM-001"] == "not run"
    assert (out / "tool-qualification" / "tor.md").is_file() and (out / "tool-qualification" / "junit.xml").is_file()
    objects = json.loads((out / "coverage" / "acas-reg50" / "assay-v2-keras" / "object-cortex-m4f.json").read_text())
    assert objects["schema"] == "assay-object-coverage/1" and objects["calls"] == 50
    assert objects["same_code_as_image"] and 0 < objects["executed"] <= objects["instructions"]
    assert "Object-code coverage" in (out / "index.html").read_text()

    sci = json.loads((out / "sci" / "sci.json").read_text())
    assert {t["target"] for t in sci["targets"]} == {"host", "cortex-m4f"}
    assert sci["configuration"]["verdict"] == configuration.report()["verdict"]
    assert {k: sci["assay"][k] for k in ("version", "commit")} == \
        {k: configuration.report()["assay"][k] for k in ("version", "commit")}
    assert all(code["same_as_verified"] for code in sci["generated_code"])
    (image,) = [i for i in sci["images"] if i["code"] == "acas-reg50/assay-v2-keras"]
    assert hashlib.sha256((out / image["file"]).read_bytes()).hexdigest() == image["sha256"]

    trace = json.loads((out / "trace" / "trace.json").read_text())["codes"]["acas-reg50/assay-v2-keras"]
    manifest = json.loads((out / "code" / "acas-reg50" / "assay-v2-keras" / "manifest.json").read_text())
    layers = [row for row in trace["layers"] if row["index"] is not None]
    assert [row["layer"] for row in layers] == [layer["name"] for layer in manifest["layers"]]
    for row in layers:
        assert row["object_code"]["cortex-m4f"], row
        figures = row["cycles"]["cortex-m4f/cortex-m4"]
        assert figures["wcet_cycles"] >= figures["max_measured_cycles"] > 0
        assert row["error"]["compared"] and row["error"]["within_tolerance"], row
        assert 0 <= row["error"]["max_abs_error"] < 1e-5
    assert trace["layer_error"]["reference"] == "keras" and trace["layer_error"]["first_over_tolerance"] is None
    sets = json.loads((out / "inputs" / "input-sets.json").read_text())
    assert sets["schema"] == "assay-input-sets/1"
    records = sets["codes"]["acas-reg50/assay-v2-onnx"]
    assert set(records) == {"uniform", "corners", "thresholds", "coverage"}
    assert records["uniform"]["inputs"] == 50 and records["corners"]["inputs"] == 20
    for record in records.values():
        assert record["verdict"] == "pass" and record["seed"] == 0 and 0 < record["line_percent"] <= 100
        assert hashlib.sha256(np.load(out / record["file"]).tobytes()).hexdigest() == record["sha256"]
        assert 0 < record["activation_states"]["reached"] <= record["activation_states"]["states"]

    before, digest = hashes(out), (tmp_path / "pkg.sha256").read_text()
    assert digest == f"{before['evidence.json']}  pkg/evidence.json\n" and before["evidence.json"] in first.stdout
    second = assay(*args)
    assert second.returncode == first.returncode, second.stderr[-2000:]
    after = hashes(out)
    assert set(before) == set(after)
    assert [name for name in before if before[name] != after[name]] == ["volatile.json"]
    assert (tmp_path / "pkg.sha256").read_text() == digest  # the same package digest
    volatile = json.loads((out / "volatile.json").read_text())  # what each part cost; the test run reused
    assert volatile["tool_qualification_reused"] is True and volatile["tool_qualification_s"] is None
    assert {"stage semantic", "stage wcet", "stages together", "coverage (gcc, gcovr)",
            "object-code coverage (QEMU)"} <= set(volatile["parts_s"])

    intact = assay("evidence", "verify", str(out))
    assert intact.returncode == 0 and f"package digest checked: {before['evidence.json']} against pkg.sha256" \
        in intact.stdout, intact.stdout
    table = out / "results" / "semantic" / "table1.md"
    table.write_text(table.read_text() + " ")
    damaged = assay("evidence", "verify", str(tmp_path / "pkg.zip"))
    assert damaged.returncode == 0  # the zip was written before the damage
    broken = assay("evidence", "verify", str(out))
    assert broken.returncode == 1 and "results/semantic/table1.md: sha256 differs from evidence.json" in broken.stdout
