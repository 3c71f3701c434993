"""Multi-item NNEF descriptions (ERTS 2024 paper, §IV): parse, write, split a graph into items, check composition.

The paper extends NNEF with ``graphitem ITEM NAME(inputs) -> (outputs)``
(Syntax 1), the ``variablesync`` type (Syntax 2), and the ``get_var`` /
``send_var`` instructions (Syntax 3-4). Khronos' parser rejects these words,
so this module has its own reader for the *flat* NNEF syntax the descriptions
use (``version``/``extension`` lines, one graph or graphitem block of
``results = op<type>(args, key = value);`` instructions whose arguments are
literals, identifiers, arrays and tuples) plus the extension; compound
fragments and expressions are outside it (the writer never emits them, and an
item description has none). Item names in ``send_var`` and ``get_var`` are
identifiers too, so they are kept apart from tensor names.

``split`` turns one description and a partition (item -> layers) into one
description per item; ``check_composition`` verifies the paper's composition
rule mechanically: the union of the items' instructions, without the
communications, is the original description, every layer is computed by
an item (by several only when each copy is used there: a schedule's
duplication), and every ``get_var`` reads a variable its source item sends
to it. ``split_schedule`` splits along a timed schedule (``assay schedule``)
with the routing of the parallel code, whose traces then replay on the
items' Petri net (``petri.trace_from_parallel``). A broken partition or item set is refused with one line naming the
problem (``ItemError``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from harness.errors import ModelError

DECLARATIONS = frozenset({"external", "variable", "constant"})
VIRTUAL_SINK = "(sink)"  # the scheduler's node joining several sinks (harness.scheduling): no instruction
COMMUNICATIONS = frozenset({"variablesync", "send_var", "get_var"})


class ItemError(ModelError):
    """A description, partition or set of item descriptions that breaks the paper's rules."""


@dataclass(frozen=True)
class Ref:
    """An identifier used as a value (a tensor, or an item in send_var/get_var)."""

    name: str


@dataclass(frozen=True)
class Instruction:
    """``results = op<type_arg>(args, key = value, ...);`` as written (values: numbers, strings, bools, Ref, lists)."""

    results: tuple[str, ...]
    op: str
    args: tuple = ()
    kwargs: tuple[tuple[str, object], ...] = ()
    type_arg: str | None = None
    line: int = 0

    @property
    def result(self) -> str:
        return self.results[0]

    def reads(self) -> list[str]:
        """The tensors this instruction reads, with repetition (item names of send_var/get_var excluded)."""
        if self.op == "send_var":
            return _refs(self.arg(1, "data"))
        if self.op == "get_var":
            return []  # it reads a variablesync, which is not a place (Translation 2)
        return [name for value in (*self.args, *(v for _, v in self.kwargs)) for name in _refs(value)]

    def arg(self, position: int, key: str):
        """The argument at ``position`` or named ``key``."""
        if position < len(self.args):
            return self.args[position]
        return dict(self.kwargs).get(key)

    def text(self) -> str:
        parts = [_format(value) for value in self.args] + [f"{key} = {_format(value)}" for key, value in self.kwargs]
        results = self.results[0] if len(self.results) == 1 else "(" + ", ".join(self.results) + ")"
        type_arg = f"<{self.type_arg}>" if self.type_arg else ""
        return f"{results} = {self.op}{type_arg}({', '.join(parts)});"

    def same_as(self, other: "Instruction") -> bool:
        return (self.results, self.op, self.args, self.kwargs, self.type_arg) == \
            (other.results, other.op, other.args, other.kwargs, other.type_arg)


