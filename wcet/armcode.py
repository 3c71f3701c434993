"""The code of an ARM ELF as the measurement, stack and timing stages need it.

- ``ArmCode.decode(address)``: the instruction at an address (``Insn``: capstone's
  details), decoded in ARM or Thumb state as the ELF's mapping symbols (``$a``,
  ``$t``, ``$d``, ARM ELF ABI 5.5.5) say. Code is disassembled one mapping-symbol
  span at a time from its start, so capstone sees Thumb ``IT`` blocks and gives
  the instructions inside them their condition. Bytes in a ``$d`` span (literal
  pools, jump tables) are never decoded. Capstone's details are read once per
  distinct encoding and shared (``_Shape``): straight-line V3 code of millions of
  instructions has a few thousand encodings once the offsets of relative
  branches are set aside (their targets are computed from the bits, and checked
  against capstone for the first of each kind); an encoding whose details
  depend on its address otherwise (``cbz``, Thumb ``b<c>.w``) is decoded at each
  address.
- ``ArmCode.function(name)``: a function symbol's address range;
  ``ArmCode.containing(address)``: the innermost function symbol holding an
  address; ``ArmCode.kind(address)``: ``"a"``, ``"t"`` or ``"d"`` by the mapping
  symbols; ``ArmCode.word(address)``: a 32-bit literal of the image.
- ``flow(insn)``: what one instruction does to the control flow (call, branch,
  return, indirect jump, ...); the stack analysis (``harness/binary/stack.py``) and the
  WCET analyzer's CFGs (``wcet/cfg.py``) share it.
- ``ArmCode.line(address)`` / ``ArmCode.line_rows(files, within)``: the DWARF line table.
- ``layer_ranges(code, manifest)``: address ranges of the generated functions,
  each tagged with the manifest layer whose source lines (``layers[*].lines``)
  the DWARF line table gives for it.

Nothing here runs code; it reads an ELF built with ``-g`` (line information
is optional for everything but ``layer_ranges``). Errors are
``wcet.errors.AnalysisError`` (an ``AssayError``) naming the address.
"""

from __future__ import annotations

import array
import bisect
import functools
import itertools
import os
import re
import struct
import time
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from wcet import elfread
from wcet.disasm import A, Disassembler
from wcet.errors import AnalysisError
from wcet.timing import writes_pc

TYPE_CHECKING = False  # typing.TYPE_CHECKING's value, without importing typing (wcet/__init__.py)
if TYPE_CHECKING:
    import capstone

_PROBE = 0x10000  # an encoding is decoded at its address and this far from it: what differs depends on the address
_IT = re.compile(r"it[te]{0,3}")  # Thumb-2 IT: one condition letter per covered instruction after 'it'
OUTSIDE_LAYERS = 0  # bucket of generated code that no layer's line span covers (prologue, epilogue)


class Function(namedtuple("Function", [
    "name",
    "start",  # without the Thumb bit
    "end",
    "thumb",  # Thumb code: the symbol's bit 0, or an M-profile ELF
    "symbol_thumb",  # bit 0 of the symbol's value as written (None: not from a symbol)
], defaults=(None,))):
    __slots__ = ()


