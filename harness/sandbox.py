"""Hermetic execution: code that other tools wrote, the emulators that run it and the peer generators run in a
bubblewrap sandbox, never with the user's rights over the machine.

Why: Assay compiles and runs C from any ``dir:`` folder or peer tool, on models users hand it. Unconfined, that
code (on the host; under ``qemu-arm``, whose guest system calls reach the host; under ``qemu-system-arm``, whose
semihosting opens any host file by path and runs host commands) can read the user's files, write anywhere, open
sockets, fork without end or exhaust the memory; and a result that depends on the user's environment, locale,
time zone or home folder is not reproducible evidence.

A sandboxed run (``run``, or ``confined`` for a long-lived process) gets:
- a mount namespace with only the system folders of ``sandbox.toml`` and what the run names (its program, its
  interpreter's installation, a plugin) bound read-only, and its scratch folder, the one place it may write;
  a private ``/tmp``, ``/proc`` and a minimal ``/dev``;
- no network (a network namespace of its own), its own PID, IPC and UTS namespaces, a new session, and death
  with its parent: a timeout kills everything the run started;
- a fixed environment (``sandbox.toml``'s, ``HOME`` its scratch folder, and what the run itself needs);
- resource limits: address space, file size, CPU time (the run's timeout and a margin), no core files and,
  when Assay runs as root, a user id of its own (``UID_BASE`` + a number unique among the runs alive on the
  machine) under which ``RLIMIT_NPROC`` bounds its processes and threads (root is exempt from that limit). The
  scratch folder belongs to that user id during the run and is given back after it.

Where bubblewrap is missing or cannot create its namespaces (no user namespaces for a non-root user, a
container that forbids them), Assay says so once on standard error and runs with the fixed environment and
the limits only; ``isolation()`` is what every record's provenance and ``assay doctor`` state, so the fallback
is never silent. ``ASSAY_SANDBOX=off`` asks for that fallback (to compare timings, or to debug a run).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError

SETTINGS_FILE = Path(__file__).with_name("sandbox.toml")
SWITCH = "ASSAY_SANDBOX"  # "off": run without the sandbox (recorded in provenance)
BUBBLEWRAP, NONE = "bubblewrap", "none"
UID_BASE = 1_000_000_000  # a run as root gets UID_BASE + (Assay's pid mod 4096) x 65536 + its number in Assay
_MIB = 1 << 20
_PROBE_TIMEOUT_S = 30.0
_LIMIT_KEYS = {"memory_mib", "emulator_memory_mib", "file_mib", "processes", "peer_processes", "cpu_margin_s"}
_SIGNALS = frozenset(signal.Signals)
_run_numbers = itertools.count()
_numbers_lock = threading.Lock()


@dataclass(frozen=True)
class Settings:
    """``sandbox.toml``: the system folders a run sees and its limits."""

    system: tuple[str, ...]
    memory_mib: int
    emulator_memory_mib: int
    file_mib: int
    processes: int
    peer_processes: int
    cpu_margin_s: float
    environment: dict[str, str]


@functools.cache
def settings(path: Path = SETTINGS_FILE) -> Settings:
    """The sandbox's settings, validated: each key present with its type, nothing else."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the sandbox settings: {exc}") from None
    unknown = set(data) - {"system", "limits", "environment"}
    limits, environment, system = data.get("limits"), data.get("environment"), data.get("system")
    problems = [f"unknown key {key!r}" for key in sorted(unknown)]
    if not isinstance(system, list) or not all(isinstance(p, str) and p.startswith("/") for p in system):
        problems.append("'system' must be a list of absolute paths")
    if not isinstance(limits, dict) or set(limits) != _LIMIT_KEYS:
        problems.append(f"[limits] must have exactly {', '.join(sorted(_LIMIT_KEYS))}")
    elif not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in limits.values()):
        problems.append("[limits] values must be positive numbers")
    if not isinstance(environment, dict) or not all(isinstance(v, str) for v in environment.values()):
        problems.append("[environment] must map names to strings")
    if problems:
        raise ConfigError(f"{path}: {'; '.join(problems)}")
    return Settings(system=tuple(system), environment=dict(environment),
                    **{key: (float(v) if key == "cpu_margin_s" else int(v)) for key, v in limits.items()})


