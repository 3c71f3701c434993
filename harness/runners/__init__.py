"""Runners build generated code for a target and execute it outside the harness process.

Each runner module offers ``build(code, build_dir, profile, opt) -> build`` and
``run(build, inputs, timeout) -> RunOutcome``; which one serves a target is
decided by the profile's ``kind``, a name of the entry-point group
``assay.runners`` (``harness.registry``; Assay's own in its ``pyproject.toml``).

A runner module declares what it can do beyond building and running a batch in
``CAPABILITIES``, a frozenset of the names below; a stage asks
``capable(profile, ...)`` instead of testing kind names, so a new runner kind
with the same capabilities serves every stage that needs them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import ModuleType

from harness import registry
from harness.errors import RunError

__all__ = ["CAPABILITIES", "COUNTS_INSTRUCTIONS", "EMULATED", "NATIVE", "PAINTS_STACK", "RunError", "SMP", "THREADS",
           "capable", "collect", "for_kind", "kinds", "read_file", "run_folder", "write_file"]

NATIVE = "native"  # runs the code on the machine Assay runs on
EMULATED = "emulated"  # runs it on an emulated core (QEMU): instruction counts mean something
COUNTS_INSTRUCTIONS = "counts-instructions"  # its builds run under harness.measurement.execcount's counting
PAINTS_STACK = "paints-stack"  # builds with -DASSAY_STACK_PAINT and reads the depth back (read_stack_mark)
SMP = "smp"  # builds and runs parallel code itself, one function per core (trace=, delays=, delay_seed=)
THREADS = "threads"  # its profile's parallel code runs as POSIX threads (harness.runners.parallel_host)
CAPABILITIES = frozenset({NATIVE, EMULATED, COUNTS_INSTRUCTIONS, PAINTS_STACK, SMP, THREADS})


def kinds() -> list[str]:
    return registry.names("runners")


def for_kind(kind: str) -> ModuleType:
    return registry.load("runners", kind)


def capable(profile, capability: str) -> bool:
    """Whether the runner of ``profile``'s kind declares ``capability`` (one of ``CAPABILITIES``)."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown runner capability {capability!r} (known: {', '.join(sorted(CAPABILITIES))})")
    return capability in getattr(for_kind(profile.kind), "CAPABILITIES", frozenset())


def read_file(path: Path, limit: int, what: str) -> bytes | None:
    """The bytes of a file a sandboxed run wrote (None when there is none), read as untrusted: never through a
    symbolic link (``O_NOFOLLOW``), never blocking (``O_NONBLOCK``: a FIFO or a device is refused, not waited on),
    only a regular file with a single link and at most ``limit`` bytes. Anything else is a RunError naming the
    file and what it is, the verdict's cause (docs/sandbox.md: nothing a run leaves behind is trusted)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        kind = "a symbolic link" if os.path.islink(path) else exc.strerror
        raise RunError(f"{what} ({Path(path).name}) refused: {kind}") from None
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise RunError(f"{what} ({Path(path).name}) refused: not a regular file")
        if info.st_nlink != 1:
            raise RunError(f"{what} ({Path(path).name}) refused: a file with {info.st_nlink} links")
        if info.st_size > limit:
            raise RunError(f"{what} ({Path(path).name}) refused: {info.st_size} bytes, at most {limit} expected")
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise RunError(f"{what} ({Path(path).name}) refused: more than {limit} bytes")
    return data


def write_file(path: Path, data: bytes) -> None:
    """Write a file Assay hands to a run (its inputs) as a new file: never through a link, never over an existing
    one (``O_EXCL``): in a run's fresh folder nothing can be there yet, and anything that is, is refused."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise RunError(f"{Path(path).name}: cannot be written for the run ({exc.strerror})") from None
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)


@contextmanager
def run_folder(given: Path | None = None) -> Iterator[Path]:
    """The folder a run may write: ``given`` (a fresh folder its caller made, to read more of what the run wrote
    before it goes), else a fresh one (``harness.sandbox.fresh_folder``) removed after the block."""
    from harness import sandbox

    with (nullcontext(given) if given is not None else sandbox.fresh_folder()) as folder:
        yield Path(folder)


def collect(folder: Path, pattern: str, destination: Path, limit: int, what: str) -> list[Path]:
    """Copy what a run wrote in ``folder`` under ``pattern`` (a glob, e.g. ``*.gcda``) into ``destination``,
    each file read as untrusted (``read_file``: a link, a FIFO or an oversized file is a RunError) and written
    anew there; the copies."""
    copies = []
    for path in sorted(Path(folder).glob(pattern)):
        data = read_file(path, limit, what)
        if data is not None:
            target = Path(destination) / path.name
            target.unlink(missing_ok=True)
            write_file(target, data)
            copies.append(target)
    return copies
