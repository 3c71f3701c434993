"""Bare-metal SMP runner (profile kind ``qemu-smp``): parallel code, one function per core, under qemu-system-arm.

The ELF is the generated sources, ``smp_driver.c`` and the profile's reset
code (``<profile>-start.S`` beside its profile: ``toolchains/``), linked with picolibc's semihosting
crt0 and ``picolibc.ld`` at the profile's memory map. Core 0 starts the
others with PSCI and runs the batch; the files (inputs, outputs, trace, delay
seed) go through semihosting in the build directory, as for ``qemu.py``, sandboxed there (``qemu.emulate``).
Sequential V2 code runs through the same driver on core 0 alone, so the
parallel outputs are compared with outputs of the same compiler, C library
and emulator. There is no watchdog on the target: a deadlock is a timeout.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from pathlib import Path

import numpy as np

from harness import targets
from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness.runners import EMULATED, SMP, RunError, collect, read_file, run_folder, write_file
from harness.runners.compiling import compile_once
from harness.runners.host import RunOutcome
from harness.runners.parallel_host import ParallelOutcome, parallel_record, read_trace
from harness.runners.qemu import (ELF_NAME, FLOAT32_LE, INPUTS_FILE, KEPT_LIMIT, LOG_FILE, OUTPUTS_FILE, QemuBuild,
                                  _build_failure, _tail, check_fits, emulate, exit_cause, image_size,
                                  memory_map_flags)
from harness.targets import TargetProfile, compiler_version

CAPABILITIES = frozenset({EMULATED, SMP})
DRIVER = Path(__file__).with_name("smp_driver.c")
COMMON = Path(__file__).with_name("parallel_common.h")
TRACE_FILE = "assay_trace.txt"
SEED_FILE = "assay_seed.txt"
_SMP = re.compile(r"^\d+$")


def startup_file(profile: TargetProfile) -> Path:
    """The profile's reset code, ``<name>-start.S`` beside its profile (or in toolchains/)."""
    path = targets.beside(profile.path, f"{profile.name}-start.S")
    if path is None:
        raise ConfigError(f"target {profile.name}: no reset code {profile.name}-start.S in {profile.path.parent}")
    return path


def emulated_cores(profile: TargetProfile) -> int:
    """The ``-smp`` count of the profile's emulator arguments (1 without it)."""
    args = list(profile.emulator_args)
    if "-smp" in args:
        value = args[args.index("-smp") + 1].split(",")[0]
        if _SMP.match(value):
            return int(value)
    return 1


def _defines(code: GeneratedCode, trace: bool, delays: bool) -> list[str]:
    header = code.manifest["headers"][0] if code.manifest.get("headers") else None
    if "parallel" not in code.manifest:  # sequential V2: the same driver on core 0 alone
        if header is None:
            raise RunError(f"{code.directory}: no header in the manifest")
        return [f'-DASSAY_HEADER="{header}"', "-DASSAY_SEQUENTIAL", "-DASSAY_CORES=1",
                f"-DASSAY_FUNCTIONS={code.entry}", f"-DASSAY_IN={code.input_size}", f"-DASSAY_OUT={code.output_size}"]
    from harness.runners.parallel_host import driver_defines

    return driver_defines(code, trace, delays)


def build(code: GeneratedCode, build_dir: Path, profile: TargetProfile, opt: str | None = None, trace: bool = True,
          delays: bool = False) -> QemuBuild:
    """Cross-compile ``code`` (parallel or sequential) with the SMP driver into ``build_dir/assay.elf``."""
    if "parallel" in code.manifest:
        cores = parallel_record(code)["cores"]
        if cores > emulated_cores(profile):
            raise RunError(f"the code needs {cores} cores, target {profile.name} emulates "
                           f"{emulated_cores(profile)}")
    compiler = profile.compiler_path()
    profile.emulator_path()
    flags = profile.flags(opt)
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    elf = build_dir / ELF_NAME
    start_code = startup_file(profile)
    digest = hashlib.sha256(DRIVER.read_bytes() + COMMON.read_bytes() + start_code.read_bytes()).hexdigest()[:16]
    command = (compiler, *flags, f"-I{code.directory}", *_defines(code, trace, delays),
               f"-DASSAY_DRIVER_DIGEST={digest}", *map(str, code.sources), str(DRIVER), str(start_code),
               *memory_map_flags(profile), *profile.ldflags, "-o", str(elf), *profile.libs)
    begin = time.perf_counter()
    compile_once(command, code, elf, lambda stderr: _build_failure(profile, stderr))
    size = image_size(elf, profile)
    check_fits(profile, size)
    return QemuBuild(elf=elf, code=code, profile=profile, command=command, compiler_version=compiler_version(compiler),
                     flags=tuple(flags), seconds=time.perf_counter() - begin, size=size)


def run(built: QemuBuild, inputs: np.ndarray, timeout: float = 300.0, delay_seed: int | None = None,
        trace: bool = True, keep: tuple[str, ...] = ()) -> ParallelOutcome:
    """Run the batch in one emulator start, in a fresh folder (``run_folder``); outputs and (when built traced)
    the trace, or the error. ``keep``: names of other files the run writes (the counting plugin's) to copy, read
    as untrusted, beside the ELF before the folder goes."""
    begin = time.perf_counter()
    for name in keep:
        (built.elf.parent / name).unlink(missing_ok=True)
    inputs = np.ascontiguousarray(inputs, dtype=np.float32).reshape(len(inputs), -1)
    if inputs.shape[1] != built.code.input_size:
        raise RunError(f"inputs have {inputs.shape[1]} values, the code expects {built.code.input_size}")
    expected = len(inputs) * built.code.output_size
    with run_folder() as work:
        write_file(work / INPUTS_FILE, inputs.astype(FLOAT32_LE).tobytes())
        if delay_seed is not None:
            write_file(work / SEED_FILE, f"{int(delay_seed)}\n".encode())
        emulator_start = time.perf_counter()
        error = None
        try:
            returncode = emulate(built.profile, built.elf, timeout, work)
            if returncode != 0:
                error = exit_cause(returncode, _tail(built.elf.parent / LOG_FILE))
        except subprocess.TimeoutExpired:
            error = f"timed out after {timeout:g} s ({len(inputs)} inputs): a deadlock or a lost message"
        c_seconds = time.perf_counter() - emulator_start
        observed = read_trace(work / TRACE_FILE) if trace and (work / TRACE_FILE).exists() else None
        data = read_file(work / OUTPUTS_FILE, expected * FLOAT32_LE.itemsize, "the outputs file")
        for name in keep:
            collect(work, name, built.elf.parent, KEPT_LIMIT, f"the run's {name}")
    if error is None and data is None:
        error = "no outputs file: the program exited 0 without writing it"
    if error is not None:
        return ParallelOutcome(None, observed, error)
    outputs = np.frombuffer(data, dtype=FLOAT32_LE)
    if outputs.size != expected:
        return ParallelOutcome(None, observed, f"outputs file has {outputs.size} values, expected "
                                               f"{len(inputs)} x {built.code.output_size}")
    outcome = RunOutcome(outputs=outputs.astype(np.float32).reshape(len(inputs), built.code.output_size),
                         c_seconds=c_seconds, wall_seconds=time.perf_counter() - begin)
    return ParallelOutcome(outcome, observed if trace else None)