@dataclass
class Description:
    """A ``graph`` (item None) or a ``graphitem`` block."""

    name: str
    inputs: list[str]
    outputs: list[str]
    body: list[Instruction] = field(default_factory=list)
    item: str | None = None
    header: list[str] = field(default_factory=lambda: ["version 1.0;"])

    def layers(self) -> list[Instruction]:
        """The computing instructions (neither declarations nor communications), in order."""
        return [ins for ins in self.body if ins.op not in DECLARATIONS | COMMUNICATIONS]

    def declarations(self) -> dict[str, Instruction]:
        return {ins.result: ins for ins in self.body if ins.op in DECLARATIONS}

    def text(self) -> str:
        if self.item is None:
            head = f"graph {self.name}({', '.join(self.inputs)}) -> ({', '.join(self.outputs)})"
        else:
            head = f"graphitem {self.item} {self.name}([{', '.join(self.inputs)}]) -> ([{', '.join(self.outputs)}])"
        return "\n".join([*self.header, "", head, "{", *(f"    {ins.text()}" for ins in self.body), "}", ""])


def _refs(value) -> list[str]:
    if isinstance(value, Ref):
        return [value.name]
    if isinstance(value, (list, tuple)):
        return [name for item in value for name in _refs(item)]
    return []


def _format(value) -> str:
    if isinstance(value, Ref):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(_format(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_format(v) for v in value) + ")"
    return repr(value)


# --- reading ------------------------------------------------------------------------------

_TOKEN = re.compile(r"""\s*(?:(?P<comment>\#[^\n]*)|(?P<number>-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\d+(?:[eE][-+]?\d+)?)
                    |(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
                    |(?P<arrow>->)|(?P<punct>[()\[\]{}<>,;=:?]))""", re.VERBOSE)


class _Reader:
    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, line)
        position, line = 0, 1
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                if text[position:].strip() == "":
                    break
                stripped = len(text[position:]) - len(text[position:].lstrip())
                bad = text[position + stripped: position + stripped + 10]
                raise ItemError(f"{source}: line {line + text[position:position + stripped].count(chr(10))}: "
                                f"unexpected text {bad!r}")
            line += text[position:match.start(match.lastgroup)].count("\n")
            if match.lastgroup != "comment":
                self.tokens.append((match.lastgroup, match.group(match.lastgroup), line))
            position = match.end()
        self.index = 0

    def peek(self, offset: int = 0) -> tuple[str, str, int]:
        k = self.index + offset
        return self.tokens[k] if k < len(self.tokens) else ("end", "end of file", self.tokens[-1][2] if self.tokens
                                                             else 1)

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        kind, text, line = self.peek()
        if expected is not None and text != expected and kind != expected:
            raise ItemError(f"{self.source}: line {line}: expected {expected!r}, found {text!r}")
        self.index += 1
        return kind, text, line

    def ident(self) -> str:
        kind, text, line = self.take()
        if kind != "ident":
            raise ItemError(f"{self.source}: line {line}: expected a name, found {text!r}")
        return text

    def ident_list(self) -> list[str]:
        """``(a, b)`` or ``([a, b])`` (the paper writes both forms for graphitem)."""
        self.take("(")
        bracket = self.peek()[1] == "["
        if bracket:
            self.take("[")
        names = []
        while self.peek()[1] not in ("]", ")"):
            names.append(self.ident())
            if self.peek()[1] == ",":
                self.take(",")
        if bracket:
            self.take("]")
        self.take(")")
        return names

    def value(self):
        kind, text, line = self.take()
        if kind == "number":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "string":
            return re.sub(r"\\(.)", r"\1", text[1:-1])
        if kind == "ident":
            return {"true": True, "false": False}.get(text, Ref(text))
        if text in ("[", "("):
            close = "]" if text == "[" else ")"
            items = []
            while self.peek()[1] != close:
                items.append(self.value())
                if self.peek()[1] == ",":
                    self.take(",")
            self.take(close)
            return items if text == "[" else tuple(items)
        raise ItemError(f"{self.source}: line {line}: expected a value, found {text!r}")

    def instruction(self) -> Instruction:
        line = self.peek()[2]
        if self.peek()[1] in ("(", "["):
            results = tuple(_refs(self.value()))
        else:
            results = (self.ident(),)
        self.take("=")
        op = self.ident()
        type_arg = None
        if self.peek()[1] == "<":
            self.take("<")
            type_arg = self.ident() if self.peek()[1] != "?" else self.take()[1]
            self.take(">")
        self.take("(")
        args, kwargs = [], []
        while self.peek()[1] != ")":
            if self.peek()[0] == "ident" and self.peek(1)[1] == "=":
                key = self.ident()
                self.take("=")
                kwargs.append((key, self.value()))
            else:
                if kwargs:
                    raise ItemError(f"{self.source}: line {self.peek()[2]}: positional argument after a named one")
                args.append(self.value())
            if self.peek()[1] == ",":
                self.take(",")
        self.take(")")
        self.take(";")
        return Instruction(results, op, tuple(args), tuple(kwargs), type_arg, line)


