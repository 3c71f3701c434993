"""Design-space exploration as in OpTC (Algorithms 1 and 2): prune a trained model step by step, measure
every configuration with the other stages, and return the Pareto-optimal ones.

1. the sensitivity analysis (``harness.stages.explore.pruning.sensitivities``) prunes each layer alone at the
   rates P until the held-out error rises above T = baseline error + slack; p_init = p_max / J (eq. 4);
2. for j = 0..J, global weighted pruning keeps ceil(M_i (1 - p_init_i j)) units per layer (structured:
   the layers really shrink), optionally retrains E epochs (seeded), measures the error on the held-out
   split and saves the configuration as a Keras file ``DIR/models/<model>-jNN.keras``. A configuration
   whose content key (source model bytes, units kept, retraining, seed, pruning and training code) is
   unchanged keeps its file untouched, so the stages below recognise it and reuse their records;
3. the measuring stages run on all the configurations through the CLI (``harness.core.stagecall``: a
   stage never imports another): ``semantic`` on the host (the verdict: the pruned model is a new model
   with its own references), ``memory`` (ROM = .text + .rodata + .data of the inference, RAM = .data +
   .bss + the static stack bound), ``met`` (largest measured cycle count) and ``wcet`` (the static bound)
   on the target, with the chosen timing model. Their results are content-keyed, so a re-run reuses them;
4. the non-dominated set over (error, ROM, RAM, WCET), and over every pair of axes, among the
   configurations whose C passed the semantic oracle and were fully measured; memory budgets mark which
   configurations fit.

The error is the Keras model's on the held-out split: the C computes the same outputs within the
oracle's tolerance (the verdict), which is what lets the error stand for the C's.
"""

from __future__ import annotations

import itertools
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import runners, targets
from harness.contract import MODEL_SEED, SEED, WORK
from harness.core.oracle import ERROR, FAIL, PASS
from harness.core.provenance import record_provenance
from harness.core.stagecall import StageRun, call
from harness.digests import digest
from harness.errors import ConfigError
from harness.models import trained, zoo
from harness.models.model import file_sha256
from harness.stages.explore import pruning
from harness.stages.explore.spec import SPEC
from harness.stages.memory import spec as memory
from harness.stages.met import spec as met
from harness.stages.semantic import spec as semantic
from harness.stages.wcet import spec as wcet

SCHEMA = SPEC.schema
MODEL_SCHEMA = "assay-explore-model/1"
AXES = ("quality", "rom", "ram", "wcet_cycles")  # all minimised
CODE = [Path(pruning.__file__), Path(trained.__file__)]


@dataclass(frozen=True)
class Settings:
    """What an exploration depends on; the defaults are the options' (``spec``, ``harness.contract``)."""

    model: str
    steps: int = SPEC.default("steps")
    target: str = SPEC.default("target")
    timing: str | None = SPEC.default("timing")  # None: the target's own timing model
    retrain_epochs: int = SPEC.default("retrain_epochs")
    slack: float = SPEC.default("slack")  # T = baseline error + slack (the paper: T = the baseline's, slack 0)
    rates: tuple[float, ...] = pruning.DEFAULT_RATES
    seed: int = SEED.default  # test inputs of the stages, and the retraining
    model_seed: int = MODEL_SEED.default  # the trained zoo model's training
    inputs: int = SPEC.default("inputs")  # inputs measured under QEMU (met, wcet, memory's painted stack)
    semantic_inputs: int = SPEC.default("semantic_inputs")
    generator: str = SPEC.default("generator")
    variant: str = SPEC.default("variant")
    opt: str = "-O0"
    ram_limit: int | None = None
    rom_limit: int | None = None
    work_dir: Path = WORK.default
    timeout: float = SPEC.default("timeout")
    jobs: int = SPEC.default("jobs")  # stages run at once

    def timing_model(self) -> str:
        return self.timing or targets.get(self.target).timing


