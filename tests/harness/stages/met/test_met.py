"""Measured execution: per-layer counts add up, timing models price them, ``assay met`` reports them.

The ARM tests use the zoo's smallest models and a few inputs (acas-reg50 on
both targets, lenet5 on the ARM7TDMI for callee attribution).
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from harness import targets
from harness.measurement import cycles
from harness.measurement.options import parse_timing_options
from harness.stages.met import report as met_report
from harness.stages.met import run as met
from harness.errors import ConfigError
from wcet import timing

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

_TOOLS = {"arm-none-eabi-gcc": "gcc-arm-none-eabi", "qemu-arm": "qemu-user", "qemu-system-arm": "qemu-system-arm",
          "gcc": "gcc"}
_MISSING = [f"{tool} ({package})" for tool, package in _TOOLS.items() if shutil.which(tool) is None]
needs_tools = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {', '.join(_MISSING)}; run .ci/setup")


def assay(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("met-work")


def counted(work, model, target, n_inputs):
    settings = cycles.Settings(n_inputs=n_inputs, work_dir=work, timeout=120)
    item = cycles.Item(model, "assay-v2", "keras", target, ())
    counts, code, _ = cycles.count_item(item, settings, "met")
    return counts, code.manifest


def check_sums(counts, figures):
    """Per input: the layers (and the code outside them) add up to the call's total."""
    per_input = [call.instructions() for call in counts.calls]
    assert figures.instructions.sum(axis=1).tolist() == per_input
    for call, row in zip(counts.calls, figures.instructions):
        assert row.tolist() == [call.instructions(bucket) for bucket in range(len(counts.bucket_names))]


@pytest.mark.tor("TOR-MET-002")
@needs_tools
@pytest.mark.arm
@pytest.mark.parametrize("target", ["cortex-m4f", "arm7tdmi"])
def test_acas_reg50_layers_sum_to_the_total_and_models_price_every_instruction(work, target):
    counts, manifest = counted(work, "acas-reg50", target, 4)
    assert counts.bucket_names == ["(outside layers)", *(layer["name"] for layer in manifest["layers"])]
    native = timing.get(targets.get(target).timing)
    trivial = cycles.price(counts, timing.get("trivial"))
    priced = cycles.price(counts, native)
    for figures in (trivial, priced):
        check_sums(counts, figures)
    assert (trivial.cycles == 5 * trivial.instructions).all()
    assert (priced.cycles >= priced.instructions).all()  # no instruction is cheaper than one cycle
    assert (priced.cycles <= 15 * priced.instructions).all()
    totals = priced.instructions.sum(axis=1)
    assert totals.min() <= np.median(totals) <= totals.max()
    # every Dense layer ran; the code outside the layers is the prologue and epilogue only
    assert (priced.instructions[:, 1:] > 0).all()
    assert (priced.instructions[:, 0] < 40).all()
    # only the ReLU comparisons differ between inputs
    assert totals.max() - totals.min() < 0.05 * totals.min()
    record = met.summarise(priced, manifest)
    assert record["instructions"]["min"] <= record["instructions"]["median"] <= record["instructions"]["max"]
    assert [layer["name"] for layer in record["layers"]] == counts.bucket_names
    assert record["per_input"]["cycles"] == priced.cycles.sum(axis=1).tolist()


@pytest.mark.tor("TOR-MET-002")
@needs_tools
@pytest.mark.arm
def test_lenet5_callee_instructions_count_for_the_layer_that_called_them(work):
    counts, manifest = counted(work, "lenet5", "arm7tdmi", 2)
    generated = [counts.code.function(name) for name in manifest["symbols"]["code"]]

    def in_generated(address):
        return any(f.start <= address < f.end for f in generated)

    names = counts.bucket_names
    for call in counts.calls:
        callee = {names[bucket]: sum(c for address, (c, _) in per.items() if not in_generated(address))
                  for bucket, per in call.counts.items()}
        # soft-float helpers and tanhf run for every layer that computes; none is left outside the layers
        for layer in ("conv1", "avgpool1", "conv2", "avgpool2", "dense1", "dense2", "dense3"):
            assert callee[layer] > 0, layer
        assert callee.get("(outside layers)", 0) == 0
        # the convolutions dominate, as they do in the paper's LeNet-5
        assert call.instructions(names.index("conv2")) > call.instructions(names.index("dense1"))
    check_sums(counts, cycles.price(counts, timing.get("arm7tdmi")))


