"""Loop bounds read from the machine code of an -O0 build: the counted loop of a frame slot (origin ``binary-counter``).

    counters = BinaryCounters(program, facts)
    bound = counters.bound(routine, loop)   # a wcet.facts.LoopBound, or a str: why this loop is not bounded so

Where the C parser cannot read the source (C++ templates: Eclipse Aidge's kernels, whose loop bounds are template
arguments), the bound is read from the binary, as industrial tools do (aiT's loop bound analysis). gcc -O0 keeps
every local in its own stack slot and compiles ``for (i = c0; i < K; i += s)`` as ``str c0 -> [slot]; b test;
body; ldr; add #s; str -> [slot]; test: ldr [slot]; cmp K; b<cc> body``. A natural loop is bounded when all of
this is proven:

- **the frame**: a forward data-flow analysis over the whole function gives each register a value: a constant,
  an address ``entry sp + c`` (c known), a frame address with an unknown offset, or a value not derived from
  the stack pointer. The frame pointer is no special
  register: ``r7``/``r11`` are whatever the analysis finds (set once from sp, or not usable);
- **the counter**: a 4-byte slot ``[o, o + 4)`` of the frame that the DWARF information declares as one whole
  variable (``DW_OP_fbreg`` from ``DW_OP_call_frame_cfa``, i.e. entry sp) of 4 bytes, whose scope covers the
  loop, and that no declared variable overlaps otherwise: a complete object that no other object contains;
- **no other write can reach it**: every store with an exact frame address either misses the slot or writes it
  whole (a word ``str``: the initialisation outside the loop, the increment inside); the function stores through
  no frame address with an unknown offset and lets none escape (``values[k]`` of a local array: gcc may add the
  index before the constants, ``k*4 + 80 + r7 - 72``, so the address's constant part does not tell which object
  it points into); no exact address of the slot or one past it (``o`` to ``o + 4``: under memory safety the
  only values a pointer to the slot can hold) is passed to a call (r0-r3) or stored to memory, and an exact
  address of another object does not reach the slot; every call in the loop has a known sp, and its callee's
  code writes above its entry sp (its stack arguments, in the caller's frame) only at exact places that miss
  the slot;
- **the initialisation**: on every edge entering the loop's header from outside, the last store to the slot in
  the edge's source block is an unconditional ``str`` of a known constant c0, with no call after it;
- **the test**: a block E of the loop, executed once per iteration (it dominates every latch within the loop and
  lies in no inner loop), ends in a conditional branch with one side leaving the loop, on a ``cmp`` of the word
  loaded from the slot in E with a constant K (immediate, ``movw``/``movt``, literal pool, or the result of a call
  to a function proven to return a constant: straight-line, no calls, no stores outside its own frame, r0 a
  constant at its return), directly or through gcc's materialised boolean (``mov<cc> r, #1; mov<!cc> r, #0;
  uxtb``/``and #255``; ``cmp r, #0; bne``/``beq``); the condition code gives signed or unsigned semantics;
- **the increment**: the slot's only store inside the loop is ``ldr r, [slot]; add r, #s; str r, [slot]``
  (s > 0, the ``str`` unconditional) in a block B that E dominates and that dominates every latch, in no inner
  loop: one increment per iteration, after the test.

Then the test's j-th evaluation (j = 0, 1, ...) reads c0 + j*s, and the back edges are taken at most n times
per entry, n the first j for which the loop's condition fails, computed exactly in 32-bit arithmetic under the
condition's signedness; a counter that would wrap before that is refused.

**Assumptions**, under which the bound holds: *memory safety* (every access through a pointer stays inside the
object the pointer was derived from: no out-of-bounds or dangling access; for generated code the semantic
stage's AddressSanitizer and arena-region checks, and Aidge's static buffers, are the evidence) and the *AAPCS*
(callees preserve r4-r11 and sp and return; they write the caller's frame only through the pointers they are
given, in r0-r3 or on the stack, and in their own stack arguments); no interrupt handler writes the task's
stack. Every loop for which one condition fails keeps a one-line reason.
"""

from __future__ import annotations

from pathlib import Path

from wcet.armcode import Insn, pc_relative_literal
from wcet.cfg import ENTRY, EXIT, Cfg
from wcet.disasm import A
from wcet.errors import WcetError
from wcet.facts import FlowFacts, LoopBound
from wcet.loops import Loop
from wcet.program import Program

ORIGIN = "binary-counter"
_MASK = 0xFFFFFFFF
_SP, _LR = 13, 14
_REGS = {A.ARM_REG_R0 + n: n for n in range(13)}  # r0..r12 are consecutive in capstone's numbering
_REGS.update({A.ARM_REG_SP: _SP, A.ARM_REG_LR: _LR})
_ANY = ("any",)  # maybe a frame address, its offset unknown
_SIGNED = {A.ARM_CC_LT, A.ARM_CC_LE, A.ARM_CC_GT, A.ARM_CC_GE}
_INVERSE = {A.ARM_CC_EQ: A.ARM_CC_NE, A.ARM_CC_LT: A.ARM_CC_GE, A.ARM_CC_LE: A.ARM_CC_GT,
            A.ARM_CC_LO: A.ARM_CC_HS, A.ARM_CC_LS: A.ARM_CC_HI}
