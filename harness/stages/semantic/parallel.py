"""The semantic campaign on parallel code (``assay semantic --cores N --schedule ALG|FILE [--delays K]``).

For one item:

1. the sequential V2 code is generated (as for any item) and run on the
   item's target: the outputs the parallel code must equal bit for bit (same
   arithmetic per layer, same compiler and C library);
2. the schedule comes from ``assay schedule`` run through
   ``harness.core.stagecall`` (per-layer WCETs from ``assay wcet``, §3), or
   from a ``schedule.json`` the user names;
3. the parallel code (``codegen.parallel`` through the assay-v2 adapter) is
   built with its trace (and, for the delay runs, delay) instruments, and run:
   once as it is, then K times with seeded random delays before every layer
   and operator on every core;
4. every run's trace is checked against the schedule and the channel protocol
   (``tracecheck``), and replayed, inference by inference, on the coloured
   Petri net of the model's NNEF description split into one item per core
   along the same schedule (``petri.schedule_net``: the NNEF paper's
   Translation 2, the Writing/Reading operators logging the phases of its
   sync transitions); its outputs are compared bit for bit with the
   sequential ones. The first run's outputs go to the oracle like any item's.
5. under QEMU, the instructions of each core's function (the counting
   plugin per vCPU) and of the sequential code give the measured speedup,
   next to the schedule's predicted one and the composed WCET's.

Any failure (a deadlock caught by the watchdog, a trace violation, a bit
difference) is a ``RunError`` whose message is the record's cause; the
``parallel`` dict the caller passes in is filled as far as the item got, so
the record says what was checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import generators, runners, targets
from harness.contract import FAIL, PASS
from harness.core import stagecall
from harness.core.inputs import make_inputs
from harness.core.pipeline import from_code_layout, item_dir, slug, to_code_layout
from harness.core.plan import Item
from harness.errors import ConfigError, ModelError
from harness.formal import nnef_items, petri
from harness.generators.generated import GeneratedCode
from harness.models import nnef
from harness.models.model import Model
from harness.runners import RunError, host, parallel_host
from harness.scheduling import layers, parallel_wcet
from harness.stages.schedule.spec import SPEC as SCHEDULE
from harness.stages.semantic import bitcompare, tracecheck

SEQUENTIAL_CORES = 1
MEASURED_INPUTS = 3  # inputs counted instruction by instruction under QEMU (the counts vary little)


@dataclass(frozen=True)
class ParallelOptions:
    cores: int
    schedule: str  # an algorithm name (ish, dsh, cpsat) or a schedule.json path
    delays: int = 0  # seeded delay runs after the plain one
    interference: float = 0.0  # margin on every WCET of the parallel composition (parallel_wcet.py)


def _runner(target: str):
    """The parallel runner of a target: its own runner if it runs SMP code (bare metal under QEMU), threads
    on the host if its code can run as threads."""
    profile = targets.get(target)
    if runners.capable(profile, runners.SMP):
        return runners.for_kind(profile.kind)
    if runners.capable(profile, runners.THREADS):
        return parallel_host
    raise ConfigError(f"target {target} ({profile.kind}) cannot run parallel code; use host or a qemu-smp target "
                      "such as cortex-a15x4")


def schedule_for(item: Item, options: ParallelOptions, settings, work: Path) -> dict:
    """The schedule.json content for the item: the user's file, or ``assay schedule`` run as a user would."""
    path = Path(options.schedule)
    if path.suffix == ".json":
        if not path.is_file():
            raise ConfigError(f"--schedule {path}: no such file")
        record = json.loads(path.read_text())
    else:
        out = work / f"schedule-{options.cores}-{slug(options.schedule)}"
        SCHEDULE.path(out).unlink(missing_ok=True)  # never read an earlier run's file
        arguments = ["--model", item.model, "--cores", str(options.cores), "--algorithm", options.schedule,
                     "--variant", item.variant, f"--opt={settings.opt}", "--seed", str(settings.seed),
                     "--model-seed", str(settings.model_seed), "--work", str(settings.work_dir)]
        command, _, tail, path = stagecall.run_stage(SCHEDULE, arguments, out)
        record = json.loads(path.read_text())
        record.setdefault("command", command)
    if record.get("schema") != SCHEDULE.schema:
        raise ConfigError(f"{path}: not a schedule (schema {record.get('schema')!r}, expected {SCHEDULE.schema})")
    if record.get("model") not in (None, item.model):
        raise ConfigError(f"{path}: a schedule of {record.get('model')}, not {item.model}")
    if record.get("variant") not in (None, item.variant):  # layer names differ between front ends
        raise RunError(f"{path}: a schedule of the {record['variant']} variant's layers, not {item.variant}'s")
    if record.get("cores", options.cores) > options.cores:
        raise ConfigError(f"{path}: the schedule uses {record['cores']} cores, --cores is {options.cores}")
    if not record.get("valid", True):
        raise RunError(f"the schedule failed its validity check: {record['violations'][0]}")
    return record


