"""Structural coverage of the generated code by the test inputs, on the host: statements (lines) and
branches, measured with gcc ``--coverage`` and reported by gcovr (JSON and HTML).

The generated sources are built into the host runner's shared library with ``--coverage`` and run in
the worker process on the campaign's inputs, exactly as the semantic stage runs them; gcovr reads the
counts. Every line and branch outcome never reached is listed with the manifest layer it belongs to:
a coverage below 100 % is reported as such, never hidden.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import numpy as np

from harness import targets
from harness.errors import AssayError
from harness.generators.generated import GeneratedCode
from harness.runners import host

COVERAGE_FLAGS = ("--coverage",)


def measure(code: GeneratedCode, inputs: np.ndarray, build_dir: Path, out_dir: Path, timeout: float) -> dict:
    """Build with coverage, run ``inputs`` (N, input_size, the code's layout), write gcovr's files to
    ``out_dir``; return the summary (totals, per file, what was never reached)."""
    profile = targets.get("host")
    profile = dataclasses.replace(profile, cflags=(*profile.cflags, *COVERAGE_FLAGS),
                                  ldflags=(*profile.ldflags, *COVERAGE_FLAGS))
    built = host.build(code, build_dir, profile, "-O0")
    for stale in built.library.parent.glob("*.gcda"):  # counts of an earlier run would add up
        stale.unlink()
    host.run(built, inputs, timeout)
    out_dir.mkdir(parents=True, exist_ok=True)
    detailed, html = out_dir / "coverage.json", out_dir / "coverage.html"
    environment = {**os.environ, "SOURCE_DATE_EPOCH": "0"}  # no build date in the HTML
    command = ["gcovr", "--root", str(code.directory), "--exclude-unreachable-branches",
               "--json-pretty", "--json", str(detailed), "--html-details", str(html),
               "--html-title", "Structural coverage of the generated code", str(built.library.parent)]
    result = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if result.returncode != 0:
        raise AssayError(f"gcovr failed: {(result.stderr.strip().splitlines() or ['no message'])[-1]}")
    return summarise(json.loads(detailed.read_text()), code.manifest)


def summarise(report: dict, manifest: dict) -> dict:
    """Totals, per-file figures and every line or branch outcome not reached, with its layer."""
    spans = [(Path(layer["file"]).name, *layer["lines"], layer["name"]) for layer in manifest.get("layers", [])
             if layer.get("lines")]

    def layer_of(file: str, line: int) -> str | None:
        return next((name for span_file, first, last, name in spans
                     if span_file == Path(file).name and first <= line <= last), None)

    files, unreached_lines, unreached_branches = [], [], []
    totals = {"lines": 0, "lines_covered": 0, "branches": 0, "branches_covered": 0}
    for entry in report.get("files", []):
        name = entry["file"]
        lines = [line for line in entry.get("lines", []) if not line.get("gcovr/noncode")]
        branches = [(line["line_number"], b) for line in lines for b in line.get("branches", [])]
        figures = {"file": name, "lines": len(lines), "lines_covered": sum(line["count"] > 0 for line in lines),
                   "branches": len(branches), "branches_covered": sum(b["count"] > 0 for _, b in branches)}
        files.append(figures)
        for key in totals:
            totals[key] += figures[key]
        unreached_lines += [{"file": name, "line": line["line_number"], "layer": layer_of(name, line["line_number"])}
                            for line in lines if line["count"] == 0]
        unreached_branches += [{"file": name, "line": number, "branch": b.get("branchno", i),
                                "layer": layer_of(name, number)}
                               for i, (number, b) in enumerate(branches) if b["count"] == 0]
    return {"tool": "gcc --coverage + gcovr", "totals": totals,
            "line_percent": _percent(totals["lines_covered"], totals["lines"]),
            "branch_percent": _percent(totals["branches_covered"], totals["branches"]),
            "files": files, "unreached_lines": unreached_lines, "unreached_branches": unreached_branches}


def _percent(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None
