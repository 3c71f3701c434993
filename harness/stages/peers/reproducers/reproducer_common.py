"""What every peer's reproducer shares (written by ``assay peers report`` beside ``reproduce.py``; docs/peers.md).

Imports only numpy and the standard library, so that it runs wherever the peer runs. ``reproduce.py`` (one
per peer) knows how to ask its peer for C and how to read the model with the peer's own Keras; this module
builds that C (and C++, for a peer that writes C++) with ``driver.c``, runs it on ``inputs.npy``, compares with
``expected.npy`` and decides: exit status 1 when an implementation listed as defective is wrong, NaN, crashes,
cannot be generated or is rejected by a check of the script (the defect is reproduced), 0 when every
implementation matches (the defect is gone).
"""

import json
import os
import signal
import subprocess

import numpy as np


def load(here):
    """``finding.json``, the inputs and the expected outputs (one row per input)."""
    with open(os.path.join(here, "finding.json")) as handle:
        finding = json.load(handle)
    inputs = np.load(os.path.join(here, "inputs.npy"))
    expected = np.load(os.path.join(here, "expected.npy")).reshape(len(inputs), -1)
    return finding, inputs, expected


class Rejected(Exception):
    """The generated code fails a check of the script before it runs (its bytes, its shapes): the verdict
    "REJECTED (why)" of that implementation."""


def build(here, finding, source_dir, sources, header, call, include_dirs=()):
    """gcc -O0 of the peer's ``sources`` with ``driver.c``, which includes ``header`` and runs ``call``. C++
    sources (``.cpp``) are compiled first by g++ under the same flags (``-std=c++17``, and ``-fno-exceptions
    -fno-rtti`` as bare-metal C++ builds use), into ``obj/`` beside the binary, and linked with libstdc++."""
    binary = os.path.join(source_dir, "run")
    includes = [f"-I{source_dir}", *(f"-I{folder}" for folder in include_dirs)]
    cxx = [source for source in sources if source.endswith(".cpp")]
    objects, commands = [], []
    if cxx:
        names = [os.path.splitext(os.path.basename(source))[0] for source in cxx]
        if len(set(names)) != len(names):
            raise Rejected("two C++ sources share a file name; their objects would overwrite each other")
        folder = os.path.join(source_dir, "obj")
        os.makedirs(folder, exist_ok=True)
        compile_cxx = ["g++", "-O0", "-std=c++17", "-ffp-contract=off", "-fno-exceptions", "-fno-rtti", *includes,
                       "-c", *cxx]
        subprocess.run(compile_cxx, check=True, cwd=folder)
        objects = [os.path.join(folder, f"{name}.o") for name in names]
        commands.append(compile_cxx)
    link = ["gcc", "-O0", "-std=c99", "-ffp-contract=off", *includes,
            f"-DIN_SIZE={finding['input_size']}", f"-DOUT_SIZE={finding['output_size']}",
            f'-DENTRY_HEADER="{header}"', f"-DENTRY_CALL={call}",
            *(source for source in sources if source not in cxx), os.path.join(here, "driver.c"), *objects,
            *(["-lstdc++"] if objects else []), "-lm", "-o", binary]
    subprocess.run(link, check=True)
    commands.append(link)
    return binary, " && ".join(" ".join(command) for command in commands)


def run(here, binary, inputs, output_size):
    """The outputs the binary wrote (as many whole rows as it finished) and how it ended, if badly."""
    fed, got = os.path.join(here, "inputs.bin"), binary + ".out"
    inputs.astype("<f4").tofile(fed)
    proc = subprocess.run([binary, fed, got, str(len(inputs))], capture_output=True, text=True, check=False)
    outputs = np.fromfile(got, dtype="<f4") if os.path.exists(got) else np.zeros(0, np.float32)
    done = len(outputs) // output_size
    crash = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
             else f"exit {proc.returncode}" if proc.returncode else None)
    return outputs[: done * output_size].reshape(done, output_size), crash


def verdict(actual, expected, crash, atol, rtol):
    if crash:
        return f"CRASH ({crash} after {len(actual)} of {len(expected)} inputs)"
    if np.isnan(actual).any() or np.isinf(actual).any():
        return f"NaN/Inf on {int((~np.isfinite(actual)).any(axis=1).sum())} of {len(actual)} inputs"
    error = np.abs(actual - expected)
    wrong = (error > atol + rtol * np.abs(expected)).any(axis=1)
    return (f"WRONG on {int(wrong.sum())} of {len(actual)} inputs, max |C - expected| {error.max():.4e}" if wrong.any()
            else f"ok, max |C - expected| {error.max():.4e}")


def main(here, predict, make, reader="Keras"):
    """Check that the peer's own ``reader`` (its Keras, or ONNX's reference implementation for a peer that reads
    ONNX) reads the model to ``expected.npy`` (``predict(finding, inputs)``), then for each implementation
    ``make(finding, implementation)`` -> (binary, build command), run and judge it. A generation that raises is
    that implementation's verdict ("NOT GENERATED", or "REJECTED" for ``Rejected``), not the script's end."""
    finding, inputs, expected = load(here)
    predicted = np.asarray(predict(finding, inputs)).reshape(len(inputs), -1)
    print(f"{reader} on {finding['model']} vs expected.npy: max |difference| "
          f"{np.abs(predicted - expected).max():.4e}")
    results, reproduced = {}, False
    for implementation, role in finding["implementations"].items():
        try:
            binary, command = make(finding, implementation)
        except Rejected as exc:
            line, command = f"REJECTED ({exc})", None
        except Exception as exc:  # noqa: BLE001 - the peer's own failure is the verdict
            line, command = f"NOT GENERATED ({type(exc).__name__}: {exc})", None
        else:
            actual, crash = run(here, binary, inputs, finding["output_size"])
            os.makedirs(os.path.join(here, "actual"), exist_ok=True)
            np.save(os.path.join(here, "actual", f"{implementation}.npy"), actual)
            line = verdict(actual, expected, crash, finding["atol"], finding["rtol"])
        broken = not line.startswith("ok")
        reproduced |= broken and role == "defective"
        results[implementation] = {"role": role, "verdict": line, "build": command}
        print(f"{implementation:>18} ({role}): {line}")
    with open(os.path.join(here, "reproduction.json"), "w") as handle:
        json.dump(results, handle, indent=2)
    print(f"{finding['finding']}: {'REPRODUCED' if reproduced else 'not reproduced'}")
    return 1 if reproduced else 0
