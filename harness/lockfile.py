"""Assay's tested Python configuration: the lock files and what is installed, side by side.

A lock file here is pip's requirements format as ``uv pip compile --generate-hashes`` writes it: one
``name==version`` per package, each followed by ``--hash=sha256:...`` continuation lines. Assay has one for
itself (``requirements.lock`` at the top of the source tree, docs/configuration.md) and one per peer
environment (``harness/generators/peers/<name>.txt``). Reading them takes a few lines of our own rather than a
library: ``packaging`` parses a requirement but not pip's ``--hash`` options, and pip's own parser is not an
API.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Typing_Extensions`` = ``typing-extensions``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    """One locked package: its exact version and the hashes pip accepts for its files."""

    version: str
    hashes: tuple[str, ...]


def read(path: Path) -> dict[str, Pin]:
    """canonical name -> Pin for every ``name==version`` of the lock file ``path`` (comments skipped).

    A line that is neither a pin, a hash continuation nor a comment is a ConfigError naming file and line:
    a lock that pip would read differently from us must not pass for the tested configuration."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the lock file: {exc.strerror}") from None
    pins: dict[str, Pin] = {}
    current: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("--hash"):
            if current is None:
                raise ConfigError(f"{path}:{number}: a hash before any package")
            found = _HASH.findall(line)
            if not found:
                raise ConfigError(f"{path}:{number}: not a sha256 hash: {line}")
            pin = pins[current]
            pins[current] = Pin(pin.version, pin.hashes + tuple(found))
            continue
        match = _PIN.match(line)
        if not match:
            raise ConfigError(f"{path}:{number}: not an exact pin 'name==version': {line}")
        current = canonical(match.group(1))
        pins[current] = Pin(match.group(2), tuple(_HASH.findall(line)))
    return pins