def parse(text: str, source: str = "<text>") -> list[Description]:
    """Every ``graph``/``graphitem`` block of ``text``, in order (a file may hold the items of one model)."""
    reader = _Reader(text, source)
    header: list[str] = []
    descriptions = []
    while reader.peek()[0] != "end":
        kind, word, line = reader.peek()
        if word in ("version", "extension"):
            parts = []
            while reader.peek()[1] != ";":
                parts.append(reader.take()[1])
            reader.take(";")
            header = [] if word == "version" else header  # a new file's header (items written one after another)
            header.append(" ".join(parts) + ";")
            continue
        if word not in ("graph", "graphitem"):
            raise ItemError(f"{source}: line {line}: expected 'graph' or 'graphitem', found {word!r}")
        reader.take()
        item = reader.ident() if word == "graphitem" else None
        name = reader.ident()
        inputs = reader.ident_list()
        reader.take("->")
        outputs = reader.ident_list()
        reader.take("{")
        body = []
        while reader.peek()[1] != "}":
            body.append(reader.instruction())
        reader.take("}")
        descriptions.append(Description(name, inputs, outputs, body, item, list(header) or ["version 1.0;"]))
    if not descriptions:
        raise ItemError(f"{source}: no graph or graphitem")
    return descriptions


# --- splitting ----------------------------------------------------------------------------


def sync_name(tensor: str, source: str | None = None) -> str:
    """The variablesync of ``tensor``: one per tensor (``split``), or one per tensor and sending item
    (``split_schedule``: with duplication, two items may send copies of one tensor)."""
    return f"{tensor}_sync" if source is None else f"{tensor}_sync_{source}"


def split(description: Description, partition: dict[str, list[str]],
          shapes: dict[str, list[int]] | None = None) -> dict[str, Description]:
    """One description per item: its layers in the original order, the declarations they read, send/get_var.

    A tensor computed in item A and read in item B becomes a ``variablesync``
    sent by A right after computing it and received by B (``get_var``, under
    the tensor's own name, so B's instructions are unchanged) right before its
    first use: the paper's Listing 3 layout. ``shapes`` (tensor -> shape)
    fills the variablesync declarations.
    """
    layers = {ins.result: ins for ins in description.layers()}
    owner = check_partition(description, partition)
    declared = description.declarations()
    output = description.outputs[0]
    shapes = shapes or {}
    readers: dict[str, list[str]] = {}  # tensor -> items (other than its owner) that read it, in item order
    for item in partition:
        for name in partition[item]:
            for source in layers[name].reads():
                if source in owner and owner[source] != item and item not in readers.setdefault(source, []):
                    readers[source].append(item)
    items = {}
    for item, names in partition.items():
        mine = [ins for ins in description.layers() if owner[ins.result] == item]
        reads = [source for ins in mine for source in ins.reads()]
        received = [source for source in dict.fromkeys(reads) if source in owner and owner[source] != item]
        sent = [ins.result for ins in mine if ins.result in readers]
        body = [declared[name] for name in declared if name in reads]
        body += [Instruction((sync_name(t),), "variablesync", (), (("shape", list(shapes.get(t, []))),), "scalar")
                 for t in [*received, *sent]]
        got: set[str] = set()
        for ins in mine:
            for source in ins.reads():
                if source in received and source not in got:
                    body.append(Instruction((source,), "get_var", (Ref(owner[source]), Ref(sync_name(source)))))
                    got.add(source)
            body.append(ins)
            if ins.result in readers:
                body.append(Instruction((sync_name(ins.result),), "send_var",
                                        ([Ref(r) for r in readers[ins.result]], Ref(ins.result))))
        inputs = [name for name in description.inputs if name in reads] + [sync_name(t) for t in received]
        outputs = [sync_name(t) for t in sent] + ([output] if owner.get(output) == item else [])
        items[item] = Description(f"{description.name}_{item}", inputs, outputs, body, item, list(description.header))
    return items


