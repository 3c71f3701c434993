"""NNEF export and import: export -> import -> generate (assay-v2, NNEF front end) -> oracle against the original.

The round trip compares the C generated from the exported NNEF folder with the
references of the *original* zoo model (Keras and ONNX Runtime on its own
files), so a slip in the writer, the import (nnef-tools' converter) or the
generator's NNEF front end fails it. The smallest zoo models run by default,
the others with --run-slow.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from harness import references
from harness.core.inputs import make_inputs
from harness.tensors import convert
from harness.errors import ModelError
from harness.generators import get as get_generator
from harness.models import nnef, zoo
from harness.runners.host import run_generated

N_INPUTS = 20
FAST = ("acas-reg50", "lenet5")
SLOW = tuple(name for name in zoo.names("default") if name not in FAST)


def _round_trip(name: str, tmp_path) -> None:
    cache = tmp_path / "zoo"
    original = zoo.load(name, cache_dir=cache)
    folder = tmp_path / f"{name}.nnef"
    summary = nnef.export_onnx(original.file("onnx"), folder, name)
    text = (folder / "graph.nnef").read_text()
    assert "padding = []" not in text and "version 1.0;" in text  # no implicit (automatic) padding anywhere
    imported = zoo.load(str(folder), cache_dir=cache)
    assert set(imported.files) == {"nnef", "onnx"} and imported.layout in ("C", "CHW")
    generator = get_generator("assay-v2")
    assert "nnef" in generator.variants(imported)
    code = generator.generate(imported, "nnef", tmp_path / "c")
    manifest = json.loads((code.directory / "manifest.json").read_text())
    assert [layer["name"] for layer in manifest["layers"]][-1] == summary["output"]
    x = make_inputs(original, N_INPUTS, seed=3)
    c_out = run_generated(code.directory, convert(x, original.layout, imported.layout).reshape(N_INPUTS, -1))
    for reference in ("keras", "onnxruntime"):
        expected = references.get(reference).run(original, x).reshape(N_INPUTS, -1)
        assert np.allclose(c_out, expected, atol=original.tolerance, rtol=original.rtol), \
            f"{name}: C from NNEF vs {reference}: max error {np.max(np.abs(c_out - expected)):.3g}"
    # The import path alone (nnef-tools' ONNX) agrees with the original too.
    converted = references.get("onnxruntime").run(imported, convert(x, original.layout, imported.layout))
    assert np.allclose(converted.reshape(N_INPUTS, -1), references.get("onnxruntime").run(original, x).reshape(
        N_INPUTS, -1), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", FAST)
def test_round_trip_of_small_zoo_models(name, tmp_path):
    _round_trip(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_round_trip_of_every_default_zoo_model(name, tmp_path):
    _round_trip(name, tmp_path)


def test_keras_same_pooling_is_written_bottom_right(tmp_path):
    """§II.C of the paper: Keras 'same' pools pad bottom/right only; the NNEF text says so per side."""
    from harness.models import onnx_export
    from harness.models.tf_runtime import keras

    k = keras()
    inputs = k.Input((5, 5, 2))
    model = k.Model(inputs, k.layers.MaxPooling2D(2, 2, padding="same", name="pool")(inputs))
    onnx_export.export(model, tmp_path / "pool.onnx")
    nnef.export_onnx(tmp_path / "pool.onnx", tmp_path / "pool.nnef", "pool")
    text = (tmp_path / "pool.nnef" / "graph.nnef").read_text()
    line = next(line for line in text.splitlines() if "max_pool(" in line)
    assert "padding = [(0, 0), (0, 0), (0, 1), (0, 1)]" in line and "border = 'ignore'" in line


def test_a_broken_folder_is_one_line(tmp_path):
    folder = tmp_path / "bad.nnef"
    folder.mkdir()
    (folder / "graph.nnef").write_text("version 1.0;\ngraph g(x) -> (y) { x = external(shape = [1, 2]); y = nope(x); }")
    with pytest.raises(ModelError, match=r"bad.nnef: invalid NNEF .*nope"):
        zoo.load(str(folder), cache_dir=tmp_path / "zoo")
    missing = tmp_path / "weights.nnef"
    missing.mkdir()
    (missing / "graph.nnef").write_text("version 1.0;\ngraph g(x) -> (y) { x = external(shape = [1, 2]); "
                                         "w = variable(shape = [3, 2], label = 'w'); y = linear(x, w); }")
    result = subprocess.run([sys.executable, "-m", "harness.cli", "generate", "--model", str(missing), "--out",
                             str(tmp_path / "c"), "--work", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "weights.nnef" in result.stderr
