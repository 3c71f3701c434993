"""Assay against OTAWA (``wcet.crosscheck``): every flow-fact statement form Assay writes, in F4 and FFX, on
hand-written programs, through the real OTAWA; and the checks that explain a difference, on made-up cases.

Each statement form is written by Assay's writers (``wcet.ffformat.write_f4``/``write_ffx``) for
tests/wcet/programs/shapes.c and switch.c built for both ARM targets, and both tools bound the function from the
file. The figures must be equal, or the difference must be one of ``crosscheck.OTAWA_ERRORS``, recognised by its
check from the decodings and figures of that very run: the expected outcome of each case is written here, so an
OTAWA that changes its behaviour (or an Assay that does) fails a test.
"""

import dataclasses
import subprocess

import programs
import pytest

from wcet import crosscheck, ffformat
from wcet.armcode import flow
from wcet.facts import FlowFacts, LoopBound
from wcet.program import load_program

needs_gcc = pytest.mark.skipif(not programs.HAVE_GCC, reason="arm-none-eabi-gcc not installed")
TARGETS = ("arm7tdmi", "cortex-m4")


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    if not programs.HAVE_GCC:
        pytest.skip("arm-none-eabi-gcc not installed")
    directory = tmp_path_factory.mktemp("crosscheck-shapes")
    return {target: programs.build("shapes.c", target, directory) for target in TARGETS}


def form_cases(elf):
    """name -> (function, facts): the statement forms, each applied where it changes something or must."""
    program = load_program(elf)
    marks = programs.loop_lines()
    by_line = {loop.source_line[1]: loop for name in ("nested", "early_exit", "calls_in_loop", "triangular")
               for loop in program.loops(name)}
    loops = tuple(LoopBound(by_line[line].function, by_line[line].offset, bound, total)
                  for line, bound, total in marks.values())  # function-relative, and `max N total T`
    absolute = tuple(loop if loop.function != "early_exit"
                     else LoopBound(None, program.address("early_exit") + loop.offset, loop.max) for loop in loops)
    nested_calls = [edge.site for edge in program.cfg("entry").edges
                    if edge.kind == "call" and program.address("nested") in edge.callees]
    context = loops + tuple(LoopBound(loop.function, loop.offset, 2, None, (nested_calls[0],))
                            for loop in loops if loop.function == "nested")
    indirect = [address for address, _ in program.cfg("pointer_call").unresolved]
    diamond = program.cfg("diamond")
    conditional = [b.last.address for b in diamond.blocks.values()
                   if flow(b.last).kind == "branch" and not flow(b.last).final]
    final = [b.last.address for b in diamond.blocks.values() if flow(b.last).kind == "branch" and flow(b.last).final]
    base = FlowFacts(loops=loops)
    return {
        "loop": ("entry", base),
        "loop-absolute": ("entry", FlowFacts(loops=absolute)),
        "loop-in-context": ("entry", FlowFacts(loops=context)),
        "multicall": ("pointer_call", FlowFacts(multicalls={site: (program.address("twice"), program.address("square"))
                                                            for site in indirect})),
        "noreturn": ("entry", base._replace(noreturn=frozenset({"triangular"}))),
        "nocall": ("entry", base._replace(nocall=frozenset({"diamond"}))),
        "ignoreseq": ("entry", base._replace(ignoreseq=frozenset(conditional[:1]))),
        "ignorecontrol": ("entry", base._replace(ignorecontrol=frozenset(final[:1]))),
        "ignore-entry": ("entry", base._replace(ignore_entry=frozenset({"twice"}))),
        "preserve": ("entry", base._replace(preserve=frozenset(conditional[:1]))),  # F4 only
        "force": ("entry", base._replace(forced={final[0]: "branch"})),  # F4 only
    }


# (case, target, format) -> the declared OTAWA error that explains the difference; every other case agrees
EXPECTED = {
    ("loop-in-context", "arm7tdmi", ".ff"): "context-bounds-ignored",
    ("loop-in-context", "arm7tdmi", ".ffx"): "context-bounds-ignored",
    ("loop-in-context", "cortex-m4", ".ff"): "context-bounds-ignored",
    ("loop-in-context", "cortex-m4", ".ffx"): "context-bounds-ignored",
    ("multicall", "arm7tdmi", ".ffx"): "ffx-multicall-not-a-call",  # mov lr, pc; bx r3
}
CASES = ("loop", "loop-absolute", "loop-in-context", "multicall", "noreturn", "nocall", "ignoreseq", "ignorecontrol",
         "ignore-entry", "preserve", "force")


