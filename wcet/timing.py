"""Instruction timing models: cycles of one instruction, for measurement and WCET alike.

One definition serves both uses. The measured-execution stage
(``harness/measurement/cycles.py``) multiplies each instruction's cost by how often QEMU ran
it; the WCET analyzer costs the basic blocks of its IPET problem with the very
same ``cycles`` call. A model prices one instruction at a time:

    model.cycles(insn, executed=None) -> int

``insn`` is an instruction with capstone's details: a ``wcet.armcode.Insn``
(what ``ArmCode.decode`` gives; it decodes Thumb IT blocks in sequence, so
instructions inside them carry their condition) or capstone's own ``CsInsn``. ``executed`` matters only for a *conditional* instruction
(``is_conditional``): True when its condition passed (for a branch: taken),
False when it failed (not taken), None when unknown, which charges the larger
of the two, the worst case. The measured stage knows it for every instruction
that writes the PC (QEMU ends a translation block there, and the next block
executed tells whether it jumped); it does not know it for other conditional
instructions (ARM predicated data processing, instructions inside a Thumb IT
block) and passes None. The WCET analyzer passes True/False per CFG edge for
branches and None elsewhere.

Models, by name (``get``), are the names of the entry-point group
``assay.timing_models``: Assay declares these three in its ``pyproject.toml``,
and an installed package may add its own (a ``TimingModel`` subclass). The group
is read here rather than through ``harness.registry``, because ``wcet`` never
imports ``harness``; the rule is the same: a name two distributions declare is
an error naming both. It is read from the ``entry_points.txt`` of each
``.dist-info`` (and ``.egg-info``) folder on ``sys.path``, first occurrence of
a distribution winning, as ``importlib.metadata.entry_points`` reads them, but
without importing ``importlib.metadata`` (its ``email`` and ``zipfile``
imports cost ``python -m wcet`` about 50 ms and 5 MB of its start-up, against
about 3 ms for this scan; tests/harness/test_registry.py checks both agree).

- ``trivial``: ``cycles_per_instruction`` (default 5) for every instruction,
  as OTAWA's ``trivial`` script (5 cycles per executed instruction; see
  ../shared/otawa/README.md: 22715 = 4543 x 5).
- ``arm7tdmi``: ARM7TDMI Technical Reference Manual (ARM DDI 0210C), chapter
  "Instruction Cycle Timings": each instruction takes S (sequential), N
  (non-sequential) and I (internal) cycles, per the chapter's sections for
  each instruction class and its "Instruction speed summary" table. Memory
  wait states: an N cycle costs ``1 + n_wait_states`` clock cycles, an S cycle
  ``1 + s_wait_states``, an I cycle 1.
- ``cortex-m4``: Cortex-M4 Technical Reference Manual (ARM DDI 0439B / 100166),
  section "Processor instructions", Table 3-1 "Cortex-M4 instruction set
  summary", and chapter "Floating Point Unit", Table 7-1 "FPU instruction
  set", for zero wait states; plus ``flash_wait_states`` per instruction fetch
  and per word loaded (see ``CortexM4``).

Which model describes which CPU: each target profile names its own model with
the ``timing`` key (toolchains/*.toml): arm7tdmi -> arm7tdmi,
cortex-m4f -> cortex-m4, cortex-a15 and host -> trivial (no cycle-level model
of an out-of-order core is offered).
"""

from __future__ import annotations

import functools
from collections import namedtuple

from wcet.disasm import A
from wcet.errors import ConfigurationError, WcetError


TYPE_CHECKING = False  # typing.TYPE_CHECKING's value, without importing typing (wcet/__init__.py)
if TYPE_CHECKING:
    from typing import ClassVar
    import capstone


class TimingError(WcetError):
    """An instruction the model has no timing for (the message names it and its address)."""


def _ids(*names: str) -> frozenset[int]:
    return frozenset(getattr(A, f"ARM_INS_{name}") for name in names)


