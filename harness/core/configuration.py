"""The running configuration against the tested one (``assay doctor``, docs/configuration.md), and which Assay
this is.

The tested configuration is written in three places: ``requirements.lock`` (Assay's Python packages, exact
versions), ``toolchains/tested.toml`` (the interpreter line, the platform, the Debian packages) and each peer
environment's lock (``harness/generators/peers/<name>.txt``). ``compare`` gives one ``Difference`` per
mismatch and notes for what is not a mismatch (a peer environment or the QEMU counting plugin not built yet:
both are built on first use from what is tested); ``report`` is the doctor's JSON (``assay-doctor/1``).

Nothing here may enter a content key (``harness.core.provenance.tool_versions`` is the one that does): a git
commit in a key would discard every stored result at each commit. Results carry it in their provenance.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import harness
from harness import lockfile
from harness.digests import digest, tree_digest
from harness.errors import ConfigError

SCHEMA = "assay-doctor/1"
TESTED, UNTESTED = "tested", "untested"
ROOT = lockfile.ROOT
LOCK = lockfile.LOCK
TESTED_FILE = ROOT / "toolchains" / "tested.toml"
# What Assay is made of when no git commit says it: the digest covers these folders' sources and data.
SOURCES = ("harness", "codegen", "wcet", "toolchains")
SOURCE_SUFFIXES = (".py", ".c", ".h", ".toml", ".ld", ".S")
# Installed beside the locked packages without being one: the installer, and Assay itself.
NOT_LOCKED = frozenset({"pip", "assay"})
# What ``pip freeze`` leaves out of its list: a peer's lock may pin them, the stamp cannot show them.
FREEZE_OMITS = frozenset({"pip", "setuptools", "wheel", "distribute"})
_VERSION_LINE = re.compile(r"^\d+\.\d+$")
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Difference:
    """One way the running configuration is not the tested one: what ``component`` is here (``found``) and
    what was tested (``expected``), each a short phrase that says where it comes from."""

    component: str
    expected: str
    found: str

    def __str__(self) -> str:
        return f"{self.component}: {self.found}, {self.expected}"


@dataclass(frozen=True)
class Tested:
    """``toolchains/tested.toml``: the interpreter's major.minor, the platform, Debian package -> version."""

    python: str
    platform: str
    debian: dict[str, str]
    source: str  # the file, as difference lines name it


def load_tested(path: Path = TESTED_FILE) -> Tested:
    """Read and check a tested-configuration file; a ConfigError names the file and the key."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the tested configuration: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML: {exc}") from None
    _only(data, {"python", "debian"}, path, "")
    python = _table(data, "python", path)
    _only(python, {"version", "platform"}, path, "python.")
    for key in ("version", "platform"):
        if not isinstance(python.get(key), str) or not python[key].strip():
            raise ConfigError(f"{path}: key 'python.{key}' must be a non-empty string")
    if not _VERSION_LINE.match(python["version"]):
        raise ConfigError(f"{path}: key 'python.version' must be major.minor (e.g. \"3.11\"), "
                          f"not {python['version']!r}")
    debian = _table(data, "debian", path)
    for name, version in debian.items():
        if not isinstance(version, str) or not version.strip():
            raise ConfigError(f"{path}: key 'debian.{name}' must be a version string (dpkg-query -W -f='${{Version}}')")
    return Tested(python=python["version"], platform=python["platform"], debian=dict(debian), source=shown(path))


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


def shown(path: Path) -> str:
    """``path`` as a difference line names it: relative to Assay's source tree when inside it."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def installed_distributions() -> dict[str, str]:
    """canonical name -> version of every distribution this interpreter sees, the one imported first when a
    name is found twice on ``sys.path``."""
    found: dict[str, str] = {}
    for distribution in metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            found.setdefault(lockfile.canonical(name), distribution.version)
    return found


