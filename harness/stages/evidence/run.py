"""Building the evidence package: run the stages, archive the code, measure coverage, trace, index, and the
tool qualification data of Assay itself (its own tests and the TOR matrix, ``tor``).

The stages run through the CLI (``harness.core.stagecall``) into a work folder outside the package,
content-keyed, so a second build reuses their records. The package receives what they wrote, with the
volatile fields (timings, dates) moved to ``volatile.json``, so that the same inputs give the same bytes.
"""

from __future__ import annotations

import multiprocessing
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness import references, targets
from harness.contract import FAIL, PASS
from harness.core import configuration, qualification, stagecall
from harness.core.pipeline import slug, to_code_layout
from harness.core.plan import UNLOADED, Item, expand
from harness.core.plan import Settings as PlanSettings
from harness.core.plan import load_model
from harness.digests import digest
from harness.errors import AssayError
from harness.generators.generated import GeneratedCode
from harness.measurement import cycles
from harness.models.model import Model
from harness.stages.evidence import (coverage, html, kit, objcov, package, requirements, sci, signature, testsets, tor,
                                     trace, verdicts)
from harness.stages.evidence.package import VOLATILE_KEYS, sha256, write_json
from harness.stages.evidence.report import write_index_page
from harness.stages.evidence.spec import SPEC as EVIDENCE
from harness.stages.evidence.verdicts import NOT_RUN, STAGES
from harness.stages.wcet import spec as wcet_spec
from harness.targets import HOST

REQUIREMENTS = "requirements/requirements.json"  # assay-requirements/1 (requirements.py)
SANITIZED_INPUTS = 100  # test inputs of each host item also run under ASan and UBSan (semantic --sanitize)


@dataclass(frozen=True)
class Settings:
    models: list[str]
    generators: list[str]
    targets: list[str]
    out: Path
    work_dir: Path = EVIDENCE.default("work_dir")  # the defaults are the options' (spec)
    n_inputs: int = EVIDENCE.default("n_inputs")
    seed: int = EVIDENCE.default("seed")
    model_seed: int = EVIDENCE.default("model_seed")
    wcet_inputs: int = EVIDENCE.default("wcet_inputs")
    timeout: float = EVIDENCE.default("timeout")
    mutants: int | None = EVIDENCE.default("mutants")  # assay mutate --max-mutants: None for all, 0: not run
    tor_tests: str | None = EVIDENCE.default("tor_tests")  # pytest arguments; None: tor.DEFAULT_SELECTION
    tor_junit: Path | None = EVIDENCE.default("tor_junit")  # a JUnit XML of Assay's tests instead of running them
    jobs: int = EVIDENCE.default("jobs")  # stages (and mutants) run at a time
    input_sets: list[str] = field(default_factory=lambda: EVIDENCE.default("input_sets"))  # core.inputsets
    set_inputs: int = EVIDENCE.default("set_inputs")  # inputs of each set but the uniform one (which has n_inputs)
    shard_size: int | None = EVIDENCE.default("shard_size")  # semantic and met in shards (docs/sharding.md)
    sign_key: Path | None = EVIDENCE.default("sign_key")  # Ed25519 private key (PEM): DIR.sig (signature.py)
    command_line: tuple[str, ...] = ()  # the assay evidence command that asked for the package (sci.json)
    level: str = EVIDENCE.default("level")  # DO-178C software level: the kit's TQL determination (kit.py)


@dataclass
class Built:
    """What the build did: the package folder, its archive, the verdict of each part, the package digest."""

    root: Path
    archive: Path
    verdicts: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tool_qualification: str = NOT_RUN  # the TOR matrix's verdict (pass, fail, incomplete, unverified)
    digest: str | None = None  # the SHA-256 of evidence.json, also in DIR.sha256 (package.write_digest)
    signature: Path | None = None  # DIR.sig when signed (--sign-key)

    @property
    def verdict(self) -> str:
        """``verdicts.overall``: every part passes and the tool qualification is complete."""
        return verdicts.overall(self.verdicts, self.tool_qualification)


