"""The observed trace of parallel code checked against its schedule and the channel protocol (§5.2).

The generated code logs, per core, a start and an end event for every layer
and operator, stamped from one atomic counter shared by the cores; an
operator's start is logged after its flag wait and its end before its flag
store, so the stamps order what really happened (docs/manifest.md,
``parallel``). Per inference run, ``check`` verifies:

- completeness: each core logged exactly its items (the manifest's
  ``parallel.per_core``), in program order, start before end;
- conformance: each core ran the layers the schedule gives it, in the
  schedule's order;
- precedence: every layer instance starts after the end of each parent's
  instance it takes data from (an earlier one on its core, or the remote one
  through a Reading operator that ended before the layer started);
- the channel protocol: on each channel, writes and reads carry consecutive
  sequence numbers in stamp order, the k-th read carries the k-th write's
  number, no read starts before its write ended, and no write starts before
  the previous message's read ended (no overwrite before the read).

Each violation is one line; ``MAX_LINES`` of them are kept.
"""

from __future__ import annotations

from collections import defaultdict

MAX_LINES = 20


def _schedule_order(schedule: list[list[dict]]) -> list[list[str]]:
    return [[task["node"] for task in sorted(tasks, key=lambda t: (t["start"], t["end"])) if task["node"] != "(sink)"]
            for tasks in schedule]


def check(parallel: dict, layers: list[dict], schedule: list[list[dict]], trace: list[tuple[int, ...]]) -> list[str]:
    """Violations (one line each) of the trace ``(run, core, event*2+phase, stamp, seq)`` lines; [] when it conforms."""
    problems: list[str] = []
    items = {item["event"]: (core["core"], item) for core in parallel["per_core"] for item in core["items"]}
    names = {layer["index"]: layer["name"] for layer in layers}
    parents = {layer["name"]: [names[i] for i in layer["inputs"] if i is not None] for layer in layers}
    expected = _schedule_order(schedule)
    by_run: dict[int, dict[int, list[tuple[int, int, int, int]]]] = defaultdict(lambda: defaultdict(list))
    for run, core, word, stamp, seq in trace:
        by_run[run][core].append((word // 2, word % 2, stamp, seq))
    channel_state: dict[tuple[int, int], dict[str, int]] = {}
    for run in sorted(by_run):
        problems += _check_run(run, by_run[run], parallel, items, parents, expected, channel_state)
        if len(problems) >= MAX_LINES:
            break
    return problems[:MAX_LINES]


def _check_run(run, cores, parallel, items, parents, expected, channel_state) -> list[str]:
    problems: list[str] = []
    start: dict[int, tuple[int, int]] = {}  # event -> (stamp, seq)
    end: dict[int, tuple[int, int]] = {}
    for record in parallel["per_core"]:
        core = record["core"]
        want = [(item["event"], phase) for item in record["items"] for phase in (0, 1)]
        got = [(event, phase) for event, phase, _, _ in cores.get(core, [])]
        if got != want:
            problems.append(f"run {run}, core {core}: logged {len(got)} events, not its {len(want)} items in "
                            f"program order (first difference at event {_first_difference(got, want)})")
        for event, phase, stamp, seq in cores.get(core, []):
            (end if phase else start)[event] = (stamp, seq)
        ran = [item["name"] for item in record["items"] if item["kind"] == "layer"]
        scheduled = expected[core] if core < len(expected) else []
        if ran != scheduled:
            problems.append(f"run {run}, core {core}: ran layers {_short(ran)}, the schedule says {_short(scheduled)}")
    # a partial run (a hang) is checked on the events it logged: only pairs seen in full are compared

    for record in parallel["per_core"]:
        core, done, received = record["core"], {}, {}
        for item in record["items"]:
            event = item["event"]
            if item["kind"] == "read":
                received[item["layer"]] = item
            if item["kind"] != "layer":
                continue
            if event not in start:
                break  # the core never got here
            for parent in parents.get(item["name"], []):
                if parent in done:
                    if end[done[parent]][0] >= start[event][0]:
                        problems.append(f"run {run}, core {core}: {item['name']} started before its parent "
                                        f"{parent} ended on the same core")
                elif parent in received:
                    read = received[parent]
                    if read["event"] not in end or end[read["event"]][0] >= start[event][0]:
                        problems.append(f"run {run}, core {core}: {item['name']} started before reading "
                                        f"{parent} from core {read['src']} ended")
                else:
                    problems.append(f"run {run}, core {core}: {item['name']} has no input from {parent} "
                                    "(neither computed before on its core nor read)")
            done[item["name"]] = event

    channels: dict[tuple[int, int], dict[str, list]] = defaultdict(lambda: {"write": [], "read": []})
    for event, (core, item) in items.items():
        if item["kind"] in ("write", "read") and event in start and event in end:
            channels[(item["src"], item["dst"])][item["kind"]].append((start[event], end[event], item))
    for (src, dst), sides in sorted(channels.items()):
        name = f"run {run}, channel {src}->{dst}"
        writes = sorted(sides["write"], key=lambda e: e[0][0])
        reads = sorted(sides["read"], key=lambda e: e[0][0])
        state = channel_state.setdefault((src, dst), {})
        for kind, events in (("write", writes), ("read", reads)):
            numbers = [s[1] for s, _, _ in events]
            first = state.get(kind, numbers[0] if numbers else 0)
            if numbers != list(range(first, first + len(numbers))):
                problems.append(f"{name}: {kind} sequence numbers {numbers} are not consecutive from {first}")
            state[kind] = first + len(numbers)
        for k, ((w_start, w_end, w_item), (r_start, r_end, r_item)) in enumerate(zip(writes, reads)):
            if w_start[1] != r_start[1]:
                problems.append(f"{name}: message {k} written as {w_start[1]} but read as {r_start[1]}")
            if w_item["layer"] != r_item["layer"]:
                problems.append(f"{name}: message {k} carries {w_item['layer']} but is read as {r_item['layer']}")
            if r_start[0] <= w_end[0]:
                problems.append(f"{name}: message {k} ({w_item['layer']}) read before its write ended")
            if k + 1 < len(writes) and writes[k + 1][0][0] <= r_end[0]:
                problems.append(f"{name}: message {k + 1} written before message {k} was read (overwrite)")
        for k in range(len(reads), len(writes) - 1):
            problems.append(f"{name}: message {k + 1} written while message {k} was never read (overwrite)")
        for k in range(len(writes), len(reads)):
            problems.append(f"{name}: message {k} ({reads[k][2]['layer']}) read but never written")
    return problems


def _first_difference(got: list, want: list) -> str:
    for k, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return f"#{k}: logged {a}, expected {b}"
    return f"#{min(len(got), len(want))}"


def _short(names: list[str]) -> str:
    return "[" + ", ".join(names[:6]) + (", ..." if len(names) > 6 else "") + "]"
