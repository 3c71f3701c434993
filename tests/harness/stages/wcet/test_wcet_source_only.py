"""The WCET stage on another tool's code (no manifest loop bounds): bounds from the C source alone, and a loop
the source does not bound is an ``unbounded`` finding with the measured cycles, not a campaign failure."""

import shutil

import pytest

from harness.measurement import cycles
from harness.stages.wcet import run as wcetrun
from harness.stages.wcet.report import table4

pytestmark = [pytest.mark.arm,
              pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"),
                                 reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")]


def run(model: str, generator: str, tmp_path) -> list[dict]:
    settings = wcetrun.Settings(n_inputs=3, work_dir=tmp_path / "work")
    (item,) = cycles.plan([model], [generator], ["cortex-m4f"], ["cortex-m4"], settings).items
    return wcetrun.run_item(item, settings, wcetrun.open_store(tmp_path / "wcet.json"))


def test_literal_loops_are_bounded_from_the_source(dense_keras_model, loop_dense_dir, tmp_path):
    (record,) = run(dense_keras_model, loop_dense_dir("literal"), tmp_path)
    assert record["verdict"] == "pass", record["cause"]
    assert record["wcet_cycles"] >= record["max_measured_cycles"] > 0
    assert "source" in open(record["flow_facts"]["f4"]).read()  # each bound says it came from the C alone
    assert record["binary_bounds"] == []  # none from the machine code


def test_a_data_dependent_loop_is_an_unbounded_finding(dense_keras_model, loop_dense_dir, tmp_path):
    (record,) = run(dense_keras_model, loop_dense_dir("dynamic", n_inputs="n_in"), tmp_path)
    assert record["verdict"] == "unbounded" and record.get("wcet_cycles") is None
    (loop,) = record["unbounded_loops"]
    assert loop.startswith("net.c:10 in dense:") and "limit is not an integer literal" in loop
    assert record["max_measured_cycles"] > 0
    table = table4([record])
    assert "UNBOUNDED (1 loop;" in table and "## Loops Assay cannot bound" in table
    assert "1 loop(s) with data-dependent bounds" in table and "## Failures and errors" not in table