@needs_tools
@pytest.mark.arm
def test_assay_met_writes_met_json_and_table2_and_resumes(work, tmp_path):
    out = tmp_path / "out"
    args = ("met", "--models", "acas-reg50", "--targets", "arm7tdmi,cortex-m4f", "--inputs", "3", "--quiet",
            "--out", str(out), "--work", str(work))
    result = assay(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    records = json.loads((out / "met.json").read_text())["records"]
    assert json.loads((out / "met.json").read_text())["schema"] == met.SCHEMA
    assert sorted((r["variant"], r["target"], r["timing"]) for r in records) == [
        (variant, target, name) for variant in ("keras", "onnx")
        for target, name in (("arm7tdmi", "arm7tdmi"), ("arm7tdmi", "trivial"),
                             ("cortex-m4f", "cortex-m4"), ("cortex-m4f", "trivial"))]
    for record in records:
        assert record["verdict"] == "pass" and record["n_inputs"] == 3 and record["opt"] == "-O0"
        assert len(record["per_input"]["instructions"]) == 3
        assert record["cycles"]["min"] <= record["cycles"]["median"] <= record["cycles"]["max"]
        assert record["provenance"]["flags"][0] == "-O0" and "QEMU" in record["provenance"]["emulator"].upper()
    table = (out / "table2.md").read_text()
    assert "Table 2: measured execution with -O0" in table and "| acas-reg50 |" in table
    assert "| assay-v2 | keras | cortex-m4f | cortex-m4 |" in table and "Per layer: acas-reg50" in table
    stamp = (out / "met.json").stat().st_mtime_ns
    again = assay(*args)
    assert again.returncode == 0 and (out / "met.json").stat().st_mtime_ns == stamp  # nothing recomputed


@pytest.mark.tor("TOR-CLI-001")
def test_assay_met_bad_options_are_one_line_exit_2(tmp_path):
    for args, message in ((("--timing", "nope"), "unknown timing model 'nope'"),
                          (("--targets", "host"), "does not run under QEMU"),
                          (("--timing-option", "arm7tdmi.flash_wait_states=1"), "has no option flash_wait_states")):
        result = assay("met", "--models", "acas-reg50", "--inputs", "1", "--quiet", "--out", str(tmp_path / "o"),
                       "--work", str(tmp_path / "w"), *args)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr


def test_timing_options_parse_per_model():
    assert parse_timing_options(["arm7tdmi.n_wait_states=2", "cortex-m4.refill=1", "arm7tdmi.multiply_m=1"]) == {
        "arm7tdmi": {"n_wait_states": 2, "multiply_m": 1}, "cortex-m4": {"refill": 1}}
    for bad in ("refill=1", "cortex-m4.refill", "cortex-m4.refill=fast"):
        with pytest.raises(ConfigError):
            parse_timing_options([bad])


def test_timing_models_per_target():
    assert cycles.timing_names_for("arm7tdmi", None) == ["trivial", "arm7tdmi"]
    assert cycles.timing_names_for("cortex-m4f", None) == ["trivial", "cortex-m4"]
    assert cycles.timing_names_for("cortex-a15", None) == ["trivial"]
    assert cycles.timing_names_for("cortex-m4f", ["arm7tdmi", "cortex-m4"]) == ["cortex-m4"]


def _record(model, target, timing_name, cycles, instructions, opt="-O0", verdict="pass"):
    record = {"model": model, "generator": "assay-v2", "variant": "keras", "target": target, "opt": opt,
              "timing": timing_name, "n_inputs": 3, "seed": 0, "verdict": verdict, "timing_params": {},
              "provenance": {"flags": [opt, "-g"], "compiler": "gcc 12", "emulator": "qemu 7.2"}}
    if verdict == "pass":
        record.update(cycles={"min": cycles[0], "median": cycles[1], "max": cycles[2]},
                      instructions={"min": instructions, "median": instructions, "max": instructions},
                      layers=[{"name": "dense", "op": "Dense", "instructions": {"median": instructions},
                               "cycles": {"median": cycles[1]}}])
    else:
        record["cause"] = "compile error: boom"
    return record


def test_table2_layout_models_as_columns_rows_per_generator_target_timing():
    records = [_record("acas-reg50", "arm7tdmi", "arm7tdmi", (243195, 243195, 243195), 100000),
               _record("lenet5", "arm7tdmi", "arm7tdmi", (12186378, 12186400, 12190000), 9000000),
               _record("acas-reg50", "cortex-m4f", "cortex-m4", (1, 2, 3), 1),
               _record("lenet5", "cortex-m4f", "cortex-m4", None, None, verdict="error"),
               _record("acas-reg50", "arm7tdmi", "arm7tdmi", (5, 5, 5), 1, opt="-O3")]
    table = met_report.table2(records)
    assert "| generator | variant | target | timing | acas-reg50 | lenet5 |" in table
    thin = "\u2009"
    assert (f"| assay-v2 | keras | arm7tdmi | arm7tdmi | 243{thin}195 | "
            f"12{thin}186{thin}400 (12{thin}186{thin}378 – 12{thin}190{thin}000) |") in table
    assert "| assay-v2 | keras | cortex-m4f | cortex-m4 | 2 (1 – 3) | ERROR |" in table
    assert table.index("Table 2: measured execution with -O0") < table.index("Table 3: measured execution with -O3")
    assert "assay-v2/keras/cortex-m4f/-O0: compile error: boom" in table


@needs_tools
@pytest.mark.arm
def test_met_in_shards_gives_the_unsharded_records_and_keeps_its_shards(work, tmp_path):
    """Per-input counts are independent of the batch: shards joined in order give the same figures."""
    from harness.core.shards import ShardStore

    settings = cycles.Settings(n_inputs=6, work_dir=work, timeout=120)
    item = cycles.Item("acas-reg50", "assay-v2", "keras", "cortex-m4f", ("trivial", "cortex-m4"))
    whole = met.run_item(item, settings, met.open_store(tmp_path / "whole.json"))
    shards = ShardStore(tmp_path / "shards")
    parts = met.run_item(item, settings, met.open_store(tmp_path / "sharded.json"), 4, shards)
    strip = lambda records: [{k: v for k, v in r.items() if k not in ("seconds", "finished_at")} for r in records]
    assert strip(parts) == strip(whole) and whole[0]["verdict"] == met.PASS
    assert len(parts[0]["per_input"]["cycles"]) == 6 and len(shards.held()) == 2