def build(settings: Settings, progress=print) -> Built:
    """Build the package in ``settings.out`` (replacing an earlier package there, never other files)."""
    if settings.sign_key is not None:
        signature.private_key(settings.sign_key)  # a key that cannot sign is refused before the build, not after
    root = _fresh(settings.out)
    doctor = configuration.report()  # what the package's numbers were computed on; not pass when untested
    arm = [t for t in settings.targets if t != HOST]
    runs_dir = settings.work_dir / "evidence-runs" / digest([settings.models, settings.generators])[:12]
    common = [*(arg for m in settings.models for arg in ("--models", m)), "--generators", ",".join(settings.generators),
              "--seed", str(settings.seed), "--model-seed", str(settings.model_seed), "--work", str(settings.work_dir)]
    sharding = ["--shard-size", str(settings.shard_size)] if settings.shard_size else []
    plan = [("semantic", [*common, "--targets", ",".join(dict.fromkeys([HOST, *settings.targets])),
                          "--inputs", str(settings.n_inputs), "--timeout", str(settings.timeout),
                          "--sanitize", str(min(SANITIZED_INPUTS, settings.n_inputs)), *sharding])]
    if arm:
        plan += [("memory", [*common, "--targets", ",".join(arm)]),
                 ("met", [*common, "--targets", ",".join(arm), "--inputs", str(settings.wcet_inputs), *sharding]),
                 ("wcet", [*common, "--targets", ",".join(arm), "--inputs", str(settings.wcet_inputs)])]
    built = Built(root=root, archive=root.with_name(root.name + ".zip"))
    if doctor.get("qualified_by"):  # the run that made this configuration tested travels with the package
        for name, target in ((qualification.JUNIT, sci.QUALIFICATION_JUNIT),
                             (qualification.RECORD, sci.QUALIFICATION_RECORD)):
            (root / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(doctor["qualified_by"]["folder"]) / name, root / target)
    built.notes.extend(sci.tested_configuration(doctor, lambda path: (root / path).read_bytes()
                                                if (root / path).is_file() else None)[1])
    if settings.mutants is None or settings.mutants > 0:
        plan.append(("mutate", [*common, "--inputs", str(settings.n_inputs), "--timeout", str(settings.timeout),
                                "--input-sets", ",".join(settings.input_sets), "--set-inputs", str(settings.set_inputs),
                                "--jobs", str(settings.jobs),
                                *(["--max-mutants", str(settings.mutants)] if settings.mutants else [])]))
    else:
        built.notes.append("mutation analysis (assay mutate) not run: --mutants 0")
    volatile: dict = {"schema": package.VOLATILE_SCHEMA, "started_at": _now(), "stages": {}, "parts_s": {}}
    parts = volatile["parts_s"]
    records: dict[str, list[dict]] = {}
    places = package.Places(settings.work_dir, tor.REPO, settings.out)  # no folder of this machine in the package
    commands = []
    # The stages are independent subprocesses, settings.jobs at a time; the run of Assay's own tests goes on
    # beside them (it is content-keyed on Assay's sources: a package for another model reuses it).
    pool, background = ThreadPoolExecutor(max_workers=max(1, settings.jobs)), ThreadPoolExecutor(max_workers=1)
    progress("evidence: tool qualification data (Assay's own tests, TOR matrix), in the background")
    qualifying = background.submit(_tool_qualification, settings, root / "tool-qualification", volatile)
    running, stages_start = [], time.perf_counter()
    for stage, arguments in plan:
        progress(f"evidence: running assay {stage}")
        running.append((STAGES[stage], pool.submit(_timed_call, parts, f"stage {stage}", stagecall.call,
                                                   STAGES[stage], arguments, runs_dir / stage)))
    def collect(spec, future) -> None:
        run = future.result()
        commands.append(places.command(run.command))
        records[spec.name] = run.records
        if run.unsealed:
            built.notes.append(f"assay {spec.name}: {run.unsealed} records in its work folder not sealed by this "
                               f"user's Assay (planted or edited) were left out")
        stable, moving = _split_volatile(run.records)
        volatile["stages"][spec.name] = moving
        write_json(root / verdicts.stage_result(spec.name), {"schema": spec.schema, "records": places.data(stable),
                                                             "reused": _reused(run.records, volatile["started_at"],
                                                                               doctor["assay"])})
        for name in spec.reports:
            if (runs_dir / spec.name / name).is_file():
                shutil.copyfile(runs_dir / spec.name / name, root / verdicts.stage_folder(spec.name) / name)
                places.file(root / verdicts.stage_folder(spec.name) / name)

    collect(*running[0])  # semantic: it names the generated codes
    items = sorted({(r["model"], r["generator"], r["variant"]) for r in records["semantic"]
                    if r["variant"] != UNLOADED})
    # What is measured on each code needs only the code and the model: it runs beside the other stages,
    # settings.jobs codes at a time (the machine's cores stay busy while a long stage, e.g. mutate, runs alone),
    # each in a process of its own (the references it runs in-process, Keras and ONNX Runtime, are then never
    # called from two threads at once).
    progress("evidence: archiving the generated code, measuring coverage, beside the other stages")
    measuring = ProcessPoolExecutor(max_workers=max(1, min(settings.jobs, len(items))),
                                    mp_context=multiprocessing.get_context("spawn"))
    measure_start = time.perf_counter()
    futures = {item: measuring.submit(_measure_code, item, settings, root, arm) for item in items}
    for stage_run in running[1:]:
        collect(*stage_run)
    parts["stages together"] = round(time.perf_counter() - stages_start, 2)
    wait(list(futures.values()))
    parts["code measurements together"] = round(time.perf_counter() - measure_start, 2)
    if not arm:
        built.notes.append("no ARM target: memory, measured cycles and WCET not run (give --targets cortex-m4f)")

    progress("evidence: tracing")
    generated, images, trace_rows, coverage_rows, set_records, requirement_rows = [], [], {}, {}, {}, {}
    for item in items:
        measured = futures[item].result()
        for name, seconds in measured["parts_s"].items():
            parts[name] = round(parts.get(name, 0.0) + seconds, 2)
        key, code, code_dir = measured["key"], measured["code"], measured["code_dir"]
        built.notes.extend(f"{key}: {note}" for note in measured["notes"])
        verified = next((r["provenance"].get("sources_sha256") for r in records["semantic"]
                         if (r["model"], r["generator"], r["variant"]) == item and r.get("provenance")), None)
        archived = code.source_hashes()
        generated.append({"model": item[0], "generator": code.manifest.get("generator", {"name": item[1]}),
                          "variant": item[2], "directory": f"code/{key}",
                          "files": {p.relative_to(code_dir).as_posix(): sha256(p)
                                    for p in sorted(code_dir.rglob("*")) if p.is_file()},
                          "same_as_verified": archived == verified})
        if archived != verified:
            built.notes.append(f"{key}: the archived code differs from the code the semantic stage verified")
        set_records[key] = measured["set_records"]
        if any(r["verdict"] == FAIL for r in set_records[key].values()):
            built.notes.append(f"{key}: " + "; ".join(
                f"input set {k}: first layer over the tolerance {r['first_layer_over_tolerance']}"
                for k, r in set_records[key].items() if r["verdict"] == FAIL))
        summary, layer_errors = measured["coverage"], measured["layer_errors"]
        coverage_rows[key] = summary
        elves = {}
        for target in arm:
            memory = next((r for r in records.get("memory", []) if (r["model"], r["generator"], r["variant"],
                                                                     r["target"]) == (*item, target)), None)
            elf = Path(memory["build"]["elf"]) if memory and memory.get("build") else None
            if elf is not None and elf.is_file():
                copy = root / "images" / key / f"{target}.elf"
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(elf, copy)
                images.append({"code": key, "target": target, "file": copy.relative_to(root).as_posix(),
                               "sha256": sha256(copy)})
                elves[target] = copy
        summary["object"] = {target: _object_summary(measured["object"][target], elves.get(target),
                                                     root / "coverage" / key / f"object-{target}.json")
                             for target in arm}
        wcet_records = [r for r in records.get("wcet", []) if (r["model"], r["generator"], r["variant"]) == item
                        and wcet_spec.SPEC.passed(r)]
        tests = f"{settings.n_inputs} uniform inputs, seed {settings.seed} (semantic, per-layer error); input sets " \
                f"{', '.join(measured['sets'])} (coverage; inputs/input-sets.json); {settings.wcet_inputs} inputs " \
                f"(measured cycles)"
        requirement_rows[key] = measured["requirements"]
        trace_rows[key] = {"layers": trace.rows(code.manifest, summary, elves, wcet_records, tests, layer_errors,
                                                _verified(measured["requirements"])),
                           "layer_error": {k: v for k, v in layer_errors.items() if k != "layers"},
                           "untraced_lines": trace.untraced_lines(code.manifest, code_dir)}
        (root / "trace" / key).mkdir(parents=True, exist_ok=True)
        (root / "trace" / key / "trace.csv").write_text(trace.as_csv(trace_rows[key]["layers"]))
    measuring.shutdown()
    write_json(root / "trace" / "trace.json", {"schema": "assay-trace/1", "codes": trace_rows})
    write_json(root / REQUIREMENTS, {"schema": requirements.SCHEMA, "rule": requirements.RULE,
                                     "codes": requirement_rows})
    write_json(root / verdicts.INPUT_SETS, {"schema": testsets.SCHEMA, "sets": settings.input_sets,
                                            "set_inputs": settings.set_inputs, "codes": set_records})
    write_json(root / verdicts.COVERAGE, {"schema": "assay-coverage/1", "codes": coverage_rows})
    pool.shutdown()
    waited = time.perf_counter()
    tor_result = qualifying.result()
    parts["waiting for the tool qualification run"] = round(time.perf_counter() - waited, 2)
    background.shutdown()
    if tor_result is None:
        built.notes.append("tool qualification: Assay's own tests not run (--tor-tests none)")
    elif tor_result["verdict"] == "unverified":
        built.notes.append(f"tool qualification unverified: the JUnit XML was given (--tor-junit), not produced by "
                           f"this build; its results would be {tor_result['results_verdict']} "
                           f"(tool-qualification/tor-matrix.md)")
    elif tor_result["verdict"] != PASS:
        built.notes.append(f"tool qualification {tor_result['verdict']}: " + ", ".join(
            f"{k} {v}" for k, v in tor_result["counts"].items()) + " requirements (tool-qualification/tor-matrix.md)")
    models = [load_model(m, PlanSettings(model_seed=settings.model_seed, work_dir=settings.work_dir))
              for m in dict.fromkeys(r["model"] for r in records["semantic"] if r["variant"] != UNLOADED)]
    archived = _archive_configuration(root, models, [HOST, *arm], records.get("wcet", []))
    write_json(root / verdicts.SCI, sci.configuration_index(models, generated, [HOST, *arm], "-O0", images,
                                                            commands, doctor,
                                                            places.command(recorded_command(settings.command_line)),
                                                            archived, _plan(settings, arm, [s for s, _ in plan]),
                                                            settings.level))
    # the verdicts are those the package's own files give: the computation assay evidence verify repeats
    found = verdicts.of_package(lambda path: (root / path).read_bytes() if (root / path).is_file() else None)
    built.verdicts, built.tool_qualification = found.parts, found.tool_qualification
    volatile["finished_at"] = _now()
    write_json(root / package.VOLATILE, volatile)
    kit.write(root, settings.level, built.verdicts, built.tool_qualification, built.verdict, built.notes)
    write_index_page(root, built, coverage_rows, trace_rows)
    html.render_package(root, skip={package.VOLATILE})  # the volatile file changes from build to build: no page
    built.digest = package.seal(root, {"command": commands, "models": settings.models,
                                       "generators": settings.generators, "targets": settings.targets,
                                       "inputs": settings.n_inputs, "seed": settings.seed, "verdict": built.verdict,
                                       "verdicts": built.verdicts, "notes": built.notes,
                                       "tool_qualification": built.tool_qualification})
    if settings.sign_key is not None:
        built.signature = signature.sign(root, (root / package.INDEX).read_bytes(), settings.sign_key)
    return built


