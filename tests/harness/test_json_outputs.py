"""Every JSON Assay writes or prints is plain JSON with a schema name (docs/schemas.md), never a Python repr.

Runs the real commands (as subprocesses): a small semantic campaign, ``assay doctor --json``, ``assay
generate``, and the WCET ELF mode of both ``assay wcet`` and ``python -m wcet``
on the recorded OTAWA samples.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

OTAWA = Path(__file__).resolve().parents[1] / "wcet" / "otawa-recordings"  # the recorded OTAWA runs, in the tree

# What str()/repr() of a dataclass or an object looks like: "LoopReport(function='kernel', ...)" or "<X at 0x...>".
REPR = re.compile(r"^[A-Za-z_][\w.]*\(\w+=|^<[\w.]+ (object )?at 0x")


def reprs_in(value, where: str = "$") -> list[str]:
    """Every string value in a JSON document that is a Python repr, with its path."""
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in reprs_in(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [found for i, item in enumerate(value) for found in reprs_in(item, f"{where}[{i}]")]
    return [f"{where}: {value}"] if isinstance(value, str) and REPR.search(value) else []


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)


@pytest.mark.tor("TOR-CLI-003")
def test_the_repr_check_can_fail():
    assert reprs_in({"loops": ["LoopReport(function='kernel', header=4)"], "x": "<Foo object at 0x7f>"}) == [
        "$.loops[0]: LoopReport(function='kernel', header=4)", "$.x: <Foo object at 0x7f>"]
    assert reprs_in({"cause": "generator failed: ValueError: bad (x=1)", "n": [1, 2.5, None]}) == []


@pytest.mark.tor("TOR-CLI-003")
def test_doctor_json_is_plain_and_named():
    result = run("-m", "harness.cli", "doctor", "--json")
    assert result.returncode in (0, 1), result.stderr  # 1: this machine differs from the tested configuration
    data = json.loads(result.stdout)
    assert data["schema"] == "assay-doctor/1" and data["verdict"] in ("tested", "untested")
    assert all(isinstance(line, str) for line in data["differences"] + data["notes"]) and reprs_in(data) == []


@pytest.mark.parametrize("command", [("-m", "harness.cli", "wcet", "--elf"), ("-m", "wcet")])
def test_wcet_elf_json_is_plain_and_named(command):
    if not OTAWA.is_dir():
        pytest.skip("tests/wcet/otawa-recordings not found")
    elf, facts = OTAWA / "arm7tdmi/dense.elf", OTAWA / "arm7tdmi/dense-context.ffx"
    args = [*command, str(elf), "--function", "main"] if "--elf" in command else [*command, str(elf), "main"]
    result = run(*args, "--flow-facts", str(facts), "--timing", "trivial", "--json")
    assert result.returncode == 0, result.stderr
    first, _, rest = result.stdout.partition("\n")
    assert first == "WCET[main] = 22715 cycles"
    data = json.loads(rest)
    assert data["schema"] == "assay-wcet-elf/1" and data["wcet_cycles"] == 22715 and data["function"] == "main"
    assert data["loops"] and all(isinstance(loop, dict) and {"function", "header", "bound"} <= loop.keys()
                                 for loop in data["loops"])
    assert reprs_in(data) == []


@pytest.mark.tor("TOR-CLI-003")
def test_every_json_file_a_campaign_writes_has_a_schema_and_no_repr(tmp_path):
    out, work, generated = tmp_path / "out", tmp_path / "work", tmp_path / "gen"
    campaign = run("-m", "harness.cli", "semantic", "--models", "acas-reg50", "--inputs", "5", "--quiet",
                   "--out", str(out), "--work", str(work))
    assert campaign.returncode == 0, campaign.stderr
    generate = run("-m", "harness.cli", "generate", "--model", "acas-reg50", "--out", str(generated),
                   "--work", str(work))
    assert generate.returncode == 0, generate.stderr
    files = sorted(p for root in (out, work, generated) for p in root.rglob("*.json"))
    names = {p.name for p in files}
    assert {"results.json", "manifest.json", "model.json"} <= names
    for path in files:
        data = json.loads(path.read_text())
        assert isinstance(data, dict) and str(data.get("schema", "")).startswith("assay-"), path
        assert reprs_in(data) == [], path
