"""Exact instruction counts under QEMU and their price in cycles: what measured execution and the
WCET stage's soundness check share.

``count_item`` generates, cross-builds and runs an item under QEMU with the
counting plugin (``harness.measurement.execcount``); ``price`` applies a timing
model (``wcet.timing``, the definitions the WCET analyzer uses) to every
counted instruction, per input and per layer. ``plan`` expands a selection into
items whose checks are the timing models that describe each target's CPU.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from dataclasses import dataclass, field

import numpy as np

from harness import runners, targets
from harness.core.inputs import make_inputs
from harness.core.pipeline import build_once, generate_code, generate_once, to_code_layout
from harness.core import plan as core_plan
from harness.core.plan import Item, Plan, expand, load_model
from harness.core.fingerprint import item_fingerprint
from harness.core.shards import Shard
from harness.errors import USER_ERRORS, ConfigError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.measurement import execcount
from harness.runners.compiling import Build
from wcet import timing


@dataclass(frozen=True)
class Settings(core_plan.Settings):
    n_inputs: int = 100
    timing_options: dict = field(default_factory=dict)  # model name -> {option: value}


def timing_names_for(target: str, requested: list[str] | None) -> list[str]:
    """The timing models to apply on ``target``: the requested ones that apply, else trivial and its default."""
    if requested:
        return [name for name in requested if targets.get(target).accepts_timing(name)]
    return list(dict.fromkeys(["trivial", targets.get(target).timing]))


def plan(models: list[str], generator_specs: list[str], target_names: list[str],
         timing_names: list[str] | None, settings: Settings) -> Plan:
    """Expand into items checked against the timing models that apply to each target (QEMU targets only)."""
    for name in timing_names or []:
        timing.get(name, **settings.timing_options.get(name, {}))  # unknown names and options fail here
    profiles = [targets.get(name) for name in target_names]
    for profile in profiles:
        if not runners.capable(profile, runners.COUNTS_INSTRUCTIONS):
            raise ConfigError(f"target {profile.name} does not run under QEMU; measured execution needs an "
                              "ARM target (arm7tdmi, cortex-m4f, cortex-a15)")
    per_target = {p.name: tuple(timing_names_for(p.name, timing_names)) for p in profiles}
    result = expand(models, generator_specs, target_names, settings,
                    lambda _model, profile: per_target[profile.name] or None)
    result.skipped += [f"timing model {name} does not apply to target {target}: skipped"
                       for target, applied in per_target.items() for name in timing_names or [] if name not in applied]
    return result


def content_key(item: Item, settings: Settings, **stage: object) -> str | None:
    """The item's content key (``harness.core.fingerprint``) with the counter's code and the timing options,
    or None when the model or toolchain cannot be had (then nothing stored is reused)."""
    try:
        model = load_model(item.model, settings)
        return item_fingerprint(item, model, settings, counter=plugin_digest(),
                                timing_options=settings.timing_options, **stage)
    except USER_ERRORS:
        return None


def count_item(item: Item, settings: Settings, stage: str, seconds: dict | None = None,
               provenance: dict | None = None,
               shard: Shard | None = None) -> tuple[execcount.ExecCounts, GeneratedCode, Build]:
    """Generate, build and count one item (or one shard of its inputs); return the counts, the generated
    code and the build.

    ``stage`` names the work subdirectory (``harness.core.pipeline.item_dir``) of the calling stage.
    Fills ``seconds`` (stage timings) and ``provenance`` (versions, flags) if given. The shards of an item
    share its code, generated once (``generate_once``).
    """
    seconds = {} if seconds is None else seconds
    provenance = {} if provenance is None else provenance
    model, code, built = build_item(item, settings, stage, seconds, provenance, shard)
    profile = targets.get(item.target)
    provenance.update(emulator=emulator_version(profile.emulator_path()),
                      counter=f"assay_count QEMU plugin {plugin_digest()}")
    first, count = (0, settings.n_inputs) if shard is None else (shard.start, shard.size)
    inputs = to_code_layout(make_inputs(model, count, settings.seed, start=first), model, code)
    start = time.perf_counter()
    counts = execcount.count(built, inputs, settings.timeout)
    seconds["count_s"] = time.perf_counter() - start
    seconds["emulator_s"] = counts.emulator_seconds
    if not np.all(np.isfinite(counts.outputs)):
        raise runners.RunError("outputs contain NaN or infinity under the counting plugin")
    return counts, code, built


def build_item(item: Item, settings: Settings, stage: str, seconds: dict, provenance: dict,
               shard: Shard | None = None) -> tuple[Model, GeneratedCode, Build]:
    """Generate and build one item without running it: what ``count_item`` starts with, and all the WCET
    stage does for a target no emulator can run (``not_runnable``, analysis only)."""
    model = load_model(item.model, settings)
    provenance["model_sha256"] = model.sha256()
    generate = generate_code if shard is None else generate_once
    code = generate(item, model, settings, seconds, provenance, stage=stage)
    built = build_once(item, item.target, code, settings, seconds, provenance, stage=stage)
    provenance["entry"] = code.entry
    return model, code, built


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