def python_packages(lock: Path = LOCK, installed: dict[str, str] | None = None) -> list[Difference]:
    """Every package of the lock installed at exactly its version, and nothing installed that it lacks (but
    ``NOT_LOCKED``); no lock file is one difference (Assay installed from a wheel has none)."""
    source = shown(lock)
    if not Path(lock).is_file():
        return [Difference(source, "so no Python package was compared with the tested ones",
                           f"not found at {lock} (Assay installed from a wheel?)")]
    pins = lockfile.read(lock)
    installed = installed_distributions() if installed is None else installed
    differences = [Difference(name, f"{pin.version} in {source}",
                              f"{installed[name]} installed" if name in installed else "not installed")
                   for name, pin in sorted(pins.items()) if installed.get(name) != pin.version]
    differences += [Difference(name, f"not in {source}", f"{version} installed")
                    for name, version in sorted(installed.items()) if name not in pins and name not in NOT_LOCKED]
    return differences


def interpreter(tested: Tested, version: str | None = None, system: str | None = None) -> list[Difference]:
    """The interpreter's major.minor and the platform (``sys.platform`` and the machine) against the tested."""
    version = version or f"{sys.version_info.major}.{sys.version_info.minor}"
    system = system or f"{sys.platform} {platform.machine()}"
    differences = []
    if version != tested.python:
        differences.append(Difference("python", f"{tested.python} in {tested.source}", f"{version} running"))
    if system != tested.platform:
        differences.append(Difference("platform", f"{tested.platform} in {tested.source}", f"{system} running"))
    return differences