# ---- instruction facts shared by the models (and the WCET analyzer) ----

_BRANCHES = _ids("B", "BL", "BX", "BLX", "CBZ", "CBNZ", "TBB", "TBH")
_COMPARE_BRANCHES = _ids("CBZ", "CBNZ")


def writes_pc(insn: capstone.CsInsn) -> bool:
    """True for an instruction that may change the flow: a branch, a call, a return, any write to PC."""
    return insn.id in _BRANCHES or (names_pc(insn) and A.ARM_REG_PC in insn.regs_access()[1])


def names_pc(insn: capstone.CsInsn) -> bool:
    """Whether PC is one of ``insn``'s register operands. Capstone counts PC among the registers an
    instruction writes (``regs_access``) only for such an instruction or a branch (checked on every
    instruction of the test images, tests/wcet/test_armcode.py); asking ``regs_access`` costs far more than
    looking at the operands, and a V3 image has hundreds of thousands of instructions."""
    return any(op.type == A.ARM_OP_REG and op.reg == A.ARM_REG_PC for op in insn.operands)


def is_conditional(insn: capstone.CsInsn) -> bool:
    """True if the instruction may or may not take effect: a condition code (ARM, or Thumb IT block), CBZ/CBNZ."""
    return insn.cc not in (A.ARM_CC_AL, A.ARM_CC_INVALID) or insn.id in _COMPARE_BRANCHES


def _where(insn: capstone.CsInsn) -> str:
    return f"'{insn.mnemonic} {insn.op_str}'".replace(" '", "'") + f" at {insn.address:#x}"


def _register_list(insn: capstone.CsInsn, has_base: bool) -> list[int]:
    """The registers of an LDM/STM/PUSH/POP (or VLDM/VSTM/VPUSH/VPOP) list."""
    registers = [op.reg for op in insn.operands if op.type == A.ARM_OP_REG]
    return registers[1:] if has_base else registers


def _words(insn: capstone.CsInsn, registers: list[int]) -> int:
    """32-bit words moved by a register list: a D register is two."""
    return sum(2 if insn.reg_name(r).startswith("d") else 1 for r in registers)


# ---- the models ----

class TimingModel:
    """Base class: ``cycles(insn, executed)``.

    A model's parameters are the annotated attributes of its class, in the order declared (a base class's
    first), as a dataclass's fields: ``cycles_per_instruction: int = 5`` (the value is the default; one without
    a default must be given); ``ClassVar`` ones are not parameters. They are set by keyword (or position) at
    construction, as ``get`` does, then checked by the model's ``__post_init__`` if it has one. A model is
    immutable, and equal to (and hashed as) a model of its class with the same parameters. ``dataclasses`` is
    not used (wcet/__init__.py); a subclass may still be a frozen dataclass (the form before issue 45).
    """

    name: ClassVar[str] = ""
    #: True for a model that describes no particular CPU (trivial) and so applies to every target;
    #: a CPU's own model applies to the targets whose profile names it (the profile's ``timing`` key)
    generic: ClassVar[bool] = False
    #: the names of the parameters, in order (set for each subclass from its annotations)
    parameters: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        own = [key for key, kind in vars(cls).get("__annotations__", {}).items()
               if not (kind if isinstance(kind, str) else repr(kind)).removeprefix("typing.").startswith("ClassVar")]
        cls.parameters = tuple(dict.fromkeys((*cls.parameters, *own)))

    def __init__(self, *args, **options) -> None:
        cls = type(self)
        if len(args) > len(cls.parameters):
            raise TypeError(f"{cls.__name__} takes at most {len(cls.parameters)} parameters, {len(args)} given")
        given = dict(zip(cls.parameters, args))
        for key, value in options.items():
            if key not in cls.parameters:
                raise TypeError(f"{cls.__name__} has no parameter {key!r}")
            if key in given:
                raise TypeError(f"{cls.__name__}: parameter {key!r} given twice")
            given[key] = value
        for key in cls.parameters:
            if key not in given and not hasattr(cls, key):
                raise TypeError(f"{cls.__name__}: parameter {key!r} missing")
            object.__setattr__(self, key, given[key] if key in given else getattr(cls, key))
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()

    def __setattr__(self, key: str, value) -> None:
        raise AttributeError(f"cannot assign to field {key!r}: a timing model is immutable")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"cannot delete field {key!r}: a timing model is immutable")

    def __eq__(self, other) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.params() == other.params()

    def __hash__(self) -> int:
        return hash((self.__class__, *self.params().values()))

    def __repr__(self) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{k}={v!r}' for k, v in self.params().items())})"

    def cycles(self, insn: capstone.CsInsn, executed: bool | None = None) -> int:
        raise NotImplementedError

    def params(self) -> dict:
        return {key: getattr(self, key) for key in self.parameters}

    def describe(self) -> str:
        options = ", ".join(f"{key}={value}" for key, value in self.params().items())
        return f"{self.name} ({options})" if options else self.name


