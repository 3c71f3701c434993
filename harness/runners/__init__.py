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

from types import ModuleType

from harness import registry
from harness.errors import RunError

__all__ = ["CAPABILITIES", "COUNTS_INSTRUCTIONS", "EMULATED", "NATIVE", "PAINTS_STACK", "RunError", "SMP", "THREADS",
           "capable", "for_kind", "kinds"]

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