class AddressRange(namedtuple("AddressRange", [
    "start",
    "end",  # exclusive
    "bucket",  # OUTSIDE_LAYERS, or 1 + the layer's index in the manifest
])):
    __slots__ = ()


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
            elf_file = elfread.ElfFile(self.path)
            if elf_file.machine != elfread.EM_ARM:
                raise AnalysisError(f"{self.path}: not an ARM ELF (e_machine {elf_file.machine})")
            self.mclass = elf_file.is_m_profile() if mclass is None else mclass
            for section in elf_file.sections:
                if section.type == 1 and section.flags & 0x2:  # SHT_PROGBITS, SHF_ALLOC
                    self._data.append((section.address, section.size, section.offset))
                    if section.flags & 0x4:  # SHF_EXECINSTR
                        self._sections.append((section.address, section.size, section.offset))
            self.has_symbols = any(section.type in (elfread.SHT_SYMTAB, elfread.SHT_DYNSYM)
                                   for section in elf_file.sections)
            for name, value, size, info, shndx in elf_file.symbols():
                if name in ("$a", "$t", "$d") or name.startswith(("$a.", "$t.", "$d.")):
                    mapping.append((value, name[1]))
                elif info & 0xF == 2 and shndx != 0:  # STT_FUNC, not SHN_UNDEF
                    start = value & ~1
                    self.functions.setdefault(name, Function(name, start, start + size, bool(value & 1) or self.mclass,
                                                             bool(value & 1)))
        except (OSError, ValueError, struct.error) as exc:
            raise AnalysisError(f"{self.path}: cannot read the ELF: {exc}") from None
        self._sections.sort()
        self._data.sort()
        mapping.sort()
        self._map_addresses = [address for address, _ in mapping]
        self._map_kinds = [kind for _, kind in mapping]
        self._decoded: dict[int, Insn] = {}  # instructions decoded one by one (IT blocks, address-dependent)
        # by (kind, encoding): what instructions share; one table per decoding mode for the whole process, so the
        # ELFs of a batch (python -m wcet --batch), which link the same library code, decode it once
        self._shapes: dict[tuple[str, bytes], _Shape] = _SHAPES.setdefault(self.mclass, {})
        # the span decoded last, with its ``_boundaries``: code is mostly decoded in order
        self._last_span: tuple = (0, 0, "a", None, None, None, None)
        # by span start: its instruction addresses, IT blocks and bytes (``_boundaries``)
        self._spans: dict[int, tuple[array.array, dict[int, int], dict[int, int], bytes]] = {}
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
        self._lines: _LineTable | None = None

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

    def decode(self, address: int) -> "Insn":
        """The instruction at ``address`` (``Insn``: capstone's details, its encoding's shared with every
        other instruction of the same encoding)."""
        insn = self._decoded.get(address)
        if insn is not None:
            return insn
        span = self._last_span
        if not span[0] <= address < span[1]:
            start, end, kind = self._span(address)
            span = self._last_span = (start, end, kind, *self._boundaries(start, end, kind))
        boundaries = span[3]
        index = bisect.bisect_left(boundaries, address)
        if index == len(boundaries) or boundaries[index] != address:
            raise AnalysisError(f"{self.path}: no instruction decodes at {address:#x} "
                                f"(unsupported instruction or not an instruction boundary)", address)
        return self._decode_at(span, address)

    def instructions(self, address: int) -> Iterator["Insn"]:
        """``decode(address)``, then each following instruction in turn (``decode(previous.address +
        previous.size)``, an error where that fails): a straight walk over the code without a search per
        instruction."""
        while True:
            insn = self.decode(address)
            span = self._last_span  # its span (or another, and the search below finds nothing)
            yield insn
            start, end, boundaries = span[0], span[1], span[3]
            index = bisect.bisect_left(boundaries, address) + 1
            address += insn.size
            while index < len(boundaries) and boundaries[index] == address:
                insn = self._decoded.get(address) or self._decode_at(span, address)
                yield insn
                index += 1
                address += insn.size
            if start <= address < end:  # not an instruction boundary: ``decode`` says so
                self.decode(address)

    def _decode_at(self, span: tuple, address: int) -> "Insn":
        """The instruction at ``address``, an instruction boundary of ``span`` (``_last_span``'s form)."""
        start, end, kind, _, it_of, it_covers, code = span
        if address in it_of:  # inside a Thumb IT block: decoded from its IT, so the condition shows
            return self._decode_block(it_of[address], start, end, kind, it_covers, code)[address]
        offset = address - start
        if kind == "t":
            size = 4 if code[offset + 1] >> 3 in (0b11101, 0b11110, 0b11111) else 2
        else:
            size = 4
        encoding = code[offset:offset + size]
        shape = self._shapes.get((kind, encoding))
        if shape is None:
            relative = _relative_branch(kind, encoding)
            if relative is not None:
                key, offset = relative
                template = self._shapes.get((kind, key))
                if template is None:
                    template = self._shapes[(kind, key)] = self._branch_template(address, kind, encoding, offset)
                if template is not _EXACT:  # the shape of the branches to one target; the bytes are its own
                    return Insn(address, template.at(address + offset), encoding)
                shape = _EXACT
            else:
                shape = self._shape(address, kind, encoding)
        if shape is _EXACT:
            insn = self._decoded[address] = Insn(address, _Shape.of(self._capstone(address, kind, encoding)))
            return insn
        return Insn(address, shape)

    def _decode_block(self, first: int, start: int, end: int, kind: str, it_covers: dict[int, int],
                      code: bytes) -> dict[int, "Insn"]:
        """Decode a Thumb IT instruction and the instructions it covers in one pass (each covered one gets
        its condition; nothing of them is shared) and keep them."""
        boundaries = self._spans[start][0]
        index = bisect.bisect_left(boundaries, first) + 1 + it_covers.get(first, 0)
        stop = boundaries[index] if index < len(boundaries) else end
        for insn in _disassembler(kind == "t", self.mclass).disasm(code[first - start:stop - start], first,
                                                                    1 + it_covers.get(first, 0)):
            self._decoded[insn.address] = Insn(insn.address, _Shape.of(insn))
        return self._decoded

    def _capstone(self, address: int, kind: str, encoding: bytes) -> capstone.CsInsn:
        """capstone's detailed decoding of one instruction (outside IT blocks)."""
        for insn in _disassembler(kind == "t", self.mclass).disasm(encoding, address, 1):
            return insn
        raise AnalysisError(f"{self.path}: no instruction decodes at {address:#x}", address)

    def _shape(self, address: int, kind: str, encoding: bytes) -> "_Shape":
        """The shared shape of an encoding met for the first time, or ``_EXACT`` when capstone's details of it
        depend on its address (decoded at another address, something differs): then each instruction of
        that encoding is decoded on its own."""
        insn = self._capstone(address, kind, encoding)
        shape = _Shape.of(insn)
        elsewhere = _Shape.of(self._capstone(address + _PROBE, kind, encoding))
        if insn.size != len(encoding) or shape.details() != elsewhere.details():
            shape = _EXACT
        self._shapes[(kind, encoding)] = shape
        return shape

    def _branch_template(self, address: int, kind: str, encoding: bytes, offset: int) -> "_Shape":
        """The shape shared by the relative branches of one kind (condition, link, width), whose target
        ``_relative_branch`` computes; ``_EXACT`` if capstone's decoding of this one disagrees with it."""
        insn = self._capstone(address, kind, encoding)
        shape = _Shape.of(insn)
        target = (address + offset) & 0xFFFFFFFF
        imm = [n for n, op in enumerate(insn.operands) if op.type == A.ARM_OP_IMM]
        if insn.size != len(encoding) or imm != [len(insn.operands) - 1] or insn.operands[-1].reg != target \
                or not shape.op_str.endswith(f"#{target:#x}"):
            return _EXACT
        return shape.relative_to(target)

    def kind(self, address: int) -> str:
        """``"a"`` (ARM), ``"t"`` (Thumb) or ``"d"`` (data) at ``address``, by the mapping symbols."""
        span = self._last_span
        return span[2] if span[0] <= address < span[1] else self._span(address, data_ok=True)[2]

    def word(self, address: int) -> int:
        """The little-endian 32-bit word at ``address`` of any loaded section (read from the file: the
        data sections, a large model's weights, are not kept in memory)."""
        return self.read(address, 4)

    def read(self, address: int, size: int) -> int:
        """The little-endian unsigned integer of ``size`` bytes at ``address`` of any loaded section."""
        return int.from_bytes(self.bytes(address, address + size), "little")

    def bytes(self, start: int, end: int) -> bytes:
        """The bytes [start, end) of one loaded section, read from the file."""
        for section_start, length, offset in self._data:
            if section_start <= start and end <= section_start + length:
                with self.path.open("rb") as stream:
                    stream.seek(offset + start - section_start)
                    return stream.read(end - start)
        raise AnalysisError(f"{self.path}: no data at {start:#x} to read a literal or table entry from", start)

    def line(self, address: int) -> tuple[str, int] | None:
        """(source file base name, line) of ``address`` in the DWARF line table, or None."""
        return self._line_table().line(address)

    def line_rows(self, file_names: set[str], within: list[tuple[int, int]]) -> list[tuple[int, int, str, int]]:
        """(start, end, file base name, line) rows of the DWARF line table for the given source files that
        overlap the address ranges ``within``, sorted; an ``AnalysisError`` without DWARF information."""
        table = self._line_table()
        if table.dwarf is None:
            raise AnalysisError(f"{self.path}: no DWARF information (build with -g)")
        return table.rows_of(file_names, within)

    def _line_table(self) -> "_LineTable":
        if self._lines is None:
            self._lines = _LineTable(self.path)
        return self._lines

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

    def _boundaries(self, start: int, end: int, kind: str) -> tuple[array.array, dict[int, int], dict[int, int],
                                                                    bytes]:
        """The addresses of the instructions of the mapping-symbol span [start, end), its Thumb IT blocks
        (each covered instruction's address -> its IT's address, and each IT's address -> how many
        instructions it covers) and its bytes.

        The span is disassembled in one pass from its start without details
        (capstone's ``disasm_lite``: a tuple per instruction, nothing kept but
        the address), so capstone sees IT blocks in sequence; ``decode`` then
        decodes with details only the instructions asked for (an analysis
        reaches a small part of an image's code), from the IT of their block if
        they are in one. Bytes capstone cannot decode are skipped a halfword
        (Thumb) or word (ARM) at a time, as before.
        """
        found = self._spans.get(start)
        if found is not None:
            return found
        disassembler = _disassembler(kind == "t", self.mclass, details=False)
        data = self._section_bytes(start, end)
        addresses = array.array("I")
        it_of: dict[int, int] = {}
        it_covers: dict[int, int] = {}
        offset, step = 0, 2 if kind == "t" else 4
        covered: list[int] = []  # addresses still to be covered by the current IT block
        while offset < len(data):
            following = None
            for address, size, mnemonic, _ in disassembler.disasm_lite(data[offset:], start + offset):
                addresses.append(address)
                if covered:
                    it_of[address] = covered.pop()
                if kind == "t" and _IT.fullmatch(mnemonic):
                    it_covers[address] = len(mnemonic) - 1
                    covered = [address] * (len(mnemonic) - 1)
                following = address + size
            # capstone stops at bytes it cannot decode: skip one halfword (Thumb) or word (ARM)
            offset = offset + step if following is None else following - start
            covered = []
        self._spans[start] = (addresses, it_of, it_covers, data)
        return self._spans[start]