class Trivial(TimingModel):
    """A fixed cost per executed instruction (OTAWA's ``trivial`` script: 5)."""

    name: ClassVar[str] = "trivial"
    generic: ClassVar[bool] = True
    cycles_per_instruction: int = 5

    def cycles(self, insn: capstone.CsInsn, executed: bool | None = None) -> int:
        return self.cycles_per_instruction


# ARM7TDMI TRM, "Instruction Cycle Timings". Instruction classes by capstone id.
_A7_DATA = _ids("AND", "EOR", "SUB", "RSB", "ADD", "ADC", "SBC", "RSC", "TST", "TEQ", "CMP", "CMN", "ORR",
                "MOV", "BIC", "MVN", "LSL", "LSR", "ASR", "ROR", "RRX", "ADR", "NOP")
_A7_SHIFT_ALIASES = _ids("LSL", "LSR", "ASR", "ROR")  # MOV Rd, Rm, <shift> Rs is printed "lsl Rd, Rm, Rs"
_A7_PSR = _ids("MRS", "MSR")
_A7_MULTIPLY_LONG = _ids("MLA", "SMULL", "UMULL")  # 1S+(m+1)I
_A7_MULTIPLY_LONG_ACCUMULATE = _ids("SMLAL", "UMLAL")  # 1S+(m+2)I
_A7_LOAD = _ids("LDR", "LDRB", "LDRH", "LDRSB", "LDRSH", "LDRT", "LDRBT")
_A7_STORE = _ids("STR", "STRB", "STRH", "STRT", "STRBT")
_A7_LOAD_MULTIPLE = _ids("LDM", "LDMDA", "LDMDB", "LDMIB", "POP")
_A7_STORE_MULTIPLE = _ids("STM", "STMDA", "STMDB", "STMIB", "PUSH")
_A7_SWAP = _ids("SWP", "SWPB")
_A7_BRANCH = _ids("B", "BL", "BX")
_A7_SVC = _ids("SVC")
_A7_UNDEFINED = _ids("UDF")
_STACK_LISTS = _ids("PUSH", "POP", "VPUSH", "VPOP")
_REGISTER_SHIFTS = {A.ARM_SFT_ASR_REG, A.ARM_SFT_LSL_REG, A.ARM_SFT_LSR_REG, A.ARM_SFT_ROR_REG, A.ARM_SFT_RRX_REG}


