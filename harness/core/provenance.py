"""Where a number came from: tool versions, read without importing the tools; whether the machine ran the
tested configuration; which Assay computed it.

``tool_versions`` is part of content keys (``harness.core.fingerprint``: a result computed with other versions of
the references is computed again). ``record_provenance`` is what a result file says about the run and is in no key:
its git commit and the configuration's differences (``harness.core.configuration``, ``assay doctor``) would
discard every stored result at each commit.
"""

from __future__ import annotations

import functools
import platform
from importlib import metadata

from harness.core import configuration
from harness.errors import AssayError
from harness import sandbox

_PACKAGES = ("numpy", "tensorflow-cpu", "tensorflow", "keras", "onnx", "onnxruntime", "cffi")


@functools.cache
def tool_versions() -> dict[str, str]:
    """Versions of Python, Assay and the references' packages on this machine."""
    import codegen
    import harness

    versions = {"python": platform.python_version(), "platform": platform.platform(),
                "assay": harness.__version__, "codegen": codegen.__version__}
    for package in _PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def record_provenance() -> dict:
    """A stage's ``provenance`` to start a record with (a new dict each time: stages add their own keys):
    ``tools`` (``tool_versions``), ``configuration`` (``verdict`` ``tested`` or ``untested``, the
    ``differences`` of ``assay doctor`` and, when a local qualification run made it tested, that run's line),
    ``assay`` (version, git commit or sources' digest, lock digest) and
    ``isolation`` (the sandbox generated code and peer tools ran in, and its limits: docs/sandbox.md)."""
    doctor = _doctor()
    return {"tools": tool_versions(),
            "configuration": {"verdict": doctor["verdict"], "differences": list(doctor["differences"]),
                              "qualified_by": (doctor.get("qualified_by") or {}).get("summary")},
            "assay": dict(doctor["assay"]), "isolation": sandbox.isolation().record()}


@functools.cache
def _doctor() -> dict:
    """``configuration.report()``; a tested configuration that cannot be read (a malformed tested.toml or lock)
    makes the run untested, with the reason as its difference, rather than every item an error."""
    try:
        return configuration.report()
    except AssayError as exc:
        return {"verdict": configuration.UNTESTED, "differences": [str(exc)],
                "assay": configuration.identity()}
