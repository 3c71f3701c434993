"""``assay peers report FINDING --out DIR``: a folder that reproduces a peer finding without Assay.

What a peer's maintainers need to see a defect for themselves: the model in a file their tool reads, the
inputs, the expected outputs (Assay's Keras reference; ONNX Runtime for a model given as ONNX), their tool's own
API called by a short script, a C driver, and the cause located in their source. ``findings.toml`` (beside this
file) lists the findings this command knows; ``reproducers/<peer>.py`` is the script for each peer, copied as
``reproduce.py`` with ``reproducer_common.py`` (building, running and judging the C: the same for every peer). A
finding's model is a zoo name, ``case:NAME``, a case of the conformance suite (built by ``assay conformance
--cases NAME``, run as a user would, ``harness.core.stagecall``), or ``node:NAME``, a case of its ONNX node
suite (``--suite onnx-node``). The command then runs the script once with the peer
environment's Python, which has the peer's locked closure and nothing of Assay, in the sandbox
(``harness.sandbox``: the script runs the C the peer generated): what it prints and writes (the generated C, the
actual outputs) lands in the folder, and the folder is proof that the reproduction needs only the peer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import references, sandbox
from harness.core import stagecall
from harness.core.inputs import make_inputs
from harness.core.plan import Settings, load_model
from harness.errors import ConfigError
from harness.generators.peers import DRIVERS, PeerEnv
from harness.generators.peers.keras_graph import write
from harness.stages.conformance.spec import SPEC as CONFORMANCE
from harness.tensors import convert

HERE = Path(__file__).resolve().parent
FINDINGS = HERE / "findings.toml"
REPRODUCERS = HERE / "reproducers"
ROLES = ("control", "defective")
KEYS = {"peer": str, "model": str, "inputs": int, "summary": str, "implementations": dict, "causes": list}
RUN_TIMEOUT_S = 1800.0
CASE = "case:"
NODE = "node:"
# The conformance run that writes each kind of case's model file, as `assay conformance` takes it: the Keras
# suite's case with assay-v2 on one input, an ONNX node case (a model given as ONNX: onnx's own backend test) with
# the ONNX variant (the cheapest runs that write the file and record where).
CASE_RUNS = {CASE: ["--generators", "assay-v2:keras", "--inputs", "1"],
             NODE: ["--suite", "onnx-node", "--generators", "assay-v2:onnx"]}
# The reference that computes expected.npy: Keras where the model is one, else ONNX Runtime (a model given as ONNX).
REFERENCES = {"keras": "Keras", "onnxruntime": "ONNX Runtime"}
# The file each peer's own importer reads: ACETONE's Keras 2 reads .h5 (the model rebuilt in its Keras, as Assay
# hands it over), emlearn's Keras 3 the .keras file itself, Aidge the .onnx file (inputs and outputs then in ONNX's
# layouts).
MODEL_FILES = {"acetone-nnet": "model.h5", "emlearn": "model.keras", "aidge": "model.onnx"}
# The peer's own packages (where the causes' paths are), then what the README's short install line adds to them
# (pip resolves the rest); those of them the peer's lock pins.
PACKAGES = {"acetone-nnet": (("acetone-nnet",), ("tensorflow",)), "emlearn": (("emlearn",), ("keras", "jax")),
            "aidge": (("aidge-core", "aidge-onnx", "aidge-backend-cpu", "aidge-export-cpp"), ())}


@dataclass(frozen=True)
class Finding:
    """One entry of ``findings.toml``, validated."""

    name: str
    peer: str
    model: str
    inputs: int
    summary: str
    implementations: dict[str, str]
    causes: list[str]

    @property
    def script(self) -> Path:
        return REPRODUCERS / f"{self.peer.replace('-', '_')}.py"


def findings() -> dict[str, Finding]:
    """Every finding in ``findings.toml``; ConfigError naming the entry and key that is wrong."""
    data = tomllib.loads(FINDINGS.read_text())
    known = {}
    for name, entry in data.items():
        for key, kind in KEYS.items():
            if not isinstance(entry.get(key), kind):
                raise ConfigError(f"{FINDINGS}: [{name}] needs {key} as a {kind.__name__}")
        unknown = set(entry) - set(KEYS)
        bad_roles = {role for role in entry["implementations"].values() if role not in ROLES}
        if unknown or bad_roles:
            raise ConfigError(f"{FINDINGS}: [{name}] has unknown keys {sorted(unknown)} or roles {sorted(bad_roles)} "
                              f"(roles: {', '.join(ROLES)})")
        finding = Finding(name=name, **entry)
        if not finding.script.is_file():
            raise ConfigError(f"{FINDINGS}: [{name}]: no reproducer script for peer {finding.peer} ({finding.script})")
        known[name] = finding
    return known


def write_folder(finding: Finding, out: Path, work: Path, log=print) -> dict:
    """Write ``out`` (created afresh) for ``finding`` and run its script once in the peer's environment; return
    the run's exit status, its last line and where its log is."""
    peer = PeerEnv(finding.peer)
    stamp = peer.ensure(log=log)
    settings = Settings(n_inputs=finding.inputs, work_dir=work)
    model = load_model(_model_source(finding, work, log), settings)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model_file = MODEL_FILES[finding.peer]
    fmt = "onnx" if model_file.endswith(".onnx") else "keras"
    log(f"{finding.name}: {finding.model} as {model_file}, read by the peer's own importer")
    if model_file == "model.h5":
        _keras2_h5(model, peer, out / model_file)
    else:
        shutil.copyfile(model.file(fmt), out / model_file)
    canonical = make_inputs(model, finding.inputs, settings.seed)
    reference = "keras" if "keras" in model.files else "onnxruntime"
    expected = references.get(reference).run(model, canonical)
    in_layout, out_layout = model.layouts_of(fmt)
    np.save(out / "inputs.npy", convert(canonical, model.layout, in_layout).astype(np.float32))
    np.save(out / "expected.npy", convert(expected, model.output_layout, out_layout).astype(np.float32))
    shutil.copyfile(finding.script, out / "reproduce.py")
    for name in ("reproducer_common.py", "driver.c"):
        shutil.copyfile(REPRODUCERS / name, out / name)
    shutil.copyfile(peer.requirements, out / "requirements.txt")  # the closure the peer was tested with
    pins = {name: stamp["pins"][name] for name in sorted(stamp["pins"])}
    (out / "finding.json").write_text(json.dumps({
        "finding": finding.name, "peer": finding.peer, "summary": finding.summary, "model": model_file,
        "input_size": model.input_size, "output_size": model.output_size, "inputs": finding.inputs,
        "seed": settings.seed, "atol": model.tolerance, "rtol": model.rtol, "reference": REFERENCES[reference],
        "implementations": finding.implementations,
        "pins": pins, "python": stamp["python"]}, indent=2) + "\n")
    (out / "README.md").write_text(_readme(finding, model.name, model_file, pins, stamp["python"], model.tolerance,
                                           model.rtol, REFERENCES[reference]))
    log(f"{finding.name}: running reproduce.py with {peer.python} (the peer's environment, no Assay, sandboxed)")
    proc = _run_script(peer, out)
    (out / "run.log").write_text(proc.stdout + proc.stderr)
    lines = proc.stdout.strip().splitlines()
    return {"exit": proc.returncode, "last": lines[-1] if lines else "(no output)", "stdout": proc.stdout,
            "log": out / "run.log"}


