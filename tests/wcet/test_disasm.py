"""capstone without its Python package (``wcet.disasm``) reads capstone's structures at the package's offsets,
has its ARM constants and decodes every instruction of the test programs and OTAWA's samples as the package
does (the package itself is the reference)."""

import ctypes
from pathlib import Path

import capstone
from capstone import arm as capstone_arm

from wcet import armcode, disasm


def test_the_layouts_and_constants_are_the_capstone_packages():
    """``wcet.disasm`` reads capstone's structures at the offsets the package's own declarations give."""
    ours = {"id": disasm._Insn.id, "address": disasm._Insn.address, "size": disasm._Insn.size,
            "bytes": disasm._Insn.bytes, "mnemonic": disasm._Insn.mnemonic, "op_str": disasm._Insn.op_str,
            "detail": disasm._Insn.detail}
    assert {name: field.offset for name, field in ours.items()} == {
        name: getattr(capstone._cs_insn, name).offset for name in ours}
    for name, _ in disasm._Detail._fields_[:-1]:
        assert getattr(disasm._Detail, name).offset == getattr(capstone._cs_detail, name).offset, name
    assert disasm._Detail.arm.offset == capstone._cs_detail.arch.offset
    assert ctypes.sizeof(disasm._Arm) == ctypes.sizeof(capstone_arm.CsArm)
    assert ctypes.sizeof(disasm.ArmOp) == ctypes.sizeof(capstone_arm.ArmOp)
    package = {name: value for name, value in vars(capstone_arm).items() if name.startswith("ARM_")}
    assert package and {name: getattr(disasm.A, name) for name in package} == package


def every_instruction(elf: Path) -> list[tuple[int, str, bool, bytes]]:
    """(address, kind, M-profile, bytes) of each code span of ``elf``, by its mapping symbols."""
    code = armcode.ArmCode(elf)
    spans = []
    for address, kind in zip(code._map_addresses, code._map_kinds):
        if kind != "d":
            start, end, _ = code._span(address)
            spans.append((start, kind, code.mclass, code._section_bytes(start, end)))
    return spans


def test_decodings_are_the_capstone_packages(small_elfs):
    """Every instruction decoded with details by ``wcet.disasm`` and by the capstone package: the same fields."""
    compared = 0
    for elf in small_elfs:
        for start, kind, mclass, data in every_instruction(elf):
            mode = (capstone.CS_MODE_THUMB if kind == "t" else capstone.CS_MODE_ARM) | (
                capstone.CS_MODE_MCLASS if mclass else 0)
            package = capstone.Cs(capstone.CS_ARCH_ARM, mode)
            package.detail = True
            ours = disasm.Disassembler(kind == "t", mclass)
            expected = list(package.disasm(data, start))
            found = list(ours.disasm(data, start))
            assert list(ours.disasm_lite(data, start)) == [(i.address, i.size, i.mnemonic, i.op_str) for i in expected]
            assert len(found) == len(expected) > 0
            for mine, theirs in zip(found, expected):
                assert armcode._Shape.of(mine).details() == armcode._Shape.of(theirs).details(), theirs
                assert mine.bytes == bytes(theirs.bytes) and mine.address == theirs.address
                compared += 1
    assert compared > 100
    assert disasm.Disassembler(False, False).reg_name(capstone_arm.ARM_REG_R7) == "r7"