@contextmanager
def _timed(parts: dict[str, float], name: str) -> Iterator[None]:
    """Add the wall seconds of the block to ``parts[name]`` (``volatile.json``: what each part of a build cost)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        parts[name] = round(parts.get(name, 0.0) + time.perf_counter() - start, 2)


def _timed_call(parts: dict[str, float], name: str, function: Callable, *arguments):
    with _timed(parts, name):
        return function(*arguments)


def _measure_code(item: tuple[str, str, str], settings: Settings, root: Path, arm: list[str]) -> dict:
    """What the package measures on one generated code, from the code and the model alone: the code archived
    (``assay generate``), the input sets made, checked layer by layer and measured, the structural coverage and
    MC/DC of all of them, the object-code coverage counted on each ARM target; each part's wall seconds."""
    model_name, generator, variant = item
    key = f"{slug(model_name)}/{slug(generator)}-{variant}"
    code_dir = root / "code" / key
    parts: dict[str, float] = {}
    notes: list[str] = []
    with _timed(parts, "archive code (assay generate)"):
        _generate(model_name, generator, variant, code_dir, settings)
    if (code_dir / "manifest.json").is_file():  # the model's path in it: under $WORK (the model is in models/)
        package.Places(settings.work_dir, tor.REPO).file(code_dir / "manifest.json")
    code = GeneratedCode.from_directory(code_dir)
    model = load_model(model_name, PlanSettings(model_seed=settings.model_seed, work_dir=settings.work_dir))
    with _timed(parts, "input sets (make)"):
        sets, set_notes = testsets.make(model, code, settings.input_sets, settings.n_inputs,
                                        settings.set_inputs, settings.seed)
    notes.extend(set_notes)
    with _timed(parts, "input sets (per-layer error, coverage per set)"):
        set_records, set_errors = testsets.evaluate(code, model, sets, settings.seed,
                                                    settings.work_dir / "evidence-sets" / key, root, key,
                                                    settings.timeout)
    layer_errors = set_errors.get("uniform") or next(iter(set_errors.values()))
    if not layer_errors["available"]:
        notes.append(f"per-layer error not measured: {layer_errors['reason']}")
    # the structural coverage of all the test inputs together; each set's own is in inputs/input-sets.json
    inputs = to_code_layout(np.concatenate(list(sets.values())), model, code)
    with _timed(parts, "coverage (gcc, gcovr)"):
        summary = coverage.measure(code, inputs, settings.work_dir / "evidence-coverage" / key,
                                   root / "coverage" / key, settings.timeout)
    with _timed(parts, "MC/DC (clang, llvm-cov)"):
        summary["mcdc"] = coverage.measure_mcdc(code, inputs, settings.work_dir / "evidence-mcdc" / key,
                                                root / "coverage" / key, settings.timeout)
    if not summary["mcdc"]["available"]:
        notes.append(f"MC/DC not measured: {summary['mcdc']['reason']}")
    with _timed(parts, "requirements (derived, neuron coverage, coverage of the requirement-based sets)"):
        found = _requirements(code, model, sets, settings, root, key, layer_errors)
    with _timed(parts, "object-code coverage (QEMU)"):
        counted = {target: _object_coverage(Item(model_name, generator, variant, target, ()), settings)
                   for target in arm}
    return {"key": key, "code": code, "code_dir": code_dir, "sets": list(sets), "set_records": set_records,
            "requirements": found,
            "layer_errors": layer_errors, "coverage": summary, "object": counted, "notes": notes, "parts_s": parts}


