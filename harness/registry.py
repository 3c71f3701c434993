"""Extension points by name: ``importlib.metadata`` entry-point groups ``assay.<kind>``.

An installed distribution declares what it adds in its own metadata (``[project.entry-points."assay.runners"]``
in its ``pyproject.toml``), so a third-party package extends Assay without an edit to Assay; Assay declares its
built-ins the same way in its own ``pyproject.toml``. Looking a name up reads only the metadata: nothing is
imported until ``load``, so a module may list what exists (a target profile checking its runner kind) without
importing the modules that serve it.

Entry points rather than a plugin framework (pluggy): each group maps a name to one object, no hooks are
called in sequence, and the standard library reads them.
"""

from __future__ import annotations

import functools
from importlib import metadata

from harness.errors import ConfigError

PREFIX = "assay."


@functools.cache
def entries(kind: str) -> dict[str, metadata.EntryPoint]:
    """name -> entry point of group ``assay.<kind>``, over every installed distribution (read once)."""
    found: dict[str, metadata.EntryPoint] = {}
    for entry in metadata.entry_points(group=PREFIX + kind):
        found.setdefault(entry.name, entry)
    return found


def names(kind: str) -> list[str]:
    """The registered names of ``kind``, sorted."""
    return sorted(entries(kind))


def load(kind: str, name: str) -> object:
    """The object registered as ``name`` in ``assay.<kind>``; ConfigError naming the known ones if none is."""
    entry = entries(kind).get(name)
    if entry is None:
        known = ", ".join(names(kind)) or "none: is Assay installed (pip install -e .)?"
        raise ConfigError(f"unknown {kind[:-1] if kind.endswith('s') else kind} '{name}' (known: {known})")
    return entry.load()
