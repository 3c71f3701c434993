"""What the WCET analysis reads of a 32-bit ELF and its DWARF line table, with ``struct``.

pyelftools parses with ``construct`` and imports its DWARF, EH-ABI and
debugger (``pdb``) modules on ``import elftools.elf.elffile``: 5.4 MB of
resident memory over ``python -c pass``, and 3.5 MB of the 25.5 MB a bound of
acas-reg50 took with it. Bounding one ELF (``python -m wcet``) needs only the
section headers, the symbols, two attributes (``.ARM.attributes``,
``.comment``) and, per compilation unit asked about, where its line program is
(``DW_AT_stmt_list``) and its header: this module reads those, from the file,
section by section (docs/benchmarks.md, issue 45).

``ElfFile(path)``: ``sections`` (``Section``), ``section(name)``, ``data``,
``symbols()``, ``is_m_profile()`` and ``kept(name)`` (a section's contents,
read once). ``units(elf)``: the compilation units' headers (``Unit``);
``stmt_list(elf, unit)``: where a unit's line program is; ``aranges(elf)``:
``.debug_aranges``; ``line_program(elf, unit, offset)``: a line program's
header and opcodes (``LineProgram``). What this reader leaves
out (a DIE form it does not know, a line program header it cannot read)
raises ``Unsupported``, and ``wcet.armcode`` then reads that unit with
pyelftools, as before; ``tests/wcet/test_elfread.py`` compares every answer
with pyelftools'.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path

SHT_SYMTAB, SHT_DYNSYM, SHT_NOBITS, SHT_ARM_ATTRIBUTES = 2, 11, 8, 0x70000003
EM_ARM, ET_EXEC = 40, 2
_DW_AT_STMT_LIST, _DW_FORM_INDIRECT, _DW_FORM_IMPLICIT_CONST = 0x10, 0x16, 0x21


class ElfFormatError(ValueError):
    """Not a 32-bit ELF, or one whose headers point outside the file."""


class Unsupported(ValueError):
    """DWARF this reader does not decode (pyelftools does)."""


class Section(namedtuple("Section", "name type flags address offset size link")):
    __slots__ = ()


class ElfFile:
    """The header, section headers and on-demand section contents of a 32-bit ELF."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with self.path.open("rb") as stream:
            header = stream.read(52)
            if len(header) < 52 or header[:4] != b"\x7fELF" or header[5] not in (1, 2):
                raise ElfFormatError("not an ELF file")
            if header[4] != 1:
                machine = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
                raise ElfFormatError(f"a 64-bit ELF (e_machine {machine}), not a 32-bit one")
            self.little_endian = header[5] == 1
            self.order = "<" if self.little_endian else ">"
            self.type, self.machine = struct.unpack_from(self.order + "HH", header, 16)
            (shoff,) = struct.unpack_from(self.order + "I", header, 0x20)
            entry_size, count, names_index = struct.unpack_from(self.order + "HHH", header, 0x2E)
            stream.seek(shoff)
            table = stream.read(entry_size * count)
            if count and (entry_size < 40 or len(table) < entry_size * count):
                raise ElfFormatError("truncated section header table")
            raw = [struct.unpack_from(self.order + "IIIIIII", table, n * entry_size) for n in range(count)]
            names = b""
            if names_index < count:
                stream.seek(raw[names_index][4])
                names = stream.read(raw[names_index][5])
        self.sections = [Section(_string(names, name), kind, flags, address, offset, size, link)
                         for name, kind, flags, address, offset, size, link in raw]
        self._kept: dict[str, bytes] = {}  # the string sections a line program header names files in

    def kept(self, name: str) -> bytes:
        """The contents of the section ``name`` (empty if none), read once."""
        if name not in self._kept:
            section = self.section(name)
            self._kept[name] = self.data(section) if section is not None else b""
        return self._kept[name]

    def section(self, name: str) -> Section | None:
        return next((section for section in self.sections if section.name == name), None)

    def data(self, section: Section) -> bytes:
        if section.type == SHT_NOBITS:
            return b""
        with self.path.open("rb") as stream:
            stream.seek(section.offset)
            data = stream.read(section.size)
        if len(data) != section.size:
            raise ElfFormatError(f"section {section.name} runs past the end of the file")
        return data

    def symbols(self, name: str | None = None) -> Iterator[tuple[str, int, int, int, int]]:
        """(name, value, size, info, section index) of every symbol of every symbol table (of the one called
        ``name`` if given)."""
        for section in self.sections:
            if section.type in (SHT_SYMTAB, SHT_DYNSYM) and name in (None, section.name):
                strings = self.data(self.sections[section.link]) if section.link < len(self.sections) else b""
                data = self.data(section)
                for name_at, value, size, info, _, shndx in struct.iter_unpack(
                        self.order + "IIIBBH", data[:len(data) - len(data) % 16]):
                    yield _string(strings, name_at), value, size, info, shndx

    def is_m_profile(self) -> bool:
        """True if the ARM build attributes say Tag_CPU_arch_profile = 'M' (ARM IHI 0045, "Build attributes":
        a format byte 'A', then vendor subsections, each of tagged sub-subsections of attributes)."""
        section = next((s for s in self.sections if s.type == SHT_ARM_ATTRIBUTES), None)
        if section is None:
            return False
        data = self.data(section)
        if data[:1] != b"A":
            return False
        at = 1
        while at + 4 <= len(data):
            (length,) = struct.unpack_from(self.order + "I", data, at)
            if length < 4:
                return False
            end, at = at + length, data.index(b"\0", at + 4) + 1  # the vendor name
            while at < end:
                start = at
                tag, at = uleb(data, at)
                (size,) = struct.unpack_from(self.order + "I", data, at)
                if size < 4:
                    return False
                if tag == 1:  # Tag_File: the attributes of the whole file
                    profile = _file_attribute(data, at + 4, start + size, 7)  # Tag_CPU_arch_profile
                    if profile is not None:
                        return profile == ord("M")
                at = start + size
            at = end
        return False


