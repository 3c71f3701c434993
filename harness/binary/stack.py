"""Static worst-case stack of a function: the deepest call chain from it, each
function contributing a bounded frame, or an explicit "unbounded" with the
reason (docs/memory.md).

Frames come from two sources:

- gcc's ``-fstack-usage`` (``.su``: bytes and ``static``/``dynamic``) and
  ``-fcallgraph-info=su`` (``.ci``: the call graph, indirect calls marked) for
  the code we compile;
- the ELF, for every function: disassembled with capstone (ARM and Thumb, the
  ``$a``/``$t``/``$d`` mapping symbols tell which bytes are which), the frame
  is the *sum* of every stack-pointer decrement in the function body (``push``,
  ``stmdb sp!``, ``str rX, [sp, #-n]!``, ``sub sp, #imm``, ``vpush``,
  ``vstmdb sp!``) and the calls are the direct ``bl``/``blx #imm`` and the
  branches that leave the function (tail calls, shared code).

A function's stack is its frame plus the largest stack of the functions it
calls. The sum of decrements is an upper bound of the deepest point inside
the function as long as no decrement runs more than once per call, which is
checked: a decrement inside a loop (between a backward branch and its target)
makes the result unbounded. So do an indirect call or jump (``blx reg``,
``bx reg`` other than ``bx lr``, ``ldr pc``/``mov pc`` other than a return), a
dynamic adjustment (``sub sp, sp, reg``), a write of sp the analysis does not
know, a cycle in the call graph, and gcc's ``dynamic`` qualifier.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

import capstone
from capstone import arm

from harness.binary.elf import ElfImage, Symbol
from wcet import armcode

# ---------------------------------------------------------------------------- one instruction

_SP = arm.ARM_REG_SP
_ADD = {arm.ARM_INS_ADD, arm.ARM_INS_ADDW}
_SUB = {arm.ARM_INS_SUB, arm.ARM_INS_SUBW}
_STORE_MULTIPLE_DOWN = {arm.ARM_INS_STMDB, arm.ARM_INS_VSTMDB}
_LOAD_MULTIPLE = {arm.ARM_INS_LDM, arm.ARM_INS_VLDMIA}
_SINGLE_STORES = {arm.ARM_INS_STR, arm.ARM_INS_STRD, arm.ARM_INS_STRB, arm.ARM_INS_STRH, arm.ARM_INS_VSTR}
_SINGLE_LOADS = {arm.ARM_INS_LDR, arm.ARM_INS_LDRD, arm.ARM_INS_LDRB, arm.ARM_INS_LDRH}
_REG_BYTES = {"s": 4, "d": 8, "q": 16}
_FRAME_POINTERS = (arm.ARM_REG_R7, arm.ARM_REG_R11)  # gcc's frame pointer: r7 in Thumb code, fp (r11) in ARM code


@dataclass(frozen=True)
class Effect:
    """What one instruction does to the stack and the control flow.

    ``kind``: ``"none"``, ``"grow"`` (sp decreases by ``bytes``), ``"shrink"``
    (sp increases), ``"restore"`` (sp set from a frame pointer),
    ``"dynamic"`` (sp changed by an amount not known statically), ``"call"``,
    ``"branch"`` (``target`` given), ``"return"``, ``"indirect-call"``,
    ``"indirect-jump"``, ``"jump-table"``.
    ``final``: execution never goes on to the next instruction.
    """

    kind: str = "none"
    bytes: int = 0
    target: int | None = None
    final: bool = False


@dataclass(frozen=True)
class Instruction:
    address: int
    size: int
    text: str
    effect: Effect
    sets_frame_pointer: int | None = None  # the register this instruction sets from sp, if any


def disassembler(thumb: bool) -> capstone.Cs:
    md = capstone.Cs(capstone.CS_ARCH_ARM, capstone.CS_MODE_THUMB if thumb else capstone.CS_MODE_ARM)
    md.detail = True
    return md


_DISASSEMBLERS: dict[bool, capstone.Cs] = {}


def decode(code: bytes, address: int, thumb: bool,
           frame_pointers: frozenset[int] = frozenset()) -> tuple[list[Instruction], int | None]:
    """Instructions of ``code`` at ``address``; the second value is the address of
    the first byte that does not decode (None: all decoded).

    ``frame_pointers``: registers the function set from sp; writing sp from them
    is a ``restore`` (an epilogue), from any other register a ``dynamic`` change.
    """
    md = _DISASSEMBLERS.setdefault(thumb, disassembler(thumb))
    result, end = [], address
    for insn in md.disasm(code, address):
        effect = classify(insn, frame_pointers)
        if effect.kind == "indirect-jump" and result and result[-1].text == "mov lr, pc":
            effect = Effect("indirect-call")  # ARMv4T has no blx: a call through a register is mov lr, pc; bx rN
        result.append(Instruction(address=insn.address, size=insn.size, text=f"{insn.mnemonic} {insn.op_str}".strip(),
                                  effect=effect, sets_frame_pointer=_sets_frame_pointer(insn)))
        end = insn.address + insn.size
    return result, (end if end < address + len(code) else None)


def classify(insn: capstone.CsInsn, frame_pointers: frozenset[int] = frozenset()) -> Effect:
    """The stack and control-flow effect of one capstone ARM/Thumb instruction.

    The control flow (calls, branches, returns, indirect jumps, jump tables) is
    ``wcet.armcode.flow``, shared with the WCET analyzer's CFGs; an instruction
    that does not change the flow is classified by its stack effect.
    """
    control = armcode.flow(insn)
    if control.kind != "none":
        return Effect(control.kind, target=control.target, final=control.final)
    return _stack_effect(insn, frame_pointers)


def _register_bytes(insn: capstone.CsInsn, ops) -> int:
    return sum(_REG_BYTES.get(insn.reg_name(op.reg)[0], 4) for op in ops if op.type == arm.ARM_OP_REG)


def _stack_effect(insn: capstone.CsInsn, frame_pointers: frozenset[int]) -> Effect:
    ops, ident = insn.operands, insn.id
    if ident == arm.ARM_INS_PUSH:
        return Effect("grow", bytes=4 * len(ops))
    if ident == arm.ARM_INS_VPUSH:
        return Effect("grow", bytes=_register_bytes(insn, ops))
    if ident in (arm.ARM_INS_POP, arm.ARM_INS_VPOP):
        return Effect("shrink")
    _, written = insn.regs_access()
    base_sp = bool(ops) and ops[0].type == arm.ARM_OP_REG and ops[0].reg == _SP
    if ident in _STORE_MULTIPLE_DOWN and base_sp and insn.writeback:
        registers = ops[1:]
        size = _register_bytes(insn, registers) if ident == arm.ARM_INS_VSTMDB else 4 * len(registers)
        return Effect("grow", bytes=size)
    if ident in _LOAD_MULTIPLE and base_sp and insn.writeback:
        return Effect("shrink")
    memory = next((op.mem for op in ops if op.type == arm.ARM_OP_MEM), None)
    if memory is not None and memory.base == _SP and insn.writeback and ident in _SINGLE_STORES | _SINGLE_LOADS:
        post = [op for op in ops if op.type == arm.ARM_OP_IMM]
        step = (-abs(post[-1].imm) if post[-1].subtracted else post[-1].imm) if post else memory.disp
        return Effect("grow", bytes=-step) if step < 0 else Effect("shrink")
    writes_sp = _SP in written or (base_sp and armcode.writes_first_operand(insn))
    if not writes_sp:
        return Effect()
    if ident in _ADD | _SUB and base_sp:
        sources = ops[1:]
        if len(sources) == 1:
            sources = [ops[0], *sources]  # Thumb's two-operand form: sub sp, #imm
        if sources[0].type == arm.ARM_OP_REG and sources[0].reg == _SP and sources[1].type == arm.ARM_OP_IMM \
                and len(sources) == 2:
            amount = sources[1].imm if ident in _SUB else -sources[1].imm
            return Effect("grow", bytes=amount) if amount > 0 else Effect("shrink")
        if sources[0].type == arm.ARM_OP_REG and sources[0].reg in frame_pointers \
                and all(op.type == arm.ARM_OP_IMM for op in sources[1:]):
            return Effect("restore")
        return Effect("dynamic")
    if ident == arm.ARM_INS_MOV and base_sp and ops[1].type == arm.ARM_OP_REG:
        return Effect("restore") if ops[1].reg in frame_pointers else Effect("dynamic")
    return Effect("dynamic")


def _sets_frame_pointer(insn: capstone.CsInsn) -> int | None:
    """``add r7, sp, #k`` / ``add fp, sp, #k`` / ``mov r7, sp``: the frame pointer now tracks sp."""
    ops = insn.operands
    if insn.id in (*_ADD, *_SUB, arm.ARM_INS_MOV) and len(ops) >= 2 \
            and ops[0].type == arm.ARM_OP_REG and ops[0].reg in _FRAME_POINTERS \
            and ops[1].type == arm.ARM_OP_REG and ops[1].reg == _SP \
            and all(op.type == arm.ARM_OP_IMM for op in ops[2:]):
        return ops[0].reg
    return None