def _archive_configuration(root: Path, models: list[Model], target_names: list[str], wcet_records: list[dict]) -> list[dict]:
    """Copy into the package what the figures were computed from beside the code and the images: the model files
    (``models/``), the drivers compiled with the code and each target's linker script (``configuration/``), the flow
    facts of each WCET analysis (``wcet/``); return them as ``sci.json``'s ``archived`` (file, SHA-256, what)."""
    copies: dict[str, tuple[Path, str]] = {}
    for model in models:
        for path in model.files.values():
            for source in (sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]):
                name = source.relative_to(path.parent).as_posix()
                copies[f"models/{slug(model.name)}/{name}"] = (source, f"model {model.name}")
    for driver in sci.drivers():
        copies[f"configuration/drivers/{driver.name}"] = (driver, "driver compiled with the generated code")
    for target in target_names:
        profile = targets.get(target).path  # <target>.toml: flags, memory map
        copies[f"configuration/toolchains/{profile.name}"] = (profile, f"target profile of {target}")
        script = sci.target_item(target, "-O0")["linker_script_file"]
        if script is not None:
            source = tor.REPO / script if script.startswith("toolchains/") else Path(script)
            copies[f"configuration/linker/{target}/{source.name}"] = (source, f"linker script of {target}")
    for record in wcet_records:
        for path in (record.get("flow_facts") or {}).values():
            if path and Path(path).is_file():
                key = f"{slug(record['model'])}/{slug(record['generator'])}-{record['variant']}"
                copies[f"wcet/{key}/{record['target']}/{Path(path).name}"] = (Path(path), "flow facts of the WCET "
                                                                                         "analysis")
    archived = []
    for name, (source, what) in sorted(copies.items()):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / name)
        archived.append({"file": name, "sha256": sha256(root / name), "what": what})
    return archived


