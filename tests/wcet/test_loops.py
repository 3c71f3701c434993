"""Loops: dominators, back edges, nesting, DWARF lines of headers, irreducible cycles refused.

``Program.loops(function)`` is what the flow-fact producer maps C ``for`` loops onto, so the headers'
lines and the nesting are checked against the ``LOOP:`` markers of tests/wcet/programs/shapes.c on both
targets (ARM and Thumb-2, -O0), and against OTAWA's own loop names on its recorded samples.
"""


import programs
import pytest

from wcet.errors import AnalysisError
from wcet.loops import dominators, find_loops, loop_edges
from wcet.program import load_program
from recordings import OTAWA, needs_recordings

needs_gcc = pytest.mark.skipif(not programs.HAVE_GCC, reason="arm-none-eabi-gcc not installed (.ci/setup)")


@needs_recordings
@pytest.mark.parametrize("elf, function, outer, inner, lines", [
    ("arm7tdmi/dense.elf", "dense", 0xA0, 0x74, (14, 16)),  # dense.ff: loop "dense" + 0xa0 8; + 0x74 16
    ("cortex-m4/fdense_m4.elf", "layer", 0x6A, 0x52, (10, 12)),  # fdense_m4.ff
])
def test_loop_headers_are_the_ones_otawa_names(elf, function, outer, inner, lines):
    program = load_program(OTAWA / elf)
    start = program.functions[function].start
    first, second = program.loops(function)
    assert (first.function, first.offset, first.header, first.depth, first.parent) == \
        (function, outer, start + outer, 1, None)
    assert (second.function, second.offset, second.depth, second.parent) == (function, inner, 2, start + outer)
    assert (first.source_line[1], second.source_line[1]) == lines
    assert second.blocks < first.blocks
    # the back edge is the branch at the end of the header's block: the -O0 test jumps back to the body
    assert len(first.back_edges) == 1 and first.back_edges[0] < first.header


@needs_recordings
def test_dominators_of_dense():
    program = load_program(OTAWA / "arm7tdmi" / "dense.elf")
    cfg = program.cfg("dense")
    idom, order, retreating = dominators(cfg)
    assert order[0] == cfg.entry and idom[cfg.entry] == cfg.entry
    assert idom[0x8054] == 0x80DC  # the outer body is entered from the outer test only
    assert idom[0x80E8] == 0x80DC  # so is the exit
    assert sorted(retreating) == [(0x80A0, 0x80B0), (0x80BC, 0x80DC)]  # the increments fall into the tests
    loop = program.loops("dense")[1]
    entries, back = loop_edges(cfg, loop)
    assert [e.source for e in entries] == [0x8054] and len(back) == 1


@needs_gcc
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4"])
def test_c_loops_are_found_at_their_for_lines_with_their_nesting(tmp_path, target):
    program = load_program(programs.build("shapes.c", target, tmp_path))
    marks = programs.loop_lines()
    functions = {"nested": ("nested_outer", "nested_inner"), "early_exit": ("early",), "calls_in_loop": ("calls",),
                 "triangular": ("tri_outer", "tri_inner"), "diamond": (), "entry": ()}
    for function, names in functions.items():
        loops = program.loops(function)
        assert [loop.source_line[1] for loop in loops] == [marks[name][0] for name in names], function
        assert all(loop.source_line[0] == "shapes.c" and loop.function == function for loop in loops)
        if len(loops) == 2:
            outer, inner = loops
            assert (outer.depth, inner.depth, inner.parent, outer.parent) == (1, 2, outer.header, None)
            assert inner.blocks < outer.blocks


@needs_gcc
def test_a_predicated_self_loop_is_a_loop(tmp_path):
    program = load_program(programs.build("arm_flow.S", "arm7tdmi", tmp_path))
    (loop,) = program.loops("normalise")
    assert loop.offset == 8 and loop.blocks == {loop.header} and loop.back_edges == (loop.header + 12,)


@needs_gcc
def test_irreducible_cycle_is_an_error_naming_the_address(tmp_path):
    program = load_program(programs.build("arm_flow.S", "arm7tdmi", tmp_path))
    start = program.functions["irreducible"].start
    with pytest.raises(AnalysisError, match=r"irreducible loop in irreducible: the edge 0x[0-9a-f]+ -> "
                                            f"{start + 12:#x}") as error:
        program.loops("irreducible")
    assert error.value.address == start + 12
    # the same CFG through the lower-level function
    with pytest.raises(AnalysisError):
        find_loops(program.cfg("irreducible"))
