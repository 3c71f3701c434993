"""``toolchains/tested.toml``: the interpreters, the platform, what each Debian package is for, and the versions
the whole test suite passed with on each distribution (docs/configuration.md).

Why a package's role is data: a qualification tool's verdicts are claims about the configuration its own tests ran
on, but only some packages can change a result. A compiler, a C library, QEMU, the MC/DC toolchain or the sandbox
(``results``) can change a verdict, a figure or what generated code can reach; a browser driving the evidence
pages' test or an SSH server for the sharding test (``test-only``) cannot. Debian moves both on with security
updates and apt cannot install an old revision, so "exact revision or untested" for every package would make any
machine set up later untested for a reason that changes no result. ``assay doctor`` reports a results package that
moved as a difference (until ``assay evidence qualify`` has passed on that configuration, ``qualification``) and a
test-only one as a note.

Standard library only, and runnable as ``python -m harness.core.tested``: ``.ci/setup`` asks it which packages to
install on this distribution before any virtual environment exists.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TESTED_FILE = ROOT / "toolchains" / "tested.toml"
OS_RELEASE = Path("/etc/os-release")
RESULTS, TEST_ONLY = "results", "test-only"
ROLES = (RESULTS, TEST_ONLY)
MAIN, TEST, OTAWA = "main", "test", "otawa"
INSTALLS = (MAIN, TEST, OTAWA)  # OTAWA: its runtime libraries, installed by .ci/setup --test and --otawa
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Package:
    """One Debian package .ci/setup installs: its Debian 12 name (the key), what it is for, when it is installed,
    and its name on distributions that call it otherwise ("" where it is not packaged)."""

    name: str
    role: str
    install: str
    names: dict[str, str] = field(default_factory=dict)

    def name_on(self, distribution: str) -> str | None:
        """The package's name on ``distribution``; None where it is not packaged there."""
        return self.names.get(distribution, self.name) or None


@dataclass(frozen=True)
class Tested:
    """The file's content: interpreters (major.minor), platform, packages by key, and per distribution
    (``"debian 12"``) the tested version of each package key."""

    pythons: tuple[str, ...]
    platform: str
    packages: dict[str, Package]
    versions: dict[str, dict[str, str]]
    source: str  # the file, as difference lines name it

    def role(self, role: str) -> list[Package]:
        return [p for p in self.packages.values() if p.role == role]


def shown(path: Path) -> str:
    """``path`` as a difference line names it: relative to Assay's source tree when inside it."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def load(path: Path = TESTED_FILE) -> Tested:
    """Read and check a tested-configuration file; a ConfigError names the file and the key."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the tested configuration: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML: {exc}") from None
    _only(data, {"python", "packages", "tested"}, path, "")
    python = _table(data, "python", path)
    _only(python, {"versions", "platform"}, path, "python.")
    versions = python.get("versions")
    if (not isinstance(versions, list) or not versions
            or not all(isinstance(v, str) and _is_major_minor(v) for v in versions)):
        raise ConfigError(f"{path}: key 'python.versions' must be a list of major.minor strings (e.g. [\"3.11\"])")
    if not isinstance(python.get("platform"), str) or not python["platform"].strip():
        raise ConfigError(f"{path}: key 'python.platform' must be a non-empty string")
    packages = {name: _package(name, entry, path) for name, entry in _table(data, "packages", path).items()}
    tested = {}
    for distribution, table in _table(data, "tested", path).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: key 'tested.\"{distribution}\"' must be a table of package = \"version\"")
        for name, version in table.items():
            if name not in packages:
                raise ConfigError(f"{path}: key 'tested.\"{distribution}\".{name}' names no package of [packages]")
            if not isinstance(version, str) or not version.strip():
                raise ConfigError(f"{path}: key 'tested.\"{distribution}\".{name}' must be a version string "
                                  f"(dpkg-query -W -f='${{Version}}')")
        tested[distribution] = dict(table)
    return Tested(pythons=tuple(versions), platform=python["platform"], packages=packages, versions=tested,
                  source=shown(path))


def _is_major_minor(text: str) -> bool:
    major, dot, minor = text.partition(".")
    return bool(dot) and major.isdigit() and minor.isdigit()


