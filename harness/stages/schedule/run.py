"""``assay schedule``: one model's layers scheduled on N identical cores (schema ``assay-schedule/1``).

1. The model's C is generated with assay-v2; its manifest gives the layers
   and which layers feed which (``layers[*].inputs``).
2. Per-layer WCETs come from the WCET stage's records: either ``assay wcet``
   run through ``harness.core.stagecall`` (a subprocess, as a user would; its
   records are content-keyed, so a second schedule of the same model reuses
   them) into ``OUT/wcet/``, or a ``wcet.json`` the user gives. The record of
   this model, variant, target and timing model from the built-in engine is
   used, and only if its soundness check passed.
3. Edge costs are the WCETs of the generated Writing and Reading operators
   for each tensor size, analysed on the same target and timing model
   (``harness.stages.schedule.operator_wcet``), or the provisional copy-cost
   model when asked for (``layers.CopyCost``); recorded in the file.
4. The DAG is scheduled by the chosen algorithm and the schedule checked
   (``harness.scheduling.schedule.check``); a schedule that fails the check
   is still written, with its violations, and the command exits 1.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness import generators, scheduling, targets
from harness.core import plan as core_plan
from harness.core import stagecall
from harness.core.pipeline import generate_code
from harness.core.plan import Item, load_model
from harness.core.provenance import record_provenance
from harness.core.results import ResultStore
from harness.errors import AssayError, ConfigError
from harness.scheduling import layers
from harness.stages.schedule.operator_wcet import operator_wcets
from harness.stages.schedule.spec import SPEC
from harness.stages.wcet import spec as wcet

SCHEMA = SPEC.schema
GENERATOR = "assay-v2"
STAGE = "schedule"  # work subdirectory of this stage's generated code
FILE_NAME = SPEC.result_file


@dataclass(frozen=True)
class Settings(core_plan.Settings):
    """The defaults are the options' (``spec``); --cores and --algorithm are required there."""

    cores: int = 2
    algorithm: str = "dsh"
    target: str = SPEC.default("target")
    timing: str | None = SPEC.default("timing")  # None: the target's own timing model
    variant: str | None = SPEC.default("variant")  # None: the generator's first variant for the model
    time_limit: float = SPEC.default("time_limit")
    workers: int = SPEC.default("workers")
    cost: layers.CopyCost | None = None  # None: the operators' own WCETs (operator_wcet)
    wcet_json: Path | None = SPEC.default("wcet_json")
    n_inputs: int = SPEC.default("n_inputs")  # inputs of the WCET stage's soundness check


def check_settings(settings: Settings) -> str:
    """Refuse bad options with one line before anything runs; return the timing model's name."""
    if settings.algorithm not in scheduling.ALGORITHMS:
        raise ConfigError(f"unknown algorithm '{settings.algorithm}'; choose from {', '.join(scheduling.ALGORITHMS)}")
    if settings.cores < 1:
        raise ConfigError(f"--cores must be at least 1, not {settings.cores}")
    if settings.time_limit <= 0:
        raise ConfigError(f"--time-limit must be positive, not {settings.time_limit:g}")
    if settings.cost is not None and (settings.cost.fixed < 0 or settings.cost.per_float < 0):
        raise ConfigError("communication costs must not be negative")
    if settings.wcet_json is not None and not settings.wcet_json.is_file():
        raise ConfigError(f"--wcet-json {settings.wcet_json}: no such file")
    profile = targets.get(settings.target)
    timing_name = settings.timing or profile.timing
    if not profile.accepts_timing(timing_name):
        raise ConfigError(f"timing model '{timing_name}' does not describe target {profile.name} "
                          f"(use {profile.timing} or a generic one)")
    return timing_name


