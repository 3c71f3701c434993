"""Isolated environments for other people's generators ("peers"), and the JSON interface that drives them.

A peer such as ``acetone-nnet`` needs Keras 2 (TensorFlow <= 2.12), which
cannot live beside Assay's own Keras 3. Each peer therefore gets a virtual
environment that Assay creates and caches itself under
``$XDG_CACHE_HOME/assay/peers/<name>/`` (``~/.cache`` by default; ``ASSAY_PEERS_DIR``
overrides the root), from the lock ``<name>.txt`` beside this file (exact
versions with hashes, made by ``bash .ci/lock`` from the tested closure ``<name>.in``),
with packages from PyPI only. The environment is built on first use or by
``assay peers setup [NAME]``; its stamp (``assay-peer-env.json``) records the
pins' hash, the Python version, the set-up time and ``pip freeze``, and a
changed pin file rebuilds it.

A peer is driven by a small driver script (``drivers/drive_<name>.py``) run by the
environment's Python, never importing ``harness``: a request JSON line in, a
response JSON line out (``drivers/_protocol.py``), one interpreter serving many
requests (``session.py``). We use the
standard library's ``venv`` and pip's own command line rather than a
environment manager library: they are what every machine with Python has, and
a stamp file is all the bookkeeping needed.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness import lockfile
from harness.digests import digest
from harness.errors import ConfigError, NotSupported
from harness.generators import Adapter
from harness.generators.peers import session
from harness.generators.peers.session import PeerEnvError

HERE = Path(__file__).resolve().parent
DRIVERS = HERE / "drivers"
STAMP = "assay-peer-env.json"
STAMP_SCHEMA = "assay-peer-env/1"
RESPONSE_SCHEMA = "assay-peer-response/1"
OK, NOT_SUPPORTED, ERROR = "ok", "not supported", "error"
SETUP_TIMEOUT_S = 3600.0
# The peers' TensorFlow releases have wheels for CPython <= 3.11: the environments use this interpreter.
PYTHON_CANDIDATES = ("python3.11", "python3.10")


def cache_root() -> Path:
    """Where peer environments live: ``$ASSAY_PEERS_DIR``, else ``$XDG_CACHE_HOME/assay/peers``."""
    if os.environ.get("ASSAY_PEERS_DIR"):
        return Path(os.environ["ASSAY_PEERS_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "assay" / "peers"


def names() -> list[str]:
    """The peers that have a lock file."""
    return sorted(path.stem for path in HERE.glob("*.txt"))


@dataclass(frozen=True)
class PeerEnv:
    """One peer's environment: its pins, its directory, its driver."""

    name: str
    # the PyPI package whose pinned release is the peer's version: the peer's name unless it ships as several
    # packages (Aidge: aidge-core, aidge-onnx, aidge-backend-cpu and aidge-export-cpp, the last its generator)
    package: str | None = None

    @property
    def release(self) -> str:
        """The pinned version of the peer's own package."""
        return self.pins()[self.package or self.name]

    @property
    def requirements(self) -> Path:
        return HERE / f"{self.name}.txt"

    @property
    def directory(self) -> Path:
        return cache_root() / self.name

    @property
    def python(self) -> Path:
        return self.directory / "bin" / "python"

    @property
    def driver(self) -> Path:
        return DRIVERS / f"drive_{self.name.replace('-', '_')}.py"  # never the peer package name itself

    def pins(self) -> dict[str, str]:
        """package -> exact version, from the lock file (``name==version`` lines with their hashes)."""
        if not self.requirements.is_file():
            raise ConfigError(f"peer '{self.name}': no lock file {self.requirements}")
        return {name: pin.version for name, pin in lockfile.read(self.requirements).items()}

    def stamp(self) -> dict | None:
        """The environment's stamp when it is built from the current pins, else None."""
        path = self.directory / STAMP
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if data.get("pins_sha256") != digest(self.pins()) or not self.python.is_file():
            return None
        return data

    def identity(self) -> dict:
        """What code from this peer depends on besides the model: its pins and its driver (content-keyed resume)."""
        return {"peer": self.name, "pins": self.pins(), "driver": digest(self.driver.read_text())}

    def ensure(self, log=None) -> dict:
        """Build the environment unless a stamp for the current pins exists; return the stamp."""
        return self.stamp() or self.setup(log)

    def setup(self, log=None) -> dict:
        """Create the venv afresh and install the pins from PyPI; record the time it took."""
        python = _base_python()
        pins = self.pins()
        if self.directory.exists():
            shutil.rmtree(self.directory)
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        _call([python, "-m", "venv", str(self.directory)], f"peer '{self.name}': creating the venv", log)
        # --no-deps: the lock is the whole closure (pip freeze of a working environment, <name>.in), so nothing
        # is resolved at set-up time; --require-hashes: two machines get the same files, not only the same versions.
        _call([str(self.python), "-m", "pip", "install", "--no-deps", "--require-hashes", "--disable-pip-version-check",
               "-q", "-r", str(self.requirements)], f"peer '{self.name}': installing {self.requirements.name}", log)
        seconds = time.perf_counter() - start
        freeze = subprocess.run([str(self.python), "-m", "pip", "freeze"], capture_output=True, text=True,
                                check=False).stdout.split()
        stamp = {"schema": STAMP_SCHEMA, "peer": self.name, "pins_sha256": digest(pins), "pins": pins,
                 "python": _python_version(self.python), "base_python": python, "setup_s": round(seconds, 1),
                 "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "freeze": freeze,
                 "host": platform.platform()}
        (self.directory / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
        return stamp

    def run(self, request: dict, timeout: float = 900.0) -> dict:
        """The driver's answer to ``request`` (``timeout`` for this request alone); NotSupported for the peer's
        refusal, else PeerEnvError. Paths in ``request`` must be absolute: the driver runs in a scratch folder.
        Sessions are pooled per environment build: a rebuilt one starts afresh."""
        stamp = self.ensure()
        build = (self.name, str(self.python), stamp["pins_sha256"], stamp["created_at"])
        response = check_response(session.request(build, self.python, self.driver, self.name, request, timeout),
                                  self.name)
        response["environment"] = {key: stamp[key] for key in ("python", "pins", "setup_s", "created_at")}
        return response


class PeerGenerator(Adapter):
    """What every peer adapter shares: its version is its pinned release, its identity the environment's."""

    peer: PeerEnv
    depends_on = (HERE,)  # the wrapper and manifest it writes, the Keras graph it hands over, the drivers

    def version(self) -> str:
        return self.peer.release

    def identity(self, model, variant: str) -> dict:
        """The environment's identity and the adapter's own code (``Adapter.identity``: its module and this
        package), so a changed adapter regenerates too."""
        return {**super().identity(model, variant), **self.peer.identity()}

    def single_io(self, model) -> None:
        """NotSupported for a model of several inputs or outputs: the peers' C entries and drivers take one input
        and one output, and none packs them as Assay's data plane does (``Model.inputs``, docs/zoo.md)."""
        if model.is_packed:
            raise NotSupported(f"{self.name}: {model.name} has {len(model.inputs)} inputs and {len(model.outputs)} "
                               "outputs; this peer's adapter takes one input and one output")

    def float_io(self, path: Path) -> None:
        """NotSupported for an ONNX graph whose input or output is not float32 (a quantized layer cut out of a
        network: int8, uint8, float8...): the wrapper hands the peer's entry Assay's float32 buffers as they are, and
        only Assay's own generator converts an integer input or output to and from them (docs/quantized.md,
        "Integer graph inputs and outputs"); reading a peer's int8 output as float32 would be a verdict on the
        adapter, not on the peer."""
        import onnx
        from onnx import TensorProto

        graph = onnx.load(str(path), load_external_data=False).graph
        constants = {tensor.name for tensor in graph.initializer}
        for kind, value in [("input", v) for v in graph.input if v.name not in constants] + \
                           [("output", v) for v in graph.output]:
            elem_type = value.type.tensor_type.elem_type
            if elem_type != TensorProto.FLOAT:
                raise NotSupported(f"{self.name}: the graph's {kind} '{value.name}' is "
                                   f"{TensorProto.DataType.Name(elem_type)}; this peer's adapter passes float32 "
                                   "buffers and converts no other type")


def check_response(response: dict, who: str) -> dict:
    """A driver's ``ok`` response as it is; NotSupported with the peer's message for its refusal; else
    PeerEnvError (the peer crashed, or the answer is not this interface's)."""
    if response.get("schema") != RESPONSE_SCHEMA:
        raise PeerEnvError(f"{who}: driver response has schema {response.get('schema')!r}, not {RESPONSE_SCHEMA}")
    status, message = response.get("status"), response.get("message") or ""
    if status == NOT_SUPPORTED:
        raise NotSupported(f"{who}: {message}")
    if status != OK:
        raise PeerEnvError(f"{who}: {message}")
    return response


def _base_python() -> str:
    """A CPython the peers' pinned wheels exist for (3.11 or 3.10), found on PATH."""
    for name in PYTHON_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    if sys.version_info[:2] in ((3, 11), (3, 10)):
        return sys.executable
    raise PeerEnvError(f"peer environments need one of {', '.join(PYTHON_CANDIDATES)} on PATH")


def _python_version(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, check=False).stdout.strip()


def _call(command: list[str], what: str, log) -> None:
    if log:
        log(f"{what} ...")
    proc = subprocess.run(command, capture_output=True, text=True, timeout=SETUP_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if not line.startswith("WARNING")]
        raise PeerEnvError(f"{what} failed (exit {proc.returncode}): {(lines or ['no output'])[-1]}")