def _model_source(finding: Finding, work: Path, log) -> str:
    """A zoo name as it is; a conformance case's model file (``case:NAME``, the Keras suite's ``.keras``;
    ``node:NAME``, an ONNX node case's ``.onnx``), built by ``assay conformance`` (``CASE_RUNS``)."""
    kind = next((prefix for prefix in CASE_RUNS if finding.model.startswith(prefix)), None)
    if kind is None:
        return finding.model
    case = finding.model[len(kind):]
    arguments = ["--cases", case, *CASE_RUNS[kind], "--work", str(work)]
    log(f"{finding.name}: building conformance case {case} (assay conformance {' '.join(arguments)})")
    with tempfile.TemporaryDirectory() as scratch:
        _, status, tail, path = stagecall.run_stage(CONFORMANCE, arguments, Path(scratch))
        files = [c["file"] for c in json.loads(path.read_text())["cases"] if c["name"] == case]
    if not files:
        raise ConfigError(f"{FINDINGS}: [{finding.name}]: assay conformance wrote no case {case} (exit {status}: "
                          f"{tail[-1] if tail else 'no output'})")
    return str(Path(files[0]).resolve())


def _run_script(peer: PeerEnv, out: Path) -> subprocess.CompletedProcess:
    """``python reproduce.py`` in ``out`` with the peer's interpreter, confined to ``out`` (it compiles and runs
    the C the peer wrote): reads the peer's environment, writes nothing else; its HOME is a private /tmp, so the
    peer's Keras leaves no cache in the folder."""
    python = Path(peer.python)
    readable = (python.parent.parent, python.resolve().parent.parent)
    env = {"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp", "TF_CPP_MIN_LOG_LEVEL": "3"}
    with sandbox.confined([str(python), "reproduce.py"], out, readable, env, cpu_seconds=RUN_TIMEOUT_S,
                          processes=sandbox.settings().peer_processes) as launch:
        return subprocess.run(launch.argv, cwd=out, env=launch.env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, check=False, preexec_fn=launch.limit)