_INVERSE.update({b: a for a, b in _INVERSE.items()})
_SWAPPED = {A.ARM_CC_EQ: A.ARM_CC_EQ, A.ARM_CC_NE: A.ARM_CC_NE, A.ARM_CC_LT: A.ARM_CC_GT, A.ARM_CC_GT: A.ARM_CC_LT,
            A.ARM_CC_LE: A.ARM_CC_GE, A.ARM_CC_GE: A.ARM_CC_LE, A.ARM_CC_LO: A.ARM_CC_HI, A.ARM_CC_HI: A.ARM_CC_LO,
            A.ARM_CC_LS: A.ARM_CC_HS, A.ARM_CC_HS: A.ARM_CC_LS}
_CC_TEXT = {A.ARM_CC_EQ: "==", A.ARM_CC_NE: "!=", A.ARM_CC_LT: "<", A.ARM_CC_LE: "<=", A.ARM_CC_GT: ">",
            A.ARM_CC_GE: ">=", A.ARM_CC_LO: "<", A.ARM_CC_LS: "<=", A.ARM_CC_HI: ">", A.ARM_CC_HS: ">="}
_ALWAYS = (A.ARM_CC_AL, A.ARM_CC_INVALID)
_STORES = {getattr(A, name) for name in dir(A) if name.startswith(("ARM_INS_ST", "ARM_INS_VST"))} | {
    A.ARM_INS_PUSH, A.ARM_INS_VPUSH}
_LOADS = {getattr(A, name) for name in dir(A) if name.startswith(("ARM_INS_LD", "ARM_INS_VLD"))} | {
    A.ARM_INS_POP, A.ARM_INS_VPOP}
_CALLS = (A.ARM_INS_BL, A.ARM_INS_BLX)


def _frame(value) -> bool:
    """Whether a value may be an address in the frame (``entry sp + c``, or with an unknown offset)."""
    return value is not None and value[0] in ("f", "any")


def _join(a, b):
    """Two values on merging paths: equal stays; a loaded word, boolean or increment is a value of one path
    only and becomes unknown; a frame address meeting anything else loses its offset."""
    if a == b and (a is None or a[0] in ("k", "f", "any")):
        return a
    return _ANY if _frame(a) or _frame(b) else None


class _Frame:
    """What the data-flow analysis of one routine found: the register values at each block's entry, the stores
    into the frame, the frame addresses that escape, the calls; ``problem``: why no slot of it can be trusted."""

    def __init__(self):
        self.states: dict[int, tuple] = {}
        self.exact: list[tuple[int, int, int, object]] = []  # (insn address, start, end, stored value)
        self.escapes: list[tuple[int, int]] = []  # (insn address, c) of the frame addresses entry sp + c that escape
        self.calls: list[tuple[int, object, int | None]] = []  # (insn address, sp there, direct callee or None)
        self.problem: str | None = None
        self.writes_outside = False  # a store that is not into its own frame (for a callee returning a constant)


