"""Runners build generated code for a target and execute it outside the harness process.

Each runner module offers ``build(code, build_dir, profile, opt) -> build`` and
``run(build, inputs, timeout) -> RunOutcome``; which one serves a target is
decided by the profile's ``kind``, a name of the entry-point group
``assay.runners`` (``harness.registry``; Assay's own in its ``pyproject.toml``).
"""

from __future__ import annotations

from types import ModuleType

from harness import registry
from harness.errors import RunError

__all__ = ["RunError", "for_kind", "kinds"]


def kinds() -> list[str]:
    return registry.names("runners")


def for_kind(kind: str) -> ModuleType:
    return registry.load("runners", kind)