class Operand:
    """One operand of a decoded instruction: the fields of capstone's ``ArmOp`` (``reg`` and ``imm`` read
    its value union as capstone does, whatever the type), as plain values."""

    __slots__ = ("type", "reg", "imm", "mem", "shift", "subtracted", "access", "vector_index", "neon_lane")

    def __init__(self, type: int, reg: int, imm: int, mem: "Memory", shift: "Shift", subtracted: bool,
                 access: int, vector_index: int, neon_lane: int):
        self.type, self.reg, self.imm, self.mem, self.shift = type, reg, imm, mem, shift
        self.subtracted, self.access, self.vector_index, self.neon_lane = subtracted, access, vector_index, neon_lane

    @classmethod
    def of(cls, op) -> "Operand":
        memory, shift = op.mem, op.shift
        return cls(op.type, op.reg, op.imm, Memory(memory.base, memory.index, memory.scale, memory.disp,
                                                   memory.lshift),
                   Shift(shift.type, shift.value), op.subtracted, op.access, op.vector_index, op.neon_lane)

    def details(self) -> tuple:
        return (self.type, self.reg, self.imm, self.mem, self.shift, self.subtracted, self.access,
                self.vector_index, self.neon_lane)


Memory = namedtuple("Memory", "base index scale disp lshift")
Shift = namedtuple("Shift", "type value")