class BinaryCounters:
    """Bounds of the counted loops of an -O0 binary (module docstring), per loop, with the routines' analyses
    cached."""

    def __init__(self, program: Program, facts: FlowFacts | None = None):
        self.program = program
        self.facts = facts
        self._frames: dict[int, _Frame] = {}
        self._constants: dict[int, int | None] = {}
        self._reach: dict[int, int | None] = {}
        self._variables: dict[int, list[tuple[int, int, list[tuple[int, int]] | None]] | str] = {}

    # -- the bound of one loop

    def bound(self, routine: int, loop: Loop) -> LoopBound | str:
        """The bound of ``loop``, one of the loops of the routine at ``routine``, or why it cannot be proven from
        the machine code."""
        try:
            return self._bound(self.program.cfg(routine, self.facts), loop)
        except (WcetError, KeyError, IndexError) as exc:
            return f"the machine code was not understood ({exc})"

    def _bound(self, cfg: Cfg, loop: Loop) -> LoopBound | str:
        frame = self._frame(cfg)
        if frame.problem:
            return frame.problem
        latches = [block for block in loop.blocks if any(
            e.source == block and e.target == loop.header for e in cfg.edges)]
        inner = set()
        for other in self.program.loops(cfg.entry, self.facts):
            if other.header != loop.header and other.header in loop.blocks:
                inner |= other.blocks
        reasons = []
        best = None
        for block in sorted(loop.blocks):
            found = self._test(cfg, frame, loop, block, latches, inner)
            if isinstance(found, str):
                if found:
                    reasons.append(found)
                continue
            if best is None or found[0] < best[0]:
                best = found
        if best is None:
            return reasons[0] if reasons else "no exit test on a frame slot"
        count, text = best
        return LoopBound(function=loop.function, offset=loop.offset, max=count, source=loop.source_line,
                         justification=f"binary counter: {text}", origin=ORIGIN)

    def _test(self, cfg: Cfg, frame: _Frame, loop: Loop, block: int, latches: list[int],
              inner: set[int]) -> tuple[int, str] | str:
        """The bound given by the exit test ending ``block``, or why there is none ("" if it ends in none)."""
        last = cfg.blocks[block].last
        out = [e for e in cfg.edges if e.source == block]
        leaving = [e for e in out if e.target not in loop.blocks]
        if not leaving or last.id != A.ARM_INS_B or last.cc in _ALWAYS or len(out) != 2 or len(leaving) != 1:
            return ""
        where = f"the exit test at {last.address:#x}"
        if block in inner or not _dominates_all(cfg, loop, block, latches):
            return f"{where} does not run once per iteration"
        flags = self._run(cfg, frame, block)[1]
        stay = last.cc if leaving[0].executed is False else _INVERSE.get(last.cc)
        if flags is not None and flags[0] == "bool":  # cmp rBool, #0; bne/beq
            if last.cc not in (A.ARM_CC_NE, A.ARM_CC_EQ):
                return f"{where}: a boolean tested by {last.mnemonic}"
            taken = flags[1] if last.cc == A.ARM_CC_NE else _INVERSE.get(flags[1])
            stay = taken if leaving[0].executed is False else _INVERSE.get(taken)
            flags = flags[2]
        if flags is None or flags[0] != "cmp" or stay is None:
            return f"{where} compares no frame slot with a constant"
        a, b = flags[1], flags[2]
        if b is not None and b[0] == "ld" and a is not None and a[0] == "k":
            a, b, stay = b, a, _SWAPPED[stay]
        if a is None or a[0] != "ld" or b is None or b[0] != "k":
            return f"{where} compares no frame slot with a constant"
        slot, limit = a[1], b[1]
        return self._counted(cfg, frame, loop, block, latches, inner, slot, limit, stay, where)

    def _counted(self, cfg: Cfg, frame: _Frame, loop: Loop, test: int, latches: list[int], inner: set[int],
                 slot: int, limit: int, stay: int, where: str) -> tuple[int, str] | str:
        """The bound of a loop whose test compares the slot with ``limit``, staying in while ``stay`` holds."""
        name = f"the slot at entry sp {slot:+d}"
        variables = self._variables_of(cfg.entry)
        if isinstance(variables, str):
            return f"{where}: {variables}"
        if any(start < slot + 4 and slot < end and (start, end) != (slot, slot + 4) for start, end, _ in variables):
            return f"{where}: {name} is part of a larger variable in the DWARF information"
        for address, start, end, _ in frame.exact:
            if start < slot + 4 and slot < end and (start, end) != (slot, slot + 4):
                return f"{name} is partly overwritten at {address:#x}"
        for address, origin in frame.escapes:
            if slot <= origin <= slot + 4:
                return f"the address of {name} escapes at {address:#x}"
        for address, sp, callee in frame.calls:
            if self._block_of(cfg, address) not in loop.blocks:
                continue
            reach = self._incoming(callee) if callee is not None else None
            if reach is None or sp is None or sp[0] != "f":
                return f"the call at {address:#x} in the loop may write the frame (its stack arguments are unknown)"
            if sp[1] < slot + 4 and slot < sp[1] + reach:
                return f"the call at {address:#x} may write {name} (its stack arguments)"
        steps = []
        for address, start, end, value in frame.exact:
            block = self._block_of(cfg, address)
            if (start, end) != (slot, slot + 4) or block not in loop.blocks:
                continue
            if value is None or value[0] != "inc" or value[1] != slot or value[2] <= 0:
                return f"{name} is written at {address:#x} inside the loop, not by an increment"
            steps.append((address, block, value[2]))
        if len(steps) != 1:
            return f"{name} is incremented {len(steps)} times in the loop, not once"
        address, block, step = steps[0]
        if block in inner or block == test or not _dominates_all(cfg, loop, block, latches) \
                or not _dominates(cfg, loop, test, block):
            return f"the increment of {name} at {address:#x} does not run once per iteration after the test"
        starts, inits = set(), []
        for edge in cfg.edges:
            if edge.target != loop.header or edge.source in loop.blocks:
                continue
            if edge.source == ENTRY:
                return f"{name}: the loop is entered at the routine's entry"
            found = self._initial(cfg, frame, edge.source, slot)
            if found is None:
                return f"{name} is not set to a constant on the entry edge from {edge.source:#x}"
            inits.append(found[0])
            starts.add(found[1])
        needed = [loop.header, test, address, *inits]
        if not any((start, end) == (slot, slot + 4) and scope is not None and all(
                any(low <= pc < high for low, high in scope) for pc in needed) for start, end, scope in variables):
            return f"{where}: {name} is not a 4-byte variable whose DWARF scope covers the loop"
        counts = []
        for first in sorted(starts):
            count = _iterations(first, limit, step, stay)
            if isinstance(count, str):
                return f"{name}: {count}"
            counts.append(count)
        signed = "signed" if stay in _SIGNED else "unsigned"
        shown = _signed if stay in _SIGNED else int
        text = (f"{name} from {', '.join(str(shown(v)) for v in sorted(starts))} by {step} while "
                f"{_CC_TEXT[stay]} {shown(limit)} ({signed}; test {where[len('the exit test at '):]}, "
                f"increment {address:#x})")
        return max(counts), text

    def _initial(self, cfg: Cfg, frame: _Frame, block: int, slot: int) -> tuple[int, int] | None:
        """(address, constant) of the last store to the slot in ``block``, if it is a word ``str`` of a known
        constant with no call after it in the block."""
        last = None
        for address, start, end, value in frame.exact:
            if self._block_of(cfg, address) == block and start < slot + 4 and slot < end:
                last = (address, start, end, value)
        if last is None or (last[1], last[2]) != (slot, slot + 4) or last[3] is None or last[3][0] != "k":
            return None
        if any(i.id in _CALLS and i.address > last[0] for i in cfg.blocks[block].instructions):
            return None
        return last[0], last[3][1]

    @staticmethod
    def _block_of(cfg: Cfg, address: int) -> int | None:
        for start, block in cfg.blocks.items():
            if start <= address < block.end:
                return start
        return None

    # -- the data-flow analysis of one routine

    def _frame(self, cfg: Cfg) -> _Frame:
        frame = self._frames.get(cfg.entry)
        if frame is not None:
            return frame
        frame = self._frames[cfg.entry] = _Frame()
        entry_state = tuple(("f", 0) if n == _SP else None for n in range(15))
        successors: dict[int, list[int]] = {}
        for edge in cfg.edges:
            if edge.source != ENTRY and edge.target != EXIT:
                successors.setdefault(edge.source, []).append(edge.target)
        frame.states[cfg.entry] = entry_state
        todo = [cfg.entry]
        while todo:
            block = todo.pop()
            state = self._run(cfg, frame, block, record=False)[0]
            for target in successors.get(block, []):
                old = frame.states.get(target)
                new = state if old is None else tuple(_join(a, b) for a, b in zip(old, state))
                new = tuple(_entry_value(v) for v in new)
                if new != old:
                    frame.states[target] = new
                    todo.append(target)
        for block in cfg.blocks:
            if block in frame.states:
                self._run(cfg, frame, block, record=True)
        return frame

    def _run(self, cfg: Cfg, frame: _Frame, block: int, record: bool = False) -> tuple[tuple, object]:
        """The registers and flags after ``block`` from its entry state; with ``record``, its stores, escapes
        and calls go into ``frame``."""
        regs = list(frame.states[block])
        flags = None
        for insn in cfg.blocks[block].instructions:
            flags = self._step(frame, insn, regs, flags, record)
        return tuple(regs), flags

    def _step(self, frame: _Frame, insn: Insn, regs: list, flags, record: bool):
        """One instruction's effect on ``regs``; returns the flags (a ``cmp`` of two values, or None)."""
        ident, ops = insn.id, insn.operands
        conditional = insn.cc not in _ALWAYS
        read, written = insn.regs_access()

        def value(op):
            if op.type == A.ARM_OP_IMM:
                return ("k", op.imm & _MASK)
            if op.type != A.ARM_OP_REG or op.reg not in _REGS:
                return None
            found = regs[_REGS[op.reg]]
            if op.shift.type != 0 and op.shift.value != 0:
                return _ANY if _frame(found) else None
            return found

        def put(register, new):
            n = _REGS.get(register)
            if n is None:
                return
            if conditional:
                old = regs[n]
                if old is not None and old[0] == "one" and new == ("k", 0) and old[2] == flags \
                        and _INVERSE.get(old[1]) == insn.cc:
                    regs[n] = ("bool", old[1], flags)  # mov<cc> r, #1; mov<!cc> r, #0
                    return
                if new == ("k", 1) and flags is not None and not _frame(old):
                    regs[n] = ("one", insn.cc, flags)
                    return
                new = _join(old, new)
            regs[n] = new

        def escape(address, found):
            if record and _frame(found):
                if found[0] == "any":
                    frame.problem = frame.problem or f"a frame address with an unknown offset escapes at {address:#x}"
                else:
                    frame.escapes.append((address, found[1]))

        if ident in _CALLS:
            for n in range(4):
                escape(insn.address, regs[n])
            callee = ops[0].imm if ops and ops[0].type == A.ARM_OP_IMM else None
            if record:
                frame.calls.append((insn.address, regs[_SP], callee))
            constant = self._constant(callee) if callee is not None else None
            for n in (0, 1, 2, 3, 12, _LR):
                regs[n] = _join(regs[n], None) if conditional else None
            if constant is not None and not conditional:
                regs[0] = ("k", constant)
            return None
        if ident == A.ARM_INS_CMP and len(ops) == 2 and not conditional:
            first, second = value(ops[0]), value(ops[1])
            if first is not None and first[0] == "bool" and second == ("k", 0):
                return ("bool", first[1], first[2])
            return ("cmp", first, second)
        if ident in _STORES or (ident not in _LOADS and any(op.type == A.ARM_OP_MEM for op in ops)):
            # a store, or another instruction that may write memory (swp): its address and what it stores
            self._store(frame, insn, regs, record, escape)
            if ident not in _STORES:
                for register in written:
                    put(register, None)  # what swp loads is no frame address (storing one was an escape)
            return None if insn.update_flags else flags
        if ident in _LOADS:
            self._load(insn, regs, put)
            return None if insn.update_flags or any(op.type == A.ARM_OP_REG and op.reg == A.ARM_REG_PC
                                                    for op in ops) else flags
        if ident in (A.ARM_INS_MOV, A.ARM_INS_MOVW, A.ARM_INS_MVN) and len(ops) == 2:
            found = value(ops[1])
            if ident == A.ARM_INS_MVN:
                found = ("k", ~found[1] & _MASK) if found is not None and found[0] == "k" else (
                    _ANY if _frame(found) else None)
            put(ops[0].reg, found)
        elif ident == A.ARM_INS_MOVT and len(ops) == 2:
            old = regs[_REGS[ops[0].reg]] if ops[0].reg in _REGS else None
            put(ops[0].reg, ("k", (old[1] & 0xFFFF) | (ops[1].imm & 0xFFFF) << 16)
                if old is not None and old[0] == "k" else None)
        elif ident in (A.ARM_INS_ADD, A.ARM_INS_ADDW, A.ARM_INS_SUB, A.ARM_INS_SUBW) and len(ops) in (2, 3) \
                and ops[0].type == A.ARM_OP_REG:
            left, right = (value(ops[0]), value(ops[1])) if len(ops) == 2 else (value(ops[1]), value(ops[2]))
            put(ops[0].reg, _arith(left, right, ident in (A.ARM_INS_SUB, A.ARM_INS_SUBW)))
        elif ident in (A.ARM_INS_UXTB, A.ARM_INS_AND) and _masks_bool(ops, value):
            put(ops[0].reg, value(ops[1]))
        elif ident == A.ARM_INS_IT:
            return flags
        else:
            tainted = any(_frame(regs[_REGS[r]]) for r in read if r in _REGS)
            for register in written:
                put(register, _ANY if tainted else None)
        if insn.update_flags or A.ARM_REG_CPSR in written or ident in (A.ARM_INS_CMN, A.ARM_INS_TST, A.ARM_INS_TEQ):
            return None
        return flags

    def _store(self, frame: _Frame, insn: Insn, regs: list, record: bool, escape) -> None:
        """A store: its frame range, or a problem (its frame address has an unknown offset); the registers it
        stores escape if they hold frame addresses; the base register's write-back."""
        ops = insn.operands
        operand = next((op for op in ops if op.type == A.ARM_OP_MEM), None)
        memory = operand.mem if operand is not None else None
        data = [op for op in ops if op.type == A.ARM_OP_REG]
        if insn.id in (A.ARM_INS_PUSH, A.ARM_INS_VPUSH):
            base_reg, size = A.ARM_REG_SP, _list_size(insn, data)
            start_delta = writeback = -size
        elif memory is not None:
            base_reg = memory.base
            size = _access_size(insn, data)
            post = next((op for op in ops[ops.index(operand) + 1:] if op.type == A.ARM_OP_IMM), None)
            if post is not None:
                start_delta, writeback = 0, (-post.imm if post.subtracted else post.imm)
            else:
                start_delta = memory.disp
                writeback = memory.disp if insn.writeback else None
            if memory.index != 0:
                start_delta = None
        else:  # stm/stmdb rN!, {list}
            base_reg, data = data[0].reg, data[1:]
            size = _list_size(insn, data)
            down = insn.id in (A.ARM_INS_STMDB, getattr(A, "ARM_INS_STMDA", -1), A.ARM_INS_VSTMDB)
            start_delta = -size if down else (4 if insn.id == A.ARM_INS_STMIB else 0)
            writeback = (-size if down else size) if insn.writeback else None
        base = regs[_REGS[base_reg]] if base_reg in _REGS else None
        for op in data:  # the registers stored (an stm's base register too, if it is in the list)
            escape(insn.address, regs[_REGS[op.reg]] if op.reg in _REGS else None)
        if record:
            if base_reg == A.ARM_REG_SP and (base is None or base[0] != "f"):
                frame.problem = frame.problem or f"the stack pointer is not known at {insn.address:#x}"
            elif base is not None and (base[0] == "any" or start_delta is None or size is None):
                # e.g. values[k] of a local array: gcc may add the index before the constants (k*4 + 80 + r7 - 72),
                # so no constant part of the address tells which object it points into: it may be any slot
                frame.problem = frame.problem or f"the store at {insn.address:#x} is through a frame address " \
                                                 "with an unknown offset"
            elif base is not None and base[0] == "f":
                start = base[1] + start_delta
                stored = regs[_REGS[data[0].reg]] if len(data) == 1 and data[0].reg in _REGS else None
                # the value a word str surely writes; a conditional store may not write it (no increment then)
                frame.exact.append((insn.address, start, start + size,
                                    stored if insn.id == A.ARM_INS_STR and insn.cc in _ALWAYS else None))
                if start + size > 0:
                    frame.writes_outside = True
            else:
                frame.writes_outside = True
        if writeback is not None and base_reg in _REGS:
            regs[_REGS[base_reg]] = _arith(base, ("k", writeback & _MASK), False)

    def _load(self, insn: Insn, regs: list, put) -> None:
        """A load: a literal is a constant, a word from an exact frame address is that slot's value (``ld``),
        anything else is not a frame address (a frame address stored to memory was an escape); write-back."""
        ops = insn.operands
        operand = next((op for op in ops if op.type == A.ARM_OP_MEM), None)
        memory = operand.mem if operand is not None else None
        targets = [op.reg for op in ops if op.type == A.ARM_OP_REG]
        literal = pc_relative_literal(insn, self.program.code.kind(insn.address) == "t")
        loaded = None
        if literal is not None:
            loaded = ("k", self.program.code.word(literal))
        elif insn.id == A.ARM_INS_LDR and memory is not None and memory.index == 0 and not insn.writeback:
            base = regs[_REGS[memory.base]] if memory.base in _REGS else None
            if base is not None and base[0] == "f" and len(targets) == 1:
                loaded = ("ld", base[1] + memory.disp)
        base_reg = memory.base if memory is not None else (targets[0] if targets else None)
        if insn.id in (A.ARM_INS_POP, A.ARM_INS_VPOP):
            base_reg = A.ARM_REG_SP
        change = None
        if insn.id in (A.ARM_INS_POP, A.ARM_INS_VPOP):
            change = _list_size(insn, [op for op in ops if op.type == A.ARM_OP_REG])
        elif memory is not None:
            post = next((op for op in ops[ops.index(operand) + 1:] if op.type == A.ARM_OP_IMM), None)
            if post is not None:
                change = -post.imm if post.subtracted else post.imm
            elif insn.writeback:
                change = memory.disp
        elif insn.writeback:  # ldm rN!, {list}
            targets = targets[1:]
            size = _list_size(insn, [op for op in ops[1:] if op.type == A.ARM_OP_REG])
            change = -size if insn.id in (getattr(A, "ARM_INS_LDMDB", -1), getattr(A, "ARM_INS_LDMDA", -1),
                                          A.ARM_INS_VLDMDB) else size
        else:
            targets = targets[1:]
        for register in targets:
            if register != base_reg or change is None:
                put(register, loaded)
        if change is not None and base_reg in _REGS:
            n = _REGS[base_reg]
            regs[n] = _arith(regs[n], ("k", change & _MASK), False)

    # -- what callees do to the caller's frame

    def _incoming(self, callee: int) -> int | None:
        """How many bytes above its entry sp (its stack arguments, in the caller's frame) a function may write:
        its exact stores there; None if it writes or passes on an address there of unknown extent, or cannot be
        analysed."""
        if callee not in self._reach:
            self._reach[callee] = None
            try:
                cfg = self.program.cfg(callee, self.facts)
                frame = self._frame(cfg)
            except WcetError:
                return None
            if cfg.unresolved or any(edge.kind == "tailcall" for edge in cfg.edges):
                return None  # a function it jumps to takes over its stack arguments: not analysed here
            if frame.problem or any(origin >= 0 for _, origin in frame.escapes):
                return None  # an address computed from its frame may point anywhere in it, or above it
            self._reach[callee] = max([end for _, _, end, _ in frame.exact if end > 0], default=0)
        return self._reach[callee]

    # -- callees that return a constant

    def _constant(self, callee: int) -> int | None:
        """The constant a function returns if provably so: straight-line code (no loop, no call), no store
        outside its own frame (below its entry sp), and r0 the same constant at every return."""
        if callee in self._constants:
            return self._constants[callee]
        self._constants[callee] = None  # while it is being looked at (no recursion)
        try:
            cfg = self.program.cfg(callee, self.facts)
            if cfg.unresolved or cfg.calls() or self.program.loops(callee, self.facts):
                return None
            frame = self._frame(cfg)
        except WcetError:
            return None
        returns = set()
        for edge in cfg.edges:
            if edge.target == EXIT:
                if edge.kind != "return":
                    return None
                returns.add(self._run(cfg, frame, edge.source)[0][0])
        if frame.problem or frame.writes_outside or len(returns) != 1:
            return None
        (found,) = returns
        if found is None or found[0] != "k":
            return None
        self._constants[callee] = found[1]
        return found[1]

    # -- the frame's variables, from DWARF

    def _variables_of(self, entry: int) -> list[tuple[int, int, list[tuple[int, int]] | None]] | str:
        """``frame_variables`` of the function at ``entry``, read once."""
        if entry not in self._variables:
            self._variables[entry] = frame_variables(self.program.path, entry)
        return self._variables[entry]