def frame_of(code: bytes, address: int, thumb: bool) -> int:
    """The sum of the stack decrements of ``code`` (one function's bytes, no data)."""
    instructions, _ = decode(code, address, thumb)
    return sum(i.effect.bytes for i in instructions if i.effect.kind == "grow")


# ---------------------------------------------------------------------------- gcc's data


@dataclass
class GccStack:
    """What ``-fstack-usage`` and ``-fcallgraph-info=su`` said about the compiled code."""

    frames: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # name -> (bytes, qualifier, file:line)
    calls: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # name -> [(callee, file:line:col)]
    ambiguous: set[str] = field(default_factory=set)  # names defined by more than one file (static functions)

    @property
    def empty(self) -> bool:
        return not self.frames


INDIRECT_CALL = "__indirect_call"  # gcc's .ci placeholder node
_SU_LINE = re.compile(r"^(?P<where>.+?:\d+):\d+:(?P<name>[^\t]+)\t(?P<bytes>\d+)\t(?P<qualifier>[\w,]+)$")
_CI_NODE = re.compile(r'node: \{ title: "(?P<title>[^"]+)" label: "(?P<label>[^"]*)"')
_CI_EDGE = re.compile(r'edge: \{ sourcename: "(?P<source>[^"]+)" targetname: "(?P<target>[^"]+)"'
                      r'(?: label: "(?P<label>[^"]*)")?')


