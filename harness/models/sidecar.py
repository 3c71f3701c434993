"""A user model's settings file: ``<model file>.assay.toml`` beside it (``net.onnx.assay.toml``).

It sets the input domain (one interval for every input element, or one per
input feature or per element) and the tolerances of that one model::

    # net.onnx.assay.toml
    atol = 1e-4                       # absolute tolerance (Model.tolerance)
    rtol = 1e-5                       # relative tolerance (Model.rtol)
    domain = [-1.0, 1.0]              # [low, high] for every input element, or:
    # low  = [-0.33, -0.5, -0.5, -0.5, -0.5]   # one value per input feature, or per element,
    # high = [ 0.68,  0.5,  0.5,  0.5,  0.5]   # or a number for all
    float_model = "net-float.onnx"    # a quantized model's float network (relative to this file): its
                                      # quantization error is reported, never judged (docs/quantized.md)

Every key is optional; an unknown key, a wrong type or length, a non-finite
value or a low above its high is a ``ModelError`` of one line naming the TOML
file and the key. ``read`` checks what does not depend on the model's shape;
``apply`` resolves list lengths against the loaded model. The file's SHA-256
(``Sidecar.digest``) is part of the model's cache fingerprint, so an edited
file is always re-read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.models.model import Model

SUFFIX = ".assay.toml"
KEYS = ("atol", "rtol", "domain", "low", "high", "float_model")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class Sidecar:
    """The validated content of one sidecar file."""

    path: Path
    digest: str  # SHA-256 of the file's bytes
    atol: float | None = None
    rtol: float | None = None
    low: float | list | None = None  # as written: a number or a (nested) list of numbers
    high: float | list | None = None
    float_model: Path | None = None  # resolved against the sidecar's folder; loaded and checked by user_files


def path_for(model_path: Path) -> Path:
    """Where the sidecar of ``model_path`` lives: the same path with ``.assay.toml`` appended."""
    return Path(str(model_path) + SUFFIX)


def read(model_path: Path) -> Sidecar | None:
    """The sidecar of ``model_path`` if there is one, validated as far as the model's shape is not needed."""
    path = path_for(model_path)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ModelError(f"{path}: cannot read the settings file ({error.strerror or error})") from None
    try:
        table = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not a TOML file (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as error:
        raise ModelError(f"{path}: invalid TOML ({' '.join(str(error).split())})") from None
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ModelError(f"{path}: unknown key '{unknown[0]}' (known: {', '.join(KEYS)})")
    atol = _tolerance(path, table, "atol")
    rtol = _tolerance(path, table, "rtol")
    low = high = None
    if "domain" in table:
        if "low" in table or "high" in table:
            raise ModelError(f"{path}: key 'domain': give either domain = [low, high] or low and high, not both")
        domain = table["domain"]
        if not isinstance(domain, list) or len(domain) != 2 or not all(_is_number(v) for v in domain):
            raise ModelError(f"{path}: key 'domain': expected [low, high], two numbers, got {_show(domain)}")
        low, high = (_finite(path, "domain", float(v)) for v in domain)
    elif "low" in table or "high" in table:
        missing = "high" if "low" in table else "low"
        if missing not in table:
            raise ModelError(f"{path}: key '{missing}' is missing (low and high go together)")
        low, high = (_bound(path, key, table[key]) for key in ("low", "high"))
    if low is not None and np.ndim(low) == 0 and np.ndim(high) == 0 and low > high:
        raise ModelError(f"{path}: key '{'domain' if 'domain' in table else 'low'}': low {low:g} is above "
                         f"high {high:g}")
    return Sidecar(path, hashlib.sha256(raw).hexdigest(), atol, rtol, low, high, _float_model(path, table))


def apply(sidecar: Sidecar | None, model: Model) -> Model:
    """``model`` with the sidecar's domain and tolerances; list lengths are checked against its input shape."""
    if sidecar is None:
        return model
    changes: dict = {"description": f"{model.description}; settings from {sidecar.path.name}".lstrip("; ")}
    if sidecar.atol is not None:
        changes["tolerance"] = sidecar.atol
    if sidecar.rtol is not None:
        changes["rtol"] = sidecar.rtol
    if sidecar.low is not None:
        key = "low" if np.ndim(sidecar.low) or np.ndim(sidecar.high) else "domain"
        low = _resolve(sidecar.path, "low" if key == "low" else "domain", sidecar.low, model)
        high = _resolve(sidecar.path, "high" if key == "low" else "domain", sidecar.high, model)
        a, b = np.broadcast_arrays(np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64))
        if np.any(a > b):
            index = np.unravel_index(int(np.argmax(a > b)), a.shape)
            where = ", ".join(str(int(i)) for i in index)
            raise ModelError(f"{sidecar.path}: key '{key}': low {a[index]:g} is above high {b[index]:g} "
                             f"at index [{where}]")
        changes["input_domain"] = (_freeze(low), _freeze(high))
    return dataclasses.replace(model, **changes)


