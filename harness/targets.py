"""Target profiles: plain TOML files in ``toolchains/``, validated when loaded.

A new target is one new ``toolchains/<name>.toml``; nothing else registers it.
"""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness import runners
from harness.errors import ConfigError

PROFILE_DIR = Path(__file__).resolve().parent.parent / "toolchains"

_REQUIRED = {"name": str, "description": str, "kind": str, "compiler": str, "package": str,
             "cflags": list, "opt_levels": list, "default_opt": str, "ldflags": list, "libs": list}


@dataclass(frozen=True)
class TargetProfile:
    """How to build (and later run) generated code for one target."""

    name: str
    description: str
    kind: str
    compiler: str
    package: str
    cflags: tuple[str, ...]
    opt_levels: tuple[str, ...]
    default_opt: str
    ldflags: tuple[str, ...]
    libs: tuple[str, ...]
    path: Path

    def compiler_path(self) -> str:
        """The compiler executable; a ConfigError naming the package if it is missing."""
        found = shutil.which(self.compiler)
        if found is None:
            raise ConfigError(f"target {self.name}: compiler '{self.compiler}' not found; "
                              f"install the Debian package '{self.package}'")
        return found

    def flags(self, opt: str | None = None) -> list[str]:
        """Compiler flags for the given optimisation level (default: the profile's)."""
        opt = opt or self.default_opt
        if opt not in self.opt_levels:
            raise ConfigError(f"target {self.name}: optimisation level {opt} not in {', '.join(self.opt_levels)}")
        return [opt, *self.cflags]


def load_profile(path: Path) -> TargetProfile:
    """Read and validate one profile file."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read target profile: {exc}") from None
    for key, kind in _REQUIRED.items():
        if key not in data:
            raise ConfigError(f"{path}: missing key '{key}'")
        if not isinstance(data[key], kind):
            raise ConfigError(f"{path}: key '{key}' must be a {kind.__name__}")
    unknown = set(data) - set(_REQUIRED)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    if data["kind"] not in runners.kinds():
        raise ConfigError(f"{path}: kind '{data['kind']}' is not one of {', '.join(runners.kinds())}")
    if data["name"] != path.stem:
        raise ConfigError(f"{path}: name '{data['name']}' differs from the file name")
    if data["default_opt"] not in data["opt_levels"]:
        raise ConfigError(f"{path}: default_opt '{data['default_opt']}' is not in opt_levels")
    fields = {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}
    return TargetProfile(path=path, **fields)


def names() -> list[str]:
    return sorted(path.stem for path in PROFILE_DIR.glob("*.toml"))


def get(name: str) -> TargetProfile:
    """The profile called ``name``; an unknown name lists the known ones."""
    path = PROFILE_DIR / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"unknown target '{name}'; known targets: {', '.join(names())}")
    return load_profile(path)