@pytest.mark.otawa
@needs_gcc
@pytest.mark.parametrize("suffix", [".ff", ".ffx"])
@pytest.mark.parametrize("target", TARGETS)
def test_every_statement_form_gives_otawas_figure_or_a_declared_otawa_error(real_otawa, shapes, target, suffix,
                                                                            tmp_path):
    elf = shapes[target]
    cases = form_cases(elf)
    assert set(cases) == set(CASES)
    write = ffformat.write_f4 if suffix == ".ff" else ffformat.write_ffx
    checked = 0
    for name, (function, facts) in cases.items():
        if suffix == ".ffx" and name in ("preserve", "force"):
            with pytest.raises(ffformat.FlowFactFormatError, match="has no FFX form"):
                write(facts, elf, function)
            continue
        path = tmp_path / f"{name}{suffix}"
        path.write_text(write(facts, elf, function))
        check = crosscheck.cross_check(elf, function, path, home=real_otawa.home, timeout=120)
        expected = EXPECTED.get((name, target, suffix))
        assert check.status == ("explained" if expected else "agree"), (name, check.describe())
        if expected:
            assert check.explanation.name == expected, (name, check.describe())
        checked += 1
    assert checked == len(CASES) - (2 if suffix == ".ffx" else 0)


SWITCH_FLAGS = {"arm7tdmi": ["-mcpu=arm7tdmi", "-marm"],
                "cortex-m4": ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]}


def build_switch(target, opt, directory):
    elf = directory / f"switch-{target}{opt}.elf"
    subprocess.run(["arm-none-eabi-gcc", *SWITCH_FLAGS[target], opt, "-g", "-nostdlib", "-nostartfiles",
                    "-Wl,-e,probe", "-Wl,-Ttext=0x8000", str(programs.HERE / "switch.c"), "-o", str(elf)],
                   check=True, capture_output=True)
    return elf


def table_facts(elf):
    """``multibranch`` facts giving each table branch the targets Assay reads from the table (its branch edges)."""
    program = load_program(elf)
    tables = {}
    for entry in program.call_graph("probe", FlowFacts()):
        cfg = program.cfg(entry, FlowFacts())
        for block in cfg.blocks.values():
            if flow(block.last).kind in ("jump-table", "indirect-jump"):
                tables[block.last.address] = tuple(sorted({e.target for e in cfg.edges
                                                           if e.source == block.start and e.kind == "branch"}))
    assert tables, "no table branch"
    return FlowFacts(multibranches=tables)


@pytest.mark.otawa
@needs_gcc
@pytest.mark.parametrize("target, opt, without, with_multibranch", [
    ("arm7tdmi", "-O0", "unresolved-indirect-branch", None),  # ldrls pc, [pc, r3, lsl #2]
    ("arm7tdmi", "-O2", "unresolved-indirect-branch", None),
    ("cortex-m4", "-O0", "ldr-pc-not-a-branch", "ldr-pc-not-a-branch"),  # ldr.w pc, [r2, r3, lsl #2]
    ("cortex-m4", "-O2", "unresolved-indirect-branch", None),  # tbh
])
def test_switch_tables_with_and_without_multibranch(real_otawa, tmp_path, target, opt, without, with_multibranch):
    """Without a fact, OTAWA stops at a table branch (its figure is far too low); with Assay's ``multibranch``
    statements it follows the table as Assay does, except where its decoder does not see a branch at all."""
    elf = build_switch(target, opt, tmp_path)
    bare = tmp_path / "bare.ff"
    bare.write_text(ffformat.write_f4(FlowFacts(), elf, "probe"))
    check = crosscheck.cross_check(elf, "probe", bare, home=real_otawa.home, timeout=120)
    assert check.status == "explained" and check.explanation.name == without, check.describe()
    assert check.otawa_cycles < check.assay_cycles and check.divergence.address in table_facts(elf).multibranches
    for suffix, write in ((".ff", ffformat.write_f4), (".ffx", ffformat.write_ffx)):
        path = tmp_path / f"tables{suffix}"
        path.write_text(write(table_facts(elf), elf, "probe"))
        check = crosscheck.cross_check(elf, "probe", path, home=real_otawa.home, timeout=120)
        if with_multibranch is None:
            assert check.status == "agree", check.describe()
        else:
            assert check.explanation is not None and check.explanation.name == with_multibranch, check.describe()
            assert check.divergence.what == "control" and check.divergence.assay.text.startswith("ldr.w pc")


# ---- the checks, on made-up cross-checks (no OTAWA needed) ----

def made_up(**fields):
    values = dict(elf="x.elf", function="f", flow_facts="x.ff", assay_cycles=100, assay_certified=True,
                  otawa_cycles=100, otawa_error=None, otawa_command=("owcet",))
    values.update(fields)
    return crosscheck.CrossCheck(**values)


def decoded(text, size=4, control=False, target=None, indirect=False):
    return crosscheck.Decoded(size, text, control, target, indirect)


def divergence(what, assay, otawa):
    return crosscheck.Divergence("g", 0x100, assay, otawa, what, ("00000100  ...",))


