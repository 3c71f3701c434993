"""The semantic-preservation campaign: model -> generator -> build -> run -> compare.

An *item* is one (model, generator, variant, target, optimisation level); running
it produces one record per reference. Every failure inside an item (generator
exception, compile error, crash, hang, NaN) becomes an ``error`` record with a
one-line cause, and the next item runs. Records go to the ``ResultStore`` as
soon as they exist; an item whose records are all there is skipped unless
``redo`` is set.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness import bitcompare, generators, layout, oracle, references, runners, targets, zoo
from harness.errors import AssayError, ModelError
from harness.generated import GeneratedCode
from harness.inputs import make_inputs
from harness.model import Model
from harness.provenance import tool_versions
from harness.results import ResultStore


UNLOADED = "-"  # the variant of an item whose model could not be loaded
HOST = "host"  # the target every other target is compared with bit for bit


@dataclass(frozen=True)
class Settings:
    n_inputs: int = 1000
    seed: int = 0
    opt: str = "-O0"
    work_dir: Path = Path("generated")
    timeout: float = 600.0
    redo: bool = False


@dataclass(frozen=True)
class Item:
    """One model x generator x variant x target; each stage makes one record per entry of ``checks``.

    ``checks`` is what the records are checked against: reference runtimes for the
    semantic campaign, timing models for measured execution and WCET.
    """

    model: str
    generator: str
    variant: str
    target: str
    checks: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.model}/{self.generator}/{self.variant}/{self.target}"


@dataclass
class Plan:
    items: list[Item] = field(default_factory=list)
    bad_input: list[str] = field(default_factory=list)  # one line per model that could not be loaded
    skipped: list[str] = field(default_factory=list)  # notes on combinations left out (e.g. a timing model)


def load_model(name: str, settings: Settings) -> Model:
    """Load a zoo name or user file, one process at a time (xdist workers share the cache)."""
    cache = settings.work_dir / "zoo"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return zoo.load(name, cache_dir=cache, seed=settings.seed)


def plan(models: list[str], generator_specs: list[str], reference_names: list[str],
         target_names: list[str], settings: Settings) -> Plan:
    """Expand the campaign into items; a model that cannot be loaded is reported, not fatal."""
    gens = [generators.get(spec) for spec in generator_specs]
    refs = [references.get(name) for name in reference_names]
    profiles = [targets.get(name) for name in target_names]
    result = Plan()
    for name in models:
        try:
            model = load_model(name, settings)
        except ModelError as exc:
            # Kept as items so that the error is recorded and reported like any other verdict.
            result.bad_input.append(str(exc))
            result.items += [Item(name, gen.name, UNLOADED, p.name, tuple(r.name for r in refs))
                             for gen in gens for p in profiles]
            continue
        usable = tuple(ref.name for ref in refs if ref.supports(model))
        for gen in gens:
            for variant in gen.variants(model):
                for profile in profiles:
                    result.items.append(Item(name, gen.name, variant, profile.name, usable))
    return result


def _base_record(item: Item, model: Model | None, reference: str, settings: Settings) -> dict:
    return {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
            "opt": settings.opt, "reference": reference, "n_inputs": settings.n_inputs, "seed": settings.seed,
            "tolerance": model.tolerance if model else None,
            "input_domain": list(model.input_domain) if model else None}


def run_item(item: Item, settings: Settings, store: ResultStore) -> list[dict]:
    """Run one item and store one record per reference; never raises for item faults."""
    if not settings.redo:
        previous = store.find_all([_base_record(item, None, ref, settings) for ref in item.checks])
        if previous is not None:
            return previous
    timings: dict[str, float] = {}
    provenance: dict = {"tools": tool_versions()}
    model: Model | None = None
    bits = None
    try:
        model = load_model(item.model, settings)
        provenance["model_sha256"] = model.sha256()
        code = generate_code(item, model, settings, timings, provenance)
        outputs = _build_and_run(item, item.target, code, model, settings, timings, provenance)
        np.save(_outputs_path(item, item.target, settings), outputs)
        cause = None
        if item.target != HOST:
            bits = _bits_vs_host(item, model, code, outputs, settings)
    except (runners.RunError, AssayError) as exc:
        outputs, cause = None, str(exc)
    except Exception as exc:  # an unexpected fault is a verdict too, not the campaign's end
        outputs, cause = None, f"internal error: {type(exc).__name__}: {exc}"
    records = []
    for ref_name in item.checks:
        record = _base_record(item, model, ref_name, settings)
        record.update(timings=dict(timings), provenance=provenance, bits_vs_host=bits)
        if outputs is None:
            record.update(verdict=oracle.ERROR, cause=cause, max_abs_error=None,
                          median_abs_error=None, index_of_worst_input=None)
        else:
            record.update(_compare_with(ref_name, model, outputs, settings, record["timings"]))
        record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.put(record)
        records.append(record)
    return records


def item_dir(item, settings: Settings, stage: str = "") -> Path:
    """Where an item's generated code and builds live: one tree per model, generator and variant.

    ``stage`` separates stages (met, memory, wcet) that may regenerate the same code concurrently.
    """
    return settings.work_dir / _slug(item.model) / _slug(item.generator) / item.variant / stage


def _outputs_path(item: Item, target: str, settings: Settings) -> Path:
    """Where a target's outputs are kept, so other targets can be compared with them bit for bit."""
    directory = item_dir(item, settings)
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"outputs-{target}{settings.opt}-n{settings.n_inputs}-s{settings.seed}.npy"


