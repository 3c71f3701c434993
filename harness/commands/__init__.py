"""Further ``assay`` subcommands, one module each, found here by name.

A module in this package defines ``add_command(subparsers)``, which adds its
parser and sets ``func`` (returning the exit status). Adding a command is adding
a file; ``harness.cli`` needs no edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def modules() -> list[ModuleType]:
    return [importlib.import_module(f"{__name__}.{info.name}")
            for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)]
