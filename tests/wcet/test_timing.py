"""Timing models against the manuals' tables, instruction by instruction.

Each expected figure is worked out by hand from the cited table, not from the
model: ARM7TDMI TRM (ARM DDI 0210C) "Instruction Cycle Timings" in S, N and I
cycles; Cortex-M4 TRM Table 3-1 (processor) and Table 7-1 (FPU). Instructions
are given as their encodings (from arm-none-eabi-as, shown beside each) so
these tests need no cross toolchain.
"""

import capstone
import pytest

from wcet.errors import ConfigurationError
from wcet import timing


def decode(hex_words: str, thumb: bool = False, mclass: bool = False) -> list[capstone.CsInsn]:
    """Little-endian instruction words as objdump prints them ("e0810002", "eb01 0002")."""
    mode = capstone.CS_MODE_THUMB if thumb else capstone.CS_MODE_ARM
    if mclass:
        mode |= capstone.CS_MODE_MCLASS
    disassembler = capstone.Cs(capstone.CS_ARCH_ARM, mode)
    disassembler.detail = True
    data = b""
    for word in hex_words.split(";"):
        for half in word.split():
            data += int(half, 16).to_bytes(len(half) // 2, "little")
    return list(disassembler.disasm(data, 0x1000))


def arm(word: str) -> capstone.CsInsn:
    (insn,) = decode(word)
    return insn


def thumb(words: str) -> capstone.CsInsn:
    (insn,) = decode(words, thumb=True, mclass=True)
    return insn


# ---- trivial ----

@pytest.mark.tor("TOR-MET-004")
def test_trivial_charges_five_cycles_per_instruction_like_otawa():
    model = timing.get("trivial")
    assert model.cycles(arm("e0810002")) == 5  # add r0, r1, r2
    assert model.cycles(arm("e8bd8010")) == 5  # pop {r4, pc}
    assert timing.get("trivial", cycles_per_instruction=1).cycles(thumb("ee80 0a81")) == 1  # vdiv.f32


# ---- ARM7TDMI: (S, N, I) per instruction ----

A7 = timing.get("arm7tdmi")

# The expected figures are the manuals' (docs/met.md, "Timing models"), not Assay's output copied back:
# ARM7TDMI Technical Reference Manual, ARM DDI 0210C, chapter "Instruction Cycle Timings": each case's comment gives
# the section's formula (Branch and branch with link; Branch and exchange; Data operations; Multiply and multiply
# accumulate; Load register; Store register; Load multiple registers; Store multiple registers; Data swap; Software
# interrupt and exception entry) and its "Instruction speed summary".
ARM7TDMI_CASES = [
    # encoding, assembly, (S, N, I) from the TRM section named
    ("e0810002", "add r0, r1, r2", (1, 0, 0)),            # data operations: 1S
    ("e0810312", "add r0, r1, r2, lsl r3", (1, 0, 1)),    # + 1I for a register-specified shift
    ("e1a00211", "mov r0, r1, lsl r2", (1, 0, 1)),        # the same, printed "lsl r0, r1, r2"
    ("e1a0f00e", "mov pc, lr", (2, 1, 0)),                # + 1S + 1N when the PC is written
    ("e5910000", "ldr r0, [r1]", (1, 1, 1)),              # load register: 1S + 1N + 1I
    ("e1d100b2", "ldrh r0, [r1, #2]", (1, 1, 1)),
    ("e49df004", "ldr pc, [sp], #4", (2, 2, 1)),          # to the PC: 2S + 2N + 1I
    ("e5810000", "str r0, [r1]", (0, 2, 0)),              # store register: 2N
    ("e5c10000", "strb r0, [r1]", (0, 2, 0)),
    ("e890001e", "ldm r0, {r1-r4}", (4, 1, 1)),           # load multiple, n = 4: nS + 1N + 1I
    ("e8bd8010", "pop {r4, pc}", (3, 2, 1)),              # n = 2 with the PC: (n+1)S + 2N + 1I
    ("e92d4070", "push {r4, r5, r6, lr}", (3, 2, 0)),     # store multiple, n = 4: (n-1)S + 2N
    ("eafffffe", "b .", (2, 1, 0)),                       # branch: 2S + 1N
    ("ebfffffe", "bl .", (2, 1, 0)),
    ("e12fff1e", "bx lr", (2, 1, 0)),                     # branch and exchange: 2S + 1N
    ("e0000291", "mul r0, r1, r2", (1, 0, 4)),            # 1S + mI, m = 4 (worst case)
    ("e0203291", "mla r0, r1, r2, r3", (1, 0, 5)),        # 1S + (m+1)I
    ("e0810392", "umull r0, r1, r2, r3", (1, 0, 5)),      # 1S + (m+1)I
    ("e0a10392", "umlal r0, r1, r2, r3", (1, 0, 6)),      # 1S + (m+2)I
    ("e1020091", "swp r0, r1, [r2]", (1, 2, 1)),          # data swap: 1S + 2N + 1I
    ("ef000000", "svc 0", (2, 1, 0)),                     # software interrupt: 2S + 1N
]


@pytest.mark.tor("TOR-MET-004")
@pytest.mark.parametrize("word,assembly,expected", ARM7TDMI_CASES, ids=[c[1] for c in ARM7TDMI_CASES])
def test_arm7tdmi_sni_cycles(word, assembly, expected):
    insn = arm(word)
    assert A7.sni(insn) == expected
    s, n, i = expected
    assert A7.cycles(insn) == s + n + i  # zero wait states: every cycle is one clock


def test_arm7tdmi_wait_states_lengthen_n_and_s_cycles_only():
    model = timing.get("arm7tdmi", n_wait_states=2, s_wait_states=1)
    assert model.cycles(arm("e5910000")) == 1 * 2 + 1 * 3 + 1  # ldr: 1S + 1N + 1I
    assert model.cycles(arm("e5810000")) == 2 * 3               # str: 2N
    assert model.cycles(arm("e0000291")) == 1 * 2 + 4           # mul: 1S + 4I


def test_arm7tdmi_multiply_early_termination_m_is_configurable():
    assert timing.get("arm7tdmi", multiply_m=1).sni(arm("e0000291")) == (1, 0, 1)  # mul, m = 1
    assert timing.get("arm7tdmi", multiply_m=2).sni(arm("e0a10392")) == (1, 0, 4)  # umlal, m + 2
    with pytest.raises(ConfigurationError):
        timing.get("arm7tdmi", multiply_m=5)


@pytest.mark.tor("TOR-MET-004")
def test_arm7tdmi_failed_condition_costs_one_s_cycle():
    moveq, ldreq, bne = arm("01a00001"), arm("05910000"), arm("1afffffe")
    assert timing.is_conditional(moveq) and not timing.writes_pc(moveq)
    assert A7.sni(moveq, executed=False) == (1, 0, 0)
    assert A7.sni(ldreq, executed=False) == (1, 0, 0)
    assert A7.sni(ldreq, executed=True) == (1, 1, 1)
    assert A7.sni(ldreq, executed=None) == (1, 1, 1)  # unknown: the worse of the two
    assert timing.writes_pc(bne)
    assert A7.cycles(bne, executed=True) == 3 and A7.cycles(bne, executed=False) == 1
    assert A7.cycles(bne) == 3


@pytest.mark.tor("TOR-MET-004")
def test_arm7tdmi_refuses_what_an_armv4t_core_does_not_have():
    with pytest.raises(timing.TimingError, match="blx r3"):
        A7.cycles(arm("e12fff33"))  # blx r3 (ARMv5)
    with pytest.raises(timing.TimingError):
        A7.cycles(thumb("ee30 0a81"))  # vadd.f32


# ---- Cortex-M4: cycles at zero wait states, P = refill ----
# Cortex-M4 Technical Reference Manual, ARM DDI 0439B (100166), Table 3-1 "Cortex-M4 instruction set summary" (the
# core instructions: 1 cycle for data operations, 2 for a single load or store, 1 + N for a multiple load or store of
# N registers, 1 + P for a taken branch, P a refill of 1 to 3 cycles; SDIV 2 to 12) and Table 7-1 "FPU instruction
# set" (the VFP cases below), both at zero wait states.

M4 = timing.get("cortex-m4")  # P = 3 by default
P = 3

CORTEX_M4_CASES = [
    ("1888", "adds r0, r1, r2", 1),
    ("eb01 0002", "add.w r0, r1, r2", 1),
    ("6808", "ldr r0, [r1]", 2),
    ("f85d fb04", "ldr.w pc, [sp], #4", 2 + P),
    ("6008", "str r0, [r1]", 2),
    ("e7fe", "b.n .", 1 + P),
    ("f7ff fffe", "bl .", 1 + P),
    ("4770", "bx lr", 1 + P),
    ("46f7", "mov pc, lr", 1 + P),
    ("b5b0", "push {r4, r5, r7, lr}", 1 + 4),
    ("bd10", "pop {r4, pc}", 1 + 2 + P),
    ("fb01 f002", "mul.w r0, r1, r2", 1),
    ("fb01 3002", "mla r0, r1, r2, r3", 1),
    ("fba2 0103", "umull r0, r1, r2, r3", 1),
    ("fb91 f0f2", "sdiv r0, r1, r2", 12),          # 2 to 12: the worst case
    ("e9d2 0100", "ldrd r0, r1, [r2]", 3),
    ("bf00", "nop", 1),
    # Table 7-1 (FPU)
    ("ee30 0a81", "vadd.f32 s0, s1, s2", 1),
    ("ee20 0a81", "vmul.f32 s0, s1, s2", 1),
    ("ee80 0a81", "vdiv.f32 s0, s1, s2", 14),
    ("eeb1 0ae0", "vsqrt.f32 s0, s1", 14),
    ("ee00 0a81", "vmla.f32 s0, s1, s2", 3),
    ("ed90 0a00", "vldr s0, [r0]", 2),
    ("ed80 0a00", "vstr s0, [r0]", 2),
    ("ed2d 8a02", "vpush {s16-s17}", 1 + 2),
    ("ed2d 8b02", "vpush {d8}", 1 + 2),             # a double is two registers' worth
    ("ee10 0a10", "vmov r0, s0", 2),
    ("eeb0 0a60", "vmov.f32 s0, s1", 1),
    ("eeb7 0a00", "vmov.f32 s0, #1.0", 1),
    ("eef1 fa10", "vmrs APSR_nzcv, fpscr", 1),
    ("eebd 0ac0", "vcvt.s32.f32 s0, s0", 1),
]


@pytest.mark.tor("TOR-MET-004")
@pytest.mark.parametrize("words,assembly,expected", CORTEX_M4_CASES, ids=[c[1] for c in CORTEX_M4_CASES])
def test_cortex_m4_cycles(words, assembly, expected):
    assert M4.cycles(thumb(words)) == expected


@pytest.mark.tor("TOR-MET-004")
def test_cortex_m4_branches_cost_one_when_not_taken_and_refill_is_configurable():
    bne, cbz = thumb("d1fe"), thumb("b108")
    for insn in (bne, cbz):
        assert timing.is_conditional(insn) and timing.writes_pc(insn)
        assert M4.cycles(insn, executed=False) == 1
        assert M4.cycles(insn, executed=True) == 1 + P
        assert M4.cycles(insn) == 1 + P  # unknown: taken, the worst case
    fast = timing.get("cortex-m4", refill=1)
    assert fast.cycles(thumb("e7fe")) == 2 and fast.cycles(bne, executed=True) == 2
    with pytest.raises(ConfigurationError):
        timing.get("cortex-m4", refill=4)


@pytest.mark.tor("TOR-MET-004")
def test_cortex_m4_it_block_condition():
    it, addeq = decode("bf08; 1840", thumb=True, mclass=True)  # it eq; addeq r0, r0, r1
    assert it.mnemonic == "it" and timing.is_conditional(addeq)
    assert M4.cycles(addeq, executed=False) == 1 and M4.cycles(addeq) == 1


def test_cortex_m4_flash_wait_states_per_fetch_and_per_word_loaded():
    model = timing.get("cortex-m4", flash_wait_states=2)
    assert model.cycles(thumb("1888")) == 1 + 2                  # adds: fetch
    assert model.cycles(thumb("6808")) == 2 + 2 + 2              # ldr: fetch + one word
    assert model.cycles(thumb("6008")) == 2 + 2                  # str: fetch only
    assert model.cycles(thumb("bd10")) == 1 + 2 + P + 2 + 2 * 2  # pop {r4, pc}: fetch + two words


@pytest.mark.tor("TOR-MET-004")
def test_cortex_m4_refuses_double_precision_and_unknown_instructions():
    with pytest.raises(timing.TimingError, match="double precision"):
        M4.cycles(thumb("ee31 0b02"))  # vadd.f64 d0, d1, d2
    with pytest.raises(timing.TimingError):
        M4.cycles(thumb("be00"))  # bkpt 0 (exception)


# ---- registry ----

def test_registry_names_options_and_targets():
    assert timing.names() == ["arm7tdmi", "cortex-m4", "trivial"]
    with pytest.raises(ConfigurationError, match="unknown timing model"):
        timing.get("cortex-a15")
    with pytest.raises(ConfigurationError, match="no option"):
        timing.get("arm7tdmi", flash_wait_states=1)
    assert timing.model_class("trivial").generic and not timing.model_class("arm7tdmi").generic
    assert timing.get("cortex-m4").params() == {"refill": 3, "divide_cycles": 12, "flash_wait_states": 0}
