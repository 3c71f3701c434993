"""The MLPerf Tiny networks (tier ``tiny``, ``harness.models.tiny``): the benchmark's architectures, built
deterministically, calibrated batch normalisation (outputs not saturated), the ONNX export computing what
Keras computes, and our generator's C passing the semantic campaign on the host. The two large networks
(ResNet-8, MobileNetV1) take about 30 s each to build: ``--run-slow``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from harness.models import tiny, zoo
from harness.references import keras_ref, onnxruntime_ref

SMALL = ["ds-cnn", "fc-autoencoder"]
LARGE = [pytest.param(name, marks=pytest.mark.slow) for name in ("resnet8", "mobilenet-vww")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-zoo")


def test_tier_lists_the_four_networks():
    assert zoo.names("tiny") == list(tiny.NAMES)


@pytest.mark.parametrize("name", [*SMALL, *LARGE])
def test_built_model_matches_its_onnx_export_and_is_not_saturated(name, cache):
    model = zoo.load(name, cache_dir=cache)
    x = np.random.default_rng(3).uniform(*zoo.entry(name).input_domain, (16, *model.input_shape)).astype(np.float32)
    keras_out = keras_ref.KerasReference().run(model, x)
    onnx_out = onnxruntime_ref.OnnxRuntimeReference().run(model, x)
    assert np.max(np.abs(keras_out - onnx_out)) <= 1e-5 + 5e-6 * np.max(np.abs(keras_out))
    if model.output_shape != (640,):  # a softmax: calibrated batch norms keep every class probability open
        assert 0.001 < keras_out.min() and keras_out.max() < 0.999
    else:
        assert np.std(keras_out) > 0.1


def test_same_bytes_from_two_builds(tmp_path):
    first = tiny.build("fc-autoencoder", 0).get_weights()
    second = tiny.build("fc-autoencoder", 0).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    other = tiny.build("fc-autoencoder", 1).get_weights()
    assert not np.array_equal(first[0], other[0])


@pytest.mark.slow
def test_semantic_campaign_passes_on_the_host(tmp_path):
    """DS-CNN, the depthwise-separable one (the autoencoder's Dense layers are covered by the default tier)."""
    done = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", "ds-cnn",
                           "--generators", "assay-v2:keras", "--inputs", "5", "--out", str(tmp_path / "out"),
                           "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    records = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert len(records) == 2 and {r["verdict"] for r in records} == {"pass"}
