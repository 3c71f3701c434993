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

from harness.models.nnef_items import DECLARATIONS, Description

SINGLE = "main"  # the colour of a one-description net


@dataclass
class Transition:
    name: str
    colour: str
    inputs: Counter = field(default_factory=Counter)  # (place, colour) -> count
    outputs: Counter = field(default_factory=Counter)
    silent: bool = False  # a sync transition: no event in a trace


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

    def count_paths(self, limit: int = 10**9) -> int:
        """The number of valid paths (Definition 7) from the initial to the final marking, silent ones included."""

        @functools.cache
        def paths(key: frozenset) -> int:
            marking = Counter(dict(key))
            if marking == self.final:
                return 1
            return min(limit, sum(paths(frozenset(self.fire(marking, t).items()))
                                  for t in self.transitions if self.enabled(marking, t)))

        return paths(frozenset(self.initial.items()))

    def orders(self, limit: int = 100_000) -> set[tuple[str, ...]]:
        """The visible transition orders of the valid paths (sync transitions left out): Property 3 compares these."""
        found: set[tuple[str, ...]] = set()

        def walk(marking: Counter, order: tuple[str, ...]) -> None:
            if len(found) >= limit:
                return
            marking = self.settle(marking)
            if marking == self.final:
                found.add(order)
                return
            for t, transition in self.transitions.items():
                if not transition.silent and self.enabled(marking, t):
                    walk(self.fire(marking, t), order + (t,))

        walk(self.initial, ())
        return found

    def settle(self, marking: Counter) -> Counter:
        """Fire enabled silent (sync) transitions until none is."""
        fired = True
        while fired:
            fired = False
            for t, transition in self.transitions.items():
                if transition.silent and self.enabled(marking, t):
                    marking, fired = self.fire(marking, t), True
        return marking


def _uses(description: Description) -> Counter:
    return Counter(source for ins in description.body for source in ins.reads())


def translate(description: Description) -> Net:
    """Translation 1: the Petri net of one description (one colour)."""
    return translate_items([description], colours={description.item or SINGLE: description})


def translate_items(items: list[Description], colours: dict[str, Description] | None = None) -> Net:
    """Translation 2: the coloured Petri net of item descriptions (one colour per item)."""
    colours = colours or {d.item: d for d in items}
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
                sync = Transition(f"sync_{ins.result}", colour, Counter({(data, colour): 1}), silent=True)
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
            transitions[ins.result] = Transition(ins.result, colour, inputs, Counter({(ins.result, colour): produced}))
            places.update((source, None) for source in ins.reads())
    return Net(list(places), transitions, +initial, final, list(colours))


# --- traces -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    kind: str  # "start" or "end"
    node: str
    item: str | None = None  # the item (core) that logged it, when known


@dataclass
class Verdict:
    accepted: bool
    reason: str = ""  # the first violating event, or why the end is not final
    index: int | None = None  # its position in the trace

    def line(self) -> str:
        return "accepted" if self.accepted else f"rejected at event {self.index}: {self.reason}"


def check_trace(net: Net, events: list[Event]) -> Verdict:
    """Replay ``events`` on ``net``: accepted iff they form a firing sequence that ends in the final marking."""
    marking = net.settle(Counter(net.initial))
    running: set[str] = set()
    done: set[str] = set()
    for index, event in enumerate(events):
        where = f"{event.kind} {event.node}" + (f" on {event.item}" if event.item else "")
        transition = net.transitions.get(event.node)
        if transition is None:
            return Verdict(False, f"{where}: no such layer in the description", index)
        if transition.silent:
            continue  # a logged synchronisation: fired already, as soon as it was enabled
        if event.item is not None and len(net.colours) > 1 and event.item != transition.colour:
            return Verdict(False, f"{where}: the description puts {event.node} on item {transition.colour}", index)
        if event.kind == "start":
            if event.node in running or event.node in done:
                return Verdict(False, f"{where}: {event.node} already started", index)
            missing = [f"{place} for {colour} (has {marking[(place, colour)]}, needs {count})"
                       for (place, colour), count in transition.inputs.items() if marking[(place, colour)] < count]
            if missing:
                return Verdict(False, f"{where}: not enabled, missing {'; '.join(missing)}", index)
            marking.subtract(transition.inputs)
            marking = +marking
            running.add(event.node)
        elif event.kind == "end":
            if event.node not in running:
                return Verdict(False, f"{where}: {event.node} ends without having started", index)
            running.discard(event.node)
            done.add(event.node)
            marking.update(transition.outputs)
            marking = net.settle(marking)
        else:
            return Verdict(False, f"{where}: unknown event kind (start or end)", index)
    if running:
        return Verdict(False, f"the trace ends with {', '.join(sorted(running))} still running", len(events))
    if marking != net.final:
        left = [t for t in net.transitions if t not in done and not net.transitions[t].silent]
        return Verdict(False, f"the trace ends before the final marking ({len(left)} layers never ran, first "
                              f"{left[0] if left else '-'})", len(events))
    return Verdict(True)


def sequential_trace(layers: list[str], item: str | None = None) -> list[Event]:
    """The trace of sequential code running ``layers`` in order (e.g. a generator manifest's layer list)."""
    return [Event(kind, name, item) for name in layers for kind in ("start", "end")]


def trace_from_schedule(cores: dict[str, list[dict]]) -> list[Event]:
    """Events of a timed schedule (per core, entries ``{node, start, end}``) in time order, an end before a start."""
    events = []
    for core, entries in cores.items():
        item = f"core{core}" if str(core).isdigit() else str(core)
        for entry in entries:
            events.append((float(entry["start"]), 1, Event("start", entry["node"], item)))
            events.append((float(entry["end"]), 0, Event("end", entry["node"], item)))
    return [event for _, _, event in sorted(events, key=lambda e: (e[0], e[1]))]


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