def _plan(settings: Settings, arm: list[str], stages: list[str]) -> dict[str, list[dict]]:
    """What the package must hold a record of, per stage run (``sci.json``'s ``plan``, which ``verify`` checks the
    results against: a record deleted from a package is found missing). Expanded by the planner every stage uses
    (``harness.core.plan.expand``), for the references ``assay semantic`` checks by default, each with the
    tolerance the model states (the one its records must carry)."""
    names = next(o.default for o in STAGES["semantic"].options if o.flag == "--references").split(",")
    checking = [references.get(name) for name in names]
    planned = expand(settings.models, settings.generators, [HOST, *arm],
                     PlanSettings(n_inputs=settings.n_inputs, model_seed=settings.model_seed,
                                  work_dir=settings.work_dir),
                     lambda model, _profile: tuple(r.name for r in checking if model is None or r.supports(model)))
    tolerances = {}
    for model in dict.fromkeys(item.model for item in planned.items if item.variant != UNLOADED):
        loaded = load_model(model, PlanSettings(model_seed=settings.model_seed, work_dir=settings.work_dir))
        tolerances[model] = {"tolerance": loaded.tolerance, "rtol": loaded.rtol}
    items = [{"model": i.model, "generator": i.generator, "variant": i.variant, "target": i.target}
             for i in planned.items]
    result: dict[str, list[dict]] = {"semantic": [{**item, "reference": ref, **tolerances.get(item["model"], {})}
                                                  for item, i in zip(items, planned.items) for ref in i.checks]}
    measured = [item for item in items if item["target"] in arm and item["variant"] != UNLOADED]
    for stage in ("memory", "met", "wcet"):
        if stage in stages:
            result[stage] = measured
    if "mutate" in stages:
        result["mutate"] = list({(i["model"], i["generator"], i["variant"]): {k: i[k] for k in
                                                                          ("model", "generator", "variant")}
                                 for i in items if i["variant"] != UNLOADED}.values())
    return result


