"""Hermetic builds (docs/sandbox.md): every compiler of generated C runs in the sandbox, so a source that has the
compiler read a file outside the code's folder (``#include "/…/secret.txt"``) is an ``error`` with one line naming
the file, in ``assay semantic``, ``assay mutate`` and the evidence package's MC/DC build, and nothing outside the
scratch folders is written.

The secret holds ``1.0f`` and the code uses what it includes in a way that leaves the outputs right: were a
compiler unconfined, the include would succeed, the build with it, and the verdict would be ``pass`` (semantic)
or a mutation score (mutate), and these tests fail (checked with ``ASSAY_SANDBOX=off``).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from harness import sandbox
from harness.core.results import ResultStore
from harness.errors import AssayError
from harness.generators.generated import GeneratedCode
from harness.stages.evidence import coverage
from harness.stages.mutate import run as mutate
from harness.stages.semantic import run as semantic

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
WEIGHTS = np.array([[0.5, -1.0], [0.25, 2.0], [-0.75, 0.125]], np.float32)
BIAS = np.array([0.1, -0.2], np.float32)
MISSING = "secret.txt: No such file or directory"  # gcc's words for a file the sandbox does not hold

pytestmark = pytest.mark.skipif(not sandbox.isolation().confined,
                                reason=f"no sandbox on this machine: {sandbox.isolation().reason}")


def leaking_source(secret: str) -> str:
    """A dense layer whose bias of output 0 is ``leak - 1.0f + bias``: right if the include yields ``1.0f``."""
    rows = []
    for j in range(2):
        terms = " + ".join(f"input[{i}] * {float(WEIGHTS[i, j])!r}f" for i in range(3))
        extra = " + (leak - 1.0f)" if j == 0 else ""
        rows.append(f"    output[{j}] = {terms} + {float(BIAS[j])!r}f{extra};")
    return (f"static const float leak =\n#include {json.dumps(secret)}\n;\n"
            "void dense(const float *input, float *output)\n{\n" + "\n".join(rows) + "\n}\n")


@pytest.fixture(scope="module")
def dense_model(tmp_path_factory):
    import keras

    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([WEIGHTS, BIAS])
    model.save(path)
    return path


@pytest.fixture
def leaking(tmp_path):
    """(the ``dir:`` folder, the folder outside holding the secret)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("1.0f\n")
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "net.c").write_text(leaking_source(str(secret)))
    (folder / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2}))
    return folder, outside


def check_error(verdict: str, cause: str, outside) -> None:
    assert verdict == "error" and "\n" not in cause and MISSING in cause, (verdict, cause)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "1.0f\n"


def test_semantic_compiler_cannot_include_a_file_outside(tmp_path, dense_model, leaking):
    folder, outside = leaking
    settings = semantic.Settings(n_inputs=3, work_dir=tmp_path / "work", timeout=60, arbiter=False)
    store = ResultStore(tmp_path / "out" / "results.json")
    (item,) = semantic.plan([str(dense_model)], [f"dir:{folder}"], ["keras"], ["host"], settings).items
    semantic.run_item(item, settings, store)
    (record,) = store.records()
    check_error(record["verdict"], record["cause"], outside)


def test_mutate_compiler_cannot_include_a_file_outside(tmp_path, dense_model, leaking):
    folder, outside = leaking
    settings = mutate.Settings(n_inputs=3, seeds=1, sanitize=0, max_mutants=2, input_sets=("uniform",),
                               work_dir=tmp_path / "work")
    (item,) = mutate.plan([str(dense_model)], [f"dir:{folder}"], settings).items
    record = mutate.run_item(item, settings, mutate.open_store(tmp_path / "mutation.json"))
    check_error(record["verdict"], record["cause"], outside)


@pytest.mark.skipif(coverage.llvm_tools() is None, reason="no clang >= 18 with llvm-cov (MC/DC)")
def test_mcdc_build_cannot_include_a_file_outside(tmp_path, leaking):
    folder, outside = leaking
    code = GeneratedCode.from_directory(folder)
    with pytest.raises(AssayError) as raised:
        coverage.measure_mcdc(code, np.zeros((1, 3), np.float32), tmp_path / "build", tmp_path / "out", 60)
    cause = str(raised.value)
    assert cause.startswith("clang (MC/DC build) failed:") and "secret.txt' file not found" in cause, cause
    assert "\n" not in cause and sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
