"""Decisions on the user's data (``assay semantic --inputs-from FILE``): what a classifier's C decides on the
user's own test set, against what the trained model decides.

EASA's learning-assurance guidance asks for the performance of the implemented model on the test data set; for a
classifier, that is its decisions. Per record (one reference) and on the rows of the user's file only (the uniform
draw's rows have no labels and are judged by the oracle alone):

- ``agreement``: the fraction of inputs where the C's arg-max is the reference's, and the ``flips``: every input
  where it is not, with both classes;
- ``accuracy`` (with labels): the C's and the reference's (the trained model's) fraction of correct decisions;
- ``guaranteed``: the inputs whose decision no correct float32 implementation can change. The derived bound
  (``harness.references.bounds``, the order the code's manifest declares) bounds each output's distance from the
  exact (float64) result, so when the exact top class's lower end stays above every other class's upper end,
  ``y_k - y_j > b_k + b_j`` for every class j, every implementation within the bound decides class k, and so does a
  C that passes the derived verdict. ``not_guaranteed`` lists the other inputs, each with the class j that comes
  closest: its margin ``y_k - y_j`` and the bound ``b_k + b_j`` it does not exceed.

The figures are data in the record (docs/schemas.md); a flip does not change the verdict, which stays the oracle's.
"""

from __future__ import annotations

import numpy as np

from harness.core.inputs import UserInputs, classes
from harness.core.refcache import ARBITER, derived_bound, reference_outputs
from harness.errors import USER_ERRORS
from harness.models import user_files
from harness.models.model import Model
from harness.references import bounds
from harness.stages.semantic.settings import Settings


def applies(model: Model | None, settings: Settings) -> bool:
    """Whether an item's records carry decisions: a user's set is given and the model is a classifier."""
    return model is not None and settings.inputs_from is not None and classes(model) is not None


def guarantee_inputs(model: Model, settings: Settings, exact: np.ndarray | dict | None,
                     bound: np.ndarray | str | None, order: bounds.Order | None, timings: dict
                     ) -> tuple[np.ndarray, np.ndarray] | str:
    """(float64 outputs, derived bound) of every campaign input for the guarantee: the record's own when the
    campaign computed them (``--tolerance derived``), else computed here (both cached); or why there are none."""
    if not isinstance(exact, np.ndarray):
        try:
            exact = reference_outputs(ARBITER, model, settings)
        except Exception as exc:  # the guarantee is advice: say why it is missing, never fail the record
            return f"no float64 outputs ({exc if isinstance(exc, USER_ERRORS) else user_files.cause(exc)})"
    if not isinstance(bound, np.ndarray):
        bound = derived_bound(model, settings, timings, order=order)
    if not isinstance(bound, np.ndarray):
        return f"no derived bound: {bound}"
    return exact, bound


def decide(user: UserInputs, outputs: np.ndarray, expected: np.ndarray,
           guarantee: tuple[np.ndarray, np.ndarray] | str) -> dict:
    """The record's ``decisions`` (module docstring) on the user's rows, the first ``len(user.x)`` of each array."""
    rows = len(user.x)
    c, r = _scores(outputs, rows).argmax(axis=1), _scores(expected, rows).argmax(axis=1)
    flipped = np.flatnonzero(c != r)
    result: dict = {"inputs": rows, "classes": int(_scores(outputs, rows).shape[1]),
                    "agreement": float(1.0 - len(flipped) / rows),
                    "flips": [{"input": int(i), "c": int(c[i]), "reference": int(r[i])} for i in flipped],
                    "accuracy": None, "guaranteed": None, "not_guaranteed": None, "guarantee_note": None}
    if user.labels is not None:
        result["accuracy"] = {"c": float(np.mean(c == user.labels)), "reference": float(np.mean(r == user.labels)),
                              "labels": rows}
    if isinstance(guarantee, str):
        result["guarantee_note"] = guarantee
        return result
    exact, bound = (_scores(array, rows).astype(np.float64) for array in guarantee)
    top = exact.argmax(axis=1)
    at = np.arange(rows)
    margin = exact[at, top][:, None] - exact  # y_k - y_j, and b_k + b_j: every class j against the top one
    allowed = bound[at, top][:, None] + bound
    slack = margin - allowed
    slack[at, top] = np.inf
    closest = slack.argmin(axis=1)
    short = np.flatnonzero(slack[at, closest] <= 0)
    result["guaranteed"] = int(rows - len(short))
    result["not_guaranteed"] = [{"input": int(i), "class": int(top[i]), "runner_up": int(closest[i]),
                                 "margin": float(margin[i, closest[i]]), "bound": float(allowed[i, closest[i]])}
                                for i in short]
    return result


def _scores(array: np.ndarray, rows: int) -> np.ndarray:
    """The first ``rows`` rows of a batch of outputs, as (rows, classes)."""
    return np.asarray(array[:rows]).reshape(rows, -1)
