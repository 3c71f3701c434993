"""``assay mutate`` end to end: real generator, gcc, host runner, Keras reference and sanitizers.

The first test runs the command on acas-reg50 with few inputs and a capped, seeded sample of mutants; the
second uses hand-written C (the ``dir:`` generator) whose memory-safety mutants only the guard words or the
sanitizers can see, since the buffer they overflow never reaches the outputs.
"""

import json
import os
import subprocess
import sys

import pytest

from harness.stages.mutate import report
from harness.stages.mutate import run as mutate

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

STATUSES = {"killed", "survived", "stillborn", "equivalent"}


@pytest.mark.slow
def test_assay_mutate_on_acas_reg50_reports_every_mutant_and_no_false_alarm(tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "harness.cli", "mutate", "--model", "acas-reg50", "--variants", "keras",
               "--inputs", "60", "--seeds", "2", "--max-mutants", "30", "--sanitize", "5", "--out", str(out),
               "--work", str(tmp_path / "work"), "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads((out / "mutation.json").read_text())
    assert data["schema"] == "assay-mutation/1"
    (record,) = data["records"]
    summary, mutants = record["summary"], record["mutants"]
    assert len(mutants) == summary["mutants"] == 30
    assert {m["status"] for m in mutants} <= STATUSES
    assert sum(summary[s] for s in STATUSES) == 30
    assert [a["seed"] for a in record["false_alarms"]] == [0, 1] and summary["false_alarms"] == 0
    assert record["clean"]["sanitizer"] is None and record["clean"]["max_abs_error"] < record["tolerance"]
    for mutant in mutants:
        changed = mutant["diff"].splitlines()[3:]  # after the ---, +++ and @@ lines
        assert any(line.startswith("-") for line in changed) and any(line.startswith("+") for line in changed)
        if mutant["status"] == "survived":
            assert mutant["class"] in mutate.CLASSES
            # every input: through the whole network, or, probably equivalent, up to the mutated layer
            judged = mutant["weak"]["inputs"] if mutant["class"] == mutate.PROBABLY_EQUIVALENT else mutant["inputs_run"]
            assert judged == record["inputs_judged"]  # the uniform inputs, then the other sets
        if mutant["status"] == "killed":
            assert mutant["cause"] and mutant["detected_by"] in mutate.DETECTORS
    assert summary["killed"] > summary["survived"]
    assert record["verdict"] in ("pass", "fail") and (record["verdict"] == "pass") == (record["cause"] is None)
    report = (out / "mutation.md").read_text()
    assert "| acas-reg50 | assay-v2 | keras | 60 (0) | keras | 30 |" in report


SOURCE = """
static float scratch[2];
void dense(const float *input, float *output) {
    for (int j = 0; j < 2; ++j) {
        scratch[j] = input[j];
    }
    output[0] = input[0] * 0.5f + input[1] * 0.25f + input[2] * -0.75f + 0.1f;
    output[1] = input[0] * -1.0f + input[1] * 2.0f + input[2] * 0.125f + -0.2f;
}
"""


def test_memory_safety_mutants_the_oracle_cannot_see_are_killed_by_guards_or_sanitizers(tmp_path,
                                                                                      dense_keras_model):
    code = tmp_path / "code"
    code.mkdir()
    (code / "net.c").write_text(SOURCE)
    (code / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2}))
    settings = mutate.Settings(n_inputs=30, seeds=1, sanitize=5, work_dir=tmp_path / "work")
    (item,) = mutate.plan([dense_keras_model], [f"dir:{code}"], settings).items
    record = mutate.run_item(item, settings, mutate.open_store(tmp_path / "mutation.json"))
    assert record["verdict"] == "fail" and "code mutants killed, below 99%" in record["cause"], record["cause"]
    assert record["clean"]["bounds"] == {"file": "net.c", "violations": [], "checked": 10, "unchecked": 0}
    by_change = {(m["line"], m["description"]): m for m in record["mutants"]}
    for change in ((5, "scratch[j] -> index +1"), (4, "loop bound 2 -> 3")):
        mutant = by_change[change]
        assert mutant["status"] == "killed" and mutant["detected_by"] in ("runner", "sanitizer"), mutant
        assert mutant["cause"].startswith(("guard word", "AddressSanitizer", "UndefinedBehaviorSanitizer"))
    # scratch[j - 1] reads nothing back, but writes before the array: out of bounds too
    assert by_change[(5, "scratch[j] -> index -1")]["status"] == "killed"
    # its assay.json names no data array: code mutants only, and the report says why
    assert not any(mutate.is_weight(m) for m in record["mutants"])
    (written,) = report.write_mutation_report(tmp_path / "mutation.json", tmp_path)
    assert "No weight mutants: the code's manifest names no data array" in written.read_text()
    # deleting the write into scratch changes nothing the code computes: a survivor, reported as not reached
    deleted = by_change[(5, "statement deleted: scratch[j] = input[j];")]
    assert deleted["status"] == "survived" and deleted["class"] == "not_reached"
    assert record["summary"]["code"]["kill_rate"] < 1.0


def _full_run(tmp_path, model: str, variant: str) -> dict:
    """``assay mutate`` with its defaults (1000 inputs, every input set, 10 seeds, every mutant) on ``model``'s
    ``variant``."""
    out = tmp_path / "out"
    command = [sys.executable, "-m", "harness.cli", "mutate", "--model", model, "--variants", variant,
               "--out", str(out), "--work", str(tmp_path / "work"), "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=6 * 3600)
    assert done.returncode in (0, 1), done.stderr
    (record,) = json.loads((out / "mutation.json").read_text())["records"]
    return record


@pytest.mark.slow
@pytest.mark.tor("TOR-SEM-005")
@pytest.mark.parametrize("model, variant", [("lenet5", "keras"), ("lenet5", "onnx"), ("cifarnet", "keras")])
def test_the_oracle_kills_99_percent_of_the_live_code_mutants_with_the_default_inputs(tmp_path, model, variant):
    """Issue 9's target: >= 99 % of the non-equivalent code mutants killed, every detectable weight mutant
    killed, no false alarm over 10 seeds, no equivalence rule refuted (cifarnet: hours). The onnx
    variant of lenet5 keeps its logits in the arena: its softmax's reads one past them need the bounds
    check per tensor region."""
    record = _full_run(tmp_path, model, variant)
    summary = record["summary"]
    assert summary["false_alarms"] == 0 and summary["rules_refuted"] == 0
    assert summary["code"]["kill_rate"] >= 0.99, [m["description"] for m in record["mutants"]
                                                  if m["status"] == "survived" and not mutate.is_weight(m)]
    assert summary["weights"]["detectable_survivors"] == [] and summary["weights"]["undecided_survivors"] == []
    assert record["verdict"] == "pass", record["cause"]
