"""``assay peers verify``: emx-onnx-cgen's verifier beside Assay's oracle (the table, and, marked ``peers`` and
``slow``, both on acas-reg50)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.stages.peers import verify

ROOT = Path(__file__).resolve().parents[4]


def _row(emx_exits: list[int], assay_verdicts: list[str]) -> dict:
    return {"model": "m", "variant": "default",
            "emx": [{"exit": code, "verdict": "Result: OK (max ULP 0)" if code == 0 else "Result: FAIL (max ULP 412)"}
                    for code in emx_exits],
            "assay": [{"reference": ref, "verdict": v, "max_abs_error": 1e-7, "cause": None}
                      for ref, v in zip(("keras", "onnxruntime"), assay_verdicts)]}


@pytest.mark.parametrize("emx, assay, agree", [
    ([0, 0], ["pass", "pass"], "yes"),
    ([0, 1], ["pass", "pass"], "**no**"),
    ([0, 0], ["pass", "fail"], "**no**"),
    ([1, 0], ["fail", "pass"], "yes"),
])
def test_a_row_agrees_only_when_both_pass_or_both_object(emx, assay, agree):
    line = verify.markdown([_row(emx, assay)], 2, 0).splitlines()[-1]
    assert line.endswith(f"| {agree} |")
    assert (f"{emx.count(0)}/2 OK" in line) and ("FAIL (max ULP 412)" in line) == (1 in emx)


@pytest.mark.peers
@pytest.mark.slow
def test_both_verifiers_pass_emx_code_for_acas_reg50(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "peers", "verify", "--models", "acas-reg50",
                           "--inputs", "1", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((tmp_path / "out" / "verify.json").read_text())["rows"]
    assert [(r["variant"], r["emx"][0]["exit"]) for r in rows] == [("default", 0), ("no-heap", 0)]
    assert all(r["emx"][0]["verdict"].startswith("Result: OK") for r in rows)
    assert all(a["verdict"] == "pass" for r in rows for a in r["assay"])
