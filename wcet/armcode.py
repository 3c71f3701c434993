"""The code of an ARM ELF as the measurement, stack and timing stages need it.

- ``ArmCode.decode(address)``: the capstone instruction at an address, decoded
  in ARM or Thumb state as the ELF's mapping symbols (``$a``, ``$t``, ``$d``,
  ARM ELF ABI 5.5.5) say. Code is disassembled one mapping-symbol span at a time
  from its start, so capstone sees Thumb ``IT`` blocks and gives the
  instructions inside them their condition. Bytes in a ``$d`` span (literal
  pools, jump tables) are never decoded.
- ``ArmCode.function(name)``: a function symbol's address range;
  ``ArmCode.containing(address)``: the innermost function symbol holding an
  address; ``ArmCode.kind(address)``: ``"a"``, ``"t"`` or ``"d"`` by the mapping
  symbols; ``ArmCode.word(address)``: a 32-bit literal of the image.
- ``flow(insn)``: what one instruction does to the control flow (call, branch,
  return, indirect jump, ...); the stack analysis (``harness/binary/stack.py``) and the
  WCET analyzer's CFGs (``wcet/cfg.py``) share it.
- ``ArmCode.line(address)`` / ``line_rows(elf, files)``: the DWARF line table.
- ``layer_ranges(code, manifest)``: address ranges of the generated functions,
  each tagged with the manifest layer whose source lines (``layers[*].lines``)
  the DWARF line table gives for it.

Nothing here runs code; it reads an ELF built with ``-g`` (line information
is optional for everything but ``layer_ranges``). Errors are
``wcet.errors.AnalysisError`` (an ``AssayError``) naming the address.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import capstone
from capstone import arm as A
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from wcet.errors import AnalysisError

OUTSIDE_LAYERS = 0  # bucket of generated code that no layer's line span covers (prologue, epilogue)


@dataclass(frozen=True)
class Function:
    name: str
    start: int  # without the Thumb bit
    end: int
    thumb: bool  # Thumb code: the symbol's bit 0, or an M-profile ELF
    symbol_thumb: bool | None = None  # bit 0 of the symbol's value as written (None: not from a symbol)


@dataclass(frozen=True)
class AddressRange:
    start: int
    end: int  # exclusive
    bucket: int  # OUTSIDE_LAYERS, or 1 + the layer's index in the manifest


class ArmCode:
    """Symbols, mapping symbols and decoded instructions of one ARM ELF.

    ``mclass`` (M-profile: Thumb only, capstone's MCLASS mode) is read from the
    ELF's build attributes (``Tag_CPU_arch_profile`` 'M') unless given.
    ``functions`` maps every function symbol name (aliases included) to its
    range; ``has_symbols`` is False for a stripped ELF.
    """

    def __init__(self, elf: Path, mclass: bool | None = None):
        self.path = Path(elf)
        self.functions: dict[str, Function] = {}
        self.has_symbols = False
        mapping: list[tuple[int, str]] = []
        self._sections: list[tuple[int, int, int]] = []  # (address, size, file offset) of executable sections
        self._data: list[tuple[int, int, int]] = []  # (address, size, file offset) of loaded sections with contents
        try:
            with self.path.open("rb") as stream:
                elf_file = ELFFile(stream)
                if elf_file["e_machine"] != "EM_ARM":
                    raise AnalysisError(f"{self.path}: not an ARM ELF ({elf_file['e_machine']})")
                self.mclass = _is_m_profile(elf_file) if mclass is None else mclass
                for section in elf_file.iter_sections():
                    if section["sh_type"] == "SHT_PROGBITS" and section["sh_flags"] & 0x2:  # SHF_ALLOC
                        self._data.append((section["sh_addr"], section["sh_size"], section["sh_offset"]))
                        if section["sh_flags"] & 0x4:  # SHF_EXECINSTR
                            self._sections.append((section["sh_addr"], section["sh_size"], section["sh_offset"]))
                for section in elf_file.iter_sections():
                    if not isinstance(section, SymbolTableSection):
                        continue
                    self.has_symbols = True
                    for symbol in section.iter_symbols():
                        name, value = symbol.name, symbol["st_value"]
                        if name in ("$a", "$t", "$d") or name.startswith(("$a.", "$t.", "$d.")):
                            mapping.append((value, name[1]))
                        elif symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_shndx"] != "SHN_UNDEF":
                            start = value & ~1
                            self.functions.setdefault(name, Function(name, start, start + symbol["st_size"],
                                                                     bool(value & 1) or self.mclass,
                                                                     bool(value & 1)))
        except (OSError, ELFError) as exc:
            raise AnalysisError(f"{self.path}: cannot read the ELF: {exc}") from None
        self._sections.sort()
        self._data.sort()
        mapping.sort()
        self._map_addresses = [address for address, _ in mapping]
        self._map_kinds = [kind for _, kind in mapping]
        self._decoded: dict[int, capstone.CsInsn] = {}
        self._spans_done: set[int] = set()
        # Function extents by start (aliases share one), for ``containing``; a symbol without a size
        # (hand-written assembly without .size) extends to the next symbol or its section's end.
        by_start: dict[int, list[Function]] = {}
        for function in self.functions.values():
            by_start.setdefault(function.start, []).append(function)
        starts = sorted(by_start)
        self._extents = []
        for n, start in enumerate(starts):
            end = max(f.end for f in by_start[start])
            if end == start:
                following = starts[n + 1] if n + 1 < len(starts) else None
                section_end = next((s + n for s, n, _ in self._sections if s <= start < s + n), start)
                end = min(following, section_end) if following is not None else section_end
            self._extents.append((start, end, sorted(f.name for f in by_start[start])))
        self._extent_starts = starts
        self._lines: list[tuple[int, int, str, int]] | None = None
        self._line_starts: list[int] = []

    def function(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            if not self.has_symbols:
                raise AnalysisError(f"{self.path}: no symbol table (stripped ELF?): cannot find '{name}'") from None
            raise AnalysisError(f"{self.path}: no function '{name}'") from None

    def names_at(self, address: int) -> list[str]:
        """Names of the function symbols that start at ``address`` (sorted; empty if none)."""
        index = bisect.bisect_left(self._extent_starts, address)
        if index < len(self._extents) and self._extents[index][0] == address:
            return self._extents[index][2]
        return []

    def extent(self, address: int) -> tuple[int, int] | None:
        """(start, end) of the function symbols starting at ``address`` (a symbol without a size reaches
        the next symbol); None if no function symbol starts there."""
        index = bisect.bisect_left(self._extent_starts, address)
        if index < len(self._extents) and self._extents[index][0] == address:
            return self._extents[index][0], self._extents[index][1]
        return None

    def containing(self, address: int) -> Function | None:
        """The innermost function symbol whose range holds ``address`` (the latest starting one)."""
        index = bisect.bisect_right(self._extent_starts, address) - 1
        for start, end, names in reversed(self._extents[max(0, index - 16):index + 1]):
            if start <= address < end or start == address:
                return self.functions[names[0]]
        return None

    def decode(self, address: int) -> capstone.CsInsn:
        """The instruction at ``address`` (capstone, with details)."""
        insn = self._decoded.get(address)
        if insn is None:
            self._decode_span(address)
            insn = self._decoded.get(address)
            if insn is None:
                raise AnalysisError(f"{self.path}: no instruction decodes at {address:#x} "
                                    f"(unsupported instruction or not an instruction boundary)", address)
        return insn

    def kind(self, address: int) -> str:
        """``"a"`` (ARM), ``"t"`` (Thumb) or ``"d"`` (data) at ``address``, by the mapping symbols."""
        return self._span(address, data_ok=True)[2]

    def word(self, address: int) -> int:
        """The little-endian 32-bit word at ``address`` of any loaded section (read from the file: the
        data sections, a large model's weights, are not kept in memory)."""
        return self.read(address, 4)

    def read(self, address: int, size: int) -> int:
        """The little-endian unsigned integer of ``size`` bytes at ``address`` of any loaded section."""
        for start, length, offset in self._data:
            if start <= address and address + size <= start + length:
                with self.path.open("rb") as stream:
                    stream.seek(offset + address - start)
                    return int.from_bytes(stream.read(size), "little")
        raise AnalysisError(f"{self.path}: no data at {address:#x} to read a literal or table entry from", address)

    def line(self, address: int) -> tuple[str, int] | None:
        """(source file base name, line) of ``address`` in the DWARF line table, or None."""
        if self._lines is None:
            self._lines = line_table(self.path)
            self._line_starts = [row[0] for row in self._lines]
        index = bisect.bisect_right(self._line_starts, address) - 1
        if index >= 0 and self._lines[index][0] <= address < self._lines[index][1]:
            return self._lines[index][2], self._lines[index][3]
        return None

    def _span(self, address: int, data_ok: bool = False) -> tuple[int, int, str]:
        """The mapping-symbol span holding ``address``: (start, end, 'a', 't' or 'd')."""
        index = bisect.bisect_right(self._map_addresses, address) - 1
        section_start, section_end = self._section_bounds(address)
        if index < 0 or self._map_addresses[index] < section_start:
            # No mapping symbol: Cortex-M code is all Thumb; otherwise assume ARM.
            following = self._map_addresses[index + 1] if index + 1 < len(self._map_addresses) else section_end
            return section_start, min(following, section_end), "t" if self.mclass else "a"
        start, kind = self._map_addresses[index], self._map_kinds[index]
        end = self._map_addresses[index + 1] if index + 1 < len(self._map_addresses) else section_end
        if kind == "d" and not data_ok:
            raise AnalysisError(f"{self.path}: {address:#x} is data ($d), not code", address)
        return start, min(end, section_end), kind

    def _section_bounds(self, address: int) -> tuple[int, int]:
        for start, size, _ in self._sections:
            if start <= address < start + size:
                return start, start + size
        raise AnalysisError(f"{self.path}: {address:#x} is in no executable section", address)

    def _section_bytes(self, start: int, end: int) -> bytes:
        """The bytes [start, end) of an executable section, read from the file (code is decoded one
        mapping-symbol span at a time; sections are not kept in memory: picolibc's .text holds .rodata)."""
        for section_start, size, offset in self._sections:
            if section_start <= start < section_start + size:
                with self.path.open("rb") as stream:
                    stream.seek(offset + start - section_start)
                    return stream.read(min(end, section_start + size) - start)
        return b""

    def _decode_span(self, address: int) -> None:
        start, end, kind = self._span(address)
        if start in self._spans_done:
            return
        self._spans_done.add(start)
        disassembler = _disassembler(kind == "t", self.mclass)
        data = self._section_bytes(start, end)
        offset, step = 0, 2 if kind == "t" else 4
        while offset < len(data):
            last = None
            for insn in disassembler.disasm(data[offset:], start + offset):
                self._decoded[insn.address] = insn
                last = insn
            # capstone stops at bytes it cannot decode: skip one halfword (Thumb) or word (ARM)
            offset = offset + step if last is None else last.address + last.size - start


def _is_m_profile(elf_file: ELFFile) -> bool:
    """True if the ELF's ARM build attributes say Tag_CPU_arch_profile = 'M' (microcontroller)."""
    section = elf_file.get_section_by_name(".ARM.attributes")
    if section is None or not hasattr(section, "iter_subsections"):
        return False
    for subsection in section.iter_subsections():
        for subsubsection in subsection.iter_subsubsections():
            for attribute in subsubsection.iter_attributes():
                if attribute.tag == "TAG_CPU_ARCH_PROFILE":
                    return attribute.value == ord("M")
    return False


@functools.cache
def _disassembler(thumb: bool, mclass: bool) -> capstone.Cs:
    mode = capstone.CS_MODE_THUMB if thumb else capstone.CS_MODE_ARM
    if mclass:
        mode |= capstone.CS_MODE_MCLASS
    disassembler = capstone.Cs(capstone.CS_ARCH_ARM, mode)
    disassembler.detail = True
    return disassembler


# ---------------------------------------------------------------------------- control flow of one instruction

_PC, _LR, _SP = A.ARM_REG_PC, A.ARM_REG_LR, A.ARM_REG_SP
_ADD = {A.ARM_INS_ADD, A.ARM_INS_ADDW}
_SUB = {A.ARM_INS_SUB, A.ARM_INS_SUBW}
_LOAD_MULTIPLE = {A.ARM_INS_LDM, A.ARM_INS_VLDMIA}
_SINGLE_LOADS = {A.ARM_INS_LDR, A.ARM_INS_LDRD, A.ARM_INS_LDRB, A.ARM_INS_LDRH}


@dataclass(frozen=True)
class Flow:
    """What one instruction does to the control flow.

    ``kind``: ``"none"`` (goes on to the next instruction), ``"call"`` (direct,
    ``target`` given), ``"branch"`` (direct, ``target`` given), ``"return"``,
    ``"indirect-call"``, ``"indirect-jump"``, ``"jump-table"``.
    ``final``: execution never goes on to the next instruction (an
    unconditional branch, return or jump). ``exchange``: a direct call that
    switches between ARM and Thumb (``blx #imm``).
    """

    kind: str = "none"
    target: int | None = None
    final: bool = False
    exchange: bool = False


NEXT = Flow()


def flow(insn: capstone.CsInsn) -> Flow:
    """The control-flow effect of one capstone ARM/Thumb instruction."""
    ops, ident = insn.operands, insn.id
    unconditional = insn.cc in (A.ARM_CC_AL, A.ARM_CC_INVALID)
    if ident in (A.ARM_INS_BL, A.ARM_INS_BLX):
        if ops and ops[0].type == A.ARM_OP_IMM:
            return Flow("call", target=ops[0].imm, exchange=ident == A.ARM_INS_BLX)
        return Flow("indirect-call")
    if ident in (A.ARM_INS_B, A.ARM_INS_CBZ, A.ARM_INS_CBNZ):
        return Flow("branch", target=ops[-1].imm, final=unconditional and ident == A.ARM_INS_B)
    if ident in (A.ARM_INS_BX, A.ARM_INS_BXJ):
        if ops[0].type == A.ARM_OP_REG and ops[0].reg == _LR:
            return Flow("return", final=unconditional)
        return Flow("indirect-jump", final=unconditional)
    if ident in (A.ARM_INS_TBB, A.ARM_INS_TBH):
        return Flow("jump-table", final=True)
    _, written = insn.regs_access()
    if _PC in written or (ops and ops[0].type == A.ARM_OP_REG and ops[0].reg == _PC and writes_first_operand(insn)):
        return _pc_write(insn, unconditional)
    return NEXT


def writes_first_operand(insn: capstone.CsInsn) -> bool:
    """Whether the first operand is a destination (data processing and loads)."""
    return insn.id in (*_ADD, *_SUB, A.ARM_INS_MOV, *_SINGLE_LOADS)


def _pc_write(insn: capstone.CsInsn, unconditional: bool) -> Flow:
    """pc loaded: a return when it comes off the stack or from lr, a jump table when
    it is indexed from pc, otherwise an indirect jump."""
    ops, ident = insn.operands, insn.id
    if ident == A.ARM_INS_POP or (ident in _LOAD_MULTIPLE and ops[0].reg == _SP):
        return Flow("return", final=unconditional)
    if ident in _SINGLE_LOADS and ops[1].type == A.ARM_OP_MEM:
        memory = ops[1].mem
        if memory.base == _SP and insn.writeback:
            return Flow("return", final=unconditional)
        if memory.base == _PC and memory.index != 0:
            return Flow("jump-table", final=unconditional)
    if ident == A.ARM_INS_MOV and ops[1].type == A.ARM_OP_REG and ops[1].reg == _LR:
        return Flow("return", final=unconditional)
    if ident in _ADD and len(ops) == 3 and ops[1].type == A.ARM_OP_REG and ops[1].reg == _PC \
            and ops[2].type == A.ARM_OP_REG:
        return Flow("jump-table", final=unconditional)
    return Flow("indirect-jump", final=unconditional)


def pc_relative_literal(insn: capstone.CsInsn, thumb: bool) -> int | None:
    """The address of the literal ``ldr Rt, [pc, #imm]`` loads (ARM: pc = address + 8, Thumb:
    Align(address + 4, 4)); None for any other instruction."""
    if insn.id != A.ARM_INS_LDR or len(insn.operands) != 2 or insn.operands[1].type != A.ARM_OP_MEM:
        return None
    memory = insn.operands[1].mem
    if memory.base != _PC or memory.index != 0 or insn.writeback:
        return None
    pc = (insn.address + 4) & ~3 if thumb else insn.address + 8
    return pc + memory.disp


# ---------------------------------------------------------------------------- DWARF line table


def line_table(elf: Path, file_names: set[str] | None = None) -> list[tuple[int, int, str, int]]:
    """(start, end, file base name, line) rows of the DWARF line table, sorted by address; only
    the given source files if ``file_names`` is set. Empty without DWARF information."""
    rows = []
    with Path(elf).open("rb") as stream:
        elf_file = ELFFile(stream)
        if not elf_file.has_dwarf_info():
            return []
        dwarf = elf_file.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            program = dwarf.line_program_for_CU(cu)
            if program is None:
                continue
            entries = program["file_entry"]
            base = 0 if program.header["version"] >= 5 else 1
            names = [PurePosixPath(entry.name.decode(errors="replace")).name for entry in entries]
            if file_names is not None and not set(names) & file_names:
                continue
            previous = None
            for entry in program.get_entries():
                state = entry.state
                if state is None:
                    continue
                if previous is not None and state.address > previous.address:
                    index = previous.file - base
                    name = names[index] if 0 <= index < len(names) else ""
                    if file_names is None or name in file_names:
                        rows.append((previous.address, state.address, name, previous.line))
                previous = None if state.end_sequence else state
    rows.sort()
    return rows


def line_rows(elf: Path, file_names: set[str]) -> list[tuple[int, int, str, int]]:
    """(start, end, file base name, line) rows of the DWARF line table for the given source files."""
    with Path(elf).open("rb") as stream:
        if not ELFFile(stream).has_dwarf_info():
            raise AnalysisError(f"{elf}: no DWARF information (build with -g)")
    return line_table(elf, file_names)


def layer_ranges(code: ArmCode, manifest: dict, entry: str) -> list[AddressRange]:
    """Non-overlapping ranges covering the generated functions, tagged by layer.

    The generated functions are the manifest's ``symbols.code`` (or the entry
    alone for a small manifest). An address whose DWARF line falls in a layer's
    ``lines`` span of that layer's ``file`` belongs to that layer (bucket
    1 + index); any other address of those functions to ``OUTSIDE_LAYERS``.
    Functions called through a pointer whose per-execution targets the manifest
    gives (``indirect_calls[*].sequence``: assay-v1's shared layer library) get no
    range: one function serves several layers, so the layer is the call's, not
    the address's.
    """
    dynamic = {name for call in manifest.get("indirect_calls", []) if call.get("sequence") is not None
               for name in call.get("targets", [])}
    names = [name for name in dict.fromkeys([entry, *manifest.get("symbols", {}).get("code", [])])
             if name == entry or name not in dynamic]
    functions = sorted((code.function(name) for name in names if name in code.functions or name == entry),
                       key=lambda f: f.start)
    layers = manifest.get("layers", [])
    spans = [(PurePosixPath(layer["file"]).name, int(layer["lines"][0]), int(layer["lines"][1]), i + 1)
             for i, layer in enumerate(layers)]
    rows = line_rows(code.path, {file for file, _, _, _ in spans}) if spans else []

    def bucket(file: str, line: int) -> int:
        for span_file, first, last, number in spans:
            if file == span_file and first <= line <= last:
                return number
        return OUTSIDE_LAYERS

    ranges: list[AddressRange] = []
    for function in functions:
        position = function.start
        for start, end, file, line in rows:
            start, end = max(start, position), min(end, function.end)
            if end <= start:
                continue
            if start > position:
                _append(ranges, AddressRange(position, start, OUTSIDE_LAYERS))
            _append(ranges, AddressRange(start, end, bucket(file, line)))
            position = end
        if position < function.end:
            _append(ranges, AddressRange(position, function.end, OUTSIDE_LAYERS))
    return ranges


def _append(ranges: list[AddressRange], new: AddressRange) -> None:
    if ranges and ranges[-1].end == new.start and ranges[-1].bucket == new.bucket:
        ranges[-1] = AddressRange(ranges[-1].start, new.end, new.bucket)
    elif ranges and ranges[-1].end > new.start:
        raise AnalysisError(f"overlapping generated functions at {new.start:#x}", new.start)
    else:
        ranges.append(new)
