"""The WCET of the Writing and Reading operators per tensor size, from their generated code (§5.2-5.4).

An edge of the scheduling DAG costs one Writing operator on the producer's
core plus one Reading operator on the consumer's; the parallel WCET
composition charges each operator on its core. Both figures come from here:
the generator that writes the parallel code gives its operators' very
statements (flag wait, barrier, copy loop, barrier, flag update, counter) as
two functions for a tensor of ``floats`` floats (its adapter's
``operator_pair``; assay-v2's comes from ``codegen.parallel``), the target's
compiler builds them with its flags into an image, and the WCET library
(``wcet.analyzer``, the same engine and timing model as the layers') bounds
each function.

Flow facts: the copy loop has the bound the generator declares (checked
against the loop the binary has at that C line); the busy wait gets bound 0
(its condition evaluated once and found true): the time spent waiting is not
the operator's, the composition accounts for it by starting the operator no
earlier than the awaited one ended (§5.4). Any other loop is an error, so a
change to the operators cannot go unbounded silently. Library code reached
(e.g. ``__sync_synchronize`` on ARMv4T) takes the toolchain's annotations.
Results are cached per (source, compiler, flags, timing) in the work folder.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from harness import generators
from harness.errors import AssayError
from harness.runners.host import first_diagnostic
from harness.runners.qemu import memory_map_flags
from harness.targets import TargetProfile, compiler_version
from wcet import annotations
from wcet.analyzer import analyze
from wcet.errors import WcetError
from wcet.facts import FlowFacts, LoopBound
from wcet.program import load_program

SOURCE = "operators.c"
MAIN = "int main(void) {{ static float buffer[{floats}]; assay_op_write(buffer); assay_op_read(buffer); return 0; }}\n"


def operator_wcets(floats: int, generator: str, profile: TargetProfile, timing: str, opt: str | None,
                   work: Path) -> dict[str, int]:
    """``{"write": cycles, "read": cycles}``: the WCET bounds of one Writing and one Reading operator of
    ``floats`` floats, as ``generator``'s parallel code has them, on ``profile`` under ``timing``, waits
    excluded (module docstring)."""
    text, functions = generators.get(generator).operator_pair(floats)
    text += MAIN.format(floats=floats)
    flags = profile.flags(opt)
    compiler = profile.compiler_path()
    key = hashlib.sha256(json.dumps([text, compiler_version(compiler), flags, profile.ldflags, profile.libs,
                                     memory_map_flags(profile), timing]).encode()).hexdigest()[:16]
    folder = Path(work) / f"operators-{floats}-{key}"
    cached = folder / "bounds.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SOURCE).write_text(text)
    elf = folder / "operators.elf"
    command = [compiler, *flags, SOURCE, *memory_map_flags(profile), *profile.ldflags, "-o", elf.name,
               *profile.libs]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssayError(f"operators of {floats} floats for {profile.name}: compile error: "
                         f"{first_diagnostic(done.stderr)}")
    try:
        program = load_program(elf)
        facts = annotations.library_facts(elf)
        result = {}
        for name, record in functions.items():
            bounds = tuple(_loop_bounds(program, name, record))
            analysis = analyze(program, name, FlowFacts(loops=bounds).merged(facts), timing)
            result[record["kind"]] = analysis.wcet_cycles
    except WcetError as exc:
        raise AssayError(f"operators of {floats} floats for {profile.name}: WCET analysis: {exc}") from None
    cached.write_text(json.dumps(result) + "\n")
    return result


def _loop_bounds(program, function: str, record: dict) -> list[LoopBound]:
    """Bounds of the operator's loops in the binary, matched by C line: the copy loop and the busy wait."""
    declared = {loop["line"]: loop["bound"] for loop in record["loops"]}
    bounds = []
    for loop in program.loops(function):
        line = loop.source_line[1] if loop.source_line and loop.source_line[0] == SOURCE else None
        if line == record["wait_line"]:
            bounds.append(LoopBound(function=loop.function, offset=loop.offset, max=0, source=loop.source_line,
                                    justification="busy wait: its time is the composition's (§5.4)",
                                    origin="operator_wcet"))
        elif line in declared:
            bounds.append(LoopBound(function=loop.function, offset=loop.offset, max=declared[line],
                                    source=loop.source_line, justification="copy loop (the generator's)",
                                    origin="operator_wcet"))
        else:
            raise AssayError(f"{function}: a loop at {loop.label()} that is neither the copy loop nor the wait")
    missing = [line for line in declared if line not in {b.source[1] for b in bounds}]
    if missing or record["wait_line"] not in {b.source[1] for b in bounds}:
        raise AssayError(f"{function}: the binary lacks the loop at line {(missing or [record['wait_line']])[0]}")
    return bounds