@dataclass(frozen=True)
class Isolation:
    """What runs are confined by on this machine: ``sandbox`` is ``bubblewrap`` (with its ``version``) or
    ``none`` (with the ``reason``)."""

    sandbox: str
    version: str | None = None
    reason: str | None = None

    @property
    def confined(self) -> bool:
        return self.sandbox == BUBBLEWRAP

    def record(self) -> dict:
        """The provenance entry: the sandbox and every limit a run had."""
        limits = settings()
        record = {"sandbox": self.sandbox, "version": self.version, "reason": self.reason,
                  "network": "none" if self.confined else "the machine's",
                  "filesystem": ("system folders read-only, the run's scratch folder writable" if self.confined
                                 else "the user's rights"),
                  "environment": {**limits.environment, "HOME": "<scratch>"},
                  "limits": {"memory_mib": limits.memory_mib, "emulator_memory_mib": limits.emulator_memory_mib,
                             "file_mib": limits.file_mib, "cpu": f"timeout + {limits.cpu_margin_s:g} s",
                             "processes": limits.processes if _own_user_ids() else None,
                             "peer_processes": limits.peer_processes if _own_user_ids() else None}}
        return record

    def describe(self) -> str:
        """One line for ``assay doctor`` and the fallback warning."""
        if not self.confined:
            return f"sandbox: none ({self.reason}); generated code and peer tools run with the user's rights"
        processes = (f", at most {settings().processes} processes" if _own_user_ids()
                     else ", processes not limited (not root: no user id of its own)")
        return (f"sandbox: bubblewrap {self.version} (no network, system folders read-only, scratch folder "
                f"writable, fixed environment{processes})")


@functools.cache
def isolation() -> Isolation:
    """This machine's isolation, probed once per process; a fallback is announced once on standard error."""
    found = _probe()
    if not found.confined:
        print(f"assay: {found.describe()}", file=sys.stderr)
    return found


def _probe() -> Isolation:
    if os.environ.get(SWITCH, "").lower() == "off":
        return Isolation(NONE, reason=f"{SWITCH}=off")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Isolation(NONE, reason="bubblewrap (bwrap) not on PATH; install the Debian package bubblewrap")
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False).stdout.split()
    try:
        with tempfile.TemporaryDirectory(prefix="assay-sandbox-") as scratch:
            probe = Launch.make(["true"], Path(scratch), (), {}, None, None, bwrap)
            done = subprocess.run(probe.argv, env=probe.env, capture_output=True, text=True,
                                  timeout=_PROBE_TIMEOUT_S, check=False, preexec_fn=probe.limit)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Isolation(NONE, reason=f"bubblewrap could not start: {exc}")
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return Isolation(NONE, reason=f"bubblewrap cannot create its namespaces here ({tail})")
    return Isolation(BUBBLEWRAP, version=version[-1] if version else "?")


def _own_user_ids() -> bool:
    """Whether each run gets a user id of its own (Assay runs as root, who may switch to any)."""
    return os.geteuid() == 0


@dataclass(frozen=True)
class Launch:
    """A command ready to start confined: ``argv`` and ``env`` for ``subprocess``, ``limit`` its preexec_fn."""

    argv: list[str]
    env: dict[str, str]
    uid: int | None  # the run's own user id (root only)
    memory_bytes: int | None
    cpu_seconds: int | None
    processes: int

    @classmethod
    def make(cls, argv: Sequence[str], scratch: Path, readable: Sequence[Path], env: Mapping[str, str],
             memory_mib: int | None, cpu_seconds: float | None, bwrap: str | None,
             processes: int | None = None, own_user: bool = True, cwd: Path | None = None) -> Launch:
        limits = settings()
        environment = {**limits.environment, "HOME": str(scratch), **env}
        uid = None
        if own_user and _own_user_ids() and bwrap is not None:
            with _numbers_lock:
                uid = UID_BASE + (os.getpid() % 4096) * 65536 + next(_run_numbers) % 65536
        command = [str(part) for part in argv]
        if bwrap is not None:
            keep_user = ["--cap-drop", "ALL"] if uid is None and os.geteuid() == 0 else []
            command = [bwrap, *_namespaces(), *_binds(scratch, [*readable, *_named(command, scratch)]),
                       "--chdir", str(Path(cwd or scratch).absolute()), *keep_user, "--",
                       *(_drop_to(uid) if uid is not None else []), *command]
        return cls(argv=command, env=environment, uid=uid,
                   memory_bytes=None if memory_mib is None else memory_mib * _MIB,
                   cpu_seconds=None if cpu_seconds is None else int(cpu_seconds + limits.cpu_margin_s + 1),
                   processes=processes or limits.processes)

    def limit(self) -> None:
        """In the child, before it executes the command: the resource limits (inherited by everything it starts)."""
        limits = settings()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mib * _MIB,) * 2)
        if self.memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (self.memory_bytes,) * 2)
        if self.cpu_seconds is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds,) * 2)
        if self.uid is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (self.processes,) * 2)


def _namespaces() -> list[str]:
    flags = ["--unshare-net", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
             "--hostname", "assay", "--die-with-parent", "--new-session"]
    return flags if os.geteuid() == 0 else ["--unshare-user", *flags]


