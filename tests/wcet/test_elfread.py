"""The light ELF and DWARF reader (``wcet.elfread``) answers as pyelftools does, and ``python -m wcet``
imports neither pyelftools nor the capstone package (``wcet.disasm``: ``tests/wcet/test_disasm.py``).

The reference is pyelftools itself: every section, symbol, compilation unit, line program header and line row
of hand-written programs, OTAWA's samples and the zoo's generated ELFs (libgcc, picolibc: about a hundred
units each) is compared.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import programs
import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from recordings import OTAWA, needs_recordings
from wcet import armcode, elfread

ROOT = Path(__file__).resolve().parents[2]
needs_gcc = pytest.mark.skipif(not programs.HAVE_GCC, reason="arm-none-eabi-gcc not installed (.ci/setup)")


def check_against_pyelftools(elf: Path) -> int:
    """Compare everything ``wcet.elfread`` reads of ``elf`` with pyelftools; the number of line rows compared."""
    light = elfread.ElfFile(elf)
    with elf.open("rb") as stream:
        reference = ELFFile(stream)
        assert [(s.name, s.flags, s.address, s.offset, s.size, s.link) for s in light.sections] == [
            (s.name, s["sh_flags"], s["sh_addr"], s["sh_offset"], s["sh_size"], s["sh_link"])
            for s in reference.iter_sections()]
        symbols = [(symbol.name, symbol["st_value"], symbol["st_size"]) for section in reference.iter_sections()
                   if isinstance(section, SymbolTableSection) for symbol in section.iter_symbols()]
        assert [(name, value, size) for name, value, size, _, _ in light.symbols()] == symbols
        attributes = reference.get_section_by_name(".ARM.attributes")
        profile = [a.value for sub in attributes.iter_subsections() for subsub in sub.iter_subsubsections()
                   for a in subsub.iter_attributes() if a.tag == "TAG_CPU_ARCH_PROFILE"]
        assert light.is_m_profile() == (profile[:1] == [ord("M")])
        dwarf = reference.get_dwarf_info()
        units = elfread.units(light)
        cus = list(dwarf.iter_CUs())
        assert [(u.offset, u.version, u.address_size) for u in units] == [
            (cu.cu_offset, cu["version"], cu["address_size"]) for cu in cus]
        aranges = dwarf.get_aranges()
        assert elfread.aranges(light) == [(e.begin_addr, e.length, e.info_offset) for e in aranges.entries]
        source, rows = armcode._Dwarf(elf), 0
        for unit, cu in zip(units, cus):
            stmt_list = cu.get_top_DIE().attributes.get("DW_AT_stmt_list")
            assert elfread.stmt_list(light, unit) == (stmt_list.value if stmt_list else None)
            program = dwarf.line_program_for_CU(cu)
            if program is None:
                continue
            # pyelftools' own decoding of the whole program, header and opcodes
            states = [(e.state.address, e.state.file, e.state.line, e.state.end_sequence)
                      for e in program.get_entries() if e.state is not None]
            expected = armcode._unit_rows(program.header["version"], [f.name for f in program["file_entry"]],
                                          states, source.discarded_at_zero)
            assert source.rows(cu.cu_offset) == expected, (elf, cu.cu_offset)
            rows += len(expected)
    return rows


def test_the_reader_reads_what_pyelftools_reads(small_elfs):
    assert sum(check_against_pyelftools(elf) for elf in small_elfs) > 50
    assert {elfread.units(elfread.ElfFile(elf))[0].version for elf in small_elfs} == {4, 5}


@pytest.mark.slow
@pytest.mark.arm
def test_the_reader_reads_the_zoos_linked_images_as_pyelftools_does(generated_zoo, tmp_path):
    """acas-reg50 and lenet5 (assay-v2) built for both targets: libgcc and picolibc, about 80 units each."""
    from harness import targets
    from harness.generators.generated import GeneratedCode
    from harness.runners import qemu

    for name, source in generated_zoo.items():
        for target in ("arm7tdmi", "cortex-m4f"):
            elf = qemu.build(GeneratedCode.from_directory(source), tmp_path / f"{name}-{target}",
                             targets.get(target), "-O0").elf
            assert len(elfread.units(elfread.ElfFile(elf))) > 50
            assert check_against_pyelftools(elf) > 1000


@needs_gcc
def test_a_relocatable_objects_line_table_is_read_by_pyelftools_with_its_relocations(tmp_path):
    """A ``.o``'s debug sections need relocating: ``line_table`` reads it with pyelftools, as before."""
    obj = tmp_path / "shapes.o"
    subprocess.run([programs.GCC, *programs.FLAGS["arm7tdmi"], "-O0", "-g", "-c", str(programs.HERE / "shapes.c"),
                    "-o", str(obj)], check=True, capture_output=True)
    assert isinstance(armcode._line_source(obj), armcode._PyelftoolsDwarf)
    rows = armcode.line_table(obj)
    assert rows and {file for _, _, file, _ in rows} == {"shapes.c"}


@needs_recordings
def test_python_m_wcet_imports_neither_pyelftools_nor_the_capstone_package(tmp_path):
    """The start-up the issue measures: a bound from an ELF and its flow facts without either library's Python
    layer (the WCET itself is checked against the built-in analysis run in this process)."""
    elf, facts = OTAWA / "arm7tdmi/dense.elf", OTAWA / "arm7tdmi/dense.ff"
    script = ("import runpy, sys, json\nsys.argv = ['wcet', *sys.argv[1:]]\n"
              "try:\n    runpy.run_module('wcet', run_name='__main__', alter_sys=True)\n"
              "except SystemExit:\n    pass\n"
              "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'elftools', 'capstone'})))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.run([sys.executable, "-c", script, str(elf), "main", "--flow-facts", str(facts)],
                             capture_output=True, text=True, cwd=tmp_path, env=env)
    lines = process.stdout.splitlines()
    assert json.loads(lines[-1]) == [], process.stderr
    from wcet import bound, timing

    expected = bound.bound(elf, "main", timing.get("trivial"), facts)
    assert lines[0] == f"WCET[main] = {expected.wcet_cycles} cycles"