def check_partition(description: Description, partition: dict[str, list[str]]) -> dict[str, str]:
    """layer -> item, or an ItemError naming the first layer that is unknown, missing or in two items."""
    layers = [ins.result for ins in description.layers()]
    known = set(layers)
    owner: dict[str, str] = {}
    for item, names in partition.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", item):
            raise ItemError(f"partition: item name {item!r} is not an NNEF identifier")
        for name in names:
            if name not in known:
                hint = " (a declaration, not a layer)" if name in description.declarations() else ""
                raise ItemError(f"partition: item {item} lists '{name}', which is no layer of {description.name}{hint}")
            if name in owner:
                raise ItemError(f"partition: layer '{name}' is in items {owner[name]} and {item}")
            owner[name] = item
    missing = [name for name in layers if name not in owner]
    if missing:
        raise ItemError(f"partition: layer '{missing[0]}' is in no item"
                        + (f" ({len(missing) - 1} more)" if len(missing) > 1 else ""))
    return owner


def partition_from_json(data: dict) -> dict[str, list[str]]:
    """A partition ``{item: [layer, ...]}`` as given (a schedule.json goes to ``schedule_tasks``)."""
    if not isinstance(data, dict):
        raise ItemError("partition: expected a JSON object (item -> list of layer names, or a schedule.json)")
    partition = {}
    for item, entries in data.items():
        if not isinstance(entries, list) or not all(isinstance(entry, str) for entry in entries):
            raise ItemError(f"partition: item {item} must list layer names (strings)")
        partition[str(item)] = list(entries)
    return partition


def schedule_tasks(data: dict) -> list[list[dict]] | None:
    """Per core, its timed tasks ``{node, start, end}`` if ``data`` is a schedule.json (``assay-schedule/1``:
    ``schedule: [{"core": i, "tasks": [...]}]``), else None."""
    if not isinstance(data, dict) or "schedule" not in data:
        return None
    cores = data["schedule"]
    try:
        ordered = sorted(cores, key=lambda entry: int(entry["core"]))
        tasks = [[{"node": str(t["node"]), "start": float(t["start"]), "end": float(t["end"])} for t in entry["tasks"]]
                 for entry in ordered]
    except (KeyError, TypeError, ValueError):
        raise ItemError("schedule: each core needs 'core' and 'tasks' of {node, start, end} with numeric times") \
            from None
    if [int(entry["core"]) for entry in ordered] != list(range(len(ordered))):
        raise ItemError("schedule: cores must be numbered 0 to N-1")
    return tasks


def layer_groups(description: Description, nodes: list[str]) -> dict[str, list[str]]:
    """Code layer -> the description's instructions it computes, in order (the last gives its output).

    The exported NNEF names each instruction after its ONNX node, itself named after the Keras layer
    (``conv1`` -> ``conv1_conv``, ``conv1_tanh``); the ONNX front end's layers are those nodes, and an
    activation it fuses into its producer is not scheduled. So an instruction belongs to the layer of its
    own name, else to the longest layer name it extends by ``_``, else (a fused activation) to the layer
    of the one instruction it reads (and nothing else). Anything else is an ItemError naming it.
    """
    known = [node for node in dict.fromkeys(nodes) if node != VIRTUAL_SINK]
    owner: dict[str, str] = {}
    for ins in description.layers():
        name = ins.result
        prefixes = [node for node in known if name.startswith(node + "_")]
        producers = [source for source in ins.reads() if source in owner]
        if name in known:
            owner[name] = name
        elif prefixes:
            owner[name] = max(prefixes, key=len)
        elif ins.reads() == producers and len(producers) == 1:  # reads one layer and no parameter
            owner[name] = owner[producers[0]]
        else:
            raise ItemError(f"layer '{name}' of {description.name} belongs to no scheduled layer (neither named "
                            "after one nor a fused activation of one)")
    groups: dict[str, list[str]] = {node: [] for node in known}
    for name, node in owner.items():
        groups[node].append(name)
    empty = [node for node, members in groups.items() if not members]
    if empty:
        raise ItemError(f"the schedule places '{empty[0]}', which is no layer of {description.name}")
    return groups


