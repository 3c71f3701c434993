"""Parallel code on the host: one POSIX thread per core (``parallel_driver.c``), for quick semantic checks.

The library exports the same ``assay_batch`` as the sequential one, so the
host worker runs it unchanged; what differs is how it is built (the parallel
driver, ``-pthread``, the core functions from the manifest's ``parallel``
record) and two optional instruments passed through the worker's environment:
the trace file (``-DASSAY_TRACE``) and the seed of the injected delays
(``-DASSAY_DELAYS``). Timing on the host means nothing here: threads are
scheduled by the OS, which is exactly what shakes the interleavings.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import sandbox, targets
from harness.generators.generated import GeneratedCode
from harness.runners import RunError, read_file
from harness.runners.compiling import compile_once
from harness.runners.host import HostBuild, RunOutcome, first_diagnostic
from harness.runners import host
from harness.targets import TargetProfile, compiler_version

DRIVER = Path(__file__).with_name("parallel_driver.c")
COMMON = Path(__file__).with_name("parallel_common.h")  # included by both parallel drivers
TRACE_FILE = "trace.txt"
TRACE_LIMIT = 256 << 20  # bytes of a trace file read back (the drivers' buffers hold far less)


WATCHDOG_SECONDS = 10  # per inference: longer means a deadlock (the driver exits 5 with the partial trace)


@dataclass(frozen=True)
class ParallelOutcome:
    run: RunOutcome | None  # None when the batch failed (``error``)
    trace: list[tuple[int, ...]] | None  # (run, core, word0, word1, word2) per event, when traced
    error: str | None = None  # why the batch failed: a hang (watchdog), a crash, a timeout


def parallel_record(code: GeneratedCode) -> dict:
    """The manifest's ``parallel`` record, or a one-line error for sequential code."""
    record = code.manifest.get("parallel")
    if not isinstance(record, dict):
        raise RunError(f"{code.directory}: the manifest has no 'parallel' record (sequential code)")
    return record


def driver_defines(code: GeneratedCode, trace: bool, delays: bool) -> list[str]:
    """-D flags of ``parallel_driver.c`` (and of the generated code's instruments) from the manifest."""
    record = parallel_record(code)
    header = code.manifest["headers"][0]
    flags = [f'-DASSAY_HEADER="{header}"', f"-DASSAY_CORES={record['cores']}",
             f"-DASSAY_FUNCTIONS={','.join(record['functions'])}", f"-DASSAY_IN={code.input_size}",
             f"-DASSAY_OUT={code.output_size}"]
    if trace:
        flags += ["-DASSAY_TRACE", f"-DASSAY_TRACE_SYM={record['trace']['symbol']}",
                  f"-DASSAY_TRACE_COUNT={record['trace']['count_symbol']}",
                  f"-DASSAY_TRACE_LEN={record['trace']['length']}"]
    if delays:
        flags.append("-DASSAY_DELAYS")
    return flags


def build(code: GeneratedCode, build_dir: Path, profile: TargetProfile | None = None, opt: str | None = None,
          trace: bool = True, delays: bool = False) -> HostBuild:
    """Compile the parallel ``code`` with the thread driver into ``build_dir``; reuse an identical build."""
    profile = profile or targets.get(targets.HOST)
    compiler = profile.compiler_path()
    flags = profile.flags(opt)
    build_dir = build_dir.resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    library = build_dir / "libassay.so"
    driver_digest = hashlib.sha256(DRIVER.read_bytes() + COMMON.read_bytes()).hexdigest()[:16]  # changed: rebuild
    command = (compiler, *flags, "-pthread", f"-I{code.directory}", *driver_defines(code, trace, delays),
               f"-DASSAY_DRIVER_DIGEST={driver_digest}",
               *map(str, code.sources), str(DRIVER), *profile.ldflags, "-o", str(library), "-pthread",
               *profile.libs)
    start = time.perf_counter()
    compile_once(command, code, library, lambda stderr: RunError(f"compile error: {first_diagnostic(stderr)}"))
    return HostBuild(library=library, code=code, command=command, compiler_version=compiler_version(compiler),
                     flags=tuple(flags), seconds=time.perf_counter() - start)


def run(built: HostBuild, inputs: np.ndarray, timeout: float = 300.0, delay_seed: int | None = None,
        trace: bool = True, watchdog: int = WATCHDOG_SECONDS) -> ParallelOutcome:
    """Run ``inputs`` with one thread per core; the observed trace when the build is traced.

    A failed batch (a deadlock caught by the driver's watchdog, a crash) is an
    outcome with ``error`` and the trace logged up to the failure, so the
    trace check can name the wait that never ended.
    """
    env = {"ASSAY_WATCHDOG": str(int(watchdog))}  # beside the sandbox's fixed environment
    if delay_seed is not None:
        env["ASSAY_DELAY_SEED"] = str(int(delay_seed))
    with sandbox.fresh_folder() as folder:  # the trace is written there and read back before it goes
        path = folder / TRACE_FILE
        if trace:
            env["ASSAY_TRACE_FILE"] = str(path)
        try:
            outcome = host.run(built, inputs, timeout, env=env, folder=folder)
        except RunError as exc:
            partial = read_trace(path) if trace and path.exists() else None
            hung = "exit 5" in str(exc)
            return ParallelOutcome(None, partial, f"deadlock: an inference did not finish within {watchdog} s "
                                                  f"({exc})" if hung else str(exc))
        return ParallelOutcome(outcome, read_trace(path) if trace else None)


def read_trace(path: Path) -> list[tuple[int, ...]]:
    """The trace lines ``run core word0 word1 word2`` of a run's trace file (read as untrusted: ``read_file``);
    an overflowed buffer is an error."""
    data = read_file(path, TRACE_LIMIT, "the trace file")
    if data is None:
        raise RunError(f"{path.name}: no trace written (was the code built with -DASSAY_TRACE?)")
    events = []
    for line in data.decode(errors="replace").splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] == "overflow":
            raise RunError(f"trace buffer of core {fields[1]} overflowed in run {fields[0]} ({fields[3]} events)")
        if fields[0] == "hang":
            continue  # the partial run before it is the evidence
        events.append(tuple(int(field) for field in fields))
    return events
