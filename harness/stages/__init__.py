"""The stages, one package each: ``harness.stages.<name>`` holds the stage's run logic
(``run``), its report writer (``report``) and its CLI command (``command``, with
``add_command(subparsers)``).

Adding a stage is adding a package with a ``command`` module: the CLI finds it
here, ``harness.cli`` needs no edit. A stage imports the core and the
registries, never another stage (tests/test_architecture.py checks it).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def names() -> list[str]:
    """Every stage package, by name."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg)


def command_modules(only: list[str] | None = None) -> list[ModuleType]:
    """The ``command`` module of every stage that has one (of the stages in ``only``, if given)."""
    found = []
    for name in names() if only is None else [name for name in names() if name in only]:
        try:
            found.append(importlib.import_module(f"{__name__}.{name}.command"))
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}.command":
                raise
    return found
