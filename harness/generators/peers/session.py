"""Assay's side of the peer JSON interface: a driver interpreter kept running across generations.

A peer's driver imports TensorFlow 2.12/2.15 or Keras 3 before it can do anything: 25 to 60 s on the 2-core
machine, against about a second for the generation itself. So a driver serves many requests
(``drivers/_protocol.py``): one JSON line in, one out. Each process of Assay (a campaign, a pytest-xdist
worker) keeps its idle sessions in a pool per peer environment; a thread takes one (or starts one), and gives
it back after a request that got an answer, so concurrent callers never share an interpreter. A session
whose driver died or did not answer in time is killed and dropped: the request is an error naming the peer
(with the last line the driver printed), and the next request starts a fresh interpreter. The pool closes
its sessions when Assay exits (their standard input ends, so they return).

A driver runs in the sandbox (``harness.sandbox``, docs/sandbox.md): no network, its environment and
interpreter read-only, its scratch folder the one place it writes. It cannot reach the model or the output
folder a request names, so each request's paths are copies in the request's scratch folder, and the output
folder's copy goes back once the driver answered.

We use ``subprocess`` with a line per message rather than a RPC library: the driver side runs in the peer's
environment, where only the standard library may be assumed.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from harness import sandbox
from harness.errors import AssayError

CLOSE_TIMEOUT_S = 5.0
PROTOCOL = Path(__file__).with_name("drivers")  # the drivers' shared side of the interface (_protocol.py)
OUTPUT_KEY = "out_dir"  # the request's folder the peer writes (drivers/_protocol.py); every other path is read
_IDLE: dict[tuple, list[PeerSession]] = {}
_IDLE_LOCK = threading.Lock()


class PeerEnvError(AssayError):
    """A peer environment could not be built or its driver misbehaved (not a verdict about the model)."""


class PeerSession:
    """One running driver: requests in on its standard input, responses out on its standard output."""

    def __init__(self, python: Path | str, driver: Path, who: str):
        self.who = who
        self.scratch = Path(tempfile.mkdtemp(prefix=f"assay-{who}-"))
        self._log = (self.scratch / "driver.log").open("w+b")  # a file, not a pipe: never fills up
        # In the sandbox (harness.sandbox): it reads its environment, its interpreter and its driver, and
        # writes its scratch folder, where each request's files are copied (``_exchange``); no network.
        readable = (Path(python).parent.parent, Path(python).resolve().parent.parent, Path(driver).parent, PROTOCOL)
        self._confinement = ExitStack()
        env = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONNOUSERSITE": "1", "PYTHONUNBUFFERED": "1"}  # its log in order
        self._launch = self._confinement.enter_context(sandbox.confined(
            [str(python), str(driver)], self.scratch, readable, env, processes=sandbox.settings().peer_processes))
        self._proc = subprocess.Popen(self._launch.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, env=self._launch.env, cwd=self.scratch,
                                      preexec_fn=self._launch.limit)
        self._pending = b""

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def call(self, request: dict, timeout: float) -> dict:
        """The driver's response to ``request`` (run in a scratch folder of its own); PeerEnvError, and the
        session closed, when the driver dies or does not answer within ``timeout`` seconds."""
        with tempfile.TemporaryDirectory(dir=self.scratch, ignore_cleanup_errors=True) as folder:
            inside, copies = _exchange(request, Path(folder))
            sandbox.hand_over(Path(folder), self._launch)
            line = json.dumps({"scratch": folder, "request": inside}).encode() + b"\n"
            try:
                self._proc.stdin.write(line)
                self._proc.stdin.flush()
            except OSError:
                pass  # it died: reading finds the end of its output and says how
            answer = self._read_line(time.monotonic() + timeout)
            for original, copy, written in copies:
                if written and answer:
                    shutil.copytree(copy, original, dirs_exist_ok=True)
                answer = answer and answer.replace(json.dumps(str(copy))[1:-1].encode(),
                                                   json.dumps(str(original))[1:-1].encode())
        if answer is None:
            self.close(kill=True)
            raise PeerEnvError(f"{self.who}: driver timed out after {timeout:g} s")
        if not answer:
            code = self._proc.wait()
            tail = self._log_tail()
            self.close()
            raise PeerEnvError(f"{self.who}: driver exited {code} without a response: {tail}")
        try:
            return json.loads(answer)
        except json.JSONDecodeError:
            self.close(kill=True)
            raise PeerEnvError(f"{self.who}: driver answered something that is not JSON: {answer[:200]!r}") from None

    def close(self, kill: bool = False) -> None:
        """End the driver (its input ends; killed if ``kill`` or if it does not return) and remove its scratch."""
        if self._proc.poll() is None:
            if not kill:
                self._proc.stdin.close()
                try:
                    self._proc.wait(CLOSE_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    pass
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._log):
            try:
                stream.close()
            except OSError:
                pass  # a pipe whose reader is gone: nothing left to flush
        self._confinement.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _read_line(self, deadline: float) -> bytes | None:
        """One line of the driver's output; ``b""`` at its end (the driver died), None at the deadline."""
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _log_tail(self) -> str:
        self._log.flush()
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"


def _exchange(request: dict, folder: Path) -> tuple[dict, list[tuple[Path, Path, bool]]]:
    """``request`` with every absolute path it names replaced by a copy in ``folder``, the only folder the
    sandboxed driver can reach, and (original, copy, written) for each: an ``out_dir`` is written by the peer
    (its copy goes back to the original after the answer), any other path is read."""
    copies = []

    def swap(key: str, value):
        if isinstance(value, dict):
            return {name: swap(name, item) for name, item in value.items()}
        if isinstance(value, list):
            return [swap(key, item) for item in value]
        if not isinstance(value, str) or not value.startswith("/"):
            return value
        original = Path(value)
        copy = folder / f"{len(copies)}-{original.name}"
        if original.is_dir():
            shutil.copytree(original, copy)
        elif original.is_file():
            shutil.copy2(original, copy)
        elif key == OUTPUT_KEY:
            copy.mkdir()
        else:
            return value
        copies.append((original, copy, key == OUTPUT_KEY))
        return str(copy)

    return swap("", request), copies


def request(key: tuple, python: Path | str, driver: Path, who: str, message: dict, timeout: float) -> dict:
    """``message`` answered by an idle session of the environment ``key`` names (a new one if none is idle)."""
    with _IDLE_LOCK:
        idle = _IDLE.get(key, [])
        session = idle.pop() if idle else None
    if session is None or not session.alive:
        if session is not None:
            session.close()
        session = PeerSession(python, driver, who)
    response = session.call(message, timeout)  # a dead or late driver closes its session and raises
    with _IDLE_LOCK:
        _IDLE.setdefault(key, []).append(session)
    return response


@atexit.register
def close_all() -> None:
    """End every idle session (at exit, or when a test wants fresh interpreters)."""
    with _IDLE_LOCK:
        sessions = [session for idle in _IDLE.values() for session in idle]
        _IDLE.clear()
    for session in sessions:
        session.close()