def test_each_declared_error_is_recognised_by_its_check_and_nothing_else_is():
    agree = made_up()
    assert agree.status == "agree" and crosscheck.explain(agree) is None
    vnmls = made_up(otawa_cycles=110, divergence=divergence("length", decoded("vnmls.f32 s12, s14, s10"),
                                                                decoded("<unknown>", 2)))
    ldr_pc = made_up(otawa_cycles=90, divergence=divergence(
        "control", decoded("ldr.w pc, [r2, r3, lsl #2]", control=True, indirect=True),
        decoded("ldr.w pc, [r2, r3, lsl #2]")))
    table = made_up(otawa_cycles=20, divergence=divergence(
        "indirect targets", decoded("tbh [pc, r2, lsl #1]", control=True, indirect=True),
        decoded("tbh [pc, r2, lsl #1]", control=True)))
    agreeing_routines = [crosscheck.FunctionAgreement("f", 100, 98), crosscheck.FunctionAgreement("g", 7, 7)]
    ilp = made_up(otawa_cycles=98, functions=agreeing_routines)
    timed_out = made_up(otawa_cycles=None, otawa_error="owcet did not finish within 20 s", functions=agreeing_routines)
    ffx = made_up(otawa_cycles=40, facts_format=".ffx",
                  otawa_warnings=("WARNING: otawa::FlowFactLoader 1.4.0:x.ffx: 0: multicall ignored at x.ffx:4 ... "
                                  "no call found",))
    contexts = made_up(otawa_cycles=120, assay_cycles_without_contexts=120, functions=agreeing_routines)
    names = {case: crosscheck.explain(check).name for case, check in (
        ("vnmls", vnmls), ("ldr", ldr_pc), ("table", table), ("ilp", ilp), ("timeout", timed_out), ("ffx", ffx),
        ("contexts", contexts))}
    assert names == {"vnmls": "vnmls-unknown", "ldr": "ldr-pc-not-a-branch", "table": "unresolved-indirect-branch",
                     "ilp": "lp_solve-ilp", "timeout": "lp_solve-ilp", "ffx": "ffx-multicall-not-a-call",
                     "contexts": "context-bounds-ignored"}
    # what the checks must not accept
    unexplained = [
        made_up(otawa_cycles=102, functions=agreeing_routines),  # OTAWA above an exact optimum: not its ILP
        made_up(otawa_cycles=98, functions=agreeing_routines, assay_certified=False),  # no exact optimum to trust
        made_up(otawa_cycles=98, functions=[crosscheck.FunctionAgreement("g", 7, 6)]),  # a routine differs alone
        made_up(otawa_cycles=110, divergence=divergence("length", decoded("vmla.f32 s0, s1, s2"), decoded("x", 2))),
        made_up(otawa_cycles=40, otawa_warnings=("WARNING: multicall ignored ... no call found",)),  # an .ff file
        made_up(otawa_cycles=120, assay_cycles_without_contexts=110),
        made_up(otawa_cycles=None, otawa_error="owcet exited with status 2: boom", functions=agreeing_routines),
    ]
    for check in unexplained:
        assert crosscheck.explain(check) is None, check
        check.explanation = crosscheck.explain(check)
        assert check.status == "unexplained"
    assert {error.kind for error in crosscheck.OTAWA_ERRORS} == {"decoder", "cfg", "flowfacts", "ilp"}


def test_the_first_divergence_is_found_and_code_only_assay_reaches_is_traced_to_its_branch():
    class Code:
        def kind(self, address):
            return "t"

        def bytes(self, start, end):
            return bytes(range(end - start))

    class Program:
        code = Code()

    ours = {0x100: decoded("movs r0, #0", 2), 0x102: decoded("tbb [pc, r0]", 4, True, None, True),
            0x106: decoded("b #0x10c", 2, True, 0x10C), 0x108: decoded("adds r0, #1", 2),
            0x10A: decoded("bx lr", 2, True)}
    ours[0x102] = dataclasses.replace(ours[0x102], successors=(0x106, 0x108))
    otawa = [crosscheck.otawa.OtawaInsn(0x100, 2, "movs r0, #0", ("INT",), None, ("00000100  ...",)),
             crosscheck.otawa.OtawaInsn(0x102, 4, "tbb [pc, r0]", ("CONTROL",), None, ("00000102  ...",)),
             crosscheck.otawa.OtawaInsn(0x106, 2, "b 0000010c", ("CONTROL",), 0x10C, ("00000106  ...",))]
    found = crosscheck._divergence(Program(), "g", ours, otawa)
    assert (found.address, found.what, found.thumb, found.encoding) == (0x102, "indirect targets", True,
                                                                        bytes(range(4)))
    assert found.excerpt == ("00000100  ...", "00000102  ...", "00000106  ...")
    otawa[2] = dataclasses.replace(otawa[2], target=0x10A)  # a direct branch decoded to another target
    otawa.append(crosscheck.otawa.OtawaInsn(0x108, 2, "adds r0, #1", ("INT",), None, ()))
    otawa.append(crosscheck.otawa.OtawaInsn(0x10A, 2, "bx lr", ("CONTROL", "RETURN"), None, ()))
    assert crosscheck._divergence(Program(), "g", ours, otawa).what == "branch target"
    otawa[2] = dataclasses.replace(otawa[2], target=0x10C)
    assert crosscheck._divergence(Program(), "g", ours, otawa) is None
