"""Assay's side of the peer JSON interface: a driver interpreter kept running across generations.

A peer's driver imports TensorFlow 2.12/2.15 or Keras 3 before it can do anything: 25 to 60 s on the 2-core
machine, against about a second for the generation itself. So a driver serves many requests
(``drivers/_protocol.py``): one JSON line in, one out. Each process of Assay (a campaign, a pytest-xdist
worker) keeps its idle sessions in a pool per peer environment; a thread takes one (or starts one), and gives
it back after a request that got an answer, so concurrent callers never share an interpreter. A session
whose driver died or did not answer in time is killed and dropped: the request is an error naming the peer
(with the last line the driver printed), and the next request starts a fresh interpreter. The pool closes
its sessions when Assay exits (their standard input ends, so they return).

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
from pathlib import Path

from harness.errors import AssayError

CLOSE_TIMEOUT_S = 5.0
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
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONNOUSERSITE": "1", "PYTHONPATH": ""}
        self._proc = subprocess.Popen([str(python), str(driver)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, env=env, cwd=self.scratch)
        self._pending = b""

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def call(self, request: dict, timeout: float) -> dict:
        """The driver's response to ``request`` (run in a scratch folder of its own); PeerEnvError, and the
        session closed, when the driver dies or does not answer within ``timeout`` seconds."""
        with tempfile.TemporaryDirectory(dir=self.scratch, ignore_cleanup_errors=True) as folder:
            line = json.dumps({"scratch": folder, "request": request}).encode() + b"\n"
            try:
                self._proc.stdin.write(line)
                self._proc.stdin.flush()
            except OSError:
                pass  # it died: reading finds the end of its output and says how
            answer = self._read_line(time.monotonic() + timeout)
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
