"""``assay peers report``: the findings it knows, the reproducer script's verdicts, the C driver, and (marked
``peers`` and ``slow``) the A3 folder reproduced with only acetone-nnet installed."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.stages.peers import report

ROOT = Path(__file__).resolve().parents[4]


def _script():
    """The reproducers' shared part as a module (it imports only numpy and the standard library)."""
    spec = importlib.util.spec_from_file_location("reproducer_common", report.REPRODUCERS / "reproducer_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a3_is_known_with_its_controls_and_causes_located_in_acetone():
    a3 = report.findings()["A3"]
    roles = list(a3.implementations.values())
    assert a3.peer == "acetone-nnet" and roles.count("defective") == 6 and roles.count("control") == 3
    assert all(re.match(r"(templates|generator)/\S+:\d+", cause) for cause in a3.causes[:4])


def test_a_malformed_finding_names_its_entry_and_key(tmp_path, monkeypatch):
    bad = tmp_path / "findings.toml"
    bad.write_text('[X1]\npeer = "acetone-nnet"\nmodel = "lenet5"\ninputs = "ten"\n')
    monkeypatch.setattr(report, "FINDINGS", bad)
    with pytest.raises(ConfigError, match=r"\[X1\] needs inputs as a int"):
        report.findings()
    bad.write_text('[X2]\npeer = "nobody"\nmodel = "m"\ninputs = 1\nsummary = ""\nimplementations = {a = "control"}\n'
                   'causes = []\n')
    with pytest.raises(ConfigError, match=r"\[X2\]: no reproducer script for peer nobody"):
        report.findings()


@pytest.mark.parametrize("actual, crash, start", [
    ([[0.5, 0.25]], None, "ok"),
    ([[0.5, 0.35]], None, "WRONG on 1 of 1 inputs, max |C - expected| 1.0000e-01"),
    ([[np.nan, 0.25]], None, "NaN/Inf on 1 of 1 inputs"),
    (np.zeros((0, 2)), "killed by SIGSEGV", "CRASH (killed by SIGSEGV after 0 of 1 inputs)"),
])
def test_reproducer_verdicts(actual, crash, start):
    expected = np.array([[0.5, 0.25]], np.float32)
    line = _script().verdict(np.asarray(actual, np.float32), expected, crash, atol=1e-5, rtol=5e-6)
    assert line.startswith(start)


@pytest.mark.skipif(not shutil.which("gcc"), reason="gcc not installed")
def test_c_driver_shows_unwritten_outputs_as_nan(tmp_path):
    """A generated entry that writes only its first output: the second stays the NaN the driver put there."""
    (tmp_path / "entry.h").write_text("static void entry(const float *in, float *out) { out[0] = in[0] + in[1]; }\n")
    binary = tmp_path / "run"
    subprocess.run(["gcc", "-std=c99", f"-I{tmp_path}", "-DIN_SIZE=2", "-DOUT_SIZE=2", '-DENTRY_HEADER="entry.h"',
                    "-DENTRY_CALL=entry(input, output)", str(report.REPRODUCERS / "driver.c"), "-lm", "-o",
                    str(binary)], check=True)
    np.array([[1, 2], [3, 4]], "<f4").tofile(tmp_path / "in.bin")
    subprocess.run([str(binary), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"), "2"], check=True)
    out = np.fromfile(tmp_path / "out.bin", "<f4").reshape(2, 2)
    assert out[:, 0].tolist() == [3.0, 7.0] and np.isnan(out[:, 1]).all()


@pytest.mark.peers
@pytest.mark.slow
def test_a3_folder_reproduces_the_defect_with_only_acetone_installed(tmp_path):
    """``assay peers report A3``: the script, run by the peer environment's Python (no Assay there), passes the
    three controls and shows every transposed implementation wrong, NaN or crashing (about 3 minutes)."""
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "peers", "report", "A3", "--out", str(tmp_path),
                           "--work", str(tmp_path / "work")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = tmp_path / "A3"
    results = json.loads((folder / "reproduction.json").read_text())
    for name, result in results.items():
        assert result["verdict"].startswith("ok" if result["role"] == "control" else ("WRONG", "NaN", "CRASH")), name
    assert "A3: REPRODUCED" in (folder / "run.log").read_text()
    assert {"model.h5", "inputs.npy", "expected.npy", "reproduce.py", "driver.c", "README.md", "requirements.txt"} <= {
        path.name for path in folder.iterdir()}
    assert (folder / "c" / "std_gemm_tn" / "inference.c").is_file()
    assert "template_Conv_gemm_tn.c.tpl" in (folder / "README.md").read_text()


def test_an_aidge_readme_names_aidge_s_packages_and_the_reference_of_a_model_given_as_onnx():
    """I6's README: the install line and the release its causes are located in are Aidge's four packages (no
    package is named ``aidge``), the expected outputs ONNX Runtime's (the node case has no Keras model)."""
    pins = {"aidge-backend-cpu": "0.10.1", "aidge-core": "0.10.1", "aidge-export-cpp": "0.10.1",
            "aidge-onnx": "0.10.1", "onnx": "1.23.2"}
    text = report._readme(report.findings()["I6"], "test_conv_with_autopad_same", "model.onnx", pins, "3.11.2",
                          1e-5, 5e-6, "ONNX Runtime")
    assert ("pip install aidge-core==0.10.1 aidge-onnx==0.10.1 aidge-backend-cpu==0.10.1 aidge-export-cpp==0.10.1`"
            in text)
    assert "## Cause in the peer's source (aidge-core 0.10.1, aidge-onnx 0.10.1, aidge-backend-cpu" in text
    assert "`expected.npy` (ONNX Runtime's outputs)" in text and "ONNX's backend node tests" in text
    assert "`aidge_onnx/node_import/onnx_converters/conv.py:137`" in text