def generate_and_run(item: Item, model: Model, sequential: GeneratedCode, options: ParallelOptions, settings,
                     timings: dict, parallel: dict) -> tuple[GeneratedCode, np.ndarray]:
    """Parallel code for the item, run and checked; (its code, the first run's canonical outputs)."""
    runner = _runner(item.target)
    work = item_dir(item, settings, f"parallel-{slug(item.target)}")
    profile = targets.get(item.target)
    record = schedule_for(item, options, settings, item_dir(item, settings, "parallel"))  # shared by targets
    tasks = [core["tasks"] for core in record["schedule"]]
    parallel.update(cores=options.cores, schedule={
        "algorithm": record.get("algorithm"), "source": options.schedule, "makespan": record.get("makespan"),
        "sequential": record.get("sequential"), "speedup": record.get("speedup"), "target": record.get("target"),
        "command": record.get("command")}, delays=options.delays)
    generator = generators.get(item.generator)
    if not hasattr(generator, "generate_parallel"):
        raise ConfigError(f"generator {item.generator} cannot generate parallel code (assay-v2 can)")
    code = generator.generate_parallel(model, item.variant, work / "src", options.cores, tasks)
    parallel["wcet"] = composed_wcet(record, code, options.interference)
    inputs = to_code_layout(make_inputs(model, settings.n_inputs, settings.seed), model, code)

    expected = _sequential_outputs(runner, item, sequential, inputs, settings, profile, work)
    plain = runner.build(code, work / f"build{settings.opt}", profile, settings.opt, trace=True, delays=False)
    timings["compile_s"] = plain.seconds
    runs = [(plain, None)]
    if options.delays:
        delayed = runner.build(code, work / f"build-delays{settings.opt}", profile, settings.opt, trace=True,
                               delays=True)
        runs += [(delayed, settings.seed * 1000 + k) for k in range(options.delays)]
    net = petri_net(model, tasks, work / "nnef")
    replay = PetriReplay(net, code.manifest["parallel"])
    outputs = None
    checked = []
    for built, seed in runs:
        outcome = runner.run(built, inputs, settings.timeout, delay_seed=seed)
        violations = tracecheck.check(code.manifest["parallel"], code.manifest["layers"], tasks, outcome.trace or [])
        violations += replay.check(outcome.trace or [], seed)
        parallel["petri"] = replay.summary()
        bits = None
        if outcome.run is not None:
            same = bitcompare.compare(outcome.run.outputs, expected)
            bits = {"differing_values": same.differing_values, "max_ulp": same.max_ulp}
        checked.append({"delay_seed": seed, "error": outcome.error, "trace_violations": violations,
                        "trace_events": len(outcome.trace or []), "bits_vs_sequential": bits})
        parallel.update(runs=checked, trace={"verdict": FAIL if any(r["trace_violations"] for r in checked)
                                             else PASS,
                                             "violations": [v for r in checked for v in r["trace_violations"]][:10]})
        where = "plain run" if seed is None else f"delay run seed {seed}"
        if outcome.error:
            detail = f"; trace: {violations[0]}" if violations else ""
            raise RunError(f"parallel {where}: {outcome.error}{detail}")
        if violations:
            raise RunError(f"parallel {where}: trace check failed: {violations[0]}")
        if bits["differing_values"]:
            raise RunError(f"parallel {where}: {bits['differing_values']} output values differ from the sequential "
                           f"V2 code's (max {bits['max_ulp']} ULP)")
        if outputs is None:
            outputs = outcome.run.outputs
            timings.update(run_s=outcome.run.wall_seconds, c_run_s=outcome.run.c_seconds)
    if runners.capable(profile, runners.EMULATED):  # instruction counts mean something on an emulated core only
        parallel["measured"] = measured_speedup(runner, code, sequential, inputs[:MEASURED_INPUTS], settings,
                                                profile, work, record, parallel.get("wcet"))
    return code, from_code_layout(outputs, model, code)