def _resolve(path: Path, key: str, value, model: Model):
    """A number, or the list as an array broadcastable to ``model.input_shape`` (per feature or per element)."""
    if np.ndim(value) == 0:
        return float(value)
    array = np.asarray(value, dtype=np.float64)
    shape = tuple(model.input_shape)
    features = shape[0] if model.layout.startswith("C") else shape[-1]
    if array.shape == shape:
        return array
    if array.ndim == 1 and array.size == features:
        return array.reshape((features,) + (1,) * (len(shape) - 1)) if model.layout.startswith("C") else array
    if array.ndim == 1 and array.size == model.input_size:
        return array.reshape(shape)
    expected = f"{features} (one per input feature)"
    if model.input_size != features:
        expected += f" or {model.input_size} (one per element of the {'x'.join(map(str, shape))} "\
                    f"{model.layout} input)"
    got = f"{array.size} values" if array.ndim == 1 else f"a list of shape {list(array.shape)}"
    raise ModelError(f"{path}: key '{key}': wrong length: {got}, expected {expected}")


def _bound(path: Path, key: str, value):
    if _is_number(value):
        return _finite(path, key, float(value))
    if not isinstance(value, list) or not value:
        raise ModelError(f"{path}: key '{key}': expected a number or a list of numbers, got {_show(value)}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ModelError(f"{path}: key '{key}': expected a list of numbers (or equal-length nested lists), "
                         f"got {_show(value)}") from None
    if array.dtype == object or any(not _is_number(v) for v in _flatten(value)):
        raise ModelError(f"{path}: key '{key}': expected a list of numbers, got {_show(value)}")
    bad = ~np.isfinite(array) | (np.abs(array) > _FLOAT32_MAX)
    if np.any(bad):
        index = int(np.argmax(bad.ravel()))
        raise ModelError(f"{path}: key '{key}': value {array.ravel()[index]} at position {index} is not a finite "
                         "float32 number")
    return array.tolist()


def _float_model(path: Path, table: dict) -> Path | None:
    """The ``float_model`` file, relative to the sidecar's folder; its content is checked where it is loaded."""
    if "float_model" not in table:
        return None
    value = table["float_model"]
    if not isinstance(value, str) or not value:
        raise ModelError(f"{path}: key 'float_model': expected the path of an ONNX file, got {_show(value)}")
    return path.parent / value


def _tolerance(path: Path, table: dict, key: str) -> float | None:
    if key not in table:
        return None
    value = table[key]
    if not _is_number(value):
        raise ModelError(f"{path}: key '{key}': expected a number, got {_show(value)}")
    value = _finite(path, key, float(value))
    if value < 0:
        raise ModelError(f"{path}: key '{key}': tolerance {value:g} is negative")
    return value


def _finite(path: Path, key: str, value: float) -> float:
    if not math.isfinite(value) or abs(value) > _FLOAT32_MAX:
        raise ModelError(f"{path}: key '{key}': value {value} is not a finite float32 number")
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _flatten(value):
    if isinstance(value, list):
        for item in value:
            yield from _flatten(item)
    else:
        yield value


def _freeze(bound):
    if isinstance(bound, np.ndarray):
        bound = bound.tolist()
    if isinstance(bound, list):
        return tuple(_freeze(item) for item in bound)
    return float(bound)


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
