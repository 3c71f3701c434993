"""Runners build generated code for a target and execute it outside the harness process.

Each runner module offers ``build(code, build_dir, profile, opt) -> build`` and
``run(build, inputs, timeout) -> RunOutcome``; which one serves a target is
decided by the profile's ``kind``, registered here in one place.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_BY_KIND = {"host": "harness.runners.host",
            "qemu-user": "harness.runners.qemu",
            "qemu-system": "harness.runners.qemu",
            "qemu-smp": "harness.runners.qemu_smp"}


class RunError(Exception):
    """Building or running generated code failed; the message is a one-line cause."""


def kinds() -> list[str]:
    return sorted(_BY_KIND)


def for_kind(kind: str) -> ModuleType:
    return importlib.import_module(_BY_KIND[kind])
