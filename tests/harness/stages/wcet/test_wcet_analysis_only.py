"""The WCET stage on an analysis-only target (``not_runnable`` in its profile, cortex-m4f-big): the code is
built and bounded, never run, and the record says ``not measured`` with the profile's reason instead of
failing; the command's exit status counts it as no failure."""

import shutil

import pytest

from harness.measurement import cycles
from harness.stages.wcet import run as wcetrun
from harness.stages.wcet.report import layer_tables, table4

pytestmark = [pytest.mark.arm,
              pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"),
                                 reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")]


def test_a_target_no_emulator_can_run_is_bounded_and_not_measured(dense_keras_model, loop_dense_dir, tmp_path):
    settings = wcetrun.Settings(n_inputs=3, work_dir=tmp_path / "work")
    (item,) = cycles.plan([dense_keras_model], [loop_dense_dir("literal")], ["cortex-m4f-big"], ["cortex-m4"],
                          settings).items
    (record,) = wcetrun.run_item(item, settings, wcetrun.open_store(tmp_path / "wcet.json"))
    assert record["verdict"] == "not measured", record["cause"]
    assert record["cause"].startswith("target cortex-m4f-big is not runnable (analysis only): no emulated board")
    assert record["wcet_cycles"] > 0 and record["max_measured_cycles"] is None and record["tightness"] is None
    assert "emulator_s" not in record["seconds"] and "emulator" not in record["provenance"]  # QEMU never ran
    table = table4([record])
    assert "(not measured)" in table and "Not measured, cortex-m4f-big: target cortex-m4f-big is not" in table
    assert "## Failures and errors" not in table and "under QEMU with the counting plugin" not in table
    assert "| **Total** |" in layer_tables([record]) and "not measured" in layer_tables([record])
