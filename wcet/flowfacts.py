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
  A manifest that declares no loops at all (another tool's code: a peer
  generator's manifest, an ``assay.json``) leaves the C alone: every counted
  loop is bounded by its literal bounds (origin ``source``) and every other
  loop is a problem, e.g. a bound read from a structure at run time. That list
  is the qualification finding "N loops Assay cannot bound" for such code.
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

from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from wcet.errors import WcetError
from wcet import annotations as annotations_module
from wcet import csource
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


def facts_for_generated(elf: Path, manifest: dict, sources: Sequence[Path], entry: str | None = None,
                        toolchain: Toolchain | None = None, preprocessor: str = "gcc") -> FlowFacts:
    """The flow facts of ``entry`` (default: the manifest's) in ``elf`` and everything it calls.

    ``manifest`` is the generator's manifest as plain data (docs/manifest.md:
    the full ``manifest.json`` or the small ``assay.json``), ``sources`` the
    generated C files and headers (their directories are the include path;
    a function the DWARF places in one of them is generated code). ``toolchain``
    selects the library annotations; without it, the compiler version the
    ELF's ``.comment`` names does, and annotated functions are recognised by
    their bytes in any multilib. Raises ``FlowFactError`` listing every problem.
    """
    elf, sources = Path(elf), [Path(s) for s in sources]
    entry = entry or manifest_entry(manifest)
    if toolchain is None:
        toolchain = Toolchain.of_elf(elf)
    program = load_program(elf)
    program.function(entry)  # an AnalysisError if the ELF lacks it
    problems: list[str] = []
    source_names = {s.name for s in sources}

    multicalls, sequences = _indirect_calls(program, entry, manifest, problems)
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

    loops = _generated_bounds(program, generated, base, manifest, sources, preprocessor, problems)

    library_loops = {}
    for routine in library:
        for loop in program.loops(routine, base):
            library_loops.setdefault(loop.header, loop)  # shared code reached from several routines: once
    annotations = annotations_module.load_for(toolchain) if toolchain is not None else None
    bounds, library_problems = annotations_module.library_bounds(
        annotations, toolchain.multilib if toolchain else None, program, library_loops.values())
    loops += bounds
    problems += library_problems
    if problems:
        raise FlowFactError(problems, f"flow facts for {entry} in {elf.name}",
                            ORIGIN if manifest_loops(manifest) else SOURCE_ORIGIN)
    return FlowFacts(loops=tuple(loops), multicalls=multicalls, sequences=sequences,
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
            result.append(ManifestLoop(id=str(loop["id"]), var=str(loop.get("var", "")), bound=int(loop["bound"]),
                                       file=PurePosixPath(layer["file"]).name, line=int(loop["line"]),
                                       function=str(layer.get("function", "")), parent=loop.get("parent"),
                                       layer=str(layer.get("name", ""))))
    return result


def _generated_bounds(program: Program, routines: list[int], base: FlowFacts, manifest: dict, all_sources: list[Path],
                      preprocessor: str, problems: list[str]) -> list[LoopBound]:
    if not routines:
        return []
    names = {name for r in routines for name in (program.code.names_at(r) or [program.name(r)])}
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
    m_by_line = {}
    for loop in declared:
        key = (loop.file, loop.line)
        if key in m_by_line:
            problems.append(f"manifest loops {m_by_line[key].id} and {loop.id} both at {loop.file}:{loop.line}")
        m_by_line[key] = loop

    def name(key: tuple[str, int], what: str) -> str:
        return f"{what} at {key[0]}:{key[1]}"

    for key, m in m_by_line.items():
        c = c_by_line.get(key)
        if c is None:
            problems.append(f"manifest loop {m.id} ({m.layer}, {m.function}) at {key[0]}:{key[1]} has no counted "
                            "for loop on that line of the C")
            continue
        if c.bound != m.bound:
            problems.append(f"loop at {key[0]}:{key[1]} in {c.function} ({c.text}): the manifest ({m.id}) says "
                            f"bound {m.bound}, the C says {c.bound}")
        if m.var and c.var != m.var:
            problems.append(f"loop at {key[0]}:{key[1]} in {c.function}: the manifest ({m.id}) says variable "
                            f"'{m.var}', the C has '{c.var}'")
        parent_line = by_id[m.parent].line if m.parent in by_id else None
        if m.parent is not None and m.parent not in by_id:
            problems.append(f"manifest loop {m.id}: parent {m.parent} is not a declared loop")
        elif parent_line != c.parent:
            problems.append(f"loop at {key[0]}:{key[1]} in {c.function}: the manifest nests it in the loop at line "
                            f"{parent_line}, the C in the loop at line {c.parent}")
    for key, c in c_by_line.items():
        if key not in m_by_line and not source_only:
            problems.append(f"loop at {c.where()} ({c.text}, bound {c.bound}) is not in the manifest")

    bounds = []
    seen_lines: dict[tuple[str, int], object] = {}
    headers = {loop.header: loop for loop in binary}
    for loop in binary:
        key = loop.source_line
        if key is None:
            problems.append(f"loop {loop.label()} in generated code has no source line (build with -g)")
            continue
        if key in seen_lines:
            problems.append(f"loops {seen_lines[key].label()} and {loop.label()} share a source line: the C loop "
                            f"cannot be matched to one of them")
            continue
        seen_lines[key] = loop
        c = c_by_line.get(key)
        if c is None:
            missing = f"loop {loop.label()} in generated code has no bound: no counted for loop at {key[0]}:{key[1]}"
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
            bounds.append(LoopBound(function=loop.function, offset=loop.offset, max=c.bound, source=key,
                                    justification=f"C source: {c.text}", origin=SOURCE_ORIGIN))
            continue
        m = m_by_line.get(key)
        if m is None or m.bound != c.bound:
            continue  # reported above; no bound from a disagreement
        bounds.append(LoopBound(function=loop.function, offset=loop.offset, max=c.bound, source=key,
                                justification=f"{m.id} ({m.layer}): {c.text}", origin=ORIGIN))
    for key, c in c_by_line.items():
        if key not in seen_lines:
            problems.append(f"loop at {c.where()} ({c.text}) has no loop in the binary at that line")
    return bounds


def _indirect_calls(program: Program, entry: str, manifest: dict,
                    problems: list[str]) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
    """Targets of indirect calls from the manifest's ``indirect_calls``, keyed by call-site address, and the
    per-execution target ``sequence`` of the entries that give one (the function the k-th execution of the
    call calls during one call of the entry)."""
    declared = manifest.get("indirect_calls", [])
    if not declared:
        return {}, {}
    multicalls: dict[int, tuple[int, ...]] = {}
    sequences: dict[int, tuple[int, ...]] = {}
    graph = program.call_graph(entry)
    unresolved = [(address, what) for routine in graph for address, what in program.cfg(routine).unresolved]
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
        sites = [a for a, _ in unresolved if program.code.line(a) == (file, line)]
        if not sites:
            problems.append(f"manifest indirect call at {file}:{line}: no unresolved indirect call on that line")
        for site in sites:
            multicalls[site] = targets
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
    return multicalls, sequences


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
