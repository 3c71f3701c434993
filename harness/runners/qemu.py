"""QEMU runner: cross-compile into a bare-metal ARM ELF and run a batch under QEMU.

Serves two profile kinds (docs/targets.md):
- ``qemu-user``: ``qemu-arm`` runs the ELF directly (ARM7TDMI, Cortex-A); the
  driver gets its file names as argv.
- ``qemu-system``: ``qemu-system-arm`` boots the ELF on a board model (Cortex-M);
  there is no argv, so the driver uses fixed file names.

Either way the ELF is the generated sources plus ``target_driver.c``, which
reads the inputs file and writes the outputs file through semihosting, so one
emulator start runs the whole batch. QEMU runs sandboxed in a fresh folder, where
those files live (``emulate``, docs/sandbox.md); the ELF stays in the build folder, read-only to the run. A crash, a
hang, a failed build or an image too large for the target's memory becomes a
``RunError`` whose message is the verdict's cause.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness import sandbox
from harness.runners import (COUNTS_INSTRUCTIONS, EMULATED, PAINTS_STACK, RunError, collect, read_file, run_folder,
                             write_file)
from harness.runners.compiling import Build, compile_once, driver_defines, link_inputs
from harness.runners.host import RunOutcome, first_diagnostic, signal_name
from harness.targets import TargetProfile, compiler_version

CAPABILITIES = frozenset({EMULATED, COUNTS_INSTRUCTIONS, PAINTS_STACK})  # qemu-user and qemu-system alike
DRIVER = Path(__file__).with_name("target_driver.c")
ELF_NAME = "assay.elf"
INPUTS_FILE = "assay_inputs.f32"  # the driver's fixed names (target_driver.c)
OUTPUTS_FILE = "assay_outputs.f32"
STACK_FILE = "assay_stack.u32"  # written by a driver built with -DASSAY_STACK_PAINT=<bytes> (docs/memory.md)
LOG_FILE = "emulator.log"  # what the program and QEMU printed, kept for a look after a failure
KEPT_LIMIT = 256 << 20  # bytes of a file the run wrote besides its outputs (stack mark, counts) read back
# qemu-system-arm's system-call filter: besides the obsolete calls, no privilege change, no process started
# (semihosting's SYS_SYSTEM would run a host command) and no change of scheduling or resources
SECCOMP = ("-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny")
FLOAT32_LE = np.dtype("<f4")

# Exit statuses of target_driver.c.
EXIT_CAUSES = {
    70: "driver could not open the inputs file",
    71: "driver could not open the outputs file",
    72: "driver could not read the inputs file",
    73: "driver found a partial input at the end of the inputs file",
    74: "driver could not write the outputs file",
    75: "driver could not write the stack measurement file",
    76: "driver found main's stack pointer moved across the call (stack measurement)",
    77: "driver found a guard word around the input or output buffer overwritten",
    134: "crashed with SIGABRT (abort() called)",
}

# What the linker says when the libc the profile names is not installed.
_MISSING_RUNTIME = re.compile(r"cannot read spec file|cannot find -l(rdimon|semihost|c|m)\b|"
                              r"cannot open linker script file|crt0[-\w]*\.o: No such file")
_OVERFLOW = re.compile(r"region [`'](\w+)' overflowed by (\d+) bytes")
_FAULT = re.compile(r"ARM fault: (\w+)")  # printed by picolibc's semihost crt0 fault handlers
_FAULT_PC = re.compile(r"\bPC:\s*(0x[0-9a-fA-F]+)")
_GUARD = re.compile(r"guard word [a-z ]+ overwritten at call #\d+")  # printed by target_driver.c before exit 77


@dataclass(frozen=True)
class ImageSize:
    """Bytes of the linked image: ``flash`` holds code, constants and the initial
    values of data; ``ram`` holds data, bss and any stack or heap reserved by the
    linker script. Heap and stack allocated at run time are not counted."""

    flash: int
    ram: int


@dataclass(frozen=True)
class QemuBuild(Build):
    elf: Path
    profile: TargetProfile
    size: ImageSize


def build(code: GeneratedCode, build_dir: Path, profile: TargetProfile, opt: str | None = None) -> QemuBuild:
    """Cross-compile ``code`` with the driver into ``build_dir/assay.elf``; reuse an identical build."""
    profile.emulator_path()  # a missing emulator is a set-up problem: say so before compiling
    flags = profile.flags(opt)
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    elf = build_dir / ELF_NAME
    start = time.perf_counter()
    compiler, inputs = link_inputs(code, profile, flags, build_dir, [DRIVER],
                                   lambda stderr: _build_failure(profile, stderr))
    # The memory map's --defsym flags come before the profile's ldflags, so that a
    # linker script named there (-T) sees them as defined.
    command = (compiler, *flags, f"-I{code.directory}", *driver_defines(code), *inputs,
               *memory_map_flags(profile), *profile.ldflags, "-o", str(elf), *profile.libs)
    version = compiler_version(compiler)
    compile_once(command, code, elf, lambda stderr: _build_failure(profile, stderr))
    size = image_size(elf, profile)
    check_fits(profile, size)
    return QemuBuild(elf=elf, code=code, profile=profile, command=command, compiler_version=version,
                     flags=tuple(flags), seconds=time.perf_counter() - start, size=size)


def memory_map_flags(profile: TargetProfile) -> list[str]:
    """For ``qemu-system``: the memory map of picolibc's ``picolibc.ld`` from the profile's [memory]
    (``__flash``, ``__ram``, and ``__boot`` for a profile with a boot region), then the profile's own
    linker script, if it has one, with a define of its digest so that editing the script rebuilds."""
    if profile.kind not in ("qemu-system", "qemu-smp"):
        return []
    flags = []
    for memory in profile.memory:
        symbol = f"__{memory.name}"
        flags += [f"-Wl,--defsym={symbol}={memory.origin:#x}", f"-Wl,--defsym={symbol}_size={memory.size:#x}"]
    if profile.linker_script is not None:
        digest = hashlib.sha256(profile.linker_script.read_bytes()).hexdigest()[:16]
        flags += [f"-DASSAY_LINKER_SCRIPT_DIGEST={digest}", f"-T{profile.linker_script}"]
    return flags


def _build_failure(profile: TargetProfile, stderr: str) -> Exception:
    overflow = _OVERFLOW.search(stderr)
    if overflow:
        region, excess = overflow.group(1), int(overflow.group(2))
        memory = profile.region(region.lower())
        capacity = f" of {memory.size} bytes" if memory else ""
        return RunError(f"image too large for {profile.name}: {region} region{capacity} overflowed by {excess} bytes")
    missing = _MISSING_RUNTIME.search(stderr)
    if missing and profile.runtime_package:
        return ConfigError(f"target {profile.name}: the C library is missing ({missing.group(0)}); "
                           f"install the Debian package '{profile.runtime_package}'")
    return RunError(f"compile error: {first_diagnostic(stderr)}")


def image_size(elf: Path, profile: TargetProfile) -> ImageSize:
    """Flash and RAM bytes of the allocated sections of ``elf``.

    Every section with contents is stored in flash (code, constants, the vector
    table, the initial values of .data; a vector table in a boot region of its
    own is counted there too). Writable sections take RAM, except those placed
    inside the profile's flash or boot region (a writable vector table).
    """
    in_flash = profile.read_only_memory() or range(0)
    flash = ram = 0
    with elf.open("rb") as stream:
        for section in ELFFile(stream).iter_sections():
            flags, nobits = section["sh_flags"], section["sh_type"] == "SHT_NOBITS"
            if not flags & SH_FLAGS.SHF_ALLOC or (nobits and flags & SH_FLAGS.SHF_TLS):
                continue  # not loaded, or .tbss, whose space another section reserves
            if not nobits:
                flash += section["sh_size"]
            if flags & SH_FLAGS.SHF_WRITE and section["sh_addr"] not in in_flash:
                ram += section["sh_size"]
    return ImageSize(flash=flash, ram=ram)


def check_fits(profile: TargetProfile, size: ImageSize) -> None:
    """RunError if the image needs more flash or RAM than the profile's memory has."""
    for region, needed, what in (("flash", size.flash, "code, constants and initial data"),
                                 ("ram", size.ram, "data, bss and reserved stack")):
        memory = profile.region(region)
        if memory is not None and needed > memory.size:
            raise RunError(f"image too large for {profile.name}: {region} needs {needed} bytes ({what}), "
                           f"the target has {memory.size}")


