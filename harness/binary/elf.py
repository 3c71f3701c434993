"""Read a linked ELF into plain data: sections, symbols, ARM mapping symbols, and
the sizes of ``.text``, ``.rodata``, ``.data`` and ``.bss`` for the whole image
or for a list of symbols (docs/memory.md).

Every allocated byte of the image falls in one *kind*:

- ``text``: code. Executable sections, except the constants a linker script
  places in them (picolibc's ``picolibc.ld`` puts ``.rodata`` inside ``.text``):
  bytes outside every function symbol that an ARM ``$d`` mapping symbol marks
  as data count as ``rodata``. Literal pools inside a function stay ``text``.
- ``rodata``: read-only data with contents (``.rodata``, ``.ARM.exidx``,
  ``.eh_frame``), and writable sections placed in flash (the Cortex-M vector
  table in picolibc's ``.init``), which are constants at run time.
- ``data``: writable sections with contents (``.data``, ``.init_array``, ...):
  their initial values take flash and their space takes RAM.
- ``bss``: writable sections without contents (``.bss``, ``.noinit``,
  picolibc's ``.tbss_space``), zeroed at start-up.
- ``reserved``: space a linker script reserves for the stack or the heap
  (``.stack``, ``.heap``), not data of the program.

``.tbss`` (thread-local, its space is reserved by another section) and
sections that are not loaded (debug information, symbol tables) count nowhere.
"""

from __future__ import annotations

import bisect
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from harness.errors import AssayError

KINDS = ("text", "rodata", "data", "bss")
RESERVED = "reserved"
RESERVED_SECTIONS = frozenset({".stack", ".heap", "._user_heap_stack"})
MAPPING = {"$a": "a", "$t": "t", "$d": "d"}  # ARM ELF mapping symbols: ARM code, Thumb code, data


@dataclass(frozen=True)
class Section:
    name: str
    address: int
    size: int
    kind: str | None  # one of KINDS, RESERVED, or None (not counted)
    executable: bool
    index: int


@dataclass(frozen=True)
class Symbol:
    name: str
    address: int  # the Thumb bit of a function's value is cleared; see ``thumb``
    size: int
    type: str  # "FUNC", "OBJECT", "NOTYPE", ...
    binding: str  # "GLOBAL", "LOCAL", "WEAK"
    section: str | None  # None: absolute, common or undefined
    thumb: bool = False

    @property
    def end(self) -> int:
        return self.address + self.size


@dataclass
class ElfImage:
    """What the memory analysis needs from one ELF, read once."""

    path: Path
    machine: str  # "EM_ARM", "EM_X86_64", ...
    sections: list[Section]
    symbols: list[Symbol]
    mapping: list[tuple[int, str]]  # sorted (address, "a"|"t"|"d") ARM mapping symbols
    code: dict[str, bytes] = field(repr=False)  # contents of executable sections by name

    @property
    def is_arm(self) -> bool:
        return self.machine == "EM_ARM"

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def symbols_named(self, name: str) -> list[Symbol]:
        return [s for s in self.symbols if s.name == name]

    def functions(self) -> list[Symbol]:
        """Function symbols in executable sections, sorted by address (aliases kept)."""
        return sorted((s for s in self.symbols if s.type == "FUNC" and s.section is not None),
                      key=lambda s: (s.address, s.name))

    def mode_at(self, address: int) -> str | None:
        """"a", "t" or "d" from the last mapping symbol at or before ``address`` (None: none before)."""
        index = bisect.bisect_right(self.mapping, (address, "~")) - 1
        return self.mapping[index][1] if index >= 0 else None

    def mapping_in(self, start: int, end: int) -> list[tuple[int, str]]:
        """Mapping symbols in [start, end), plus the one in force at ``start``."""
        first = bisect.bisect_right(self.mapping, (start, "~")) - 1
        result = [(start, self.mapping[first][1])] if first >= 0 else []
        for address, kind in self.mapping[first + 1:]:
            if address >= end:
                break
            result.append((address, kind))
        return result

    def read(self, address: int, size: int) -> bytes:
        """Bytes of executable sections at [address, address + size)."""
        for section in self.sections:
            if section.executable and section.address <= address < section.address + section.size:
                offset = address - section.address
                return self.code[section.name][offset:offset + size]
        return b""