def check(settings: Settings) -> None:
    """Bad input fails here, in one line, before anything runs."""
    entry = zoo.entry(settings.model)
    if entry.tier != "trained":
        raise ConfigError(f"explore needs a model trained on real data to measure its quality: "
                          f"{', '.join(zoo.names('trained'))} (not '{settings.model}')")
    if settings.steps < 1:
        raise ConfigError(f"--steps must be at least 1 (got {settings.steps})")
    if settings.retrain_epochs < 0 or settings.inputs < 1 or settings.semantic_inputs < 1:
        raise ConfigError("--retrain-epochs must be at least 0, --inputs and --semantic-inputs at least 1")
    profile = targets.get(settings.target)
    if not runners.capable(profile, runners.COUNTS_INSTRUCTIONS):
        raise ConfigError(f"target {settings.target} does not run under QEMU; measured cycles and WCET need an "
                          "ARM target (arm7tdmi, cortex-m4f, cortex-a15)")
    if not profile.accepts_timing(settings.timing_model()):
        raise ConfigError(f"timing model {settings.timing_model()} does not describe target {settings.target}")


def explore(settings: Settings, out: Path, say=print) -> dict:
    """Run the whole exploration into ``out`` and return the ``explore.json`` document (also written)."""
    check(settings)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    from harness.models.tf_runtime import keras

    source = zoo.load(settings.model, cache_dir=settings.work_dir / "zoo", seed=settings.model_seed)
    original = keras().saving.load_model(source.file("keras"), compile=False)
    baseline = trained.quality(settings.model, original)
    threshold = baseline + settings.slack
    say(f"{settings.model}: {trained.recipe(settings.model).metric} {baseline:.4f} on the held-out split; "
        f"threshold T = {threshold:.4f}")

    start = time.perf_counter()
    found = pruning.sensitivities(original, lambda model: trained.quality(settings.model, model), threshold,
                                  settings.rates)
    p_init = pruning.initial_rates(found, settings.steps)
    seconds["sensitivity_s"] = time.perf_counter() - start
    say("sensitivities: " + ", ".join(f"{s.layer} {s.sensitivity:.1f}" for s in found))

    start = time.perf_counter()
    widths = pruning.prunable(original)
    configurations = [_configuration(original, source.sha256()["keras"], widths, p_init, j, settings, out)
                      for j in range(settings.steps + 1)]
    seconds["pruning_s"] = time.perf_counter() - start

    start = time.perf_counter()
    runs, stage_seconds = _measure([c["model_file"] for c in configurations], settings, out, say)
    seconds["stages_s"] = time.perf_counter() - start
    for configuration in configurations:
        configuration.update(_figures(configuration["model_file"], runs, settings))
        configuration["fits"] = fits(configuration, settings)
    mark_pareto(configurations)
    seconds["total_s"] = time.perf_counter() - started
    seconds["per_configuration_s"] = seconds["total_s"] / len(configurations)

    document = {
        "schema": SCHEMA, "model": settings.model, "metric": trained.recipe(settings.model).metric,
        "baseline_quality": baseline, "threshold": threshold,
        "settings": {**asdict(settings), "work_dir": str(settings.work_dir), "rates": list(settings.rates),
                     "timing": settings.timing_model()},
        "sensitivities": [{**asdict(s), "qualities": [[rate, q] for rate, q in s.qualities.items()]}
                          for s in found],
        "p_init": p_init,
        "configurations": configurations,
        "fronts": fronts(configurations),
        "stages": {name: {"command": run.command, "exit": run.returncode, "seconds": stage_seconds[name]}
                   for name, run in runs.items()},
        "seconds": seconds,
        "provenance": record_provenance(),
    }
    SPEC.path(out).write_text(json.dumps(document, indent=1) + "\n")
    return document


