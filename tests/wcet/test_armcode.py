"""Decoding ARM ELFs: on-demand decoding equals decoding whole spans, the per-unit line table equals the
whole table, and the content-keyed cache of decoded ELFs never serves a changed file."""

import os
import shutil
import subprocess
import sys
import time

import capstone
import programs
import pytest
from elftools.elf.elffile import ELFFile

from wcet import armcode
from recordings import OTAWA, needs_recordings

needs_gcc = pytest.mark.skipif(not programs.HAVE_GCC, reason="arm-none-eabi-gcc not installed (.ci/setup)")


def span_decoding(code: armcode.ArmCode) -> dict[int, tuple]:
    """Every instruction of every code span, decoded with details in one pass from the span's start."""
    found = {}
    for address, kind in zip(code._map_addresses, code._map_kinds):
        if kind == "d":
            continue
        start, end, _ = code._span(address)
        disassembler = capstone.Cs(capstone.CS_ARCH_ARM, (capstone.CS_MODE_THUMB if kind == "t" else
                                                          capstone.CS_MODE_ARM)
                                   | (capstone.CS_MODE_MCLASS if code.mclass else 0))
        disassembler.detail = True
        for insn in disassembler.disasm(code._section_bytes(start, end), start):
            found[insn.address] = armcode._Shape.of(insn).details()
    return found


@needs_gcc
@pytest.mark.parametrize("source, target", [("thumb_flow.S", "cortex-m4"), ("arm_flow.S", "arm7tdmi"),
                                            ("shapes.c", "cortex-m4")])
def test_on_demand_decoding_equals_decoding_whole_spans(tmp_path, source, target):
    elf = programs.build(source, target, tmp_path)
    expected = span_decoding(armcode.ArmCode(elf))
    assert any(details[3].startswith("it") for details in expected.values()) == (source == "thumb_flow.S")
    armcode._SHAPES.clear()  # the shapes table is the process's: this ELF's alone below
    code = armcode.ArmCode(elf)
    for address in sorted(expected, reverse=True):  # from the end: IT blocks reached from inside first
        insn = code.decode(address)
        assert insn.shape.details() == expected[address] and insn.bytes == code._section_bytes(
            address, address + insn.size), hex(address)
    # shared shapes, relative branches (targets from the bits) and encodings decoded one by one (cbz: capstone
    # gives its target, from bits that _relative_branch leaves alone) all met
    assert len(code._shapes) < len(expected) and any(s.targets for s in code._shapes.values())
    assert (armcode._EXACT in code._shapes.values()) == (source == "thumb_flow.S")
    with pytest.raises(armcode.AnalysisError, match="not an instruction boundary"):
        code.decode(max(expected) + 1)
    # a straight walk (what the CFG builder does) gives what decoding address after address gives, up to the
    # same error where the code stops (literal pool, end of the section)
    walked, address = [], min(expected)
    with pytest.raises(armcode.AnalysisError) as stopped:
        for insn in armcode.ArmCode(elf).instructions(address):
            walked.append((insn.address, insn.shape.details()))
    assert walked and all(expected[a] == details for a, details in walked)
    following = walked[-1][0] + code.decode(walked[-1][0]).size
    with pytest.raises(armcode.AnalysisError) as decoded:
        code.decode(following)
    assert str(stopped.value) == str(decoded.value)


@needs_recordings
@pytest.mark.parametrize("elf", ["arm7tdmi/dense.elf", "cortex-m4/fdense_m4.elf"])
def test_line_lookup_by_unit_equals_the_whole_table(elf):
    rows = armcode.line_table(OTAWA / elf)
    code = armcode.ArmCode(OTAWA / elf)
    assert rows
    for start, end, file, line in rows:
        assert code.line(start) == code.line(end - 1) == (file, line)
    assert code.line(rows[-1][1] + 0x1000) is None


