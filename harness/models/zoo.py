"""The model zoo: the ACETONE benchmarks by name, and user model files.

``load("lenet5")`` builds a named benchmark once (seeded random weights, see
``harness.models.paper``; the ``trained`` tier is trained on bundled data,
``harness.models.trained``) into ``<cache_dir>/<name>-s<seed>/`` as
``model.keras``, ``model.onnx`` and ``model.json``; later loads read
``model.json`` only and do not import TensorFlow. ``load("net.onnx")`` (or a
``.keras``, ``.h5``, ``.nnet`` path) describes a user file, converting it
where a second format is needed. Anything wrong raises ``ModelError`` with one
line naming the file or name and the cause.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ModelError
from harness.models import cache, user_files
from harness.models.model import DEFAULT_TOLERANCE, FLOAT_COUNTERPART, Model
from harness.models.tflite import INT8_RANGE
from harness.models.tiers import TIERS
from harness.models import tf_runtime  # noqa: F401 - sets TensorFlow's environment defaults, imports nothing heavy

DEFAULT_CACHE_DIR = Path("generated/zoo")


@dataclass(frozen=True)
class ZooEntry:
    """A named benchmark: what it is, where its inputs live, how close outputs must be."""

    name: str
    tier: str  # "default" (built by tests and campaigns), "full" (large, on request), "trained" (real data),
    # "tiny" (the MLPerf Tiny networks, harness.models.tiny) or "int8" (those quantized, harness.models.int8)
    description: str
    input_domain: tuple[float, float]
    tolerance: float = DEFAULT_TOLERANCE


_ACAS_DOMAIN = (-0.5, 0.5)  # ACAS-Xu inputs after the usual normalisation
_IMAGE_DOMAIN = (0.0, 1.0)

_ENTRIES: tuple[ZooEntry, ...] = (
    ZooEntry("acas-reg50", "default",
             "ACAS-Xu surrogate: 5 inputs, 7 hidden ReLU Dense layers of 50, 5 linear outputs", _ACAS_DOMAIN),
    ZooEntry("acas-reg100", "default",
             "ACAS-Xu surrogate: 5 inputs, 7 hidden ReLU Dense layers of 100, 5 linear outputs", _ACAS_DOMAIN),
    ZooEntry("acas-reg200", "default",
             "ACAS-Xu surrogate: 5 inputs, 7 hidden ReLU Dense layers of 200, 5 linear outputs", _ACAS_DOMAIN),
    ZooEntry("acas-decr128", "default",
             "ACAS-Xu surrogate: 5 inputs, hidden ReLU Dense (128, 128, 64, 32, 16), 5 linear outputs", _ACAS_DOMAIN),
    ZooEntry("acas-decr256", "default",
             "ACAS-Xu surrogate: 5 inputs, hidden ReLU Dense (256, 256, 128, 64, 32, 16), 5 linear outputs",
             _ACAS_DOMAIN),
    ZooEntry("lenet5", "default", "LeNet-5 (ACETONE Example 13): 28x28x1, two tanh conv + average pooling, "
             "Dense 120/84 tanh, 10 softmax", _IMAGE_DOMAIN),
    ZooEntry("cifarnet", "default", "CifarNet (ACETONE Figure 5): 32x32x3, zero padding, three ReLU conv, two max "
             "pooling, Dense 64 ReLU, 10 linear", _IMAGE_DOMAIN),
    ZooEntry("alexnet", "full", "AlexNet (ACETONE Figure 6): 228x228x3, five ReLU conv, three max pooling, Dense "
             "4096/4096 ReLU, 1000 softmax", _IMAGE_DOMAIN),
    ZooEntry("vgg16", "full", "VGG-16 (configuration D): 224x224x3, thirteen 3x3 ReLU conv, five max pooling, Dense "
             "4096/4096 ReLU, 1000 softmax", _IMAGE_DOMAIN),
    ZooEntry("lenet5-split", "default", "LeNet-5 split (multi-core ACETONE Figure 2): 28x28x1, two branches of "
             "3-filter tanh conv + average pooling, concatenated, then LeNet-5's conv2, pooling, Dense 120/84 tanh, "
             "10 softmax", _IMAGE_DOMAIN),
    ZooEntry("inception-mini", "default", "GoogLeNet-style (multi-core ACETONE Figure 10) at 32x32x3: ReLU conv 8 + "
             "max pooling, conv 16 + max pooling, two inception modules of four branches (1x1 | 1x1-3x3 | 1x1-5x5 "
             "| maxpool-1x1, 28 then 44 channels), global average pooling, 10 softmax", _IMAGE_DOMAIN),
    # Trained on scikit-learn's bundled data (harness.models.trained): for design-space exploration.
    ZooEntry("digits-cnn", "trained", "digits 8x8x1 (scikit-learn), two 3x3 ReLU conv + max pooling, Dense 64 ReLU, "
             "10 softmax; quality: error rate", _IMAGE_DOMAIN),
    ZooEntry("digits-mlp", "trained", "digits 64 (scikit-learn), Dense 64/32 ReLU, 10 softmax; quality: error rate",
             _IMAGE_DOMAIN),
    ZooEntry("tabular-ae", "trained", "autoencoder on breast_cancer 30 standardised features (scikit-learn), Dense "
             "64/32/8/32/64 ReLU, 30 linear; quality: 1 - AUC of the reconstruction error", (-3.0, 3.0)),
)
_FEATURES = (-1.0, 1.0)  # normalised audio features (MFCC, log-mel)
_ENTRIES += (
    # The MLPerf Tiny inference benchmark's reference networks (harness.models.tiny), seeded weights.
    ZooEntry("resnet8", "tiny", "MLPerf Tiny image classification: ResNet-8, 32x32x3 (CIFAR-10), three residual "
             "stacks of 16/32/64 filters with batch norm, 8x8 average pooling, 10 softmax", _IMAGE_DOMAIN),
    ZooEntry("mobilenet-vww", "tiny", "MLPerf Tiny visual wake words: MobileNetV1 alpha 0.25, 96x96x3, 13 "
             "depthwise-separable blocks with batch norm, 3x3 average pooling, 2 softmax", _IMAGE_DOMAIN),
    ZooEntry("ds-cnn", "tiny", "MLPerf Tiny keyword spotting: DS-CNN, 49x10x1 MFCC features, 10x4 stride-2 conv 64 "
             "and four depthwise-separable blocks of 64 with batch norm, 25x5 average pooling, 12 softmax",
             _FEATURES),
    ZooEntry("fc-autoencoder", "tiny", "MLPerf Tiny anomaly detection: fully connected autoencoder, 640 log-mel "
             "features, Dense 128 x4, 8, 128 x4 with batch norm and ReLU, 640 linear", _FEATURES,
             # float32 rounding of ten layers of 128 (float64 arbiter: C and references alike reach 3e-5)
             tolerance=1e-4),
)
_ENTRIES += tuple(
    # The same networks quantized as MLPerf Tiny deploys them (harness.models.int8): ONNX only, judged bit for bit
    # against the integer arbiter (docs/quantized.md), so no float tolerance is theirs.
    ZooEntry(f"{tiny_entry.name}-int8", "int8", f"{tiny_entry.description}; quantized int8 without a softmax: the "
             "last Dense layer's values (logits) out; QDQ by ONNX Runtime's quantize_static, batch norm folded, "
             "per-channel weights, MinMax over 64 seeded calibration inputs", tiny_entry.input_domain)
    for tiny_entry in _ENTRIES if tiny_entry.tier == "tiny")
_ENTRIES += tuple(
    # The same networks as MLPerf Tiny's reference quantizes them, TFLiteConverter's .tflite (harness.models.int8,
    # harness.models.tflite): int8 integers in and out, so their input domain is the int8 range.
    ZooEntry(f"{tiny_entry.name}-int8-tflite", "int8", f"{tiny_entry.description}; quantized int8 without a softmax: "
             "the last Dense layer's values (logits) out; TFLiteConverter full-integer (int8 input and output), batch "
             "norm folded, per-channel weights, 64 seeded representative inputs; .tflite and its ONNX conversion",
             (float(INT8_RANGE[0]), float(INT8_RANGE[1])))
    for tiny_entry in _ENTRIES if tiny_entry.tier == "tiny")
_BY_NAME = {entry.name: entry for entry in _ENTRIES}


def entries() -> list[ZooEntry]:
    """The named benchmarks, in the order of the paper (section 4.1)."""
    return list(_ENTRIES)


def names(tier: str | None = None) -> list[str]:
    """Benchmark names, all or those of one tier (``TIERS``)."""
    if tier is not None and tier not in TIERS:
        raise ModelError(f"unknown zoo tier '{tier}' (known: {', '.join(TIERS)})")
    return [entry.name for entry in _ENTRIES if tier is None or entry.tier == tier]


def entry(name: str) -> ZooEntry:
    if name not in _BY_NAME:
        raise ModelError(f"unknown zoo model '{name}' (known: {', '.join(names())})")
    return _BY_NAME[name]


def load(name_or_path: str | Path, cache_dir: Path = DEFAULT_CACHE_DIR, seed: int = 0) -> Model:
    """The ``Model`` of a zoo benchmark (built and cached on first use) or of a user file."""
    key = str(name_or_path)
    cache_dir = Path(cache_dir)
    if key in _BY_NAME:
        return _load_benchmark(_BY_NAME[key], cache_dir, seed)
    path = Path(key)
    if path.suffix.lower() in user_files.suffixes() or path.exists() or os.sep in key:
        return user_files.load(path, cache_dir)
    raise ModelError(f"unknown zoo model '{key}' (known: {', '.join(names())}); "
                     f"model files end in {', '.join(user_files.suffixes())} (or are NNEF folders)")


def source_sha256(name_or_path: str | Path) -> str | None:
    """The SHA-256 of what a user file's path holds now (``user_files.source_sha256``), loadable or not: what a
    record about it judged, so that a store can tell the records of a replaced file from the current ones
    (``harness.core.results``). None for a zoo name, which names no file."""
    key = str(name_or_path)
    return None if key in _BY_NAME else user_files.source_sha256(Path(key))


def _builder(zoo_entry: ZooEntry):
    """The module that builds an entry: ``fingerprint(name, seed)`` and ``build(name, seed)`` (a Keras model), or
    for the int8 tier ``quantize`` (of the float model's ONNX file) and ``to_tflite`` (of its Keras model)."""
    from harness.models import int8, paper, tiny, trained

    return {"trained": trained, "tiny": tiny, "int8": int8}.get(zoo_entry.tier, paper)


def _load_benchmark(zoo_entry: ZooEntry, cache_dir: Path, seed: int) -> Model:
    directory = cache_dir / f"{zoo_entry.name}-s{seed}"
    fingerprint = _builder(zoo_entry).fingerprint(zoo_entry.name, seed)
    model = cache.read_cached(directory, fingerprint)
    if model is not None:
        return model
    with cache.locked(cache_dir, directory.name):
        model = cache.read_cached(directory, fingerprint)
        if model is not None:
            return model
        if zoo_entry.tier == "int8":
            return _build_int8(zoo_entry, directory, fingerprint, seed, cache_dir)
        return _build_benchmark(zoo_entry, directory, fingerprint, seed)


def _build_int8(zoo_entry: ZooEntry, directory: Path, fingerprint: str, seed: int, cache_dir: Path) -> Model:
    """The float model of the same seed, loaded through the cache like any benchmark (built on first use), its ONNX
    file quantized (``harness.models.int8``) into ``directory/model.onnx`` (same ABI and domain), the float network
    it stands for beside it (``FLOAT_COUNTERPART``)."""
    import dataclasses

    from harness.models import int8

    float_model = _load_benchmark(_BY_NAME[int8.float_name(zoo_entry.name)], cache_dir, seed)
    _fresh(directory)
    if int8.is_tflite(zoo_entry.name):
        model = _load_tflite(int8.to_tflite(zoo_entry.name, seed, float_model, directory / "converter.tflite"),
                             directory)
    else:
        int8.quantize(zoo_entry.name, seed, float_model, directory / "model.onnx", directory / "float.onnx")
        layouts = float_model.layouts_of("onnx")
        model = dataclasses.replace(float_model, files={"onnx": directory / "model.onnx",
                                                        FLOAT_COUNTERPART: directory / "float.onnx"},
                                    file_layouts={"onnx": layouts, FLOAT_COUNTERPART: layouts})
    model = dataclasses.replace(model, name=zoo_entry.name, input_domain=zoo_entry.input_domain,
                                tolerance=zoo_entry.tolerance, tier=zoo_entry.tier, description=zoo_entry.description)
    cache.write_cached(directory, model, fingerprint, {"seed": seed, "float": float_model.name})
    return model


def _load_tflite(source: Path, directory: Path) -> Model:
    """``source`` read by the registered ``.tflite`` model format, as a user's file is (its copy ``model.tflite``
    and its ONNX conversion ``model.onnx`` in ``directory``); the converter's output is then removed."""
    from harness import registry

    try:
        return registry.load("model_formats", ".tflite")(source, directory)
    finally:
        source.unlink()


def _fresh(directory: Path) -> None:
    """A build's directory, without the ``model.json`` of an earlier build (a failed build leaves none)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.json").unlink(missing_ok=True)


def _build_benchmark(zoo_entry: ZooEntry, directory: Path, fingerprint: str, seed: int) -> Model:
    from harness.models import onnx_export
    from harness.models.tf_runtime import save_keras

    _fresh(directory)
    keras_model = _builder(zoo_entry).build(zoo_entry.name, seed)
    save_keras(keras_model, directory / "model.keras")
    onnx_export.export(keras_model, directory / "model.onnx")
    image = len(keras_model.inputs[0].shape) == 4
    model = Model(
        name=zoo_entry.name,
        files={"keras": directory / "model.keras", "onnx": directory / "model.onnx"},
        input_shape=tuple(int(d) for d in keras_model.inputs[0].shape[1:]),
        output_shape=tuple(int(d) for d in keras_model.outputs[0].shape[1:]),
        layout="HWC" if image else "C",
        output_layout="C",
        file_layouts={"keras": ("HWC", "C"), "onnx": ("CHW", "C")} if image else {"keras": ("C", "C"),
                                                                                 "onnx": ("C", "C")},
        input_domain=zoo_entry.input_domain,
        tolerance=zoo_entry.tolerance,
        tier=zoo_entry.tier,
        description=zoo_entry.description,
    )
    cache.write_cached(directory, model, fingerprint, {"seed": seed, "parameters": int(keras_model.count_params())})
    return model