def _file_attribute(data: bytes, at: int, stop: int, wanted: int) -> int | None:
    """The integer value of attribute ``wanted`` in one Tag_File sub-subsection, None if absent. Tags 4, 5, 67
    and odd tags above 32 are strings; Tag_compatibility (32) is an integer then a string; others integers."""
    while at < stop:
        tag, at = uleb(data, at)
        if tag in (4, 5, 67) or (tag > 32 and tag % 2):
            at = data.index(b"\0", at) + 1
            continue
        value, at = uleb(data, at)
        if tag == 32:
            at = data.index(b"\0", at) + 1
        if tag == wanted:
            return value
    return None


def _string(table: bytes, at: int) -> str:
    end = table.find(b"\0", at)
    return table[at:end if end >= 0 else len(table)].decode(errors="replace")


def uleb(data: bytes, at: int) -> tuple[int, int]:
    """The unsigned LEB128 number at ``at`` of ``data`` and the offset after it (DWARF 5, 7.6)."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def sleb(data: bytes, at: int) -> tuple[int, int]:
    """The signed LEB128 number at ``at`` of ``data`` (sign: the top bit of its last group) and the offset after it."""
    value, end = uleb(data, at)
    bits = 7 * (end - at)
    return (value - (1 << bits) if value >> (bits - 1) & 1 else value), end


# ---------------------------------------------------------------------------- DWARF (DWARF 5, chapters 6-7)


class Unit(namedtuple("Unit", [
    "offset",  # in .debug_info
    "version",
    "address_size",
    "offset_size",  # 4 (32-bit DWARF) or 8
    "die",  # where its first DIE is in .debug_info
    "abbrev_offset",  # its abbreviation table in .debug_abbrev
])):
    __slots__ = ()


class LineProgram(namedtuple("LineProgram", [
    "version",
    "file_names",  # list[bytes]
    "minimum_instruction_length",
    "maximum_operations_per_instruction",
    "line_base",
    "line_range",
    "opcode_base",
    "code",  # bytes: the opcodes after the header
    "address_size",
    "little_endian",
])):
    __slots__ = ()


def _initial_length(data: bytes, at: int, order: str) -> tuple[int, int, int]:
    """(length, offset size 4 or 8, where the unit's content starts) of a DWARF initial length field."""
    (length,) = struct.unpack_from(order + "I", data, at)
    if length == 0xFFFFFFFF:
        return struct.unpack_from(order + "Q", data, at + 4)[0], 8, at + 12
    return length, 4, at + 4


def _fixed_form_sizes(address_size: int, offset_size: int, version: int) -> dict[int, int]:
    """Sizes of the attribute forms whose values have a fixed size (DWARF 5 section 7.5.6)."""
    return {0x01: address_size, 0x05: 2, 0x06: 4, 0x07: 8, 0x0b: 1, 0x0c: 1, 0x0e: offset_size,
            0x10: address_size if version == 2 else offset_size, 0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8, 0x17: offset_size,
            0x19: 0, 0x1c: 4, 0x1d: offset_size, 0x1e: 16, 0x1f: offset_size, 0x20: 8, 0x21: 0, 0x24: 8, 0x25: 1,
            0x26: 2, 0x27: 3, 0x28: 4, 0x29: 1, 0x2a: 2, 0x2b: 3, 0x2c: 4, 0x1f20: offset_size, 0x1f21: offset_size}


_LEB_FORMS = {0x0d, 0x0f, 0x15, 0x1a, 0x1b, 0x22, 0x23, 0x1f01, 0x1f02}  # sdata, udata, ref_udata, *x
_BLOCK_FORMS = {0x03: 2, 0x04: 4, 0x0a: 1}  # block2, block4, block1: length field size


def _skip_form(data: bytes, at: int, form: int, sizes: dict[int, int], order: str) -> int:
    """Where the value of ``form`` at ``at`` ends."""
    if form in sizes:
        return at + sizes[form]
    if form in _LEB_FORMS:
        return uleb(data, at)[1]
    if form == 0x08:  # string
        return data.index(b"\0", at) + 1
    if form in (0x09, 0x18):  # block, exprloc
        length, at = uleb(data, at)
        return at + length
    if form in _BLOCK_FORMS:
        width = _BLOCK_FORMS[form]
        return at + width + int.from_bytes(data[at:at + width], "little" if order == "<" else "big")
    raise Unsupported(f"DWARF attribute form {form:#x}")


def _form_value(data: bytes, at: int, form: int, sizes: dict[int, int], order: str) -> int:
    """The unsigned value of a constant or section-offset form at ``at``."""
    if form in (0x0f, 0x15):
        return uleb(data, at)[0]
    if form in (0x05, 0x06, 0x07, 0x0b, 0x17):
        return int.from_bytes(data[at:at + sizes[form]], "little" if order == "<" else "big")
    raise Unsupported(f"DW_AT_stmt_list in form {form:#x}")


def units(elf: ElfFile) -> list[Unit]:
    """The headers of the compilation units of ``.debug_info`` (empty without it)."""
    info = elf.kept(".debug_info")
    order, found, at = elf.order, [], 0
    while at < len(info):
        length, offset_size, content = _initial_length(info, at, order)
        (version,) = struct.unpack_from(order + "H", info, content)
        if version >= 5:
            unit_type, address_size = info[content + 2], info[content + 3]
            abbrev_offset = int.from_bytes(info[content + 4:content + 4 + offset_size], "little" if order == "<"
                                           else "big")
            die = content + 4 + offset_size + {4: 8, 5: 8, 2: 8 + offset_size, 6: 8 + offset_size}.get(unit_type, 0)
        elif version >= 2:
            abbrev_offset = int.from_bytes(info[content + 2:content + 2 + offset_size], "little" if order == "<"
                                           else "big")
            address_size, die = info[content + 2 + offset_size], content + 3 + offset_size
        else:
            raise Unsupported(f"DWARF version {version}")
        found.append(Unit(at, version, address_size, offset_size, die, abbrev_offset))
        at = content + length
    return found


def stmt_list(elf: ElfFile, unit: Unit) -> int | None:
    """Where ``unit``'s line program is in ``.debug_line``: its first DIE's ``DW_AT_stmt_list`` (None if it has
    none)."""
    info, order = elf.kept(".debug_info"), elf.order
    sizes = _fixed_form_sizes(unit.address_size, unit.offset_size, unit.version)
    code, at = uleb(info, unit.die)
    if code == 0:
        return None
    for attribute, form in _abbreviation(elf.kept(".debug_abbrev"), unit.abbrev_offset, code):
        while form == _DW_FORM_INDIRECT:
            form, at = uleb(info, at)
        if attribute == _DW_AT_STMT_LIST:
            return _form_value(info, at, form, sizes, order)
        at = _skip_form(info, at, form, sizes, order)
    return None


def _abbreviation(abbrevs: bytes, at: int, wanted: int) -> list[tuple[int, int]]:
    """The (attribute, form) pairs of abbreviation ``wanted`` of the table at ``at``."""
    while True:
        code, at = uleb(abbrevs, at)
        if code == 0:
            raise Unsupported(f"no abbreviation {wanted}")
        _, at = uleb(abbrevs, at)  # the tag
        at += 1  # has children
        pairs = []
        while True:
            attribute, at = uleb(abbrevs, at)
            form, at = uleb(abbrevs, at)
            if attribute == 0 and form == 0:
                break
            if form == _DW_FORM_IMPLICIT_CONST:
                _, at = sleb(abbrevs, at)
            pairs.append((attribute, form))
        if code == wanted:
            return pairs


def aranges(elf: ElfFile) -> list[tuple[int, int, int]] | None:
    """(start, length, unit offset) of every entry of ``.debug_aranges`` but the terminators, by start; None
    without the section."""
    section = elf.section(".debug_aranges")
    if section is None:
        return None
    data, order, entries, at = elf.data(section), elf.order, [], 0
    while at < len(data):
        length, offset_size, content = _initial_length(data, at, order)
        unit_offset = int.from_bytes(data[content + 2:content + 2 + offset_size], "little" if order == "<" else "big")
        address_size, segment_size = data[content + 2 + offset_size], data[content + 3 + offset_size]
        if address_size not in (4, 8) or segment_size:
            raise Unsupported(f"address ranges with {address_size}-byte addresses, {segment_size}-byte segments")
        pair = 2 * address_size
        tuples = content + 4 + offset_size
        tuples += -(tuples - at) % pair  # the first tuple is aligned to twice the address size from the unit's start
        form = order + ("II" if address_size == 4 else "QQ")
        end = content + length
        while tuples + pair <= end:
            start, size = struct.unpack_from(form, data, tuples)
            tuples += pair
            if start == 0 and size == 0:
                break
            entries.append((start, size, unit_offset))
        at = end
    entries.sort(key=lambda entry: entry[0])  # by start, as pyelftools gives them
    return entries


def line_program(elf: ElfFile, unit: Unit, at: int) -> LineProgram:
    """The header and opcodes of ``unit``'s line program, at ``at`` in ``.debug_line`` (``stmt_list``)."""
    order, line_data = elf.order, elf.kept(".debug_line")
    length, offset_size, content = _initial_length(line_data, at, order)
    end = content + length
    (version,) = struct.unpack_from(order + "H", line_data, content)
    at = content + 2
    address_size = unit.address_size
    if version >= 5:
        address_size, at = line_data[at], at + 2  # and the segment selector size
    elif version < 2:
        raise Unsupported(f"line program version {version}")
    header_length = int.from_bytes(line_data[at:at + offset_size], "little" if order == "<" else "big")
    at += offset_size
    program_start = at + header_length
    minimum, at = line_data[at], at + 1
    maximum = 1
    if version >= 4:
        maximum, at = line_data[at], at + 1
    at += 1  # default_is_stmt
    line_base = struct.unpack_from("b", line_data, at)[0]
    line_range, opcode_base = line_data[at + 1], line_data[at + 2]
    at += 3 + opcode_base - 1  # the standard opcodes' lengths
    if version >= 5:
        sizes = _fixed_form_sizes(address_size, offset_size, version)
        _, at = _entries(elf, line_data, at, sizes)  # the directories
        names, at = _entries(elf, line_data, at, sizes)
    else:
        while line_data[at]:  # include_directories
            at = line_data.index(b"\0", at) + 1
        at += 1
        names = []
        while line_data[at]:
            end_of_name = line_data.index(b"\0", at)
            names.append(line_data[at:end_of_name])
            at = end_of_name + 1
            for _ in range(3):  # directory index, modification time, length
                _, at = uleb(line_data, at)
    return LineProgram(version, names, minimum, maximum, line_base, line_range, opcode_base,
                       line_data[program_start:end], address_size, elf.little_endian)


def _entries(elf: ElfFile, data: bytes, at: int, sizes: dict[int, int]) -> tuple[list[bytes], int]:
    """The paths (DW_LNCT_path) of a DWARF 5 directory or file name table at ``at``, and where it ends."""
    count, at = data[at], at + 1
    formats = []
    for _ in range(count):
        content, at = uleb(data, at)
        form, at = uleb(data, at)
        formats.append((content, form))
    entries, at = uleb(data, at)
    paths = []
    for _ in range(entries):
        path = b""
        for content, form in formats:
            if content == 1:  # DW_LNCT_path
                path = _path(elf, data, at, form, sizes[0x17])
            at = _skip_form(data, at, form, sizes, elf.order)
        paths.append(path)
    return paths, at


def _path(elf: ElfFile, data: bytes, at: int, form: int, offset_size: int) -> bytes:
    if form == 0x08:  # string
        return data[at:data.index(b"\0", at)]
    if form in (0x1f, 0x0e):  # line_strp, strp
        strings = elf.kept(".debug_line_str" if form == 0x1f else ".debug_str")
        offset = int.from_bytes(data[at:at + offset_size], "little" if elf.little_endian else "big")
        if offset >= len(strings):
            raise Unsupported("a file name outside its string section")
        return strings[offset:strings.index(b"\0", offset)]
    raise Unsupported(f"file name in form {form:#x}")
