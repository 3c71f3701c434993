"""Loop bounds from an -O0 binary's frame-slot counters (``wcet.binloops``), on C++ built for both ARM targets
(``programs/counters.cpp``) and on Thumb-2 assembly whose one marked instruction writes the counter's slot in a
way the recogniser must see (``programs/counters.S``); and ``wcet.flowfacts`` using them for code whose
manifest declares no loops (Eclipse Aidge's case: C++ templates, inlined copies of one loop on one line)."""

from pathlib import Path

import programs
import pytest

from wcet import binloops
from wcet.disasm import A
from wcet.binloops import ORIGIN, BinaryCounters
from wcet.flowfacts import SOURCE_ORIGIN, FlowFactError, facts_for_generated
from wcet.program import load_program

pytestmark = [pytest.mark.arm, pytest.mark.skipif(not programs.HAVE_GXX,
                                                  reason="arm-none-eabi-g++ not installed (.ci/setup)")]

TARGETS = ("arm7tdmi", "cortex-m4")
# function -> its loops' bounds, outermost first
BOUNDED = {
    "simple_for": [10],  # for (int i = 0; i < 10; ++i)
    "nested_for": [4, 7],  # i < 4, then j < 7 per entry of the outer loop
    "template_constant": [3],  # e < std::integral_constant<int, 3>(): a call at -O0, proven to return 3
    "inlined_twice": [12, 5],  # kernel<12>, kernel<5>: one source loop inlined twice, on one line
    "unsigned_compare": [8],  # for (unsigned u = 3; u <= 17; u += 2): 3, 5, ..., 17
    "step_two": [5],  # for (int i = 0; i < 9; i += 2): 0, 2, 4, 6, 8
    "call_inside": [6],  # look(&other): another variable's address passed, not the counter's
    "while_counted": [3],  # int k = 2; while (k < 11) k += 3: 2, 5, 8
}
REFUSED = {
    "written_in_body": "is written at",  # if (flag) i = 0;
    "address_passed": "escapes at",  # touch(&i)
    "limit_from_memory": "compares no frame slot with a constant",  # i < limit (a global)
    "data_dependent_while": "compares no frame slot with a constant",  # while (data[k] != 0)
    "decremented_in_branch": "is written at",  # if (flag) i--;
    "member_counter": "part of a larger variable",  # s.i, with &s.a passed to a function
}
# assembly: function -> the reason (the counter is [r7, #4], entry sp - 20, declared by hand: no DWARF)
ASSEMBLY = {
    "strd_over": "partly overwritten",
    "stm_over": "partly overwritten",
    "byte_over": "partly overwritten",
    "derived": "through a frame address with an unknown offset",
    "to_memory": "escapes at",
    "frame_rewritten": "compares no frame slot with a constant",
    "stack_unknown": "the stack pointer is not known",
    "conditional_step": "is written at",
}


@pytest.fixture(scope="module")
def elfs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("counters")
    return {target: programs.build("counters.cpp", target, tmp) for target in TARGETS}


