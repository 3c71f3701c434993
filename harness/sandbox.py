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
import stat
import subprocess
import sys
import tempfile
import threading
import time
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
                  "filesystem": ("system folders and the build read-only, a fresh folder per run writable"
                                 if self.confined else "the user's rights"),
                  "run_folder": (f"a tmpfs of {limits.file_mib} MiB, removed after the run" if _own_user_ids()
                                 and os.environ.get(SWITCH, "").lower() != "off"
                                 else "a fresh folder, removed after the run; files bounded one by one"),
                  "run_limits": ("memory and processes of the whole run (cgroups: "
                                 + ", ".join(sorted(cgroups())) + ")" if cgroups()
                                 else "per process only (no cgroup this process may make)"),
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
        grouped = ", memory and processes bounded per run" if cgroups() else ""
        return (f"sandbox: bubblewrap {self.version} (no network, system folders read-only, a fresh folder per run "
                f"writable, fixed environment{processes}{grouped})")


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
             processes: int | None = None, own_user: bool = True, cwd: Path | None = None,
             named_within: Sequence[Path] | None = None, no_shell: bool = False) -> Launch:
        limits = settings()
        environment = {**limits.environment, "HOME": str(scratch), **env}
        uid = None
        if own_user and _own_user_ids() and bwrap is not None:
            with _numbers_lock:
                uid = UID_BASE + (os.getpid() % 4096) * 65536 + next(_run_numbers) % 65536
        command = [str(part) for part in argv]
        if bwrap is not None:
            keep_user = ["--cap-drop", "ALL"] if uid is None and os.geteuid() == 0 else []
            command = [bwrap, *_namespaces(), *_binds(scratch, [*readable, *_named(command, scratch, named_within)]),
                       *(_no_shell() if no_shell else []),
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


def _named(argv: Sequence[str], scratch: Path, within: Sequence[Path] | None = None) -> list[Path]:
    """Absolute paths outside the scratch folder that the command names, alone or inside an option
    (``-plugin /lib.so,map=/x``): the program and what it loads must be readable. ``within``: only those inside
    these folders (a compiler's command holds text of the code's manifest: a path hidden there must not be
    bound; docs/sandbox.md)."""
    named = []
    for token in argv:
        # the token whole (a path may hold a comma or an equals sign), then its parts (``-plugin /lib.so,map=/x``)
        for part in dict.fromkeys([token, *token.replace("=", ",").split(",")]):
            part = re.sub(r"^-[A-Za-z](?=/)", "", part)  # -I/dir, -T/script.ld
            if part.startswith("/") and not Path(part).is_relative_to(scratch) and Path(part).exists():
                if within is None or any(Path(part).absolute().is_relative_to(Path(w).absolute()) for w in within):
                    named.append(Path(part))
    return named


SHELLS = ("/usr/bin/dash", "/usr/bin/bash", "/bin/dash", "/bin/bash")


def _no_shell() -> list[str]:
    """Mounts that put ``/dev/null`` over the shells: ``system()`` (QEMU's semihosting ``SYS_SYSTEM``, which has
    the host run a guest's command) then starts nothing (docs/sandbox.md). ``/bin/sh`` is a link to one of them."""
    masked = dict.fromkeys(os.path.realpath(shell) for shell in SHELLS if os.path.isfile(shell))
    return [argument for shell in masked for argument in ("--ro-bind", "/dev/null", shell)]


def _drop_to(uid: int) -> list[str]:
    """setpriv (util-linux) as the sandbox's first program: the run's own user and group id, no supplementary
    groups, no capabilities, and no way back (no_new_privs)."""
    return [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


@contextmanager
def confined(argv: Sequence[str], scratch: Path, readable: Sequence[Path] = (), env: Mapping[str, str] | None = None,
             memory_mib: int | None = None, cpu_seconds: float | None = None, processes: int | None = None,
             own_user: bool = True, cwd: Path | None = None,
             named_within: Sequence[Path] | None = None, no_shell: bool = False) -> Iterator[Launch]:
    """A ``Launch`` of ``argv`` confined to ``scratch`` (``readable``: what it reads besides the system folders
    and what it names; ``env``: what it needs besides the fixed environment; ``processes``: its limit, if not
    the settings' ``processes``; ``cwd``: its working folder, if not ``scratch``); the scratch folder is the
    run's during the block and given back after it, whatever the run left there. ``own_user=False``: a trusted
    program (a compiler) on untrusted input keeps Assay's user id, without any capability, so that it reads
    what the user can read among what the sandbox holds (the process limit needs a user id of its own)."""
    found = isolation()
    scratch = Path(scratch).resolve()
    launch = Launch.make(argv, scratch, readable, env or {}, memory_mib, cpu_seconds,
                         shutil.which("bwrap") if found.confined else None, processes, own_user, cwd, named_within,
                         no_shell)
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


SCRATCH_ENV = "ASSAY_SCRATCH_DIR"  # where runs' fresh folders are made (default: the system's temporary folder)
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MNT_DETACH = 2, 4, 8, 2
_swept: set[Path] = set()


def scratch_root() -> Path:
    """The folder under which each run gets a fresh one: ``$ASSAY_SCRATCH_DIR`` or the temporary folder, then
    ``assay-runs-<uid>``, mode 0700 and the user's own (anything else there is refused: a folder another user
    made or linked could be where a run's outputs are swapped)."""
    root = Path(os.environ.get(SCRATCH_ENV) or tempfile.gettempdir()) / f"assay-runs-{os.geteuid()}"
    root.parent.mkdir(parents=True, exist_ok=True)
    try:
        root.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ConfigError(f"{root}: not a private folder of this user (mode {stat.S_IMODE(info.st_mode):o}, owner "
                          f"{info.st_uid}); remove it, Assay makes it anew")
    if root not in _swept:
        _swept.add(root)
        _sweep(root)
    return root


def _sweep(root: Path) -> None:
    """Remove the folders of runs whose Assay process is gone (killed before it could remove them)."""
    for folder in root.glob("run-*-*"):
        try:
            pid = int(folder.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if not Path(f"/proc/{pid}").exists():
            _remove(folder)


@contextmanager
def fresh_folder() -> Iterator[Path]:
    """A new, empty folder for one run, the only place the run may write, removed with all the run left there
    once the block ends (or by the next Assay, if this one was killed). Where Assay runs as root it is a tmpfs
    of ``settings().file_mib`` MiB (nosuid, nodev, noexec): the run's files together cannot exceed it. Elsewhere a
    plain folder: each file is bounded (``RLIMIT_FSIZE``), their sum is not (docs/sandbox.md).

    Why a fresh folder: a run that can write where Assay keeps builds, stamps, logs or other runs' files can plant
    a link there that Assay itself later follows, outside the sandbox (issue 38). A fresh folder holds only what
    Assay put there before the run, and what the run wrote is read back with ``harness.runners.read_file``."""
    folder = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=scratch_root()))
    mounted = _mount_tmpfs(folder, settings().file_mib)
    try:
        yield folder
    finally:
        if mounted:
            _libc().umount2(str(folder).encode(), _MNT_DETACH)
        _remove(folder)


def _mount_tmpfs(folder: Path, size_mib: int) -> bool:
    if os.geteuid() != 0 or os.environ.get(SWITCH, "").lower() == "off":
        return False
    options = f"size={size_mib}m,mode=0700".encode()
    return _libc().mount(b"tmpfs", str(folder).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                         options) == 0


@functools.cache
def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _remove(folder: Path) -> None:
    """Remove a run's folder without following any link in it, whatever modes the run gave its files."""
    if os.path.ismount(folder):
        _libc().umount2(str(folder).encode(), _MNT_DETACH)
    for path, names, _ in os.walk(folder):
        for name in names:
            child = os.path.join(path, name)
            if not os.path.islink(child):
                os.chmod(child, 0o700)
    shutil.rmtree(folder, ignore_errors=True)


def run(argv: Sequence[str], scratch: Path, timeout: float, readable: Sequence[Path] = (),
        env: Mapping[str, str] | None = None, memory_mib: int | None = None, own_user: bool = True,
        cwd: Path | None = None, capture_output: bool = False, text: bool = False,
        named_within: Sequence[Path] | None = None, no_shell: bool = False,
        **options) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, timeout=timeout, **options)`` confined (``confined``: in ``cwd``, else in
    ``scratch``), with a CPU-time limit of ``timeout`` and the margin; ``memory_mib``: its address space (None:
    not limited), and, where the machine has a memory and a pids cgroup controller, the resident memory and the
    processes of the whole run together (``RunGroup``). Standard input is ``/dev/null`` unless given, and the run
    has no controlling terminal (a session of its own). ``capture_output``: at most ``OUTPUT_KEEP`` bytes of each
    stream are kept, its beginning and its end, however much the run prints (``_capture``). ``no_shell``: the
    shells are masked (``_no_shell``: an emulator's semihosting can then run no host command)."""
    options.setdefault("stdin", subprocess.DEVNULL)
    with confined(argv, scratch, readable, env, memory_mib, timeout, own_user=own_user, cwd=cwd,
                  named_within=named_within, no_shell=no_shell) as launch, RunGroup.make(memory_mib) as group:
        if capture_output:
            options.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        process = subprocess.Popen(launch.argv, cwd=scratch, env=launch.env, start_new_session=True,
                                   preexec_fn=lambda: (launch.limit(), group.enter()), **options)
        try:
            if capture_output:
                stdout, stderr = _capture(process, timeout)
            else:
                process.wait(timeout=timeout)
                stdout = stderr = None
        except subprocess.TimeoutExpired:
            _kill(process, group)
            raise subprocess.TimeoutExpired(argv, timeout) from None
        finally:
            group.kill_all()
    if text and capture_output:
        stdout, stderr = stdout.decode(errors="replace"), stderr.decode(errors="replace")
    done = subprocess.CompletedProcess(launch.argv, process.returncode, stdout, stderr)
    if launch.argv[0] != str(argv[0]) and done.returncode > 128 and done.returncode - 128 in _SIGNALS:
        done.returncode = 128 - done.returncode  # bubblewrap reports a signal as 128 + its number, as a shell does
    return done


OUTPUT_KEEP = 256 * 1024  # bytes of a run's standard output (and of its error output) that Assay keeps
_CHUNK = 65536


def _capture(process: subprocess.Popen, timeout: float) -> tuple[bytes, bytes]:
    """Read both pipes until the process ends, keeping each stream's first and last ``OUTPUT_KEEP / 2`` bytes
    and counting the rest: code that prints a gigabyte costs Assay no more memory than code that prints a line
    (the cause of a failure is in the last lines, which are kept). TimeoutExpired after ``timeout`` seconds."""
    kept: dict[int, list] = {}

    def drain(stream, index: int) -> None:
        head, tail, dropped = bytearray(), bytearray(), 0
        half = OUTPUT_KEEP // 2
        for chunk in iter(lambda: stream.read1(_CHUNK), b""):
            room = half - len(head)
            head += chunk[:max(room, 0)]
            tail += chunk[max(room, 0):]
            if len(tail) > half:
                dropped += len(tail) - half
                del tail[:len(tail) - half]
        kept[index] = [head, tail, dropped]

    readers = [threading.Thread(target=drain, args=(pipe, i), daemon=True)
               for i, pipe in enumerate((process.stdout, process.stderr))]
    for reader in readers:
        reader.start()
    process.wait(timeout=timeout)
    for reader in readers:
        reader.join(timeout=10)  # a grandchild that keeps the pipe open is killed with the run's group
    streams = []
    for index in (0, 1):
        head, tail, dropped = kept.get(index, [b"", b"", 0])
        middle = f"\n[assay: {dropped} bytes of output not kept]\n".encode() if dropped else b""
        streams.append(bytes(head) + middle + bytes(tail))
    return streams[0], streams[1]


def _kill(process: subprocess.Popen, group: "RunGroup") -> None:
    """End a run that timed out: its session, everything in its cgroup, then reap it."""
    for kill in (lambda: os.killpg(process.pid, signal.SIGKILL), process.kill, group.kill_all):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
    process.wait()


@dataclass
class RunGroup:
    """The cgroups one run lives in: its resident memory (``memory_mib``, what all its processes hold together,
    page cache and tmpfs included) and its processes (``settings().processes``) bounded as a whole, where the
    machine lets Assay make cgroups (root, a memory and a pids controller: cgroup v1, or v2 with both enabled for
    children). Elsewhere the per-process limits of ``Launch.limit`` stand alone (``cgroups()`` says which, and
    every record's isolation says it too)."""

    folders: tuple[Path, ...] = ()

    @classmethod
    @contextmanager
    def make(cls, memory_mib: int | None) -> Iterator["RunGroup"]:
        roots = cgroups()
        if not roots:
            yield cls()
            return
        with _numbers_lock:
            name = f"assay-{os.getpid()}-{next(_run_numbers)}"
        folders = []
        try:
            for root in dict.fromkeys(roots.values()):  # v2: one folder holds both controllers
                folder = root / name
                folder.mkdir()
                folders.append(folder)
                if memory_mib is not None:
                    _write(folder, ("memory.limit_in_bytes", "memory.max"), str(memory_mib * _MIB))
                _write(folder, ("pids.max",), str(settings().processes))
            yield cls(tuple(folders))
        finally:
            cls(tuple(folders)).kill_all()
            for folder in folders:
                for _ in range(50):
                    try:
                        folder.rmdir()
                        break
                    except OSError:
                        time.sleep(0.02)

    def enter(self) -> None:
        """In the child, before it executes the command: join the run's cgroups."""
        for folder in self.folders:
            with open(folder / "cgroup.procs", "w") as stream:
                stream.write(str(os.getpid()))

    def kill_all(self) -> None:
        """Kill whatever of the run is still alive (a child that left its session, a daemon)."""
        for folder in self.folders:
            try:
                pids = (folder / "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, PermissionError, ValueError):
                    pass


def _write(folder: Path, names: tuple[str, ...], value: str) -> None:
    """Write ``value`` to the first of ``names`` the cgroup folder has (the controller's v1 or v2 file), if any."""
    for name in names:
        if (folder / name).exists():
            (folder / name).write_text(value)
            return


CGROUP_ROOT = Path("/sys/fs/cgroup")


@functools.cache
def cgroups() -> dict[str, Path]:
    """controller -> the folder under which a run's cgroup is made (this process's own cgroup there), for the
    memory and pids controllers; empty where Assay cannot make them (not root, no such controller, read-only),
    and when ``ASSAY_SANDBOX=off``."""
    if os.geteuid() != 0 or os.environ.get(SWITCH, "").lower() == "off":
        return {}
    try:
        membership = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    found = {}
    for line in membership:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            if controller in ("memory", "pids") and (CGROUP_ROOT / controller).is_dir():
                found[controller] = CGROUP_ROOT / controller / path.lstrip("/")
    if len(found) < 2:  # cgroup v2: both controllers enabled for the children of a folder of our own
        unified = next((line.split(":", 2)[2] for line in membership if line.startswith("0::")), None)
        base = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").is_file() else None
        if unified is None or base is None:
            return {}
        own = base / unified.lstrip("/")
        try:
            enabled = (own / "cgroup.subtree_control").read_text().split()
        except OSError:
            return {}
        if not {"memory", "pids"} <= set(enabled):
            return {}
        found = {"memory": own, "pids": own}
    for controller, folder in found.items():
        probe = folder / f"assay-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError:
            return {}
    return found
