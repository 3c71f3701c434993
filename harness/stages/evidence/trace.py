"""The trace matrix: one row per model layer, from the layer's name in the source model to its C lines
(the generator's manifest), its object code in each target's ELF (DWARF line table), the tests that
exercised it, its coverage, its per-layer measured cycles and WCET, and its output's largest error against the
reference's same intermediate tensor (``layererror``).

Everything is read from what earlier steps wrote (manifest, ELF, coverage summary, wcet.json); nothing
is re-derived. Lines of generated C outside every layer and instructions of the inference function
outside every layer are listed as such ("untraced"), so that every line and every instruction is
accounted for.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from harness.measurement import execcount
from wcet import armcode

OUTSIDE = "(outside layers)"


def rows(manifest: dict, coverage: dict, elves: dict[str, Path], wcet_records: list[dict], tests: str,
         layer_errors: dict | None = None, verified: dict[int, dict] | None = None) -> list[dict]:
    """The matrix for one generated code: ``elves`` maps a target to its ELF (None for the host);
    ``layer_errors`` is ``layererror.measure``'s result (each layer's error against the reference); ``verified``:
    per layer index, its requirement id and the tests that verify it (``requirement``, ``tests``: the input sets
    and the layer's neuron coverage, ``requirements.py``), else every layer shows ``tests``."""
    verified = verified or {}
    entry = manifest["entry"]["symbol"]
    names = execcount.bucket_names(manifest)
    ranges: dict[str, dict[str, list[str]]] = {}
    for target, elf in sorted(elves.items()):
        if elf is None:
            continue
        for span in armcode.layer_ranges(armcode.ArmCode(elf), manifest, entry):
            ranges.setdefault(names[span.bucket], {}).setdefault(target, []).append(
                f"{span.start:#x}-{span.end:#x}")
    layer_figures: dict[str, dict[str, dict]] = {}
    for record in wcet_records:
        for layer in record.get("layers") or []:
            layer_figures.setdefault(layer["layer"], {})[f"{record['target']}/{record['timing']}"] = {
                "wcet_cycles": layer["wcet_cycles"], "max_measured_cycles": layer["max_measured_cycles"]}
    unreached = {}
    for line in coverage.get("unreached_lines", []):
        unreached.setdefault(line["layer"], []).append(line["line"])
    errors = {row["index"]: row for row in (layer_errors or {}).get("layers", [])}
    result = []
    for layer in manifest.get("layers", []):
        first, last = layer["lines"]
        mine = verified.get(layer["index"], {})
        result.append({"layer": layer["name"], "op": layer.get("op"), "index": layer["index"],
                       "requirement": mine.get("requirement"),
                       "c_file": layer["file"], "c_lines": [first, last], "object_code": ranges.get(layer["name"], {}),
                       "tests": mine.get("tests", tests), "lines_not_reached": sorted(unreached.get(layer["name"], [])),
                       "cycles": layer_figures.get(layer["name"], {}), "error": _error(errors.get(layer["index"]))})
    result.append({"layer": OUTSIDE, "op": None, "index": None, "requirement": None,
                   "c_file": manifest["entry"]["file"],
                   "c_lines": None, "object_code": ranges.get(OUTSIDE, {}), "tests": tests,
                   "lines_not_reached": sorted(unreached.get(None, [])),
                   "cycles": layer_figures.get(OUTSIDE, {}), "error": None})
    return result


def _error(row: dict | None) -> dict | None:
    """A layer's error against the reference's same tensor, as the matrix shows it; None for a layer without an
    output of its own (an activation fused into its producer, whose row carries the figure)."""
    if row is None:
        return None
    if not row["compared"]:
        return {"compared": False, "reason": row["reason"]}
    return {"compared": True, "max_abs_error": row["max_abs_error"], "within_tolerance": row["within_tolerance"],
            **{k: row[k] for k in ("judged_by", "c_to_float64", "largest_bound", "bound_ratio") if k in row}}


def untraced_lines(manifest: dict, directory: Path) -> list[dict]:
    """Lines of the entry's C file with code (not blank, not a comment, not a brace) outside every layer span."""
    entry_file = manifest["entry"]["file"]
    spans = [tuple(layer["lines"]) for layer in manifest.get("layers", []) if layer["file"] == entry_file]
    text = (directory / entry_file).read_text().splitlines()
    found = []
    for number, line in enumerate(text, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("/*", "*", "//", "#")) or stripped in ("{", "}"):
            continue
        if not any(first <= number <= last for first, last in spans):
            found.append({"file": entry_file, "line": number, "text": stripped})
    return found


def as_csv(matrix: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["layer", "requirement", "op", "c_file", "c_lines", "object_code", "tests", "lines_not_reached",
                     "cycles", "max_error_vs_reference"])
    for row in matrix:
        lines = "" if row["c_lines"] is None else f"{row['c_lines'][0]}-{row['c_lines'][1]}"
        code = "; ".join(f"{t}: {' '.join(r)}" for t, r in sorted(row["object_code"].items()))
        cycles = "; ".join(f"{k}: WCET {v['wcet_cycles']} / measured {v['max_measured_cycles']}"
                           for k, v in sorted(row["cycles"].items()))
        writer.writerow([row["layer"], row.get("requirement") or "", row["op"] or "", row["c_file"], lines, code,
                         row["tests"],
                         " ".join(map(str, row["lines_not_reached"])), cycles, _shown(row.get("error"))])
    return out.getvalue()


def _shown(error: dict | None) -> str:
    if error is None:
        return ""
    if not error["compared"]:
        return f"not compared: {error['reason']}"
    return f"{error['max_abs_error']:.3e}" + ("" if error["within_tolerance"] else " (over tolerance)")


def judgement(error: dict) -> str:
    """How a compared layer was judged: |C - float64| against its derived bound, or why by the fixed tolerance."""
    if "bound_ratio" not in error:
        return f"{error.get('judged_by', 'fixed tolerance')}: {'within' if error['within_tolerance'] else 'over'}"
    return (f"|C - float64| {error['c_to_float64']:.3e} against the layer's derived bound (largest "
            f"{error['largest_bound']:.3e}; largest ratio {error['bound_ratio']:.3g}): "
            f"{'within' if error['within_tolerance'] else 'over'}")