def bounds_of(elf: Path, function: str) -> list:
    program = load_program(elf)
    counters = BinaryCounters(program)
    routine = program.function(function).start
    return [counters.bound(routine, loop) for loop in program.loops(routine)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("function", sorted(BOUNDED))
def test_counted_loops_are_bounded(elfs, target, function):
    found = bounds_of(elfs[target], function)
    assert [b if isinstance(b, str) else b.max for b in found] == BOUNDED[function]
    assert all(b.origin == ORIGIN and b.justification.startswith("binary counter: the slot at entry sp ")
               for b in found)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("function", sorted(REFUSED))
def test_loops_the_machine_code_does_not_prove_stay_unbounded(elfs, target, function):
    (found,) = bounds_of(elfs[target], function)
    assert isinstance(found, str) and REFUSED[function] in found, found


def test_the_justification_says_what_was_proven(elfs):
    (found,) = bounds_of(elfs["cortex-m4"], "unsigned_compare")
    assert "from 3 by 2 while <= 17 (unsigned; test 0x" in found.justification


@pytest.fixture(scope="module")
def assembly(tmp_path_factory) -> Path:
    if not programs.HAVE_GCC:
        pytest.skip("arm-none-eabi-gcc not installed (.ci/setup)")
    return programs.build("counters.S", "cortex-m4", tmp_path_factory.mktemp("counters-asm"))


def assembly_bound(elf: Path, function: str):
    """The bound of the function's loop, its counter declared (as DWARF would) a whole variable over it."""
    program = load_program(elf)
    counters = BinaryCounters(program)
    symbol = program.function(function)
    counters._variables[symbol.start] = [(-20, -16, [(symbol.start, symbol.end)])]
    (loop,) = program.loops(symbol.start)
    return counters.bound(symbol.start, loop)


def test_the_assembly_control_is_bounded(assembly):
    assert assembly_bound(assembly, "plain").max == 10  # so each refusal below is its marked instruction's


@pytest.mark.parametrize("function", sorted(ASSEMBLY))
def test_writes_that_may_reach_the_slot_are_refused(assembly, function):
    found = assembly_bound(assembly, function)
    assert isinstance(found, str) and ASSEMBLY[function] in found, found


def test_without_dwarf_variables_nothing_is_bounded(assembly):
    """Assembly has no DWARF variables (gas's own entries have no CFA frame base): no slot is known whole."""
    program = load_program(assembly)
    symbol = program.function("plain")
    (loop,) = program.loops(symbol.start)
    found = BinaryCounters(program).bound(symbol.start, loop)
    assert isinstance(found, str) and "DWARF" in found


@pytest.mark.parametrize("first, limit, step, stay, expected", [
    (0, 10, 1, A.ARM_CC_LT, 10), (0, 10, 3, A.ARM_CC_LT, 4), (0, 10, 1, A.ARM_CC_LE, 11),
    (5, 3, 1, A.ARM_CC_LT, 0), ((-4) & 0xFFFFFFFF, 4, 2, A.ARM_CC_LT, 4),  # signed: -4, -2, 0, 2
    ((-4) & 0xFFFFFFFF, 4, 2, A.ARM_CC_LO, 0),  # unsigned: 0xfffffffc is not below 4
    (0, 0, 1, A.ARM_CC_EQ, 1), (1, 0, 1, A.ARM_CC_EQ, 0), (0, 12, 4, A.ARM_CC_NE, 3), (3, 7, 1, A.ARM_CC_GT, 0),
    (0x7FFFFFF0, 0x7FFFFFFF, 1, A.ARM_CC_LE, "wraps"),  # i <= INT_MAX never fails
    (0xFFFFFFF0, 0xFFFFFFFF, 4, A.ARM_CC_LS, "wraps"), (0, 10, 3, A.ARM_CC_NE, "never equals"),
    (0, 3, 1, A.ARM_CC_GE, 0), (5, 3, 1, A.ARM_CC_GE, "until it wraps"),
])
def test_iterations_are_exact_in_32_bits(first, limit, step, stay, expected):
    found = binloops._iterations(first, limit, step, stay)
    assert found == expected if isinstance(expected, int) else expected in found


def test_inlined_copies_on_one_line_are_bounded_each_by_the_machine_code(elfs):
    """Code whose manifest declares no loops, in C++ (no C the parser reads): both inlined copies of
    ``kernel``'s loop share a DWARF line, and each gets its own bound, origin binary-counter."""
    source = programs.HERE / "counters.cpp"
    for target, elf in elfs.items():
        facts = facts_for_generated(elf, {"entry": "inlined_twice", "layers": []}, [source])
        assert sorted(b.max for b in facts.loops) == [5, 12], target
        assert {b.origin for b in facts.loops} == {ORIGIN} and len({b.source for b in facts.loops}) == 1


def test_inlined_copies_the_machine_code_cannot_bound_are_each_a_problem(elfs):
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(elfs["arm7tdmi"], {"entry": "escaping_twice", "layers": []},
                            [programs.HERE / "counters.cpp"])
    assert len(caught.value.problems) == 2
    assert all("shares its source line with 1 other loop: the C loop cannot be matched to it (machine code: the "
               "address of the slot" in problem for problem in caught.value.problems)


def test_a_loop_neither_source_bounds_names_the_machine_codes_reason(elfs):
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(elfs["cortex-m4"], {"entry": "address_passed", "layers": []},
                            [programs.HERE / "counters.cpp"])
    assert caught.value.origin == SOURCE_ORIGIN
    (problem,) = caught.value.problems
    assert "no counted for loop at counters.cpp:" in problem and "(machine code: the address of the slot" in problem