def measured_speedup(runner, code: GeneratedCode, sequential: GeneratedCode, inputs: np.ndarray, settings, profile,
                     work: Path, record: dict, wcet: dict | None) -> dict:
    """Instructions per core under QEMU (the counting plugin per vCPU, busy waits apart) against the
    sequential V2 code's on the same target, and the speedups the schedule and the WCET composition predict.

    Two measured speedups: the sequential count over the critical core's own work (waits excluded: what
    the core computes), and over the §5.4 composition of the measured per-item counts along the code
    (``parallel_wcet.compose``: each operator starts when its partner ended), the makespan of an ideal
    platform where an instruction takes the same time on every core. QEMU's own interleaving of the vCPUs
    (how long a core spins) says nothing about time and is only reported.
    """
    from harness.measurement import execcount

    opt = settings.opt
    seq_built = runner.build(sequential, work / f"build-sequential{opt}", profile, opt, trace=False, delays=False)
    seq = max(call.instructions() for call in execcount.count(seq_built, inputs, settings.timeout,
                                                               smp_run=runner.run).calls)
    built = runner.build(code, work / f"build-counted{opt}", profile, opt, trace=False, delays=False)
    cores = execcount.count_parallel(built, inputs, runner.run, settings.timeout)
    per_core = code.manifest["parallel"]["per_core"]
    items = {item["event"]: item for core in per_core for item in core["items"]}
    layer_counts: dict[str, int] = {}
    operator_counts: dict[tuple[str, int], int] = {}
    for core in cores:
        for event, count in core.items.items():
            item = items[event]
            key = item["name"] if item["kind"] == "layer" else (item["kind"], item["floats"])
            table = layer_counts if item["kind"] == "layer" else operator_counts
            table[key] = max(table.get(key, 0), count)
    composed = parallel_wcet.compose(per_core, layer_counts, lambda kind, floats: operator_counts[(kind, floats)])
    work_counts = [max(core.work, default=0) for core in cores]
    critical = max(range(len(cores)), key=lambda k: work_counts[k])
    return {"unit": "instructions (max over the inputs counted)", "inputs": len(inputs), "sequential": seq,
            "per_core": work_counts, "per_core_waits": [max(core.waits, default=0) for core in cores],
            "critical_core": critical, "speedup_critical_core": seq / work_counts[critical],
            "composed_makespan": composed.parallel, "speedup_composed": seq / composed.parallel,
            "predicted_speedup": record.get("speedup"), "wcet_speedup": (wcet or {}).get("speedup")}


