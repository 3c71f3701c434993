"""Parallel code on four bare-metal Cortex-A15 cores under qemu-system-arm (cortex-a15x4): cores started by
PSCI, outputs equal the sequential V2 code's on the same target bit for bit, traces conform with and without
delays, and a removed read wait is caught (the emulator never finishes: no watchdog on the target)."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from harness import targets
from harness.runners import qemu_smp
from harness.stages.semantic import tracecheck

from parallel_support import SPLIT_SCHEDULE, dsh_schedule, load, parallel, sequential, sizes

pytestmark = [pytest.mark.arm,
              pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                 reason="needs qemu-system-arm and arm-none-eabi-gcc (.ci/setup)")]


@pytest.fixture(scope="module")
def profile():
    return targets.get("cortex-a15x4")


def test_profile_emulates_four_cores(profile):
    assert profile.kind == "qemu-smp" and qemu_smp.emulated_cores(profile) == 4


@pytest.mark.parametrize("name", ["lenet5-split", "inception-mini"])
def test_smp_equals_sequential_bits_and_traces_conform(name, profile, tmp_path_factory, tmp_path):
    model = load(name, tmp_path_factory.getbasetemp() / "zoo-cache")
    seq = sequential(model, tmp_path / "seq")
    schedule = SPLIT_SCHEDULE if name == "lenet5-split" else dsh_schedule(seq, 4)
    code = parallel(model, tmp_path / "par", 2 if name == "lenet5-split" else 4, schedule)
    inputs = np.random.default_rng(3).random((4, sizes(model)), dtype=np.float32)
    expected = qemu_smp.run(qemu_smp.build(seq, tmp_path / "seq-build", profile), inputs, 120, trace=False)
    assert expected.error is None
    for seed in (None, 5):
        built = qemu_smp.build(code, tmp_path / f"build-{seed}", profile, delays=seed is not None)
        outcome = qemu_smp.run(built, inputs, 180, delay_seed=seed)
        assert outcome.error is None
        assert np.array_equal(outcome.run.outputs.view(np.uint32), expected.run.outputs.view(np.uint32))
        assert outcome.trace
        assert tracecheck.check(code.manifest["parallel"], code.manifest["layers"], schedule, outcome.trace) == []


def test_a_removed_read_wait_hangs_and_is_reported(profile, tmp_path_factory, tmp_path):
    """Without its wait the reader hangs only if it runs before the writer, which the seeded delays arrange
    in emulated time; with one host thread per vCPU (QEMU's default) the host's scheduler can still let the
    writer go first on a loaded machine, so the vCPUs take turns on one host thread here."""
    model = load("lenet5-split", tmp_path_factory.getbasetemp() / "zoo-cache")
    code = parallel(model, tmp_path / "par", 2, SPLIT_SCHEDULE, omit_wait="read")
    one_thread = dataclasses.replace(profile, emulator_args=(*profile.emulator_args, "-accel", "tcg,thread=single"))
    built = qemu_smp.build(code, tmp_path / "build", one_thread, delays=True)
    inputs = np.random.default_rng(3).random((4, sizes(model)), dtype=np.float32)
    outcome = qemu_smp.run(built, inputs, 15, delay_seed=1)
    assert outcome.run is None and "timed out" in outcome.error
