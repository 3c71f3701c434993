"""A campaign's reference outputs, float64 outputs and derived bounds (``harness.references.bounds``), cached on
disk once per machine.

Why here and not in a stage: the semantic stage and the mutation stage judge with the same figures (the
mutation stage's ``--tolerance derived`` is the semantic stage's rule), and the bound costs up to a second per
input on a convolutional network; one cache, keyed by the model's bytes, the inputs' bytes, the tools'
versions and what else the figure depends on, serves both and never serves a stale figure. An entry is used only
under this user's seal (``harness.seal``): reference outputs planted in a shared work folder, equal to a wrong
C's outputs, would otherwise make that C pass.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness import references, seal
from harness.core.inputs import campaign_inputs, campaign_sha256, campaign_size
from harness.core.locks import exclusive
from harness.core.pipeline import slug
from harness.core.plan import Settings
from harness.core.provenance import tool_versions
from harness.digests import digest
from harness.errors import USER_ERRORS
from harness.models.model import Model
from harness.references import bounds

ARBITER = "float64"  # the float64 evaluation: the derived rule's yardstick
FALLBACK = "the fixed tolerance decides this model's verdicts"


class BrokenBound(str):
    """Why a derived bound is infinite, NaN or negative somewhere (``bounds.Derivation.broken``: the op and the
    tensor): never compared with anything. The semantic stage makes it an ``error`` of the oracle; being a ``str``,
    a caller that knows only fallbacks (``str``: no bound) falls back to the fixed tolerance with it, visibly."""


def cached_outputs(name: str, model: Model, settings: Settings, compute: Callable[[np.ndarray], np.ndarray],
                   identity: str = "", inputs: np.ndarray | None = None) -> np.ndarray:
    """``compute(inputs)`` cached on disk under ``name``; ``inputs`` default to the campaign's (``campaign_inputs``:
    a user's set, then ``settings.n_inputs`` drawn with ``settings.seed``), else any batch (the mutation stage's input
    sets)."""
    if inputs is None:
        count, inputs_key = campaign_size(model, settings), campaign_sha256(model, settings)
    else:
        count, inputs_key = len(inputs), hashlib.sha256(np.ascontiguousarray(inputs).tobytes()).hexdigest()
    key = digest([model.sha256(), inputs_key, tool_versions(), identity])[:16]
    path = settings.work_dir / "references" / slug(model.name) / f"{name}-n{count}-{key}.npy"
    with exclusive(path.with_name(path.name + ".lock")):  # once per machine, whichever worker asks first
        stored = seal.read_sealed(path)  # an entry not sealed by this user (planted, edited) is computed again
        if stored is not None:
            return np.load(io.BytesIO(stored), allow_pickle=False)
        outputs = compute(campaign_inputs(model, settings) if inputs is None else inputs)
        buffer = io.BytesIO()
        np.save(buffer, outputs)
        tmp = path.with_name(path.name + f".{id(outputs)}.tmp")
        tmp.write_bytes(buffer.getvalue())
        tmp.replace(path)
        seal.seal_file(path, buffer.getvalue())
    return outputs


def reference_outputs(ref_name: str, model: Model, settings: Settings, inputs: np.ndarray | None = None
                      ) -> np.ndarray:
    """Reference ``ref_name``'s outputs (``ARBITER``: the float64 evaluation), cached (``cached_outputs``): a
    changed model, input domain or runtime is computed again."""
    return cached_outputs(ref_name, model, settings, lambda batch: references.get(ref_name).run(model, batch),
                          inputs=inputs)


def derived_bound(model: Model, settings: Settings, timings: dict, inputs: np.ndarray | None = None,
                  order: bounds.Order | None = None, index: np.ndarray | None = None) -> np.ndarray | str:
    """The derived bound of every output and input (``harness.references.bounds``; ``inputs``, default the
    campaign's, whose numbers there are ``index`` for a message), for any order of accumulation or for the one the
    code's manifest declares (``order``), cached, or why there is none (an op without a rule, or the derivation's
    fault: the caller falls back to the fixed tolerance, visibly), or a ``BrokenBound`` naming the op and the tensor
    where some bound is infinite, NaN or negative."""
    start = time.perf_counter()
    try:
        missing = bounds.missing_rules(model)
        if missing:
            return f"no derived bound for {', '.join(missing)}: {FALLBACK}"
        bound = cached_outputs("bound", model, settings, lambda batch: bounds.derive(model, batch, order=order).bound,
                               bounds_identity() + (order.key() if order else ""), inputs)
        usable = (np.isfinite(bound) & (bound >= 0)).reshape(len(bound), -1).all(axis=1)
        if not usable.all():  # named from the first such input alone: the cache keeps numbers, not reasons
            row = int(np.argmin(usable))
            batch = campaign_inputs(model, settings) if inputs is None else inputs
            why = bounds.derive(model, batch[row:row + 1], order=order).broken or "the bound is not a finite number"
            number = row if index is None else int(index[row])
            return BrokenBound(f"{why} (input #{number}; {int((~usable).sum())} of {len(usable)} inputs)")
    except Exception as exc:
        kind = "" if isinstance(exc, USER_ERRORS) else f"{type(exc).__name__}: "
        return f"no derived bound ({kind}{exc}): {FALLBACK}"
    timings["bound_s"] = timings.get("bound_s", 0.0) + time.perf_counter() - start
    return bound


def bounds_identity() -> str:
    """What the derived bound depends on besides the model and inputs: the rules' source and the libm table."""
    return digest([Path(bounds.__file__).read_text(), bounds.LIBM_TABLE.read_text()])
