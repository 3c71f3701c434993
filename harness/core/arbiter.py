"""The float64 arbiter: when C and a float32 reference disagree, which of the two is nearer the float64 result?

``arbitrate(c, reference, exact)`` measures the C outputs and a float32
reference's outputs (the same inputs, the same canonical layout) against the
float64 reference (``harness.references.float64``), as the max infinity-norm
error over the inputs, and says which is closer; ``closest(c, references,
exact)`` does the same for several references at once (the semantic stage
judges one record per reference, the onnx-node conformance suite one line per
case for both of its references). It lives in ``harness.core`` because both
stages use it. A C that is much farther
from float64 than the reference points to a generator defect; a reference
that is much farther than the C is float32 noise in the reference.

An output that is NaN, or infinite where float64 is finite (or the reverse),
counts as an infinite error; equal values, infinities included, count as 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

C = "C"
EXACT = "float64"


@dataclass(frozen=True)
class Attribution:
    """The figures of one record: C and one reference, each against float64, on the same inputs."""

    reference: str  # the float32 reference's name, e.g. "keras"
    n_inputs: int
    c_error: float  # max over inputs of ||C - float64||_inf
    reference_error: float  # max over inputs of ||reference - float64||_inf
    closer: str  # "C", the reference's name, or "tie"
    text: str

    def as_dict(self) -> dict:
        return asdict(self)


def error(outputs: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per input, the infinity norm of ``outputs - exact`` (float64; NaN and one-sided infinities give inf)."""
    outputs = np.asarray(outputs, np.float64)
    exact = np.asarray(exact, np.float64)
    if outputs.shape != exact.shape:
        raise ValueError(f"outputs have shape {outputs.shape}, the float64 outputs {exact.shape}")
    with np.errstate(invalid="ignore"):
        diff = np.abs(outputs - exact)
    diff = np.where(outputs == exact, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    if diff.ndim == 0:
        return diff.reshape(1)
    return diff.reshape(len(diff), -1).max(axis=1, initial=0.0) if len(diff) else np.zeros(0)


def arbitrate(c_outputs: np.ndarray, reference_outputs: np.ndarray, float64_outputs: np.ndarray,
              reference: str = "reference") -> Attribution:
    """Which of the C and the ``reference`` outputs is closer to the float64 outputs, with both errors."""
    ranking = closest(c_outputs, {reference: reference_outputs}, float64_outputs)
    return Attribution(reference=reference, n_inputs=ranking.n_inputs, c_error=ranking.errors[C],
                       reference_error=ranking.errors[reference], closer=ranking.closer, text=ranking.text)


@dataclass(frozen=True)
class Ranking:
    """The C and any number of float32 references, each against float64 on the same inputs."""

    n_inputs: int
    errors: dict[str, float]  # "C" and each reference's name -> max over inputs of ||outputs - float64||_inf
    closer: str  # the one closest to float64, or "tie" when several are equally closest
    text: str

    def as_dict(self) -> dict:
        return asdict(self)


def closest(c_outputs: np.ndarray, references: dict[str, np.ndarray], float64_outputs: np.ndarray) -> Ranking:
    """Which of the C and the ``references`` (name -> outputs) is closest to the float64 outputs, with every
    error: "C closer to float64 than onnxruntime and expected (C 0, onnxruntime 1.2e-7, expected 6e-8)"."""
    c_errors = error(c_outputs, float64_outputs)
    errors = {C: float(c_errors.max(initial=0.0))}
    errors.update({name: float(error(outputs, float64_outputs).max(initial=0.0))
                   for name, outputs in references.items()})
    figures = "(" + ", ".join(f"{name} {format_error(value)}" for name, value in errors.items()) + ")"
    best = min(errors.values())
    winners = [name for name, value in errors.items() if value == best]
    others = [name for name in errors if name not in winners]
    if len(winners) == 1:
        closer, text = winners[0], f"{winners[0]} closer to {EXACT} than {_names(others)} {figures}"
    else:
        beyond = f", closer than {_names(others)}" if others else ""
        closer, text = "tie", f"{_names(winners)} equally close to {EXACT}{beyond} {figures}"
    return Ranking(n_inputs=len(c_errors), errors=errors, closer=closer, text=text)


def _names(names: list[str]) -> str:
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


def format_error(value: float) -> str:
    """An error with two significant digits and a short exponent: ``1.2e-6``, ``0``, ``inf``."""
    if value == 0:
        return "0"
    if not np.isfinite(value):
        return "inf"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"
