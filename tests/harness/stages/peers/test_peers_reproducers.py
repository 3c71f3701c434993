"""``assay peers report`` for the findings beyond A3: each folder's script, run by the peer environment's own
Python (no Assay there, in the sandbox), shows the defect (marked ``peers`` and ``slow``: each starts the peer's
Keras or Aidge), and the parts of the scripts that need no peer."""

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

from harness.models import zoo
from harness.stages.peers import report

ROOT = Path(__file__).resolve().parents[4]
# What each finding's folder must show: the verdict each implementation starts with.
SHOWS = {
    "A7": {"default": "WRONG"},
    "A11": {"6loops": "ok", "std_gemm_nn": "WRONG", "indirect_gemm_nn": "WRONG"},
    "E6": {"loadable": "WRONG"},
    "E7": {"inline": "NOT GENERATED (ValueError: invalid literal for int()"},
    "I2": {"dformat": "NOT GENERATED (RuntimeError: aidge_core.export_utils.adapt_graph.NoImplError: No "
                      "implementation found for node flatten1_flatten[Flatten]"},
    "I3": {"dformat": "WRONG"},
    "I4": {"dformat": "ok", "no-dformat": "NaN/Inf on 100 of 100"},
    "I5": {"twice-same-hashseed": "ok",
           "twice-other-hashseed": "REJECTED (two exports, PYTHONHASHSEED 1 and 2, differ: "},
    "I6": {"dformat": "REJECTED (the export's output _2_Transpose_1_output_0 has dims [1, 1, 2, 2], 9 values"},
}


def _script(name, monkeypatch):
    """A reproducer script as a module, imported as the folder's ``reproduce.py`` imports it (the scripts beside
    it on the path)."""
    monkeypatch.syspath_prepend(str(report.REPRODUCERS))
    spec = importlib.util.spec_from_file_location(name, report.REPRODUCERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        assert finding.model.startswith((report.CASE, report.NODE)) or finding.model in zoo.names()
        assert finding.peer in report.MODEL_FILES and "defective" in finding.implementations.values()
        assert all(re.match(r"[\w/.]+\.(py|tpl|jinja):\d+", cause) for cause in finding.causes), finding.causes


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


def test_a_rejected_control_is_not_the_defect_and_a_rejected_defective_one_is(tmp_path):
    """``Rejected`` (the script's own check of the generated code: I5's bytes, I6's shape) is the verdict
    "REJECTED (why)"; only a defective implementation's counts as the reproduction."""
    common = _common()
    np.save(tmp_path / "inputs.npy", np.zeros((1, 1), np.float32))
    np.save(tmp_path / "expected.npy", np.zeros((1, 1), np.float32))

    def make(finding, implementation):
        raise common.Rejected(f"{implementation} differs")

    for role, status in (("control", 0), ("defective", 1)):
        (tmp_path / "finding.json").write_text(json.dumps({
            "finding": "T", "model": "m", "implementations": {"twice": role}, "output_size": 1, "atol": 1e-5,
            "rtol": 0.0}))
        assert common.main(str(tmp_path), lambda finding, inputs: np.zeros((1, 1)), make) == status
        verdict = json.loads((tmp_path / "reproduction.json").read_text())["twice"]["verdict"]
        assert verdict == "REJECTED (twice differs)"


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("g++")), reason="gcc or g++ not installed")
def test_cxx_sources_are_compiled_by_gxx_and_linked_with_the_c_driver(tmp_path):
    """A peer's C++ (Aidge's): a ``.cpp`` whose entry uses the C++ library, compiled by g++, called from
    ``driver.c`` through a C header, computes on the host what it says."""
    source = tmp_path / "net"
    (source / "src").mkdir(parents=True)
    (source / "net.h").write_text('#ifdef __cplusplus\nextern "C" {\n#endif\n'
                                  "void net(const float *in, float *out);\n"
                                  "#ifdef __cplusplus\n}\n#endif\n")
    (source / "src" / "net.cpp").write_text('#include <algorithm>\n#include "net.h"\n'
                                            "void net(const float *in, float *out) "
                                            "{ out[0] = std::max(in[0], in[1]); }\n")
    common = _common()
    finding = {"input_size": 2, "output_size": 1}
    binary, command = common.build(str(report.REPRODUCERS), finding, str(source), [str(source / "src" / "net.cpp")],
                                   "net.h", "net(input, output)")
    assert command.startswith("g++ ") and " -lstdc++ " in command
    outputs, crash = common.run(str(tmp_path), binary, np.array([[1, 2], [4, 3]], np.float32), 1)
    assert crash is None and outputs.ravel().tolist() == [2.0, 4.0]


def test_aidge_script_names_the_first_file_and_line_two_exports_differ_in(tmp_path, monkeypatch):
    """I5's check: two export folders the same bytes -> None; an ``#include`` order that differs -> that file
    and line."""
    aidge = _script("aidge", monkeypatch)
    for name, lines in (("one", ["a", '#include "x.h"', '#include "y.h"']),
                        ("other", ["a", '#include "y.h"', '#include "x.h"'])):
        (tmp_path / name / "src").mkdir(parents=True)
        (tmp_path / name / "src" / "forward.cpp").write_text("\n".join(lines) + "\n")
        (tmp_path / name / "same.h").write_text("same\n")
    shutil.copytree(tmp_path / "one", tmp_path / "copy")
    assert aidge._first_difference(str(tmp_path / "one"), str(tmp_path / "copy")) is None
    found = aidge._first_difference(str(tmp_path / "one"), str(tmp_path / "other"))
    assert found.endswith("one/src/forward.cpp line 2: '#include \"x.h\"'"), found


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