def run(built: QemuBuild, inputs: np.ndarray, timeout: float = 300.0, keep: tuple[str, ...] = ()) -> RunOutcome:
    """Run the batch ``inputs`` (N, input_size) in one emulator start, in a fresh folder (``run_folder``: the
    driver's files are there, the ELF is read where it was built, a folder the run cannot write).

    ``c_seconds`` is the emulator's wall time for the batch (boot, semihosting
    file I/O and the inferences, all emulated); ``wall_seconds`` adds writing
    the inputs file and reading the outputs file. ``keep``: names of other files the run writes (the counting
    plugin's) to copy, read as untrusted, beside the ELF before the folder goes; the stack measurement is always
    kept (``read_stack_mark``).
    """
    built.profile.check_runnable()
    start = time.perf_counter()
    inputs = np.ascontiguousarray(inputs, dtype=np.float32)
    inputs = inputs.reshape(len(inputs), int(np.prod(inputs.shape[1:])))  # also for an empty batch
    if inputs.shape[1] != built.code.input_size:
        raise RunError(f"inputs have {inputs.shape[1]} values, the code expects {built.code.input_size}")
    profile = built.profile
    build_dir = built.elf.parent
    for name in (STACK_FILE, *keep):
        (build_dir / name).unlink(missing_ok=True)
    expected = len(inputs) * built.code.output_size
    with run_folder() as work:
        write_file(work / INPUTS_FILE, inputs.astype(FLOAT32_LE).tobytes())
        emulator_start = time.perf_counter()
        try:
            returncode = emulate(profile, built.elf, timeout, work)
        except subprocess.TimeoutExpired:
            raise RunError(f"timed out after {timeout:g} s ({len(inputs)} inputs)") from None
        c_seconds = time.perf_counter() - emulator_start
        if returncode != 0:
            raise RunError(exit_cause(returncode, _tail(build_dir / LOG_FILE)))
        data = read_file(work / OUTPUTS_FILE, expected * FLOAT32_LE.itemsize, "the outputs file")
        for name in (STACK_FILE, *keep):
            collect(work, name, build_dir, KEPT_LIMIT, f"the run's {name}")
    if data is None:
        raise RunError("no outputs file: the program exited 0 without writing it")
    outputs = np.frombuffer(data, dtype=FLOAT32_LE)
    if outputs.size != expected:
        raise RunError(f"outputs file has {outputs.size} values, expected {len(inputs)} x {built.code.output_size}")
    outputs = outputs.astype(np.float32).reshape(len(inputs), built.code.output_size)
    return RunOutcome(outputs=outputs, c_seconds=c_seconds, wall_seconds=time.perf_counter() - start)


