"""The running configuration against the tested one (``assay doctor``, docs/configuration.md), and which Assay
this is.

The tested configuration is written in three places: ``requirements.lock`` (Assay's Python packages, exact
versions), ``toolchains/tested.toml`` (the interpreters, the platform, what each Debian package is for and its
tested versions per distribution: ``harness.core.tested``) and each peer environment's lock
(``harness/generators/peers/<name>.txt``). ``compare`` gives one ``Difference`` per mismatch that can change a
result and notes for what cannot (a test-only package at another version, a peer environment or the QEMU
counting plugin not built yet: both are built on first use from what is tested); results packages that moved are
accepted when a local qualification run covers exactly this configuration (``harness.core.qualification``).
``report`` is the doctor's JSON (``assay-doctor/1``).

Nothing here may enter a content key (``harness.core.provenance.tool_versions`` is the one that does): a git
commit in a key would discard every stored result at each commit. Results carry it in their provenance.
"""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import harness
from harness import lockfile
from harness.core import qualification
from harness.core import tested as tested_file
from harness.core.tested import RESULTS, Tested, shown
from harness.core.tested import load as load_tested
from harness.digests import digest, file_digest, tree_digest

SCHEMA = "assay-doctor/1"
TESTED, UNTESTED = "tested", "untested"
ROOT = lockfile.ROOT
LOCK = lockfile.LOCK
TESTED_FILE = tested_file.TESTED_FILE
# What Assay is made of when no git commit says it: the digest covers these folders' sources and data.
SOURCES = ("harness", "codegen", "wcet", "toolchains")
SOURCE_SUFFIXES = (".py", ".c", ".h", ".toml", ".ld", ".S")
# Installed beside the locked packages without being one: the installer, and Assay itself.
NOT_LOCKED = frozenset({"pip", "assay"})
# What ``pip freeze`` leaves out of its list: a peer's lock may pin them, the stamp cannot show them.
FREEZE_OMITS = frozenset({"pip", "setuptools", "wheel", "distribute"})
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
    """The interpreter's major.minor (one of the tested ones) and the platform (``sys.platform`` and the machine)."""
    version = version or f"{sys.version_info.major}.{sys.version_info.minor}"
    system = system or f"{sys.platform} {platform.machine()}"
    differences = []
    if version not in tested.pythons:
        differences.append(Difference("python", f"{', '.join(tested.pythons)} in {tested.source}",
                                      f"{version} running"))
    if system != tested.platform:
        differences.append(Difference("platform", f"{tested.platform} in {tested.source}", f"{system} running"))
    return differences


def debian_packages(tested: Tested, installed: dict[str, str] | None, where: str,
                    ) -> tuple[list[Difference], list[str]]:
    """Each Debian package of the tested configuration against its version on ``where`` (``tested.toml``): a
    results package at another version, or on a distribution with no tested versions, is a difference; a
    test-only one a note; a package installed only by ``.ci/setup --test`` and missing a note (the stage that
    needs it fails on its own, naming it); ``installed`` None: no ``dpkg-query`` here, one difference."""
    if installed is None:
        return [Difference("Debian packages", f"{len(tested.packages)} in {tested.source}",
                           "not checked (no dpkg-query on PATH: not a Debian system?)")], []
    expected_here = tested.versions.get(where)
    elsewhere = ", ".join(sorted(tested.versions)) or "none"
    differences, notes = [], []
    for package in tested.packages.values():
        name, found = package.name, installed.get(package.name)
        results = package.role == RESULTS
        if package.name_on(where) is None:
            notes.append(f"{name}: not packaged on {where} (the tests that need it are skipped)")
            continue
        if found is None:
            if results and package.install == tested_file.MAIN:
                differences.append(Difference(name, f"{_expected(expected_here, name, where)} in {tested.source}",
                                              "not installed"))
            else:
                option = "--otawa" if package.install == tested_file.OTAWA else "--test"
                notes.append(f"{name}: not installed ('bash .ci/setup {option}' installs it)")
            continue
        expected = (expected_here or {}).get(name)
        if found == expected:
            continue
        wanted = (f"{expected} in {tested.source}" if expected else
                  f"no tested version for {where} in {tested.source} (tested on {elsewhere})")
        if results:
            differences.append(Difference(name, wanted, f"{found} installed"))
        else:
            notes.append(f"{name} (test-only: cannot change a result): {found} installed, {wanted}")
    return differences, notes


def _expected(table: dict[str, str] | None, name: str, where: str) -> str:
    return (table or {}).get(name) or f"no tested version for {where}"


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