def _masks_bool(ops, value) -> bool:
    """``uxtb r, rBool`` or ``and r, rBool, #255``: gcc's widening of a materialised boolean, which keeps it."""
    if len(ops) < 2 or ops[1].type != A.ARM_OP_REG:
        return False
    source = value(ops[1])
    return source is not None and source[0] == "bool" and (len(ops) == 2 or value(ops[2]) == ("k", 0xFF))


def _entry_value(value):
    """A value as it may enter a block: a loaded word, boolean or increment belongs to one block only."""
    if value is not None and value[0] in ("ld", "bool", "one", "inc"):
        return None
    return value


def _arith(left, right, subtract: bool):
    """``left + right`` (or ``-``) on the abstract values."""
    if left is not None and left[0] == "k" and right is not None and right[0] == "k":
        return ("k", (left[1] - right[1] if subtract else left[1] + right[1]) & _MASK)
    if left is not None and left[0] == "ld" and right is not None and right[0] == "k":
        delta = _signed(right[1])
        return ("inc", left[1], -delta if subtract else delta)
    if _frame(left) and _frame(right) or (subtract and _frame(right)):
        return _ANY
    for pointer, other in ((left, right), (right, left)):
        if pointer is not None and pointer[0] == "f":
            if other is not None and other[0] == "k":
                delta = _signed(other[1])
                return ("f", pointer[1] + (-delta if subtract else delta))
    return _ANY if _frame(left) or _frame(right) else None


