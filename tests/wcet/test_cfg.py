"""Disassembly and CFGs: mapping symbols, conditional returns, tail calls, shared tails, literal pools,
veneers, the call graph, and the control-flow classification shared with the stack analysis.

The hand-written programs are tests/wcet/programs/ (arm_flow.S for the ARM7TDMI, thumb_flow.S for the
Cortex-M4), assembled with arm-none-eabi-gcc; the OTAWA samples are tests/wcet/otawa-recordings/.
"""


import capstone
import programs
import pytest

from wcet import armcode
from wcet.cfg import ENTRY, EXIT
from wcet.facts import FlowFacts
from wcet.program import load_program
from recordings import OTAWA, needs_recordings

needs_gcc = pytest.mark.skipif(not programs.HAVE_GCC, reason="arm-none-eabi-gcc not installed (.ci/setup)")


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    return load_program(programs.build("arm_flow.S", "arm7tdmi", tmp_path_factory.mktemp("arm")))


@pytest.fixture(scope="module")
def thumb(tmp_path_factory):
    return load_program(programs.build("thumb_flow.S", "cortex-m4", tmp_path_factory.mktemp("thumb")))


def exits(cfg):
    """(site, kind, executed) of the edges that leave the routine."""
    return sorted((e.site, e.kind, e.executed) for e in cfg.edges if e.target == EXIT)


# --------------------------------------------------------------------------- one instruction


def decoded(hex_bytes, thumb=False):
    md = capstone.Cs(capstone.CS_ARCH_ARM, capstone.CS_MODE_THUMB if thumb else capstone.CS_MODE_ARM)
    md.detail = True
    return next(md.disasm(bytes.fromhex(hex_bytes), 0x1000))


@pytest.mark.parametrize("hex_bytes, thumb, kind, final", [
    ("1eff2f01", False, "return", False),  # bxeq lr
    ("1eff2fe1", False, "return", True),  # bx lr
    ("1080bd18", False, "return", False),  # popne {r4, pc}
    ("1080bde8", False, "return", True),  # pop {r4, pc}
    ("04f09de4", False, "return", True),  # pop {pc} (ldr pc, [sp], #4)
    ("feffff0a", False, "branch", False),  # beq .
    ("feffffea", False, "branch", True),  # b .
    ("feffffeb", False, "call", False),  # bl .
    ("04f01fe5", False, "indirect-jump", True),  # ldr pc, [pc, #-4]: a veneer, resolved by the CFG builder
    ("13ff2fe1", False, "indirect-jump", True),  # bx r3
    ("03f19f97", False, "jump-table", False),  # ldrls pc, [pc, r3, lsl #2]
    ("0000a0e1", False, "none", False),  # nop
    ("10bd", True, "return", True),  # pop {r4, pc}
    ("7047", True, "return", True),  # bx lr
    ("00b1", True, "branch", False),  # cbz r0, .+4
    ("13e8", True, "jump-table", True),  # tbb [r3, r0]... decoded below
])
def test_flow_classification(hex_bytes, thumb, kind, final):
    if hex_bytes == "13e8":
        insn = decoded("d3e800f0", thumb=True)  # tbb [r3, r0]
    else:
        insn = decoded(hex_bytes, thumb)
    effect = armcode.flow(insn)
    assert (effect.kind, effect.final) == (kind, final), insn.mnemonic


def test_direct_targets_and_state_exchange():
    assert armcode.flow(decoded("feffffeb")) == armcode.Flow("call", target=0x1000)
    assert armcode.flow(decoded("fefffffa")) == armcode.Flow("call", target=0x1000, exchange=True)  # blx #imm
    assert armcode.pc_relative_literal(decoded("04f01fe5"), thumb=False) == 0x1004  # ldr pc, [pc, #-4]
    assert armcode.pc_relative_literal(decoded("0148", thumb=True), thumb=True) == 0x1008  # ldr r0, [pc, #4]


# --------------------------------------------------------------------------- the OTAWA samples


@needs_recordings
def test_dense_cfgs_and_call_graph():
    program = load_program(OTAWA / "arm7tdmi" / "dense.elf")
    dense = program.cfg("dense")
    assert len(dense.blocks) == 8 and dense.instruction_count() == 48  # up to bx lr: the literal pool is data
    assert max(b.end for b in dense.blocks.values()) == 0x80FC
    assert exits(dense) == [(0x80F8, "return", None)]
    assert [(e.site, e.callees) for e in dense.calls()] == [(0x809C, (0x8000,))]
    assert program.call_graph("main") == {0x810C: [0x803C], 0x803C: [0x8000], 0x8000: []}
    # the -O0 loop test is the header: the conditional branch at its end is taken (back) or not (exit)
    kinds = {(e.source, e.target): (e.kind, e.executed) for e in dense.edges if e.source != ENTRY}
    assert kinds[(0x80DC, 0x8054)] == ("branch", True)
    assert kinds[(0x80DC, 0x80E8)] == ("fall", False)