def read_gcc_stack(files: list[Path]) -> GccStack:
    """Parse ``.su`` and ``.ci`` files (missing ones are skipped)."""
    result = GccStack()
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".su":
            _parse_su(text, result)
        elif path.suffix == ".ci":
            _parse_ci(text, result)
    for name in result.ambiguous:
        result.frames.pop(name, None)
    return result


def _parse_su(text: str, result: GccStack) -> None:
    for line in text.splitlines():
        match = _SU_LINE.match(line.strip())
        if not match:
            continue
        name = match["name"]
        if name in result.frames:
            result.ambiguous.add(name)
        result.frames[name] = (int(match["bytes"]), match["qualifier"], match["where"])


def _parse_ci(text: str, result: GccStack) -> None:
    names = {}
    for node in _CI_NODE.finditer(text):
        names[node["title"]] = node["label"].split("\\n", 1)[0]
    for edge in _CI_EDGE.finditer(text):
        source = names.get(edge["source"], edge["source"])
        target = edge["target"] if edge["target"] == INDIRECT_CALL else names.get(edge["target"], edge["target"])
        result.calls.setdefault(source, []).append((target, edge["label"] or "?"))


# ---------------------------------------------------------------------------- the call graph


@dataclass
class FunctionStack:
    """One function of the call graph."""

    name: str
    aliases: list[str]
    address: int | None
    frame: int | None  # bytes this function adds; None when ``problem`` is set
    source: str  # "su" (gcc), "prologue" (disassembly) or "su+prologue" (both, the larger taken)
    su: int | None = None
    prologue: int | None = None
    calls: list[str] = field(default_factory=list)
    problem: str | None = None  # why this function alone has no bound
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, "aliases": self.aliases,
                "address": None if self.address is None else f"{self.address:#x}", "frame": self.frame,
                "source": self.source, "su": self.su, "prologue": self.prologue, "calls": self.calls,
                "problem": self.problem, "notes": self.notes}