def _requirements(code: GeneratedCode, model: Model, sets: dict[str, np.ndarray], settings: Settings, root: Path,
                  key: str, layer_errors: dict) -> dict:
    """The code's low-level requirements, the input sets verifying each, the neuron coverage per layer, and the
    structural coverage of the requirement-based sets alone (every set but the uniform one: the coverage the
    requirements' tests reach, not random inputs), its gcovr files in ``coverage/<code>/requirement-based/``."""
    found = requirements.derive(model, code.manifest, layer_errors)  # each layer's tolerance: the one it is judged by
    based = [kind for kind in sets if kind != "uniform"]
    reached = None
    if based:
        inputs = to_code_layout(np.concatenate([sets[kind] for kind in based]), model, code)
        measured = coverage.measure(code, inputs, settings.work_dir / "evidence-coverage-requirements" / key,
                                    root / "coverage" / key / "requirement-based", settings.timeout)
        reached = {"sets": based, "line_percent": measured["line_percent"],
                   "branch_percent": measured["branch_percent"], "lines_not_reached": measured["unreached_lines"],
                   "report": f"coverage/{key}/requirement-based/coverage.html"}
    return {"requirements": found, "verified_by": requirements.traced(found, list(sets)),
            "neuron_coverage": requirements.neuron_coverage(code, model, sets),
            "requirement_based_coverage": reached}


