"""Host runner: gcc into a shared library, executed through cffi in a worker process.

The library is built from the generated sources plus ``batch_driver.c``; one
worker process runs a whole batch of inputs, under a timeout, in the sandbox
(``harness.sandbox``: no network, a fresh folder its only writable place, the build folder read-only,
limits). A crash, a hang
or a failed build becomes a ``RunError`` whose message is the verdict's cause,
and so does a guard word around the input or output buffer that the code
overwrote (``assay_guards.h``): "guard word after output overwritten at call #k".
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.generators.generated import GeneratedCode
from harness import sandbox
from harness.runners import NATIVE, THREADS, RunError, read_file, run_folder, write_file
from harness.runners.compiling import Build, compile_once, driver_defines, link_inputs
from harness.targets import TargetProfile, compiler_version
from harness import targets

CAPABILITIES = frozenset({NATIVE, THREADS})
DRIVER = Path(__file__).with_name("batch_driver.c")
WORKER = Path(__file__).with_name("host_worker.py")
# What the worker reads besides the system folders: its script, the interpreter's installation and the venv (cffi)
WORKER_NEEDS = tuple(dict.fromkeys(Path(p) for p in (WORKER, sys.base_prefix, sys.prefix)))
# assay_batch's return value (ASSAY_GUARD_* in assay_guards.h) -> the guard it found damaged.
GUARDS = {1: "before input", 2: "after input", 3: "before output", 4: "after output"}


@dataclass(frozen=True)
class HostBuild(Build):
    library: Path


@dataclass(frozen=True)
class RunOutcome:
    outputs: np.ndarray  # (N, output_size), float32, in the generated code's output layout
    c_seconds: float  # time inside the C batch call
    wall_seconds: float  # including process start and file transfer


def build(code: GeneratedCode, build_dir: Path, profile: TargetProfile | None = None,
          opt: str | None = None) -> HostBuild:
    """Compile ``code`` into ``build_dir``; reuse an identical earlier build."""
    profile = profile or targets.get(targets.HOST)
    flags = profile.flags(opt)
    build_dir = build_dir.resolve()  # the compiler runs in the source directory
    build_dir.mkdir(parents=True, exist_ok=True)
    library = build_dir / "libassay.so"
    start = time.perf_counter()
    compiler, inputs = link_inputs(code, profile, flags, build_dir, [DRIVER], compile_error)
    command = (compiler, *flags, f"-I{code.directory}", *driver_defines(code), *inputs,
               *profile.ldflags, "-o", str(library), *profile.libs)
    version = compiler_version(compiler)
    compile_once(command, code, library, compile_error)
    return HostBuild(library=library, code=code, command=command, compiler_version=version,
                     flags=tuple(flags), seconds=time.perf_counter() - start)


def compile_error(stderr: str) -> RunError:
    """A failed build as the verdict's cause: its first diagnostic, not the whole compiler output."""
    return RunError(f"compile error: {first_diagnostic(stderr)}")


def first_diagnostic(stderr: str) -> str:
    """The first line of compiler output that states an error (or the first line at all)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for pattern in (r":\d+:(\d+:)? (fatal )?error: ", r"undefined reference|multiple definition",
                    r"\bld: ", r"\berror\b"):
        for line in lines:
            if re.search(pattern, line):
                return line
    return lines[0] if lines else "compiler failed without a message"


INPUTS_FILE, OUTPUTS_FILE = "inputs.f32", "outputs.f32"


def run(built: HostBuild, inputs: np.ndarray, timeout: float = 300.0, env: dict[str, str] | None = None,
        folder: Path | None = None) -> RunOutcome:
    """Run the batch ``inputs`` (N, input_size) in a fresh worker process, sandboxed in a fresh folder
    (``harness.runners.run_folder``; ``folder``: the caller's, to read more of what the run wrote; ``env``: the
    variables the run needs besides the sandbox's fixed environment). The library is read where it was built,
    a folder the run cannot write; the outputs are read back as untrusted (``read_file``)."""
    if len(inputs) == 0:
        raise RunError("no inputs to run")
    inputs = np.ascontiguousarray(inputs, dtype=np.float32).reshape(len(inputs), -1)
    if inputs.shape[1] != built.code.input_size:
        raise RunError(f"inputs have {inputs.shape[1]} values, the code expects {built.code.input_size}")
    expected = len(inputs) * built.code.output_size * 4
    with run_folder(folder) as work:
        write_file(work / INPUTS_FILE, inputs.astype("<f4").tobytes())
        # -I: the interpreter reads no PYTHON* variable, no user site and not the working folder
        command = [sys.executable, "-I", str(WORKER), str(built.library),
                   str(built.code.input_size), str(built.code.output_size), INPUTS_FILE, OUTPUTS_FILE]
        start = time.perf_counter()
        try:
            result = sandbox.run(command, work, timeout, readable=WORKER_NEEDS, env=env,
                                 memory_mib=sandbox.settings().memory_mib, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            raise RunError(f"timed out after {timeout:g} s ({len(inputs)} inputs)") from None
        wall = time.perf_counter() - start
        if result.returncode < 0:
            raise RunError(f"crashed with {signal_name(-result.returncode)}")
        data = read_file(work / OUTPUTS_FILE, expected, "the outputs file") if result.returncode == 0 else None
    if result.returncode != 0 or data is None:
        tail = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise RunError(f"worker failed (exit {result.returncode}): {tail}")
    if len(data) != expected:
        raise RunError(f"the outputs file has {len(data)} bytes, expected {expected}")
    outputs = np.frombuffer(data, dtype="<f4").astype(np.float32).reshape(len(inputs), built.code.output_size)
    try:
        report = json.loads(result.stdout.strip().splitlines()[-1])
        report = {key: report[key] for key in ("guard", "call", "c_seconds")}
    except (IndexError, ValueError, TypeError, KeyError):
        raise RunError("the worker's report is missing from its output (the code printed over it?)") from None
    if report["guard"]:
        raise RunError(f"guard word {GUARDS[report['guard']]} overwritten at call #{report['call']}")
    return RunOutcome(outputs=outputs, c_seconds=report["c_seconds"], wall_seconds=wall)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_generated(manifest_dir: Path, inputs: np.ndarray, timeout: float = 60.0,
                  build_dir: Path | None = None) -> np.ndarray:
    """Build the code in ``manifest_dir`` and run ``inputs``; for tests and quick checks."""
    code = GeneratedCode.from_directory(Path(manifest_dir))
    built = build(code, Path(build_dir) if build_dir else Path(manifest_dir) / "build-host")
    return run(built, inputs, timeout).outputs
