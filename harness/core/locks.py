"""One exclusive lock file, shared by the processes of one machine (pytest-xdist workers, parallel stages).

An ``fcntl`` lock is released by the kernel when its holder dies, so a killed
worker never leaves a stale lock behind; it is local to the machine, which is
what is wanted: each host of a distributed campaign builds and stores its own copy.
"""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created with its folder if missing) for the ``with`` block."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