def schedule_model(model_name: str, settings: Settings, out: Path) -> dict:
    """Build, schedule and check; write ``out/schedule.json`` and return its content."""
    timing_name = check_settings(settings)
    model = load_model(model_name, settings)
    generator = generators.get(GENERATOR)
    variants = generator.variants(model)
    variant = settings.variant or (variants[0] if variants else None)
    if variant not in variants:
        raise ConfigError(f"{model_name}: {GENERATOR} has no variant '{variant}' (it has {', '.join(variants)})")
    item = Item(model_name, GENERATOR, variant, settings.target, (timing_name,))
    seconds: dict[str, float] = {}
    provenance: dict = {**record_provenance(), "model_sha256": model.sha256()}
    code = generate_code(item, model, settings, seconds, provenance, stage=STAGE)

    start = time.perf_counter()
    wcet_record, wcet_source = _wcet_record(item, timing_name, settings, out)
    seconds["wcet_s"] = time.perf_counter() - start
    wcets = {layer["layer"]: layer["wcet_cycles"] for layer in wcet_record.get("layers", [])
             if layer["wcet_cycles"] is not None}
    start = time.perf_counter()
    cost = settings.cost or layers.OperatorCost(
        {floats: operator_wcets(floats, GENERATOR, targets.get(settings.target), timing_name, settings.opt,
                                Path(settings.work_dir) / "operator-wcet")
         for floats in sorted(layers.edge_sizes(code.manifest))}, settings.target, timing_name)
    seconds["operator_wcet_s"] = time.perf_counter() - start
    try:
        dag = layers.from_manifest(code.manifest, wcets, cost)
    except layers.LayerGraphError as exc:
        raise AssayError(f"{item.id}: {exc}") from None

    start = time.perf_counter()
    dag, schedule, problems = scheduling.run(dag, settings.cores, settings.algorithm, settings.time_limit,
                                             settings.workers)
    seconds["schedule_s"] = time.perf_counter() - start
    record = {"schema": SCHEMA, "model": model_name, "generator": GENERATOR, "variant": variant,
              "target": settings.target, "timing": timing_name, "opt": settings.opt,
              **scheduling.to_json(dag, schedule),
              "valid": not problems, "violations": problems,
              "nodes": [{"node": dag.names[v], "wcet_cycles": dag.weights[v], "output_floats": dag.size(v),
                         "level": dag.levels[v]} for v in range(dag.n)],
              "edges": [{"from": dag.names[u], "to": dag.names[v], "floats": dag.size(u), "cost": cost}
                        for (u, v), cost in sorted(dag.edges.items())],
              "communication_cost": cost.describe(),
              "wcet": {**wcet_source, "function_wcet_cycles": wcet_record.get("wcet_cycles"),
                       "fingerprint": wcet_record.get("fingerprint")},
              "seconds": seconds, "provenance": provenance,
              "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    out.mkdir(parents=True, exist_ok=True)
    (out / FILE_NAME).write_text(json.dumps(record, indent=1) + "\n")
    return record


def _wcet_record(item: Item, timing_name: str, settings: Settings, out: Path) -> tuple[dict, dict]:
    """The WCET stage's record for the item (and where it came from); an AssayError unless it passed."""
    if settings.wcet_json is not None:
        records = ResultStore.of(wcet.SPEC, settings.wcet_json).records()
        source = {"source": str(settings.wcet_json)}
    else:
        arguments = ["--models", item.model, "--generators", GENERATOR, "--targets", item.target,
                     "--timing", timing_name, "--engine", "builtin", f"--opt={settings.opt}",
                     "--inputs", str(settings.n_inputs), "--seed", str(settings.seed),
                     "--model-seed", str(settings.model_seed), "--work", str(settings.work_dir)]
        done = stagecall.call(wcet.SPEC, arguments, out / wcet.SPEC.name)
        records = done.records
        source = {"source": str(wcet.SPEC.path(out / wcet.SPEC.name)), "command": done.command}
    wanted = {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
              "timing": timing_name, "engine": "builtin", "opt": settings.opt}
    found = [r for r in records if all(r.get(key) == value for key, value in wanted.items())]
    if not found:
        raise AssayError(f"{item.id}: no WCET record for timing {timing_name}, engine builtin, {settings.opt} "
                         f"in {source['source']}")
    record = found[-1]
    if not wcet.SPEC.passed(record):
        raise AssayError(f"{item.id}: the WCET record is '{record.get('verdict')}' ({record.get('cause')}); "
                         "per-layer bounds are used only when their soundness check passed")
    return record, source