@dataclass
class StackBound:
    """The static worst-case stack of ``entry``: ``bytes``, or None with ``reason``."""

    entry: str
    bytes: int | None
    reason: str | None
    path: list[dict]  # worst path from the entry: [{"function", "frame", "depth"}] (depth: stack below the call)
    functions: dict[str, FunctionStack]
    notes: list[str] = field(default_factory=list)

    @property
    def bounded(self) -> bool:
        return self.bytes is not None

    def describe(self) -> str:
        return f"{self.bytes} bytes" if self.bounded else f"unbounded: {self.reason}"

    def as_dict(self) -> dict:
        return {"entry": self.entry, "bytes": self.bytes, "bounded": self.bounded, "reason": self.reason,
                "worst_path": self.path, "functions": {n: f.as_dict() for n, f in sorted(self.functions.items())},
                "notes": self.notes}


@dataclass(frozen=True)
class _Function:
    start: int
    end: int
    names: tuple[str, ...]
    thumb: bool

    @property
    def name(self) -> str:
        return self.names[0]


def analyse(image: ElfImage, entry: str, gcc: GccStack | None = None,
            indirect_calls: list[dict] | tuple = ()) -> StackBound:
    """The worst-case stack of ``entry`` in ``image``.

    ARM images are disassembled (gcc's frames are used where they exist, the
    larger of the two figures taken); other images (the host) use gcc's data
    alone, and a call to a function without it is unbounded. ``indirect_calls``
    (the manifest's, docs/manifest.md) give the targets of the indirect calls on
    a source line (ARM images: found through the DWARF line table).
    """
    gcc = gcc or GccStack()
    graph = _ArmGraph(image, gcc, indirect_calls) if image.is_arm else _GccGraph(gcc)
    return graph.bound(entry)


class _Graph:
    """Depth-first search for the deepest path, with cycle detection."""

    functions: dict[str, FunctionStack]

    def node(self, name: str) -> FunctionStack | None:
        raise NotImplementedError

    def bound(self, entry: str) -> StackBound:
        self.functions = {}
        memo: dict[str, tuple[int | None, str | None, list[str]]] = {}
        start = self.node(entry)
        if start is None:
            return StackBound(entry, None, f"entry function {entry} not found", [], self.functions)
        total, reason, path = self._visit(start.name, [], memo)
        notes = [f"{f.name}: {note}" for f in self.functions.values() for note in f.notes]
        worst, depth = [], 0
        for name in path:
            frame = self.functions[name].frame or 0
            worst.append({"function": name, "frame": frame, "depth": depth + frame})
            depth += frame
        return StackBound(entry, total, reason, worst if total is not None else [], self.functions, notes)

    def _visit(self, name: str, chain: list[str], memo: dict) -> tuple[int | None, str | None, list[str]]:
        if name in memo:
            return memo[name]
        if name in chain:
            start = chain.index(name)
            cycle = chain[start:] + [name]
            return None, f"cycle: {' -> '.join(cycle)}{_via(chain[:start + 1])}", []
        function = self.functions[name]
        if function.problem:
            result = (None, f"{function.problem}{_via(chain + [name])}", [])
            memo[name] = result
            return result
        best, best_path = 0, []
        for callee in function.calls:
            if self.node(callee) is None:
                result = (None, f"call to {callee}, which has no stack data{_via(chain + [name])}", [])
                memo[name] = result
                return result
            total, reason, path = self._visit(self.node(callee).name, chain + [name], memo)
            if total is None:
                memo[name] = (None, reason, [])
                return memo[name]
            if total > best or not best_path:
                best, best_path = total, path
        memo[name] = (function.frame + best, None, [name, *best_path])
        return memo[name]


