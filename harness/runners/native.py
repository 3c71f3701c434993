"""Host executables: generated code linked with ``target_driver.c`` (the ARM targets' main) and run as a
process that reads an inputs file and writes an outputs file.

Why beside the host runner (a shared library run by a Python worker through cffi): starting that worker
costs ~0.2 s of interpreter and cffi, more than a small network's whole batch; ``assay mutate`` runs hundreds
of builds of the same code, one or two batches each, and there the process start is most of the time. An
executable starts in milliseconds. It is the same code, compiled with the same host profile flags, with the
same guard words around the buffers (``assay_guards.h``): a damaged guard word is the driver's "assay: guard
word ... overwritten at call #k" line and exit status 77; a crash is the signal; anything the code prints
before exiting with a non-zero status (e.g. the arena-region check's line) is the cause. It runs in the
sandbox (``harness.sandbox``), confined to a fresh folder; its build folder is read-only to it. The sanitized build
(``sanitized``) is such an executable too, compiled with the sanitizers.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Callable

import numpy as np

from harness.generators.generated import GeneratedCode
from harness import sandbox
from harness.runners import RunError, read_file, run_folder, write_file
from harness.runners.host import signal_name

DRIVER = Path(__file__).with_name("target_driver.c")
INPUTS_FILE, OUTPUTS_FILE = "inputs.f32", "outputs.f32"
GUARD = re.compile(r"guard word [a-z ]+ overwritten at call #\d+")


def failure_line(output: str, returncode: int) -> str:
    """One line for a failed run: the damaged guard word, the signal, or the last line the process printed."""
    guard = GUARD.search(output)
    if guard:
        return guard.group(0)
    if returncode < 0:
        return f"crashed with {signal_name(-returncode)}"
    tail = (output.strip().splitlines() or ["no message"])[-1].strip()
    return f"exited with status {returncode}: {tail}"


def run(executable: Path, code: GeneratedCode, inputs: np.ndarray, timeout: float, env: dict[str, str] | None = None,
        failure: Callable[[str, int], str] = failure_line, limit_memory: bool = True,
        folder: Path | None = None, files: dict[str, bytes] | None = None) -> np.ndarray:
    """The outputs (N, output_size) of ``inputs`` (N, input_size) run by ``executable``, sandboxed in a fresh
    folder (``run_folder``; ``folder``: the caller's, to read more of what the run wrote; ``env``: the variables
    it needs besides the fixed environment; ``limit_memory``: its address space, which a sanitized build,
    reserving terabytes of shadow memory, limits itself; ``files``: more files it reads, by name, written beside
    the inputs); a RunError with ``failure(output, status)`` when it fails, or on a timeout. The executable is
    read where it was built, a folder the run cannot write."""
    inputs = np.ascontiguousarray(inputs, dtype=np.float32).reshape(len(inputs), -1)
    if inputs.shape[1] != code.input_size:
        raise RunError(f"inputs have {inputs.shape[1]} values, the code expects {code.input_size}")
    expected = len(inputs) * code.output_size * 4
    with run_folder(folder) as work:
        write_file(work / INPUTS_FILE, inputs.astype("<f4").tobytes())
        for name, data in (files or {}).items():
            write_file(work / name, data)
        try:
            done = sandbox.run([str(Path(executable).absolute()), INPUTS_FILE, OUTPUTS_FILE], work, timeout,
                               env=env, memory_mib=sandbox.settings().memory_mib if limit_memory else None,
                               capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            raise RunError(f"timed out after {timeout:g} s ({len(inputs)} inputs)") from None
        if done.returncode != 0:
            raise RunError(failure(done.stdout + done.stderr, done.returncode))
        data = read_file(work / OUTPUTS_FILE, expected, "the outputs file") or b""
    if len(data) != expected:
        raise RunError(f"the run wrote {len(data) // 4} values, expected {len(inputs)} x {code.output_size}")
    return np.frombuffer(data, dtype="<f4").astype(np.float32).reshape(len(inputs), code.output_size)