def _configuration(original, source_sha: str, widths: dict[str, int], p_init: dict[str, float], j: int,
                   settings: Settings, out: Path) -> dict:
    """Configuration j: its units per layer, its Keras file (reused when its content key matches) and error."""
    units = pruning.step_counts(widths, p_init, j)
    epochs = settings.retrain_epochs if j > 0 else 0  # j = 0 is the trained model itself
    key = digest({"source": source_sha, "units": units, "retrain_epochs": epochs, "seed": settings.seed,
                  "code": {path.name: file_sha256(path) for path in CODE}})
    path = (out / "models" / f"{settings.model}-j{j:02d}.keras").resolve()
    sidecar = path.with_suffix(".json")
    try:
        stored = json.loads(sidecar.read_text())
        if stored.get("schema") == MODEL_SCHEMA and stored["key"] == key and path.is_file():
            return {"j": j, **{k: stored[k] for k in ("units", "parameters", "quality")}, "model_file": str(path)}
    except (OSError, ValueError, KeyError):
        pass
    from harness.models.tf_runtime import save_keras

    pruned = pruning.prune(original, units)
    if epochs:
        trained.fit(settings.model, pruned, epochs, settings.seed)
    record = {"units": units, "parameters": int(pruned.count_params()),
              "quality": trained.quality(settings.model, pruned)}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_keras(pruned, path)
    sidecar.write_text(json.dumps({"schema": MODEL_SCHEMA, "key": key, **record}, indent=1) + "\n")
    return {"j": j, **record, "model_file": str(path)}


def _measure(models: list[str], settings: Settings, out: Path, say) -> tuple[dict[str, StageRun], dict[str, float]]:
    """Run semantic, memory, met and wcet on every configuration, ``settings.jobs`` stages at a time; return
    their runs and wall seconds."""
    common = [argument for model in models for argument in ("--models", model)]
    common += ["--generators", settings.generator, f"--opt={settings.opt}", "--seed", str(settings.seed),
               "--work", str(settings.work_dir), "--timeout", f"{settings.timeout:g}"]
    on_target = ["--targets", settings.target, "--inputs", str(settings.inputs)]
    timed = [*on_target, "--timing", settings.timing_model()]
    calls = {
        semantic.SPEC.name: (semantic.SPEC, ["--targets", targets.HOST, "--inputs", str(settings.semantic_inputs)]),
        memory.SPEC.name: (memory.SPEC, on_target),
        met.SPEC.name: (met.SPEC, timed),
        wcet.SPEC.name: (wcet.SPEC, timed),
    }

    seconds: dict[str, float] = {}

    def run(stage: str) -> StageRun:
        spec, arguments = calls[stage]
        began = time.perf_counter()
        done = call(spec, [*arguments, *common], out / stage)
        seconds[stage] = time.perf_counter() - began
        say(f"assay {stage}: exit {done.returncode} in {seconds[stage]:.0f} s")
        return done

    with ThreadPoolExecutor(max_workers=max(1, settings.jobs)) as pool:
        return dict(zip(calls, pool.map(run, calls))), seconds