def read(path: Path) -> ElfImage:
    """Load ``path``; an unreadable or non-ELF file is an AssayError naming it."""
    path = Path(path)
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            sections, code = _sections(elf)
            symbols, mapping = _symbols(elf, sections)
            machine = elf["e_machine"]
    except (OSError, ELFError) as exc:
        raise AssayError(f"{path}: cannot read ELF: {exc}") from None
    return ElfImage(path=path, machine=machine, sections=sections, symbols=symbols, mapping=sorted(mapping),
                    code=code)


def _sections(elf: ELFFile) -> tuple[list[Section], dict[str, bytes]]:
    sections, code = [], {}
    for index, raw in enumerate(elf.iter_sections()):
        flags = raw["sh_flags"]
        executable = bool(flags & SH_FLAGS.SHF_EXECINSTR and flags & SH_FLAGS.SHF_ALLOC)
        sections.append(Section(name=raw.name, address=raw["sh_addr"], size=raw["sh_size"],
                                kind=_kind(raw.name, raw["sh_type"], flags), executable=executable, index=index))
        if executable and raw["sh_type"] != "SHT_NOBITS":
            code[raw.name] = raw.data()
    return sections, code


def _kind(name: str, sh_type: str, flags: int) -> str | None:
    """The kind of a whole section by its flags (executable sections are split later, by symbols)."""
    if not flags & SH_FLAGS.SHF_ALLOC:
        return None
    nobits = sh_type == "SHT_NOBITS"
    if nobits and flags & SH_FLAGS.SHF_TLS:
        return None  # .tbss: its space is reserved by another section (picolibc's .tbss_space)
    if name in RESERVED_SECTIONS:
        return RESERVED
    if flags & SH_FLAGS.SHF_EXECINSTR:
        return "text"
    if nobits:
        return "bss"
    return "data" if flags & SH_FLAGS.SHF_WRITE else "rodata"


def _symbols(elf: ELFFile, sections: list[Section]) -> tuple[list[Symbol], list[tuple[int, str]]]:
    table = elf.get_section_by_name(".symtab")
    if not isinstance(table, SymbolTableSection):
        return [], []
    arm = elf["e_machine"] == "EM_ARM"
    symbols, mapping = [], []
    for raw in table.iter_symbols():
        shndx = raw["st_shndx"]
        section = sections[shndx].name if isinstance(shndx, int) and shndx < len(sections) else None
        kind = MAPPING.get(raw.name.split(".", 1)[0]) if arm and raw.name.startswith("$") else None
        if kind is not None:
            if section is not None and sections[shndx].executable:
                mapping.append((raw["st_value"], kind))
            continue
        if not raw.name or raw["st_info"]["type"] in ("STT_FILE", "STT_SECTION"):
            continue
        value, sym_type = raw["st_value"], raw["st_info"]["type"][4:]
        thumb = arm and sym_type == "FUNC" and bool(value & 1)
        symbols.append(Symbol(name=raw.name, address=value & ~1 if thumb else value, size=raw["st_size"],
                              type=sym_type, binding=raw["st_info"]["bind"][4:], section=section, thumb=thumb))
    return symbols, mapping


# ---------------------------------------------------------------------------- sizes


def _read_only(section: Section, flash: Container[int] | None) -> bool:
    """A writable section placed in flash (a vector table) holds constants at run time."""
    return flash is not None and section.kind == "data" and section.address in flash


def image_sizes(image: ElfImage, flash: Container[int] | None = None) -> dict:
    """Sizes by kind for the whole image, and per section.

    ``flash``: the addresses of the target's flash (and boot memory), if it has one; writable
    sections inside it count as ``rodata``. Returns ``{"text": n, "rodata": n,
    "data": n, "bss": n, "reserved": n, "sections": {name: {"kind", "size"}}}``;
    an executable section that holds constants appears with kind "text+rodata".
    """
    totals = dict.fromkeys((*KINDS, RESERVED), 0)
    per_section = {}
    for section in image.sections:
        if section.kind is None or section.size == 0:
            continue
        if section.executable:
            code, constants = _split_executable(image, section)
            totals["text"] += code
            totals["rodata"] += constants
            per_section[section.name] = {"kind": "text+rodata" if constants else "text", "size": section.size}
            continue
        kind = "rodata" if _read_only(section, flash) else section.kind
        totals[kind] += section.size
        per_section[section.name] = {"kind": kind, "size": section.size}
    return {**totals, "sections": per_section}