class _Shape:
    """What capstone's details say about one encoding (in one state, outside IT blocks), shared by every
    instruction of that encoding: a V3 image repeats a few thousand encodings hundreds of thousands of
    times, and capstone's ``CsInsn`` costs about 4.5 KB and 50 us each. A relative branch's shape is its
    kind's (condition, link, width) and target's: the branches of one kind to one function share it (their
    bytes, which differ, are their own). ``flow`` memoises ``flow()``."""

    __slots__ = ("id", "cc", "size", "mnemonic", "op_str", "operands", "writeback", "update_flags", "groups",
                 "regs_read", "regs_write", "bytes", "flow", "target", "targets")

    @classmethod
    def of(cls, insn: capstone.CsInsn) -> "_Shape":
        shape = cls()
        shape.id, shape.cc, shape.size, shape.mnemonic, shape.op_str = (insn.id, insn.cc, insn.size, insn.mnemonic,
                                                                        insn.op_str)
        shape.operands = tuple(Operand.of(op) for op in insn.operands)
        shape.writeback, shape.update_flags, shape.groups = insn.writeback, insn.update_flags, tuple(insn.groups)
        read, written = insn.regs_access()
        shape.regs_read, shape.regs_write, shape.bytes = tuple(read), tuple(written), bytes(insn.bytes)
        shape.flow, shape.target, shape.targets = None, None, None
        return shape

    def details(self) -> tuple:
        """Everything but the bytes: what two decodings of one encoding must agree on to share a shape."""
        return (self.id, self.cc, self.size, self.mnemonic, self.op_str,
                tuple(op.details() for op in self.operands), self.writeback, self.update_flags, self.groups,
                self.regs_read, self.regs_write)

    def relative_to(self, target: int) -> "_Shape":
        """This shape as the template of the relative branches like it, ``target`` being its own target."""
        self.target, self.targets = target, {}
        return self

    def at(self, target: int) -> "_Shape":
        """The shape of the relative branches like the template to ``target`` (32 bits: their last operand,
        read as signed for ``imm``, and the end of their text are the target)."""
        target &= 0xFFFFFFFF
        shape = self.targets.get(target)
        if shape is None:
            shape = self.targets[target] = _Shape()
            shape.id, shape.cc, shape.size, shape.mnemonic = self.id, self.cc, self.size, self.mnemonic
            shape.writeback, shape.update_flags, shape.groups = self.writeback, self.update_flags, self.groups
            shape.regs_read, shape.regs_write, shape.bytes = self.regs_read, self.regs_write, self.bytes
            last = self.operands[-1]
            memory = last.mem
            shape.operands = (*self.operands[:-1], Operand(
                last.type, target, target - (target >> 31 << 32),
                Memory(target, memory.index, memory.scale, memory.disp, memory.lshift), last.shift,
                last.subtracted, last.access, last.vector_index, last.neon_lane))
            shape.op_str = self.op_str[:len(self.op_str) - len(f"#{self.target:#x}")] + f"#{target:#x}"
            shape.flow, shape.target, shape.targets = None, None, None
        return shape


_EXACT = _Shape()  # in ``ArmCode._shapes``: instructions of this encoding are decoded one by one
# mclass -> (kind, encoding) -> shape: a shape depends on the encoding and the decoding mode only (``_shape``
# checks that capstone's details do not depend on the address), so every ELF of the process shares them
_SHAPES: dict[bool, dict[tuple[str, bytes], _Shape]] = {}


class Insn:
    """A decoded instruction: its address and its encoding's shape. It answers what the analyses ask of
    capstone's ``CsInsn`` (``id``, ``cc``, ``size``, ``operands``, ``mnemonic``, ``op_str``, ``writeback``,
    ``update_flags``, ``groups``, ``bytes``, ``regs_access()``, ``reg_name()``) with capstone's values."""

    __slots__ = ("address", "shape", "own_bytes")

    def __init__(self, address: int, shape: _Shape, own_bytes: bytes | None = None):
        self.address, self.shape, self.own_bytes = address, shape, own_bytes  # own: a relative branch's

    id = property(lambda self: self.shape.id)
    cc = property(lambda self: self.shape.cc)
    size = property(lambda self: self.shape.size)
    operands = property(lambda self: self.shape.operands)
    mnemonic = property(lambda self: self.shape.mnemonic)
    op_str = property(lambda self: self.shape.op_str)
    writeback = property(lambda self: self.shape.writeback)
    update_flags = property(lambda self: self.shape.update_flags)
    groups = property(lambda self: self.shape.groups)
    bytes = property(lambda self: self.shape.bytes if self.own_bytes is None else self.own_bytes)

    def regs_access(self) -> tuple[list[int], list[int]]:
        """The registers read and written, explicitly or not (capstone's ``regs_access``)."""
        return list(self.shape.regs_read), list(self.shape.regs_write)

    @staticmethod
    def reg_name(register: int) -> str:
        return _disassembler(False, False).reg_name(register)

    def __repr__(self) -> str:
        return f"<Insn {self.address:#x}: {self.mnemonic} {self.op_str}>"