class Arm7tdmi(TimingModel):
    """ARM7TDMI cycle counts in S, N and I cycles (ARM DDI 0210C, "Instruction Cycle Timings").

    Per instruction class (TRM section, then the "Instruction speed summary"):
    - data processing: 1S; +1I with a register-specified shift; +1S+1N when
      it writes the PC ("Data operations");
    - MRS, MSR: 1S;
    - MUL 1S+mI, MLA 1S+(m+1)I, SMULL/UMULL 1S+(m+1)I, SMLAL/UMLAL 1S+(m+2)I
      ("Multiply and multiply accumulate"). m is 1 to 4 by the multiplier
      operand's significant bytes (early termination: 1 if Rs[31:8] are all
      zero, or all one for signed forms; 2 for Rs[31:16]; 3 for Rs[31:24]; 4
      otherwise). Operand values are unknown to both the counter and the WCET
      analyzer, so ``multiply_m`` is 4, the worst case, unless set;
    - LDR (any size): 1S+1N+1I; 2S+2N+1I to the PC ("Load register");
    - STR (any size): 2N ("Store register");
    - LDM of n registers: nS+1N+1I; (n+1)S+2N+1I with the PC ("Load multiple registers");
    - STM of n registers: (n-1)S+2N ("Store multiple registers");
    - SWP: 1S+2N+1I ("Data swap");
    - B, BL, BX: 2S+1N ("Branch and branch with link", "Branch and exchange");
      Thumb BL (a two-halfword pair, decoded as one): 3S+1N ("Thumb branch with link");
    - SWI: 2S+1N; undefined instruction: 2S+1N+1I (exception entry);
    - an instruction whose condition fails: 1S ("Unexecuted instructions").
    Coprocessor and ARMv5+ instructions are refused (the ARM7TDMI has none).
    """

    name: ClassVar[str] = "arm7tdmi"
    n_wait_states: int = 0
    s_wait_states: int = 0
    multiply_m: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.multiply_m <= 4:
            raise ConfigurationError(f"arm7tdmi timing: multiply_m must be 1 to 4, not {self.multiply_m}")
        if self.n_wait_states < 0 or self.s_wait_states < 0:
            raise ConfigurationError("arm7tdmi timing: wait states must be >= 0")

    def cycles(self, insn: capstone.CsInsn, executed: bool | None = None) -> int:
        return self.clocks(self.sni(insn, executed))

    def clocks(self, sni: tuple[int, int, int]) -> int:
        s, n, i = sni
        return s * (1 + self.s_wait_states) + n * (1 + self.n_wait_states) + i

    def sni(self, insn: capstone.CsInsn, executed: bool | None = None) -> tuple[int, int, int]:
        """(S, N, I) cycles of one execution of ``insn``."""
        if is_conditional(insn):
            if executed is False:
                return (1, 0, 0)
            if executed is None:
                passed, failed = self._executed(insn), (1, 0, 0)
                return passed if self.clocks(passed) >= self.clocks(failed) else failed
        return self._executed(insn)

    def _executed(self, insn: capstone.CsInsn) -> tuple[int, int, int]:
        op, m = insn.id, self.multiply_m
        pc = writes_pc(insn)
        if op in _A7_DATA:
            register_shift = any(o.type == A.ARM_OP_REG and o.shift.type in _REGISTER_SHIFTS for o in insn.operands)
            if op in _A7_SHIFT_ALIASES and len(insn.operands) == 3 and insn.operands[2].type == A.ARM_OP_REG:
                register_shift = True
            s, n, i = 1, 0, 1 if register_shift else 0
            return (s + 1, n + 1, i) if pc else (s, n, i)
        if op in _A7_PSR:
            return (1, 0, 0)
        if op == A.ARM_INS_MUL:
            return (1, 0, m)
        if op in _A7_MULTIPLY_LONG:
            return (1, 0, m + 1)
        if op in _A7_MULTIPLY_LONG_ACCUMULATE:
            return (1, 0, m + 2)
        if op in _A7_LOAD:
            return (2, 2, 1) if pc else (1, 1, 1)
        if op in _A7_STORE:
            return (0, 2, 0)
        if op in _A7_LOAD_MULTIPLE:
            count = len(_register_list(insn, has_base=op not in _STACK_LISTS))
            return (count + 1, 2, 1) if pc else (count, 1, 1)
        if op in _A7_STORE_MULTIPLE:
            count = len(_register_list(insn, has_base=op not in _STACK_LISTS))
            return (count - 1, 2, 0)
        if op in _A7_SWAP:
            return (1, 2, 1)
        if op in _A7_BRANCH:
            thumb_bl = op == A.ARM_INS_BL and insn.size == 4 and _is_thumb(insn)
            return (3, 1, 0) if thumb_bl else (2, 1, 0)
        if op in _A7_SVC:
            return (2, 1, 0)
        if op in _A7_UNDEFINED:
            return (2, 1, 1)
        raise TimingError(f"arm7tdmi timing model: no ARM7TDMI (ARMv4T) timing for {_where(insn)}")


