"""Seeded test inputs over each model's documented input domain.

Every input element is drawn uniformly from its own interval of
``model.input_domain`` (one interval for all elements, or one per feature,
channel or element; ``Model.domain_bounds``) with NumPy's PCG64 generator
seeded by ``seed`` alone, in the model's canonical layout, so the same (model
shape, domain, count, seed) always gives the same inputs on any machine. A
domain that is one interval draws exactly what it drew before per-element
domains existed.

Every element takes exactly one 64-bit draw of the generator, so the inputs
``start .. start + count`` of a larger set are drawn alone by advancing the
generator past the elements before them: a shard of the inputs is the same
slice of the set an unsharded run draws (``harness.core.shards``), without
drawing the rest.

A user's own test set (``assay semantic --inputs-from FILE``: a ``.npy`` of inputs, or an ``.npz`` with ``x`` and
optional class labels ``y``) runs instead of the draw or beside it (``campaign_inputs``: the file's rows first,
then the ``count`` seeded ones). It is checked against the model before anything runs (``user_inputs``: shape,
dtype, NaN, the model's input domain, the labels' length and range; one line naming the file and the cause) and
counts in every content key by the SHA-256 of its bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core import budget
from harness.core.plan import Settings
from harness.errors import ConfigError
from harness.models.model import Model, describe_domain


def make_inputs(model: Model, count: int, seed: int, start: int = 0) -> np.ndarray:
    """``count`` inputs of shape ``model.input_shape``, float32, element ``i`` inside its own interval.

    ``start``: the first input's index in the seed's sequence; ``make_inputs(m, k, s, start=a)`` equals
    ``make_inputs(m, a + k, s)[a:]``.
    """
    if count < 1 or start < 0:
        raise ValueError("at least one input is needed, from a non-negative index")
    rng = np.random.default_rng(seed)
    rng.bit_generator.advance(start * int(np.prod(model.input_shape, dtype=np.int64)))
    if model.domain_is_uniform():
        low, high = (float(bound) for bound in model.input_domain)
        return rng.uniform(low, high, size=(count, *model.input_shape)).astype(np.float32)
    low, high = model.domain_bounds()
    # Same stream as the scalar case: one double in [0, 1) per element, in C order, scaled per element.
    unit = rng.random(size=(count, *model.input_shape))
    values = (low + (high - low) * unit).astype(np.float32)
    # float32 rounding may step just outside a bound: clamp it back in.
    return np.clip(values, low.astype(np.float32), high.astype(np.float32))


_DIGESTS: dict[tuple, str] = {}  # this process's input sets already hashed (a campaign asks once per shard)


def inputs_sha256(model: Model, count: int, seed: int) -> str:
    """SHA-256 of ``make_inputs(model, count, seed)``'s bytes: the inputs' part of a cache key.

    Remembered per process under what the draw depends on (input shape, domain, count, seed), so a key
    asked for by every shard and every reference costs one draw and one hash, not one per call.
    """
    key = (tuple(model.input_shape), json.dumps(model.domain_json()), count, seed)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(make_inputs(model, count, seed).tobytes()).hexdigest()
    return _DIGESTS[key]


INPUTS_KEY, LABELS_KEY = "x", "y"  # the arrays of an .npz test set


@dataclass(frozen=True)
class UserInputs:
    """A user's test set, checked against one model: its inputs (float32, canonical layout) and class labels."""

    path: Path
    sha256: str  # of the file's bytes: what content keys count
    x: np.ndarray
    labels: np.ndarray | None = None

    def summary(self) -> dict:
        """What a record says of the set (docs/schemas.md, ``inputs_from``)."""
        return {"file": str(self.path), "sha256": self.sha256, "inputs": len(self.x),
                "labels": self.labels is not None}


def classes(model: Model) -> int | None:
    """How many classes a model's output scores, when it is one vector of at least two values (a classifier's
    scores, whose arg-max is its decision); None otherwise (several outputs, an image, a single value)."""
    if model.outputs or len(model.output_shape) != 1 or model.output_size < 2:
        return None
    return model.output_size


