"""The test oracle: the infinity-norm error of paper Definition 15.

For each input, the error is max_i |x~_i - x_i| over the output vector; the
item's figure is the maximum over the input set (paper Table 1). The verdict
is element-wise, numpy's ``allclose`` convention: every output must satisfy
|c - r| <= atol + rtol * |r|, so large outputs are not failed for float32
rounding while small ones are held to the absolute tolerance. Non-finite
values are never "small errors": NaN or Inf in the generated outputs is an
``error`` verdict naming the input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The verdict words, one vocabulary for every stage's records (what each means: harness.contract).
from harness.contract import ERROR, FAIL, NOT_MEASURED, NOT_SUPPORTED, PASS, UNBOUNDED  # noqa: F401


@dataclass(frozen=True)
class Comparison:
    verdict: str
    max_abs_error: float | None
    index_of_worst_input: int | None
    median_abs_error: float | None
    cause: str | None = None
    max_abs_reference: float | None = None  # max |reference output|: with the error, what ``recheck`` needs
    margin: float | None = None  # min over outputs of (atol + rtol |r|) / |c - r| (``margin``)


def margin(distance: np.ndarray, allowed: np.ndarray) -> float:
    """The smallest ratio allowed / distance over the outputs whose distance is not 0: at least 1 where every output
    is within what it is allowed, how close the nearest comes; inf when every distance is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(distance > 0, allowed / distance, np.inf)
    return float(ratio.min(initial=np.inf))