def _keras2_h5(model, peer: PeerEnv, h5: Path) -> None:
    """The model rebuilt in the peer's Keras 2 (what Assay hands ACETONE, ``drivers/_keras2.py``), saved as
    ``.h5``: the format the peer's own importer reads."""
    with tempfile.TemporaryDirectory() as scratch:
        spec, weights = write(model, Path(scratch) / "graph")
        code = (f"import sys; sys.path.insert(0, {str(DRIVERS)!r}); import _keras2; "
                f"_keras2.load({str(spec)!r}, {str(weights)!r}).save({str(h5)!r})")
        proc = subprocess.run([str(peer.python), "-c", code], capture_output=True, text=True, cwd=scratch,
                              timeout=RUN_TIMEOUT_S, check=False)
    if proc.returncode != 0 or not h5.is_file():
        lines = proc.stderr.strip().splitlines() or ["no output"]
        raise ConfigError(f"{peer.name}: saving {model.name} as {h5.name} in the peer's Keras failed: {lines[-1]}")


def _readme(finding: Finding, model: str, model_file: str, pins: dict[str, str], python: str, atol: float,
            rtol: float, reference: str) -> str:
    own, added = PACKAGES[finding.peer]
    install = " ".join(f"{name}=={pins[name]}" for name in (*own, *added) if name in pins)
    release = ", ".join(f"{name} {pins[name]}" for name in own if name in pins)
    origin = (f"the case `{finding.model[len(CASE):]}` of Assay's conformance suite" if finding.model.startswith(CASE)
              else f"the case `{finding.model[len(NODE):]}` of ONNX's backend node tests, as Assay's conformance "
                   "suite prepares it" if finding.model.startswith(NODE) else f"the model `{model}` of Assay's zoo")
    roles = "\n".join(f"- `{name}`: {role}" for name, role in finding.implementations.items())
    causes = "\n".join(f"- `{cause.split(': ', 1)[0]}`: {cause.split(': ', 1)[1]}" if ": " in cause else f"- {cause}"
                       for cause in finding.causes)
    return f"""# {finding.name}: {finding.summary}

Written by `assay peers report {finding.name}` (docs/peers.md); runs without Assay.

## Run it

```
python{python.rsplit('.', 1)[0]} -m venv env && env/bin/pip install --no-deps --require-hashes -r requirements.txt
env/bin/python reproduce.py
```

`requirements.txt` is the closure {finding.peer} was tested with, every package pinned with its hashes (Assay's
`harness/generators/peers/{finding.peer}.txt`); `pip install {install}` is the short form, with pip resolving
the rest (which may then differ from the tested closure). gcc is needed (and g++ for a peer that writes C++).

The script asks {finding.peer}'s own API for code from `{model_file}` for each
implementation below, compiles it with `driver.c`, runs it on `inputs.npy` ({finding.inputs} inputs, seed 0,
{origin}) and compares with `expected.npy` ({reference}'s outputs) within
|C - expected| <= {atol:g} + {rtol:g} x |expected|. Exit status 1: the defect is reproduced (a defective
implementation wrong, NaN, crashing, not generated or rejected by a check of the script); 0: every
implementation matches. How the script calls {finding.peer} (options, entry point, anything it adds to the model)
is said at the top of `reproduce.py`.

{roles}

## What is in this folder

- `{model_file}`: the network, in the format the peer's importer reads; `inputs.npy`, `expected.npy`: inputs and
  {reference}'s outputs;
- `reproduce.py`, `reproducer_common.py`, `driver.c`: the script (the peer's part), the building, running and
  judging every reproducer shares, and the C driver (`./run inputs.bin outputs.bin N`);
- `c/<implementation>/`: the C the peer generated, `actual/<implementation>.npy`: its outputs, `reproduction.json`
  and `run.log`: the verdicts and the output of the run Assay made with only the peer installed.

## Cause in the peer's source ({release})

{causes}
"""
