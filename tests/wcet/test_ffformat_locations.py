"""Flow-fact locations resolved in real ELFs: every address form in every statement, source lines, call contexts.

tests/wcet/programs/switch_facts.c is built with Debian's arm-none-eabi-gcc -O0 -g for both ARM targets: its
switch is a jump table (arm7tdmi ``ldrls pc, [pc, r3, lsl #2]``, Cortex-M4 ``adr r2, T; ldr.w pc, [r2, r3,
lsl #2]``), called from two counted loops. The jump's targets and the loop headers are read from the
analyzer's own CFG (which resolves gcc's tables without help), then written as flow facts in each form:
every form must give the WCET the absolute addresses give, and that must be the WCET without the
multibranch fact (the same targets). A multibranch fact that leaves out the dearest case must lower it, so
the fact is really used. The call-context forms use tests/wcet/otawa-recordings/arm7tdmi/dense.elf (main calls dense at
0x8114; a real OTAWA gave WCET[main] = 22715 cycles with its loops bounded); return, preserve, ignoreseq, force
and ignore entry are checked on the CFG they give.
"""

from __future__ import annotations

import contextlib
import io
import shutil

import programs
import pytest

from recordings import OTAWA, needs_recordings
from wcet import bound, timing
from wcet.__main__ import main as wcet_main
from wcet.analyzer import analyze
from wcet.armcode import flow
from wcet.facts import FlowFacts
from wcet.ffformat import FlowFactFormatError, parse_f4, parse_ffx
from wcet.fflocate import ElfLocations
from wcet.program import load_program

needs_gcc = pytest.mark.skipif(shutil.which(programs.GCC) is None, reason="arm-none-eabi-gcc missing")
TRIVIAL = timing.get("trivial")
SOURCE = "switch_facts.c"


class Switch:
    """The built program and what the facts name in it, all read from the ELF."""

    def __init__(self, elf):
        self.elf = elf
        program = load_program(elf)
        self.symbols = {name: function.start for name, function in program.functions.items()}
        classify = program.cfg("classify")
        jumps = [block for block in classify.blocks.values()
                 if flow(block.instructions[-1]).kind in ("jump-table", "indirect-jump")]
        assert len(jumps) == 1, jumps
        self.site = jumps[-1].instructions[-1].address
        self.targets = sorted({edge.target for edge in classify.edges if edge.source == jumps[0].start
                               and edge.kind == "branch"})
        self.loops = {loop.source_line[1]: loop for loop in program.loops("entry")}
        marks = programs.loop_lines(SOURCE)
        self.bounds = {marks[name][0]: marks[name][1] for name in ("outer", "inner")}
        assert sorted(self.loops) == sorted(self.bounds)

    def dearest_case(self) -> int:
        """The jump target of case 5 (eight volatile stores: the dearest case), found by its source line."""
        lines = (programs.HERE / SOURCE).read_text().splitlines()
        line = next(n for n, text in enumerate(lines, start=1) if text.strip().startswith("case 5:"))
        program = load_program(self.elf)
        return next(t for t in self.targets if program.code.line(t) == ("switch_facts.c", line))


@pytest.fixture(scope="module", params=["arm7tdmi", "cortex-m4"])
def switch(request, tmp_path_factory):
    if shutil.which(programs.GCC) is None:
        pytest.skip("arm-none-eabi-gcc missing")
    return Switch(programs.build(SOURCE, request.param, tmp_path_factory.mktemp(request.param)))


def _wcet(elf, text: str, suffix: str, tmp_path, function: str = "entry") -> int:
    path = tmp_path / f"facts{suffix}"
    path.write_text(text)
    return bound.bound(elf, function, TRIVIAL, path).wcet_cycles


