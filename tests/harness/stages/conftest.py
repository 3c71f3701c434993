"""Fixtures the stage tests share."""

import numpy as np
import pytest

# Dense(3 -> 2): hand-written C for it is in the tests that use it
DENSE_WEIGHTS = np.array([[0.5, -1.0], [0.25, 2.0], [-0.75, 0.125]], np.float32)
DENSE_BIAS = np.array([0.1, -0.2], np.float32)


@pytest.fixture(scope="module")
def dense_keras_model(tmp_path_factory) -> str:
    """A real Keras file: 3 inputs -> Dense(2) with DENSE_WEIGHTS and DENSE_BIAS."""
    import keras

    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([DENSE_WEIGHTS, DENSE_BIAS])
    model.save(path)
    return str(path)


def loop_dense_c(n_inputs: str = "3", allocate: bool = False) -> str:
    """Hand-written C for the dense layer with loops, as another tool would write it: ``n_inputs`` is the
    inner loop's limit (a literal, or an expression read at run time), ``allocate`` takes a scratch buffer
    from ``malloc`` on the first call. No manifest loop bounds: its ``assay.json`` lists only the entry."""
    weights = ", ".join(repr(float(w)) + "f" for w in DENSE_WEIGHTS.ravel())
    bias = ", ".join(repr(float(b)) + "f" for b in DENSE_BIAS)
    scratch = ("    static float *scratch;\n    if (!scratch) scratch = malloc(2 * sizeof(float));\n"
               if allocate else "    float scratch[2];\n")
    return (f"#include <stdlib.h>\nstatic const float W[6] = {{{weights}}};\nstatic const float B[2] = {{{bias}}};\n"
            "static volatile int n_in = 3;\n"
            f"void dense(const float *input, float *output)\n{{\n{scratch}"
            "    for (int o = 0; o < 2; ++o) {\n        scratch[o] = B[o];\n"
            f"        for (int i = 0; i < {n_inputs}; ++i) {{\n            scratch[o] += input[i] * W[i * 2 + o];\n"
            "        }\n        output[o] = scratch[o];\n    }\n}\n")


@pytest.fixture
def loop_dense_source():
    """``loop_dense_c`` itself, for tests that edit the C, with the layer's ``(weights, bias)``: a fixture, since a
    test module cannot import a conftest when pytest runs outside the source tree (tool qualification)."""
    return loop_dense_c, (DENSE_WEIGHTS, DENSE_BIAS)


@pytest.fixture
def loop_dense_dir(tmp_path):
    """``make(name, n_inputs="3", allocate=False)`` -> ``dir:PATH`` of ``loop_dense_c`` with the small
    ``assay.json`` (entry and sizes only: no symbols, no loops)."""
    import json

    def make(name: str, n_inputs: str = "3", allocate: bool = False) -> str:
        directory = tmp_path / name
        directory.mkdir()
        (directory / "net.c").write_text(loop_dense_c(n_inputs, allocate))
        (directory / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2}))
        return f"dir:{directory}"

    return make


@pytest.fixture(scope="session")
def real_otawa():
    """The OTAWA of ``../shared/otawa-bin`` unpacked and checked (``harness.core.otawa_install.usable``); skips with
    why not (no archive, or the dynamic loader's one-line message)."""
    from harness.core import otawa_install

    found, reason = otawa_install.usable()
    if found is None:
        pytest.skip(reason)
    return found


@pytest.fixture
def otawa_on_path(real_otawa, monkeypatch):
    """The real OTAWA's ``bin`` first on PATH (and ``OTAWA_HOME``), as a user who unpacked it would have it."""
    import os

    monkeypatch.setenv("PATH", f"{real_otawa.bin}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("OTAWA_HOME", str(real_otawa.home))
    return real_otawa