def _figures(model_file: str, runs: dict[str, StageRun], settings: Settings) -> dict:
    """One configuration's verdict, ROM, RAM and cycles from the stages' records (None where missing)."""
    timing = settings.timing_model()

    def mine(stage: str, **match) -> list[dict]:
        return [r for r in runs[stage].records if r["model"] == model_file and r["variant"] == settings.variant
                and r.get("opt") == settings.opt and all(r.get(k) == v for k, v in match.items())]

    causes = []
    checked = mine(semantic.SPEC.name, n_inputs=settings.semantic_inputs, seed=settings.seed)
    verdicts = {r["verdict"] for r in checked}
    verdict = ERROR if not checked or ERROR in verdicts else FAIL if FAIL in verdicts else PASS
    causes += [f"semantic vs {r['reference']}: {r['cause']}" for r in checked if not semantic.SPEC.passed(r)]
    rom = ram = measured = bound = None
    sized = next(iter(mine(memory.SPEC.name, target=settings.target)), None)
    if sized and sized.get("inference") and sized["inference"].get("text") is not None:
        sizes = sized["inference"]
        rom = sizes["text"] + sizes["rodata"] + sizes["data"]
        static = (sized.get("stack") or {}).get("static") or {}
        if static.get("bytes") is not None:
            ram = sizes["data"] + sizes["bss"] + static["bytes"]
    if sized is None or not memory.SPEC.passed(sized):
        causes.append(f"memory: {sized['cause'] if sized else 'no record'}")
    counted = next(iter(mine(met.SPEC.name, target=settings.target, timing=timing, n_inputs=settings.inputs)), None)
    if counted and met.SPEC.passed(counted):
        measured = int(counted["cycles"]["max"])
    else:
        causes.append(f"met: {counted['cause'] if counted else 'no record'}")
    bounded = next(iter(mine(wcet.SPEC.name, target=settings.target, timing=timing, engine="builtin",
                             n_inputs=settings.inputs)), None)
    if bounded and bounded.get("wcet_cycles") is not None:
        bound = int(bounded["wcet_cycles"])
    if bounded is None or not wcet.SPEC.passed(bounded):
        causes.append(f"wcet: {bounded['cause'] if bounded else 'no record'}")
    return {"rom": rom, "ram": ram, "wcet_cycles": bound, "max_measured_cycles": measured, "verdict": verdict,
            "wcet_verdict": bounded["verdict"] if bounded else None, "causes": causes}


def fits(configuration: dict, settings: Settings) -> bool | None:
    """Whether the configuration's RAM and ROM are within the budgets (None when a figure is unknown)."""
    checks = [(configuration["ram"], settings.ram_limit), (configuration["rom"], settings.rom_limit)]
    if any(value is None for value, limit in checks if limit is not None):
        return None
    return all(value <= limit for value, limit in checks if limit is not None)


def eligible(configuration: dict) -> bool:
    """A configuration can be on a front when its C passed the oracle and every axis was measured."""
    return configuration["verdict"] == PASS and all(configuration.get(axis) is not None for axis in AXES)


def non_dominated(points: list[tuple[float, ...]]) -> list[int]:
    """Indices of the points no other point dominates (at most as large on every axis, smaller on one);
    equal points do not dominate each other, so both stay."""
    def dominates(a: tuple, b: tuple) -> bool:
        return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))

    return [i for i, point in enumerate(points) if not any(dominates(other, point) for other in points)]


def front(configurations: list[dict], axes: tuple[str, ...]) -> list[int]:
    """The j of the non-dominated eligible configurations over ``axes``."""
    candidates = [c for c in configurations if eligible(c)]
    return [candidates[i]["j"] for i in non_dominated([tuple(c[a] for a in axes) for c in candidates])]


def mark_pareto(configurations: list[dict]) -> None:
    """Set ``pareto`` (over all four axes) and ``pareto_fitting`` (among those within the budgets)."""
    best = set(front(configurations, AXES))
    best_fitting = set(front([c for c in configurations if c["fits"] is not False], AXES))
    for configuration in configurations:
        configuration["pareto"] = configuration["j"] in best
        configuration["pareto_fitting"] = configuration["j"] in best_fitting


def fronts(configurations: list[dict]) -> dict[str, list[int]]:
    """The front over all four axes and over every pair, by name ("quality/ram", ...)."""
    pairs = {"/".join(pair): front(configurations, pair) for pair in itertools.combinations(AXES, 2)}
    return {"/".join(AXES): front(configurations, AXES), **pairs}


def parse_size(text: str) -> int:
    """'96k' -> 98304, '1M' -> 1048576, '4096' -> 4096 (bytes; k and M are binary, as memory sizes are)."""
    scale = {"k": 1024, "m": 1024 * 1024}.get(text[-1:].lower(), 1)
    number = text[:-1] if scale != 1 else text
    try:
        value = float(number) * scale
    except ValueError:
        raise ConfigError(f"'{text}' is not a size (bytes, or with k or M: 96k, 1M)") from None
    if value <= 0:
        raise ConfigError(f"'{text}' is not a positive size")
    return int(value)

