"""The package's input sets (``harness.core.inputsets``): made, archived, checked and measured.

For one generated code, each selected set is drawn with the build's seed (the uniform one is the test
inputs every stage ran), archived as ``inputs/<code>/<set>.npy``, checked layer by layer against the
reference (``layererror.measure_sets``, every set in one pass: the last layer is the network's output, so a
set whose outputs leave the tolerance fails), and measured: the statement, branch and MC/DC coverage of the
generated code it reaches (``coverage``, files in ``coverage/<code>/sets/<set>/``) and the activation states
of the reference it reaches. The package's main coverage part is that of all sets together.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np

from harness.core import inputsets, intermediate
from harness.core.pipeline import to_code_layout
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.stages.evidence import coverage, layererror

SCHEMA = "assay-input-sets/1"


def make(model: Model, code: GeneratedCode, kinds: list[str], count: int, extra: int, seed: int
         ) -> tuple[dict[str, np.ndarray], list[str]]:
    """The sets, in the order of ``kinds`` (uniform: ``count`` inputs, the others ``extra``), and a note for each
    set that cannot be made (no reference gives the activation states it needs)."""
    states = intermediate.activation_states(code, model)
    sets, notes = {}, []
    for kind in kinds:
        if kind in ("thresholds", "coverage") and states is None:
            notes.append(f"input set {kind} not made: {intermediate.unavailable(code, model)}")
            continue
        sets[kind] = inputsets.make_set(kind, model, count if kind == "uniform" else extra, seed, states)
    return sets, notes


def evaluate(code: GeneratedCode, model: Model, sets: dict[str, np.ndarray], seed: int, work: Path, root: Path,
             key: str, timeout: float) -> tuple[dict[str, dict], dict[str, dict]]:
    """Archive, check and measure every set; return the record of each (``inputs/input-sets.json``) and the
    per-layer errors of each (``layererror.measure``; the trace matrix shows the uniform set's)."""
    states = intermediate.activation_states(code, model)
    records = {}
    # every set's per-layer error in one pass (one instrumented build, every figure batched over all the sets)
    layer_errors = layererror.measure_sets(code, model, sets, work / "layers", model.tolerance, model.rtol, timeout)
    for kind, inputs in sets.items():
        path = root / "inputs" / key / f"{kind}.npy"
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.save(buffer, inputs, allow_pickle=False)
        path.write_bytes(buffer.getvalue())
        errors = layer_errors[kind]
        code_inputs = to_code_layout(inputs, model, code)
        out = root / "coverage" / key / "sets" / kind
        covered = coverage.measure(code, code_inputs, work / "coverage", out, timeout)  # one build, counts reset
        mcdc = coverage.measure_mcdc(code, code_inputs, work / "mcdc" / kind, out, timeout)
        record = {"method": kind, "seed": seed, "inputs": len(inputs), "file": path.relative_to(root).as_posix(),
                  "sha256": hashlib.sha256(inputs.tobytes()).hexdigest(),
                  "line_percent": covered["line_percent"], "branch_percent": covered["branch_percent"],
                  "mcdc_percent": mcdc.get("mcdc_percent") if mcdc.get("available") else None,
                  "mcdc": mcdc["figure"] if mcdc.get("available") else f"not measured: {mcdc.get('reason')}"}
        if errors["available"]:
            last = errors["layers"][-1]
            record.update(verdict="pass" if errors["first_over_tolerance"] is None else "fail",
                          max_abs_error=last.get("max_abs_error"), first_layer_over_tolerance=errors[
                              "first_over_tolerance"],
                          layer_errors={row["layer"]: row.get("max_abs_error") for row in errors["layers"]})
        else:
            record.update(verdict="not checked", cause=errors["reason"])
        if states is not None:
            reached = states(inputs)
            record["activation_states"] = inputsets.state_coverage(reached)
            # the arg-max states are the last output_size columns (intermediate.activation_states)
            record["classes"] = sorted({int(c) for c in np.flatnonzero(reached[:, -code.output_size:].any(axis=0))})
        records[kind] = record
    return records, layer_errors

