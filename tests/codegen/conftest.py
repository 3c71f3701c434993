"""Fixtures for the code generator's tests: generate, compile strictly, run, compare with the framework.

``check_keras`` and ``check_onnx`` check every strategy: the V2 code they
return, and V1 and V3 generated from the same file and compared with the same
reference outputs (``check_strategies``). V1 may refuse a model that is not a
chain of layers (its inference loop passes one tensor on); ``V1_REFUSALS``
records which, so a test can check that only such models were refused.

Every directory ``codegen.generate`` writes during these tests is compiled
with ``STRICT_FLAGS`` (-Wall -Wextra -Werror -std=c99 -pedantic) when the test
ends, so generated code with a warning (an ``int`` loop counter compared with
a bound beyond INT_MAX, say) fails the test that produced it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen_support import TOLERANCE, Generated, compile_strict, draw_inputs, onnx_reference, run_c, seed_weights

_generated: list[Path] = []  # directories written since the last strict compile
OTHER_STRATEGIES = ("v1", "v3")
V1_REFUSALS: list[str] = []  # messages of V1's refusals in this session (per worker)


@pytest.fixture(scope="session", autouse=True)
def _record_generated():
    """Wrap ``codegen.generate`` for the whole session (module fixtures generate too)."""
    original = codegen.generate

    def generate(model_path, out_dir, **options):
        manifest = original(model_path, out_dir, **options)
        _generated.append(Path(out_dir))
        return manifest

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codegen, "generate", generate)
        yield


@pytest.fixture(autouse=True)
def _compile_generated_strictly():
    """After each test, compile what it (or a module fixture before it) generated, warning-free."""
    yield
    while _generated:
        directory = _generated.pop()
        with tempfile.TemporaryDirectory() as build:
            compile_strict(directory, Path(build))


def pytest_configure(config):
    # Keras 3 on TensorFlow converts variables with np.array(copy=False); numpy 2 warns on every save.
    config.addinivalue_line("filterwarnings",
                            "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")

@pytest.fixture
def check_keras(tmp_path):
    """Save a Keras model, generate from it, run the C and compare with Keras."""
    import keras

    def check(model, *, weights: str = "c", seed_params: bool = True, low: float = -1.0, high: float = 1.0,
              tol: float = TOLERANCE, name: str | None = None) -> Generated:
        if seed_params:
            seed_weights(model)
        path = tmp_path / f"{name or model.name}.keras"
        model.save(path)
        out = tmp_path / f"gen_{name or model.name}_{weights}"
        manifest = codegen.generate(path, out, frontend="keras", weights=weights)
        x = draw_inputs(tuple(model.inputs[0].shape[1:]), low=low, high=high)
        reference = keras.ops.convert_to_numpy(model(x, training=False)).reshape(len(x), -1)
        outputs = run_c(out, x)
        error = float(np.max(np.abs(outputs - reference)))
        assert error <= tol, f"max abs error {error:.3g} > {tol:g} against Keras"
        check_strategies(path, out, "keras", weights, x, reference, tol)
        return Generated(manifest, out, error, outputs)

    return check


@pytest.fixture
def check_onnx(tmp_path):
    """Save an ONNX model, generate from it, run the C and compare with onnxruntime."""

    def check(model, *, weights: str = "c", tol: float = TOLERANCE, name: str = "net") -> Generated:
        import onnx

        onnx.checker.check_model(model, full_check=True)
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, path)
        out = tmp_path / f"gen_{name}_{weights}"
        manifest = codegen.generate(path, out, frontend="onnx", weights=weights)
        x = draw_inputs(tuple(manifest["inputs"][0]["shape"]))
        reference = onnx_reference(path, x)
        outputs = run_c(out, x)
        error = float(np.max(np.abs(outputs - reference)))
        assert error <= tol, f"max abs error {error:.3g} > {tol:g} against onnxruntime"
        check_strategies(path, out, "onnx", weights, x, reference, tol)
        return Generated(manifest, out, error, outputs)

    return check


def check_strategies(path: Path, v2_dir: Path, frontend: str, weights: str, x: np.ndarray, reference: np.ndarray,
                     tol: float, transforms=None) -> dict[str, float]:
    """Generate V1 and V3 from ``path``, run them on ``x`` and compare with ``reference``; return the errors."""
    errors = {}
    for strategy in OTHER_STRATEGIES:
        out = v2_dir.with_name(f"{v2_dir.name}_{strategy}")
        try:
            codegen.generate(path, out, frontend=frontend, weights=weights, strategy=strategy, transforms=transforms)
        except codegen.UnsupportedModel as exc:
            if strategy == "v1" and "assay-v1" in str(exc):
                V1_REFUSALS.append(str(exc))
                continue
            raise
        error = float(np.max(np.abs(run_c(out, x) - reference)))
        assert error <= tol, f"{strategy}: max abs error {error:.3g} > {tol:g} against {frontend}"
        errors[strategy] = error
    return errors
