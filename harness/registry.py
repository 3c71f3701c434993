"""Extension points by name: ``importlib.metadata`` entry-point groups ``assay.<kind>``.

An installed distribution declares what it adds in its own metadata (``[project.entry-points."assay.runners"]``
in its ``pyproject.toml``), so a third-party package extends Assay without an edit to Assay; Assay declares its
built-ins the same way in its own ``pyproject.toml``. Looking a name up reads only the metadata: nothing is
imported until ``load``, so a module may list what exists (a target profile checking its runner kind) without
importing the modules that serve it.

The kinds: ``generators`` (a generator adapter class), ``references`` (a reference runtime class), ``runners``
(a runner module, named by a target profile's ``kind``), ``model_formats`` (a file suffix, ``.onnx``, and the
function that loads such a file), ``commands`` (an ``assay`` subcommand and the module whose ``add_command``
adds it), ``targets`` (a folder of target profiles, read by ``harness.targets``). Timing models
(``assay.timing_models``) are read by ``wcet.timing`` itself: ``wcet`` never imports ``harness``.

A name two installed distributions both declare is a ConfigError naming both, never a silent pick: which one
served would depend on the order of ``sys.path``.

Entry points rather than a plugin framework (pluggy): each group maps a name to one object, no hooks are
called in sequence, and the standard library reads them.
"""

from __future__ import annotations

import functools
import importlib
from importlib import metadata

from harness.errors import ConfigError

PREFIX = "assay."


def label(kind: str) -> str:
    """How a message names one thing of ``kind``: ``model_formats`` -> ``model format``."""
    return kind.removesuffix("s").replace("_", " ")


def origin(entry: metadata.EntryPoint) -> str:
    """The distribution that declares ``entry`` and what it points to: ``assay 0.1.0 (harness.runners.host)``."""
    dist = entry.dist
    return f"{dist.name} {dist.version} ({entry.value})" if dist is not None else entry.value


@functools.cache
def _groups() -> dict[str, list[metadata.EntryPoint]]:
    """Every ``assay.*`` entry point of every installed distribution, by group: one scan of the metadata
    (reading it costs a few milliseconds per scan, and one command looks up several kinds)."""
    every = metadata.entry_points()
    return {group: list(every.select(group=group)) for group in every.groups if group.startswith(PREFIX)}


@functools.cache
def entries(kind: str) -> dict[str, metadata.EntryPoint]:
    """name -> entry point of group ``assay.<kind>``; a ConfigError if two distributions declare one name."""
    found: dict[str, metadata.EntryPoint] = {}
    for entry in _groups().get(PREFIX + kind, []):
        other = found.setdefault(entry.name, entry)
        if other is not entry:
            raise ConfigError(f"{label(kind)} '{entry.name}' is registered twice (entry-point group {PREFIX}{kind}): "
                              f"by {origin(other)} and by {origin(entry)}; uninstall one of them")
    return found


def names(kind: str) -> list[str]:
    """The registered names of ``kind``, sorted."""
    return sorted(entries(kind))


def load(kind: str, name: str) -> object:
    """The object registered as ``name`` in ``assay.<kind>``; ConfigError naming the known ones if none is."""
    entry = entries(kind).get(name)
    if entry is None:
        known = ", ".join(names(kind)) or "none: is Assay installed (pip install -e .)?"
        raise ConfigError(f"unknown {label(kind)} '{name}' (known: {known})")
    try:
        found = importlib.import_module(entry.module)
    except ModuleNotFoundError as exc:  # the module named is missing (not one it imports: that is its bug)
        if exc.name is None or not (entry.module == exc.name or entry.module.startswith(exc.name + ".")):
            raise
        raise ConfigError(f"{label(kind)} '{name}' of {origin(entry)}: no module {exc.name}") from None
    for attribute in filter(None, (entry.attr or "").split(".")):
        if not hasattr(found, attribute):
            raise ConfigError(f"{label(kind)} '{name}' of {origin(entry)}: no {attribute} in {entry.module}")
        found = getattr(found, attribute)
    return found