def _is_thumb(insn: capstone.CsInsn) -> bool:
    return A.ARM_GRP_THUMB in insn.groups


# Cortex-M4 TRM Table 3-1. Instruction classes by capstone id.
_M4_ONE = _ids(
    # move, add, subtract, compare, logical, shift (1; 1+P to the PC)
    "MOV", "MOVW", "MOVT", "ADD", "ADDW", "ADC", "ADR", "SUB", "SUBW", "SBC", "RSB", "NEG", "CMP", "CMN",
    "AND", "EOR", "ORR", "ORN", "BIC", "MVN", "TST", "TEQ", "LSL", "LSR", "ASR", "ROR", "RRX",
    # multiply (all 1 on the Cortex-M4, including long and DSP multiplies)
    "MUL", "MLA", "MLS", "SMULL", "UMULL", "SMLAL", "UMLAL", "UMAAL",
    "SMULBB", "SMULBT", "SMULTB", "SMULTT", "SMULWB", "SMULWT", "SMLABB", "SMLABT", "SMLATB", "SMLATT",
    "SMLAWB", "SMLAWT", "SMLAD", "SMLADX", "SMLSD", "SMLSDX", "SMUAD", "SMUADX", "SMUSD", "SMUSDX",
    "SMMUL", "SMMULR", "SMMLA", "SMMLAR", "SMMLS", "SMMLSR", "SMLALBB", "SMLALBT", "SMLALTB", "SMLALTT",
    "SMLALD", "SMLALDX", "SMLSLD", "SMLSLDX", "USAD8", "USADA8",
    # saturate, parallel arithmetic, packing, extend, bit field, reverse, count
    "SSAT", "USAT", "SSAT16", "USAT16", "QADD", "QSUB", "QDADD", "QDSUB", "SADD8", "UADD8", "UQADD8",
    "SHADD8", "UHADD8", "SEL", "PKHBT", "PKHTB", "SXTB", "SXTH", "UXTB", "UXTH", "SXTB16", "UXTB16",
    "SXTAB", "SXTAH", "UXTAB", "UXTAH", "SXTAB16", "UXTAB16", "BFC", "BFI", "SBFX", "UBFX",
    "REV", "REV16", "REVSH", "RBIT", "CLZ",
    # IT (1, or 0 when folded into the previous instruction: 1 charged); NOP (capstone: HINT, see below)
    "NOP", "IT",
)
_M4_HINT = _ids("HINT")  # NOP, YIELD, SEV: 1; WFI, WFE: 1+W (W: waiting for an event), refused
_M4_DIVIDE = _ids("SDIV", "UDIV")
_M4_LOAD = _ids("LDR", "LDRB", "LDRH", "LDRSB", "LDRSH", "LDRT", "LDRBT", "LDRHT", "LDRSBT", "LDRSHT",
                "LDREX", "LDREXB", "LDREXH")