def infinity_norm_errors(outputs: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Per-input ||outputs - expected||_inf, computed in float64."""
    diff = np.abs(outputs.astype(np.float64) - expected.astype(np.float64))
    return diff.reshape(len(diff), -1).max(axis=1)


def per_tensor_errors(outputs: np.ndarray, expected: np.ndarray, tensors: list[tuple[str, int]]) -> dict[str, float]:
    """The largest |C - reference| of each tensor of packed outputs (a model of several outputs; ``tensors``: each
    one's name and size, in packed order), so that a report names the output that is off."""
    diff = np.abs(outputs.astype(np.float64) - expected.astype(np.float64)).reshape(len(outputs), -1)
    offsets = np.cumsum([0] + [size for _, size in tensors])
    return {name: float(diff[:, start:end].max(initial=0.0))
            for (name, _), start, end in zip(tensors, offsets[:-1], offsets[1:])}


def compare(outputs: np.ndarray, expected: np.ndarray, atol: float, rtol: float = 0.0) -> Comparison:
    """Compare a batch of generated outputs with a reference batch of the same shape."""
    if outputs.shape != expected.shape:
        return Comparison(ERROR, None, None, None, f"output shape {outputs.shape[1:]} differs from "
                                                   f"the reference's {expected.shape[1:]}")
    for array, who in ((expected, "reference"), (outputs, "generated code")):
        bad = ~np.isfinite(array.reshape(len(array), -1)).all(axis=1)
        if bad.any():
            first = int(np.argmax(bad))
            kind = "NaN" if np.isnan(array[first]).any() else "Inf"
            return Comparison(ERROR, None, first, None,
                              f"{who} produced {kind} for input #{first} ({int(bad.sum())} inputs affected)")
    errors = infinity_norm_errors(outputs, expected)
    worst = int(np.argmax(errors))
    c, r = outputs.astype(np.float64).reshape(len(outputs), -1), expected.astype(np.float64).reshape(len(outputs), -1)
    allowed = atol + rtol * np.abs(r)
    excess = np.abs(c - r) - allowed  # > 0 where an output is outside the tolerance
    largest = float(np.abs(r).max(initial=0.0))
    closest = margin(np.abs(c - r), allowed)
    if (excess <= 0).all():
        return Comparison(PASS, float(errors[worst]), worst, float(np.median(errors)), max_abs_reference=largest,
                          margin=closest)
    row, col = np.unravel_index(int(np.argmax(excess)), excess.shape)
    outside = int((excess > 0).any(axis=1).sum())
    cause = (f"|C - reference| = {abs(c[row, col] - r[row, col]):.4e} above atol {atol:g} + rtol {rtol:g} x "
             f"|{r[row, col]:.6g}| at input #{row}, output {col} ({outside} inputs outside the tolerance)")
    return Comparison(FAIL, float(errors[worst]), worst, float(np.median(errors)), cause, largest, closest)


def _figure(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value)) and value >= 0


def _distance(value: object) -> bool:
    """A distance to float64: a number >= 0, inf included (a NaN or Inf the C computed is outside any bound)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def recheck(record: dict) -> str | None:
    """Why a semantic record's verdict does not follow from its own figures, or None when it does: what an
    evidence package's verdicts (and ``assay evidence verify``) require of every record before counting its verdict.

    The element-wise rule (``compare``) cannot be replayed from the maxima a record keeps, but it bounds them:
    ``pass`` needs max |C - r| <= atol + rtol x max |r|, and ``fail`` needs max |C - r| > atol. Under the derived
    rule (the record's ``derived`` figures, when they decided), ``pass`` needs |C - float64| <= the largest bound,
    and the record's verdict is the derived one. Any other verdict (``error``, ``not supported``) names its cause.
    A record of 1e-3 left ``pass`` under a tolerance of 1e-5 fails this, as does a record whose verdict was flipped."""
    verdict = record.get("verdict")
    if verdict not in (PASS, FAIL):
        return None if isinstance(record.get("cause"), str) and record["cause"] else f"verdict {verdict} with no cause"
    derived = record.get("derived")
    if isinstance(derived, dict) and "fallback" not in derived:
        distance, bound = derived.get("c_distance"), derived.get("bound")
        layers = record.get("layer_local") if isinstance(record.get("layer_local"), dict) else None
        fault = layer_fault(layers) if layers else None
        if fault:
            return fault
        expected = with_layers(derived.get("verdict"), None, layers, bound if _figure(bound) else None)[0]
        if expected != verdict:
            return f"verdict {verdict}, its derived figures give {expected}"
        allowed = _fixed_allowance(record)
        if verdict == PASS and allowed is not None and record["max_abs_error"] > allowed and not record.get("review"):
            return (f"pass with max |C - reference| = {record['max_abs_error']:.4e} above atol + rtol x max "
                    f"|reference| = {allowed:.4e} and no review line")  # the second opinion's failure is shown
        if derived.get("verdict") == ERROR and expected != ERROR:  # the layers decided (``with_layers``)
            return None
        if not (_figure(distance) and _figure(bound)):
            return "derived verdict without a finite distance to float64 and bound"
        if verdict == PASS and distance > bound:
            return f"pass with |C - float64| = {distance:.4e} above the derived bound {bound:.4e}"
        if derived.get("verdict") == FAIL and distance == 0:
            return "fail with C equal to float64"
        return None
    allowed = _fixed_allowance(record)
    if allowed is None:
        return f"verdict {verdict} without finite figures (max_abs_error, tolerance, rtol, max_abs_reference)"
    error, atol = record["max_abs_error"], record["tolerance"]
    if verdict == PASS and error > allowed:
        return f"pass with max |C - reference| = {error:.4e} above atol + rtol x max |reference| = {allowed:.4e}"
    if verdict == FAIL and error <= atol:
        return f"fail with max |C - reference| = {error:.4e} within atol {atol:g}"
    return None


def _fixed_allowance(record: dict) -> float | None:
    """atol + rtol x max |reference| of a record whose fixed-rule figures are all finite numbers, else None."""
    error, atol, rtol, largest = (record.get(k) for k in ("max_abs_error", "tolerance", "rtol", "max_abs_reference"))
    if not all(_figure(v) for v in (error, atol, rtol or 0.0, largest)):
        return None
    return atol + (rtol or 0.0) * largest


def with_layers(verdict: str, cause: str | None, layer_local: dict | None,
                bound: float | None = 0.0) -> tuple[str, str | None]:
    """The verdict and cause of a record judged end to end (``verdict``, ``cause``; ``bound``: the end-to-end
    bound, None when it is no finite number) and layer by layer (``layer_local``: ``harness.core.layerlocal.judge``'s
    figures, or None): a layer outside its local bound fails the record, a layer-local bound that is no finite
    number makes a passing record an error. An end-to-end error stays one (NaN outputs), except a broken end-to-end
    bound where every layer was judged through the model's output: each layer of the C is then a correct float32
    implementation of its layer given its input, or not, so the C is one of the whole network, or not, and the
    layers decide (the deep networks whose end-to-end bound overflows, docs/semantic.md)."""
    judged = isinstance(layer_local, dict) and layer_local.get("judged") and layer_local.get("verdict")
    if judged and verdict == ERROR and bound is None and layer_local.get("covers_output"):
        return layer_local["verdict"], layer_local["cause"]
    if not judged or verdict == ERROR:
        return verdict, cause
    if layer_local["verdict"] == FAIL:
        return FAIL, layer_local["cause"] if verdict != FAIL else f"{cause}; {layer_local['cause']}"
    if layer_local["verdict"] == ERROR and verdict == PASS:
        return ERROR, layer_local["cause"]
    return verdict, cause


def layer_fault(layer_local: dict) -> str | None:
    """Why a record's layer-local figures do not give their own verdict (a layer outside its bound in a ``pass``,
    none in a ``fail``), or None when they do."""
    if not layer_local.get("judged") or layer_local.get("verdict") == ERROR:
        return None
    rows = [row for row in layer_local.get("layers", []) if isinstance(row, dict) and row.get("judged")]
    if not all(_figure(row.get("bound")) and _distance(row.get("c_distance")) for row in rows):
        return "layer-local verdict without a distance to float64 and a finite bound at every judged layer"
    outside = [row["layer"] for row in rows if row["c_distance"] > row["bound"]]
    if layer_local.get("verdict") == PASS and outside:
        return f"layer-local pass with layer {outside[0]} outside its bound"
    if layer_local.get("verdict") == FAIL and not outside:
        return "layer-local fail with every layer within its bound"
    return None


@dataclass(frozen=True)
class BoundCheck:
    """The derived-tolerance verdict of one batch (``compare_to_bound``): the C's distance to float64 against the
    bound of a correct float32 implementation, output by output."""

    verdict: str
    c_distance: float  # max over inputs and outputs of |C - f64|
    bound: float  # the largest bound of any output
    tightness: float  # min over outputs of bound / |C - f64| (inf when C equals f64 everywhere)
    cause: str | None = None


def compare_to_bound(outputs: np.ndarray, exact: np.ndarray, bound: np.ndarray,
                     index: np.ndarray | None = None) -> BoundCheck:
    """Pass iff |C - f64| <= bound for every output of every input (``harness.references.bounds``): the bound
    holds for any correct float32 implementation, so an output outside it is a defect, whatever its size.
    ``index``: each row's input number, for the cause (default: its row)."""

    def number(row: int) -> int:
        return int(row if index is None else index[row])

    c = np.asarray(outputs, np.float64).reshape(len(outputs), -1)
    f = np.asarray(exact, np.float64).reshape(len(outputs), -1)
    b = np.asarray(bound, np.float64).reshape(len(outputs), -1)
    bad = ~np.isfinite(c).all(axis=1)
    if bad.any():  # as ``compare``: NaN or Inf is never a small error, whatever the bound
        first = int(np.argmax(bad))
        kind = "NaN" if np.isnan(c[first]).any() else "Inf"
        return BoundCheck(ERROR, np.inf, float(b.max(initial=0.0)), 0.0, f"generated code produced {kind} for "
                          f"input #{number(first)} ({int(bad.sum())} inputs affected)")
    distance = np.abs(c - f)
    largest = float(distance.max(initial=0.0))
    tightness, top = margin(distance, b), float(b.max(initial=0.0))
    if (distance <= b).all():
        return BoundCheck(PASS, largest, top, tightness)
    row, col = np.unravel_index(int(np.argmax(distance - b)), distance.shape)
    outside = int((distance > b).any(axis=1).sum())
    cause = (f"|C - float64| = {distance[row, col]:.4e} above the derived bound {b[row, col]:.4e} of a correct "
             f"float32 implementation at input #{number(row)}, output {col} ({outside} inputs outside the bound)")
    return BoundCheck(FAIL, largest, top, tightness, cause)