def debian_versions(packages: list[str]) -> dict[str, str] | None:
    """package -> installed version for those of ``packages`` dpkg has installed (one ``dpkg-query`` for all);
    None without dpkg-query."""
    if not packages:
        return {}
    command = shutil.which("dpkg-query")
    if command is None:
        return None
    try:
        result = subprocess.run([command, "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n", *packages],
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


def debian_packages(tested: Tested, versions: dict[str, str] | None = None) -> list[Difference]:
    """Each Debian package of the tested configuration installed at exactly its version."""
    versions = debian_versions(sorted(tested.debian)) if versions is None else versions
    if versions is None:
        return [Difference("Debian packages", f"{len(tested.debian)} in {tested.source}",
                           "not checked (no dpkg-query on PATH: not a Debian system?)")]
    return [Difference(name, f"{expected} in {tested.source}",
                       f"{versions[name]} installed" if name in versions else "not installed")
            for name, expected in sorted(tested.debian.items()) if versions.get(name) != expected]


def qemu_plugin(cache_dir: Path | None = None) -> list[str]:
    """Notes on the QEMU counting plugin: built from the current source, or not yet (it is then built on first
    use from that source). A build of another source is never loaded (the file name carries the source's hash),
    so it is no difference either."""
    from harness.runners import countplugin as plugin

    library = plugin.library_path(cache_dir)
    if library.is_file():
        return []
    older = sorted(path.name for path in library.parent.glob("assay_count-*.so"))
    return ["QEMU counting plugin: not built (built on first use, or python -m harness.measurement.execcount)"
            + (f"; {len(older)} build(s) of another assay_count.c in {library.parent} are not used" if older else "")]


def freeze_differences(peer: str, freeze: list[str], pins: dict[str, str], source: str) -> list[Difference]:
    """One difference per package where a peer environment's ``pip freeze`` and its lock's pins disagree."""
    installed = {}
    for entry in freeze:
        name, separator, version = entry.partition("==")
        if separator:
            installed[lockfile.canonical(name)] = version
    pins = {lockfile.canonical(name): version for name, version in pins.items()}
    component = f"(peer {peer})"
    differences = [Difference(f"{name} {component}", f"{version} in {source}",
                              f"{installed[name]} installed" if name in installed else "not installed")
                   for name, version in sorted(pins.items())
                   if installed.get(name) != version and not (name in FREEZE_OMITS and name not in installed)]
    differences += [Difference(f"{name} {component}", f"not in {source}", f"{version} installed")
                    for name, version in sorted(installed.items()) if name not in pins]
    return differences


def peer_environments(names: list[str] | None = None) -> tuple[list[Difference], list[str]]:
    """Each built peer environment's ``pip freeze`` (its stamp) against its lock; one not built, or built from
    another lock (rebuilt on first use), is a note."""
    from harness.generators import peers

    differences, notes = [], []
    for name in peers.names() if names is None else names:
        env = peers.PeerEnv(name)
        stamp = env.stamp()
        if stamp is None:
            state = "built from another lock" if (env.directory / peers.STAMP).is_file() else "not built"
            notes.append(f"peer {name}: {state} (built on first use, or assay peers setup {name})")
            continue
        differences += freeze_differences(name, stamp.get("freeze", []), env.pins(), shown(env.requirements))
    return differences, notes


def compare(lock: Path = LOCK, tested: Path = TESTED_FILE) -> tuple[list[Difference], list[str]]:
    """(differences, notes) between this machine and the tested configuration of ``lock`` and ``tested``."""
    configuration = load_tested(tested)
    differences = python_packages(lock) + interpreter(configuration) + debian_packages(configuration)
    notes = qemu_plugin()
    peer_differences, peer_notes = peer_environments()
    sandbox_differences, sandbox_notes = isolation()
    return differences + peer_differences + sandbox_differences, notes + peer_notes + sandbox_notes


def isolation() -> tuple[list[Difference], list[str]]:
    """The sandbox generated code and peer tools run in, as a note; a difference when they cannot run sandboxed
    here: the tested configuration ran them in bubblewrap (docs/sandbox.md)."""
    from harness import sandbox

    found = sandbox.isolation()
    if found.confined:
        return [], [found.describe()]
    return [Difference("sandbox", "bubblewrap in the tested configuration", f"none ({found.reason})")], []


def identity(root: Path = ROOT, lock: Path = LOCK) -> dict:
    """Which Assay this is: its version, the git commit of its source tree and whether the tree has changes
    (when ``root`` is a git work tree and git is on PATH), the SHA-256 of its sources where no clean commit
    says it, and the SHA-256 of its lock file (None without one)."""
    lock_sha256 = hashlib.sha256(Path(lock).read_bytes()).hexdigest() if Path(lock).is_file() else None
    found = {"version": harness.__version__, "commit": None, "dirty": None, "sources_sha256": None,
             "requirements_lock_sha256": lock_sha256}
    state = _git_state(Path(root))
    if state is not None:
        found["commit"], found["dirty"] = state
    if state is None or found["dirty"]:
        found["sources_sha256"] = digest({name: tree_digest(Path(root) / name, SOURCE_SUFFIXES)
                                          for name in SOURCES if (Path(root) / name).is_dir()})
    return found


def _git_state(root: Path) -> tuple[str, bool] | None:
    """(HEAD's commit, whether the work tree differs from it) of ``root``; None outside git or without git."""
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return None
    try:
        head = subprocess.run([git, "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=_TIMEOUT_S, check=False)
        # --no-optional-locks: a status never takes the index lock from someone working in the tree
        status = subprocess.run([git, "--no-optional-locks", "-C", str(root), "status", "--porcelain"],
                                capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0 or status.returncode != 0:
        return None
    return head.stdout.strip(), bool(status.stdout.strip())


@functools.cache
def report(lock: Path = LOCK, tested: Path = TESTED_FILE) -> dict:
    """The doctor's report (``assay-doctor/1``), once per process: the verdict (``tested`` when there is no
    difference; notes do not count), the difference lines, the notes and Assay's identity."""
    from harness import sandbox

    differences, notes = compare(lock, tested)
    return {"schema": SCHEMA, "verdict": UNTESTED if differences else TESTED,
            "differences": [str(d) for d in differences], "notes": notes, "assay": identity(ROOT, lock),
            "isolation": {**sandbox.isolation().record(), "summary": sandbox.isolation().describe()}}
