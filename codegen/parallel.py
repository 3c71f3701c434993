"""Parallel V2 code: one inference function per core and the Writing/Reading operators (multi-core paper §5.2-5.3).

The schedule (per core, its tasks ``{"node", "start", "end"}`` in cycles, as
``schedule.json`` gives them) decides which layers each core runs; each
layer's code is the V2 code of ``emit.write_layer``, untouched. What is new:

- **Routing.** An instance takes each input from a copy of the producer
  earlier on its own core, else from the producer's earliest-finishing copy on
  another core (the scheduler's rule, ``harness.scheduling.schedule``). One
  message per (producer, source core, destination core), however many
  consumers it feeds there.
- **Channels.** One ``volatile unsigned`` flag and one float array per ordered
  core pair that exchanges data (§5.2), the array as large as the largest
  message. Message k of a channel: the Writing operator waits for
  ``flag == 2k`` (the reader is done with message k-1), copies, and sets
  ``2k+1``; the Reading operator waits for ``2k+1``, copies, and sets
  ``2k+2``. ``k`` is a counter each side keeps for itself (a static only its
  core touches), so consecutive inferences continue the sequence and nothing
  has to be reset. ``__sync_synchronize()`` orders the copy before the flag
  store (release) and the flag load before the copy (acquire).
- **Placement.** A Writing operator follows its producer at once. A Reading
  operator goes before the first task of its core that starts at or after the
  message's write time (the producer's end), and never after its consumer;
  reads of one channel keep the channel's order, and the operators between two
  tasks run in time order, writes before reads at equal times. Every wait is then for an operation of an earlier
  (or equal) scheduled time, so a valid schedule cannot deadlock, and the
  single array per channel is never overwritten before it is read.
- **Memory.** Static only: each core has its own arena holding every tensor it
  computes or receives, without reuse between tensors (simple to check; the
  sequential liveness plan does not apply across cores). The model input is
  read in place by every core; the core that runs the sink writes ``output``.
- **Instrumentation**, compiled only on request: with ``-DASSAY_TRACE`` every
  layer and operator logs a start and an end event (event id, global stamp
  from an atomic counter, sequence number) into a static per-core buffer, the
  start of an operator after its wait and its end before its flag store, so
  the observed order is the protocol's real order; with ``-DASSAY_DELAYS`` the
  code calls ``assay_delay(core, event)`` (provided by the driver) before
  every layer and operator, to shake the interleavings.

Why written here: the paper's operators are a handful of lines of C around
the generator's own layer code; no library emits them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codegen.cwriter import CWriter
from codegen.emit import write_layer
from codegen.errors import UnsupportedModel
from codegen.ir import VIEW_OPS, Graph
from codegen.layers import Context
from codegen.memory import ALIGN, Buffer

VIRTUAL_SINK = "(sink)"  # the scheduler's node joining several sinks: no code
TRACE_WORDS = 3  # per event: event id * 2 + phase (0 start, 1 end), global stamp, sequence number


@dataclass(frozen=True)
class Instance:
    core: int
    position: int  # in the core's task list
    node: int  # index in graph.nodes
    start: int
    end: int


@dataclass
class Message:
    """The output of ``producer`` (an instance on ``src``) sent to core ``dst``: the k-th on its channel."""

    producer: Instance
    dst: int
    tensor: str  # the root tensor copied
    floats: int
    seq: int = 0
    slot: int = 0  # the position of the destination task the read precedes
    events: dict = field(default_factory=dict)  # "write"/"read" -> event id


@dataclass(frozen=True)
class ParallelCode:
    text: str
    header: str
    layers: list[dict]  # one manifest record per layer (its first instance; the others in ``parallel``)
    parallel: dict  # the manifest's ``parallel`` record
    data_symbols: list[str]
    code_symbols: list[str]


def _roots(graph: Graph):
    views = {node.output: node.inputs[0] for node in graph.nodes if node.op in VIEW_OPS}

    def root(tensor: str) -> str:
        while tensor in views:
            tensor = views[tensor]
        return tensor
    return root


def _instances(graph: Graph, schedule: list[list[dict]], cores: int) -> list[list[Instance]]:
    if len(schedule) > cores:
        raise UnsupportedModel(f"the schedule uses {len(schedule)} cores but only {cores} were asked for")
    index = {node.name: number for number, node in enumerate(graph.nodes)}
    out: list[list[Instance]] = []
    for core, tasks in enumerate(list(schedule) + [[]] * (cores - len(schedule))):
        placed = []
        for task in tasks:
            name = task["node"]
            if name == VIRTUAL_SINK:
                continue
            if name not in index:
                raise UnsupportedModel(f"the schedule places '{name}' on core {core}, but the model has no such "
                                       "layer")
            if any(node == index[name] for _, _, node in placed):
                raise UnsupportedModel(f"the schedule places '{name}' twice on core {core}")
            placed.append((int(task["start"]), int(task["end"]), index[name]))
        placed.sort()
        out.append([Instance(core, k, node, start, end) for k, (start, end, node) in enumerate(placed)])
    scheduled = {i.node for tasks in out for i in tasks}
    missing = [node.name for number, node in enumerate(graph.nodes) if node.inputs and number not in scheduled]
    if missing:
        raise UnsupportedModel(f"the schedule does not place layer(s) {', '.join(missing)}")
    return out


def _route(graph: Graph, cores: list[list[Instance]]) -> dict[int, list[Message]]:
    """Messages by destination core (module docstring: routing)."""
    root = _roots(graph)
    producer_of = {node.output: number for number, node in enumerate(graph.nodes) if node.output}
    messages: dict[tuple[int, int, int], Message] = {}
    for tasks in cores:
        for task in tasks:
            for tensor in graph.nodes[task.node].inputs:
                if root(tensor) == graph.input:
                    continue  # the model input: every core reads it in place
                parent = producer_of[tensor]
                if any(t.node == parent for t in tasks[:task.position]):
                    continue
                remote = [t for c, others in enumerate(cores) if c != task.core for t in others if t.node == parent]
                if not remote:
                    raise UnsupportedModel(f"layer '{graph.nodes[task.node].name}' on core {task.core} needs the "
                                           f"output of '{graph.nodes[parent].name}', which no core computes before")
                source = min(remote, key=lambda t: (t.end, t.core))
                key = (parent, source.core, task.core)
                message = messages.setdefault(key, Message(source, task.core, root(tensor),
                                                           graph.tensors[tensor].size, slot=task.position))
                message.slot = min(message.slot, task.position)  # before the first consumer at the latest
    by_dst: dict[int, list[Message]] = {}
    for message in messages.values():
        by_dst.setdefault(message.dst, []).append(message)
    return by_dst


def _place_reads(cores: list[list[Instance]], by_dst: dict[int, list[Message]]) -> list[Message]:
    """Sequence numbers per channel (write order) and read slots (module docstring: placement)."""
    everything = [m for messages in by_dst.values() for m in messages]
    channels: dict[tuple[int, int], list[Message]] = {}
    for message in sorted(everything, key=lambda m: (m.producer.end, m.producer.position, m.dst)):
        channels.setdefault((message.producer.core, message.dst), []).append(message)
    for channel in channels.values():
        for seq, message in enumerate(channel):
            message.seq = seq
            tasks = cores[message.dst]
            natural = next((t.position for t in tasks if t.start >= message.producer.end), len(tasks))
            message.slot = min(message.slot, natural)  # message.slot holds the first consumer's position
        for later, earlier in zip(reversed(channel), list(reversed(channel))[1:]):
            earlier.slot = min(earlier.slot, later.slot)
    return everything


def generate(graph: Graph, prefix: str, schedule: list[list[dict]], cores: int, param_symbols: dict,
             headers: list[str], banner: str, *, omit_wait: str | None = None) -> ParallelCode:
    """The parallel C file and header for ``schedule`` (per core, its tasks ``{"node", "start", "end"}``).

    ``omit_wait`` ("read" or "write") leaves that operator's flag wait out: a
    deliberately broken protocol for mutation tests of the trace checker.
    """
    if cores < 1:
        raise UnsupportedModel(f"at least one core is needed, not {cores}")
    if omit_wait not in (None, "read", "write"):
        raise ValueError(f"omit_wait must be 'read', 'write' or None, not {omit_wait!r}")
    instances = _instances(graph, schedule, cores)
    messages = _place_reads(instances, _route(graph, instances))
    root = _roots(graph)
    producer_of = {node.output: number for number, node in enumerate(graph.nodes) if node.output}
    sinks = {number for number, node in enumerate(graph.nodes) if node.output == graph.output}
    P = prefix.upper()

    # storage per core: the roots it computes or receives
    buffers_by_core: list[dict[str, Buffer]] = []
    arena_sizes: list[int] = []
    for core, tasks in enumerate(instances):
        runs_sink = any(t.node in sinks for t in tasks)
        arena = f"{prefix}core{core}_arena"
        storage = {graph.input: Buffer("input", 0)}
        if runs_sink:
            storage[root(graph.output)] = Buffer("output", 0)
        high = 0
        needed = [graph.nodes[t.node].output for t in tasks if graph.nodes[t.node].output]
        needed += [m.tensor for m in messages if m.dst == core]
        for tensor in needed:
            tensor = root(tensor)
            if tensor not in storage:
                storage[tensor] = Buffer(arena, high)
                high += (graph.tensors[tensor].size + ALIGN - 1) // ALIGN * ALIGN
        buffers_by_core.append({name: storage[root(name)] for name in graph.tensors if root(name) in storage})
        arena_sizes.append(high)

    channels = sorted({(m.producer.core, m.dst) for m in messages})
    capacity = {ch: max(m.floats for m in messages if (m.producer.core, m.dst) == ch) for ch in channels}

    # the items of each core, in order, with event ids
    items: list[list[tuple[str, object]]] = []
    for core, tasks in enumerate(instances):
        sequence: list[tuple[str, object]] = []
        for task in tasks + [None]:
            position = task.position if task else len(tasks)
            boundary = [("read", m) for m in messages if m.dst == core and m.slot == position]
            if sequence:
                last = sequence[-1][1]
                boundary += [("write", m) for m in messages if m.producer == last]
            # time order; at equal times writes first: a core publishes before it waits (two cores that
            # each read what the other writes at the same instant would otherwise wait for each other)
            boundary.sort(key=lambda kv: (kv[1].producer.end, kv[0] == "read", kv[1].producer.core, kv[1].seq))
            sequence += boundary
            if task is not None:
                sequence.append(("layer", task))
        items.append(sequence)
    event = 0
    events: list[list[int]] = []
    for sequence in items:
        ids = []
        for kind, what in sequence:
            ids.append(event)
            if kind != "layer":
                what.events[kind] = event
            event += 1
        events.append(ids)
    trace_len = 2 * max((len(s) for s in items), default=1) or 2

    w = CWriter()
    w.comment(banner)
    w.line("#include <math.h>")
    for header in headers:
        w.line(f'#include "{header}"')
    w.line()
    w.comment("multi-core (§5.2): one flag and one array per ordered core pair; message k of a channel is "
              "written when flag == 2k (flag then 2k+1) and read when flag == 2k+1 (flag then 2k+2)")
    data_symbols = []
    for src, dst in channels:
        w.line(f"static volatile unsigned {prefix}flag_{src}_{dst};")
        w.line(f"static float {prefix}comm_{src}_{dst}[{capacity[(src, dst)]}];")
        w.line(f"static unsigned {prefix}sent_{src}_{dst};  /* messages written: core {src} only */")
        w.line(f"static unsigned {prefix}received_{src}_{dst};  /* messages read: core {dst} only */")
        data_symbols += [f"{prefix}flag_{src}_{dst}", f"{prefix}comm_{src}_{dst}", f"{prefix}sent_{src}_{dst}",
                         f"{prefix}received_{src}_{dst}"]
    for core, size in enumerate(arena_sizes):
        if size:
            w.line(f"static float {prefix}core{core}_arena[{size}];")
            data_symbols.append(f"{prefix}core{core}_arena")
    w.line(f"static unsigned {prefix}runs[{cores}];  /* inferences done, per core (the layers' sequence) */")
    data_symbols.append(f"{prefix}runs")
    w.line()
    w.line("#ifdef ASSAY_TRACE")
    w.line(f"unsigned {prefix}trace[{cores}][{trace_len}][{TRACE_WORDS}];")
    w.line(f"unsigned {prefix}trace_count[{cores}];")
    w.line(f"static unsigned {prefix}clock;")
    with w.block(f"static void {prefix}log(int core, unsigned event, unsigned seq)"):
        w.line(f"const unsigned n = {prefix}trace_count[core];")
        w.line(f"const unsigned stamp = __sync_fetch_and_add(&{prefix}clock, 1u);")
        with w.block(f"if (n < {trace_len}u)"):
            w.line(f"{prefix}trace[core][n][0] = event;")
            w.line(f"{prefix}trace[core][n][1] = stamp;")
            w.line(f"{prefix}trace[core][n][2] = seq;")
        w.line(f"{prefix}trace_count[core] = n + 1u;")
    w.line(f"#define {P}LOG(core, event, phase, seq) {prefix}log(core, (event) * 2u + (phase), seq)")
    w.line("#else")
    w.line(f"#define {P}LOG(core, event, phase, seq) ((void)0)")
    w.line("#endif")
    w.line("#ifdef ASSAY_DELAYS")
    w.line("void assay_delay(int core, int event);")
    w.line(f"#define {P}DELAY(core, event) assay_delay(core, event)")
    w.line("#else")
    w.line(f"#define {P}DELAY(core, event) ((void)0)")
    w.line("#endif")

    layer_records: dict[int, dict] = {}
    per_core = []
    functions = []
    for core, sequence in enumerate(items):
        function = f"{prefix}core{core}"
        functions.append(function)
        ctx = Context(w, graph, buffers_by_core[core], param_symbols)
        records = []
        w.line()
        first = w.line_number + 1
        with w.block(f"void {function}(const float *input, float *output)"):
            w.line("(void)input;")
            w.line("(void)output;")
            for (kind, what), ident in zip(sequence, events[core]):
                w.line()
                w.line(f"{P}DELAY({core}, {ident});")
                if kind == "layer":
                    w.line(f"{P}LOG({core}, {ident}, 0, {prefix}runs[{core}]);")
                    record = write_layer(ctx, what.node, graph.nodes[what.node], producer_of, function)
                    w.line(f"{P}LOG({core}, {ident}, 1, {prefix}runs[{core}]);")
                    layer_records.setdefault(what.node, record)
                    records.append({"kind": "layer", "event": ident, "name": record["name"],
                                    "index": record["index"], "lines": record["lines"], "loops": record["loops"],
                                    "start": what.start, "end": what.end})
                else:
                    records.append(_operator(w, ctx, kind, what, ident, core, prefix, P, graph,
                                             omit_wait == kind))
            w.line(f"{prefix}runs[{core}] += 1u;")
        per_core.append({"core": core, "function": function, "lines": [first, w.line_number],
                         "arena_floats": arena_sizes[core], "items": records})

    # layers the schedule does not place (no inputs: an activation fused into its producer) appear in the
    # manifest with the first instance of that producer's function; they have no code of their own
    layers = []
    for number, node in enumerate(graph.nodes):
        if number in layer_records:
            layers.append(layer_records[number])
        else:
            layers.append({"index": number, "name": node.name, "op": node.kind, "function": functions[0],
                           "lines": [per_core[0]["lines"][0], per_core[0]["lines"][0]], "inputs": [],
                           "input_shapes": [list(s) for s in node.input_shapes],
                           "output_shape": list(node.output_shape), "loops": []})

    parallel = {
        "cores": cores,
        "functions": functions,
        "channels": [{"src": s, "dst": d, "flag": f"{prefix}flag_{s}_{d}", "buffer": f"{prefix}comm_{s}_{d}",
                      "capacity_floats": capacity[(s, d)],
                      "messages": len([m for m in messages if (m.producer.core, m.dst) == (s, d)])}
                     for s, d in channels],
        "trace": {"symbol": f"{prefix}trace", "count_symbol": f"{prefix}trace_count", "length": trace_len,
                  "words": ["event * 2 + phase (0 start, 1 end)", "global stamp", "sequence"]},
        "per_core": per_core,
    }
    header = _header(prefix, graph, functions, cores, trace_len, banner)
    return ParallelCode(w.text(), header, layers, parallel, data_symbols, functions)


def _operator(w: CWriter, ctx: Context, kind: str, message: Message, ident: int, core: int, prefix: str, P: str,
              graph: Graph, omit_wait: bool) -> dict:
    """A Writing or Reading operator (§5.3) at the writer's position; its manifest record."""
    src, dst = message.producer.core, message.dst
    producer = graph.nodes[message.producer.node].name
    start = w.comment(f"{'Writing' if kind == 'write' else 'Reading'} operator: output of '{producer}' "
                      f"({message.floats} floats), core {src} -> core {dst}, message {message.seq} of the channel")
    first_loop = len(w.loops)
    wait_line = _operator_body(w, kind, f"{prefix}flag_{src}_{dst}", f"{prefix}comm_{src}_{dst}",
                               f"{prefix}{'sent' if kind == 'write' else 'received'}_{src}_{dst}",
                               ctx.buffers[message.tensor], message.floats, ident, core, P, omit_wait)
    return {"kind": kind, "event": ident, "src": src, "dst": dst, "seq": message.seq, "layer": producer,
            "floats": message.floats, "write_time": message.producer.end, "lines": [start, w.line_number],
            "wait_line": wait_line, "loops": [loop.record() for loop in w.loops[first_loop:]]}