@dataclass(frozen=True)
class StackMark:
    """The stack high-water mark of the last run of a driver built with
    ``-DASSAY_STACK_PAINT``: the most bytes the entry used below main's stack
    pointer over ``calls`` calls, out of ``painted`` bytes painted."""

    depth: int
    painted: int
    calls: int


def read_stack_mark(built: QemuBuild) -> StackMark | None:
    """The stack measurement of the last ``run(built, ...)``, or None if the driver wrote none."""
    path = built.elf.parent / STACK_FILE
    if not path.is_file():
        return None
    values = np.frombuffer(path.read_bytes(), dtype=np.dtype("<u4"))
    if values.size != 3:
        raise RunError(f"{path}: stack measurement file has {values.size} values, expected 3")
    return StackMark(depth=int(values[0]), painted=int(values[1]), calls=int(values[2]))


def _program(profile: TargetProfile, elf: Path) -> list[str]:
    """The emulator's arguments that name the program (the ELF by its absolute path, in the build folder; the
    driver's files by name, in the run's folder, where the emulator runs)."""
    if profile.kind in ("qemu-system", "qemu-smp"):
        return ["-kernel", str(elf)]
    return [str(elf), INPUTS_FILE, OUTPUTS_FILE]


def emulate(profile: TargetProfile, elf: Path, timeout: float, work: Path) -> int:
    """Run ``elf`` under the profile's emulator in the sandbox (``sandbox``), confined to the run's folder
    ``work``, where the driver's files are: semihosting can open nothing else, its ``SYS_SYSTEM`` finds no shell
    to run a host command with (``no_shell``), and ``qemu-system-arm`` also runs under its own system-call filter
    (``-sandbox``: no process, no privilege change) where the build has one.
    What the program and QEMU print goes to ``LOG_FILE`` beside the ELF, a file Assay opens itself in a folder
    the run cannot write (a file, not a pipe: code that prints in a loop must not fill our memory; its size is
    bounded by the run's file limit). The exit status; TimeoutExpired after ``timeout`` seconds."""
    emulator = profile.emulator_path()
    confine = list(SECCOMP) if profile.kind in ("qemu-system", "qemu-smp") and has_seccomp(emulator) else []
    command = [emulator, *confine, *profile.emulator_args, *_program(profile, elf.absolute())]
    log = elf.parent / LOG_FILE
    log.unlink(missing_ok=True)
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(descriptor, "wb") as sink:
        return sandbox.run(command, work, timeout, memory_mib=sandbox.settings().emulator_memory_mib,
                           stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, no_shell=True).returncode


