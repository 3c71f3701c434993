"""The trace check on hand-made traces: each protocol violation is named."""

from __future__ import annotations

from harness.stages.semantic import tracecheck

LAYERS = [{"index": 0, "name": "a", "inputs": [None]}, {"index": 1, "name": "b", "inputs": [None]},
          {"index": 2, "name": "c", "inputs": [0, 1]}]
PARALLEL = {"per_core": [
    {"core": 0, "items": [{"kind": "layer", "event": 0, "name": "a"},
                          {"kind": "read", "event": 1, "src": 1, "dst": 0, "layer": "b"},
                          {"kind": "layer", "event": 2, "name": "c"}]},
    {"core": 1, "items": [{"kind": "layer", "event": 3, "name": "b"},
                          {"kind": "write", "event": 4, "src": 1, "dst": 0, "layer": "b"}]}]}
SCHEDULE = [[{"node": "a", "start": 0, "end": 5}, {"node": "c", "start": 9, "end": 10}],
            [{"node": "b", "start": 0, "end": 5}]]


def trace(stamps: dict[tuple[int, int], int], seqs: dict[int, int] | None = None, run: int = 0) -> list[tuple]:
    """Lines (run, core, event*2+phase, stamp, seq) from {(event, phase): stamp}."""
    core_of = {item["event"]: core["core"] for core in PARALLEL["per_core"] for item in core["items"]}
    return [(run, core_of[event], event * 2 + phase, stamp, (seqs or {}).get(event, 0))
            for (event, phase), stamp in sorted(stamps.items(), key=lambda kv: (core_of[kv[0][0]], kv[0]))]


GOOD = {(0, 0): 0, (0, 1): 1, (3, 0): 2, (3, 1): 3, (4, 0): 4, (4, 1): 5, (1, 0): 6, (1, 1): 7, (2, 0): 8, (2, 1): 9}


def test_a_conforming_trace_passes():
    assert tracecheck.check(PARALLEL, LAYERS, SCHEDULE, trace(GOOD)) == []


def test_a_read_before_its_write_ended_is_named():
    stamps = {**GOOD, (1, 0): 4, (4, 0): 5, (4, 1): 6}  # read starts before the write has ended
    problems = tracecheck.check(PARALLEL, LAYERS, SCHEDULE, trace(stamps))
    assert any("read before its write ended" in line for line in problems)


def test_a_layer_before_its_input_and_bad_sequence_numbers_are_named():
    stamps = {**GOOD, (2, 0): 7, (1, 1): 8}  # c starts before the read ended (stamps out of order)
    problems = tracecheck.check(PARALLEL, LAYERS, SCHEDULE, trace(stamps))
    assert any("c started before reading b from core 1 ended" in line for line in problems)
    problems = tracecheck.check(PARALLEL, LAYERS, SCHEDULE, trace(GOOD, {1: 0, 4: 0}) + trace(
        {key: stamp + 10 for key, stamp in GOOD.items()}, {1: 2, 4: 2}, run=1))
    assert any("not consecutive" in line for line in problems)


def test_missing_events_and_another_schedule_are_named():
    partial = {key: stamp for key, stamp in GOOD.items() if key[0] != 2}
    problems = tracecheck.check(PARALLEL, LAYERS, SCHEDULE, trace(partial))
    assert any("core 0: logged 4 events, not its 6 items" in line for line in problems)
    swapped = [SCHEDULE[1], SCHEDULE[0]]
    assert any("the schedule says" in line for line in tracecheck.check(PARALLEL, LAYERS, swapped, trace(GOOD)))