def _relative_branch(kind: str, encoding: bytes) -> tuple[bytes, int] | None:
    """(key, target - address) of a PC-relative branch whose target capstone gives as an absolute address:
    ARM B/BL (ARM ARM A8.8.18, A8.8.25), Thumb B encodings T1, T2, T4 and BL (A8.8.18, A8.8.25); the
    key (the encoding with the offset bits cleared, marked) is shared by the branches of one condition and
    kind. None for any other encoding (decoded as it is)."""
    if kind == "a":
        word = int.from_bytes(encoding, "little")
        if (word >> 25) & 7 == 0b101 and word >> 28 != 0xF:
            return b"B" + (word & 0xFF000000).to_bytes(4, "little"), 8 + (((word & 0xFFFFFF) ^ 0x800000) - 0x800000) * 4
        return None
    first = int.from_bytes(encoding[:2], "little")
    if len(encoding) == 2:
        if first & 0xF000 == 0xD000 and (first >> 8) & 0xF < 0xE:  # B<c> T1 (0xE: UDF, 0xF: SVC)
            return b"B" + (first & 0xFF00).to_bytes(2, "little"), 4 + (((first & 0xFF) ^ 0x80) - 0x80) * 2
        if first & 0xF800 == 0xE000:  # B T2
            return b"B" + (0xE000).to_bytes(2, "little"), 4 + (((first & 0x7FF) ^ 0x400) - 0x400) * 2
        return None
    second = int.from_bytes(encoding[2:4], "little")
    if first & 0xF800 == 0xF000 and second & 0xD000 in (0xD000, 0x9000):  # BL T1, B.W T4
        s, j1, j2 = (first >> 10) & 1, (second >> 13) & 1, (second >> 11) & 1
        imm = s << 24 | (1 ^ j1 ^ s) << 23 | (1 ^ j2 ^ s) << 22 | (first & 0x3FF) << 12 | (second & 0x7FF) << 1
        return (b"B" + (first & 0xF800).to_bytes(2, "little") + (second & 0xD000).to_bytes(2, "little"),
                4 + ((imm ^ 0x1000000) - 0x1000000))
    return None


_LOADED: dict[tuple[str, str, bool | None], tuple[bytes, "ArmCode"]] = {}  # the latest ELFs read, by path
_DIGEST_CHUNK = 1 << 24  # bytes of a section hashed at a time by ``content_digest``
_KEEP = 2  # how many: an analysis reads one ELF several times (library facts, flow facts, bound), then the next


def load_code(elf: Path | str, mclass: bool | None = None) -> ArmCode:
    """``ArmCode(elf, mclass)``, shared with earlier calls on the same file while its content is unchanged.

    Instructions are decoded once per ELF and process however many times the
    ELF is read (library annotations, flow facts, each bound and timing
    model). The key is ``content_digest``: a file rewritten in place, even
    with the same size and time stamp, is read again. The digest is computed
    again only when the file's status changed since it was last computed
    (device, inode, size, modification and status-change times: a write in
    place changes the status-change time, which no user tool can set back),
    and only for a file unchanged for 2 s (one written in the timestamps' last
    tick is always hashed), so the three reads of one ELF by one bound, and a
    batch's, hash it once.
    """
    key = (str(elf), os.path.abspath(elf), mclass)
    digest = _digest_of(Path(elf), key[1])
    cached = _LOADED.pop(key, None)
    code = cached[1] if cached is not None and cached[0] == digest else ArmCode(Path(elf), mclass)
    _LOADED[key] = (digest, code)
    while len(_LOADED) > _KEEP:
        del _LOADED[next(iter(_LOADED))]
    return code


def _digest_of(elf: Path, absolute: str) -> bytes:
    """``content_digest(elf)``, reused while the file's status (``load_code``) is the one it was computed for."""
    try:
        status = os.stat(absolute)
    except OSError:
        return content_digest(elf)  # the error, as the digest reports it
    stamp = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
    known = _DIGESTS.get(absolute)
    if known is not None and known[0] == stamp:
        return known[1]
    digest = content_digest(elf)
    # kept only for a file whose last change is older than the timestamps' granularity (the kernel's clock
    # tick): a write in the same tick as the last one would leave the status as it was (git's "racily clean")
    if time.time_ns() - status.st_ctime_ns > _SETTLED_NS:
        _DIGESTS[absolute] = (stamp, digest)
        while len(_DIGESTS) > _KEEP:
            del _DIGESTS[next(iter(_DIGESTS))]
    return digest


_DIGESTS: dict[str, tuple[tuple, bytes]] = {}  # absolute path -> (its status when hashed, its content digest)
_SETTLED_NS = 2_000_000_000  # a file unchanged for this long has a status that tells every later change