@functools.cache
def has_seccomp(emulator: str) -> bool:
    """Whether this QEMU system emulator was built with its system-call filter (``-sandbox``): one without it
    says so when asked for it, before it complains about the missing kernel file of this probe."""
    try:
        done = subprocess.run([emulator, *SECCOMP, "-M", "none", "-nographic", "-monitor", "none", "-kernel",
                               "/nonexistent"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return not re.search(r"sandbox|seccomp", done.stdout + done.stderr, re.IGNORECASE)


def _tail(path: Path, size: int = 65536) -> str:
    """The last ``size`` bytes of the emulator's log (Assay's own file: the run cannot replace it)."""
    with path.open("rb") as stream:
        stream.seek(max(0, os.fstat(stream.fileno()).st_size - size))
        return stream.read().decode(errors="replace")


def exit_cause(returncode: int, output: str) -> str:
    """One line for a non-zero emulator exit status, from the status and what the program printed."""
    if returncode < 0:
        # qemu-arm ends itself with the guest's fatal signal (SIGSEGV for a bad address, SIGILL ...); the
        # sandbox reports the driver's exit status 134 (abort(), as a shell reports it) as that signal too
        if -returncode == signal.SIGSYS:  # qemu-system-arm's own filter (SECCOMP) stopped it
            return ("crashed with SIGSYS: the emulator's system-call filter refused what the program asked of "
                    "the host")
        return EXIT_CAUSES[134] if -returncode == signal.SIGABRT else f"crashed with {signal_name(-returncode)}"
    fault = _FAULT.search(output)
    if fault:
        pc = _FAULT_PC.search(output[fault.end():])
        return f"crashed with {fault.group(1)}" + (f" (PC {pc.group(1)})" if pc else "")
    guard = _GUARD.search(output) if returncode == 77 else None
    if guard:
        return guard.group(0)
    if returncode in EXIT_CAUSES:
        return EXIT_CAUSES[returncode]
    tail = (output.strip().splitlines() or ["no message"])[-1].strip()
    return f"exited with status {returncode}: {tail}"
