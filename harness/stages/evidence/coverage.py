"""Structural coverage of the generated code by the test inputs, on the host: statements (lines) and
branches, measured with gcc ``--coverage`` and reported by gcovr (JSON and HTML); MC/DC measured with clang's
``-fcoverage-mcdc`` and reported by ``llvm-cov`` (``measure_mcdc``).

The generated sources are built into the host runner's shared library with ``--coverage`` and run in
the worker process on the campaign's inputs, exactly as the semantic stage runs them; gcovr reads the
counts. Every line and branch outcome never reached is listed with the manifest layer it belongs to:
a coverage below 100 % is reported as such, never hidden.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from harness import sandbox, targets
from harness.errors import AssayError
from harness.generators.generated import GeneratedCode
from harness.runners import RunError, collect, host, native, qemu
from harness.runners.compiling import DRIVERS_DIR, driver_defines, run_compiler

COVERAGE_FLAGS = ("--coverage",)
COUNTS_LIMIT = 256 << 20  # bytes of one counts file read back from a run (a real one is kilobytes)
MCDC_FLAGS = ("-fprofile-instr-generate", "-fcoverage-mapping", "-fcoverage-mcdc")
# MC/DC needs clang 18 or later: Debian 12 has 19 (clang-19, llvm-19, libclang-rt-19-dev; .ci/setup)
LLVM_VERSIONS = (19, 20, 18)


def measure(code: GeneratedCode, inputs: np.ndarray, build_dir: Path, out_dir: Path, timeout: float) -> dict:
    """Build with coverage, run ``inputs`` (N, input_size, the code's layout), write gcovr's files to
    ``out_dir``; return the summary (totals, per file, what was never reached)."""
    profile = targets.get(targets.HOST)
    profile = dataclasses.replace(profile, cflags=(*profile.cflags, *COVERAGE_FLAGS),
                                  ldflags=(*profile.ldflags, *COVERAGE_FLAGS))
    built = host.build(code, build_dir, profile, "-O0")
    for stale in built.library.parent.glob("*.gcda"):  # counts of an earlier run would add up
        stale.unlink()
    # The run writes its counts in its own fresh folder (GCOV_PREFIX, the object's folder stripped), never in the
    # build folder; they are read back as untrusted and copied beside the objects, where gcovr looks.
    with sandbox.fresh_folder() as folder:
        host.run(built, inputs, timeout, env={"GCOV_PREFIX": str(folder),
                                              "GCOV_PREFIX_STRIP": str(len(built.library.parent.parts) - 1)},
                 folder=folder)
        collect(folder, "*.gcda", built.library.parent, COUNTS_LIMIT, "a coverage counts file")
    out_dir.mkdir(parents=True, exist_ok=True)
    detailed, html = out_dir / "coverage.json", out_dir / "coverage.html"
    environment = {**os.environ, "SOURCE_DATE_EPOCH": "0"}  # no build date in the HTML
    # gcovr unconfined: it reads the counts the sandboxed build and run wrote and the sources, and runs no
    # generated code (the --coverage build is host.build's, in the sandbox: harness.runners.compiling)
    command = ["gcovr", "--root", str(code.directory), "--exclude-unreachable-branches",
               "--json-pretty", "--json", str(detailed), "--html-details", str(html),
               "--html-title", "Structural coverage of the generated code", str(built.library.parent)]
    result = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if result.returncode != 0:
        raise AssayError(f"gcovr failed: {(result.stderr.strip().splitlines() or ['no message'])[-1]}")
    return summarise(json.loads(detailed.read_text()), code.manifest)


def summarise(report: dict, manifest: dict) -> dict:
    """Totals, per-file figures and every line or branch outcome not reached, with its layer."""
    layer_of = _layer_lookup(manifest)
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


def llvm_tools() -> tuple[str, str, str] | None:
    """(clang, llvm-profdata, llvm-cov) of the first LLVM version with MC/DC installed, or None."""
    for version in LLVM_VERSIONS:
        tools = tuple(shutil.which(f"{name}-{version}") for name in ("clang", "llvm-profdata", "llvm-cov"))
        if all(tools):
            return tools  # type: ignore[return-value]
    return None


def measure_mcdc(code: GeneratedCode, inputs: np.ndarray, build_dir: Path, out_dir: Path, timeout: float) -> dict:
    """MC/DC of the generated sources by ``inputs``: clang's instrumentation on a standalone host executable
    (the sources and the target batch driver, ``harness/runners/target_driver.c``), ``llvm-profdata merge``,
    ``llvm-cov export`` for the figures and ``llvm-cov show -show-mcdc`` for where each condition is. Every
    condition not shown to independently affect its decision's outcome is listed with its layer.

    Returns ``{"available": False, "reason": ...}`` when no clang with MC/DC is installed: said, not hidden.
    """
    tools = llvm_tools()
    if tools is None:
        return {"tool": "clang -fcoverage-mcdc + llvm-cov", "available": False,
                "reason": "no clang >= 18 with llvm-cov (Debian packages clang-19, llvm-19, libclang-rt-19-dev; "
                          "bash .ci/setup installs them)"}
    clang, profdata, llvm_cov = tools
    build_dir = Path(build_dir).resolve()
    if build_dir.exists():
        shutil.rmtree(build_dir)  # no counts of an earlier run
    build_dir.mkdir(parents=True)
    executable = build_dir / "mcdc"
    profile = targets.get(targets.HOST)
    flags = [flag for flag in profile.flags("-O0") if flag != "-fPIC"]
    built = run_compiler([clang, *flags, *MCDC_FLAGS, f"-I{code.directory}", *driver_defines(code),
                          *map(str, code.sources), str(qemu.DRIVER), "-o", str(executable), *profile.libs],
                         build_dir, (code.directory, DRIVERS_DIR), code.directory)
    if built.returncode != 0:
        raise AssayError(f"clang (MC/DC build) failed: {(built.stderr.strip().splitlines() or ['no message'])[0]}")
    raw = build_dir / "mcdc.profraw"
    try:  # like every run of generated code, in the sandbox, writing its counts in its own folder (docs/sandbox.md)
        with sandbox.fresh_folder() as folder:
            native.run(executable, code, inputs, timeout, env={"LLVM_PROFILE_FILE": str(folder / raw.name)},
                       folder=folder)
            if not collect(folder, raw.name, build_dir, COUNTS_LIMIT, "the MC/DC counts file"):
                raise RunError("the MC/DC build wrote no counts file")
    except RunError as exc:
        raise AssayError(f"the MC/DC build failed: {exc}") from None
    merged = build_dir / "mcdc.profdata"
    _tool([profdata, "merge", "-sparse", str(raw), "-o", str(merged)], "llvm-profdata merge")
    sources = [str(source) for source in code.sources]
    exported = json.loads(_tool([llvm_cov, "export", "-format=text", f"-instr-profile={merged}", str(executable),
                                 *sources], "llvm-cov export"))
    shown = _tool([llvm_cov, "show", "-show-mcdc", f"-instr-profile={merged}", str(executable), *sources],
                  "llvm-cov show")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "mcdc.txt").write_text(shown.replace(f"{Path(code.directory).resolve()}/", ""))
    version = (_tool([clang, "--version"], "clang --version").splitlines() or ["clang"])[0]
    return summarise_mcdc(exported, conditions_shown(shown), code.manifest, version)


def _tool(command: list[str], what: str) -> str:
    """An LLVM tool run unconfined: llvm-profdata and llvm-cov read only what Assay's own sandboxed build and
    run wrote (the executable, its counts) and the sources, never run generated code (gcovr likewise)."""
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssayError(f"{what} failed: {(result.stderr.strip().splitlines() or ['no message'])[0]}")
    return result.stdout


_DECISION = re.compile(r"MC/DC Decision Region \((\d+):(\d+)\) to \((\d+):(\d+)\)")
_CONDITION = re.compile(r"Condition C(\d+) --> \((\d+):(\d+)\)")


def conditions_shown(text: str) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """{(line, column) of a decision: [(line, column) of condition C1, C2, ...]} from ``llvm-cov show
    -show-mcdc``: the JSON export gives each condition's result but not where the condition is."""
    found: dict[tuple[int, int], list[tuple[int, int]]] = {}
    current = None
    for line in text.splitlines():
        if match := _DECISION.search(line):
            current = found.setdefault((int(match[1]), int(match[2])), [])
        elif (match := _CONDITION.search(line)) and current is not None:
            current.append((int(match[2]), int(match[3])))
    return found


def summarise_mcdc(exported: dict, where: dict[tuple[int, int], list[tuple[int, int]]], manifest: dict,
                   version: str) -> dict:
    """Totals, per-file figures and every condition not independently shown, with its decision and layer.

    ``llvm-cov export`` (format 2.x) gives per file ``mcdc_records``: [line, column, end line, end column,
    expansion, kind, [independence shown per condition]].
    """
    layer_of = _layer_lookup(manifest)
    files, not_shown, decisions = [], [], 0
    for entry in exported["data"][0]["files"]:
        name = Path(entry["filename"]).name
        summary = entry["summary"].get("mcdc", {"count": 0, "covered": 0})
        files.append({"file": name, "conditions": summary["count"], "conditions_shown": summary["covered"]})
        text = Path(entry["filename"]).read_text().splitlines() if Path(entry["filename"]).is_file() else []
        for line, column, end_line, end_column, _expansion, _kind, shown in entry.get("mcdc_records", []):
            decisions += 1
            decision = text[line - 1][column - 1:end_column - 1] if line == end_line and line <= len(text) else None
            positions = where.get((line, column), [])
            for number, independent in enumerate(shown, start=1):
                if not independent:
                    at = positions[number - 1] if number <= len(positions) else (None, None)
                    not_shown.append({"file": name, "decision": decision, "decision_lines": [line, end_line],
                                      "condition": f"C{number}", "line": at[0], "column": at[1],
                                      "layer": layer_of(name, line)})
    conditions = sum(f["conditions"] for f in files)
    shown_total = sum(f["conditions_shown"] for f in files)
    return {"tool": f"{version}: -fcoverage-mcdc, llvm-cov", "available": True, "decisions": decisions,
            "conditions": conditions, "conditions_shown": shown_total,
            "mcdc_percent": _percent(shown_total, conditions), "files": files, "not_shown": not_shown,
            "figure": mcdc_figure(decisions, conditions, shown_total),
            "note": None if decisions else "no decision of two or more conditions in the generated code: "
                                           "MC/DC reduces to the branch coverage above"}


def mcdc_figure(decisions: int, conditions: int, shown: int) -> str:
    """MC/DC in words: a percentage of conditions only where there is a decision of two or more conditions, else
    ``not applicable: 0 decisions`` (never a percentage of nothing)."""
    if not decisions:
        return "not applicable: 0 decisions"
    return f"{_percent(shown, conditions)} % ({shown}/{conditions} conditions, {decisions} decisions)"


def _layer_lookup(manifest: dict):
    """``layer_of(file, line)``: the manifest layer whose line span holds the line, or None."""
    spans = [(Path(layer["file"]).name, *layer["lines"], layer["name"]) for layer in manifest.get("layers", [])
             if layer.get("lines")]

    def layer_of(file: str, line: int) -> str | None:
        return next((name for span_file, first, last, name in spans
                     if span_file == Path(file).name and first <= line <= last), None)

    return layer_of