@needs_recordings
def test_thumb_sample_decodes_by_mapping_symbols():
    program = load_program(OTAWA / "cortex-m4" / "fdense_m4.elf")
    layer = program.cfg("layer")
    assert layer.thumb and layer.instruction_count() == 56  # 0x7e's padding nop is never reached
    assert all(block.end <= 0x8000080 for block in layer.blocks.values())  # $d at 0x8000080


# --------------------------------------------------------------------------- hand-written ARM


@needs_gcc
def test_arm_conditional_returns_leave_taken_and_fall_through_not_taken(arm):
    condret = arm.cfg("condret")
    start = arm.functions["condret"].start
    assert exits(condret) == [(start + 4, "return", True),  # bxeq lr
                              (start + 0x14, "return", True),  # popne {r4, pc}
                              (start + 0x24, "return", True),  # ldmfdne sp!, {r4, pc}
                              (start + 0x2C, "return", None)]  # pop {r4, pc}
    not_taken = sorted(e.site for e in condret.edges if e.kind == "fall" and e.executed is False)
    assert not_taken == [start + 4, start + 0x14, start + 0x24]


@needs_gcc
def test_arm_tail_call_is_a_call_then_the_return(arm):
    tailer = arm.cfg("tailer")
    assert exits(tailer) == [(arm.functions["tailer"].start + 8, "tailcall", None)]
    assert tailer.calls()[0].callees == (arm.functions["condret"].start,)
    assert arm.call_graph("tailer") == {arm.functions["tailer"].start: [arm.functions["condret"].start],
                                        arm.functions["condret"].start: []}


@needs_gcc
def test_arm_branch_into_another_functions_tail_is_followed_as_shared_code(arm):
    sharer = arm.cfg("sharer")
    tail = arm.functions["owner"].start + 4
    assert sharer.shared == {tail}
    assert tail in sharer.blocks and sharer.blocks[tail].instructions[-1].mnemonic == "bx"
    assert len([e for e in sharer.edges if e.kind == "return"]) == 2
    assert not sharer.calls()  # not a call: the tail returns to sharer's caller


@needs_gcc
def test_arm_literal_pool_is_never_decoded(arm):
    pool = arm.cfg("pool")
    function = arm.functions["pool"]
    assert pool.instruction_count() == 4
    assert all(block.end <= function.start + 16 for block in pool.blocks.values())
    assert arm.code.kind(function.start + 16) == "d"


@needs_gcc
def test_arm_long_branch_veneer_is_resolved(arm):
    entry = arm.cfg("entry")
    veneer = arm.functions["__far_away_veneer"].start
    assert veneer in [c for e in entry.calls() for c in e.callees]
    stub = arm.cfg(veneer)
    assert [e.callees for e in stub.calls()] == [(arm.functions["far_away"].start,)]
    assert exits(stub)[0][1] == "tailcall"


# --------------------------------------------------------------------------- hand-written Thumb-2


@needs_gcc
def test_thumb_conditional_returns_in_it_blocks(thumb):
    condret = thumb.cfg("condret")
    start = thumb.functions["condret"].start
    assert condret.thumb
    assert exits(condret) == [(start + 0x0A, "return", True),  # it ne; popne {r4, pc}
                              (start + 0x16, "return", True),  # itt eq; addeq; popeq {r4, pc}
                              (start + 0x1A, "return", None),  # pop {r4, pc}
                              (start + 0x20, "return", True),  # it eq; bxeq lr
                              (start + 0x24, "return", None)]  # bx lr
    cbz = [e for e in condret.edges if e.site == start]
    assert sorted((e.kind, e.executed) for e in cbz) == [("branch", True), ("fall", False)]


@needs_gcc
def test_thumb_tail_call_and_shared_tail(thumb):
    assert exits(thumb.cfg("tailer"))[0][1] == "tailcall"
    assert thumb.cfg("sharer").shared == {thumb.functions["owner"].start + 2}
    assert thumb.cfg("pool").instruction_count() == 4


@needs_gcc
def test_multibranch_facts_resolve_an_indirect_jump_and_multicall_does_not(tmp_path):
    program = load_program(programs.build("bad.S", "arm7tdmi", tmp_path))
    site = program.functions["indirect"].start + 4
    assert program.cfg("indirect").unresolved == [(site, "indirect jump")]
    target = program.functions["armv5"].start
    assert program.cfg("indirect", FlowFacts(multicalls={site: (target,)})).unresolved  # a jump is no call
    resolved = program.cfg("indirect", FlowFacts(multibranches={site: (target,)}))
    assert not resolved.unresolved and [e.callees for e in resolved.calls()] == [(target,)]  # a tail call


@needs_gcc
def test_noreturn_ends_the_path_and_nocall_is_an_ordinary_instruction(arm):
    tailer = arm.cfg("tailer", FlowFacts(noreturn=frozenset({"condret"})))
    assert exits(tailer) == [(arm.functions["tailer"].start + 8, "noreturn", None)] and not tailer.calls()
    assert tailer.noreturn_calls == [(arm.functions["tailer"].start + 8, arm.functions["condret"].start)]
    entry = arm.cfg("entry", FlowFacts(nocall=frozenset({"condret", "pool"})))
    assert len(entry.calls()) == 4 and len(entry.ignored_calls) == 2