def _verified(found: dict) -> dict[int, dict]:
    """Per layer index, the trace matrix's requirement and tests: the input sets verifying it and the layer's
    neuron coverage (``_requirements``)."""
    neurons = {row["requirement"]: row for row in (found["neuron_coverage"] or {}).get("layers", [])}
    result = {}
    for requirement in found["requirements"]:
        if requirement["layer"] is None:
            continue
        coverage_row = neurons.get(requirement["id"], {})
        figure = (f"; neurons both sides {coverage_row['both_sides']}/{coverage_row['neurons']}"
                  if coverage_row.get("available") else "")
        index = int(requirement["id"].removeprefix("LLR-")) - 1
        result[index] = {"requirement": requirement["id"],
                         "tests": "input sets " + ", ".join(found["verified_by"][requirement["id"]]) + figure}
    return result


def _object_coverage(item: Item, settings: Settings) -> dict:
    """Count ``item``'s test inputs under QEMU with the counting plugin: its object-code coverage.

    The counted ELF is built again by ``cycles.count_item``; ``_object_summary`` compares its executable bytes
    with the archived image's (``same_code_as_image``): only the debug information, which names the build
    folder, may differ.
    """
    measured = cycles.Settings(n_inputs=settings.n_inputs, seed=settings.seed, model_seed=settings.model_seed,
                               work_dir=settings.work_dir, timeout=settings.timeout)
    counts, code, build = cycles.count_item(item, measured, stage="evidence-objcov")
    return {**objcov.measure(counts, code.manifest, code.entry), "target": item.target, "inputs": settings.n_inputs,
            "seed": settings.seed, "code_sha256": objcov.code_sha256(build.elf)}


def _object_summary(result: dict, image: Path | None, path: Path) -> dict:
    """Write the object-code coverage ``result`` to ``path``, said the same code as the archived ``image`` or not;
    return the summary figures (the lists stay in the file)."""
    result = {**result, "same_code_as_image": image is not None and objcov.code_sha256(image) == result["code_sha256"]}
    write_json(path, result)
    return {key: result[key] for key in ("instructions", "executed", "instruction_percent", "conditional_branches",
                                         "both_ways", "branch_percent", "conditional_non_branches",
                                         "same_code_as_image")} \
        | {"never_executed": len(result["never_executed"]),
           "branches_not_both_ways": len(result["branches_not_both_ways"]), "file": path.name}


def _tool_qualification(settings: Settings, out: Path, volatile: dict) -> dict | None:
    """``out/``: docs/tor.md, the JUnit XML of Assay's own tests (run, content-keyed, or given) with its
    durations and dates removed, and the TOR matrix; None when the tests are left out."""
    if settings.tor_junit is None and settings.tor_tests == "none":
        return None
    if settings.tor_junit is not None:
        junit, run = Path(settings.tor_junit), {"command": None, "junit_given": Path(settings.tor_junit).name}
    else:
        selection = tor.DEFAULT_SELECTION if settings.tor_tests is None else settings.tor_tests
        junit, run, seconds = tor.run_suite(selection, settings.work_dir / "evidence-tor",
                                            qualified=configuration.report().get("qualified_by"))
        volatile["tool_qualification_s"] = None if seconds is None else round(seconds, 1)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tor.TOR_DOCUMENT, out / "tor.md")
    normalised = tor.normalise_junit(junit, out / "junit.xml")
    # the run as the signed matrix names it: whether it was reused (and why an entry was not), and from when when it
    # was; not its seal, nor the date of a run this build made (which differs from build to build)
    kept = {key: value for key, value in run.items() if key not in ("seal", "finished_at")}
    if run.get("reused"):
        kept["reused_from"] = run.get("finished_at")
    return tor.write(normalised, out, {**kept, "junit_sha256": sha256(normalised)})