def petri_net(model: Model, tasks: list[list[dict]], folder: Path) -> tuple | str:
    """(net, groups, picture) of the model's NNEF description split along ``tasks`` (the picture of the net,
    or None without Graphviz), or why there is none (a model the NNEF writer refuses: the trace check
    above still applies)."""
    picture = folder.parent / "petri-items.svg"
    try:
        if "nnef" in model.files:
            folder = model.file("nnef")
        else:
            nnef.export_onnx(model.file("onnx"), folder, model.name)
        (description,) = nnef_items.parse((folder / nnef.GRAPH_FILE).read_text(), str(folder / nnef.GRAPH_FILE))
        net, groups = petri.schedule_net(description, tasks)
    except ModelError as exc:
        return str(exc)
    drawn = petri.render(petri.to_dot(net, f"{model.name}: {len(net.colours)} items"), picture)
    return net, groups, str(drawn) if drawn else None


class PetriReplay:
    """Every inference of every run replayed on the items' Petri net; the distinct interleavings counted."""

    def __init__(self, net: tuple | str, parallel: dict) -> None:
        self.net, self.parallel = net, parallel
        self.logged = bool(parallel["channels"])  # the code logs every communication it makes
        self.inferences = 0
        self.interleavings: set[tuple] = set()
        self.rejected: list[str] = []

    def check(self, rows: list[tuple[int, ...]], seed: int | None) -> list[str]:
        """Lines for the rejected inferences of one run (the first violating event of each, up to 3)."""
        if isinstance(self.net, str) or not rows:
            return []
        net, groups, _ = self.net
        problems = []
        try:
            runs = petri.trace_from_parallel(rows, self.parallel["per_core"], groups)
        except ValueError as exc:  # an event id the manifest does not know: the trace check names it too
            self.rejected.append(f"Petri net (delay seed {seed}): {exc}")
            return self.rejected[-1:]
        for run, events in runs.items():
            self.inferences += 1
            self.interleavings.add(tuple(events))
            verdict = petri.check_trace(net, events, logged=self.logged)
            if not verdict.accepted:
                problems.append(f"Petri net (delay seed {seed}), inference {run}: {verdict.line()}")
        self.rejected += problems
        return problems[:3]

    def summary(self) -> dict:
        if isinstance(self.net, str):
            return {"verdict": "not available", "cause": self.net}
        net, _, picture = self.net
        return {"verdict": FAIL if self.rejected else PASS, "inferences": self.inferences,
                "distinct_interleavings": len(self.interleavings), "rejected": self.rejected[:5],
                "places": len(net.places), "transitions": len(net.transitions), "items": len(net.colours),
                "picture": picture}


def composed_wcet(record: dict, code: GeneratedCode, interference: float) -> dict | None:
    """§5.4 on the generated code: layers' WCETs from the schedule's nodes, operators' from its
    ``communication_cost`` (their own WCET analysis per tensor size, or the provisional copy model).

    None when the schedule carries no WCETs (a hand-written schedule.json without ``nodes``).
    """
    nodes = record.get("nodes")
    cost = record.get("communication_cost") or {}
    if not nodes or "model" not in cost:
        return None
    composed = parallel_wcet.compose(code.manifest["parallel"]["per_core"],
                                     {node["node"]: node["wcet_cycles"] for node in nodes},
                                     layers.operator_cycles(cost), interference)
    return {**composed.as_dict(), "layers_from": record.get("wcet", {}).get("source"),
            "operator_cycles": f"{cost['model']}: {cost['formula']}",
            "timing": record.get("timing"), "wcet_target": record.get("target")}


def _sequential_outputs(runner, item: Item, sequential: GeneratedCode, inputs: np.ndarray, settings, profile,
                        work: Path) -> np.ndarray:
    """The sequential V2 code's outputs on the same platform (host: the batch driver; QEMU: one core)."""
    if runner is parallel_host:
        built = host.build(sequential, work / f"build-sequential{settings.opt}", profile, settings.opt)
        return host.run(built, inputs, settings.timeout).outputs
    built = runner.build(sequential, work / f"build-sequential{settings.opt}", profile, settings.opt, trace=False,
                         delays=False)
    outcome = runner.run(built, inputs, settings.timeout, trace=False)
    if outcome.run is None:
        raise RunError(f"sequential run on {item.target} failed: {outcome.error}")
    return outcome.run.outputs