def _binds(scratch: Path, readable: Sequence[Path]) -> list[str]:
    """bubblewrap's mounts: the system folders and ``readable`` read-only (a path inside another is left to
    that one), a private /tmp, /proc and /dev, then the scratch folder writable (last, so that it is writable
    even inside a folder bound read-only). The folders that lead to them are made traversable (0755): the
    run's own user id must reach what it may read."""
    binds = ["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    paths = set()
    for entry in settings().system:
        path = Path(entry)
        if path.is_symlink():  # /bin -> usr/bin on a merged-/usr system
            binds += ["--symlink", os.readlink(path), entry]
        elif path.exists():
            paths.add(path)
    for path in (Path(p).absolute() for p in readable):
        if path.exists():
            paths.update({path, path.resolve()})
    paths = sorted(p for p in paths if not any(o != p and p.is_relative_to(o) for o in paths))
    folders = sorted({str(a) for p in [*paths, scratch] for a in p.parents if a != Path("/")}, key=len)
    for folder in folders:
        binds += ["--perms", "0755", "--dir", folder]
    for path in paths:
        binds += ["--ro-bind", str(path), str(path)]
    return [*binds, "--bind", str(scratch), str(scratch)]


def _named(argv: Sequence[str], scratch: Path) -> list[Path]:
    """Absolute paths outside the scratch folder that the command names, alone or inside an option
    (``-plugin /lib.so,map=/x``): the program and what it loads must be readable."""
    named = []
    for token in argv:
        for part in token.replace("=", ",").split(","):
            part = re.sub(r"^-[A-Za-z](?=/)", "", part)  # -I/dir, -T/script.ld
            if part.startswith("/") and not Path(part).is_relative_to(scratch) and Path(part).exists():
                named.append(Path(part))
    return named


def _drop_to(uid: int) -> list[str]:
    """setpriv (util-linux) as the sandbox's first program: the run's own user and group id, no supplementary
    groups, no capabilities, and no way back (no_new_privs)."""
    return [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


@contextmanager
def confined(argv: Sequence[str], scratch: Path, readable: Sequence[Path] = (), env: Mapping[str, str] | None = None,
             memory_mib: int | None = None, cpu_seconds: float | None = None, processes: int | None = None,
             own_user: bool = True, cwd: Path | None = None) -> Iterator[Launch]:
    """A ``Launch`` of ``argv`` confined to ``scratch`` (``readable``: what it reads besides the system folders
    and what it names; ``env``: what it needs besides the fixed environment; ``processes``: its limit, if not
    the settings' ``processes``; ``cwd``: its working folder, if not ``scratch``); the scratch folder is the
    run's during the block and given back after it, whatever the run left there. ``own_user=False``: a trusted
    program (a compiler) on untrusted input keeps Assay's user id, without any capability, so that it reads
    what the user can read among what the sandbox holds (the process limit needs a user id of its own)."""
    found = isolation()
    scratch = Path(scratch).resolve()
    launch = Launch.make(argv, scratch, readable, env or {}, memory_mib, cpu_seconds,
                         shutil.which("bwrap") if found.confined else None, processes, own_user, cwd)
    if launch.uid is None:
        yield launch
        return
    owner = scratch.stat()
    os.chown(scratch, launch.uid, launch.uid)
    try:
        yield launch
    finally:
        _give_back(scratch, launch.uid, owner.st_uid, owner.st_gid)


def hand_over(folder: Path, launch: Launch) -> None:
    """Make ``folder`` (inside the scratch folder, made after the run started) and all in it the run's."""
    if launch.uid is None:
        return
    for path in [folder, *Path(folder).rglob("*")]:
        os.lchown(path, launch.uid, launch.uid)


def _give_back(scratch: Path, uid: int, owner: int, group: int) -> None:
    """Make ``scratch`` and everything the run's user id created there ``owner``'s again."""
    os.chown(scratch, owner, group)
    for folder, names, files in os.walk(scratch):
        for name in [*names, *files]:
            path = os.path.join(folder, name)
            if os.lstat(path).st_uid == uid:
                os.lchown(path, owner, group)


def run(argv: Sequence[str], scratch: Path, timeout: float, readable: Sequence[Path] = (),
        env: Mapping[str, str] | None = None, memory_mib: int | None = None, own_user: bool = True,
        cwd: Path | None = None, **options) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, timeout=timeout, **options)`` confined (``confined``: in ``cwd``, else in
    ``scratch``), with a CPU-time limit of ``timeout`` and the margin; ``memory_mib``: its address space (None:
    not limited)."""
    with confined(argv, scratch, readable, env, memory_mib, timeout, own_user=own_user, cwd=cwd) as launch:
        done = subprocess.run(launch.argv, cwd=scratch, env=launch.env, timeout=timeout, check=False,
                              preexec_fn=launch.limit, **options)
    if launch.argv[0] != str(argv[0]) and done.returncode > 128 and done.returncode - 128 in _SIGNALS:
        done.returncode = 128 - done.returncode  # bubblewrap reports a signal as 128 + its number, as a shell does
    return done