def _via(chain: list[str]) -> str:
    return f" (reached via {' -> '.join(chain)})" if len(chain) > 1 else ""


class _GccGraph(_Graph):
    """gcc's frames and call graph only (no disassembly)."""

    def __init__(self, gcc: GccStack):
        self.gcc = gcc

    def node(self, name: str) -> FunctionStack | None:
        if name in self.functions:
            return self.functions[name]
        if name not in self.gcc.frames:
            if not any(name == callee for calls in self.gcc.calls.values() for callee, _ in calls):
                return None
            self.functions[name] = FunctionStack(
                name=name, aliases=[name], address=None, frame=None, source="none",
                problem=f"no stack data for {name}: not compiled with -fstack-usage (a library function), "
                        f"and only ARM images are disassembled")
            return self.functions[name]
        size, qualifier, where = self.gcc.frames[name]
        function = FunctionStack(name=name, aliases=[name], address=None, frame=size, source="su", su=size)
        if "dynamic" in qualifier and "bounded" not in qualifier:
            function.frame, function.problem = None, f"dynamic stack allocation in {name} ({where})"
        for callee, site in self.gcc.calls.get(name, []):
            if callee == INDIRECT_CALL:
                function.frame, function.problem = None, f"indirect call in {name} at {site}"
                break
            if callee not in function.calls:
                function.calls.append(callee)
        self.functions[name] = function
        return function


