"""Where a number came from: tool versions, read without importing the tools."""

from __future__ import annotations

import functools
import platform
from importlib import metadata

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
