"""Parallel code on host threads: outputs equal the sequential V2 code's bit for bit, plain and with seeded
delays, every trace conforms and replays on the NNEF items' Petri net; removing a flag wait, checking against another
schedule, or a real trace with a read moved before its write or a message left out is caught."""

from __future__ import annotations

import numpy as np
import pytest

from harness.formal import nnef_items, petri
from harness.models import nnef
from harness.runners import host, parallel_host
from harness.stages.semantic import tracecheck

from parallel_support import (BRANCH_A, BRANCH_B, SPLIT_SCHEDULE, TAIL, TWO_MESSAGES, dsh_schedule, load,
                              parallel, sequential, sizes)

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
    nnef.export_onnx(model.file("onnx"), tmp_path / "nnef", model.name)
    (description,) = nnef_items.parse((tmp_path / "nnef" / nnef.GRAPH_FILE).read_text())
    net, groups = petri.schedule_net(description, schedule)
    per_core = code.manifest["parallel"]["per_core"]
    interleavings = set()
    for seed in (None, 3):
        outcome = _run(code, tmp_path / f"build-{seed}", inputs, seed)
        assert outcome.error is None
        assert np.array_equal(outcome.run.outputs.view(np.uint32), expected.view(np.uint32))
        assert _check(code, schedule, outcome) == []
        runs = petri.trace_from_parallel(outcome.trace, per_core, groups)
        assert len(runs) == len(inputs) and all(petri.check_trace(net, events, logged=True).accepted
                                                for events in runs.values())
        interleavings |= {tuple(events) for events in runs.values()}
    assert len(interleavings) > 1  # threads and delays do shake the order, and every order is accepted
    # the same real trace tampered with: a read moved before its write's end, then a message left out
    read = next(item for core in per_core for item in core["items"] if item["kind"] == "read")
    write = next(item for core in per_core for item in core["items"]
                 if item["kind"] == "write" and (item["layer"], item["src"], item["dst"]) ==
                 (read["layer"], read["src"], read["dst"]))
    first = [row for row in outcome.trace if row[0] == 0]
    write_end = next(row[3] for row in first if row[2] == 2 * write["event"] + 1)
    early = [(r, c, w, write_end - 0.5 if w == 2 * read["event"] else stamp, q) for r, c, w, stamp, q in first]
    verdict = petri.check_trace(net, petri.trace_from_parallel(early, per_core, groups)[0], logged=True)
    assert not verdict.accepted and "read before its write ended" in verdict.reason
    lost = [row for row in first if row[2] // 2 not in (read["event"], write["event"])]
    verdict = petri.check_trace(net, petri.trace_from_parallel(lost, per_core, groups)[0], logged=True)
    assert not verdict.accepted and "not enabled, missing" in verdict.reason


def test_a_removed_read_wait_is_caught(split, tmp_path):
    """The reader copies before the data is there and releases the flag the writer waits for: the watchdog
    ends the deadlock and the partial trace shows the read that had no write."""
    model, _, inputs, _ = split
    code = parallel(model, tmp_path / "src", 2, SPLIT_SCHEDULE, omit_wait="read")
    outcome = _run(code, tmp_path / "build", inputs, seed=1, watchdog=2)
    assert outcome.error is not None and outcome.error.startswith("deadlock")
    problems = _check(code, SPLIT_SCHEDULE, outcome)
    assert any("read but never written" in line or "read before its write ended" in line for line in problems)
    # the same broken synchronisation on the NNEF items' Petri net: the read that had no write is rejected
    nnef.export_onnx(model.file("onnx"), tmp_path / "nnef", model.name)
    (description,) = nnef_items.parse((tmp_path / "nnef" / nnef.GRAPH_FILE).read_text())
    net, groups = petri.schedule_net(description, SPLIT_SCHEDULE)
    runs = petri.trace_from_parallel(outcome.trace, code.manifest["parallel"]["per_core"], groups)
    verdicts = [petri.check_trace(net, events, logged=True) for events in runs.values()]
    assert any("read before its write ended" in verdict.reason for verdict in verdicts)


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


def test_one_core_code_logs_a_sequential_trace_the_whole_models_net_accepts(split, tmp_path):
    """The V2 layers on one core, instrumented: a logged sequential trace, replayed on Translation 1 of the
    exported NNEF; the same trace with two dependent layers swapped is rejected."""
    model, _, inputs, expected = split
    order = BRANCH_A + BRANCH_B + TAIL
    schedule = [[{"node": name, "start": 10 * k, "end": 10 * k + 10} for k, name in enumerate(order)]]
    code = parallel(model, tmp_path / "src", 1, schedule)
    outcome = _run(code, tmp_path / "build", inputs[:2])
    assert outcome.error is None and np.array_equal(outcome.run.outputs.view(np.uint32), expected[:2].view(np.uint32))
    nnef.export_onnx(model.file("onnx"), tmp_path / "nnef", model.name)
    (description,) = nnef_items.parse((tmp_path / "nnef" / nnef.GRAPH_FILE).read_text())
    net = petri.translate(description)
    groups = nnef_items.layer_groups(description, order)
    runs = petri.trace_from_parallel(outcome.trace, code.manifest["parallel"]["per_core"], groups)
    assert [petri.check_trace(net, events).accepted for events in runs.values()] == [True, True]
    events = runs[0]
    k = next(i for i, e in enumerate(events) if e.node.startswith("split_a1_avgpool") and e.kind == "start")
    swapped = events[:k - 4] + events[k:k + 2] + events[k - 4:k] + events[k + 2:]  # the pooling before its tanh
    verdict = petri.check_trace(net, swapped)
    assert not verdict.accepted and "not enabled, missing split_a1_conv_tanh" in verdict.reason
