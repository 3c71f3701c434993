"""The float64 arbiter: when C and a float32 reference disagree, which of the two is nearer the float64 result?

``arbitrate(c, reference, exact)`` measures the C outputs and a float32
reference's outputs (the same inputs, the same canonical layout) against the
float64 reference (``harness.references.float64``), as the max infinity-norm
error over the inputs, and says which is closer. A C that is much farther
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
    c_errors = error(c_outputs, float64_outputs)
    reference_errors = error(reference_outputs, float64_outputs)
    c_error = float(c_errors.max(initial=0.0))
    reference_error = float(reference_errors.max(initial=0.0))
    figures = f"({C} {format_error(c_error)}, {reference} {format_error(reference_error)})"
    if c_error < reference_error:
        closer, text = C, f"{C} closer to {EXACT} than {reference} {figures}"
    elif reference_error < c_error:
        closer, text = reference, f"{reference} closer to {EXACT} than {C} {figures}"
    else:
        closer, text = "tie", f"{C} and {reference} equally close to {EXACT} {figures}"
    return Attribution(reference=reference, n_inputs=len(c_errors), c_error=c_error,
                       reference_error=reference_error, closer=closer, text=text)


def format_error(value: float) -> str:
    """An error with two significant digits and a short exponent: ``1.2e-6``, ``0``, ``inf``."""
    if value == 0:
        return "0"
    if not np.isfinite(value):
        return "inf"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"