def _operator_body(w: CWriter, kind: str, flag: str, comm: str, counter: str, local: Buffer, floats: int,
                   ident: int, core: int, P: str, omit_wait: bool) -> int | None:
    """The statements of one operator: flag wait, copy, flag update; the line of the wait (None if left out)."""
    wait = f"2u * {counter}" if kind == "write" else f"2u * {counter} + 1u"
    if omit_wait:
        w.comment("MUTATION: the flag wait is left out")
        wait_line = None
    else:
        wait_line = w.line(f"while ({flag} != {wait}) {{ }}")
    w.line("__sync_synchronize();")
    w.line(f"{P}LOG({core}, {ident}, 0, {counter});")
    with w.loop("i", floats):
        if kind == "write":
            w.line(f"{comm}[i] = {local.at('i')};")
        else:
            w.line(f"{local.at('i')} = {comm}[i];")
    w.line(f"{P}LOG({core}, {ident}, 1, {counter});")
    w.line("__sync_synchronize();")
    w.line(f"{flag} = 2u * {counter} + {'1u' if kind == 'write' else '2u'};")
    w.line(f"{counter} += 1u;")
    return wait_line


def operator_pair(floats: int, prefix: str = "assay_op_") -> tuple[str, dict]:
    """A C file with one Writing and one Reading operator of ``floats`` floats, each a function of its own
    (``<prefix>write(const float *src)``, ``<prefix>read(float *dst)``) around the very statements the
    parallel code inlines, for their WCET analysis per tensor size; and per function its ``wait_line``
    (the busy wait, which the composition accounts for) and ``loops`` (the copy loop, bounded).
    """
    w = CWriter()
    P = prefix.upper()
    w.comment(f"Writing and Reading operators of {floats} floats (codegen.parallel), for WCET analysis")
    w.line(f"#define {P}LOG(core, event, phase, seq) ((void)0)")
    w.line(f"static volatile unsigned {prefix}flag;")
    w.line(f"static float {prefix}comm[{floats}];")
    w.line(f"static unsigned {prefix}sent;")
    w.line(f"static unsigned {prefix}received;")
    functions = {}
    for kind, argument, local in (("write", "const float *src", "src"), ("read", "float *dst", "dst")):
        name = f"{prefix}{kind}"
        first_loop = len(w.loops)
        with w.block(f"void {name}({argument})"):
            wait_line = _operator_body(w, kind, f"{prefix}flag", f"{prefix}comm",
                                       f"{prefix}{'sent' if kind == 'write' else 'received'}", Buffer(local, 0),
                                       floats, 0, 0, P, False)
        functions[name] = {"kind": kind, "wait_line": wait_line,
                           "loops": [loop.record() for loop in w.loops[first_loop:]]}
    return w.text(), functions


def _header(prefix: str, graph: Graph, functions: list[str], cores: int, trace_len: int, banner: str) -> str:
    P = prefix.upper()
    x, y = graph.tensors[graph.input], graph.tensors[graph.output]
    lines = [f"/* {banner} */", f"#ifndef {P}INFERENCE_H", f"#define {P}INFERENCE_H", "",
             f"/* input: {x.size} floats, shape {list(x.shape)} in layout {x.layout}; "
             f"output: {y.size} floats, shape {list(y.shape)} in layout {y.layout} */",
             f"#define {P}INPUT_SIZE {x.size}", f"#define {P}OUTPUT_SIZE {y.size}",
             f"#define {P}CORES {cores}", f"#define {P}TRACE_LENGTH {trace_len}", "",
             "/* one function per core, all called with the same input and output, each on its own core */"]
    lines += [f"void {function}(const float *input, float *output);" for function in functions]
    lines += ["", "#ifdef ASSAY_TRACE", f"extern unsigned {prefix}trace[{cores}][{trace_len}][{TRACE_WORDS}];",
              f"extern unsigned {prefix}trace_count[{cores}];", "#endif", "", f"#endif /* {P}INFERENCE_H */", ""]
    return "\n".join(lines)
