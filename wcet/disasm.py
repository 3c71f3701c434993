"""capstone's ARM disassembler, called through ``ctypes`` without the capstone package's Python layer.

``import capstone`` defines the ``ctypes`` structures of all its 18
architectures and imports ``inspect``, ``ctypes.util``, ``sysconfig`` and
``importlib.resources`` to find its library: ``python -c "import capstone"``
takes 22.2 MB of resident memory, ``import wcet.disasm`` 15.5 MB, and a bound
of acas-reg50 4 MB less (docs/benchmarks.md, issue 45). This module loads the very
library that package ships (``capstone/lib/libcapstone.so``, the same
``RTLD_DEEPBIND`` flag) and declares only what ARM needs, with the package's
own layouts (``capstone/__init__.py`` ``_cs_insn``/``_cs_detail``,
``capstone/arm.py``), so every field reads the same bytes the package reads;
``tests/wcet/test_disasm.py`` checks the layouts and the decodings against
the package itself. ``A`` holds the package's ARM constants
(``capstone/arm_const.py``, read as data: that file imports the package).

``Disassembler(thumb, mclass)`` answers what ``wcet.armcode`` asks of
``capstone.Cs``: ``disasm`` (instructions with details), ``disasm_lite``
(``(address, size, mnemonic, op_str)`` tuples) and ``reg_name``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import types
from collections.abc import Iterator
from pathlib import Path

# capstone.h: the values the package's ``__init__`` defines and ``arm_const.py`` imports
_CS_ARCH_ARM, _CS_MODE_THUMB, _CS_MODE_MCLASS, _CS_OPT_DETAIL, _CS_OPT_ON = 0, 1 << 4, 1 << 5, 2, 3
_OPERAND_TYPES = {"CS_OP_INVALID": 0, "CS_OP_REG": 1, "CS_OP_IMM": 2, "CS_OP_MEM": 3}


def _package() -> Path:
    """The installed capstone package's folder, found without importing it."""
    spec = importlib.util.find_spec("capstone")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the capstone package is not installed")
    return Path(spec.submodule_search_locations[0])


def _constants(text: str) -> types.SimpleNamespace:
    """The ``NAME = VALUE`` lines of ``arm_const.py`` (generated: integers, or an earlier name)."""
    values: dict[str, int] = dict(_OPERAND_TYPES)
    for name, value in re.findall(r"^(\w+) = (\w+)\s*$", text, re.MULTILINE):
        values[name] = values[value] if value in values else int(value, 0)
    return types.SimpleNamespace(**values)


_PACKAGE = _package()
A = _constants((_PACKAGE / "arm_const.py").read_text())


class _OpMem(ctypes.Structure):
    _fields_ = (("base", ctypes.c_uint), ("index", ctypes.c_uint), ("scale", ctypes.c_int), ("disp", ctypes.c_int),
                ("lshift", ctypes.c_int))


class _OpShift(ctypes.Structure):
    _fields_ = (("type", ctypes.c_uint), ("value", ctypes.c_uint))


class _OpValue(ctypes.Union):
    _fields_ = (("reg", ctypes.c_uint), ("imm", ctypes.c_int32), ("fp", ctypes.c_double), ("mem", _OpMem),
                ("setend", ctypes.c_int))


class ArmOp(ctypes.Structure):
    """One operand (capstone's ``arm.ArmOp``: ``reg``, ``imm`` and ``mem`` read its value union)."""

    _fields_ = (("vector_index", ctypes.c_int), ("shift", _OpShift), ("type", ctypes.c_uint), ("value", _OpValue),
                ("subtracted", ctypes.c_bool), ("access", ctypes.c_uint8), ("neon_lane", ctypes.c_int8))

    reg = property(lambda self: self.value.reg)
    imm = property(lambda self: self.value.imm)
    mem = property(lambda self: self.value.mem)


class _Arm(ctypes.Structure):
    _fields_ = (("usermode", ctypes.c_bool), ("vector_size", ctypes.c_int), ("vector_data", ctypes.c_int),
                ("cps_mode", ctypes.c_int), ("cps_flag", ctypes.c_int), ("cc", ctypes.c_uint),
                ("update_flags", ctypes.c_bool), ("writeback", ctypes.c_bool), ("post_index", ctypes.c_bool),
                ("mem_barrier", ctypes.c_int), ("op_count", ctypes.c_uint8), ("operands", ArmOp * 36))


class _Detail(ctypes.Structure):
    """``cs_detail`` up to its architecture union, of which ARM's member (at the union's start) is read;
    capstone allocates the whole of it."""

    _fields_ = (("regs_read", ctypes.c_uint16 * 20), ("regs_read_count", ctypes.c_ubyte),
                ("regs_write", ctypes.c_uint16 * 20), ("regs_write_count", ctypes.c_ubyte),
                ("groups", ctypes.c_ubyte * 8), ("groups_count", ctypes.c_ubyte), ("writeback", ctypes.c_bool),
                ("arm", _Arm))


class _Insn(ctypes.Structure):
    _fields_ = (("id", ctypes.c_uint), ("address", ctypes.c_uint64), ("size", ctypes.c_uint16),
                ("bytes", ctypes.c_ubyte * 24), ("mnemonic", ctypes.c_char * 32), ("op_str", ctypes.c_char * 160),
                ("detail", ctypes.POINTER(_Detail)))