def _split_executable(image: ElfImage, section: Section) -> tuple[int, int]:
    """(code bytes, constant bytes) of an executable section: constants are the bytes
    that a ``$d`` mapping symbol marks as data and no function symbol covers."""
    start, end = section.address, section.address + section.size
    covered = merge_intervals([(max(f.address, start), min(f.end, end)) for f in image.functions()
                      if f.section == section.name and f.size and f.address < end and f.end > start])
    marks = [(address, kind) for address, kind in image.mapping if start <= address < end]
    constants = 0
    for i, (address, kind) in enumerate(marks):
        if kind != "d":
            continue
        stop = marks[i + 1][0] if i + 1 < len(marks) else end
        constants += (stop - address) - _overlap(covered, address, stop)
    return section.size - constants, constants


def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``intervals`` [low, high) sorted, overlapping and adjacent ones joined."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(intervals):
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _overlap(intervals: list[tuple[int, int]], low: int, high: int) -> int:
    return sum(max(0, min(high, b) - max(low, a)) for a, b in intervals)


def symbol_kind(image: ElfImage, symbol: Symbol, flash: Container[int] | None = None) -> str | None:
    """The kind a symbol's bytes count as: a function is ``text``; data in an
    executable section is ``rodata``; otherwise its section's kind."""
    section = image.section(symbol.section) if symbol.section else None
    if section is None or section.kind is None:
        return None
    if section.executable:
        return "text" if symbol.type == "FUNC" else "rodata"
    return "rodata" if _read_only(section, flash) else section.kind


def symbol_sizes(image: ElfImage, names: list[str], flash: Container[int] | None = None) -> dict:
    """Sizes by kind of the named symbols (local ones included).

    Returns ``{"text": n, "rodata": n, "data": n, "bss": n, "symbols": [{"name",
    "section", "kind", "size", "address"}], "missing": [names]}``. A name
    defined more than once (a static symbol in two files) counts every
    definition; an alias (same address and section) counts once.
    """
    totals = dict.fromkeys(KINDS, 0)
    rows, missing, seen = [], [], set()
    for name in names:
        found = [s for s in image.symbols_named(name) if s.section is not None]
        if not found:
            missing.append(name)
        for symbol in found:
            kind = symbol_kind(image, symbol, flash)
            rows.append({"name": name, "section": symbol.section, "kind": kind, "size": symbol.size,
                         "address": symbol.address})
            if kind in totals and (symbol.section, symbol.address) not in seen:
                totals[kind] += symbol.size
                seen.add((symbol.section, symbol.address))
    return {**totals, "symbols": rows, "missing": missing}


