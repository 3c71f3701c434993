"""Parallel code on host threads: outputs equal the sequential V2 code's bit for bit, plain and with seeded
delays, every trace conforms; removing a flag wait or checking against another schedule is caught."""

from __future__ import annotations

import numpy as np
import pytest

from harness.runners import host, parallel_host
from harness.stages.semantic import tracecheck

from parallel_support import SPLIT_SCHEDULE, TWO_MESSAGES, dsh_schedule, load, parallel, sequential, sizes

N = 12


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    model = load("lenet5-split", base / "zoo-cache")
    work = tmp_path_factory.mktemp("split")
    seq = sequential(model, work / "seq")
    inputs = np.random.default_rng(1).random((N, sizes(model)), dtype=np.float32)
    expected = host.run(host.build(seq, work / "seq-build"), inputs).outputs
    return model, work, inputs, expected


def _run(code, build_dir, inputs, seed=None, watchdog=10):
    built = parallel_host.build(code, build_dir, delays=seed is not None)
    return parallel_host.run(built, inputs, timeout=120, delay_seed=seed, watchdog=watchdog)


def _check(code, schedule, outcome):
    return tracecheck.check(code.manifest["parallel"], code.manifest["layers"], schedule, outcome.trace)


@pytest.mark.parametrize("schedule", [SPLIT_SCHEDULE, TWO_MESSAGES], ids=["one-message", "two-messages"])
def test_threads_equal_sequential_bits_with_and_without_delays(split, schedule, tmp_path):
    model, _, inputs, expected = split
    code = parallel(model, tmp_path / "src", 2, schedule)
    for seed in (None, 1, 2):
        outcome = _run(code, tmp_path / f"build-{seed}", inputs, seed)
        assert outcome.error is None
        assert np.array_equal(outcome.run.outputs.view(np.uint32), expected.view(np.uint32))
        items = sum(len(core["items"]) for core in code.manifest["parallel"]["per_core"])
        assert len(outcome.trace) == 2 * items * N
        assert _check(code, schedule, outcome) == []


def test_inception_on_four_cores(tmp_path_factory, tmp_path):
    model = load("inception-mini", tmp_path_factory.getbasetemp() / "zoo-cache")
    seq = sequential(model, tmp_path / "seq")
    schedule = dsh_schedule(seq, 4)
    assert sum(1 for core in schedule if core) == 4
    code = parallel(model, tmp_path / "par", 4, schedule)
    assert len(code.manifest["parallel"]["channels"]) >= 6
    inputs = np.random.default_rng(2).random((6, sizes(model)), dtype=np.float32)
    expected = host.run(host.build(seq, tmp_path / "seq-build"), inputs).outputs
    for seed in (None, 3):
        outcome = _run(code, tmp_path / f"build-{seed}", inputs, seed)
        assert outcome.error is None
        assert np.array_equal(outcome.run.outputs.view(np.uint32), expected.view(np.uint32))
        assert _check(code, schedule, outcome) == []


def test_a_removed_read_wait_is_caught(split, tmp_path):
    """The reader copies before the data is there and releases the flag the writer waits for: the watchdog
    ends the deadlock and the partial trace shows the read that had no write."""
    model, _, inputs, _ = split
    code = parallel(model, tmp_path / "src", 2, SPLIT_SCHEDULE, omit_wait="read")
    outcome = _run(code, tmp_path / "build", inputs, seed=1, watchdog=2)
    assert outcome.error is not None and outcome.error.startswith("deadlock")
    problems = _check(code, SPLIT_SCHEDULE, outcome)
    assert any("read but never written" in line or "read before its write ended" in line for line in problems)


def test_a_removed_write_wait_is_caught(split, tmp_path):
    """The writer overwrites message 0 with message 1 before core 0 (delayed) read it."""
    model, _, inputs, _ = split
    code = parallel(model, tmp_path / "src", 2, TWO_MESSAGES, omit_wait="write")
    caught = []
    for seed in range(1, 6):
        outcome = _run(code, tmp_path / f"build-{seed}", inputs, seed=seed, watchdog=2)
        problems = _check(code, TWO_MESSAGES, outcome)
        caught.append(outcome.error is not None and any("overwrite" in line for line in problems))
        if caught[-1]:
            break
    assert any(caught)


def test_a_trace_of_another_schedule_is_refused(split, tmp_path):
    model, _, inputs, _ = split
    code = parallel(model, tmp_path / "src", 2, SPLIT_SCHEDULE)
    outcome = _run(code, tmp_path / "build", inputs[:2])
    assert _check(code, SPLIT_SCHEDULE, outcome) == []
    problems = _check(code, TWO_MESSAGES, outcome)
    assert any("the schedule says" in line for line in problems)
