"""The generator conformance suite: every conformance case against every selected generator and variant.

The cases (``harness.stages.conformance.cases``) are built into the work folder, then each generator runs
them all in one ``assay semantic`` call (``harness.core.stagecall``: a subprocess, so a stage never imports
another, and one process start-up per generator instead of per case). Its records are content-keyed in
``<work>/conformance-runs/<generator>/results.json``, so a second suite run reuses what did not change.
Each (case, generator, variant) gets one verdict from its records (one per reference): ``error`` if any is
an error, else ``not supported``, else ``fail`` if any reference disagrees, else ``pass``; its
``max_abs_error`` is the largest over the references. A case that fails or errs gets a reproducer: the model
file copied into ``OUT/repro/`` and the ``assay semantic`` command that shows the verdict again.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness.core import stagecall
from harness.core.oracle import ERROR, FAIL, NOT_SUPPORTED, PASS
from harness.core.pipeline import slug
from harness.core.plan import UNLOADED
from harness.core.provenance import record_provenance
from harness.errors import AssayError
from harness.models.model import file_sha256
from harness.stages.conformance import cases as conformance_cases
from harness.stages.conformance.spec import SPEC
from harness.stages.semantic import spec as semantic

SCHEMA = SPEC.schema
FILE_NAME = SPEC.result_file
REFERENCES = "keras,onnxruntime"
VERDICTS = SPEC.verdicts
REPRO = "repro"
# The semantic verdicts, most telling first: the one a (case, generator, variant) gets.
_PRECEDENCE = (ERROR, NOT_SUPPORTED, FAIL, PASS)


@dataclass(frozen=True)
class Settings:
    """The defaults are the options' (``spec``)."""

    generators: list[str]
    out: Path
    patterns: list[str] | None = None
    suite: str = SPEC.default("suite")
    n_inputs: int = SPEC.default("n_inputs")
    seed: int = SPEC.default("seed")
    work_dir: Path = SPEC.default("work_dir")
    jobs: int = SPEC.default("jobs")
    timeout: float | None = SPEC.default("timeout")  # for one generator's whole semantic call


def run(settings: Settings, progress=print) -> dict:
    """Build the cases, run every generator on them, write ``OUT/conformance.json``; return the document."""
    from harness import generators

    for spec in settings.generators:  # an unknown name fails here, before any case is built
        generators.get(spec)
    cases = conformance_cases.select(settings.patterns)
    progress(f"conformance: building {len(cases)} cases in {settings.work_dir / conformance_cases.CACHE_DIR}")
    files = conformance_cases.build_all(cases, settings.work_dir)

    def one(generator: str) -> tuple[str, stagecall.StageRun]:
        progress(f"conformance: {generator}: {len(cases)} cases through assay semantic")
        done = stagecall.call(semantic.SPEC, semantic_arguments(list(files.values()), generator, settings),
                              settings.work_dir / "conformance-runs" / slug(generator), settings.timeout)
        progress(f"conformance: {generator}: done")
        return generator, done

    with ThreadPoolExecutor(max_workers=max(1, settings.jobs)) as pool:
        runs = dict(pool.map(one, settings.generators))
    results = [result for spec in settings.generators
               for result in verdicts(runs[spec].records, files, generators.get(spec).name)]
    document = {
        "generators": settings.generators,
        "references": REFERENCES.split(","),
        "n_inputs": settings.n_inputs,
        "seed": settings.seed,
        "target": "host",
        "stage_commands": {g: " ".join(shlex.quote(part) for part in runs[g].command) for g in settings.generators},
        "cases": [{"name": case.name, "checks": case.checks, "input_shape": list(case.input_shape),
                   "file": str(files[case.name]), "sha256": file_sha256(files[case.name])} for case in cases],
        "results": _with_reproducers(results, files, settings),
    }
    return write_document(document, settings)