def recorded_command(words: tuple[str, ...]) -> list[str]:
    """The ``assay evidence`` command as the package records it: the value of an option that names a file of this
    machine becomes what identifies its content, never its path (the signing key: its public key's fingerprint;
    a given JUnit XML: its SHA-256), so that the same build with the key or the file elsewhere gives the same
    bytes, and no machine path is in the package."""
    identify = {"--sign-key": lambda path: "ed25519:" + signature.fingerprint(
                    signature.private_key(Path(path)).public_key()),
                "--tor-junit": lambda path: "sha256:" + sha256(Path(path))}
    recorded, following = [], None
    for word in words:
        option, equals, value = word.partition("=")
        if following is not None:
            recorded.append(identify[following](word))
            following = None
        elif option in identify and equals:
            recorded.append(f"{option}={identify[option](value)}")
        else:
            following = word if word in identify else None
            recorded.append(word)
    return recorded


def _fresh(out: Path) -> Path:
    """An empty package folder: an earlier package there is replaced; anything else is refused."""
    out = Path(out)
    if out.exists():
        if not (out / package.INDEX).is_file() and any(out.iterdir()):
            raise AssayError(f"{out}: exists and is not an evidence package; choose another --out")
        shutil.rmtree(out)
    package.digest_file(out).unlink(missing_ok=True)  # a package cut short has no digest, nor signature
    signature.signature_file(out).unlink(missing_ok=True)
    out.mkdir(parents=True)
    write_json(out / package.INDEX, {"schema": package.SCHEMA, "verdict": "incomplete"})  # ours, even if cut short
    return out


def _generate(model: str, generator: str, variant: str, out: Path, settings: Settings) -> None:
    """The code to archive, generated as a user would (``assay generate``); prebuilt C is copied as it is."""
    if generator.startswith("dir:"):
        shutil.copytree(generator[len("dir:"):], out)
        return
    command = [sys.executable, "-m", "harness.cli", "generate", "--model", model, "--generator", generator,
               "--variant", variant, "--out", str(out), "--model-seed", str(settings.model_seed),
               "--work", str(settings.work_dir)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssayError(f"assay generate {model} ({generator}, {variant}) failed: "
                         f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")


def _split_volatile(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """(records without timings, dates and their cache seal, those timings and dates per record): the first part
    is reproducible (a seal is this user's HMAC, ``harness.seal``: it proves nothing to another reader)."""
    stable, moving = [], []
    for record in records:
        stable.append({k: v for k, v in record.items() if k not in VOLATILE_KEYS and k != "seal"})
        moving.append({k: v for k, v in record.items() if k in VOLATILE_KEYS})
    return stable, moving


def _reused(records: list[dict], started_at: str, assay: dict) -> dict:
    """Which of a stage's records this build reused from its sealed cache, rather than computed, and from when:
    the records finished before the build started (a stage whose records carry no date: ``None``, unknown); ``by``:
    the Assays (commit, lock) other than ``assay``, the running one, that made a reused record (``meaning``)."""
    dates = [r.get("finished_at") for r in records]
    identities = sorted({(a.get("commit"), a.get("requirements_lock_sha256")) for r in records
                         if isinstance(a := (r.get("provenance") or {}).get("assay"), dict)}
                        - {(assay.get("commit"), assay.get("requirements_lock_sha256"))}, key=str)
    if not dates or any(not isinstance(d, str) for d in dates):
        return {"records": None, "earliest": None, "by": [list(i) for i in identities]}
    earlier = sorted(d for d in dates if datetime.fromisoformat(d) < datetime.fromisoformat(started_at))
    return {"records": len(earlier), "earliest": earlier[0] if earlier else None, "by": [list(i) for i in identities]}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