def _f4_forms(s: Switch, targets: list[int]) -> dict[str, str]:
    """The same facts in each F4 address form (the multibranch site and targets, and the loop headers)."""
    base = s.symbols["classify"]
    after = min(a for a in s.symbols.values() if a > s.site)  # a label after the jump: "label" - N reaches it

    def loops(form) -> str:
        return "".join(f"loop {form(loop)} {s.bounds[line]};\n" for line, loop in s.loops.items())

    def relative(address: int, radix) -> str:
        return f'"classify" + {radix(address - base)}'

    forms = {
        "absolute": (f"multibranch {s.site:#x} to {', '.join(f'{t:#x}' for t in targets)};\n"
                     + loops(lambda l: f"{l.header:#x}")),
        "decimal": (f"multibranch {s.site} to {', '.join(str(t) for t in targets)};\n"
                    + loops(lambda l: str(l.header))),
        "label+hex": (f"multibranch {relative(s.site, hex)} to {', '.join(relative(t, hex) for t in targets)};\n"
                      + loops(lambda l: f'"entry" + {l.offset:#x}')),
        "label+octal": (f"multibranch {relative(s.site, lambda v: f'0{v:o}')} to "
                        + ", ".join(relative(t, lambda v: f"0{v:o}") for t in targets) + ";\n"
                        + loops(lambda l: f'"entry" + 0{l.offset:o}')),
        "label+binary": (f"multibranch {relative(s.site, lambda v: f'0b{v:b}')} to "
                         + ", ".join(relative(t, lambda v: f"0b{v:b}") for t in targets) + ";\n"
                         + loops(lambda l: f'"entry" + 0b{l.offset:b}')),
        "label-offset": (f'multibranch "{_name_at(s, after)}" - {after - s.site:#x} to '
                         + ", ".join(f'"{_name_at(s, after)}" - {after - t:#x}' if t < after else f"{t:#x}"
                                     for t in targets) + ";\n"
                         + loops(lambda l: f'"{_name_at(s, after)}" - {after - l.header:#x}' if l.header < after
                                 else f'"entry" + {l.offset:#x}')),
        "source-line": (f"multibranch {s.site:#x} to {', '.join(f'{t:#x}' for t in targets)};\n"
                        + "".join(f'loop "switch_facts.c":{line} {s.bounds[line]};\n' for line in s.loops)),
    }
    return forms


def _name_at(s: Switch, address: int) -> str:
    return sorted(name for name, start in s.symbols.items() if start == address)[0]


def _ffx_forms(s: Switch) -> dict[str, str]:
    def document(loops: str) -> str:
        return (f'<flowfacts>\n<multibranch address="{s.site:#x}">'
                + "".join(f'<target label="classify" offset="{t - s.symbols["classify"]:#x}"/>' for t in s.targets)
                + f"</multibranch>\n<function label=\"entry\">\n{loops}</function>\n</flowfacts>\n")

    return {
        "address": document("".join(f'<loop address="{l.header:#x}" maxcount="{s.bounds[n]}"/>\n'
                                    for n, l in s.loops.items())),
        "label+offset": document("".join(f'<loop label="entry" offset="{l.offset:#x}" maxcount="{s.bounds[n]}"/>\n'
                                         for n, l in s.loops.items())),
        "offset": document("".join(f'<loop offset="{l.offset}" maxcount="{s.bounds[n]}" executed="true"/>\n'
                                   for n, l in s.loops.items())),
        "source+line": document("".join(f'<loop source="programs/switch_facts.c" line="{n}" maxcount="{s.bounds[n]}"'
                                        f' loopId="{k}" exact="true"/>\n' for k, n in enumerate(s.loops))),
    }


@needs_gcc
def test_label_relative_multibranch_gives_the_wcet_of_absolute_addresses(switch, tmp_path):
    loops_only = "".join(f"loop {l.header:#x} {switch.bounds[n]};\n" for n, l in switch.loops.items())
    automatic = _wcet(switch.elf, loops_only, ".ff", tmp_path)  # the table resolved by the analyzer itself
    wcets = {form: _wcet(switch.elf, text, ".ff", tmp_path) for form, text in _f4_forms(switch, switch.targets).items()}
    assert set(wcets.values()) == {automatic}, wcets
    fewer = [t for t in switch.targets if t != switch.dearest_case()]
    lowered = {form: _wcet(switch.elf, text, ".ff", tmp_path) for form, text in _f4_forms(switch, fewer).items()}
    assert len(set(lowered.values())) == 1 and next(iter(lowered.values())) < automatic, (lowered, automatic)


@needs_gcc
def test_ffx_loops_by_source_line_give_the_wcet_of_label_and_offset(switch, tmp_path):
    wcets = {form: _wcet(switch.elf, text, ".ffx", tmp_path) for form, text in _ffx_forms(switch).items()}
    assert len(set(wcets.values())) == 1, wcets
    facts = parse_ffx(_ffx_forms(switch)["source+line"], locations=ElfLocations(switch.elf, "entry"))
    assert {(l.function, l.offset) for l in facts.loops} == {("entry", l.offset) for l in switch.loops.values()}