def _package(name: str, entry: object, path: Path) -> Package:
    where = f"packages.{name}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: key '{where}' must be a table {{ role = ..., install = ... }}")
    _only(entry, {"role", "install", "names"}, path, where + ".")
    if entry.get("role") not in ROLES:
        raise ConfigError(f"{path}: key '{where}.role' must be one of {', '.join(ROLES)}")
    if entry.get("install") not in INSTALLS:
        raise ConfigError(f"{path}: key '{where}.install' must be one of {', '.join(INSTALLS)}")
    names = entry.get("names", {})
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        raise ConfigError(f"{path}: key '{where}.names' must be a table of distribution = \"package name\"")
    return Package(name=name, role=entry["role"], install=entry["install"], names=dict(names))


def _table(data: dict, key: str, path: Path) -> dict:
    if key not in data:
        raise ConfigError(f"{path}: missing table [{key}]")
    if not isinstance(data[key], dict):
        raise ConfigError(f"{path}: key '{key}' must be a table [{key}]")
    return data[key]


def _only(data: dict, allowed: set[str], path: Path, prefix: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{path}: unknown key '{prefix}{unknown[0]}' (allowed: {', '.join(sorted(allowed))})")


def distribution(os_release: Path = OS_RELEASE) -> str:
    """``"ID VERSION_ID"`` of ``/etc/os-release`` (``"debian 12"``, ``"ubuntu 24.04"``); ``"unknown"`` without it."""
    fields = {}
    try:
        for line in Path(os_release).read_text().splitlines():
            key, _, value = line.partition("=")
            fields[key.strip()] = value.strip().strip('"')
    except OSError:
        return "unknown"
    return " ".join(part for part in (fields.get("ID"), fields.get("VERSION_ID")) if part) or "unknown"


def installed_versions(names: list[str]) -> dict[str, str] | None:
    """package -> installed version for those of ``names`` dpkg has installed (one ``dpkg-query`` for all); None
    without dpkg-query."""
    if not names:
        return {}
    command = shutil.which("dpkg-query")
    if command is None:
        return None
    try:
        result = subprocess.run([command, "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n", *names],
                                capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    versions: dict[str, str] = {}
    for line in result.stdout.splitlines():  # dpkg-query exits 1 when a package is unknown: the rest still print
        name, _, rest = line.partition("\t")
        version, _, status = rest.partition("\t")
        if status.startswith("ii"):  # installed, not only known (removed with its configuration files left: "rc")
            versions.setdefault(name.split(":")[0], version)
    return versions


def machine_versions(tested: Tested, where: str) -> dict[str, str] | None:
    """package key -> version installed on this machine (under the package's name on ``where``)."""
    local = {p.name: p.name_on(where) for p in tested.packages.values() if p.name_on(where)}
    found = installed_versions(sorted(set(local.values())))
    if found is None:
        return None
    return {key: found[name] for key, name in local.items() if name in found}


def main(argv: list[str] | None = None) -> int:
    """``names [--install main|test] [--distribution D]``: the apt names to install, one line;
    ``versions``: this machine's ``[tested."..."]`` table (to refresh the file after a passing run);
    ``python``: exit 0 when this interpreter is one the file names, else one line and exit 1."""
    parser = argparse.ArgumentParser(prog="python -m harness.core.tested", description=main.__doc__)
    parser.add_argument("what", choices=("names", "versions", "python"))
    parser.add_argument("--install", choices=INSTALLS, action="append",
                        help="the install group(s) whose names to print (default: all)")
    parser.add_argument("--distribution", help="ID VERSION_ID (default: this machine's /etc/os-release)")
    parser.add_argument("--tested", type=Path, default=TESTED_FILE)
    args = parser.parse_args(argv)
    try:
        tested = load(args.tested)
    except ConfigError as exc:
        print(f"harness.core.tested: {exc}", file=sys.stderr)
        return 2
    where = args.distribution or distribution()
    if args.what == "python":
        running = f"{sys.version_info.major}.{sys.version_info.minor}"
        if running in tested.pythons:
            return 0
        print(f"{sys.executable} is Python {running}; requirements.lock is for {', '.join(tested.pythons)} "
              f"({tested.source}): set PYTHON=python3.X", file=sys.stderr)
        return 1
    if args.what == "names":
        groups = args.install or list(INSTALLS)
        print(" ".join(name for p in tested.packages.values() if p.install in groups
                       for name in [p.name_on(where)] if name))
        return 0
    found = machine_versions(tested, where) or {}
    print(f'[tested."{where}"]')
    for key in tested.packages:
        if key in found:  # a key with a dot (libxslt1.1) is quoted, or TOML would read a table
            print(f'{key if key.replace("-", "").replace("_", "").isalnum() else chr(34) + key + chr(34)} = '
                  f'"{found[key]}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