_USER: dict[tuple, UserInputs] = {}  # sets already checked in this process, by content and model


def user_inputs(path: Path, model: Model) -> UserInputs:
    """The test set of ``path`` checked against ``model``; a ConfigError of one line naming the file and the cause
    (missing, unreadable, another format, wrong arrays, shape, dtype, NaN or infinity, a value outside the model's
    input domain, labels of the wrong length, dtype or range)."""
    path = Path(path)
    limit = budget.limit_from_environment()
    try:
        with open(path, "rb", opener=_nonblocking) as stream:
            info = os.fstat(stream.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ConfigError(f"{path}: not a regular file (--inputs-from)")
            _within(path, info.st_size, limit, "is")
            raw = stream.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (--inputs-from)") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the inputs file ({error.strerror or error})") from None
    sha = hashlib.sha256(raw).hexdigest()
    key = (str(path), sha, tuple(model.input_shape), json.dumps(model.domain_json()), classes(model))
    if key not in _USER:
        x, labels = _arrays(path, raw, limit)
        _USER[key] = UserInputs(path, sha, _checked_inputs(path, x, model),
                                _checked_labels(path, labels, len(x), model))
    return _USER[key]


def _nonblocking(name: str, flags: int) -> int:
    """Open without waiting on a FIFO or a device: ``user_inputs`` refuses what is not a regular file."""
    return os.open(name, flags | os.O_NONBLOCK)


def _within(path: Path, size: int, limit: int | None, how: str) -> None:
    """A ConfigError when ``size`` bytes of the user's test set exceed the memory limit an item may take
    (``budget``): the inputs alone could not be held, and reading them would take the machine's memory first."""
    if limit is not None and size > limit:
        raise ConfigError(f"{path}: {how} {budget.format_size(size)}, above the memory limit of "
                          f"{budget.format_size(limit)} (set {budget.ENVIRONMENT} to change it)")


