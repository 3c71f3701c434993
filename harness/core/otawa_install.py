"""OTAWA from ``../shared/otawa-bin/``: unpacked into the cache, checked that it loads, described for ``assay doctor``.

``../shared/otawa-bin/`` (beside the source tree, or ``$ASSAY_OTAWA_ARCHIVE_DIR``) holds a relocatable OTAWA 2.0
build for Debian 12 x86_64 (``otawa-*.tar.xz``: ``owcet``, ``mkff``, ``odisasm``, the ARM loader, the ``trivial``
script, an lp_solve ILP plugin). ``install`` unpacks it into ``$XDG_CACHE_HOME/assay/otawa/<sha256[:16]>/``
(``~/.cache`` by default), keyed by the archive's SHA-256, once per machine (a lock serialises ``pytest -n``
workers; the folder appears whole or not at all). Its runtime libraries come from Debian (``toolchains/tested.toml``:
``lp-solve``, ``libxml2``, ``libxslt1.1``, ``libsqlite3-0``, the ``test`` install group), never from a download.

``check`` says whether it loads here: ``owcet --version`` runs, and the dynamic loader finds every library of
every plugin ``owcet`` loads (``ld.so --list``, so a missing ``liblpsolve55.so`` is named before an analysis
needs it). Where it cannot load (another distribution, a missing library) ``Otawa.problem`` is the loader's own
one-line message, which the OTAWA tests skip with and ``assay doctor`` prints.

``python -m harness.core.otawa_install`` (``.ci/setup --test`` and ``--otawa``) unpacks and checks it, one line.
Standard library, pyelftools (the loader named in ``owcet``), ``harness.core.locks`` and ``harness.digests``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.core import locks
from harness.digests import file_digest

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE_DIR = ROOT.parent / "shared" / "otawa-bin"
PATTERN = "otawa-*.tar.xz"
STAMP = ".assay-otawa"  # written last in an unpacked folder: its content is the archive's SHA-256
TOOLS = ("owcet", "mkff", "odisasm")
_TIMEOUT_S = 60.0
_OWN_LIBRARIES = ("lib", "lib/otawa/otawa", "lib/otawa/proc/otawa")  # owcet's RUNPATH, from its bin folder


@dataclass(frozen=True)
class Otawa:
    """One unpacked OTAWA: its ``home`` (``bin/owcet`` inside), the archive it came from and that archive's
    SHA-256; ``version`` is what ``owcet --version`` printed (``owcet 1.2.0``), ``problem`` the loader's one-line
    message when it cannot load here (then ``version`` may be None)."""

    home: Path
    archive: Path
    sha256: str
    version: str | None
    problem: str | None

    @property
    def bin(self) -> Path:
        return self.home / "bin"

    @property
    def loads(self) -> bool:
        return self.problem is None

    def describe(self) -> str:
        """One line for ``assay doctor``."""
        where = f"{self.archive.name} sha256 {self.sha256[:16]}, unpacked in {self.home}"
        if self.problem:
            return f"OTAWA: cannot load here ({where}): {self.problem}"
        return f"OTAWA: {self.version} ({where})"

    def as_dict(self) -> dict:
        return {"home": str(self.home), "archive": str(self.archive), "archive_sha256": self.sha256,
                "version": self.version, "loads": self.loads, "problem": self.problem}


def archive_dir() -> Path:
    """``$ASSAY_OTAWA_ARCHIVE_DIR``, else ``../shared/otawa-bin`` beside the source tree."""
    return Path(os.environ.get("ASSAY_OTAWA_ARCHIVE_DIR") or ARCHIVE_DIR)


def archive(folder: Path | None = None) -> Path | None:
    """The OTAWA archive in ``folder`` (default ``archive_dir()``); None without one. Two archives are an error:
    which one is tested would be a guess."""
    folder = archive_dir() if folder is None else Path(folder)
    found = sorted(folder.glob(PATTERN)) if folder.is_dir() else []
    if len(found) > 1:
        raise RuntimeError(f"{folder}: {len(found)} OTAWA archives ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/assay/otawa`` (``~/.cache`` by default)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "assay" / "otawa"


def _home_of(sha256: str, cache: Path) -> Path:
    return cache / sha256[:16]


def installed(folder: Path | None = None, cache: Path | None = None) -> Otawa | None:
    """The unpacked OTAWA of the archive in ``folder``, checked (None: no archive, or not unpacked yet)."""
    found = archive(folder)
    if found is None:
        return None
    sha256 = file_digest(found)
    unpacked = _unpacked(_home_of(sha256, cache or cache_dir()), sha256)
    return None if unpacked is None else check(unpacked, found, sha256)


def install(folder: Path | None = None, cache: Path | None = None) -> Otawa | None:
    """Unpack the archive in ``folder`` into the cache unless it is there already, and check it; None when there
    is no archive."""
    found = archive(folder)
    if found is None:
        return None
    sha256 = file_digest(found)
    target = _home_of(sha256, cache or cache_dir())
    with locks.exclusive(target.parent / f".{target.name}.lock"):
        if _unpacked(target, sha256) is None:
            _unpack(found, target, sha256)
    home = _unpacked(target, sha256)
    if home is None:
        raise RuntimeError(f"{found}: no bin/owcet in the archive")
    return check(home, found, sha256)


def _unpacked(target: Path, sha256: str) -> Path | None:
    """The OTAWA folder (``bin/owcet`` inside) of a complete unpacking of the archive ``sha256`` in ``target``."""
    stamp = target / STAMP
    if not stamp.is_file() or stamp.read_text().strip() != sha256:
        return None
    homes = sorted(path.parent.parent for path in target.glob("*/bin/owcet"))
    return homes[0] if homes else None


def _unpack(source: Path, target: Path, sha256: str) -> None:
    """Unpack into a new folder beside ``target``, stamp it, then rename it into place (whole or not at all)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with tarfile.open(source, "r:xz") as archive_file:
            archive_file.extractall(scratch, filter="data")  # no absolute paths, no links out, no devices
        (scratch / STAMP).write_text(sha256 + "\n")
        if target.exists():
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


