"""The execution semantics of NNEF descriptions as (coloured) Petri nets, and trace checking (ERTS 2024 §II.D, §IV.C).

Translation 1 (one description): a place per variable, a transition per
instruction; an instruction ``v = op(v1, ..., vk)`` consumes one token from
each ``vi`` (one per use) and puts into ``v`` as many tokens as later
instructions use ``v``; parameters and inputs start with one token per use;
the final marking is one token in the output place.

Translation 2 (items): Translation 1 per item, one colour per item, places
merged by name (a parameter read by two items holds tokens of both colours);
``variablesync`` and ``get_var`` make no place and no transition; each
``send_var`` becomes a transition ``sync`` of the writer's colour that takes
the writer's token of the sent tensor and gives each reader as many tokens of
its colour as that reader uses the tensor. A one-description net is the
one-colour case, so both translations share the class below.

Why our own: it is about 200 lines of plain data; ``snakes`` (PyPI) would do
the colours but brings its own expression language and plugin system for what
is here multisets of (place, colour) pairs, and its last release dates from
2020. Traces are replayed with a transition split into its ``start`` (takes
the input tokens: the transition must be enabled) and its ``end`` (gives the
output tokens), so the start/end events logged by generated code replay one
to one; sync transitions are silent and fire as soon as they are enabled
(they only take the token reserved for them, so firing them early changes no
other choice).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.formal.nnef_items import (DECLARATIONS, VIRTUAL_SINK, Description, check_composition, layer_groups,
                                       split_schedule, sync_name)

SINGLE = "main"  # the colour of a one-description net


@dataclass
class Transition:
    name: str  # the key in ``Net.transitions``: the instruction's result, ``@colour`` added when items duplicate it
    colour: str
    inputs: Counter = field(default_factory=Counter)  # (place, colour) -> count
    outputs: Counter = field(default_factory=Counter)
    silent: bool = False  # a sync transition: no layer event in a trace
    node: str = ""  # the instruction's result (a layer), or the variablesync of a sync transition

    def __post_init__(self) -> None:
        self.node = self.node or self.name


@dataclass
class Net:
    places: list[str]
    transitions: dict[str, Transition]
    initial: Counter
    final: Counter
    colours: list[str]

    def enabled(self, marking: Counter, name: str) -> bool:
        return all(marking[token] >= count for token, count in self.transitions[name].inputs.items())

    def fire(self, marking: Counter, name: str) -> Counter:
        transition = self.transitions[name]
        after = Counter(marking)
        after.subtract(transition.inputs)
        after.update(transition.outputs)
        return +after

    def transition_for(self, node: str, item: str | None) -> Transition | None:
        """The transition of layer (or sync) ``node`` on ``item``: its own copy when items duplicate it."""
        return self.transitions.get(f"{node}@{item}") or self.transitions.get(node)

    def count_paths(self, limit: int | None = 10**9) -> int:
        """The number of valid paths (Definition 7) from the initial to the final marking, silent ones included
        (``limit`` caps the count; None: exact, Python integers being unbounded)."""

        @functools.cache
        def paths(key: frozenset) -> int:
            marking = Counter(dict(key))
            if marking == self.final:
                return 1
            total = sum(paths(frozenset(self.fire(marking, t).items()))
                        for t in self.transitions if self.enabled(marking, t))
            return total if limit is None else min(limit, total)

        return paths(frozenset(self.initial.items()))

    def reachable_markings(self) -> int:
        """How many markings the net reaches from the initial one (the state space the paths run through)."""
        seen = {frozenset(self.initial.items())}
        stack = [Counter(self.initial)]
        while stack:
            marking = stack.pop()
            for t in self.transitions:
                if self.enabled(marking, t):
                    key = frozenset(self.fire(marking, t).items())
                    if key not in seen:
                        seen.add(key)
                        stack.append(Counter(dict(key)))
        return len(seen)

    def orders(self, limit: int = 100_000) -> set[tuple[str, ...]]:
        """The visible transition orders of the valid paths (sync transitions left out): Property 3 compares these."""
        found: set[tuple[str, ...]] = set()

        def walk(marking: Counter, order: tuple[str, ...], synced: frozenset) -> None:
            if len(found) >= limit:
                return
            fired: set[str] = set(synced)
            marking = self.settle(marking, fired)
            if marking == self.final:
                found.add(order)
                return
            for t, transition in self.transitions.items():
                if not transition.silent and self.enabled(marking, t):
                    walk(self.fire(marking, t), order + (transition.node,), frozenset(fired))

        walk(self.initial, (), frozenset())
        return found

    def settle(self, marking: Counter, fired: set[str]) -> Counter:
        """Fire each enabled silent (sync) transition not in ``fired`` (updated): once per inference, as the
        code sends each message once; a second firing would take a token a layer of the same item needs."""
        progress = True
        while progress:
            progress = False
            for t, transition in self.transitions.items():
                if transition.silent and t not in fired and self.enabled(marking, t):
                    marking, progress = self.fire(marking, t), True
                    fired.add(t)
        return marking


def _uses(description: Description) -> Counter:
    return Counter(source for ins in description.body for source in ins.reads())


def translate(description: Description) -> Net:
    """Translation 1: the Petri net of one description (one colour)."""
    return translate_items([description], colours={description.item or SINGLE: description})


def translate_items(items: list[Description], colours: dict[str, Description] | None = None) -> Net:
    """Translation 2: the coloured Petri net of item descriptions (one colour per item)."""
    colours = colours or {d.item: d for d in items}
    computed = Counter(ins.result for d in colours.values() for ins in d.layers())
    places: dict[str, None] = {}
    transitions: dict[str, Transition] = {}
    initial: Counter = Counter()
    final: Counter = Counter()
    for colour, d in colours.items():
        uses = _uses(d)
        for ins in d.body:
            if ins.op in ("variablesync", "get_var"):
                continue
            if ins.op == "send_var":
                data = ins.arg(1, "data").name
                sync = Transition(f"sync_{ins.result}", colour, Counter({(data, colour): 1}), silent=True,
                                  node=ins.result)
                for reader in ins.arg(0, "dest"):
                    reader_uses = _uses(colours[reader.name])[data] if reader.name in colours else 0
                    sync.outputs[(data, reader.name)] += reader_uses
                transitions[sync.name] = sync
                continue
            places[ins.result] = None
            if ins.op in DECLARATIONS:
                initial[(ins.result, colour)] += uses[ins.result]
                continue
            inputs = Counter((source, colour) for source in ins.reads())
            produced = uses[ins.result]  # a send_var's read included: the token its sync takes
            if ins.result in d.outputs:
                produced += 1
                final[(ins.result, colour)] += 1
            key = ins.result if computed[ins.result] == 1 else f"{ins.result}@{colour}"  # a duplicated layer
            transitions[key] = Transition(key, colour, inputs, Counter({(ins.result, colour): produced}),
                                          node=ins.result)
            places.update((source, None) for source in ins.reads())
    return Net(list(places), transitions, +initial, final, list(colours))


def schedule_net(description: Description, tasks: list[list[dict]]) -> tuple[Net, dict[str, list[str]]]:
    """Translation 2 of the items of ``description`` split along a timed schedule (per core, its tasks), the
    composition rule checked; and the code layer -> instructions groups its traces are mapped with."""
    items = split_schedule(description, tasks)
    check_composition(description, list(items.values()))
    nodes = [task["node"] for core in tasks for task in core]
    return translate_items(list(items.values())), layer_groups(description, nodes)


# --- traces -------------------------------------------------------------------------------


LAYER_KINDS = ("start", "end")
SYNC_KINDS = ("write-start", "write-end", "read-start", "read-end")


@dataclass(frozen=True)
class Event:
    kind: str  # "start"/"end" of a layer, or "write-start" ... "read-end" of a sync (SYNC_KINDS)
    node: str  # the layer, or the variablesync a Writing/Reading operator moves
    item: str | None = None  # the item (core) that logged it, when known
    peer: str | None = None  # a write's destination item (a sync may send to several)


@dataclass
class Verdict:
    accepted: bool
    reason: str = ""  # the first violating event, or why the end is not final
    index: int | None = None  # its position in the trace

    def line(self) -> str:
        return "accepted" if self.accepted else f"rejected at event {self.index}: {self.reason}"


def check_trace(net: Net, events: list[Event], logged: bool | None = None) -> Verdict:
    """Replay ``events`` on ``net``: accepted iff they form a firing sequence that ends in the final marking.

    Layers: a start takes the transition's input tokens (it must be enabled), an end gives its outputs.
    Sync transitions (``send_var``) are silent unless the trace logs the communications (events of
    SYNC_KINDS, as the parallel code's Writing and Reading operators do); then a sync fires in the
    protocol's phases: the write starts when its input token is there and takes it, and a reader's read
    may start only after the write ended and gives that reader its tokens when it ends. ``logged``: whether
    the trace logs communications (None: if it has a sync event; parallel code logs every one, so a trace
    of it that lost all of them must still be checked with True).
    """
    if logged is None:
        logged = any(event.kind in SYNC_KINDS for event in events)
    synced: set[str] = set()
    settle = (lambda m: m) if logged else (lambda m: net.settle(m, synced))
    marking = settle(Counter(net.initial))
    running: set[str] = set()
    done: set[str] = set()
    syncs: dict[str, dict] = {}  # sync transition -> {"written": bool, "reading": set, "read": set}
    for index, event in enumerate(events):
        where = f"{event.kind} {event.node}" + (f" on {event.item}" if event.item else "")
        if event.kind in SYNC_KINDS:
            transition = net.transitions.get(f"sync_{event.node}")
            if transition is None:
                return Verdict(False, f"{where}: the description sends no variablesync {event.node}", index)
            problem = _sync_event(marking, transition, syncs, event)
            if problem:
                return Verdict(False, f"{where}: {problem}", index)
            continue
        if event.kind not in LAYER_KINDS:
            return Verdict(False, f"{where}: unknown event kind ({', '.join(LAYER_KINDS + SYNC_KINDS)})", index)
        transition = net.transition_for(event.node, event.item)
        if transition is None:
            return Verdict(False, f"{where}: no such layer in the description", index)
        if transition.silent:
            continue  # a synchronisation logged by name only: fired already, as soon as it was enabled
        if event.item is not None and len(net.colours) > 1 and event.item != transition.colour:
            return Verdict(False, f"{where}: the description puts {event.node} on item {transition.colour}", index)
        name = transition.name
        if event.kind == "start":
            if name in running or name in done:
                return Verdict(False, f"{where}: {event.node} already started", index)
            missing = [f"{place} for {colour} (has {marking[(place, colour)]}, needs {count})"
                       for (place, colour), count in transition.inputs.items() if marking[(place, colour)] < count]
            if missing:
                return Verdict(False, f"{where}: not enabled, missing {'; '.join(missing)}", index)
            marking.subtract(transition.inputs)
            marking = +marking
            running.add(name)
        else:
            if name not in running:
                return Verdict(False, f"{where}: {event.node} ends without having started", index)
            running.discard(name)
            done.add(name)
            marking.update(transition.outputs)
            marking = settle(marking)
    unfinished = sorted(running) + [f"{s}" for s, state in syncs.items() if state["reading"] | state["writing"]]
    if unfinished:
        return Verdict(False, f"the trace ends with {', '.join(unfinished)} still running", len(events))
    if marking != net.final:
        left = [t for t in net.transitions if t not in done and not net.transitions[t].silent]
        return Verdict(False, f"the trace ends before the final marking ({len(left)} layers never ran, first "
                              f"{left[0] if left else '-'})", len(events))
    return Verdict(True)


def _sync_event(marking: Counter, sync: Transition, syncs: dict, event: Event) -> str:
    """Apply one logged phase of a sync transition to ``marking`` in place; the problem, or ''.

    The first write of the sync takes its input token (the tensor must have been computed); then, per
    reader, its write, its read (only after that write ended), and at the read's end its tokens.
    """
    state = syncs.setdefault(sync.name, {"taken": False, "writing": set(), "written": set(), "reading": set(),
                                         "read": set()})
    readers = sorted({colour for (_, colour), count in sync.outputs.items() if count})
    writer_side = event.kind.startswith("write")
    reader = event.peer if writer_side else event.item
    if writer_side and event.item not in (None, sync.colour):
        return f"the description has {sync.colour} send it"
    if reader is None and len(readers) == 1:
        reader = readers[0]
    if reader not in readers:
        return f"the description sends it to {', '.join(readers) or 'nobody'}, not to {reader}"
    if event.kind == "write-start":
        if reader in state["writing"] | state["written"]:
            return f"written twice to {reader}"
        if not state["taken"]:
            missing = [f"{place} for {colour}" for (place, colour), count in sync.inputs.items()
                       if marking[(place, colour)] < count]
            if missing:
                return f"not enabled, missing {'; '.join(missing)} (written before it was computed)"
            marking.subtract(sync.inputs)
            state["taken"] = True
        state["writing"].add(reader)
    elif event.kind == "write-end":
        if reader not in state["writing"]:
            return "the write ends without having started"
        state["writing"].discard(reader)
        state["written"].add(reader)
    elif event.kind == "read-start":
        if reader not in state["written"]:
            return "read before its write ended"
        if reader in state["reading"] | state["read"]:
            return f"read twice by {reader}"
        state["reading"].add(reader)
    else:
        if reader not in state["reading"]:
            return "the read ends without having started"
        state["reading"].discard(reader)
        state["read"].add(reader)
        marking.update({token: count for token, count in sync.outputs.items() if token[1] == reader})
    for token in [t for t, n in marking.items() if n <= 0]:
        del marking[token]
    return ""


def sequential_trace(layers: list[str], item: str | None = None) -> list[Event]:
    """The trace of sequential code running ``layers`` in order (e.g. a generator manifest's layer list)."""
    return [Event(kind, name, item) for name in layers for kind in ("start", "end")]


def _layer_events(kind: str, node: str, item: str | None, groups: dict[str, list[str]] | None) -> list[Event]:
    """A code layer's start or end as events of the description's instructions (``groups``: layer ->
    its instructions in order, e.g. a Keras layer's convolution and activation): the first instruction
    starts with the layer, and when the layer ends the others run one after another."""
    members = groups.get(node, [node]) if groups else [node]
    if kind == "start":
        return [Event("start", members[0], item)]
    return [Event("end", members[0], item)] + [Event(k, m, item) for m in members[1:] for k in ("start", "end")]


def item_name(core) -> str:
    """The item of a core: ``core<N>`` for a core number, the name itself otherwise."""
    return f"core{core}" if str(core).isdigit() else str(core)


def trace_from_schedule(cores, groups: dict[str, list[str]] | None = None) -> list[Event]:
    """Events of a timed schedule in time order, an end before a start at equal times.

    ``cores``: a schedule.json's ``schedule`` list (``[{"core", "tasks": [{node, start, end}]}]``), the
    list of each core's tasks, or a map item -> entries; ``groups`` as for ``trace_from_parallel``.
    """
    if isinstance(cores, list):
        cores = {entry["core"]: entry["tasks"] for entry in cores} if all(isinstance(e, dict) for e in cores) \
            else dict(enumerate(cores))
    events = []
    for core, entries in cores.items():
        item = item_name(core)
        for entry in entries:
            if entry["node"] == VIRTUAL_SINK:
                continue
            start, end = float(entry["start"]), float(entry["end"])
            events.append(((start, 1, start), _layer_events("start", entry["node"], item, groups)))
            # at equal times ends go first, but a task of length 0 (a reshape) ends right after it starts
            events.append(((end, 0 if end > start else 1, start), _layer_events("end", entry["node"], item, groups)))
    return [event for _, batch in sorted(events, key=lambda e: e[0]) for event in batch]


def trace_from_parallel(rows: list[tuple[int, ...]], per_core: list[dict],
                        groups: dict[str, list[str]] | None = None) -> dict[int, list[Event]]:
    """The events of each inference (run) of a trace logged by parallel V2 code, in stamp order.

    ``rows``: ``(run, core, event * 2 + phase, stamp, seq)`` as the runners read them
    (docs/parallel.md); ``per_core``: the manifest's ``parallel.per_core``, which says what each event id
    is: a layer (its start and end), or a Writing / Reading operator, which logs the phases of the sync
    transition of the message it moves (``sync_name``: the description written by
    ``nnef_items.split_schedule`` for the same schedule). ``groups``: code layer -> the description's
    instructions it computes (``nnef_items.layer_groups``).
    """
    items = {item["event"]: (core["core"], item) for core in per_core for item in core["items"]}
    output = {name: members[-1] for name, members in (groups or {}).items()}
    runs: dict[int, list[tuple[int, list[Event]]]] = {}
    for run, core, word, stamp, _ in rows:
        if word // 2 not in items:
            raise ValueError(f"trace row of run {run}, core {core}: event {word // 2} is not in the manifest")
        owner, item = items[word // 2]
        phase = "end" if word % 2 else "start"
        if item["kind"] == "layer":
            batch = _layer_events(phase, item["name"], item_name(owner), groups)
        else:
            sync = sync_name(output.get(item["layer"], item["layer"]), item_name(item["src"]))
            batch = [Event(f"{item['kind']}-{phase}", sync, item_name(owner),
                           item_name(item["dst"]) if item["kind"] == "write" else None)]
        runs.setdefault(run, []).append((stamp, batch))
    return {run: [event for _, batch in sorted(stamped, key=lambda e: e[0]) for event in batch]
            for run, stamped in sorted(runs.items())}


# --- pictures -----------------------------------------------------------------------------

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def to_dot(net: Net, title: str = "") -> str:
    """Graphviz text of the net in its initial marking: places as circles with their tokens, transitions as boxes."""
    colour_of = {c: _PALETTE[k % len(_PALETTE)] for k, c in enumerate(net.colours)}
    single = len(net.colours) == 1
    lines = ["digraph petri {", "  rankdir=TB; node [fontsize=10]; edge [fontsize=9];"]
    if title:
        lines.append(f'  label="{title}"; labelloc=t;')
    for place in net.places:
        tokens = [(c, n) for (p, c), n in net.initial.items() if p == place and n]
        label = place + ("\\n" + " ".join(("●" * n if n <= 3 else f"{n}●") if single else f"{n}:{c}"
                                          for c, n in tokens) if tokens else "")
        lines.append(f'  "p_{place}" [shape=circle, label="{label}", width=0.4];')
    for name, transition in net.transitions.items():
        style = "filled" if transition.silent else "solid"
        lines.append(f'  "t_{name}" [shape=box, style={style}, label="{name}", color="{colour_of[transition.colour]}"'
                     f'{", fillcolor=" + chr(34) + "#dddddd" + chr(34) if transition.silent else ""}];')
        for (place, colour), count in transition.inputs.items():
            weight = f', label="{count}"' if count > 1 else ""
            lines.append(f'  "p_{place}" -> "t_{name}" [color="{colour_of[colour]}"{weight}];')
        for (place, colour), count in transition.outputs.items():
            if count:
                weight = f', label="{count}"' if count > 1 else ""
                lines.append(f'  "t_{name}" -> "p_{place}" [color="{colour_of[colour]}"{weight}];')
    if not single:
        legend = " ".join(f'<font color="{colour_of[c]}">{c}</font>' for c in net.colours)
        lines.append(f'  legend [shape=plaintext, label=<{legend}>];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(dot_text: str, out: Path) -> Path | None:
    """Write ``out`` (its suffix picks the format, e.g. .svg or .png) with Graphviz ``dot``; None if dot is absent."""
    dot = shutil.which("dot")
    out = Path(out)
    out.with_suffix(".dot").write_text(dot_text)
    if dot is None:
        return None
    subprocess.run([dot, f"-T{out.suffix.lstrip('.')}", "-o", str(out)], input=dot_text, text=True, check=True,
                   capture_output=True)
    return out
