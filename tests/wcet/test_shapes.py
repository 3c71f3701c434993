"""Code shapes of the generation strategies: indirect calls with per-execution targets (V1) and jump tables.

Hand-written programs (tests/wcet/programs/dispatch.c, switch.c) are built for both ARM targets with the
targets' own profiles, run under QEMU with the counting plugin (exact per-address counts per call of the
entry), priced with the same timing models, and bounded:

- dispatch.c, a V1-like layer loop calling through function pointers: the measured maximum <= the precise
  bound (the call sequence, virtually unrolled) <= the context-insensitive bound (each call charged its
  dearest target, what OTAWA computes from multicall facts), the precise bound strictly tighter, and the
  targets QEMU saw called agree with the sequence;
- switch.c, a switch compiled to a table branch in otherwise straight-line code, at -O0 and -O2: the
  disassembly holds a table branch, no flow fact is needed, and the WCET equals the most cycles measured
  over every switch value (each case, a gap, above the range, a negative value): brute-force enumeration
  of the paths.
"""

import re
import shutil
import subprocess

import numpy as np
import programs
import pytest

from harness import targets
from harness.generators.generated import GeneratedCode
from harness.measurement import cycles, execcount
from harness.runners import qemu
from wcet import annotations, timing
from wcet.analyzer import analyze, reachable_loops
from wcet.errors import AnalysisError
from wcet.facts import FlowFacts, LoopBound
from wcet.program import load_program

_TOOLS = ("arm-none-eabi-gcc", "qemu-arm", "qemu-system-arm", "gcc")
needs_tools = pytest.mark.skipif(not all(shutil.which(t) for t in _TOOLS), reason="ARM toolchain or QEMU missing")
TARGETS = ("arm7tdmi", "cortex-m4f")


def built(source: str, size: int, target: str, opt: str, directory):
    """``source`` of tests/wcet/programs built as an Assay prebuilt item (entry ``probe``) for ``target``."""
    (directory / source).write_text((programs.HERE / source).read_text())
    (directory / "assay.json").write_text(f'{{"entry": "probe", "input_size": {size}, "output_size": {size}, '
                                          f'"input_layout": "C", "output_layout": "C", "sources": ["{source}"]}}')
    return qemu.build(GeneratedCode.from_directory(directory), directory / "build", targets.get(target), opt)


def words(values, size: int) -> np.ndarray:
    """Inputs whose first words carry raw bit patterns (the programs read them as unsigned integers)."""
    rows = np.zeros((len(values), size), dtype=np.uint32)
    rows[:, :len(values[0])] = np.asarray(values, dtype=np.uint64).astype(np.uint32)
    return rows.view(np.float32)


def measured(build, inputs, model, tmp_path):
    counts = execcount.count(build, inputs, timeout=300, cache_dir=tmp_path / "plugin")
    return counts, cycles.price(counts, model).cycles.sum(axis=1)


# --------------------------------------------------------------------------- indirect calls (V1)


def dispatch_facts(program, elf):
    """Loop bounds from the LOOP markers, the call sites by their CALL markers, with targets and sequences."""
    lines = {name: number for number, text in enumerate((programs.HERE / "dispatch.c").read_text().splitlines(), 1)
             for name in re.findall(r"CALL: (\w+)", text)}
    sites = {name: next(a for a, _ in program.cfg("probe").unresolved if program.code.line(a) == ("dispatch.c", line))
             for name, line in lines.items()}
    start = {name: program.functions[name].start for name in ("copy", "scale", "mix", "relu", "identity")}
    sequences = {sites["layer_type"]: tuple(start[n] for n in ("scale", "copy", "mix", "copy", "scale")),
                 sites["actv"]: tuple(start[n] for n in ("relu", "identity", "relu", "identity", "identity"))}
    multicalls = {site: tuple(dict.fromkeys(sequence)) for site, sequence in sequences.items()}
    by_line = {loop.source_line[1]: loop for loop in reachable_loops(program, "probe", FlowFacts(multicalls=multicalls))
               if loop.source_line and loop.source_line[0] == "dispatch.c"}
    marks = programs.loop_lines("dispatch.c")
    assert sorted(by_line) == sorted(line for line, _, _ in marks.values())
    loops = tuple(LoopBound(by_line[line].function, by_line[line].offset, bound) for line, bound, _ in marks.values())
    return FlowFacts(loops=loops, multicalls=multicalls).merged(annotations.library_facts(elf)), sequences