def generate_code(item, model: Model, settings: Settings, timings: dict, provenance: dict,
                  stage: str = "") -> GeneratedCode:
    """Generate fresh code into the item's ``src`` directory (prebuilt code stays where it is).

    Fills ``timings["generate_s"]`` and the generator's provenance; a generator exception becomes an AssayError.
    """
    generator = generators.get(item.generator)
    start = time.perf_counter()
    source_dir = item_dir(item, settings, stage) / "src"
    if source_dir.exists():
        shutil.rmtree(source_dir)
    try:
        code = generator.generate(model, item.variant, source_dir)
    except AssayError:
        raise
    except Exception as exc:
        raise AssayError(f"generator failed: {type(exc).__name__}: {exc}") from exc
    timings["generate_s"] = time.perf_counter() - start
    provenance.update(generator_version=generator.version(), sources_sha256=code.source_hashes())
    return code


def build_code(item, target: str, code: GeneratedCode, settings: Settings, timings: dict, provenance: dict,
               stage: str = ""):
    """Build ``code`` for ``target`` under the item's work directory (never beside prebuilt sources)."""
    profile = targets.get(target)
    runner = runners.for_kind(profile.kind)
    built = runner.build(code, item_dir(item, settings, stage) / f"build-{target}{settings.opt}", profile,
                         settings.opt)
    timings["compile_s"] = built.seconds
    provenance.update(compiler=built.compiler_version, flags=list(built.flags))
    return built


def _build_and_run(item: Item, target: str, code: GeneratedCode, model: Model, settings: Settings,
                   timings: dict, provenance: dict) -> np.ndarray:
    built = build_code(item, target, code, settings, timings, provenance)
    inputs = make_inputs(model, settings.n_inputs, settings.seed)
    outcome = runners.for_kind(targets.get(target).kind).run(built, to_code_layout(inputs, model, code),
                                                             settings.timeout)
    timings.update(run_s=outcome.wall_seconds, c_run_s=outcome.c_seconds)
    return from_code_layout(outcome.outputs, model, code)


def _bits_vs_host(item: Item, model: Model, code: GeneratedCode, outputs: np.ndarray, settings: Settings) -> dict:
    """Bit-for-bit comparison of this target's outputs with the host's, for the same generated code."""
    host_path = _outputs_path(item, HOST, settings)
    if host_path.is_file():
        host_outputs = np.load(host_path)
    else:
        try:
            host_outputs = _build_and_run(item, HOST, code, model, settings, {}, {})
        except runners.RunError as exc:  # the target's own verdict still stands
            return {"error": f"host run for comparison failed: {exc}"}
        np.save(host_path, host_outputs)
    result = bitcompare.compare(outputs.astype(np.float32), host_outputs.astype(np.float32))
    return {"values": result.values, "differing_values": result.differing_values,
            "differing_inputs": result.differing_rows, "max_ulp": result.max_ulp,
            "nan_mismatches": result.nan_mismatches}


def to_code_layout(inputs: np.ndarray, model: Model, code: GeneratedCode) -> np.ndarray:
    """Canonical input batch -> (N, input_size) in the layout the code declares."""
    converted = layout.convert(inputs, model.layout, code.input_layout or model.layout)
    return converted.reshape(len(inputs), -1)


def from_code_layout(outputs: np.ndarray, model: Model, code: GeneratedCode) -> np.ndarray:
    """(N, output_size) in the code's layout -> canonical output batch."""
    code_layout = code.output_layout or model.output_layout
    shape = layout.shape_in(model.output_shape, model.output_layout, code_layout)
    return layout.convert(outputs.reshape(len(outputs), *shape), code_layout, model.output_layout)


def _compare_with(ref_name: str, model: Model, outputs: np.ndarray, settings: Settings, timings: dict) -> dict:
    try:
        start = time.perf_counter()
        expected = reference_outputs(ref_name, model, settings)
        timings["reference_s"] = time.perf_counter() - start
    except Exception as exc:
        return {"verdict": oracle.ERROR, "cause": f"reference {ref_name} failed: {type(exc).__name__}: {exc}",
                "max_abs_error": None, "median_abs_error": None, "index_of_worst_input": None}
    comparison = oracle.compare(outputs, expected, model.tolerance)
    return {"verdict": comparison.verdict, "cause": comparison.cause, "max_abs_error": comparison.max_abs_error,
            "median_abs_error": comparison.median_abs_error,
            "index_of_worst_input": comparison.index_of_worst_input}


def reference_outputs(ref_name: str, model: Model, settings: Settings) -> np.ndarray:
    """Reference outputs for the campaign inputs, cached on disk per model hash, count and seed."""
    digest = hashlib.sha256(repr(sorted(model.sha256().items())).encode()).hexdigest()[:16]
    path = settings.work_dir / "references" / _slug(model.name) / f"{ref_name}-n{settings.n_inputs}-s{settings.seed}-{digest}.npy"
    if path.is_file():
        return np.load(path)
    outputs = references.get(ref_name).run(model, make_inputs(model, settings.n_inputs, settings.seed))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{id(outputs)}.tmp.npy")
    np.save(tmp, outputs)
    tmp.replace(path)
    return outputs


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
