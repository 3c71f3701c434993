"""Control-flow graph of one *routine*: the code reached from an entry address without calls.

A routine is what one call executes, up to its return. It is built by walking
the decoded instructions from the entry (``wcet.armcode.ArmCode``):

- the next instruction follows unless the instruction is *final* (an
  unconditional branch, return or jump);
- a direct branch whose target lies in the entry symbol's range is an edge of
  the graph. A branch out of that range to the *start* of a function symbol is
  a *tail call*: the callee runs, then the routine is over (it returns to our
  caller). A branch out of the range to any other address (libgcc's soft-float
  routines jump into each other's shared tails) and running on past the end of
  the symbol (``__floatunsisf`` falls into ``__floatsisf``) are followed as
  code of this routine: the shared code is analysed once per routine that
  reaches it, which is sound (it is costed wherever it runs) and loses nothing;
- a call (``bl``, ``blx``, ARMv4T's ``mov lr, pc; bx rN``) is an edge to the
  next instruction that also runs the callee; a call to a function in
  ``FlowFacts.noreturn`` ends the path there (the callee never comes back, so
  no execution that returns goes through it; it is not analysed), one to a
  function in ``FlowFacts.nocall`` is an ordinary instruction (the callee is
  not analysed: the user vouches that its time does not matter);
- indirect calls take their targets from ``FlowFacts.multicalls`` (keyed by
  the address of the call, or of the ``mov lr, pc`` before it), indirect
  jumps from ``FlowFacts.multibranches`` (OTAWA's ``multicall`` and
  ``multibranch``); a control instruction in ``FlowFacts.returns`` is a return
  (OTAWA's ``return``: e.g. ``mov pc, r4`` with the return address kept in r4),
  one in ``FlowFacts.forced`` a branch or a call whatever it is (``force
  branch``/``force call``), a conditional branch in ``FlowFacts.ignoreseq``
  always taken (``ignoreseq``); a jump to a symbol in
  ``FlowFacts.ignore_entry`` is no tail call (``ignore entry``);
- gcc's jump tables (``switch``) are resolved without help, as OTAWA does,
  from the table itself, its size given by the range check before it: ARM
  ``cmp rI, #N; ldrls pc, [pc, rI, lsl #2]`` (a table of addresses after the
  ``b default``) and ``cmp rI, #N; addls pc, pc, rI, lsl #2`` (a table of
  branches), Thumb-2 ``cmp rI, #N; bhi default`` followed by ``tbb [pc, rI]``,
  ``tbh [pc, rI, lsl #1]`` or ``adr rB, T; ldr pc, [rB, rI, lsl #2]``. The
  index is at most N (unsigned) because the check's ``ls`` predicate or its
  ``bhi`` guards the table branch, and no branch target lies between the check
  and the table branch (else the check could be bypassed: refused). A table
  branch without such a check stays unresolved (an error naming its address);
  linker veneers are resolved without help: ``ldr pc, [pc, #k]`` and ``ldr rN,
  [pc, #k]; bx rN`` jump to the literal they load, Thumb ``bx pc`` goes to the
  ARM code that follows it. An indirect branch with no known target is kept in
  ``Cfg.unresolved`` (the analysis refuses it, naming its address);
- the Thumb/ARM state is checked at every edge: a target whose mapping symbol
  says the other state than the branch arrives in is an error.

Blocks end at every instruction that may write the PC and at every call, and
start at every branch target, so the terminator of a block is its last
instruction and each out-edge says how that terminator went (``executed``:
True taken, False not taken, None not a conditional control instruction).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator

from wcet.armcode import ArmCode, Flow, Insn, flow, pc_relative_literal
from wcet.disasm import A
from wcet.errors import AnalysisError
from wcet.facts import FlowFacts
from wcet.timing import is_conditional

ENTRY = -1  # virtual source of the routine's entry edge
EXIT = -2  # virtual sink: a return, a tail call, a call that does not return


class Block:
    """Straight-line code; ``control``: its last instruction is a branch, call or return (priced per
    out-edge), not an ordinary instruction followed by a branch target."""

    __slots__ = ("start", "instructions", "control")

    def __init__(self, start: int, instructions: list[Insn], control: bool = False):
        self.start, self.instructions, self.control = start, instructions, control

    def __repr__(self) -> str:
        return f"Block(start={self.start:#x}, instructions={len(self.instructions)}, control={self.control})"

    @property
    def end(self) -> int:
        last = self.instructions[-1]
        return last.address + last.size

    @property
    def last(self) -> Insn:
        return self.instructions[-1]


class Edge(namedtuple("Edge", [
    "source",
    "target",
    "kind",
    "executed",  # bool | None = None
    "callees",  # tuple[int, ...] = ()
    "site",  # int | None = None: the call or branch instruction
    "index",  # int = 0
], defaults=(None, (), None, 0))):
    """``source`` -> ``target`` block starts (or ``ENTRY``/``EXIT``).

    ``kind``: ``entry``, ``fall`` (next instruction), ``branch`` (direct or
    resolved jump), ``call`` (the call ran ``callees``, then the next
    instruction), ``return``, ``tailcall`` (``callees`` ran, then the routine
    returned), ``noreturn`` (a call to a ``noreturn`` function: the path ends).
    ``executed``: how the source block's last instruction is priced on this edge
    (True: condition passed / branch taken, False: failed / not taken, None:
    not a conditional control instruction). ``index`` tells parallel edges apart.
    """

    __slots__ = ()


class Cfg:
    __slots__ = ("entry", "name", "home", "thumb", "blocks", "edges", "unresolved", "shared", "ignored_calls",
                 "noreturn_calls")

    def __init__(self, entry: int, name: str, home: tuple[int, int], thumb: bool):
        self.entry = entry
        self.name = name  # the function symbol at the entry, or its address in hex
        self.home = home  # the entry symbol's range (empty if the entry starts no symbol)
        self.thumb = thumb
        self.blocks: dict[int, Block] = {}
        self.edges: list[Edge] = []
        self.unresolved: list[tuple[int, str]] = []  # (address, what) of indirect branches
        self.shared: set[int] = set()  # targets followed outside the entry's symbol
        self.ignored_calls: list[int] = []  # nocall sites
        self.noreturn_calls: list[tuple[int, int]] = []  # (site, callee) of noreturn calls

    def __repr__(self) -> str:
        return f"Cfg(entry={self.entry:#x}, name={self.name!r}, blocks={len(self.blocks)}, edges={len(self.edges)})"

    def successors(self) -> dict[int, list[Edge]]:
        result: dict[int, list[Edge]] = {start: [] for start in self.blocks}
        result[ENTRY] = []
        for edge in self.edges:
            result[edge.source].append(edge)
        return result

    def predecessors(self) -> dict[int, list[Edge]]:
        result: dict[int, list[Edge]] = {start: [] for start in self.blocks}
        result[EXIT] = []
        for edge in self.edges:
            result[edge.target].append(edge)
        return result

    def calls(self) -> list[Edge]:
        return [edge for edge in self.edges if edge.callees]

    def instruction_count(self) -> int:
        return sum(len(block.instructions) for block in self.blocks.values())


class _Step(namedtuple("_Step", [
    "fall",  # may go on to the next instruction
    "conditional",  # its effect may not happen (priced taken/not taken per edge)
    "branches",  # tuple[int, ...] = (): jump targets inside the routine (or followed shared code)
    "tailcalls",  # tuple[int, ...] = (): routines jumped to (tail calls)
    "calls",  # tuple[int, ...] = (): routines called, coming back to the next instruction
    "returns",  # bool = False: may leave the routine by returning
    "noreturn_calls",  # tuple[int, ...] = (): routines called that never come back
    "unresolved",  # str | None = None: an indirect branch without targets
    "ends_block",  # computed, not given: anything but going on to the next instruction
])):
    """The resolved effect of one instruction: where control goes from it."""

    __slots__ = ()

    def __new__(cls, fall: bool, conditional: bool, branches: tuple[int, ...] = (), tailcalls: tuple[int, ...] = (),
                calls: tuple[int, ...] = (), returns: bool = False, noreturn_calls: tuple[int, ...] = (),
                unresolved: str | None = None) -> "_Step":
        ends_block = not (fall and not conditional and not branches and not tailcalls and not calls and not returns
                          and not noreturn_calls and unresolved is None)
        return super().__new__(cls, fall, conditional, branches, tailcalls, calls, returns, noreturn_calls,
                               unresolved, ends_block)

    def __getnewargs__(self) -> tuple:  # for copy and pickle: the fields given, not the one computed
        return tuple(self)[:-1]


_PLAIN = _Step(fall=True, conditional=False)


def _forced(effect: Flow, kind: str, conditional: bool) -> Flow:
    """OTAWA's ``force branch``/``force call``: the instruction is a branch (or a call) whatever it was; a
    direct target is kept, any other takes its targets from a multibranch (multicall) fact."""
    if kind == "call":
        if effect.kind in ("call", "indirect-call"):
            return effect
        return Flow("call", target=effect.target) if effect.kind == "branch" else Flow("indirect-call")
    if effect.kind in ("branch", "indirect-jump", "jump-table"):
        return effect
    if effect.kind == "call":
        return Flow("branch", target=effect.target, final=not conditional)
    return Flow("indirect-jump", final=not conditional)


def build(code: ArmCode, entry: int, facts: FlowFacts | None = None) -> Cfg:
    """The CFG of the routine that starts at ``entry`` (address without the Thumb bit)."""
    facts = facts or FlowFacts()
    names = code.names_at(entry)
    kind = code.kind(entry) if _in_code(code, entry) else None
    if kind is None:
        raise AnalysisError(f"{code.path}: {entry:#x} is in no executable section", entry)
    if kind == "d":
        raise AnalysisError(f"{code.path}: {entry:#x} is data ($d), not code", entry)
    home = code.extent(entry) or (entry, entry)
    if names:
        symbol = code.functions[names[0]]
        declared = symbol.symbol_thumb or code.mclass
        if declared != (kind == "t"):
            raise AnalysisError(
                f"Thumb/ARM mismatch at {entry:#x}: the symbol {names[0]} says {_state(declared)}, "
                f"the mapping symbols say {_state(kind == 't')}", entry)
    cfg = Cfg(entry=entry, name=names[0] if names else f"{entry:#x}", home=home, thumb=kind == "t")
    _Builder(code, facts, cfg).run()
    return cfg


def _state(thumb: bool) -> str:
    return "Thumb" if thumb else "ARM"


def _in_code(code: ArmCode, address: int) -> bool:
    try:
        code.kind(address)
    except AnalysisError:
        return False
    return True


class _Builder:
    def __init__(self, code: ArmCode, facts: FlowFacts, cfg: Cfg):
        self.code, self.facts, self.cfg = code, facts, cfg
        self.steps: dict[int, _Step] = {}
        self.insns: dict[int, Insn] = {}
        self._table_sites: set[int] = set()  # jump tables whose targets' states were checked when read
        self.targets: set[int] = set()  # branch targets, to check that no jump bypasses a table's range check
        self.guards: list[tuple[int, int]] = []  # (range check, table branch) addresses of resolved jump tables
        self._calls: dict[tuple[tuple[int, ...], bool], _Step] = {}  # (targets, conditional) -> its step
        self._checked: set[tuple[int, bool]] = set()  # (target, Thumb?) pairs whose state was checked

    # -- walking the instructions

    def run(self) -> None:
        cfg = self.cfg
        leaders = {cfg.entry}
        todo = [cfg.entry]
        seen = self.insns  # the instructions walked, by address
        while todo:
            address = todo.pop()
            if address in seen:
                continue
            for insn in self._instructions(address):
                address = insn.address
                if address in seen:
                    break
                seen[address] = insn
                step = self._step(insn)
                self.steps[address] = step
                for target in step.branches:
                    if address not in self._table_sites:
                        self._check_state(insn, target, exchange=False)
                    self.targets.add(target)
                    leaders.add(target)
                    todo.append(target)
                following = address + insn.size
                if step.ends_block:
                    leaders.add(following)
                if not step.fall:
                    break
                if following == cfg.home[1] and cfg.home[0] < cfg.home[1]:
                    cfg.shared.add(following)  # runs on into the next function's code
        for check, site in self.guards:
            bypass = sorted(t for t in self.targets if check < t <= site)
            if bypass:
                raise AnalysisError(f"{self.code.path}: the jump table at {site:#x} in {cfg.name}: a branch to "
                                    f"{bypass[0]:#x} bypasses its range check at {check:#x}", site)
        self._blocks(leaders)

    def _instructions(self, address: int) -> Iterator[Insn]:
        """The instructions from ``address`` on (``ArmCode.instructions``), an error naming the routine."""
        instructions = self.code.instructions(address)
        while True:
            try:
                insn = next(instructions)
            except StopIteration:
                return
            except AnalysisError as exc:
                raise AnalysisError(f"{exc} (reached from {self.cfg.name})", exc.address) from None
            yield insn

    def _blocks(self, leaders: set[int]) -> None:
        cfg = self.cfg
        for start in sorted(a for a in leaders if a in self.steps):
            block = Block(start, [])
            address = start
            while True:
                insn = self.insns[address]
                block.instructions.append(insn)
                step = self.steps[address]
                following = address + insn.size
                if step.ends_block or following in leaders or following not in self.steps:
                    break
                address = following
            cfg.blocks[start] = block
        cfg.edges.append(Edge(ENTRY, cfg.entry, "entry"))
        for block in cfg.blocks.values():
            self._edges(block)

    def _edges(self, block: Block) -> None:
        cfg, insn = self.cfg, block.last
        step = self.steps[insn.address]
        following = block.end
        site = insn.address
        block.control = step.ends_block
        edges: list[Edge] = []
        if not step.ends_block:  # the block ends because the next instruction is a branch target
            edges.append(Edge(block.start, following, "fall", None))
        else:
            taken = True if step.conditional else None
            for target in step.branches:
                edges.append(Edge(block.start, target, "branch", taken, site=site))
            for callee in step.tailcalls:
                edges.append(Edge(block.start, EXIT, "tailcall", taken, callees=(callee,), site=site))
            if step.calls:
                edges.append(Edge(block.start, following, "call", taken, callees=step.calls, site=site))
            if step.noreturn_calls:  # the path ends: the callee is not analysed
                edges.append(Edge(block.start, EXIT, "noreturn", taken, site=site))
                cfg.noreturn_calls.extend((site, callee) for callee in step.noreturn_calls)
            if step.returns:
                edges.append(Edge(block.start, EXIT, "return", taken, site=site))
            if step.unresolved is not None:
                cfg.unresolved.append((site, step.unresolved))
            if step.fall and (step.conditional or not step.calls):  # an unconditional call comes back: its call edge
                edges.append(Edge(block.start, following, "fall", False if step.conditional else None, site=site))
        counts: dict[tuple, int] = {}
        for edge in edges:
            key = (edge.source, edge.target)
            counts[key] = counts.get(key, -1) + 1
            cfg.edges.append(Edge(edge.source, edge.target, edge.kind, edge.executed, edge.callees, edge.site,
                                  counts[key]))

    # -- one instruction

    def _step(self, insn: Insn) -> _Step:
        address = insn.address
        if address in self.facts.ignorecontrol:
            return _PLAIN
        effect = flow(insn)
        if address in self.facts.forced:  # OTAWA's ``force branch`` / ``force call``
            effect = _forced(effect, self.facts.forced[address], is_conditional(insn))
        if effect.kind == "none":
            return _PLAIN
        conditional = is_conditional(insn)
        if address in self.facts.returns:  # OTAWA's ``return``: this control instruction leaves the routine
            return _Step(fall=conditional, conditional=conditional, returns=True)
        if address in self.facts.ignoreseq and effect.kind == "branch":  # OTAWA's ``ignoreseq``: always taken
            return self._jump(insn, (effect.target,), False, False)
        fall = not effect.final
        if effect.kind == "branch":
            return self._jump(insn, (effect.target,), conditional, fall)
        if effect.kind == "return":
            return _Step(fall=fall, conditional=conditional, returns=True)
        if effect.kind == "call":
            self._check_state(insn, effect.target, exchange=effect.exchange)
            return self._call(insn, (effect.target,), conditional)
        if effect.kind == "indirect-call":
            targets = self._multicall(insn)
            if targets is None:
                return _Step(fall=True, conditional=conditional, unresolved="indirect call")
            return self._call(insn, targets, conditional)
        if effect.kind == "indirect-jump":
            if self._mov_lr_pc_before(insn) is not None and insn.id in (A.ARM_INS_BX, A.ARM_INS_BXJ):
                # ARMv4T call through a register: mov lr, pc; bx rN (comes back after the bx)
                targets = self._multicall(insn) or self._literal_register(insn)
                if targets is None:
                    return _Step(fall=True, conditional=conditional, unresolved="indirect call")
                return self._call(insn, targets, conditional)
            targets = self._multibranch(insn) or self._jump_table(insn) or self._veneer(insn)
            if targets is None:
                return _Step(fall=fall, conditional=conditional, unresolved="indirect jump")
            return self._jump(insn, targets, conditional, fall)
        if effect.kind == "jump-table":
            targets = self._multibranch(insn) or self._jump_table(insn)
            if targets is None:
                return _Step(fall=fall, conditional=conditional,
                             unresolved="jump table without a range check (cmp rN, #K; bhi or ls) before it")
            return self._jump(insn, targets, conditional, fall)
        raise AssertionError(effect)

    def _jump(self, insn: Insn, targets: tuple[int, ...], conditional: bool, fall: bool) -> _Step:
        start, end = self.cfg.home
        branches, tailcalls = [], []
        for target in targets:
            if start <= target < end:
                branches.append(target)
            elif set(self.code.names_at(target)) - self.facts.ignore_entry:
                callee = self._callee(target)
                if callee is None:  # nocall: nothing runs
                    continue
                tailcalls.append(target)
            else:
                self.cfg.shared.add(target)
                branches.append(target)
        for target in tailcalls:
            self._check_state(insn, target, exchange=False)
        noreturn = tuple(t for t in tailcalls if self._noreturn(t))
        tailcalls = [t for t in tailcalls if t not in noreturn]
        returns = False
        if not branches and not tailcalls and not noreturn:  # every target ignored (nocall): it returns
            returns = True
        return _Step(fall=fall, conditional=conditional, branches=tuple(dict.fromkeys(branches)),
                     tailcalls=tuple(dict.fromkeys(tailcalls)), noreturn_calls=noreturn, returns=returns)

    def _call(self, insn: Insn, targets: tuple[int, ...], conditional: bool) -> _Step:
        step = self._calls.get((targets, conditional))  # V3 code calls a few routines from many sites
        if step is not None:
            return step
        calls, noreturn = [], []
        for target in targets:
            if self._callee(target) is None:
                self.cfg.ignored_calls.append(insn.address)
                continue
            (noreturn if self._noreturn(target) else calls).append(target)
        if not calls and not noreturn:
            return _PLAIN
        step = _Step(fall=bool(calls) or conditional, conditional=conditional, calls=tuple(dict.fromkeys(calls)),
                     noreturn_calls=tuple(dict.fromkeys(noreturn)))
        if len(calls) + len(noreturn) == len(targets):  # none ignored (each ignored site is listed)
            self._calls[(targets, conditional)] = step
        return step

    def _callee(self, target: int) -> int | None:
        """The routine entry for a call to ``target``, or None for a function in ``nocall``."""
        if any(name in self.facts.nocall for name in self.code.names_at(target)):
            return None
        return target

    def _noreturn(self, target: int) -> bool:
        return any(name in self.facts.noreturn for name in self.code.names_at(target))

    def _multicall(self, insn: Insn) -> tuple[int, ...] | None:
        for key in (insn.address, self._mov_lr_pc_before(insn)):
            targets = self.facts.multicalls.get(key) if key is not None else None
            if targets:
                return tuple(t & ~1 for t in targets)
        return None

    def _multibranch(self, insn: Insn) -> tuple[int, ...] | None:
        targets = self.facts.multibranches.get(insn.address)
        return tuple(t & ~1 for t in targets) if targets else None

    def _jump_table(self, insn: Insn) -> tuple[int, ...] | None:
        """The targets of one of gcc's jump tables (module docstring), or None if ``insn`` is not one."""
        thumb = self.code.kind(insn.address) == "t"
        ops = insn.operands
        pc = (insn.address + 4) & ~3 if thumb else insn.address + 8
        if insn.id in (A.ARM_INS_TBB, A.ARM_INS_TBH):
            memory = ops[0].mem
            if memory.base != A.ARM_REG_PC:
                return None
            index, width, table, branches = memory.index, 1 if insn.id == A.ARM_INS_TBB else 2, insn.address + 4, False
        elif insn.id == A.ARM_INS_LDR and len(ops) == 2 and ops[1].type == A.ARM_OP_MEM and not insn.writeback \
                and ops[1].mem.index != 0 and ops[1].mem.disp == 0 and _lsl(ops[1], 2):
            memory = ops[1].mem
            index, width, branches = memory.index, 4, False
            if memory.base == A.ARM_REG_PC:
                table = pc
            else:
                table = self._adr_before(insn, memory.base)
                if table is None:
                    return None
        elif insn.id == A.ARM_INS_ADD and not thumb and len(ops) == 3 and ops[1].type == A.ARM_OP_REG \
                and ops[1].reg == A.ARM_REG_PC and ops[2].type == A.ARM_OP_REG and _lsl(ops[2], 2):
            index, width, table, branches = ops[2].reg, 4, pc, True
        else:
            return None
        check = self._range_check(insn, index)
        if check is None:
            return None
        address, bound = check
        self.guards.append((address, insn.address))
        self._table_sites.add(insn.address)
        targets = []
        for n in range(bound + 1):
            if branches:  # a table of branch instructions, each reached in the current state
                target, state = table + 4 * n, thumb
            elif width == 4:
                value = self.code.read(table + 4 * n, 4)
                target, state = value & ~1, bool(value & 1) if (thumb or self.code.mclass) else False
            else:
                target, state = insn.address + 4 + 2 * self.code.read(table + width * n, width), True
            self._check_target_state(insn, target, state)
            targets.append(target)
        return tuple(dict.fromkeys(targets))

    def _range_check(self, insn: Insn, index: int) -> tuple[int, int] | None:
        """(address, N) of the ``cmp index, #N`` that bounds a table branch's index to 0..N (unsigned): the
        table branch is predicated ``ls`` on it, or a ``bhi`` on it lies between them; only an ``adr`` of the
        table base may come in between too."""
        guarded = insn.cc == A.ARM_CC_LS
        address = insn.address
        for _ in range(4):
            previous = self._before(address)
            if previous is None:
                return None
            if previous.id == A.ARM_INS_CMP and previous.cc in (A.ARM_CC_AL, A.ARM_CC_INVALID) \
                    and len(previous.operands) == 2 and previous.operands[0].type == A.ARM_OP_REG \
                    and previous.operands[0].reg == index and previous.operands[1].type == A.ARM_OP_IMM:
                return (previous.address, previous.operands[1].imm) if guarded else None
            if previous.id == A.ARM_INS_B and previous.cc == A.ARM_CC_HI and not guarded:
                guarded = True
            elif not (previous.id in (A.ARM_INS_ADR, A.ARM_INS_ADD) and previous.operands[0].reg != index
                      and not previous.update_flags):
                return None
            address = previous.address
        return None

    def _adr_before(self, insn: Insn, register: int) -> int | None:
        """The address an ``adr register, T`` (or ``add register, pc, #k``) right before ``insn`` computes."""
        previous = self._before(insn.address)
        if previous is None or previous.operands[0].type != A.ARM_OP_REG or previous.operands[0].reg != register:
            return None
        thumb = self.code.kind(previous.address) == "t"
        pc = (previous.address + 4) & ~3 if thumb else previous.address + 8
        ops = previous.operands
        if previous.id == A.ARM_INS_ADR and ops[1].type == A.ARM_OP_IMM:
            return pc + ops[1].imm
        if previous.id == A.ARM_INS_ADD and len(ops) == 3 and ops[1].type == A.ARM_OP_REG \
                and ops[1].reg == A.ARM_REG_PC and ops[2].type == A.ARM_OP_IMM:
            return pc + ops[2].imm
        return None

    def _before(self, address: int) -> Insn | None:
        """The instruction that ends right at ``address`` in the walk, whatever it is."""
        for size in (4, 2):
            previous = self.insns.get(address - size)
            if previous is not None and previous.address + previous.size == address:
                return previous
        return None

    def _mov_lr_pc_before(self, insn: Insn) -> int | None:
        """The address of a ``mov lr, pc`` right before ``insn`` (ARMv4T's call through a register)."""
        for size in (4, 2):
            previous = self.insns.get(insn.address - size)
            if previous is not None and previous.size == size and _is_mov_lr_pc(previous):
                return previous.address
        return None

    def _veneer(self, insn: Insn) -> tuple[int, ...] | None:
        """Targets of linker veneers and long branches: ``ldr pc, [pc, #k]``, ``ldr rN, [pc, #k]; bx rN``,
        Thumb ``bx pc``."""
        literal = pc_relative_literal(insn, self.code.kind(insn.address) == "t")
        if literal is not None:
            target = self.code.word(literal)
            self._check_target_state(insn, target & ~1, bool(target & 1))
            return (target & ~1,)
        if insn.id == A.ARM_INS_BX and insn.operands[0].reg == A.ARM_REG_PC and self.code.kind(insn.address) == "t":
            target = (insn.address + 4) & ~3
            self._check_target_state(insn, target, False)
            return (target,)
        return self._literal_register(insn)

    def _literal_register(self, insn: Insn) -> tuple[int, ...] | None:
        """``bx rN`` where rN was last set, earlier in the same straight-line code, from a literal."""
        if insn.id not in (A.ARM_INS_BX, A.ARM_INS_BLX) or insn.operands[0].type != A.ARM_OP_REG:
            return None
        register = insn.operands[0].reg
        address = insn.address
        for _ in range(8):
            previous = self._previous(address)
            if previous is None:
                return None
            if register in previous.regs_access()[1] or any(
                    op.type == A.ARM_OP_REG and op.reg == register for op in previous.operands[:1]):
                literal = pc_relative_literal(previous, self.code.kind(previous.address) == "t")
                if literal is None or previous.operands[0].reg != register or \
                        previous.cc not in (A.ARM_CC_AL, A.ARM_CC_INVALID):
                    return None
                target = self.code.word(literal)
                self._check_target_state(insn, target & ~1, bool(target & 1))
                return (target & ~1,)
            address = previous.address
        return None

    def _previous(self, address: int) -> Insn | None:
        """The instruction just before ``address`` if it always runs right before it (no branch in between)."""
        for size in (4, 2):
            previous = self.insns.get(address - size)
            if previous is not None and previous.address + previous.size == address:
                step = self.steps.get(previous.address)
                if step is None or step.ends_block:
                    return None
                return previous
        return None

    # -- ARM/Thumb state

    def _check_state(self, insn: Insn, target: int, exchange: bool) -> None:
        thumb = (self.code.kind(insn.address) == "t") != exchange
        self._check_target_state(insn, target, thumb)

    def _check_target_state(self, insn: Insn, target: int, thumb: bool) -> None:
        if (target, thumb) in self._checked:
            return
        try:
            kind = self.code.kind(target)
        except AnalysisError:
            raise AnalysisError(f"{self.code.path}: the branch at {insn.address:#x} goes to {target:#x}, "
                                f"outside the code", insn.address) from None
        if kind == "d":
            raise AnalysisError(f"{self.code.path}: the branch at {insn.address:#x} goes to {target:#x}, "
                                f"which is data ($d)", insn.address)
        if (kind == "t") != thumb:
            raise AnalysisError(f"Thumb/ARM mismatch at {insn.address:#x}: it enters {target:#x} in "
                                f"{_state(thumb)} state, the mapping symbols say {_state(kind == 't')}",
                                insn.address)
        self._checked.add((target, thumb))


def _lsl(operand, amount: int) -> bool:
    """Whether a register or memory-index operand is shifted left by ``amount`` (0: not shifted)."""
    shift = operand.shift
    if amount == 0:
        return shift.type == A.ARM_SFT_INVALID or shift.value == 0
    return shift.type in (A.ARM_SFT_LSL, A.ARM_SFT_LSL_REG) and shift.value == amount


def _is_mov_lr_pc(insn: Insn | None) -> bool:
    return insn is not None and insn.id == A.ARM_INS_MOV and len(insn.operands) == 2 \
        and insn.operands[0].type == A.ARM_OP_REG and insn.operands[0].reg == A.ARM_REG_LR \
        and insn.operands[1].type == A.ARM_OP_REG and insn.operands[1].reg == A.ARM_REG_PC
