"""Measured execution (paper Tables 2 and 3): instructions and cycles per input and per layer.

An *item* is one (model, generator, variant, target, optimisation level). Its
code is generated, cross-built and run under QEMU on seeded inputs with the
counting plugin (``harness.execcount``); the exact per-instruction counts are
then priced by each requested timing model (``wcet.timing``, the definitions
the WCET analyzer uses), giving one record per timing model:

- ``instructions`` and ``cycles``: min, median and max over the inputs;
- ``per_input``: the per-input totals, in input order;
- ``layers``: the same figures per manifest layer, plus the generated code
  outside any layer (bucket 0); per input they sum to the total.

Records go to ``met.json`` as they are computed (schema ``assay-met/1``); a
re-run skips items whose records are all there. ``write_table2`` renders them.
Every failure inside an item becomes an ``error`` record with a one-line cause.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness import execcount, generators, runners, targets
from harness import campaign
from harness.campaign import Item, Plan, build_code, generate_code, load_model, to_code_layout
from harness.errors import AssayError, ConfigError, ModelError
from harness.generated import GeneratedCode
from harness.runners.compiling import Build
from harness.inputs import make_inputs
from harness.provenance import tool_versions
from harness.report import group_digits, model_order
from harness.results import ResultStore
from wcet import timing

SCHEMA = "assay-met/1"
KEY_FIELDS = ("model", "generator", "variant", "target", "opt", "timing", "n_inputs", "seed")
OK, ERROR = "ok", "error"
STAGE = "met"  # work subdirectory, so a concurrent semantic campaign's code is left alone


@dataclass(frozen=True)
class Settings(campaign.Settings):
    n_inputs: int = 100
    timing_options: dict = field(default_factory=dict)  # model name -> {option: value}


def open_store(path: Path) -> ResultStore:
    """``met.json``: records keyed by KEY_FIELDS, written as they come (harness.results)."""
    return ResultStore(path, SCHEMA, KEY_FIELDS)


def timing_names_for(target: str, requested: list[str] | None) -> list[str]:
    """The timing models to apply on ``target``: the requested ones that apply, else trivial and its default."""
    if requested:
        return [name for name in requested if targets.get(target).accepts_timing(name)]
    return list(dict.fromkeys(["trivial", targets.get(target).timing]))


def plan(models: list[str], generator_specs: list[str], target_names: list[str],
         timing_names: list[str] | None, settings: Settings) -> Plan:
    """Expand into items; an unloadable model is reported as error items, not fatal."""
    for name in timing_names or []:
        timing.get(name, **settings.timing_options.get(name, {}))  # unknown names and options fail here
    gens = [generators.get(spec) for spec in generator_specs]
    profiles = [targets.get(name) for name in target_names]
    for profile in profiles:
        if profile.kind not in ("qemu-user", "qemu-system"):
            raise ConfigError(f"target {profile.name} does not run under QEMU; measured execution needs an "
                              "ARM target (arm7tdmi, cortex-m4f, cortex-a15)")
    result = Plan()
    per_target = {}
    for profile in profiles:
        per_target[profile.name] = tuple(timing_names_for(profile.name, timing_names))
        for name in timing_names or []:
            if name not in per_target[profile.name]:
                result.skipped.append(f"timing model {name} does not apply to target {profile.name}: skipped")
    for name in models:
        try:
            model = load_model(name, settings)
        except ModelError as exc:
            result.bad_input.append(str(exc))
            result.items += [Item(name, gen.name, "-", p.name, per_target[p.name]) for gen in gens for p in profiles]
            continue
        for gen in gens:
            for variant in gen.variants(model):
                for profile in profiles:
                    if per_target[profile.name]:
                        result.items.append(Item(name, gen.name, variant, profile.name, per_target[profile.name]))
    return result


def _base_record(item: Item, timing_name: str, settings: Settings) -> dict:
    return {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
            "opt": settings.opt, "timing": timing_name, "n_inputs": settings.n_inputs, "seed": settings.seed}


def run_item(item: Item, settings: Settings, store: ResultStore) -> list[dict]:
    """Count, price and store one item; never raises for faults of the item (they become error records)."""
    if not settings.redo:
        previous = store.find_all([_base_record(item, name, settings) for name in item.checks])
        if previous is not None:
            return previous
    seconds: dict[str, float] = {}
    provenance: dict = {"tools": tool_versions()}
    models = [timing.get(name, **settings.timing_options.get(name, {})) for name in item.checks]
    try:
        counts, code, _ = count_item(item, settings, seconds, provenance)
        manifest = code.manifest
        cause = None
    except (runners.RunError, AssayError) as exc:
        counts, manifest, cause = None, {}, str(exc)
    except Exception as exc:  # a generator crash is a verdict, not the campaign's end
        counts, manifest, cause = None, {}, f"{type(exc).__name__}: {exc}"
    records = []
    for model in models:
        record = _base_record(item, model.name, settings)
        record.update(timing_params=model.params(), seconds=dict(seconds), provenance=provenance)
        try:
            if counts is None:
                raise AssayError(cause)
            start = time.perf_counter()
            figures = price(counts, model)
            record["seconds"]["price_s"] = time.perf_counter() - start
            record.update(verdict=OK, cause=None, **summarise(figures, manifest))
        except AssayError as exc:  # TimingError: an instruction the model has no timing for
            record.update(verdict=ERROR, cause=str(exc))
        record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.put(record)
        records.append(record)
    return records


def count_item(item: Item, settings: Settings, seconds: dict | None = None,
               provenance: dict | None = None) -> tuple[execcount.ExecCounts, GeneratedCode, Build]:
    """Generate, build and count one item; return the counts, the generated code and the build.

    Fills ``seconds`` (stage timings) and ``provenance`` (versions, flags) if given.
    """
    seconds = {} if seconds is None else seconds
    provenance = {} if provenance is None else provenance
    model = load_model(item.model, settings)
    provenance["model_sha256"] = model.sha256()
    code = generate_code(item, model, settings, seconds, provenance, stage=STAGE)
    built = build_code(item, item.target, code, settings, seconds, provenance, stage=STAGE)
    profile = targets.get(item.target)
    provenance.update(entry=code.entry, emulator=emulator_version(profile.emulator_path()),
                      counter=f"assay_count QEMU plugin {plugin_digest()}")
    inputs = to_code_layout(make_inputs(model, settings.n_inputs, settings.seed), model, code)
    start = time.perf_counter()
    counts = execcount.count(built, inputs, settings.timeout)
    seconds["count_s"] = time.perf_counter() - start
    seconds["emulator_s"] = counts.emulator_seconds
    if not np.all(np.isfinite(counts.outputs)):
        raise runners.RunError("outputs contain NaN or infinity under the counting plugin")
    return counts, code, built


def emulator_version(path: str) -> str:
    result = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return (result.stdout.strip().splitlines() or ["unknown"])[0]


def plugin_digest() -> str:
    return hashlib.sha256(execcount.PLUGIN_SOURCE.read_bytes()).hexdigest()[:16]


@dataclass
class Figures:
    """Per input and per bucket: instructions and cycles (arrays of shape (n_inputs, n_buckets))."""

    bucket_names: list[str]
    instructions: np.ndarray
    cycles: np.ndarray
    timing: timing.TimingModel


def price(counts: execcount.ExecCounts, model: timing.TimingModel) -> Figures:
    """Apply ``model`` to every counted instruction of every call.

    An instruction run ``executions`` times, ``jumps`` of which were followed
    by something other than the next instruction: if it is conditional and
    writes the PC, a jump is a taken branch (condition passed) and a
    fall-through a failed condition, each priced as such. For any other
    conditional instruction whether the condition passed is not known, and
    the model's worst case (``executed=None``) is charged.
    """
    n_buckets = len(counts.bucket_names)
    instructions = np.zeros((len(counts.calls), n_buckets), dtype=np.int64)
    cycles = np.zeros_like(instructions)
    costs: dict[int, tuple[int, int, int, bool, bool]] = {}  # address -> (cost, taken, not taken, cond, pc)
    for row, call in enumerate(counts.calls):
        for bucket, per_address in call.counts.items():
            total_instructions = total_cycles = 0
            for address, (executions, jumps) in per_address.items():
                cost = costs.get(address)
                if cost is None:
                    insn = counts.code.decode(address)
                    conditional, pc = timing.is_conditional(insn), timing.writes_pc(insn)
                    cost = costs[address] = (model.cycles(insn, executed=None if conditional else True),
                                             model.cycles(insn, executed=True),
                                             model.cycles(insn, executed=False), conditional, pc)
                worst, taken, not_taken, conditional, pc = cost
                total_instructions += executions
                if conditional and pc:
                    total_cycles += jumps * taken + (executions - jumps) * not_taken
                else:
                    total_cycles += executions * worst
            instructions[row, bucket] = total_instructions
            cycles[row, bucket] = total_cycles
    return Figures(bucket_names=counts.bucket_names, instructions=instructions, cycles=cycles, timing=model)


def stats(values: np.ndarray) -> dict:
    values = np.asarray(values)
    median = float(np.median(values))
    return {"min": int(values.min()), "median": int(median) if median.is_integer() else median,
            "max": int(values.max())}


def summarise(figures: Figures, manifest: dict) -> dict:
    """The record fields for one timing model: totals, per input, per layer."""
    instructions = figures.instructions.sum(axis=1)
    cycles = figures.cycles.sum(axis=1)
    layers = []
    manifest_layers = manifest.get("layers", [])
    for bucket, name in enumerate(figures.bucket_names):
        layer = manifest_layers[bucket - 1] if bucket > 0 else None
        layers.append({"bucket": bucket, "index": layer["index"] if layer else None, "name": name,
                       "op": layer.get("op") if layer else None,
                       "instructions": stats(figures.instructions[:, bucket]),
                       "cycles": stats(figures.cycles[:, bucket])})
    return {"instructions": stats(instructions), "cycles": stats(cycles),
            "per_input": {"instructions": instructions.tolist(), "cycles": cycles.tolist()},
            "layers": layers}


# ---- report: Table 2 (and Table 3 for -O3) ----

_OPT_TITLES = {"-O0": "Table 2: measured execution with -O0", "-O3": "Table 3: measured execution with -O3"}


def _cell(record: dict | None, what: str) -> str:
    if record is None:
        return "–"
    if record["verdict"] != OK:
        return "ERROR"
    figures = record[what]
    if figures["min"] == figures["max"]:
        return group_digits(figures["median"])
    return f"{group_digits(figures['median'])} ({group_digits(figures['min'])} – {group_digits(figures['max'])})"


def table2(records: list[dict]) -> str:
    """Markdown: per optimisation level, cycles per model (columns) and generator/target/timing (rows)."""
    lines = ["# Measured execution", "",
             "Instructions executed inside the inference function, counted exactly under QEMU "
             "(TCG plugin, docs/met.md), priced per instruction by a timing model (`wcet/timing.py`). "
             "Cells: median (min – max) over the inputs.", ""]
    models = model_order(records)
    for opt in sorted({r["opt"] for r in records}, key=lambda o: (o != "-O0", o != "-O3", o)):
        chosen = [r for r in records if r["opt"] == opt]
        lines += [f"## {_OPT_TITLES.get(opt, f'Measured execution with {opt}')}", ""]
        tables = (("cycles", "Execution time [cycles]", ("generator", "variant", "target", "timing")),
                  ("instructions", "Instructions executed", ("generator", "variant", "target")))
        for what, title, row_fields in tables:
            rows: dict[tuple, dict[str, dict]] = {}
            for record in sorted(chosen, key=lambda r: r["verdict"] == OK):  # an OK record wins a shared cell
                rows.setdefault(tuple(record[f] for f in row_fields), {})[record["model"]] = record
            lines += [f"### {title}", "",
                      "| " + " | ".join((*row_fields, *models)) + " |",
                      "|" + "---|" * (len(row_fields) + len(models))]
            for key in sorted(rows):
                cells = [_cell(rows[key].get(model), what) for model in models]
                lines.append("| " + " | ".join((*key, *cells)) + " |")
            lines.append("")
        lines += _provenance_lines(chosen)
        lines += _layer_tables(chosen)
    errors = [r for r in records if r["verdict"] != OK]
    if errors:
        lines += ["## Errors", ""]
        seen = set()
        for record in errors:
            key = (record["model"], record["generator"], record["variant"], record["target"], record["opt"])
            if key not in seen:
                seen.add(key)
                lines.append(f"- {'/'.join(key)}: {record['cause']}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _provenance_lines(records: list[dict]) -> list[str]:
    lines = ["Measured on:", ""]
    seen = set()
    for record in records:
        if record["verdict"] != OK:
            continue
        provenance = record.get("provenance", {})
        described = (record["target"], record["opt"], record["n_inputs"], record["seed"],
                     " ".join(provenance.get("flags", [])), provenance.get("compiler", ""),
                     provenance.get("emulator", ""))
        if described not in seen:
            seen.add(described)
            target, opt, n, seed, flags, compiler, emulator = described
            lines.append(f"- {target}: {n} inputs (seed {seed}), `{flags}`, {compiler}; counted under {emulator}")
    timings = sorted({(r["timing"], json.dumps(r.get("timing_params", {}), sort_keys=True)) for r in records})
    for name, params in timings:
        options = ", ".join(f"{k}={v}" for k, v in json.loads(params).items())
        lines.append(f"- timing model `{name}`" + (f": {options}" if options else ""))
    return lines + [""]


def _layer_tables(records: list[dict]) -> list[str]:
    lines = []
    items: dict[tuple, list[dict]] = {}
    for record in records:
        if record["verdict"] == OK:
            key = (record["model"], record["generator"], record["variant"], record["target"])
            items.setdefault(key, []).append(record)
    for key in sorted(items):
        group = sorted(items[key], key=lambda r: r["timing"])
        lines += [f"### Per layer: {'/'.join(key)} {group[0]['opt']} (medians)", "",
                  "| layer | op | instructions | " + " | ".join(f"cycles ({r['timing']})" for r in group) + " |",
                  "|---|---|---|" + "---|" * len(group)]
        for position, layer in enumerate(group[0]["layers"]):
            cells = [group_digits(r["layers"][position]["cycles"]["median"]) for r in group]
            lines.append(f"| {layer['name']} | {layer['op'] or ''} | {group_digits(layer['instructions']['median'])} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return lines


def write_table2(store_path: Path, out_dir: Path) -> Path:
    """Write ``out_dir/table2.md`` from a met.json; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "table2.md"
    path.write_text(table2(open_store(store_path).records()))
    return path