_Registers = ctypes.c_uint16 * 64


def _library() -> ctypes.CDLL:
    library = ctypes.CDLL(str(_PACKAGE / "lib" / "libcapstone.so"), mode=getattr(os, "RTLD_DEEPBIND", 0))
    size_t, insns = ctypes.c_size_t, ctypes.POINTER(_Insn)
    for name, result, arguments in (
            ("cs_open", ctypes.c_int, (ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(size_t))),
            ("cs_option", ctypes.c_int, (size_t, ctypes.c_int, ctypes.c_void_p)),
            ("cs_disasm", size_t, (size_t, ctypes.POINTER(ctypes.c_char), size_t, ctypes.c_uint64, size_t,
                                   ctypes.POINTER(insns))),
            ("cs_free", None, (ctypes.c_void_p, size_t)),
            ("cs_errno", ctypes.c_int, (size_t,)),
            ("cs_reg_name", ctypes.c_char_p, (size_t, ctypes.c_uint)),
            ("cs_regs_access", ctypes.c_int, (size_t, insns, ctypes.POINTER(_Registers), ctypes.POINTER(ctypes.c_uint8),
                                              ctypes.POINTER(_Registers), ctypes.POINTER(ctypes.c_uint8)))):
        function = getattr(library, name)
        function.restype, function.argtypes = result, arguments
    return library


_CS = _library()


class Instruction:
    """One decoded instruction with the details capstone's ``CsInsn`` gives for ARM (the same names and
    values), copied out before capstone frees its memory."""

    __slots__ = ("id", "address", "size", "bytes", "mnemonic", "op_str", "cc", "update_flags", "writeback",
                 "operands", "groups", "_access")

    def __init__(self, handle: int, raw: _Insn):
        self.id, self.address, self.size = raw.id, raw.address, raw.size
        self.bytes = bytes(raw.bytes[:raw.size])
        self.mnemonic, self.op_str = raw.mnemonic.decode("ascii"), raw.op_str.decode("ascii")
        detail = raw.detail.contents
        arm = detail.arm
        self.cc, self.update_flags, self.writeback = arm.cc, arm.update_flags, arm.writeback
        self.operands = [ArmOp.from_buffer_copy(op) for op in arm.operands[:arm.op_count]]
        self.groups = list(detail.groups[:detail.groups_count])
        read, written = _Registers(), _Registers()
        read_count, written_count = ctypes.c_uint8(), ctypes.c_uint8()
        status = _CS.cs_regs_access(handle, ctypes.byref(raw), read, ctypes.byref(read_count), written,
                                    ctypes.byref(written_count))
        if status:
            raise OSError(f"capstone: cs_regs_access failed (error {status}) at {self.address:#x}")
        self._access = (read[:read_count.value], written[:written_count.value])

    def regs_access(self) -> tuple[list[int], list[int]]:
        """The registers read and written, explicitly or not."""
        return list(self._access[0]), list(self._access[1])

    def __repr__(self) -> str:
        return f"<Instruction {self.address:#x}: {self.mnemonic} {self.op_str}>"


class Disassembler:
    """capstone's ARM disassembler in ARM or Thumb state, M-profile or not, with details (``disasm``) or
    without (``disasm_lite`` only)."""

    def __init__(self, thumb: bool, mclass: bool, details: bool = True):
        self._handle = ctypes.c_size_t()
        mode = (_CS_MODE_THUMB if thumb else 0) | (_CS_MODE_MCLASS if mclass else 0)
        status = _CS.cs_open(_CS_ARCH_ARM, mode, ctypes.byref(self._handle))
        if status or (details and _CS.cs_option(self._handle, _CS_OPT_DETAIL, _CS_OPT_ON)):
            raise OSError(f"capstone: cannot open an ARM disassembler (mode {mode:#x})")
        self.details = details

    def _run(self, code: bytes, address: int, count: int) -> Iterator[_Insn]:
        """capstone's decodings of ``code`` from ``address`` (at most ``count``, 0: all), until bytes that do
        not decode; freed once the caller has read them."""
        found = ctypes.POINTER(_Insn)()
        n = _CS.cs_disasm(self._handle, code, len(code), address, count, ctypes.byref(found))
        if n == 0:
            status = _CS.cs_errno(self._handle)
            if status:
                raise OSError(f"capstone: cs_disasm failed (error {status}) at {address:#x}")
            return
        try:
            for index in range(n):
                yield found[index]
        finally:
            _CS.cs_free(found, n)

    def disasm(self, code: bytes, address: int, count: int = 0) -> Iterator[Instruction]:
        if not self.details:
            raise ValueError("this disassembler gives no details: disasm_lite only")
        handle = self._handle.value
        for raw in self._run(code, address, count):
            yield Instruction(handle, raw)

    def disasm_lite(self, code: bytes, address: int, count: int = 0) -> Iterator[tuple[int, int, str, str]]:
        for raw in self._run(code, address, count):
            yield raw.address, raw.size, raw.mnemonic.decode("ascii"), raw.op_str.decode("ascii")

    def reg_name(self, register: int) -> str | None:
        name = _CS.cs_reg_name(self._handle, register)
        return None if name is None else name.decode("ascii")