def compare(lock: Path = LOCK, tested: Path = TESTED_FILE, selection: str = qualification.SELECTION,
            ) -> tuple[list[Difference], list[str], dict | None]:
    """(differences, notes, the qualification record of this configuration or None) between this machine and the
    tested configuration of ``lock`` and ``tested``.

    Results packages that moved (or a distribution with no tested versions) are accepted when
    ``assay evidence qualify`` passed ``selection`` on exactly this configuration (``qualification.accepted``):
    they become notes that name that run. Nothing else is: another Python package or no sandbox stays a
    difference."""
    configuration = load_tested(tested)
    where = tested_file.distribution()
    installed = tested_file.machine_versions(configuration, where)
    debian, notes = debian_packages(configuration, installed, where)
    record = refused = None
    if installed is not None:  # looked up on a tested configuration too: a package reuses its run (evidence.tor)
        record, refused = qualification.accepted(current_fingerprint(configuration, installed, where, lock),
                                                 selection)
    if debian and record is not None:
        notes += [f"{d} ({qualification.summary(record)})" for d in debian]
        debian = []
    elif debian and refused:
        notes.append(f"qualification record not accepted: {refused}")
    elif debian and installed is not None:
        notes.append("no qualification record for this configuration: 'assay evidence qualify' runs the "
                     "tool-qualification tests on it and records it (docs/configuration.md)")
    elif record is not None:
        notes.append(qualification.summary(record))
    differences = python_packages(lock) + interpreter(configuration) + debian
    notes += qemu_plugin()
    notes.append(otawa()["summary"])
    peer_differences, peer_notes = peer_environments()
    sandbox_differences, sandbox_notes = isolation()
    return differences + peer_differences + sandbox_differences, notes + peer_notes + sandbox_notes, record


@functools.cache
def otawa() -> dict:
    """OTAWA (``harness.core.otawa_install``), never a difference (Assay's own analyzer needs none): whether
    ``../shared/otawa-bin`` holds an archive, its SHA-256, whether it is unpacked and loads here, the version
    ``owcet`` prints, and an ``owcet`` on PATH (which ``--engine otawa`` uses first); ``summary`` is the note."""
    from harness.core import otawa_install

    on_path = shutil.which("owcet")
    state: dict = {"archive": None, "archive_sha256": None, "unpacked": False, "loads": None, "version": None,
                   "problem": None, "home": None, "owcet_on_path": on_path}
    beside = f"; owcet on PATH: {on_path} (used first)" if on_path else ""
    try:
        archive = otawa_install.archive()
    except RuntimeError as exc:
        return {**state, "problem": str(exc), "summary": f"OTAWA: {exc}{beside}"}
    if archive is None:
        return {**state, "summary": f"OTAWA: no archive in {otawa_install.archive_dir()} (the OTAWA tests skip; "
                                    f"only --engine otawa|both needs it){beside}"}
    found = otawa_install.installed()
    if found is None:
        sha256 = file_digest(archive)
        return {**state, "archive": str(archive), "archive_sha256": sha256,
                "summary": f"OTAWA: {archive.name} sha256 {sha256[:16]} not unpacked ('bash .ci/setup --otawa', or "
                           f"the first OTAWA test, unpacks it){beside}"}
    return {**state, **found.as_dict(), "unpacked": True, "summary": found.describe() + beside}


def current_fingerprint(configuration: Tested, installed: dict[str, str], where: str, lock: Path = LOCK) -> dict:
    """What a qualification record must name to cover this machine (``qualification.fingerprint``)."""
    return qualification.fingerprint(configuration, installed, where,
                                     f"{sys.version_info.major}.{sys.version_info.minor}",
                                     f"{sys.platform} {platform.machine()}", _lock_sha256(lock),
                                     qualification.sources_digest(ROOT))


def _lock_sha256(lock: Path) -> str | None:
    return file_digest(lock) if Path(lock).is_file() else None


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
    found = {"version": harness.__version__, "commit": None, "dirty": None, "sources_sha256": None,
             "requirements_lock_sha256": _lock_sha256(lock)}
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

    differences, notes, record = compare(lock, tested)
    qualified_by = None if record is None else {
        "key": record["key"], "finished_at": record.get("finished_at"), "counts": record["counts"],
        "junit_sha256": record["junit_sha256"], "selection": record["selection"], "folder": record["folder"],
        "summary": qualification.summary(record)}
    return {"schema": SCHEMA, "verdict": UNTESTED if differences else TESTED,
            "differences": [str(d) for d in differences], "notes": notes, "qualified_by": qualified_by,
            "assay": identity(ROOT, lock), "otawa": {k: v for k, v in otawa().items() if k != "summary"},
            "isolation": {**sandbox.isolation().record(), "summary": sandbox.isolation().describe()}}