def split_schedule(description: Description, tasks: list[list[dict]],
                   shapes: dict[str, list[int]] | None = None) -> dict[str, Description]:
    """One description per core (item ``core<N>``) of a timed schedule, duplicated layers included.

    Routing is the scheduler's and the parallel code's (``codegen.parallel``): a layer takes an input
    from an earlier copy of its producer on its own core, else from the copy on another core that ends
    first; one message per (producer, source core, destination core): a ``send_var`` of the producer's
    copy to its destinations right after it (variablesync ``sync_name(tensor, source item)``) and a
    ``get_var`` before the first use. The Writing and Reading operators of the generated code log the
    phases of exactly these sync transitions (``petri.trace_from_parallel``).
    """
    instances = [sorted(((t["start"], t["end"], t["node"]) for t in core if t["node"] != VIRTUAL_SINK))
                 for core in tasks]
    groups = layer_groups(description, [node for core in instances for _, _, node in core])
    layers = {ins.result: ins for ins in description.layers()}
    group_of = {name: node for node, members in groups.items() for name in members}
    output_of = {node: members[-1] for node, members in groups.items()}
    declared = description.declarations()
    items = {f"core{core}": [] for core in range(len(instances))}
    messages: dict[tuple[str, int, int], int] = {}  # (producer, src, dst) -> position of the first consumer
    for core, placed in enumerate(instances):
        for position, (_, _, node) in enumerate(placed):
            for source in (s for name in groups[node] for s in layers[name].reads()):
                producer = group_of.get(source)
                if producer is None or producer == node or any(n == producer for _, _, n in placed[:position]):
                    continue
                remote = [(end, other) for other, copies in enumerate(instances) if other != core
                          for _, end, n in copies if n == producer]
                if not remote:
                    raise ItemError(f"schedule: '{node}' on core {core} reads '{source}', which no core computes")
                key = (producer, min(remote)[1], core)
                messages[key] = min(messages.get(key, position), position)
    for core, placed in enumerate(instances):
        item = f"core{core}"
        body: list[Instruction] = []
        mine = [name for _, _, node in placed for name in groups[node]]
        reads = [source for name in mine for source in layers[name].reads()]
        received = {(p, src): sync_name(output_of[p], f"core{src}") for (p, src, dst) in messages if dst == core}
        sent = {p: sync_name(output_of[p], item) for (p, src, _) in messages if src == core}
        body += [declared[name] for name in declared if name in reads]
        body += [Instruction((sync,), "variablesync", (),
                             (("shape", list((shapes or {}).get(output_of[p], []))),), "scalar")
                 for (p, sync) in [*((p, s) for (p, _), s in received.items()), *sent.items()]]
        for position, (_, _, node) in enumerate(placed):
            for (p, src, dst), first in messages.items():
                if dst == core and first == position:
                    body.append(Instruction((output_of[p],), "get_var", (Ref(f"core{src}"), Ref(received[(p, src)]))))
            body += [layers[name] for name in groups[node]]
            if node in sent:
                readers = [Ref(f"core{dst}") for (p, src, dst) in messages if src == core and p == node]
                body.append(Instruction((sent[node],), "send_var", (readers, Ref(output_of[node]))))
        output = description.outputs[0]
        inputs = [name for name in description.inputs if name in reads] + list(received.values())
        outputs = list(sent.values()) + ([output] if output in mine else [])
        items[item] = Description(f"{description.name}_{item}", inputs, outputs, body, item, list(description.header))
    return items