def write_document(document: dict, settings: Settings) -> dict:
    """``document`` with its schema and provenance, written to ``OUT/conformance.json`` at once (never half)."""
    document = {"schema": SCHEMA, "suite": settings.suite, **document, "provenance": record_provenance()}
    settings.out.mkdir(parents=True, exist_ok=True)
    temporary = settings.out / f".{FILE_NAME}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(document, indent=1) + "\n")
    temporary.replace(settings.out / FILE_NAME)
    return document


def semantic_arguments(files: list[Path], generator: str, settings: Settings,
                       models_dir: Path | None = None) -> list[str]:
    """``assay semantic`` arguments running ``files`` (or their copies in ``models_dir``) on one generator."""
    models = [str(models_dir / f.name) if models_dir else str(f) for f in files]
    return [*(arg for m in models for arg in ("--models", m)), "--generators", generator, "--references", REFERENCES,
            "--inputs", str(settings.n_inputs), "--seed", str(settings.seed), "--work", str(settings.work_dir)]


def verdicts(records: list[dict], files: dict[str, Path], generator: str) -> list[dict]:
    """One result per (case, variant) of ``generator`` from its semantic records (other models ignored).

    A case for which the generator offered no variant at all is ``not supported``.
    """
    case_of = {str(path): name for name, path in files.items()}
    grouped: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        if record["model"] in case_of and record["generator"] == generator:
            grouped.setdefault((case_of[record["model"]], record["variant"]), []).append(record)
    results = []
    for name in files:
        variants = [variant for case, variant in grouped if case == name]
        if not variants:
            results.append({"case": name, "generator": generator, "variant": UNLOADED, "verdict": NOT_SUPPORTED,
                            "max_abs_error": None, "errors": {},
                            "cause": f"{generator} offers no variant for this model"})
        for variant in variants:
            results.append(combine(name, generator, variant, grouped[(name, variant)]))
    return results


def combine(case: str, generator: str, variant: str, records: list[dict]) -> dict:
    """The verdict of one (case, generator, variant) from its records, one per reference."""
    verdict = next(v for v in _PRECEDENCE if any(r["verdict"] == v for r in records) or v == PASS)
    errors = {r["reference"]: r["max_abs_error"] for r in records}
    known = [e for e in errors.values() if e is not None]
    causes = dict.fromkeys(r["cause"] if r["verdict"] != FAIL else f"vs {r['reference']}: {r['cause']}"
                           for r in records if r["verdict"] == verdict and r.get("cause"))
    return {"case": case, "generator": generator, "variant": variant, "verdict": verdict,
            "max_abs_error": max(known) if known else None, "errors": errors,
            "tolerance": {"atol": records[0].get("tolerance"), "rtol": records[0].get("rtol")},
            "cause": "; ".join(causes) if verdict != PASS else None}


def _with_reproducers(results: list[dict], files: dict[str, Path], settings: Settings) -> list[dict]:
    """Each failing or erring result with its reproducer: the model copied into ``OUT/repro/`` and the
    ``assay semantic`` command that runs it alone on the generator (all its variants)."""
    repro = settings.out / REPRO
    if repro.is_dir():
        shutil.rmtree(repro)
    for result in results:
        if result["verdict"] not in (FAIL, ERROR):
            continue
        source = files[result["case"]]
        copy = repro / source.name
        if not copy.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, copy)
        arguments = semantic_arguments([source], result["generator"], settings, models_dir=repro)
        out = repro / f"{result['case']}-{slug(result['generator'])}"
        result["reproducer"] = {"model": str(copy), "command": " ".join(
            shlex.quote(part) for part in ["assay", "semantic", *arguments, "--out", str(out)])}
    return results


def check_settings(settings: Settings) -> None:
    if settings.n_inputs < 1:
        raise AssayError(f"--inputs must be at least 1 (got {settings.n_inputs})")
    if not settings.generators:
        raise AssayError("--generators names no generator")