_M4_STORE = _ids("STR", "STRB", "STRH", "STRT", "STRBT", "STRHT", "STREX", "STREXB", "STREXH")
_M4_DOUBLE = _ids("LDRD", "STRD")
_M4_LOAD_MULTIPLE = _ids("LDM", "LDMDB", "POP")
_M4_STORE_MULTIPLE = _ids("STM", "STMDB", "PUSH")
_M4_BRANCH = _ids("B", "BL", "BX", "BLX")
_M4_TABLE_BRANCH = _ids("TBB", "TBH")
_M4_SYSTEM = _ids("MRS", "MSR", "CPS", "CLREX", "PLD")
_M4_BARRIER = _ids("DMB", "DSB", "ISB")
# Table 7-1 (FPU).
_FP_ONE = _ids("VABS", "VADD", "VSUB", "VMUL", "VNMUL", "VNEG", "VCMP", "VCMPE", "VCVT", "VCVTR", "VCVTB",
               "VCVTT", "VMRS", "VMSR",
               "FMSTAT", "FCONSTS")  # capstone's ids for VMRS APSR_nzcv, FPSCR and VMOV.F32 Sd, #imm
_FP_MAC = _ids("VMLA", "VMLS", "VNMLA", "VNMLS", "VFMA", "VFMS", "VFNMA", "VFNMS")
_FP_LONG = _ids("VDIV", "VSQRT")
_FP_LOAD_STORE = _ids("VLDR", "VSTR")
_FP_MULTIPLE = _ids("VLDMIA", "VLDMDB", "VSTMIA", "VSTMDB", "VPUSH", "VPOP")
_FP_LOADS = _ids("VLDR", "VLDMIA", "VLDMDB", "VPOP")