class _ArmGraph(_Graph):
    """Functions of an ARM ELF, disassembled; gcc's frames where present."""

    def __init__(self, image: ElfImage, gcc: GccStack, indirect_calls: list[dict] | tuple = ()):
        self.image, self.gcc = image, gcc
        self._by_start: list[_Function] = _function_extents(image)
        self._starts = [f.start for f in self._by_start]
        self._by_name = {name: f for f in self._by_start for name in f.names}
        self._indirect = {(Path(str(c["file"])).name, int(c["line"])): list(c["targets"]) for c in indirect_calls}
        self._lines: list[tuple[int, int, str, int]] | None = None
        self._resolved: set[str] = set()  # functions whose every indirect call the manifest resolved

    def indirect_targets(self, address: int) -> list[str] | None:
        """The manifest's targets for an indirect call at ``address`` (by its DWARF line), or None."""
        if not self._indirect:
            return None
        if self._lines is None:
            files = {file for file, _ in self._indirect}
            self._lines = [row for row in armcode.line_table(self.image.path) if row[2] in files]
        index = bisect.bisect_right(self._lines, (address, float("inf"))) - 1
        if index < 0 or not self._lines[index][0] <= address < self._lines[index][1]:
            return None
        return self._indirect.get(self._lines[index][2:])

    def containing(self, address: int) -> _Function | None:
        """The innermost function whose extent holds ``address``."""
        index = bisect.bisect_right(self._starts, address) - 1
        for candidate in reversed(self._by_start[max(0, index - 16):index + 1]):  # extents nest a few deep at most
            if candidate.start <= address < candidate.end:
                return candidate
        return None

    def node(self, name: str) -> FunctionStack | None:
        extent = self._by_name.get(name)
        if extent is None:
            return None
        if extent.name not in self.functions:
            self.functions[extent.name] = self._analyse(extent)
        return self.functions[extent.name]

    def _analyse(self, extent: _Function) -> FunctionStack:
        function = FunctionStack(name=extent.name, aliases=list(extent.names), address=extent.start, frame=0,
                                 source="prologue")
        instructions, problem = self._instructions(extent)
        grows = [i for i in instructions if i.effect.kind == "grow"]
        problems = [problem] if problem else []
        resolved = True
        for insn in instructions:
            kind, where = insn.effect.kind, f"at {insn.address:#x} in {extent.name} ({insn.text})"
            if kind == "indirect-call":
                targets = self.indirect_targets(insn.address)
                unknown = [t for t in targets or () if t not in self._by_name]
                if targets is None or unknown:
                    resolved = False
                    problems.append(f"indirect call {where}" + (f": no function {unknown[0]}" if unknown else ""))
                    continue
                function.notes.append(f"indirect call {where}: the manifest's targets {', '.join(targets)}")
                for target in targets:
                    if self._by_name[target].name not in function.calls:
                        function.calls.append(self._by_name[target].name)
            elif kind == "indirect-jump":
                problems.append(f"indirect jump {where}")
            elif kind == "dynamic":
                problems.append(f"dynamic stack adjustment {where}")
            elif kind == "jump-table":
                function.notes.append(f"jump table at {insn.address:#x} assumed to stay inside the function")
            elif kind in ("call", "branch"):
                target = insn.effect.target
                if kind == "branch" and extent.start <= target < extent.end:
                    continue
                if kind == "call" and _local_subroutine(insn, extent):
                    function.notes.append(f"call to a local subroutine at {target:#x} {where}: its decrements are "
                                          f"the function's own")
                    continue
                callee = self.containing(target)
                if callee is None:
                    problems.append(f"{kind} to {target:#x}, outside every function symbol, {where}")
                elif callee.name not in function.calls:
                    function.calls.append(callee.name)
        for insn in _in_loops(instructions, grows, extent):
            problems.append(f"stack adjustment inside a loop at {insn.address:#x} in {extent.name} ({insn.text})")
        last = next((i for i in reversed(instructions) if not _is_padding(i)), None)
        if last is not None and not last.effect.final:
            following = self.containing(extent.end)
            if last.effect.kind == "call":
                function.notes.append(f"ends with a call at {last.address:#x}, taken not to return")
            elif following is not None and following.start == extent.end:
                function.notes.append(f"falls through into {following.name}")
                if following.name not in function.calls:
                    function.calls.append(following.name)
            else:
                problems.append(f"runs past its end at {extent.end:#x} ({extent.name})")
        function.prologue = sum(i.effect.bytes for i in grows)
        function.frame = function.prologue
        if resolved:
            self._resolved.add(extent.name)
        self._merge_gcc(function, extent)
        if problems:
            function.frame, function.problem = None, problems[0]
            function.notes += problems[1:]
        return function

    def _instructions(self, extent: _Function) -> tuple[list[Instruction], str | None]:
        """Decode the code of a function, twice: the second pass knows its frame pointers."""
        chunks = []
        marks = self.image.mapping_in(extent.start, extent.end) or [(extent.start, "t" if extent.thumb else "a")]
        for i, (address, kind) in enumerate(marks):
            stop = marks[i + 1][0] if i + 1 < len(marks) else extent.end
            if kind != "d" and stop > address:
                chunks.append((address, self.image.read(address, stop - address), kind == "t"))
        frame_pointers: frozenset[int] = frozenset()
        for _ in range(2):
            instructions, problem = [], None
            for address, code, thumb in chunks:
                decoded, bad = decode(code, address, thumb, frame_pointers)
                instructions += decoded
                if bad is not None and problem is None:
                    problem = f"cannot decode the instruction at {bad:#x} in {extent.name}"
            frame_pointers = frozenset(i.sets_frame_pointer for i in instructions
                                       if i.sets_frame_pointer is not None)
            if not frame_pointers:
                break
        return instructions, problem

    def _merge_gcc(self, function: FunctionStack, extent: _Function) -> None:
        """Use gcc's frame when it has one (the larger figure wins) and check its call graph."""
        name = next((n for n in extent.names if n in self.gcc.frames), None)
        if name is None:
            return
        size, qualifier, where = self.gcc.frames[name]
        function.su = size
        function.source = "su+prologue" if function.prologue is not None and function.prologue != size else "su"
        if function.prologue is not None and function.prologue != size:
            function.notes.append(f"gcc's .su says {size} bytes, the prologue analysis {function.prologue}; "
                                  f"the larger is used")
        function.frame = max(size, function.prologue or 0)
        if "dynamic" in qualifier and "bounded" not in qualifier:
            function.problem = f"dynamic stack allocation in {name} ({where}, gcc -fstack-usage)"
        elf_callees = {alias for callee in function.calls for alias in self._by_name[callee].names}
        for callee, site in self.gcc.calls.get(name, []):
            if callee == INDIRECT_CALL:
                if extent.name not in self._resolved:
                    function.problem = function.problem or f"indirect call in {name} at {site} (gcc call graph)"
            elif callee not in elf_callees and callee in self._by_name:
                function.notes.append(f"gcc's call graph has a call to {callee} at {site} that the code does not")


