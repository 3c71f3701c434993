"""Flow facts for generated code: every loop the inference entry can reach, bounded, or an error.

    facts = facts_for_generated(elf, manifest, sources, toolchain=Toolchain.of_compiler("arm-none-eabi-gcc"))
    write_f4(facts, "net.ff"); write_ffx(facts, "net.ffx")

Where the bounds come from:

- **Generated code** (the functions the generated sources and headers define):
  two independent sources that must agree, loop by loop.
  1. the generator's manifest (``layers[*].loops[*]``: ``bound``, ``line``,
     ``var``, ``parent``), known by construction;
  2. the generated C itself, parsed with pycparser (``wcet.csource``): counted
     ``for`` loops with literal bounds.
  Each is matched to a loop of the binary (``wcet.program``: natural loops of
  the routine's CFG) through the DWARF line of the loop header, which at -O0 is
  the line of the ``for``. Errors: a manifest bound or variable that differs
  from the C, a C loop the manifest lacks or the reverse, a C loop with no
  binary loop, a binary loop with no counted C loop, nesting that differs, a
  construct in the generated code that is not a counted loop (``while``,
  ``goto``, an irregular ``for``).
- **Run-time bounds** (assay-v1: a generic library whose loops run to
  ``layer->out_h``, the fields of the layer table the inference loop walks):
  the C gives the bound's expression (``csource``: ``bound_expr``), and the
  value it takes in each call is read from the table's initialiser in the C
  (``csource.initialisers``: element k is the struct the k-th execution of the
  dispatch call passes, ``net[i].layer_type(&net[i], ...)``). The manifest
  gives the same per layer (``loops[*].bound`` with ``bound_expr``, the layer's
  ``net_index``; the dispatch's ``indirect_calls`` entry names the ``table``);
  the two must agree. A context-insensitive bound (OTAWA's: the largest value
  over the layers) is a ``LoopBound``; the per-layer values go into
  ``FlowFacts.executions``: for the k-th execution of the dispatch call, the
  bounds and the activation call's single target that hold during it.
  A manifest that declares no loops at all (another tool's code: a peer
  generator's manifest, an ``assay.json``) leaves the C and the machine code:
  every counted loop is bounded by its literal bounds (origin ``source``); a
  binary loop that no single counted C loop bounds (C++ the parser cannot
  read, a ``while``, inlined copies sharing one line) by the -O0 counter the
  machine code proves (``wcet.binloops``, origin ``binary-counter``, under the
  memory-safety and AAPCS assumptions its docstring states); every other loop
  is a problem, e.g. a bound read from a structure at run time. That list is
  the qualification finding "N loops Assay cannot bound" for such code.
- **Library code** reached from the entry (libgcc soft float, libm):
  ``wcet.annotations`` (per-toolchain file, checked by the function's bytes).
- **Indirect calls**: targets from the manifest's ``indirect_calls`` (``[{"function":
  F, "file": FILE, "line": N, "targets": [NAMES], "sequence": [NAMES]}]``: every
  unresolved indirect call of F whose DWARF line is FILE:N may call those
  functions; the optional ``sequence`` names the function its k-th execution
  calls during one call of the entry, for the analyzer's precise bound); one
  that stays unresolved is an error.
- Recursion among the reachable functions is an error (no bound on depth).

Every problem is collected and ``FlowFactError`` lists them all, each naming
the loop (function + offset, address, source file:line). Nothing is ever
silently unbounded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from wcet.errors import WcetError
from wcet import annotations as annotations_module
from wcet import binloops, csource
from wcet.annotations import Toolchain
from wcet.facts import FlowFacts, LoopBound
from wcet.ffformat import otawa_checksum
from wcet.program import Program, load_program

ORIGIN = "manifest+source"
SOURCE_ORIGIN = "source"  # no loops in the manifest: bounds from the C alone


class FlowFactError(WcetError):
    """Some reachable loop or call cannot be bounded; ``problems`` lists every one. ``origin`` says where the
    bounds were to come from: ``SOURCE_ORIGIN`` for code whose manifest declares no loops."""

    def __init__(self, problems: list[str], subject: str = "flow facts", origin: str = ORIGIN):
        self.problems = list(problems)
        self.origin = origin
        count = len(self.problems)
        super().__init__(f"{subject}: {count} problem{'s' if count != 1 else ''}:\n  " + "\n  ".join(self.problems))


@dataclass(frozen=True)
class ManifestLoop:
    id: str
    var: str
    bound: int
    file: str
    line: int
    function: str
    parent: str | None
    layer: str
    bound_expr: str | None = None  # a run-time bound: the C expression (the struct field it reads)
    net_index: int | None = None  # assay-v1: the element of the layer table the layer's call receives
    bounds: tuple[int, ...] | None = None  # a run-time bound of the entry's own loop: its value per iteration


@dataclass
class _Table:
    """The layer table of a generic inference loop (assay-v1's ``net``), as its C initialiser gives it."""

    name: str
    elements: list[dict]


def facts_for_generated(elf: Path, manifest: dict, sources: Sequence[Path], entry: str | None = None,
                        toolchain: Toolchain | None = None, preprocessor: str = "gcc",
                        annotation_dirs: Sequence[Path] = (annotations_module.ANNOTATION_DIR,)) -> FlowFacts:
    """The flow facts of ``entry`` (default: the manifest's) in ``elf`` and everything it calls.

    ``manifest`` is the generator's manifest as plain data (docs/manifest.md:
    the full ``manifest.json`` or the small ``assay.json``), ``sources`` the
    generated C files and headers (their directories are the include path;
    a function the DWARF places in one of them is generated code). ``toolchain``
    selects the library annotations; without it, the compiler version the
    ELF's ``.comment`` names does, and annotated functions are recognised by
    their bytes in any multilib. ``annotation_dirs``: the folders of annotation
    files, read as one (``annotations.load_for``). Raises ``FlowFactError``
    listing every problem.
    """
    elf, sources = Path(elf), [Path(s) for s in sources]
    entry = entry or manifest_entry(manifest)
    if toolchain is None:
        toolchain = Toolchain.of_elf(elf)
    program = load_program(elf)
    program.function(entry)  # an AnalysisError if the ELF lacks it
    problems: list[str] = []
    source_names = {s.name for s in sources}

    multicalls, sequences, sites = _indirect_calls(program, entry, manifest, problems)
    base = FlowFacts(multicalls=multicalls)
    graph = program.call_graph(entry, base)
    problems += _recursion(program, graph)
    for routine in graph:
        for address, what in program.cfg(routine, base).unresolved:
            if address not in multicalls:
                problems.append(f"unresolved indirect branch at {program.where(address)} ({what}): give its "
                                "targets in the manifest's indirect_calls")

    generated, library = [], []
    declared = set(manifest.get("symbols", {}).get("code", []))
    for routine in graph:
        names = set(program.code.names_at(routine)) or {program.name(routine)}
        line = program.code.line(routine)
        if names & declared or (line is not None and line[0] in source_names):
            generated.append(routine)
        else:
            library.append(routine)

    table = _table(manifest, sources, preprocessor, problems)
    loops, per_layer = _generated_bounds(program, generated, base, manifest, sources, preprocessor, table, problems)
    executions = _executions(program, entry, manifest, table, sites, per_layer, problems)

    library_loops = {}
    for routine in library:
        for loop in program.loops(routine, base):
            library_loops.setdefault(loop.header, loop)  # shared code reached from several routines: once
    annotations = annotations_module.load_for(toolchain, annotation_dirs) if toolchain is not None else None
    bounds, library_problems = annotations_module.library_bounds(
        annotations, toolchain.multilib if toolchain else None, program, library_loops.values())
    loops += bounds
    problems += library_problems
    if problems:
        raise FlowFactError(problems, f"flow facts for {entry} in {elf.name}",
                            ORIGIN if manifest_loops(manifest) else SOURCE_ORIGIN)
    return FlowFacts(loops=tuple(loops), multicalls=multicalls, sequences=sequences, executions=executions,
                     checksum=(elf.name, otawa_checksum(elf)))


def manifest_entry(manifest: dict) -> str:
    """The entry function a manifest names: ``entry.symbol`` (manifest.json) or ``entry`` (assay.json)."""
    entry = manifest.get("entry")
    symbol = entry.get("symbol") if isinstance(entry, dict) else entry
    if not isinstance(symbol, str) or not symbol:
        raise FlowFactError(["the manifest names no entry function"])
    return symbol


def manifest_loops(manifest: dict) -> list[ManifestLoop]:
    """Every loop the manifest declares, with its layer's file and function."""
    result = []
    for layer in manifest.get("layers", []):
        for loop in layer.get("loops", []):
            bounds = loop.get("bounds")
            result.append(ManifestLoop(id=str(loop["id"]), var=str(loop.get("var", "")), bound=int(loop["bound"]),
                                       file=PurePosixPath(loop.get("file", layer["file"])).name,
                                       line=int(loop["line"]), function=str(loop.get("function",
                                                                                     layer.get("function", ""))),
                                       parent=loop.get("parent"), layer=str(layer.get("name", "")),
                                       bound_expr=loop.get("bound_expr"), net_index=layer.get("net_index"),
                                       bounds=None if bounds is None else tuple(int(b) for b in bounds)))
    return result


def _table(manifest: dict, sources: list[Path], preprocessor: str, problems: list[str]) -> _Table | None:
    """The layer table named by the dispatch call's ``indirect_calls`` entry, read from its C initialiser."""
    named = [item for item in manifest.get("indirect_calls", []) if isinstance(item, dict) and item.get("table")]
    if not named:
        return None
    item = named[0]
    file = PurePosixPath(str(item.get("file", ""))).name
    source = next((s for s in sources if s.name == file), None)
    if source is None:
        problems.append(f"the layer table {item['table']}: its call's file {file} is not among the sources")
        return None
    try:
        elements = csource.initialisers(source, str(item["table"]), [s.parent for s in sources], preprocessor)
    except WcetError as exc:
        problems.append(str(exc))
        return None
    return _Table(str(item["table"]), elements)


def _c_values(c: csource.CLoop, m: ManifestLoop, table: _Table | None) -> list[int] | str:
    """The values the run-time bound of ``c`` takes, read from the C's layer table: one (the element the
    manifest loop's layer receives, ``layer->f``) or one per iteration of the loop around it (``t[i].f``);
    or why there are none."""
    if table is None:
        return f"its run-time bound {c.bound_expr} needs the layer table (indirect_calls[*].table in the manifest)"
    expression = c.bound_expr or ""
    if "->" in expression:
        field = expression.split("->", 1)[1]
        if m.net_index is None or not 0 <= m.net_index < len(table.elements):
            return f"layer {m.layer} has no element of {table.name} (net_index {m.net_index})"
        elements = [table.elements[m.net_index]]
    else:
        name, field = expression.split("[", 1)[0], expression.rsplit(".", 1)[1]
        if name != table.name:
            return f"its run-time bound {expression} reads {name}, not the layer table {table.name}"
        elements = table.elements
    values = [element.get(field) for element in elements]
    if not all(isinstance(v, int) for v in values):
        return f"the layer table {table.name} does not give {field} an integer in every element"
    return [max(0, v) for v in values]


def _generated_bounds(program: Program, routines: list[int], base: FlowFacts, manifest: dict, all_sources: list[Path],
                      preprocessor: str, table: _Table | None,
                      problems: list[str]) -> tuple[list[LoopBound], dict[int, list[LoopBound]]]:
    """The context-insensitive bounds of the generated loops, and per element of the layer table (assay-v1)
    the bounds of the run-time-bounded loops during that element's call."""
    if not routines:
        return [], {}
    names = {name for r in routines for name in (program.code.names_at(r) or [program.name(r)])}
    owner = {loop.header: r for r in routines for loop in program.loops(r, base)}  # the routine of each loop
    binary = [loop for r in routines for loop in program.loops(r, base)]
    files = {program.code.line(r)[0] for r in routines if program.code.line(r)}
    c_files = [s for s in all_sources if s.suffix == ".c"]
    in_header = any(s.name in files and s.suffix != ".c" for s in all_sources)  # header-only code: every .c
    sources = (c_files if in_header else [s for s in c_files if s.name in files]) or c_files
    include_dirs = list(dict.fromkeys(s.parent for s in all_sources))
    parsed = csource.source_loops(sources, functions=names, include_dirs=include_dirs, compiler=preprocessor,
                                  owned={s.name for s in all_sources})
    first = len(problems)  # where the C's problems start in the list
    problems += parsed.problems
    c_by_line = {}
    for loop in parsed.loops:
        key = (loop.file, loop.line)
        if key in c_by_line:
            problems.append(f"{loop.where()}: two for loops on one line; the line table cannot tell them apart")
        c_by_line[key] = loop

    declared = manifest_loops(manifest)
    source_only = not declared  # another tool's code: the C's literal bounds alone
    by_id = {m.id: m for m in declared}
    m_by_line: dict[tuple[str, int], list[ManifestLoop]] = {}
    for loop in declared:
        key = (loop.file, loop.line)
        shared = m_by_line.setdefault(key, [])
        if shared and loop.bound_expr is None:
            problems.append(f"manifest loops {shared[0].id} and {loop.id} both at {loop.file}:{loop.line}")
        shared.append(loop)

    values: dict[tuple[str, int], dict[int | None, list[int]]] = {}  # line -> net index -> C values
    for key, ms in m_by_line.items():
        c = c_by_line.get(key)
        if c is None:
            for m in ms:
                problems.append(f"manifest loop {m.id} ({m.layer}, {m.function}) at {key[0]}:{key[1]} has no "
                                "counted for loop on that line of the C")
            continue
        agreed: dict[int | None, list[int]] = {}
        for m in ms:
            where = f"loop at {key[0]}:{key[1]} in {c.function}"
            if c.bound is not None:
                if m.bound != c.bound:
                    problems.append(f"{where} ({c.text}): the manifest ({m.id}) says bound {m.bound}, the C says "
                                    f"{c.bound}")
                else:
                    agreed[m.net_index] = [c.bound]
            elif m.bound_expr != c.bound_expr:
                problems.append(f"{where}: the manifest ({m.id}) says its bound is {m.bound_expr or m.bound}, the "
                                f"C runs it to {c.bound_expr}")
            else:
                found = _c_values(c, m, table)
                claimed = list(m.bounds) if m.bounds is not None and len(found) != 1 else [m.bound]
                if isinstance(found, str):
                    problems.append(f"{where} ({m.id}, {m.layer}): {found}")
                elif found != claimed or m.bound != max(found, default=0):
                    problems.append(f"{where} ({m.id}, {m.layer}): the manifest says {c.bound_expr} = "
                                    f"{m.bounds or m.bound}, the C's {table.name} gives {found}")
                else:
                    agreed[m.net_index] = found
            if m.var and c.var != m.var:
                problems.append(f"{where}: the manifest ({m.id}) says variable '{m.var}', the C has '{c.var}'")
            parent_line = by_id[m.parent].line if m.parent in by_id else None
            if m.parent is not None and m.parent not in by_id:
                problems.append(f"manifest loop {m.id}: parent {m.parent} is not a declared loop")
            elif parent_line != c.parent:
                problems.append(f"{where}: the manifest nests it in the loop at line {parent_line}, the C in the "
                                f"loop at line {c.parent}")
        if len(agreed) == len({m.net_index for m in ms}):
            values[key] = agreed
    for key, c in c_by_line.items():
        if key not in m_by_line and not source_only:
            bound = c.bound if c.bound is not None else c.bound_expr
            problems.append(f"loop at {c.where()} ({c.text}, bound {bound}) is not in the manifest")

    bounds: list[LoopBound] = []
    per_layer: dict[int, list[LoopBound]] = {}
    seen_lines: dict[tuple[str, int], object] = {}
    headers = {loop.header: loop for loop in binary}
    per_line = Counter(loop.source_line for loop in binary)
    counters = binloops.BinaryCounters(program, base) if source_only else None
    by_machine_code: set = set()  # lines whose loops the machine code bounds (their C problems are answered)
    left: set = set()  # lines with a loop left unbounded
    for loop in binary:
        key = loop.source_line
        c = c_by_line.get(key) if key is not None else None
        machine = ""
        if counters is not None and (c is None or c.bound is None or per_line[key] > 1):
            # another tool's code, and the C gives no single counted loop for it: the binary's own counter
            found = counters.bound(owner[loop.header], loop)
            if isinstance(found, LoopBound):
                bounds.append(found)
                by_machine_code.add(key)
                seen_lines.setdefault(key, loop)
                continue
            machine = f" (machine code: {found})"
            left.add(key)
            if key is not None and per_line[key] > 1:  # which binary loop the C's loop is cannot be told
                problems.append(f"loop {loop.label()} shares its source line with {per_line[key] - 1} other "
                                f"loop{'s' if per_line[key] > 2 else ''}: the C loop cannot be matched to it{machine}")
                seen_lines.setdefault(key, loop)
                continue
        if key is None:
            problems.append(f"loop {loop.label()} in generated code has no source line (build with -g){machine}")
            continue
        if key in seen_lines:
            problems.append(f"loops {seen_lines[key].label()} and {loop.label()} share a source line: the C loop "
                            f"cannot be matched to one of them{machine}")
            continue
        seen_lines[key] = loop
        if c is None:
            missing = (f"loop {loop.label()} in generated code has no bound: no counted for loop at {key[0]}:{key[1]}"
                       f"{machine}")
            if key in parsed.problem_lines:  # one entry per loop: the C's reason, then the binary loop it leaves
                problems[first + parsed.problem_lines[key]] += f"; {missing}"
            else:
                problems.append(missing)
            continue
        parent = headers.get(loop.parent)
        binary_parent_line = parent.source_line[1] if parent is not None and parent.source_line else None
        if binary_parent_line != c.parent:
            problems.append(f"loop {loop.label()}: in the binary it is nested in the loop at line "
                            f"{binary_parent_line}, in the C in the loop at line {c.parent}")
        if source_only:
            if c.bound is None:  # e.g. ``i < layer->n``: no manifest gives the value
                problems.append(f"{c.where()}: the bound {c.bound_expr} is read at run time; loop {loop.label()}"
                                f"{machine}")
            else:
                bounds.append(LoopBound(function=loop.function, offset=loop.offset, max=c.bound, source=key,
                                        justification=f"C source: {c.text}", origin=SOURCE_ORIGIN))
            continue
        if key not in values:
            continue  # reported above; no bound from a disagreement
        ms = m_by_line[key]
        by_layer = values[key]
        every = [v for found in by_layer.values() for v in found]
        ids = ", ".join(m.id for m in ms[:4]) + (", ..." if len(ms) > 4 else "")
        if c.bound is not None:
            bounds.append(LoopBound(function=loop.function, offset=loop.offset, max=c.bound, source=key,
                                    justification=f"{ids} ({ms[0].layer}): {c.text}", origin=ORIGIN))
            continue
        own = len(every) > 1 and len(by_layer) == 1  # the entry's own loop, a value per iteration around it
        bounds.append(LoopBound(function=loop.function, offset=loop.offset, max=max(every, default=0),
                                total=sum(every) if own else None, source=key, origin=ORIGIN,
                                justification=f"{ids}: {c.text}, the largest of {c.bound_expr} over the "
                                              f"{len(every)} {'iterations' if own else 'layers'} (C table "
                                              f"{table.name if table else '?'})"))
        if own:
            continue
        for index, found in by_layer.items():
            if index is not None:
                per_layer.setdefault(index, []).append(LoopBound(
                    function=loop.function, offset=loop.offset, max=found[0], source=key, origin=ORIGIN,
                    justification=f"{c.text} = {found[0]} in the call for {table.name}[{index}]"))
    for key, c in c_by_line.items():
        if key not in seen_lines:
            problems.append(f"loop at {c.where()} ({c.text}) has no loop in the binary at that line")
    answered = {first + parsed.problem_lines[key] for key in by_machine_code - left if key in parsed.problem_lines}
    problems[:] = [problem for n, problem in enumerate(problems) if n not in answered]
    return bounds, per_layer


def _executions(program: Program, entry: str, manifest: dict, table: _Table | None,
                sites: dict[tuple[str, int], list[int]], per_layer: dict[int, list[LoopBound]],
                problems: list[str]) -> dict[int, tuple[FlowFacts, ...]]:
    """Per execution of the entry's dispatch call through the layer table (assay-v1's ``net[i].layer_type``):
    the facts that hold during it, i.e. the loop bounds of element i and the single target of the layer
    function's own indirect call (``layer->actv_function``), both read from the C's table and checked against
    the manifest's sequences."""
    if table is None:
        return {}
    calls = [item for item in manifest.get("indirect_calls", []) if isinstance(item, dict)]
    dispatch = next(item for item in calls if item.get("table") == table.name)
    where = f"{PurePosixPath(str(dispatch.get('file', ''))).name}:{dispatch.get('line')}"
    field = str(dispatch.get("expression", "")).rsplit(".", 1)[-1]
    in_c = [element.get(field) for element in table.elements]
    if dispatch.get("function") != entry or in_c != dispatch.get("sequence"):
        problems.append(f"the dispatch call at {where}: the manifest's sequence {dispatch.get('sequence')} is not "
                        f"the C table's {table.name}[*].{field} {in_c} in {entry}")
        return {}
    dispatch_sites = sites.get((PurePosixPath(str(dispatch["file"])).name, int(dispatch["line"])), [])
    inner = {}  # layer function -> (its indirect call's sites, the struct field it calls, manifest sequence)
    for item in calls:
        if item is dispatch or "->" not in str(item.get("expression", "")):
            continue
        key = (PurePosixPath(str(item.get("file", ""))).name, int(item.get("line", 0)))
        inner[item.get("function")] = (sites.get(key, []), str(item["expression"]).split("->", 1)[1],
                                       item.get("sequence"))
    executions = []
    for index, element in enumerate(table.elements):
        multicalls = {}
        function = element.get(field)
        if function in inner:
            calls_at, member, sequence = inner[function]
            target = element.get(member)
            try:
                address = program.function(str(target)).start
            except WcetError as exc:
                problems.append(f"{table.name}[{index}].{member}: {exc}")
                continue
            multicalls = {site: (address,) for site in calls_at}
        executions.append(FlowFacts(loops=tuple(per_layer.get(index, ())), multicalls=multicalls))
    for function, (_, member, sequence) in inner.items():
        in_c = [element.get(member) for element in table.elements if element.get(field) == function]
        if sequence is not None and sequence != in_c:
            problems.append(f"the {member} call in {function}: the manifest's sequence {sequence} is not the C "
                            f"table's {in_c}")
    if len(executions) != len(table.elements):
        return {}
    return {site: tuple(executions) for site in dispatch_sites}


def _indirect_calls(program: Program, entry: str, manifest: dict, problems: list[str]) \
        -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]], dict[tuple[str, int], list[int]]]:
    """Targets of indirect calls from the manifest's ``indirect_calls``, keyed by call-site address, the
    per-execution target ``sequence`` of the entries that give one (the function the k-th execution of the
    call calls during one call of the entry), and the call sites of each entry's (file, line)."""
    declared = manifest.get("indirect_calls", [])
    if not declared:
        return {}, {}, {}
    lines: dict[tuple[str, int], list[int]] = {}
    multicalls: dict[int, tuple[int, ...]] = {}
    sequences: dict[int, tuple[int, ...]] = {}
    items = []
    for item in declared:
        try:
            file, line = PurePosixPath(item["file"]).name, int(item["line"])
            targets = tuple(program.function(name).start for name in item["targets"])
            sequence = item.get("sequence")
            if sequence is not None and (not isinstance(sequence, list) or
                                         not all(isinstance(name, str) for name in sequence)):
                raise ValueError("sequence must be a list of function names")
        except (KeyError, TypeError, ValueError, AttributeError, WcetError) as exc:
            problems.append(f"manifest indirect_calls entry {item!r}: {exc}")
            continue
        items.append((item, file, line, targets, sequence))
        lines[(file, line)] = []
    # resolving a call reaches more code, with more indirect calls (V1: the layer functions' activation call)
    seen: set[int] = set()
    while True:
        resolved = FlowFacts(multicalls=multicalls)
        new = [address for routine in program.call_graph(entry, resolved)
               for address, _ in program.cfg(routine, resolved).unresolved if address not in seen]
        if not new:
            break
        for address in new:
            seen.add(address)
            for _, file, line, targets, _ in items:
                if program.code.line(address) == (file, line):
                    lines[(file, line)].append(address)
                    multicalls[address] = targets
    for item, file, line, targets, sequence in items:
        sites = lines[(file, line)]
        if not sites:
            problems.append(f"manifest indirect call at {file}:{line}: no unresolved indirect call on that line")
        if sequence is None:
            continue
        strangers = sorted(set(sequence) - set(item["targets"]))
        if strangers:
            problems.append(f"manifest indirect call at {file}:{line}: its sequence names {', '.join(strangers)}, "
                            "not among its targets")
        elif len(sites) > 1:
            problems.append(f"manifest indirect call at {file}:{line}: a sequence for {len(sites)} indirect calls "
                            "on one line cannot say which call it describes")
        else:
            for site in sites:
                sequences[site] = tuple(program.function(name).start for name in sequence)
    return multicalls, sequences, lines


def _recursion(program: Program, graph: dict[int, list[int]]) -> list[str]:
    """A problem for each call cycle among the reachable routines."""
    problems, state = [], {}

    def visit(node: int, path: list[int]) -> None:
        state[node] = 1
        for callee in graph.get(node, []):
            if state.get(callee) == 1:
                cycle = path[path.index(callee):] + [callee] if callee in path else [node, callee]
                problems.append("recursion (no bound on its depth): " + " -> ".join(program.name(a) for a in cycle))
            elif callee not in state:
                visit(callee, path + [callee])
        state[node] = 2

    for root in graph:
        if root not in state:
            visit(root, [root])
    return problems
