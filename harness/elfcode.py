"""The code of an ARM ELF as the measurement and timing stages need it.

- ``ArmCode.decode(address)``: the capstone instruction at an address, decoded
  in ARM or Thumb state as the ELF's mapping symbols (``$a``, ``$t``, ``$d``,
  ARM ELF ABI 5.5.5) say. Code is disassembled one mapping-symbol span at a time
  from its start, so capstone sees Thumb ``IT`` blocks and gives the
  instructions inside them their condition.
- ``ArmCode.function(name)``: a function symbol's address range.
- ``layer_ranges(code, manifest)``: address ranges of the generated functions,
  each tagged with the manifest layer whose source lines (``layers[*].lines``)
  the DWARF line table gives for it.

Nothing here runs code; it reads the ELF that the QEMU runner built (``-g``).
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import capstone
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from harness.errors import ConfigError

OUTSIDE_LAYERS = 0  # bucket of generated code that no layer's line span covers (prologue, epilogue)


@dataclass(frozen=True)
class Function:
    name: str
    start: int  # without the Thumb bit
    end: int
    thumb: bool


@dataclass(frozen=True)
class AddressRange:
    start: int
    end: int  # exclusive
    bucket: int  # OUTSIDE_LAYERS, or 1 + the layer's index in the manifest


class ArmCode:
    """Symbols, mapping symbols and decoded instructions of one ARM ELF.

    ``mclass`` (M-profile: Thumb only, capstone's MCLASS mode) is read from the
    ELF's build attributes (``Tag_CPU_arch_profile`` 'M') unless given.
    """

    def __init__(self, elf: Path, mclass: bool | None = None):
        self.path = Path(elf)
        self.functions: dict[str, Function] = {}
        mapping: list[tuple[int, str]] = []
        self._sections: list[tuple[int, bytes]] = []  # (address, contents) of executable sections
        with self.path.open("rb") as stream:
            elf_file = ELFFile(stream)
            self.mclass = _is_m_profile(elf_file) if mclass is None else mclass
            for section in elf_file.iter_sections():
                if section["sh_flags"] & 0x4 and section["sh_type"] == "SHT_PROGBITS":  # SHF_EXECINSTR
                    self._sections.append((section["sh_addr"], section.data()))
            for section in elf_file.iter_sections():
                if not isinstance(section, SymbolTableSection):
                    continue
                for symbol in section.iter_symbols():
                    name, value = symbol.name, symbol["st_value"]
                    if name in ("$a", "$t", "$d") or name.startswith(("$a.", "$t.", "$d.")):
                        mapping.append((value, name[1]))
                    elif symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_shndx"] != "SHN_UNDEF":
                        start = value & ~1
                        self.functions.setdefault(name, Function(name, start, start + symbol["st_size"],
                                                                 bool(value & 1) or self.mclass))
        self._sections.sort()
        mapping.sort()
        self._map_addresses = [address for address, _ in mapping]
        self._map_kinds = [kind for _, kind in mapping]
        self._decoded: dict[int, capstone.CsInsn] = {}
        self._spans_done: set[int] = set()

    def function(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            raise ConfigError(f"{self.path}: no function '{name}'") from None

    def decode(self, address: int) -> capstone.CsInsn:
        """The instruction at ``address`` (capstone, with details)."""
        insn = self._decoded.get(address)
        if insn is None:
            self._decode_span(address)
            insn = self._decoded.get(address)
            if insn is None:
                raise ConfigError(f"{self.path}: no instruction decodes at {address:#x}")
        return insn

    def _span(self, address: int) -> tuple[int, int, str]:
        """The mapping-symbol span holding ``address``: (start, end, 'a' or 't')."""
        index = bisect.bisect_right(self._map_addresses, address) - 1
        section_start, section_end = self._section_bounds(address)
        if index < 0 or self._map_addresses[index] < section_start:
            # No mapping symbol: Cortex-M code is all Thumb; otherwise assume ARM.
            return section_start, section_end, "t" if self.mclass else "a"
        start, kind = self._map_addresses[index], self._map_kinds[index]
        end = self._map_addresses[index + 1] if index + 1 < len(self._map_addresses) else section_end
        if kind == "d":
            raise ConfigError(f"{self.path}: {address:#x} is data ($d), not code")
        return start, min(end, section_end), kind

    def _section_bounds(self, address: int) -> tuple[int, int]:
        for start, data in self._sections:
            if start <= address < start + len(data):
                return start, start + len(data)
        raise ConfigError(f"{self.path}: {address:#x} is in no executable section")

    def _section_bytes(self, start: int, end: int) -> bytes:
        for section_start, data in self._sections:
            if section_start <= start < section_start + len(data):
                return data[start - section_start:end - section_start]
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


def line_rows(elf: Path, file_names: set[str]) -> list[tuple[int, int, str, int]]:
    """(start, end, file base name, line) rows of the DWARF line table for the given source files."""
    rows = []
    with Path(elf).open("rb") as stream:
        elf_file = ELFFile(stream)
        if not elf_file.has_dwarf_info():
            raise ConfigError(f"{elf}: no DWARF information (build with -g)")
        dwarf = elf_file.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            program = dwarf.line_program_for_CU(cu)
            if program is None:
                continue
            entries = program["file_entry"]
            base = 0 if program.header["version"] >= 5 else 1
            names = [PurePosixPath(entry.name.decode(errors="replace")).name for entry in entries]
            if not set(names) & file_names:
                continue
            previous = None
            for entry in program.get_entries():
                state = entry.state
                if state is None:
                    continue
                if previous is not None and state.address > previous.address:
                    index = previous.file - base
                    name = names[index] if 0 <= index < len(names) else ""
                    if name in file_names:
                        rows.append((previous.address, state.address, name, previous.line))
                previous = None if state.end_sequence else state
    rows.sort()
    return rows


def layer_ranges(code: ArmCode, manifest: dict, entry: str) -> list[AddressRange]:
    """Non-overlapping ranges covering the generated functions, tagged by layer.

    The generated functions are the manifest's ``symbols.code`` (or the entry
    alone for a small manifest). An address whose DWARF line falls in a layer's
    ``lines`` span of that layer's ``file`` belongs to that layer (bucket
    1 + index); any other address of those functions to ``OUTSIDE_LAYERS``.
    """
    names = list(dict.fromkeys([entry, *manifest.get("symbols", {}).get("code", [])]))
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
        raise ConfigError(f"overlapping generated functions at {new.start:#x}")
    else:
        ranges.append(new)