def check(home: Path, source: Path, sha256: str) -> Otawa:
    """Whether the OTAWA in ``home`` loads here: ``owcet --version``, then every plugin's libraries."""
    owcet = home / "bin" / "owcet"
    try:
        result = subprocess.run([str(owcet), "--version"], capture_output=True, text=True, timeout=_TIMEOUT_S,
                                check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Otawa(home, source, sha256, None, f"cannot run {owcet}: {exc}")
    version = _first_line(result.stdout)
    if not version.startswith("owcet "):  # owcet 1.2.0 prints its version and exits 1; the loader exits 127
        return Otawa(home, source, sha256, None, _first_line(result.stderr) or version
                     or f"owcet --version exited with status {result.returncode} and printed nothing")
    return Otawa(home, source, sha256, version, _plugin_problem(home, owcet))


def _plugin_problem(home: Path, executable: Path) -> str | None:
    """The loader's message for the first plugin of ``home/lib/otawa`` whose libraries it cannot find."""
    loader = _interpreter(executable)
    if loader is None:
        return None
    # a plugin finds OTAWA's own libraries (and the plugins it needs) through owcet's RUNPATH: the same folders
    env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(str(home / part) for part in _OWN_LIBRARIES)}
    for plugin in sorted((home / "lib" / "otawa").rglob("*.so")):
        try:
            result = subprocess.run([loader, "--list", str(plugin)], capture_output=True, text=True, env=env,
                                    timeout=_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot run the dynamic loader {loader}: {exc}"
        if result.returncode != 0:
            return _first_line(result.stderr) or f"{plugin.name}: the dynamic loader exited {result.returncode}"
    return None


def _interpreter(executable: Path) -> str | None:
    """The dynamic loader an ELF executable names (its PT_INTERP), or None."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(executable, "rb") as stream:
            for segment in ELFFile(stream).iter_segments():
                if segment["p_type"] == "PT_INTERP":
                    return segment.get_interp_name()
    except (OSError, ELFError):
        return None
    return None


def _first_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else ""


def usable() -> tuple[Otawa | None, str]:
    """(the OTAWA to run, "") after ``install``, or (None, why not): no archive, or the loader's one-line message
    where it cannot load. The OTAWA tests skip with that reason (tests/wcet/conftest.py)."""
    found = install()
    if found is None:
        return None, f"no OTAWA archive ({PATTERN}) in {archive_dir()}"
    if not found.loads:
        return None, f"OTAWA cannot load here: {found.problem}"
    return found, ""


def main(argv: list[str] | None = None) -> int:
    """Unpack and check; prints one line. Exit 0 when it loads or there is no archive, 1 when it cannot load."""
    del argv
    found = install()
    if found is None:
        print(f"OTAWA: no {PATTERN} in {archive_dir()}; the tests that run OTAWA will skip")
        return 0
    print(found.describe())
    return 0 if found.loads else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