@needs_gcc
@pytest.mark.parametrize("form", ["absolute", "decimal", "label+hex", "label+octal", "label+binary", "label-offset",
                                  "source-line"])
def test_every_f4_form_is_accepted_by_both_command_lines(switch, form, tmp_path, capsys):
    from harness.cli import main as assay_main

    path = tmp_path / f"{form}.ff"
    path.write_text(_f4_forms(switch, switch.targets)[form])
    expected = _wcet(switch.elf, path.read_text(), ".ff", tmp_path)
    assert wcet_main([str(switch.elf), "entry", "--flow-facts", str(path)]) == 0
    assert assay_main(["wcet", "--elf", str(switch.elf), "--function", "entry", "--flow-facts", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"WCET[entry] = {expected} cycles"] * 2


@needs_gcc
@pytest.mark.parametrize("form", ["address", "label+offset", "offset", "source+line"])
def test_every_ffx_form_is_accepted_by_both_command_lines(switch, form, tmp_path, capsys):
    from harness.cli import main as assay_main

    path = tmp_path / f"{form}.ffx"
    path.write_text(_ffx_forms(switch)[form])
    assert wcet_main([str(switch.elf), "entry", "--flow-facts", str(path)]) == 0
    assert assay_main(["wcet", "--elf", str(switch.elf), "--function", "entry", "--flow-facts", str(path)]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == second and first.startswith("WCET[entry] = ")


@needs_gcc
def test_statements_by_every_address_form_resolve_to_the_same_addresses(switch):
    """return, preserve, ignorecontrol, noreturn, nocall and multicall with absolute, label, label + N,
    label - N and source-line addresses, read with the ELF's symbols and line table."""
    locations = ElfLocations(switch.elf, "entry")
    base, site = switch.symbols["classify"], switch.site
    line = load_program(switch.elf).code.line(site)[1]  # the switch's line: its one indirect jump
    after = min(a for a in switch.symbols.values() if a > site)
    name = _name_at(switch, after)
    for where in (f"{site:#x}", f'"classify" + {site - base:#x}', f'"{name}" - {after - site:#x}'):
        facts = parse_f4(f"return {where}; ignorecontrol {where}; preserve {where};\n"
                         f"multibranch {where} to {switch.targets[0]:#x};\n", locations=locations)
        assert facts.returns == facts.ignorecontrol == facts.preserve == {site}, where
        assert facts.multibranches == {site: (switch.targets[0],)}
    by_line = f'"switch_facts.c":{line}'  # the line holds the jump and the branch to the default case
    facts = parse_f4(f"multibranch {by_line} to {switch.targets[0]:#x}; preserve {by_line};", locations=locations)
    assert facts.multibranches == {site: (switch.targets[0],)}
    assert facts.preserve == {min(s for s, _ in locations.line_ranges("switch_facts.c", line))}  # OTAWA: line start
    with pytest.raises(FlowFactFormatError, match=r"holds 2 control instructions \(0x[0-9a-f]+, 0x[0-9a-f]+\)"):
        parse_f4(f"ignorecontrol {by_line};", locations=locations)
    for where in (f"{base:#x}", '"classify"', '"classify" + 0', f'"{name}" - {after - base:#x}'):
        assert parse_f4(f"noreturn {where};", locations=locations).noreturn == {"classify"}, where
    for where in (f"{base:#x}", '"classify"'):  # OTAWA's id_or_address: no offset
        assert parse_f4(f"nocall {where};", locations=locations).nocall == {"classify"}, where
    with pytest.raises(FlowFactFormatError, match="expected ';'"):
        parse_f4('nocall "classify" + 0;', locations=locations)


@needs_gcc
def test_return_makes_the_jump_a_return_and_preserve_changes_nothing(switch, tmp_path):
    loops = "".join(f'loop "entry" + {l.offset:#x} {switch.bounds[n]};\n' for n, l in switch.loops.items())
    plain = _wcet(switch.elf, loops, ".ff", tmp_path)
    where = f'"classify" + {switch.site - switch.symbols["classify"]:#x}'
    assert _wcet(switch.elf, loops + f"preserve {where};\n", ".ff", tmp_path) == plain
    # the jump now leaves classify: no case runs, so every path is shorter
    returning = _wcet(switch.elf, loops + f"return {where};\n", ".ff", tmp_path)
    assert returning < plain
    facts = parse_f4(f"return {where};", locations=ElfLocations(switch.elf, "entry"))
    graph = load_program(switch.elf).cfg("classify", facts)
    jump = next(b for b in graph.blocks.values() if b.instructions[-1].address == switch.site)
    kinds = {e.kind for e in graph.edges if e.source == jump.start}
    assert "return" in kinds and kinds <= {"return", "fall"}, kinds  # arm7tdmi's ldrls may also fall on


@needs_gcc
def test_source_lines_without_one_loop_or_code_are_refused_naming_the_line(switch, tmp_path):
    text = (programs.HERE / SOURCE).read_text().splitlines()
    switch_line = next(n for n, t in enumerate(text, start=1) if "switch (v)" in t)
    with pytest.raises(FlowFactFormatError) as caught:
        parse_f4(f'loop "switch_facts.c":{switch_line} 3;\nloop "switch_facts.c":1 3;\n'
                 f'loop "other.c":{switch_line} 3;\nmulticall "switch_facts.c":{switch_line} to 0x8000;\n',
                 source="lines.ff", locations=ElfLocations(switch.elf, "entry"))
    assert caught.value.problems == [
        f"lines.ff:4: switch_facts.c:{switch_line} holds no indirect calls; give its address",
        f"lines.ff:1: switch_facts.c:{switch_line} heads no loop (its code is in classify)",
        f"lines.ff:2: switch_facts.c:1 has no code in {switch.elf.name}",
        f"lines.ff:3: other.c:{switch_line} has no code in {switch.elf.name}",
    ]


def test_a_line_heading_two_loops_is_refused(tmp_path):
    if shutil.which(programs.GCC) is None:
        pytest.skip("arm-none-eabi-gcc missing")
    source = tmp_path / "two.c"
    source.write_text("volatile int s;\nvoid entry(void) {\n"
                      "  for (int a = 0; a < 2; a++) for (int b = 0; b < 3; b++) s = a + b;\n}\n")
    elf = tmp_path / "two.elf"
    import subprocess

    subprocess.run([programs.GCC, *programs.FLAGS["arm7tdmi"], "-O0", "-g", "-nostdlib", "-nostartfiles",
                    "-Wl,-e,entry", "-Wl,-Ttext=0x8000", str(source), "-o", str(elf)], check=True)
    with pytest.raises(FlowFactFormatError, match=r'two.c:3 heads 2 loops \(entry \+ 0x[0-9a-f]+, entry \+ '
                                                  r'0x[0-9a-f]+\): give each by label and offset'):
        parse_ffx('<flowfacts><loop source="two.c" line="3" maxcount="3"/></flowfacts>',
                  locations=ElfLocations(elf, "entry"))


# --------------------------------------------------------------------------- call contexts (dense.elf)

CONTEXTS = {  # every way to say "dense's loops when main calls it at 0x8114", and the F4 ways to say less
    "f4 call site": 'loop "dense" + 0xa0 8 in "main" / @0x8114;\nloop "dense" + 0x74 16 in "main" / @0x8114;',
    "f4 labelled call site": 'loop "dense" + 0xa0 8 in "main" @ 0x8114;\nloop "dense" + 0x74 16 in @0x8114;',
    "f4 functions": 'loop "dense" + 0xa0 8 in "main" / "dense";\nloop "dense" + 0x74 16 in "dense";',
    "f4 by line in context": 'loop "dense.c":14 8 in "main" / @"dense.c":23;\nloop "dense.c":16 16 in "main";',
    "ffx call by source line": ('<flowfacts><function label="main"><call source="dense.c" line="23">'
                                '<function label="dense"><loop offset="0xa0" maxcount="8"/>'
                                '<loop source="dense.c" line="16" maxcount="16"/></function></call></function>'
                                '</flowfacts>'),
    "ffx old call form": ('<flowfacts><function label="main"><call address="0x8114" name="dense">'
                          '<loop label="dense" offset="0xa0" maxcount="8"/><loop label="dense" offset="0x74" '
                          'maxcount="16"/></call></function></flowfacts>'),
}


@needs_recordings
@pytest.mark.parametrize("form", sorted(CONTEXTS))
def test_call_contexts_in_every_form_give_otawas_wcet(form, tmp_path):
    suffix = ".ffx" if form.startswith("ffx") else ".ff"
    assert _wcet(OTAWA / "arm7tdmi/dense.elf", CONTEXTS[form], suffix, tmp_path, "main") == 22715
    path = tmp_path / f"facts{suffix}"
    facts = (parse_ffx if suffix == ".ffx" else parse_f4)(path, locations=ElfLocations(OTAWA / "arm7tdmi/dense.elf",
                                                                                      "main"))
    assert {l.offset for l in facts.loops} == {0xA0, 0x74}


@needs_recordings
def test_a_context_that_never_occurs_bounds_nothing(tmp_path):
    path = tmp_path / "elsewhere.ff"
    path.write_text('loop "dense" + 0xa0 8 in "main" / @0x8000;\nloop "dense" + 0x74 16;\n')
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        assert wcet_main([str(OTAWA / "arm7tdmi/dense.elf"), "main", "--flow-facts", str(path)]) == 1
    assert 'loop "dense" + 0xa0 at 0x80dc (dense.c:14)' in stderr.getvalue()


# --------------------------------------------------------------------------- statements that change control

CONTROL_S = """\
.syntax unified
.arm
.global entry, helper, other, far
.type entry, %function
entry:
    push {lr}
    cmp r0, #3
    ble 1f              @ ignoreseq: always taken
    mov r1, #1
    mov r1, #2
    mov r1, #3
1:  bl helper           @ force branch: a tail call, entry ends in helper
    mov r2, #5
    b other             @ force call: other runs and comes back
    pop {pc}
.type helper, %function
helper:
    mov r3, #1
    bx lr
.type other, %function
other:
    mov r3, #2
    mov r3, #3
    b far               @ ignore entry "far": far's code is other's own, not a tail call
.type far, %function
far:
    pop {pc}
"""


def test_ignoreseq_force_and_ignore_entry_change_the_cfg_as_in_otawa(tmp_path):
    if shutil.which(programs.GCC) is None:
        pytest.skip("arm-none-eabi-gcc missing")
    import subprocess

    (tmp_path / "control.S").write_text(CONTROL_S)
    elf = tmp_path / "control.elf"
    subprocess.run([programs.GCC, *programs.FLAGS["arm7tdmi"], "-nostdlib", "-nostartfiles", "-Wl,-e,entry",
                    "-Wl,-Ttext=0x8000", str(tmp_path / "control.S"), "-o", str(elf)], check=True)
    locations = ElfLocations(elf, "entry")
    ble, bl, b = 0x8008, 0x8018, 0x8020  # entry + 8, + 0x18, + 0x20 (ARM: 4 bytes an instruction)
    facts = parse_f4('ignoreseq "entry" + 8; force branch "entry" + 0x18; ignore entry "far";', locations=locations)
    assert facts.ignoreseq == {ble} and facts.forced == {bl: "branch"} and facts.ignore_entry == {"far"}
    calling = parse_f4(f"force call {b:#x};", locations=locations)
    assert calling.forced == {b: "call"}
    program = load_program(elf)
    plain, changed = program.cfg("entry"), program.cfg("entry", facts)

    def out(graph, address):
        block = next(k for k, v in graph.blocks.items() if v.instructions[-1].address == address)
        return sorted((e.kind, e.target) for e in graph.edges if e.source == block)

    assert len(out(plain, ble)) == 2 and out(changed, ble) == [("branch", bl)]  # ble only taken
    assert out(plain, bl)[0][0] == "call" and out(changed, bl)[0][0] == "tailcall"  # and entry ends in helper
    assert all(block.start <= bl for block in changed.blocks.values())
    assert out(plain, b)[0][0] == "tailcall" and out(program.cfg("entry", calling), b)[0][0] == "call"
    assert program.cfg("other").edges[-1].kind == "tailcall"
    other = program.cfg("other", facts)  # far's pop {pc} is other's own code: it returns from other
    assert all(e.kind != "tailcall" for e in other.edges) and any(e.kind == "return" for e in other.edges)
    wcets = {name: analyze(elf, "entry", f or FlowFacts(), TRIVIAL).wcet_cycles
             for name, f in (("plain", None), ("changed", facts), ("calling", calling))}
    assert wcets["changed"] < wcets["plain"] < wcets["calling"], wcets  # fewer paths / other runs, comes back