def _arrays(path: Path, raw: bytes, limit: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(inputs, labels or None) of a .npy or .npz file's bytes, read without pickles; an .npz whose arrays
    would unpack beyond ``limit`` bytes is refused before any is unpacked (a few KiB of zeros can declare GiBs)."""
    suffix = path.suffix.lower()
    if suffix not in (".npy", ".npz"):
        raise ConfigError(f"{path}: not a .npy or .npz file (an array of inputs, or an .npz with arrays "
                          f"'{INPUTS_KEY}' and optional labels '{LABELS_KEY}')")
    try:
        loaded = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise ConfigError(f"{path}: not a readable {suffix} file ({' '.join(str(error).split())})") from None
    if suffix == ".npy":
        if not isinstance(loaded, np.ndarray):
            raise ConfigError(f"{path}: an .npz archive named .npy (rename it .npz)")
        return loaded, None
    if isinstance(loaded, np.ndarray):
        raise ConfigError(f"{path}: one array, not an .npz archive (rename it .npy)")
    with loaded:
        _within(path, sum(member.file_size for member in loaded.zip.infolist()), limit, "unpacks to")
        names = sorted(loaded.files)
        unknown = [name for name in names if name not in (INPUTS_KEY, LABELS_KEY)]
        if INPUTS_KEY not in names or unknown:
            raise ConfigError(f"{path}: holds arrays {', '.join(names) or 'none'}; an .npz test set holds "
                              f"'{INPUTS_KEY}' (the inputs) and optionally '{LABELS_KEY}' (class labels)")
        try:
            return loaded[INPUTS_KEY], loaded[LABELS_KEY] if LABELS_KEY in names else None
        except ValueError as error:  # an object array, which would need a pickle
            raise ConfigError(f"{path}: {' '.join(str(error).split())}") from None


def _checked_inputs(path: Path, x: np.ndarray, model: Model) -> np.ndarray:
    """``x`` as float32 of shape (N, *input_shape), every value finite and inside the model's domain."""
    if x.dtype.kind not in "fiu":
        raise ConfigError(f"{path}: inputs of dtype {x.dtype}; they must be real numbers (a float or integer dtype)")
    expected = "(N, " + ", ".join(map(str, model.input_shape)) + ")"
    if x.shape[1:] != tuple(model.input_shape) or x.ndim < 1:
        raise ConfigError(f"{path}: inputs of shape {x.shape}; {model.name} takes {expected} in its canonical "
                          f"layout ({model.layout})")
    if not len(x):
        raise ConfigError(f"{path}: no inputs (shape {x.shape})")
    values = x.astype(np.float32)
    bad = ~np.isfinite(values)
    if bad.any():
        where = np.unravel_index(int(np.argmax(bad)), bad.shape)
        raise ConfigError(f"{path}: input value x{list(map(int, where))} is {x[where]} (not a finite float32)")
    low, high = (bound.astype(np.float32) for bound in model.domain_bounds())
    outside = (values < low) | (values > high)
    if outside.any():
        where = np.unravel_index(int(np.argmax(outside)), outside.shape)
        raise ConfigError(f"{path}: input value x{list(map(int, where))} = {values[where]:g} is outside "
                          f"{model.name}'s input domain {describe_domain(model.domain_json())} (its zoo entry or "
                          f"sidecar <model>.assay.toml; docs/zoo.md)")
    return values


def _checked_labels(path: Path, labels: np.ndarray | None, count: int, model: Model) -> np.ndarray | None:
    """``labels`` as int64, one class index per input, each a class of the model's output; None for none."""
    if labels is None:
        return None
    n_classes = classes(model)
    if n_classes is None:
        raise ConfigError(f"{path}: has labels '{LABELS_KEY}', but {model.name}'s output (shape "
                          f"{model.output_shape}) is not one vector of class scores")
    if labels.dtype.kind not in "iu":
        raise ConfigError(f"{path}: labels of dtype {labels.dtype}; they must be class indices (an integer dtype)")
    if labels.shape != (count,):
        raise ConfigError(f"{path}: labels of shape {labels.shape} for {count} inputs; one label per input, "
                          f"shape ({count},)")
    bad = (labels < 0) | (labels >= n_classes)
    if bad.any():
        first = int(np.argmax(bad))
        raise ConfigError(f"{path}: label y[{first}] = {labels[first]} is not a class of {model.name} "
                          f"(0 to {n_classes - 1})")
    return labels.astype(np.int64)


def campaign_size(model: Model, settings: Settings) -> int:
    """How many inputs the campaign runs: the user's set (``settings.inputs_from``), then ``settings.n_inputs``."""
    user = 0 if settings.inputs_from is None else len(user_inputs(settings.inputs_from, model).x)
    return user + settings.n_inputs


def campaign_inputs(model: Model, settings: Settings) -> np.ndarray:
    """The campaign's inputs: the rows of the user's set (``--inputs-from``), if any, then ``settings.n_inputs``
    seeded uniform ones (``make_inputs``: the rows a run without the file draws)."""
    drawn = make_inputs(model, settings.n_inputs, settings.seed) if settings.n_inputs else None
    if settings.inputs_from is None:
        return drawn
    user = user_inputs(settings.inputs_from, model).x
    return user if drawn is None else np.concatenate([user, drawn])


def campaign_sha256(model: Model, settings: Settings) -> str:
    """The campaign inputs' part of a cache key: ``inputs_sha256`` of the draw, with the user's file's SHA-256."""
    drawn = inputs_sha256(model, settings.n_inputs, settings.seed) if settings.n_inputs else ""
    if settings.inputs_from is None:
        return drawn
    user = user_inputs(settings.inputs_from, model)
    return hashlib.sha256(f"{user.sha256}:{len(user.x)}:{drawn}".encode()).hexdigest()