@needs_gcc
def test_a_changed_elf_is_decoded_again_even_with_the_same_size_and_time(tmp_path):
    arm, thumb = programs.build("arm_flow.S", "arm7tdmi", tmp_path), programs.build("thumb_flow.S", "cortex-m4",
                                                                                     tmp_path)
    elf = tmp_path / "program.elf"
    shutil.copy(arm, elf)
    first = armcode.load_code(elf)
    assert armcode.load_code(elf) is first  # unchanged: decoded once
    entry = first.function("entry").start
    before = first.decode(entry).bytes
    # the same file rewritten in place: one byte of the entry's first instruction flipped, same size and times
    stat = os.stat(elf)
    data = bytearray(elf.read_bytes())
    offset = next(offset + entry - start for start, size, offset in first._sections if start <= entry < start + size)
    data[offset] ^= 0x01
    elf.write_bytes(bytes(data))
    os.utime(elf, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = armcode.load_code(elf)
    assert changed is not first and changed.decode(entry).bytes != before
    # another ELF copied over it
    shutil.copy(thumb, elf)
    other = armcode.load_code(elf)
    assert other.mclass and other.function("entry").thumb and not changed.mclass


@needs_gcc
def test_the_digest_reads_sections_in_chunks_and_sees_their_last_byte(tmp_path, monkeypatch):
    elf = programs.build("arm_flow.S", "arm7tdmi", tmp_path)
    whole = armcode.content_digest(elf)
    monkeypatch.setattr(armcode, "_DIGEST_CHUNK", 7)  # many chunks per section, the last one partial
    assert armcode.content_digest(elf) == whole
    _, size, offset = armcode.ArmCode(elf)._sections[-1]
    data = bytearray(elf.read_bytes())
    data[offset + size - 1] ^= 0x01
    elf.write_bytes(bytes(data))
    assert armcode.content_digest(elf) != whole


@needs_recordings
def test_python_m_wcet_imports_no_harness_numpy_or_ilp_solver():
    script = ("import sys, runpy\nsys.argv = ['wcet', %r, 'main', '--flow-facts', %r]\n"
              "try:\n    runpy.run_module('wcet', run_name='__main__')\nexcept SystemExit as exit:\n"
              "    print(exit.code, sorted(m for m in sys.modules if m.split('.')[0] in "
              "('harness', 'numpy', 'highspy', 'tensorflow', 'codegen')))\n"
              % (str(OTAWA / "arm7tdmi/dense.elf"), str(OTAWA / "arm7tdmi/dense.ff")))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert run.stdout.splitlines() == ["WCET[main] = 22715 cycles", "0 []"], run.stderr


FLOATS = """float scale(float a, float b) { return a * b / (a + b); }
int entry(void) { volatile float x = 3.0f; return (int) scale(x, 2.0f); }
"""


@needs_gcc
def test_capstone_writes_pc_only_in_branches_and_instructions_naming_pc(tmp_path):
    """What ``timing.names_pc`` relies on, checked on every instruction of hand-written code, of libgcc's
    soft-float routines and of OTAWA's samples."""
    from capstone import arm as A

    from wcet import timing

    source = tmp_path / "floats.c"
    source.write_text(FLOATS)
    elfs = [programs.build(name, target, tmp_path) for name, target in
            [("arm_flow.S", "arm7tdmi"), ("thumb_flow.S", "cortex-m4"), ("shapes.c", "arm7tdmi")]]
    for target in ("arm7tdmi", "cortex-m4"):  # with libgcc's soft-float and conversion routines
        elfs.append(tmp_path / f"floats-{target}.elf")
        subprocess.run([programs.GCC, *programs.FLAGS[target], "-O0", "-g", "-nostdlib", "-nostartfiles",
                        "-Wl,-e,entry", "-Wl,-Ttext=0x8000", str(source), "-lgcc", "-o", str(elfs[-1])], check=True)
    elfs += [OTAWA / "arm7tdmi/dense.elf", OTAWA / "cortex-m4/fdense_m4.elf"] if OTAWA.is_dir() else []
    checked = 0
    for elf in elfs:
        code = armcode.ArmCode(elf)
        for address in span_decoding(code):
            insn = code.decode(address)
            checked += 1
            if A.ARM_REG_PC in insn.regs_access()[1]:
                assert insn.id in timing._BRANCHES or timing.names_pc(insn), (elf.name, insn)
    assert checked > (1000 if OTAWA.is_dir() else 900)  # OTAWA's recorded ELFs add about 300 instructions


@pytest.mark.parametrize("kind, mclass", [("a", False), ("t", False), ("t", True)])
def test_shared_shapes_and_relative_branches_equal_capstone_on_random_encodings(kind, mclass):
    """Every encoding decoded through the shared shapes (relative branch targets computed from the bits,
    both signs, both halves of the address space) has capstone's details, whatever the address."""
    import random

    rng = random.Random(0)
    disassembler = capstone.Cs(capstone.CS_ARCH_ARM, (capstone.CS_MODE_THUMB if kind == "t" else capstone.CS_MODE_ARM)
                               | (capstone.CS_MODE_MCLASS if mclass else 0))
    disassembler.detail = True
    code = armcode.ArmCode.__new__(armcode.ArmCode)  # no ELF: only the decoding caches
    code._shapes, code.mclass, code.path = {}, mclass, "random"
    branches = 0
    for n in range(6000):
        if kind == "a":
            word = rng.getrandbits(32)
            if n % 2:
                word = (word & 0xF1FFFFFF) | 0x0A000000  # B/BL with every condition
            encoding = word.to_bytes(4, "little")
        else:
            first, second = rng.getrandbits(16), rng.getrandbits(16)
            if n % 3 == 1:
                first = (first & 0x0FFF) | rng.choice([0xD000, 0xE000])  # B<c> T1, B T2 (some UDF/SVC)
            elif n % 3 == 2:
                first, second = 0xF000 | (first & 0x7FF), (second & 0x2FFF) | rng.choice([0xD000, 0x9000])
            encoding = first.to_bytes(2, "little") + second.to_bytes(2, "little")
            encoding = encoding[:4 if first >> 11 in (0b11101, 0b11110, 0b11111) else 2]
        address = rng.randrange(0, 1 << 31, 4)
        expected = next(disassembler.disasm(encoding, address, 1), None)
        if expected is None or expected.size != len(encoding):
            continue
        relative = armcode._relative_branch(kind, encoding)
        if relative is not None:
            branches += 1
            key, offset = relative
            assert expected.operands[-1].reg == (address + offset) & 0xFFFFFFFF, (encoding.hex(), expected.mnemonic, expected.op_str)
            if (kind, key) not in code._shapes:  # the template: the first branch of its kind, elsewhere
                code._shapes[(kind, key)] = code._branch_template(address + 0x1000, kind, encoding, offset)
            template = code._shapes[(kind, key)]
            assert template is not armcode._EXACT, (encoding.hex(), expected.mnemonic)
            shape = template.at(address + offset)
        else:
            shape = code._shape(address, kind, encoding)
            if shape is armcode._EXACT:
                continue
        assert shape.details() == armcode._Shape.of(expected).details(), (encoding.hex(), expected.mnemonic)
    assert branches > 1000


DISCARDED = """
float unused(float x) {  /* never called: --gc-sections drops it, its line sequence is left at address 0 */
    float s = 0.0f;
    for (int i = 0; i < 100; ++i) { s += x * (float)i; s *= 0.5f; s -= x; s += 1.0f; s *= x; s += 2.0f; }
    for (int i = 0; i < 100; ++i) { s += x * (float)i; s *= 0.5f; s -= x; s += 1.0f; s *= x; s += 2.0f; }
    return s;
}

int entry(void) {
    volatile int a = 1;
    return a + 2;
}
"""


@needs_gcc
def test_a_discarded_functions_line_sequence_at_address_0_claims_no_address(tmp_path):
    """A Cortex-M image's code starts just after the vector table at 0, and the line sequence of a function the
    linker discarded is left at address 0: it must not name the lines of the real code there (V1's dispatch
    call was taken for a line of libm's erff when an unused library function was discarded)."""
    source = tmp_path / "discarded.c"
    source.write_text(DISCARDED)
    elf = tmp_path / "discarded.elf"
    subprocess.run([programs.GCC, *programs.FLAGS["cortex-m4"], "-O0", "-g", "-nostdlib", "-nostartfiles",
                    "-ffunction-sections", "-Wl,--gc-sections", "-Wl,-e,entry", "-Wl,-Ttext=0x40", str(source),
                    "-o", str(elf)], check=True, capture_output=True, text=True)
    first_entry_line = DISCARDED.splitlines().index("int entry(void) {") + 1
    source = armcode._Dwarf(elf)
    source.discarded_at_zero = False
    unfiltered = [row for unit in source.units for row in source.rows(unit)]
    rows = armcode.line_table(elf)
    assert rows and all(line >= first_entry_line for _, _, _, line in rows)  # only the entry's lines are left
    start = min(row[0] for row in rows)
    # the premise: without the rule, a row of the discarded function covers the entry's first address
    assert any(row[0] <= start < row[1] and row[3] < first_entry_line for row in unfiltered)
    assert armcode.ArmCode(elf).line(start)[1] >= first_entry_line


@needs_gcc
def test_line_programs_decode_as_pyelftools_decodes_them(tmp_path):
    """The DWARF line program decoder (``_line_states``) gives pyelftools' rows, on C and assembly built here
    (with libgcc's units) and on OTAWA's samples; pyelftools reads the headers here, ``wcet.elfread`` in
    ``tests/wcet/test_elfread.py``."""
    elfs = [programs.build(name, target, tmp_path) for name, target in
            [("shapes.c", "arm7tdmi"), ("shapes.c", "cortex-m4"), ("thumb_flow.S", "cortex-m4")]]
    elfs += [OTAWA / "arm7tdmi/dense.elf", OTAWA / "cortex-m4/fdense_m4.elf"] if OTAWA.is_dir() else []
    rows = 0
    for elf in elfs:
        with elf.open("rb") as stream:
            dwarf = ELFFile(stream).get_dwarf_info()
            for cu in dwarf.iter_CUs():
                program = dwarf.line_program_for_CU(cu)
                if program is not None:
                    states = armcode._line_states(armcode._line_program_of(program))
                    assert states == [(e.state.address, e.state.file, e.state.line, e.state.end_sequence)
                                      for e in program.get_entries() if e.state is not None], (elf, cu.cu_offset)
                    rows += len(states)
    assert rows > 100


@needs_gcc
def test_the_elfs_of_one_process_share_their_shapes_and_one_elf_is_hashed_once(tmp_path, monkeypatch):
    """A batch's ELFs link the same library code: its encodings are decoded with details once per process;
    and one unchanged ELF read three times (library facts, flow facts, bound) is hashed once."""
    built = programs.build("shapes.c", "arm7tdmi", tmp_path)
    first, second = tmp_path / "first.elf", tmp_path / "second.elf"
    shutil.copy(built, first)
    shutil.copy(built, second)
    armcode._SHAPES.clear()
    decoded = []
    original = armcode.ArmCode._shape
    monkeypatch.setattr(armcode.ArmCode, "_shape", lambda self, *args: decoded.append(args) or original(self, *args))
    for path in (first, second):
        code = armcode.ArmCode(path)
        for name in ("entry", "diamond", "nested"):
            function, address = code.function(name), code.function(name).start
            while address < function.end and code.kind(address) != "d":  # up to its literal pool
                address += code.decode(address).size
        decoded.append("next ELF")
    assert decoded.index("next ELF") > 0 and decoded[-1] == "next ELF" and decoded.count("next ELF") == 2
    assert decoded[decoded.index("next ELF") + 1] == "next ELF"  # nothing decoded again for the second
    hashed = []
    digest = armcode.content_digest
    monkeypatch.setattr(armcode, "content_digest", lambda path: hashed.append(path) or digest(path))
    old = time.time() - 10  # a file that has not changed for a while: its status tells a later change
    os.utime(first, (old, old))
    monkeypatch.setattr(armcode, "_SETTLED_NS", -1)  # its status-change time is new here; let it count as settled
    for _ in range(3):
        armcode.load_code(first)
    assert hashed == [first]
    first.write_bytes(first.read_bytes())  # rewritten: hashed again
    armcode.load_code(first)
    assert hashed == [first, first]