def content_digest(elf: Path) -> bytes:
    """SHA-256 of everything ``ArmCode`` keeps from ``elf``: the ELF header, the section headers and the
    contents of every section but loaded data (``.rodata``, ``.data``: a model's weights; ``ArmCode`` reads
    literals and tables from the file when asked, never from memory) and ``.bss``. A file that is not a
    32-bit ELF is hashed whole."""
    digest = sha256()
    try:
        with elf.open("rb") as stream:
            header = stream.read(52)
            if header[:5] not in (b"\x7fELF\x01",) or header[5] not in (1, 2):
                digest.update(header + stream.read())
                return digest.digest()
            order = "<" if header[5] == 1 else ">"
            (shoff,) = struct.unpack_from(order + "I", header, 0x20)
            entry_size, count = struct.unpack_from(order + "HH", header, 0x2E)
            stream.seek(shoff)
            table = stream.read(entry_size * count)
            digest.update(header + table)
            for n in range(len(table) // entry_size if entry_size else 0):
                _, kind, flags, _, offset, size = struct.unpack_from(order + "IIIIII", table, n * entry_size)
                if kind == 8 or (kind == 1 and flags & 0x2 and not flags & 0x4):  # NOBITS; loaded data
                    continue
                stream.seek(offset)
                while size > 0:  # in chunks: picolibc.ld puts .rodata (weights) in .text, hundreds of MB
                    chunk = stream.read(min(size, _DIGEST_CHUNK))
                    if not chunk:
                        break
                    digest.update(chunk)
                    size -= len(chunk)
    except OSError as exc:
        raise AnalysisError(f"{elf}: cannot read the ELF: {exc.strerror or exc}") from None
    return digest.digest()


def sha256(data: bytes = b""):
    """A SHA-256 hash object from CPython's own implementation when it has one: ``hashlib`` loads OpenSSL's
    libcrypto (3.6 MB of resident memory, a tenth of what bounding a small ELF needs) for the same digest."""
    try:
        from _sha2 import sha256 as builtin  # CPython 3.12+
    except ImportError:
        try:
            from _sha256 import sha256 as builtin  # CPython 3.11
        except ImportError:
            from hashlib import sha256 as builtin
    return builtin(data)


@functools.cache
def _disassembler(thumb: bool, mclass: bool, details: bool = True) -> Disassembler:
    """One disassembler per mode for the process; ``details=False`` for ``_boundaries``' whole spans, of which
    capstone would otherwise compute and hold every instruction's details at once (1.6 KB each)."""
    return Disassembler(thumb, mclass, details)


# ---------------------------------------------------------------------------- control flow of one instruction

_PC, _LR, _SP = A.ARM_REG_PC, A.ARM_REG_LR, A.ARM_REG_SP
_ADD = {A.ARM_INS_ADD, A.ARM_INS_ADDW}
_SUB = {A.ARM_INS_SUB, A.ARM_INS_SUBW}
_LOAD_MULTIPLE = {A.ARM_INS_LDM, A.ARM_INS_VLDMIA}
_SINGLE_LOADS = {A.ARM_INS_LDR, A.ARM_INS_LDRD, A.ARM_INS_LDRB, A.ARM_INS_LDRH}


class Flow(namedtuple("Flow", "kind target final exchange", defaults=("none", None, False, False))):
    """What one instruction does to the control flow.

    ``kind``: ``"none"`` (goes on to the next instruction), ``"call"`` (direct,
    ``target`` given), ``"branch"`` (direct, ``target`` given), ``"return"``,
    ``"indirect-call"``, ``"indirect-jump"``, ``"jump-table"``.
    ``final``: execution never goes on to the next instruction (an
    unconditional branch, return or jump). ``exchange``: a direct call that
    switches between ARM and Thumb (``blx #imm``).
    """

    __slots__ = ()


NEXT = Flow()


def flow(insn: "Insn | capstone.CsInsn") -> Flow:
    """The control-flow effect of one ARM/Thumb instruction (an ``Insn``: worked out once per shape)."""
    if isinstance(insn, Insn):
        shape = insn.shape
        if shape.flow is None:
            shape.flow = _flow(insn)
        return shape.flow
    return _flow(insn)


def _flow(insn: "Insn | capstone.CsInsn") -> Flow:
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
    if writes_pc(insn) or (ops and ops[0].type == A.ARM_OP_REG and ops[0].reg == _PC and writes_first_operand(insn)):
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


def line_table(elf: Path) -> list[tuple[int, int, str, int]]:
    """(start, end, file base name, line) rows of the whole DWARF line table, sorted by address (read at once:
    ``ArmCode.line`` reads it one unit at a time). Empty without DWARF information."""
    source = _line_source(Path(elf))
    if source is None:
        return []
    rows = [row for unit in source.units for row in source.rows(unit)]
    rows.sort()
    return rows


def _line_source(elf: Path) -> "_Dwarf | _PyelftoolsDwarf | None":
    """The line information of ``elf`` (None without DWARF information): read by ``wcet.elfread`` for a linked
    image, by pyelftools for a relocatable object (whose debug sections it relocates) or DWARF that
    ``wcet.elfread`` does not decode."""
    try:
        source = _Dwarf(elf)
    except elfread.Unsupported:
        source = _PyelftoolsDwarf(elf)
    except (OSError, ValueError, struct.error) as exc:
        raise AnalysisError(f"{elf}: cannot read the ELF: {exc}") from None
    return source if source.units else None


def _function_at_zero(elf_file: elfread.ElfFile) -> bool:
    """Whether a function of the image starts at address 0 (Thumb symbols carry bit 0). When none does, a line
    sequence or address range starting at 0 is the linker's mark of code it discarded (``--gc-sections``: a
    library function never called, e.g. libm's ``erff`` in an image that does not call it), not code at 0; on a
    Cortex-M image, whose vector table sits at 0 and whose code follows it, such a sequence would otherwise claim
    the addresses of the real code it overlaps."""
    return any(info & 0xF == 2 and value & ~1 == 0  # STT_FUNC at 0
               for _, value, _, info, _ in elf_file.symbols(".symtab"))


class _Dwarf:
    """The compilation units, address ranges and line programs of a linked image (``wcet.elfread``): ``units``
    (their offsets), ``aranges`` (``.debug_aranges``: (start, length, unit), None without it),
    ``discarded_at_zero`` (``_function_at_zero``) and ``rows(unit)``. A unit whose line program this reader
    does not decode is read by pyelftools."""

    def __init__(self, elf: Path):
        self.path = elf
        self.elf = elfread.ElfFile(elf)
        if self.elf.type != elfread.ET_EXEC:
            raise elfread.Unsupported("debug sections of a relocatable file")
        if any(section.name.startswith(".zdebug") or (section.name.startswith(".debug") and section.flags & 0x800)
               for section in self.elf.sections):  # SHF_COMPRESSED
            raise elfread.Unsupported("compressed debug sections")
        self.discarded_at_zero = not _function_at_zero(self.elf)
        self._units = {unit.offset: unit for unit in elfread.units(self.elf)}
        self.units = list(self._units)
        self.aranges = elfread.aranges(self.elf) if self.units else None
        self._fallback: _PyelftoolsDwarf | None = None

    def rows(self, offset: int) -> list[tuple[int, int, str, int]]:
        unit = self._units[offset]
        try:
            at = elfread.stmt_list(self.elf, unit)
            if at is None:
                return []
            program = elfread.line_program(self.elf, unit, at)
            states = _line_states(program)
        except (elfread.Unsupported, IndexError, struct.error):
            states = None
        if states is None:
            self._fallback = self._fallback or _PyelftoolsDwarf(self.path)
            return self._fallback.rows(offset)
        return _unit_rows(program.version, program.file_names, states, self.discarded_at_zero)


class _PyelftoolsDwarf:
    """``_Dwarf``'s answers, read by pyelftools (imported only here: it costs 3.3 MB and 40 ms)."""

    def __init__(self, elf: Path):
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile

        try:
            with elf.open("rb") as stream:
                elf_file = ELFFile(stream)
                self.dwarf = elf_file.get_dwarf_info(relocate_dwarf_sections=elf_file["e_type"] != "ET_EXEC") \
                    if elf_file.has_dwarf_info() else None
        except ELFError as exc:
            raise AnalysisError(f"{elf}: cannot read the ELF: {exc}") from None
        self.discarded_at_zero = not _function_at_zero(elfread.ElfFile(elf))
        self.units = [cu.cu_offset for cu in self.dwarf.iter_CUs()] if self.dwarf is not None else []
        aranges = self.dwarf.get_aranges() if self.dwarf is not None else None
        self.aranges = [(entry.begin_addr, entry.length, entry.info_offset) for entry in aranges.entries] \
            if aranges is not None else None

    def rows(self, offset: int) -> list[tuple[int, int, str, int]]:
        program = self.dwarf.line_program_for_CU(self.dwarf.get_CU_at(offset))
        if program is None:
            return []
        light = _line_program_of(program)
        states = _line_states(light)
        if states is None:
            states = [(entry.state.address, entry.state.file, entry.state.line, entry.state.end_sequence)
                      for entry in program.get_entries() if entry.state is not None]
        return _unit_rows(light.version, light.file_names, states, self.discarded_at_zero)


def _line_program_of(program) -> elfread.LineProgram:
    """A pyelftools line program as ``wcet.elfread`` gives one (its header's fields and its opcodes)."""
    header = program.header
    program.stream.seek(program.program_start_offset)
    return elfread.LineProgram(
        header["version"], [entry.name for entry in program["file_entry"]], header["minimum_instruction_length"],
        header.get("maximum_operations_per_instruction", 1), header["line_base"], header["line_range"],
        header["opcode_base"], program.stream.read(program.program_end_offset - program.program_start_offset),
        program.structs.address_size, program.structs.little_endian)


def _unit_rows(version: int, file_names: list[bytes], states: list[tuple[int, int, int, bool]],
               discarded_at_zero: bool) -> list[tuple[int, int, str, int]]:
    """The line rows of one compilation unit from its line program's ``states`` (without the sequences starting
    at 0 when ``discarded_at_zero``)."""
    base = 0 if version >= 5 else 1
    names = [PurePosixPath(name.decode(errors="replace")).name for name in file_names]
    rows = []
    previous = None  # (address, file, line) of the last row of the sequence
    discarded = False  # the current sequence starts at 0 and is a discarded function's
    for address, file, line, end in states:
        if previous is None:
            discarded = discarded_at_zero and address == 0
        elif address > previous[0] and not discarded:
            index = previous[1] - base
            rows.append((previous[0], address, names[index] if 0 <= index < len(names) else "", previous[2]))
        previous = None if end else (address, file, line)
    return rows


def _line_states(program: elfread.LineProgram) -> list[tuple[int, int, int, bool]] | None:
    """(address, file, line, end of sequence) of every row of a DWARF line program, in order; None for a
    program using what this decoder leaves out (VLIW operation indexes, ``DW_LNE_define_file``, opcodes
    unknown to DWARF 5), which pyelftools then decodes.

    The program's opcodes are decoded here (DWARF 5 section 6.2.5) rather than
    by pyelftools, which takes about 30 us a row: a V3 unit has one row per
    statement, hundreds of thousands.
    """
    if program.maximum_operations_per_instruction != 1:
        return None
    code = program.code
    order = "little" if program.little_endian else "big"
    width = program.address_size
    opcode_base, line_base, line_range = program.opcode_base, program.line_base, program.line_range
    step = program.minimum_instruction_length
    states: list[tuple[int, int, int, bool]] = []
    address, file, line = 0, 1, 1
    at, size = 0, len(code)

    def leb128(signed: bool = False) -> int:
        """The LEB128 number at ``at`` (unsigned, or signed), ``at`` moved past it."""
        nonlocal at
        value, at = (elfread.sleb if signed else elfread.uleb)(code, at)
        return value

    while at < size:
        opcode = code[at]
        at += 1
        if opcode >= opcode_base:
            adjusted = opcode - opcode_base
            address += (adjusted // line_range) * step
            line += line_base + adjusted % line_range
            states.append((address, file, line, False))
        elif opcode == 0:  # extended
            length = leb128()
            sub, following = code[at], at + length
            if sub == 1:  # DW_LNE_end_sequence
                states.append((address, file, line, True))
                address, file, line = 0, 1, 1
            elif sub == 2:  # DW_LNE_set_address
                address = int.from_bytes(code[at + 1:at + 1 + width], order)
            elif sub == 3:  # DW_LNE_define_file: changes the file names
                return None
            at = following  # DW_LNE_set_discriminator and unknown ones: skipped by their length
        elif opcode == 1:  # DW_LNS_copy
            states.append((address, file, line, False))
        elif opcode == 2:  # DW_LNS_advance_pc
            address += leb128() * step
        elif opcode == 3:  # DW_LNS_advance_line (signed)
            line += leb128(signed=True)
        elif opcode == 4:  # DW_LNS_set_file
            file = leb128()
        elif opcode == 8:  # DW_LNS_const_add_pc
            address += ((255 - opcode_base) // line_range) * step
        elif opcode == 9:  # DW_LNS_fixed_advance_pc
            address += int.from_bytes(code[at:at + 2], order)
            at += 2
        elif opcode in (5, 12):  # DW_LNS_set_column, DW_LNS_set_isa
            leb128()
        elif opcode in (6, 7, 10, 11):  # negate_stmt, set_basic_block, set_prologue_end, set_epilogue_begin
            pass
        else:
            return None
    return states


class _LineTable:
    """The DWARF line table of an ELF, read one compilation unit at a time as addresses are asked for.

    Decoding every unit's line program (a picolibc/libgcc image has about a
    hundred) costs far more than the analysis of a small function, and only
    the units holding loop headers are ever asked about. ``.debug_aranges``
    says which unit covers an address; units it does not list are read at
    once, and without ``.debug_aranges`` the whole table is, so ``line`` gives
    what a lookup in the whole of ``line_table`` gives.
    """

    def __init__(self, elf: Path):
        self.rows: list[tuple[int, int, str, int]] = []
        self.starts: list[int] = []
        self.pending: list[tuple[int, int, int]] = []  # (start, end, unit offset) of units not read yet
        self.dwarf = _line_source(Path(elf))
        if self.dwarf is None:
            return
        aranges = self.dwarf.aranges
        if aranges is not None:
            self.pending = sorted((start, start + length, unit) for start, length, unit in aranges
                                  if length and not (self.dwarf.discarded_at_zero and start == 0))
        listed = {unit for _, _, unit in aranges} if aranges is not None else set()
        for unit in self.dwarf.units:
            if unit not in listed:
                self.rows += self.dwarf.rows(unit)
        self._sort()

    def line(self, address: int) -> tuple[str, int] | None:
        self._read({unit for start, end, unit in self.pending if start <= address < end})
        index = bisect.bisect_right(self.starts, address) - 1
        if index >= 0 and self.rows[index][0] <= address < self.rows[index][1]:
            return self.rows[index][2], self.rows[index][3]
        return None

    def _read(self, units: set[int]) -> None:
        """Read the rows of the compilation units at the given offsets."""
        if units:
            for unit in sorted(units):
                self.rows += self.dwarf.rows(unit)
            self.pending = [entry for entry in self.pending if entry[2] not in units]
            self._sort()

    def rows_of(self, file_names: set[str], within: list[tuple[int, int]]) -> list[tuple[int, int, str, int]]:
        """The rows of the given source files that overlap the address ranges ``within`` (the units whose
        ranges do read)."""
        merged: list[list[int]] = []  # ``within`` as disjoint sorted ranges: one search per row
        for low, high in sorted(within):
            if merged and low <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], high)
            else:
                merged.append([low, high])
        lows = [low for low, _ in merged]

        def overlaps(start: int, end: int) -> bool:
            index = bisect.bisect_left(lows, end) - 1  # the last range starting before ``end``
            return index >= 0 and start < merged[index][1]

        self._read({unit for start, end, unit in self.pending if overlaps(start, end)})
        return [row for row in self.rows if row[2] in file_names and overlaps(row[0], row[1])]

    def _sort(self) -> None:
        self.rows.sort()
        self.starts = [row[0] for row in self.rows]


def layer_ranges(code: ArmCode, manifest: dict, entry: str,
                 spans: list[tuple[str, int, int, int]] | None = None) -> list[AddressRange]:
    """Non-overlapping ranges covering the generated functions, tagged by layer.

    The generated functions are the manifest's ``symbols.code`` (or the entry
    alone for a small manifest). An address whose DWARF line falls in a layer's
    ``lines`` span of that layer's ``file`` belongs to that layer (bucket
    1 + index); any other address of those functions to ``OUTSIDE_LAYERS``.
    ``spans`` (file, first line, last line, bucket) replaces the layers' spans
    (the first span holding a line wins), e.g. per operator of parallel code.
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
    if spans is None:
        spans = [(PurePosixPath(layer["file"]).name, int(layer["lines"][0]), int(layer["lines"][1]), i + 1)
                 for i, layer in enumerate(layers)]
    rows = code.line_rows({file for file, _, _, _ in spans}, [(f.start, f.end) for f in functions]) if spans else []

    def bucket(file: str, line: int) -> int:
        for span_file, first, last, number in spans:
            if file == span_file and first <= line <= last:
                return number
        return OUTSIDE_LAYERS

    ranges: list[AddressRange] = []
    reach = list(itertools.accumulate((end for _, end, _, _ in rows), max))  # the furthest end so far
    for function in functions:
        position = function.start
        first = bisect.bisect_right(reach, function.start)  # rows before it end before the function
        for index in range(first, len(rows)):
            start, end, file, line = rows[index]
            if start >= function.end:
                break
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
