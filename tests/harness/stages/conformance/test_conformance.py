"""``assay conformance``: verdicts from semantic records, the matrix report on hand-made records, and a small
real run end to end (our generator on the dense and Keras ``same`` convolution cases)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.stages.conformance import run
from harness.stages.conformance.report import counts, write_conformance_report

WORKTREE = Path(__file__).resolve().parents[4]


def _record(model: str, variant: str, reference: str, verdict: str, error: float | None = None, cause=None,
            generator: str = "g") -> dict:
    return {"model": model, "generator": generator, "variant": variant, "reference": reference, "verdict": verdict,
            "max_abs_error": error, "cause": cause, "tolerance": 1e-5, "rtol": 5e-6}


FILES = {"a": Path("w/a.keras"), "b": Path("w/b.keras"), "c": Path("w/c.keras"), "d": Path("w/d.keras")}


def test_verdict_of_a_case_combines_its_references():
    records = [_record("w/a.keras", "x", "keras", "pass", 1e-7), _record("w/a.keras", "x", "onnxruntime", "fail",
                                                                        0.2, "max error 0.2 > tolerance"),
               _record("w/b.keras", "x", "keras", "error", cause="SIGSEGV"),
               _record("w/b.keras", "x", "onnxruntime", "error", cause="SIGSEGV"),
               _record("w/c.keras", "-", "keras", "error", cause="cannot load"),
               _record("other.keras", "x", "keras", "pass", 0.0),  # not a case of this run
               _record("w/a.keras", "x", "keras", "fail", 1.0, generator="h")]  # another generator
    results = {(r["case"], r["variant"]): r for r in run.verdicts(records, FILES, "g")}
    assert set(results) == {("a", "x"), ("b", "x"), ("c", "-"), ("d", "-")}
    assert results["a", "x"]["verdict"] == "fail" and results["a", "x"]["max_abs_error"] == 0.2
    assert results["a", "x"]["cause"] == "vs onnxruntime: max error 0.2 > tolerance"
    assert results["b", "x"]["verdict"] == "error" and results["b", "x"]["cause"] == "SIGSEGV"
    assert results["c", "-"]["verdict"] == "error"
    assert results["d", "-"]["verdict"] == "not supported" and "no variant" in results["d", "-"]["cause"]
    both_pass = run.combine("a", "g", "x", [_record("a", "x", "keras", "pass", 1e-7),
                                            _record("a", "x", "onnxruntime", "pass", 3e-7)])
    assert both_pass["verdict"] == "pass" and both_pass["max_abs_error"] == 3e-7 and both_pass["cause"] is None


def test_matrix_report_from_hand_made_results(tmp_path):
    results = [
        {"case": "a", "generator": "g", "variant": "x", "verdict": "pass", "max_abs_error": 1.5e-7, "cause": None},
        {"case": "a", "generator": "g", "variant": "y", "verdict": "fail", "max_abs_error": 0.13,
         "cause": "vs keras: too far", "reproducer": {"model": "repro/a.keras", "command": "assay semantic ..."}},
        {"case": "b", "generator": "g", "variant": "x", "verdict": "not supported", "max_abs_error": None,
         "cause": "layer 'c' (Conv2D) is not supported"},
        {"case": "c", "generator": "g", "variant": "-", "verdict": "error", "max_abs_error": None,
         "cause": "cannot load"},
        {"case": "a", "generator": "h", "variant": "z", "verdict": "error", "max_abs_error": None, "cause": "SIGSEGV"},
    ]
    document = {"schema": run.SCHEMA, "references": ["keras", "onnxruntime"], "n_inputs": 10, "seed": 0,
                "cases": [{"name": n, "checks": f"checks {n}"} for n in "abc"], "results": results}
    (tmp_path / run.FILE_NAME).write_text(json.dumps(document))
    [path] = write_conformance_report(tmp_path / run.FILE_NAME, tmp_path)
    text = path.read_text()
    assert "| case | checks | g (x) | g (y) | h (z) |" in text
    assert "| `a` | checks a | pass 1.5e-07 | **FAIL** 1.3e-01 | **ERROR** [1] |" in text
    assert "| `b` | checks b | N/S [2] | · | · |" in text
    assert "| `c` | checks c | **ERROR** [3] | **ERROR** [3] | · |" in text  # unloaded: every column of g
    assert "1. SIGSEGV" in text and "2. layer 'c' (Conv2D) is not supported" in text and "3. cannot load" in text
    assert "`a` on g (y): fail: `assay semantic ...`" in text
    assert counts(results)["g (x)"] == {"pass": 1, "fail": 0, "error": 1, "not supported": 1}
    assert "| g (y) | 2 | 0 | 1 | 1 | 0 |" in text


@pytest.mark.slow
def test_small_suite_end_to_end(tmp_path):
    """Our generator on the dense and Keras-same convolution cases: all pass with errors of float32 size."""
    out = tmp_path / "out"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness.cli", "conformance", "--generators", "assay-v2", "--cases",
                           "dense*,conv_same*", "--inputs", "10", "--out", str(out), "--work", str(tmp_path / "w"),
                           "--quiet"], cwd=WORKTREE, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads((out / run.FILE_NAME).read_text())
    assert document["schema"] == run.SCHEMA
    assert set(document["provenance"]) == {"tools", "configuration", "assay", "isolation"}
    names = [case["name"] for case in document["cases"]]
    assert names[:4] == ["dense", "dense_nobias", "dense_deep", "dense_single_in"] and len(names) == 13
    assert all(Path(case["file"]).is_file() for case in document["cases"])
    assert {(r["case"], r["variant"]) for r in document["results"]} == {(n, v) for n in names
                                                                        for v in ("keras", "onnx")}
    assert all(r["verdict"] == "pass" and 0 <= r["max_abs_error"] < 1e-5 for r in document["results"])
    assert "assay-v2 (keras): 13 pass, 0 fail, 0 error, 0 not supported" in done.stdout
    assert "| `conv_same_k2_s1` |" in (out / "conformance.md").read_text()
    assert not (out / run.REPRO).exists()
    print(f"conformance of 13 cases x 2 variants, cold: {seconds:.0f} s")


def test_unknown_generator_and_pattern_are_one_line_exit_2(tmp_path):
    for arguments, message in ((["--generators", "nope"], "unknown generator 'nope'"),
                               (["--cases", "zzz*"], "no conformance case matches 'zzz*'")):
        done = subprocess.run([sys.executable, "-m", "harness.cli", "conformance", *arguments, "--out",
                               str(tmp_path), "--work", str(tmp_path / "w")], cwd=WORKTREE, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.slow
@pytest.mark.peers
def test_peers_on_dense_cases_failures_come_with_reproducers(tmp_path):
    """emlearn and keras2c on two dense cases: emlearn passes the two-layer case and returns NaN on the
    one-layer case (its runtime refuses fewer than two layers without writing outputs, docs/peers.md E3): an
    error with its model copied and its command; keras2c takes both (the layer names are handed over as C
    identifiers) and writes C that cannot be built from PyPI (K2): errors saying so."""
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "conformance", "--generators",
                           "emlearn:loadable,keras2c:stack", "--cases", "dense,dense_deep", "--inputs", "10",
                           "--out", str(out), "--work", str(tmp_path / "w"), "--quiet"], cwd=WORKTREE,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 1, done.stdout + done.stderr
    results = json.loads((out / run.FILE_NAME).read_text())["results"]
    emlearn = {r["case"]: r for r in results if r["generator"] == "emlearn"}
    keras2c = [r for r in results if r["generator"] == "keras2c"]
    assert (emlearn["dense"]["verdict"], emlearn["dense_deep"]["verdict"]) == ("error", "pass")
    assert "NaN" in emlearn["dense"]["cause"]
    assert Path(emlearn["dense"]["reproducer"]["model"]).is_file()
    command = emlearn["dense"]["reproducer"]["command"]
    assert command.startswith("assay semantic --models ") and "--generators emlearn " in command
    assert [r["verdict"] for r in keras2c] == ["error", "error"]
    assert all("ships no C backend" in r["cause"] for r in keras2c)