class CortexM4(TimingModel):
    """Cortex-M4 (with FPv4-SP) cycle counts (ARM DDI 0439B / 100166, Tables 3-1 and 7-1).

    Table 3-1, zero wait states; P is a pipeline refill of 1 to 3 cycles
    ("depending on the alignment and width of the target instruction, and
    whether the processor manages to speculate the address early"), N the
    number of registers moved:
    - data processing, multiply and multiply-accumulate (32 and 64 bit),
      saturate, extend, bit field, reverse, CLZ, IT, NOP: 1; 1+P to the PC;
    - SDIV, UDIV: 2 to 12 by operand values: ``divide_cycles`` (12, the worst case);
    - LDR (any size): 2; 2+P to the PC; STR (any size): 2; LDRD, STRD: 3 (1+N, N=2);
    - LDM, POP: 1+N, 1+N+P with the PC; STM, PUSH: 1+N;
    - B, BL, BX, BLX: 1+P; B<cond> and CBZ/CBNZ: 1 not taken, 1+P taken; TBB, TBH: 2+P;
    - MRS, MSR, CPS: 1 or 2: 2; DMB, DSB, ISB: 1+B, charged 1+P (no
      outstanding memory transfers in this code).
    Table 7-1 (FPU, single precision): VADD, VSUB, VMUL, VNMUL, VABS, VNEG,
    VCMP(E), VCVT, VMRS, VMSR, VMOV immediate or register: 1; VMLA, VMLS,
    VNMLA, VNMLS, VFMA, VFMS, VFNMA, VFNMS: 3; VDIV, VSQRT: 14; VLDR/VSTR: 2
    (.32), 3 (.64); VLDM/VSTM/VPUSH/VPOP: 1+N (N single registers; a double
    counts 2); VMOV between one core register and one single, or two core
    registers and two singles or a double: 2; VMOV of a double's half: 1.

    Assumptions (documented in docs/met.md):
    - ``refill`` is P for every taken branch and PC write; 3, the top of the
      TRM's range, by default (safe for WCET; an upper bound for measurement);
    - neighbouring loads and stores that the TRM lets pipeline into one cycle
      each are charged their full 2 cycles (a per-instruction model cannot
      see the neighbour; an upper bound);
    - an instruction whose condition fails (inside an IT block) takes 1 cycle;
    - ``flash_wait_states`` W: the core has no flash of its own; a
      microcontroller's flash adds W cycles to each access. The model adds W
      per instruction (its fetch; no prefetch buffer or flash accelerator is
      assumed, an upper bound: one 32-bit fetch can hold two 16-bit
      instructions) and W per word loaded (it cannot tell loads from flash
      and from RAM apart, so every load is charged). W = 0 is the MPS2 AN386
      board QEMU emulates (code and data in zero-wait SSRAM).
    """

    name: ClassVar[str] = "cortex-m4"
    refill: int = 3
    divide_cycles: int = 12
    flash_wait_states: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.refill <= 3:
            raise ConfigurationError(f"cortex-m4 timing: refill (P) must be 1 to 3, not {self.refill}")
        if not 2 <= self.divide_cycles <= 12:
            raise ConfigurationError(f"cortex-m4 timing: divide_cycles must be 2 to 12, not {self.divide_cycles}")
        if self.flash_wait_states < 0:
            raise ConfigurationError("cortex-m4 timing: flash_wait_states must be >= 0")

    def cycles(self, insn: capstone.CsInsn, executed: bool | None = None) -> int:
        if is_conditional(insn) and executed is False:
            return 1 + self.flash_wait_states
        base, loaded = self._executed(insn)
        return base + self.flash_wait_states * (1 + loaded)

    def _executed(self, insn: capstone.CsInsn) -> tuple[int, int]:
        """(cycles at zero wait states, 32-bit words loaded from memory)."""
        op, p = insn.id, self.refill
        pc = writes_pc(insn)
        if op in _M4_ONE:
            return (1 + p if pc else 1), 0
        if op in _M4_HINT and insn.mnemonic.split(".")[0] in ("nop", "yield", "sev"):
            return 1, 0
        if op in _M4_DIVIDE:
            return self.divide_cycles, 0
        if op in _M4_LOAD:
            return (2 + p if pc else 2), 1
        if op in _M4_STORE:
            return 2, 0
        if op in _M4_DOUBLE:
            return 3, 2 if op == A.ARM_INS_LDRD else 0
        if op in _M4_LOAD_MULTIPLE:
            count = len(_register_list(insn, has_base=op not in _STACK_LISTS))
            return (1 + count + p if pc else 1 + count), count
        if op in _M4_STORE_MULTIPLE:
            return 1 + len(_register_list(insn, has_base=op not in _STACK_LISTS)), 0
        if op in _M4_BRANCH or op in _COMPARE_BRANCHES:
            return 1 + p, 0  # B<cond>/CBZ not taken: 1, handled by cycles(executed=False)
        if op in _M4_TABLE_BRANCH:
            return 2 + p, 1
        if op in _M4_SYSTEM:
            return 2, 0
        if op in _M4_BARRIER:
            return 1 + p, 0
        if op in _FP_ONE:
            self._single_precision(insn)
            return 1, 0
        if op in _FP_MAC:
            self._single_precision(insn)
            return 3, 0
        if op in _FP_LONG:
            self._single_precision(insn)
            return 14, 0
        if op in _FP_LOAD_STORE:
            words = _words(insn, [insn.operands[0].reg])
            return 1 + words, words if op in _FP_LOADS else 0
        if op in _FP_MULTIPLE:
            words = _words(insn, _register_list(insn, has_base=op not in _STACK_LISTS))
            return 1 + words, words if op in _FP_LOADS else 0
        if op == A.ARM_INS_VMOV:
            return self._vmov(insn), 0
        raise TimingError(f"cortex-m4 timing model: no Cortex-M4 timing for {_where(insn)}")

    @staticmethod
    def _single_precision(insn: capstone.CsInsn) -> None:
        if ".f64" in insn.mnemonic or any(op.type == A.ARM_OP_REG and insn.reg_name(op.reg).startswith("d")
                                          for op in insn.operands if op.type == A.ARM_OP_REG):
            raise TimingError(f"cortex-m4 timing model: FPv4-SP has no double precision: {_where(insn)}")

    @staticmethod
    def _vmov(insn: capstone.CsInsn) -> int:
        """Table 7-1: 1 for immediate, register-to-register or a double's half; 2 core <-> single(s)/double."""
        kinds = []
        for op in insn.operands:
            if op.type == A.ARM_OP_REG:
                name = insn.reg_name(op.reg)
                kinds.append("s" if name.startswith("s") else "d" if name.startswith("d") else "r")
            else:
                kinds.append("i")
        if "r" not in kinds:
            return 1  # immediate or FP register to FP register
        if "[" in insn.op_str:
            return 1  # vmov.32 Dd[x], Rt or Rt, Dd[x]: a double's half
        return 2


