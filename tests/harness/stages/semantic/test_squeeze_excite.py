"""Squeeze-and-excite networks through ``assay semantic`` (issue 43): a per-channel gate ``(1, 1, C)`` broadcast
against the feature map ``(H, W, C)``, the Keras 3 preprocessing layers, silu, hard_silu and hard_sigmoid, in
both variants (the Keras file, its ONNX export) against both references; a model the exporter refuses still runs
on the Keras-only path. The whole MobileNetV3-Small and EfficientNet-B0, built as ``keras.applications`` builds
them, run with ``--run-slow``, MobileNetV3-Small on the Cortex-M4F too (their figures: docs/benchmarks.md,
"Squeeze-and-excite networks")."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import applications_support
from harness.models.tf_runtime import keras


def _semantic(model: Path, tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """``assay semantic`` as a user runs it, on the host; its stderr and records."""
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", str(model), "--quiet",
                           "--out", str(out), "--work", str(tmp_path / "work"), *options],
                          capture_output=True, text=True, timeout=3000)
    path = out / "results.json"
    return done, json.loads(path.read_text())["records"] if path.exists() else []


def _squeeze_excite_block(path: Path) -> Path:
    """Rescaling and Normalization, a hard_silu convolution gated as MobileNetV3 gates (hard-sigmoid written as
    Keras 3 ops), a silu depthwise convolution gated as EfficientNet gates (pooled vector, Reshape, sigmoid), a
    residual Add, a softmax head; seeded weights."""
    k = keras()
    layers = k.layers
    k.utils.set_random_seed(43)
    x = k.Input((8, 8, 3))
    y = layers.Normalization(mean=[0.5, 0.4, 0.3], variance=[0.06, 0.05, 0.07])(layers.Rescaling(0.5, 0.5)(x))
    y = layers.BatchNormalization()(layers.Conv2D(8, 3, strides=2, padding="same", activation="hard_silu")(y))
    gate = layers.Conv2D(8, 1)(layers.Conv2D(4, 1, activation="relu")(layers.GlobalAveragePooling2D(keepdims=True)(y)))
    y = layers.Multiply()([y, layers.ReLU(6.0)(gate + 3.0) * (1.0 / 6.0)])
    z = layers.BatchNormalization()(layers.DepthwiseConv2D(3, padding="same", activation="silu")(y))
    gate = layers.Reshape((1, 1, 8))(layers.GlobalAveragePooling2D()(z))
    gate = layers.Conv2D(8, 1, activation="sigmoid")(layers.Conv2D(2, 1, activation="swish")(gate))
    y = layers.Add()([y, layers.Multiply()([z, gate])])
    y = layers.Dense(5, activation="softmax")(layers.GlobalAveragePooling2D()(y))
    applications_support.perturbed(k.Model(x, y), 43).save(path)
    return path


def test_a_squeeze_and_excite_model_passes_in_both_variants_against_both_references(tmp_path):
    done, records = _semantic(_squeeze_excite_block(tmp_path / "se.keras"), tmp_path, "--inputs", "50")
    assert done.returncode == 0, done.stderr
    assert sorted((r["variant"], r["reference"]) for r in records) == [
        ("keras", "keras"), ("keras", "onnxruntime"), ("onnx", "keras"), ("onnx", "onnxruntime")]
    assert all(r["verdict"] == "pass" for r in records), [(r["variant"], r["reference"], r["cause"]) for r in records]


def test_a_model_the_exporter_refuses_runs_on_the_keras_only_path(tmp_path):
    """A gate of another rank than the map (Keras aligns the vector with the channels): the exporter refuses it,
    naming itself, the layer and the shapes; the Keras variant still runs and passes against Keras."""
    k = keras()
    x = k.Input((4, 4, 3))
    y = k.layers.Conv2D(3, 1)(x)
    gate = k.layers.Dense(3, activation="sigmoid")(k.layers.GlobalAveragePooling2D()(y))
    path = tmp_path / "ranks.keras"
    network = k.Model(x, k.layers.Flatten()(k.layers.Multiply(name="gate")([y, gate])))
    applications_support.perturbed(network, 1).save(path)
    done, records = _semantic(path, tmp_path, "--inputs", "20", "--references", "keras")
    assert done.returncode == 0, done.stderr
    assert "no onnx variant or reference: the Keras->ONNX exporter (harness.models.onnx_export) refuses it: " \
           "unsupported option broadcasting between shapes of different ranks [(3,), (4, 4, 3)] of layer type " \
           "Multiply (layer 'gate')" in done.stderr
    assert [(r["variant"], r["reference"], r["verdict"]) for r in records] == [("keras", "keras", "pass")]


# --- keras.applications networks (slow) ---------------------------------------------------------------------------

# name -> (builder, input size): small enough for a 2-core machine (MobileNetV3-Small at alpha 0.75) and, for
# the Cortex-M4F, for its board's 4 MiB of flash (alpha 0.5: 2.3 MB of weights)
APPLICATIONS = {
    "mobilenetv3small": (lambda a, shape: a.MobileNetV3Small(alpha=0.75, input_shape=shape, weights=None,
                                                              classes=10), 64),
    "efficientnetb0": (lambda a, shape: a.EfficientNetB0(input_shape=shape, weights=None, classes=10), 64),
    "mobilenetv3small-0.5": (lambda a, shape: a.MobileNetV3Small(alpha=0.5, input_shape=shape, weights=None,
                                                                  classes=10), 32),
}


def _application(name: str, folder: Path) -> Path:
    """keras.applications ``name`` with weights drawn from seed 0 and perturbed statistics, as a .keras file."""
    k = keras()
    k.utils.set_random_seed(0)
    build, size = APPLICATIONS[name]
    path = folder / f"{name}-{size}.keras"
    applications_support.perturbed(build(k.applications, (size, size, 3)), 43).save(path)
    return path


def _check_and_print(name: str, done: subprocess.CompletedProcess, records: list[dict], elapsed: float) -> None:
    """Every record of both variants against both references passes; the figures for docs/benchmarks.md."""
    assert done.returncode == 0, done.stderr
    assert len(records) == 4 and all(r["verdict"] == "pass" for r in records), [r["cause"] for r in records]
    for r in records:
        print(f"{name} {r['variant']} on {r['target']} vs {r['reference']}: max |C - ref| {r['max_abs_error']:.3g}, "
              f"tolerance {r['tolerance']:g} + {r['rtol']:g} |ref|, arbiter: {r['arbiter']['text']}")
    print(f"{name}: {elapsed:.0f} s for the command")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["efficientnetb0", "mobilenetv3small"])
def test_a_keras_applications_squeeze_and_excite_network_passes(name, tmp_path):
    """The issue's networks at 64 x 64 with their preprocessing layers, 100 inputs, the default memory checks:
    every record passes (minutes each on 2 cores)."""
    path = _application(name, tmp_path)
    start = time.perf_counter()
    done, records = _semantic(path, tmp_path, "--inputs", "100")
    _check_and_print(name, done, records, time.perf_counter() - start)


@pytest.mark.slow
@pytest.mark.arm
@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"),
                    reason="needs arm-none-eabi-gcc and qemu-system-arm (.ci/setup)")
def test_mobilenetv3_small_passes_on_the_cortex_m4f(tmp_path):
    """MobileNetV3-Small (alpha 0.5, 32 x 32) cross-compiled and run under QEMU, 4 inputs (about a minute)."""
    path = _application("mobilenetv3small-0.5", tmp_path)
    start = time.perf_counter()
    done, records = _semantic(path, tmp_path, "--inputs", "4", "--targets", "cortex-m4f")
    _check_and_print("mobilenetv3small-0.5", done, records, time.perf_counter() - start)
    assert all(r["target"] == "cortex-m4f" for r in records)