# --- the composition rule -------------------------------------------------------------------


def check_composition(original: Description, items: list[Description]) -> None:
    """The paper's composition rule, checked mechanically; an ItemError names the first violation.

    - every item is a ``graphitem`` with a distinct item name;
    - every instruction of an item other than the communications is an
      instruction of the original (same results, operation and arguments);
    - every layer of the original is computed by at least one item, and a layer computed by several
      (the scheduler's duplication) is used in each of them: a duplicate without purpose is refused;
    - in each item every tensor read is declared there, computed earlier there
      or received earlier by ``get_var``;
    - every ``get_var(SOURCE, v)`` names an item SOURCE that sends ``v`` to it
      (``v = send_var([..., reader, ...], t)``) and receives it under ``t``'s
      name, and every ``send_var`` sends a tensor its item computed.
    """
    names = [d.item for d in items]
    if None in names:
        raise ItemError(f"items: '{items[names.index(None)].name}' is a graph, not a graphitem")
    duplicates = [name for name, count in Counter(names).items() if count > 1]
    if duplicates:
        raise ItemError(f"items: item name {duplicates[0]} is used by {Counter(names)[duplicates[0]]} descriptions")
    reference = {ins.result: ins for ins in original.body}
    computed_by: dict[str, list[str]] = {}
    sends: dict[tuple[str, str], Instruction] = {}  # (item, variablesync) -> send_var
    for d in items:
        for ins in d.body:
            if ins.op == "send_var":
                sends[(d.item, ins.result)] = ins
    for d in items:
        available: set[str] = set()
        for ins in d.body:
            where = f"item {d.item} line {ins.line}" if ins.line else f"item {d.item}"
            if ins.op == "variablesync":
                continue
            if ins.op == "get_var":
                source, sync = ins.arg(0, "source"), ins.arg(1, "data")
                source, sync = getattr(source, "name", source), getattr(sync, "name", sync)
                send = sends.get((source, sync))
                if send is None:
                    raise ItemError(f"{where}: '{ins.result}' = get_var({source}, {sync}) reads a variable that "
                                    f"{source} does not send" + ("" if source in names else f" ({source} is no item)"))
                dests = [getattr(r, "name", r) for r in _as_list(send.arg(0, "dest"))]
                if d.item not in dests:
                    raise ItemError(f"{where}: get_var({source}, {sync}) but {source} sends {sync} only to "
                                    f"{', '.join(dests) or 'nobody'}")
                data = _refs(send.arg(1, "data"))
                if data != [ins.result]:
                    raise ItemError(f"{where}: receives {sync} as '{ins.result}', but {source} sends "
                                    f"'{', '.join(data)}' in it; the received name must be the sent tensor's")
                available.add(ins.result)
                continue
            for source in ins.reads():
                if source not in available:
                    raise ItemError(f"{where}: '{ins.result}' = {ins.op}(...) reads '{source}', which item {d.item} "
                                    "neither declares, computes before nor receives before")
            if ins.op == "send_var":
                continue
            expected = reference.get(ins.result)
            if expected is None or not ins.same_as(expected):
                what = "is no instruction of" if expected is None else "differs from its instruction in"
                raise ItemError(f"{where}: '{ins.text()}' {what} {original.name}")
            if ins.op not in DECLARATIONS:
                computed_by.setdefault(ins.result, []).append(d.item)
            available.add(ins.result)
    missing = [ins.result for ins in original.layers() if ins.result not in computed_by]
    if missing:
        raise ItemError(f"items: layer '{missing[0]}' of {original.name} is computed by no item")
    for name, owners in computed_by.items():  # a duplicate must serve its item (the scheduler's duplication)
        for d in (d for d in items if len(owners) > 1 and d.item in owners):
            used = name in d.outputs or any(name in ins.reads() for ins in d.body if ins.result != name)
            if not used:
                raise ItemError(f"items: layer '{name}' is computed by items {' and '.join(owners)}, and "
                                f"{d.item}'s copy is used by nothing in {d.item} (a duplicate without purpose)")


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]