def _signed(value: int) -> int:
    return value - (1 << 32) if value >> 31 else value


def _list_size(insn: Insn, registers: list) -> int:
    """Bytes a register list moves (a double register is 8)."""
    return sum(8 if insn.reg_name(op.reg).startswith("d") else 4 for op in registers)


def _access_size(insn: Insn, data: list) -> int | None:
    """Bytes a single store writes, None if unknown."""
    ident = insn.id
    if ident in (A.ARM_INS_STR, A.ARM_INS_STREX):
        return 4
    if ident in (A.ARM_INS_STRB, getattr(A, "ARM_INS_STREXB", -1)):
        return 1
    if ident in (A.ARM_INS_STRH, getattr(A, "ARM_INS_STREXH", -1)):
        return 2
    if ident == A.ARM_INS_STRD:
        return 8
    if ident == A.ARM_INS_VSTR and data:
        return 8 if insn.reg_name(data[0].reg).startswith("d") else 4
    return None


def _dominates(cfg: Cfg, loop: Loop, first: int, second: int) -> bool:
    """Whether every path from the loop's header to ``second`` inside the loop (back edges left out) passes
    through ``first``."""
    if first == loop.header or first == second:
        return True
    seen, todo = {loop.header}, [loop.header]
    while todo:
        node = todo.pop()
        for edge in cfg.edges:
            if edge.source == node and edge.target in loop.blocks and edge.target != loop.header \
                    and edge.target not in seen and edge.target != first:
                if edge.target == second:
                    return False
                seen.add(edge.target)
                todo.append(edge.target)
    return True


