"""Reproduces an acetone-nnet finding without Assay (written by ``assay peers report``; docs/peers.md).

Needs only what ACETONE itself needs: ``pip install acetone-nnet==1.0.post1 tensorflow==2.12.1`` (the versions
in ``finding.json``; Python 3.10 or 3.11) and gcc. Run ``python reproduce.py`` in this folder. For each
implementation named in ``finding.json`` it asks ACETONE's own API for C from ``model.h5``
(``CodeGenerator(file=..., versions={"Conv2D": ...}).generate_c_files(...)`` into ``c/<implementation>/``),
compiles it with ``driver.c`` (gcc -O0 -std=c99, ACETONE's ``main.c`` and ``test_dataset.c`` left out), runs
it on ``inputs.npy`` and compares with ``expected.npy`` (Keras's outputs, computed by Assay) within
``|C - expected| <= atol + rtol * |expected|``. It also checks that Keras 2 reads ``model.h5`` to the same
function (``model.predict``). Writes ``actual/<implementation>.npy`` and ``reproduction.json``; prints one line per
implementation. Exit status 1 when an implementation listed as defective is wrong, NaN or crashes (the defect
is reproduced), 0 when every one matches (the defect is gone).
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
NOT_COMPILED = ("main.c", "test_dataset.c")  # ACETONE's test program and its random data set


def generate(finding, implementation):
    from acetone_nnet import CodeGenerator

    out = os.path.join(HERE, "c", implementation)
    shutil.rmtree(out, ignore_errors=True)  # ACETONE refuses to overwrite: a re-run starts from an empty folder
    os.makedirs(out)
    # ACETONE's implementations are its Conv2D ones; "default" lets it choose (a model without convolution).
    versions = None if implementation == "default" else {"Conv2D": implementation}
    generator = CodeGenerator(file=os.path.join(HERE, finding["model"]), function_name="inference", nb_tests=1,
                              versions=versions, verbose=False)
    generator.generate_c_files(out)
    return out


def build(finding, source_dir):
    sources = sorted(os.path.join(source_dir, name) for name in os.listdir(source_dir)
                     if name.endswith(".c") and name not in NOT_COMPILED)
    binary = os.path.join(source_dir, "run")
    command = ["gcc", "-O0", "-std=c99", "-ffp-contract=off", f"-I{source_dir}",
               f"-DIN_SIZE={finding['input_size']}", f"-DOUT_SIZE={finding['output_size']}",
               '-DENTRY_HEADER="inference.h"', "-DENTRY_CALL=inference(output, input)",
               *sources, os.path.join(HERE, "driver.c"), "-lm", "-o", binary]
    subprocess.run(command, check=True)
    return binary, " ".join(command)


def run(binary, inputs, output_size):
    fed, got = os.path.join(HERE, "inputs.bin"), binary + ".out"
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


def main():
    with open(os.path.join(HERE, "finding.json")) as handle:
        finding = json.load(handle)
    inputs = np.load(os.path.join(HERE, "inputs.npy"))
    expected = np.load(os.path.join(HERE, "expected.npy")).reshape(len(inputs), -1)
    import tensorflow as tf

    keras2 = tf.keras.models.load_model(os.path.join(HERE, finding["model"]), compile=False)
    keras_shape = (len(inputs), *keras2.input_shape[1:])
    predicted = keras2.predict(inputs.reshape(keras_shape), verbose=0).reshape(len(inputs), -1)
    print(f"Keras 2 on {finding['model']} vs expected.npy: max |difference| {np.abs(predicted - expected).max():.4e}")
    results, reproduced = {}, False
    for implementation, role in finding["implementations"].items():
        source_dir = generate(finding, implementation)
        binary, command = build(finding, source_dir)
        actual, crash = run(binary, inputs, finding["output_size"])
        os.makedirs(os.path.join(HERE, "actual"), exist_ok=True)
        np.save(os.path.join(HERE, "actual", f"{implementation}.npy"), actual)
        line = verdict(actual, expected, crash, finding["atol"], finding["rtol"])
        broken = not line.startswith("ok")
        reproduced |= broken and role == "defective"
        results[implementation] = {"role": role, "verdict": line, "build": command}
        print(f"{implementation:>18} ({role}): {line}")
    with open(os.path.join(HERE, "reproduction.json"), "w") as handle:
        json.dump(results, handle, indent=2)
    print(f"{finding['finding']}: {'REPRODUCED' if reproduced else 'not reproduced'}")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