def symbols_defined_in(path: Path, file_names: set[str]) -> list[str]:
    """Names of the functions and variables whose DWARF definition lies in one of ``file_names`` (base names).

    For code whose manifest lists no ``symbols`` (peer generators, ``assay.json``): what the generated files
    define, header-only libraries included (emlearn's ``eml_net.h``). A definition without its own name or
    file (a variable defined in a ``.c`` file and declared in a header) takes them from the declaration it
    completes. A function's ``static`` variables are named as the symbol table names them (gcc: ``name.0``), and
    so is a C++ definition (Aidge's export): its mangled name, from DWARF's linkage name or, for an
    internal-linkage one, the symbol at its address. Empty without DWARF information.
    """
    names: set[str] = set()
    try:
        with Path(path).open("rb") as stream:
            elf = ELFFile(stream)
            if not elf.has_dwarf_info():
                return []
            objects: dict[int, list[str]] = {}
            functions: dict[int, list[str]] = {}
            table = elf.get_section_by_name(".symtab")
            for symbol in table.iter_symbols() if isinstance(table, SymbolTableSection) else []:
                # gcc leaves a function's static variable untyped (``scratch.0``, STT_NOTYPE); $a/$t/$d map code
                if symbol["st_info"]["type"] in ("STT_OBJECT", "STT_NOTYPE") and symbol.name[:1] not in ("", "$"):
                    objects.setdefault(symbol["st_value"], []).append(symbol.name)
                elif symbol["st_info"]["type"] == "STT_FUNC" and symbol.name:
                    functions.setdefault(symbol["st_value"] & ~1, []).append(symbol.name)  # ~1: the Thumb bit
            dwarf = elf.get_dwarf_info()
            for cu in dwarf.iter_CUs():
                program = dwarf.line_program_for_CU(cu)
                if program is None:
                    continue
                base = 0 if program.header["version"] >= 5 else 1
                files = [Path(entry.name.decode(errors="replace")).name for entry in program["file_entry"]]
                for die in cu.get_top_DIE().iter_children():
                    if die.tag not in ("DW_TAG_subprogram", "DW_TAG_variable") or not _defines(die):
                        continue
                    declaration = die.get_DIE_from_attribute("DW_AT_specification") \
                        if "DW_AT_specification" in die.attributes else die
                    # C++ (Aidge): the symbol table names a function or variable by its mangled linkage name
                    name = _attribute(die, declaration, "DW_AT_linkage_name") or _attribute(die, declaration,
                                                                                            "DW_AT_name")
                    file = _attribute(die, declaration, "DW_AT_decl_file")
                    if name is None or file is None:
                        continue
                    index = file.value - base
                    if not (0 <= index < len(files) and files[index] in file_names):
                        continue
                    # the symbol table's names at the definition's address: a C++ ``static`` (internal linkage) has
                    # no linkage name in DWARF, a mangled one in the ELF; the DWARF name when none is there
                    if die.tag == "DW_TAG_subprogram":
                        names.update(name for address in _static_locals(die) for name in objects.get(address, []))
                        low = die.attributes.get("DW_AT_low_pc")
                        there = functions.get(low.value, []) if low is not None else []
                    else:
                        there = objects.get(_absolute_address(die), [])
                    names.update(there or [name.value.decode(errors="replace")])
    except (OSError, ELFError) as exc:
        raise AssayError(f"{path}: cannot read DWARF: {exc}") from None
    return sorted(names)


def _defines(die) -> bool:
    """A definition, not a declaration: code (a low address) or storage (a location)."""
    return "DW_AT_low_pc" in die.attributes or "DW_AT_location" in die.attributes


def _attribute(die, declaration, key: str):
    """``key`` of a definition, or of the declaration it completes."""
    return die.attributes.get(key) or declaration.attributes.get(key)


def _static_locals(function) -> list[int]:
    """Addresses of a function's ``static`` variables: nested variables located by an absolute address."""
    addresses = []
    for die in function.iter_children():
        if die.tag == "DW_TAG_lexical_block":
            addresses += _static_locals(die)
        address = _absolute_address(die) if die.tag == "DW_TAG_variable" else None
        if address is not None:
            addresses.append(address)
    return addresses


def _absolute_address(die) -> int | None:
    """The address of a variable located by ``DW_OP_addr`` (32-bit targets), else None."""
    location = die.attributes.get("DW_AT_location")
    if location is not None and location.form == "DW_FORM_exprloc" and location.value[:1] == [0x03]:
        return int.from_bytes(bytes(location.value[1:5]), "little")
    return None


def object_bytes(path: Path, name: str) -> tuple[int, int] | None:
    """(offset in the file, size) of the bytes that initialise the object ``name`` of the ELF ``path``: the one
    symbol of that name, in a section whose contents the file holds; None when there is no such single symbol.

    Why: a weight mutant changes one element of an array initialiser, and the executable holds that array's
    bytes; writing the mutated element there (``harness.stages.mutate.programs``) gives the program the mutant's
    own build gives, without compiling a data file of megabytes again."""
    try:
        with Path(path).open("rb") as stream:
            elf = ELFFile(stream)
            table = elf.get_section_by_name(".symtab")
            found = [s for s in table.iter_symbols() if s.name == name] \
                if isinstance(table, SymbolTableSection) else []
            if len(found) != 1 or found[0]["st_info"]["type"] != "STT_OBJECT" or \
                    not isinstance(found[0]["st_shndx"], int):
                return None
            symbol = found[0]
            section = elf.get_section(symbol["st_shndx"])
            if section["sh_type"] == "SHT_NOBITS" or not section["sh_flags"] & SH_FLAGS.SHF_ALLOC:
                return None
            inside = symbol["st_value"] - section["sh_addr"]
            if inside < 0 or inside + symbol["st_size"] > section["sh_size"]:
                return None
            return section["sh_offset"] + inside, symbol["st_size"]
    except (OSError, ELFError) as exc:
        raise AssayError(f"{path}: cannot read ELF: {exc}") from None
