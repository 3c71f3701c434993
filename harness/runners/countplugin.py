"""Where the QEMU counting plugin's source is and where its build lives (``execcount`` builds it; ``assay doctor``
checks it without importing the measurement code).

The build's file name carries the first 16 hex digits of the source's SHA-256: a build of another version of
``assay_count.c`` is never loaded, and the current one is built on first use.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PLUGIN_SOURCE = Path(__file__).resolve().parent / "qemu_plugin" / "assay_count.c"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "assay" / "qemu_plugin"


def library_path(cache_dir: Path | None = None) -> Path:
    """Where the plugin built from the current source is, or will be."""
    digest = hashlib.sha256(PLUGIN_SOURCE.read_bytes()).hexdigest()[:16]
    return (Path(cache_dir) if cache_dir else default_cache_dir()) / f"assay_count-{digest}.so"