@needs_tools
@pytest.mark.arm
@pytest.mark.parametrize("target", TARGETS)
def test_precise_bound_of_indirect_calls_lies_between_measured_and_context_insensitive(tmp_path, target):
    build = built("dispatch.c", 8, target, "-O0", tmp_path)
    program = load_program(build.elf)
    facts, sequences = dispatch_facts(program, build.elf)
    rng = np.random.default_rng(0)
    inputs = words(rng.integers(0, 200, size=(12, 8)), 8)
    for name in ("trivial", targets.get(target).timing):
        model = timing.get(name)
        counts, observed = measured(build, inputs, model, tmp_path)
        insensitive = analyze(program, "probe", facts, model)
        assert insensitive.wcet_cycles_precise is None  # no sequences: one figure
        both = analyze(program, "probe", FlowFacts(loops=facts.loops, multicalls=facts.multicalls,
                                                  sequences=sequences), model)
        assert both.wcet_cycles == insensitive.wcet_cycles and both.exact
        assert observed.max() <= both.wcet_cycles_precise < both.wcet_cycles, name
        # mix (8 x 8 products) charged at all five layer calls instead of one: the precise bound saves at
        # least four times the difference between mix and copy
        mix, copy = (analyze(program, f, facts, model).wcet_cycles for f in ("mix", "copy"))
        assert both.wcet_cycles - both.wcet_cycles_precise >= 2 * (mix - copy)
    # the targets QEMU saw called, per probe call, are those of the sequences
    for call in counts.calls:
        executions = call.per_address()
        for name, times in (("scale", 2), ("copy", 2), ("mix", 1), ("relu", 2), ("identity", 3)):
            assert executions.get(program.functions[name].start) == times, name


@needs_tools
@pytest.mark.arm
def test_a_sequence_naming_a_function_outside_the_targets_is_refused(tmp_path):
    build = built("dispatch.c", 8, "arm7tdmi", "-O0", tmp_path)
    program = load_program(build.elf)
    facts, sequences = dispatch_facts(program, build.elf)
    site = min(sequences)
    wrong = {**sequences, site: sequences[site][:-1] + (program.functions["probe"].start,)}
    with pytest.raises(AnalysisError, match=rf"the target sequence of the call at {site:#x} names probe"):
        analyze(program, "probe", FlowFacts(loops=facts.loops, multicalls=facts.multicalls, sequences=wrong))


# --------------------------------------------------------------------------- jump tables

TABLE_BRANCH = re.compile(r"\b(ldrls\s+pc, \[pc, r\d+, lsl #2\]|addls\s+pc, pc, r\d+, lsl #2|tbb\s+\[pc, r\d+\]|"
                          r"tbh\s+\[pc, r\d+, lsl #1\]|ldr(\.w)?\s+pc, \[r\d+, r\d+, lsl #2\])")


@needs_tools
@pytest.mark.arm
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("target", TARGETS)
def test_jump_tables_are_resolved_and_the_wcet_is_the_worst_switch_value(tmp_path, target, opt):
    build = built("switch.c", 1, target, opt, tmp_path)
    disassembly = subprocess.run(["arm-none-eabi-objdump", "-d", str(build.elf)], capture_output=True, text=True,
                                 check=True).stdout
    branches = TABLE_BRANCH.findall(disassembly)
    assert branches, "gcc emitted no table branch"
    if target == "cortex-m4f" and opt == "-O2":
        assert any(b[0].startswith("tbh") for b in branches)  # case 6 is too far for tbb
    program = load_program(build.elf)
    values = [[v] for v in (*range(10), 0x7FFFFFFF, 0xFFFFFFFF)]  # each case, a gap, defaults, negative
    for name in ("trivial", targets.get(target).timing):
        model = timing.get(name)
        _, observed = measured(build, words(values, 1), model, tmp_path)
        result = analyze(program, "probe", FlowFacts(), model)  # no fact: the tables are read from the ELF
        assert result.exact and result.wcet_cycles == observed.max(), name


@needs_tools
def test_a_table_branch_without_its_range_check_is_an_error_naming_it(tmp_path):
    source = tmp_path / "bare.S"
    source.write_text(".syntax unified\n.arm\n.global entry\n.type entry, %function\nentry:\n"
                      "    ldr pc, [pc, r0, lsl #2]\n    b entry\n.word entry\n.size entry, .-entry\n")
    elf = tmp_path / "bare.elf"
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=arm7tdmi", "-nostdlib", "-nostartfiles", "-Wl,-e,entry",
                    "-Wl,-Ttext=0x8000", str(source), "-o", str(elf)], check=True)
    with pytest.raises(AnalysisError, match=r"jump table without a range check .* at 0x8000 in entry"):
        analyze(elf, "entry", None, "trivial")