GROUP = "assay.timing_models"


class _Entry(namedtuple("_Entry", [
    "name",
    "value",  # module:attribute
    "info",  # the .dist-info / .egg-info folder
])):
    """One entry point of ``GROUP``: its name, ``module:attribute`` and the metadata folder declaring it."""

    __slots__ = ()

    def load(self):
        import importlib

        module, _, attribute = self.value.partition(":")
        found = importlib.import_module(module.strip())
        for part in attribute.strip().split(".") if attribute.strip() else ():
            found = getattr(found, part)
        return found


@functools.cache
def _entries() -> dict[str, _Entry]:
    """name -> entry point of ``GROUP`` over the installed distributions (read once); an error for a name
    declared by two of them, naming both."""
    found: dict[str, _Entry] = {}
    for entry in _group_entries(GROUP):
        other = found.setdefault(entry.name, entry)
        if other is not entry:
            raise ConfigurationError(f"timing model '{entry.name}' is registered twice (entry-point group {GROUP}): "
                                     f"by {_origin(other)} and by {_origin(entry)}; uninstall one of them")
    return found


def _group_entries(group: str) -> list[_Entry]:
    """The entry points of ``group`` declared by the distributions on ``sys.path`` (module docstring)."""
    import os
    import re
    import sys

    entries, seen = [], set()
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            stem, dot, kind = name.rpartition(".")
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            distribution = re.sub(r"[-_.]+", "_", stem.split("-")[0]).lower()  # as importlib.metadata normalises
            if distribution in seen:
                continue
            seen.add(distribution)
            try:
                with open(os.path.join(folder or ".", name, "entry_points.txt")) as text:
                    lines = text.read().splitlines()
            except OSError:
                continue
            section = None
            for line in lines:
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                elif section == group and "=" in line and not line.startswith(("#", ";")):
                    key, _, value = line.partition("=")
                    entries.append(_Entry(key.strip(), value.strip(), os.path.join(folder or ".", name)))
    return entries


def _origin(entry: _Entry) -> str:
    """``distribution version (value)``, from the distribution's METADATA (its ``Name`` and ``Version``)."""
    import os

    fields = {}
    try:
        with open(os.path.join(entry.info, "METADATA" if entry.info.endswith(".dist-info") else "PKG-INFO")) as text:
            for line in text:
                if not line.strip():
                    break  # the headers end at the first blank line
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return entry.value
    return f"{fields.get('Name', '?')} {fields.get('Version', '?')} ({entry.value})"


def names() -> list[str]:
    """The registered timing models, sorted."""
    return sorted(_entries())


def model_class(name: str) -> type[TimingModel]:
    """The ``TimingModel`` subclass registered as ``name``."""
    entry = _entries().get(name)
    if entry is None:
        known = ", ".join(names()) or "none: is Assay installed (pip install -e .)?"
        raise ConfigurationError(f"unknown timing model '{name}'; choose from {known}")
    cls = entry.load()
    if not (isinstance(cls, type) and issubclass(cls, TimingModel)) or cls.name != name:
        raise ConfigurationError(f"timing model '{name}' of {_origin(entry)} is not a TimingModel subclass "
                                 f"whose name is '{name}'")
    return cls


def get(name: str, **options) -> TimingModel:
    """The model called ``name`` with its parameters set from ``options`` (unknown keys are refused)."""
    cls = model_class(name)
    unknown = set(options) - set(cls.parameters)
    if unknown:
        raise ConfigurationError(f"timing model {name} has no option {', '.join(sorted(unknown))}; "
                                 f"its options: {', '.join(cls.parameters) or 'none'}")
    return cls(**{key: int(value) for key, value in options.items()})
