"""``assay mutate`` on a quantized (int8) model (issue 42): its mutants are judged as the semantic stage judges its
C, bit for bit against the integer arbiter under the rule the code's manifest declares, whatever ``--tolerance``
says; the integer constants (requantization shifts and multipliers, zero points, int8 weights, int32 biases) have
mutant classes of their own (docs/mutation.md, "Quantized models")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import int8_models_support

CLASSES = ("shift", "zero-point", "multiplier-1%", "multiplier-1", "int-bias", "int-weight")


def _assay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=1200)


def _mutate(model: Path, tmp_path: Path, generator: str, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "out"
    done = _assay("mutate", "--models", str(model), "--generators", generator, "--inputs", "60", "--seeds", "2",
                  "--set-inputs", "10", "--sanitize", "4", "--workers", "1", "--quiet", "--out", str(out),
                  "--work", str(tmp_path / "work"), *options)
    path = out / "mutation.json"
    return done, json.loads(path.read_text())["records"][0] if path.exists() else {}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("quantized")
    return int8_models_support.quantized(int8_models_support.float_cnn(folder / "cnn.onnx"), folder / "cnn-q.onnx",
                                         "qoperator")


@pytest.mark.slow  # 27 s: every mutant of the CNN; the default run keeps the rule's test below and the rules' units
def test_a_quantized_cnn_is_mutated_and_judged_bit_for_bit(model, tmp_path):
    """A sample of every class: the clean code passes the integer rule on every seed, each integer class is made
    and named, the requantization shifts and zero points are all killed, and the survivors judged by detectability
    are decided by the integer search."""
    done, record = _mutate(model, tmp_path, "assay-v2", "--tolerance", "derived", "--weights-per-array", "1")
    assert record, done.stderr
    assert record["tolerance_rule"]["rule"] == "integer-fixed-point" and record["tolerance_rule"]["bound"] == 0.0
    assert record["summary"]["false_alarms"] == 0 and {a["rule"] for a in record["false_alarms"]} == \
        {"integer-fixed-point"}
    by_operator = record["summary"]["by_operator"]
    assert set(CLASSES) <= set(by_operator), sorted(by_operator)
    for operator in ("shift", "zero-point"):
        counts = by_operator[operator]
        assert counts["killed"] == sum(counts.values()) > 0, (operator, counts)
    integer = [m for m in record["mutants"] if m["operator"] in CLASSES]
    assert all(m["rule"] == "integer-fixed-point" for m in integer)
    for mutant in integer:  # judged by detectability: decided, a survivor's with the points searched
        if mutant["operator"] in ("shift", "zero-point"):
            assert "detectability" not in mutant
        else:
            found = mutant["detectability"]
            assert found["decided"] and (mutant["status"] == "killed" or found["inputs_searched"] > 4000), mutant
    assert {m["class"] for m in record["mutants"] if m["status"] == "survived"} <= {"not_reached"}
    report = (tmp_path / "out" / "mutation.md").read_text()
    assert "bit for bit against the integer arbiter" in report and "| multiplier-1 |" in report


@pytest.mark.slow  # a measurement (about 30 s): not in the default run
def test_the_oracle_kills_99_percent_of_the_live_code_mutants_of_a_quantized_cnn(model, tmp_path):
    """Issue 42: the integer idioms no input can tell apart (a padding test whose index never passes its bound, the
    rounding of a negative product under a fused ReLU's clamp, a wrap modulo 256, an arithmetic shift's two forms)
    are proven equivalent by rules, and the writes past a layer's int8 output are caught by the per-tensor bounds
    check: every other live code mutant must be killed."""
    done, record = _mutate(model, tmp_path, "assay-v2", "--weights-per-array", "1")
    assert record["summary"]["code"]["kill_rate"] >= 0.99, done.stderr
    assert record["summary"]["rules_refuted"] == 0 and record["summary"]["detected_by"]["bounds"] >= 2


def test_the_clean_code_fails_a_wrong_declared_rule(model, tmp_path):
    """The integer rule is the one the code declares: the same C declaring ONNX Runtime's float32 requantization
    is 1 LSB off that rule's arbiter on some input, so its clean code is a false alarm and the item an error."""
    code = tmp_path / "code"
    done = _assay("generate", "--model", str(model), "--generator", "assay-v2", "--out", str(code))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((code / "manifest.json").read_text())
    manifest["quantization"]["rule"] = "onnxruntime"
    (code / "manifest.json").write_text(json.dumps(manifest))
    done, record = _mutate(model, tmp_path / "m", f"dir:{code}", "--inputs", "300", "--max-mutants", "4")
    assert record["verdict"] == "error", record
    assert "does not pass the integer-onnxruntime rule" in record["cause"]
