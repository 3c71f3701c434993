"""``assay peers report`` for the findings beyond A3: each folder's script, run by the peer environment's own
Python (no Assay there, in the sandbox), shows the defect (marked ``peers`` and ``slow``: each starts the peer's
Keras), and the parts of the scripts that need no peer."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.stages.peers import report

ROOT = Path(__file__).resolve().parents[4]
# What each finding's folder must show: the verdict each implementation starts with.
SHOWS = {
    "A7": {"default": "WRONG"},
    "A11": {"6loops": "ok", "std_gemm_nn": "WRONG", "indirect_gemm_nn": "WRONG"},
    "E6": {"loadable": "WRONG"},
    "E7": {"inline": "NOT GENERATED (ValueError: invalid literal for int()"},
}


def _common():
    spec = importlib.util.spec_from_file_location("reproducer_common", report.REPRODUCERS / "reproducer_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_finding_with_a_folder_names_a_model_and_causes_in_the_peer_source():
    known = report.findings()
    assert set(SHOWS) | {"A3"} <= set(known)
    for name in SHOWS:
        finding = known[name]
        assert finding.model.startswith(report.CASE) and finding.peer in report.MODEL_FILES
        assert "defective" in finding.implementations.values()
        assert all(re.match(r"[\w/.]+\.(py|tpl):\d+", cause) for cause in finding.causes), finding.causes


def test_a_generation_that_raises_is_a_defective_implementation_s_verdict(tmp_path, capsys):
    """``reproducer_common.main``: the peer's own exception is the verdict (E7), exit 1; a control that raises
    does not count as the defect."""
    (tmp_path / "finding.json").write_text(json.dumps({
        "finding": "T", "model": "m", "implementations": {"good": "control", "bad": "defective"},
        "output_size": 1, "atol": 1e-5, "rtol": 0.0}))
    np.save(tmp_path / "inputs.npy", np.zeros((1, 1), np.float32))
    np.save(tmp_path / "expected.npy", np.zeros((1, 1), np.float32))

    def make(finding, implementation):
        raise ValueError(f"{implementation} refused")

    status = _common().main(str(tmp_path), lambda finding, inputs: np.zeros((1, 1)), make)
    results = json.loads((tmp_path / "reproduction.json").read_text())
    assert status == 1 and results["bad"]["verdict"] == "NOT GENERATED (ValueError: bad refused)"
    assert "T: REPRODUCED" in capsys.readouterr().out


@pytest.mark.peers
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHOWS))
def test_the_folder_reproduces_the_finding_with_only_the_peer_installed(name, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "peers", "report", name, "--out", str(tmp_path),
                           "--work", str(tmp_path / "work")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = tmp_path / name
    results = json.loads((folder / "reproduction.json").read_text())
    assert {impl: result["verdict"][:len(SHOWS[name][impl])] for impl, result in results.items()} == SHOWS[name]
    assert f"{name}: REPRODUCED" in (folder / "run.log").read_text()
    finding = json.loads((folder / "finding.json").read_text())
    assert (folder / finding["model"]).is_file() and (folder / "reproducer_common.py").is_file()
    assert report.findings()[name].causes[0].split(":")[0] in (folder / "README.md").read_text()