def _dominates_all(cfg: Cfg, loop: Loop, block: int, latches: list[int]) -> bool:
    return all(_dominates(cfg, loop, block, latch) for latch in latches)


def _iterations(first: int, limit: int, step: int, stay: int) -> int | str:
    """How many times ``first + j*step`` (j = 0, 1, ...) satisfies ``stay`` against ``limit`` before it first
    fails, in 32-bit arithmetic under the condition's signedness; a reason if the counter would wrap first."""
    signed = stay in _SIGNED
    low, high = (-(1 << 31), (1 << 31) - 1) if signed else (0, _MASK)
    c0 = first - (1 << 32) if signed and first >> 31 else first
    k = limit - (1 << 32) if signed and limit >> 31 else limit
    if stay in (A.ARM_CC_LT, A.ARM_CC_LO):
        n = max(0, -((c0 - k) // step))
    elif stay in (A.ARM_CC_LE, A.ARM_CC_LS):
        n = max(0, (k - c0) // step + 1)
    elif stay == A.ARM_CC_NE:
        if c0 != k and (k < c0 or (k - c0) % step):
            return f"counting from {c0} by {step} never equals {k} before it wraps"
        n = (k - c0) // step
    elif stay == A.ARM_CC_EQ:
        n = 1 if c0 == k else 0
    else:  # counting up while > or >=: no iteration, or until it wraps
        holds = c0 > k if stay in (A.ARM_CC_GT, A.ARM_CC_HI) else c0 >= k
        if holds:
            return f"an increasing counter from {c0} stays {_CC_TEXT[stay]} {k} until it wraps"
        n = 0
    if n and c0 + n * step > high or c0 < low:
        return f"counting from {c0} by {step} wraps before the test fails"
    return n


def frame_variables(elf: Path, entry: int) -> list[tuple[int, int, list[tuple[int, int]] | None]] | str:
    """(start, end, scope) of each variable and parameter of the function at ``entry`` and of the functions
    inlined into it that DWARF places at ``DW_OP_fbreg`` from a ``DW_OP_call_frame_cfa`` frame base (gcc's ARM
    output: the CFA is the sp at entry), ``start`` and ``end`` relative to the entry sp, ``scope`` the address
    ranges of its enclosing block (None if DWARF does not give them); a reason when there is no such
    information."""
    from elftools.elf.elffile import ELFFile  # only when a loop needs it: pyelftools costs 5 MB

    with open(elf, "rb") as stream:
        image = ELFFile(stream)
        dwarf = image.get_dwarf_info() if image.has_dwarf_info() else None
        if dwarf is None:
            return "no DWARF information (build with -g)"
        aranges = dwarf.get_aranges()
        offset = aranges.cu_offset_at_addr(entry) if aranges is not None else None
        units = [dwarf.get_CU_at(offset)] if offset is not None else dwarf.iter_CUs()
        for unit in units:
            low = unit.get_top_DIE().attributes.get("DW_AT_low_pc")
            base = low.value if low is not None else 0
            for die in unit.iter_DIEs():
                low = die.attributes.get("DW_AT_low_pc")
                if die.tag != "DW_TAG_subprogram" or low is None or low.value & ~1 != entry:
                    continue
                frame_base = die.attributes.get("DW_AT_frame_base")
                if frame_base is None or list(frame_base.value) != [0x9C]:
                    return "the function's DWARF frame base is not DW_OP_call_frame_cfa"
                found: list[tuple[int, int, list[tuple[int, int]] | None]] = []
                _collect(die, found, _scope(die, dwarf, unit, base), lambda d: _scope(d, dwarf, unit, base))
                return found
    return "no DWARF subprogram for the function"


def _scope(die, dwarf, unit, base: int) -> list[tuple[int, int]] | None:
    """The address ranges of a DWARF scope (subprogram, lexical block, inlined call), None if not given."""
    from elftools.dwarf.ranges import BaseAddressEntry

    low, high = die.attributes.get("DW_AT_low_pc"), die.attributes.get("DW_AT_high_pc")
    if low is not None and high is not None:
        end = high.value if high.form == "DW_FORM_addr" else low.value + high.value
        return [(low.value & ~1, end & ~1)]
    ranges = die.attributes.get("DW_AT_ranges")
    if ranges is None or ranges.form == "DW_FORM_rnglistx":
        return None
    try:
        entries = dwarf.range_lists().get_range_list_at_offset(ranges.value, cu=unit)
    except Exception:  # pyelftools raises several kinds on a list it cannot read: then the scope is unknown
        return None
    result = []
    for item in entries:
        if isinstance(item, BaseAddressEntry):
            base = item.base_address
        elif item.is_absolute:
            result.append((item.begin_offset, item.end_offset))
        else:
            result.append((base + item.begin_offset, base + item.end_offset))
    return result


def _collect(die, found: list, scope: list[tuple[int, int]] | None, scope_of) -> None:
    for child in die.iter_children():
        if child.tag in ("DW_TAG_variable", "DW_TAG_formal_parameter"):
            location = child.attributes.get("DW_AT_location")
            if location is not None and location.form == "DW_FORM_exprloc" and location.value \
                    and location.value[0] == 0x91:
                size = _size(child)
                if size is not None:
                    start = _sleb(location.value[1:])
                    found.append((start, start + size, scope))
        if child.has_children:
            inner = scope_of(child) if child.tag in ("DW_TAG_lexical_block", "DW_TAG_inlined_subroutine") else scope
            _collect(child, found, inner, scope_of)


def _size(die) -> int | None:
    """The byte size of a variable's type (through its abstract origin, typedefs and qualifiers)."""
    for _ in range(32):
        if "DW_AT_byte_size" in die.attributes and die.tag != "DW_TAG_variable":
            return die.attributes["DW_AT_byte_size"].value
        if "DW_AT_type" in die.attributes:
            die = die.get_DIE_from_attribute("DW_AT_type")
        elif "DW_AT_abstract_origin" in die.attributes:
            die = die.get_DIE_from_attribute("DW_AT_abstract_origin")
        else:
            return None
    return None


def _sleb(data) -> int:
    result, shift = 0, 0
    for byte in data:
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if byte & 0x40:
                result -= 1 << shift
            break
    return result