def _is_padding(insn: Instruction) -> bool:
    """Alignment padding after a function's last instruction: the NOPs assemblers pad with (``nop.w``:
    Thumb-2's 4-byte form, before a word-aligned literal pool, as in picolibc's ``exp``; ``mov r0, r0``:
    ARM's before ARMv6K) and zeros."""
    return insn.text in ("nop", "nop.w", "mov r0, r0", "mov r8, r8", "andeq r0, r0, r0", "movs r0, r0")


def _local_subroutine(insn: Instruction, extent: _Function) -> bool:
    """A ``bl`` to a label inside its own function, past its entry (libgcc's soft double: ``bleq Lml_d``).

    Not a call of another function, nor recursion through the entry: the subroutine's code is the
    function's own, so its decrements are already in the function's sum, and the ``bl`` is an edge of the
    function's control flow (a subroutine that can reach the ``bl`` again puts its decrements on a cycle,
    which ``_in_loops`` reports).
    """
    return insn.effect.kind == "call" and extent.start < insn.effect.target < extent.end


def _in_loops(instructions: list[Instruction], grows: list[Instruction], extent: _Function) -> list[Instruction]:
    """The stack decrements that lie on a cycle of the function's control-flow graph.

    Edges: to the next instruction unless the instruction is final, and to the
    target of a branch inside the function or of a call of a local subroutine;
    a jump table may go anywhere in it.
    """
    index = {insn.address: n for n, insn in enumerate(instructions)}
    everywhere = range(len(instructions))

    def successors(n: int):
        effect = instructions[n].effect
        if effect.kind == "jump-table":
            return everywhere
        result = []
        if not effect.final and n + 1 < len(instructions):
            result.append(n + 1)
        if ((effect.kind == "branch" and extent.start <= effect.target < extent.end
             or _local_subroutine(instructions[n], extent)) and effect.target in index):
            result.append(index[effect.target])
        return result

    looping = []
    for grow in grows:
        start = index[grow.address]
        seen, todo = set(), list(successors(start))
        while todo:
            n = todo.pop()
            if n == start:
                looping.append(grow)
                break
            if n not in seen:
                seen.add(n)
                todo.extend(successors(n))
    return looping


def _function_extents(image: ElfImage) -> list[_Function]:
    """Function symbols merged by address (aliases), with an end for those without a size."""
    by_start: dict[int, list[Symbol]] = {}
    for symbol in image.functions():
        if image.section(symbol.section) is not None and image.section(symbol.section).executable:
            by_start.setdefault(symbol.address, []).append(symbol)
    starts = sorted(by_start)
    extents = []
    for index, start in enumerate(starts):
        symbols = sorted(by_start[start], key=lambda s: (s.binding != "GLOBAL", s.name))
        size = max(s.size for s in symbols)
        if size == 0:
            section = image.section(symbols[0].section)
            following = starts[index + 1] if index + 1 < len(starts) else section.address + section.size
            size = min(following, section.address + section.size) - start
        extents.append(_Function(start=start, end=start + size, names=tuple(s.name for s in symbols),
                                 thumb=symbols[0].thumb))
    return extents


def gcc_files(build_dir: Path, sources: list[Path]) -> list[Path]:
    """The ``.su`` and ``.ci`` files gcc writes into ``build_dir`` (``-dumpdir``) for ``sources``."""
    return [build_dir / f"{source.stem}{suffix}" for source in sources for suffix in (".su", ".ci")]
