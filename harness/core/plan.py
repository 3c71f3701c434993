"""A campaign's plan: the items (model x generator x variant x target) a stage runs.

Every stage expands its selection the same way (``expand``); what differs is
what each item is checked against (``checks``): reference runtimes for the
semantic campaign, timing models for measured execution and WCET, nothing for
memory. A model that cannot be loaded is kept as items of variant ``-`` so that
its error is recorded and reported like any other verdict.

A stage that runs per model (its contract's ``per``, ``harness.contract``)
expands its selection with ``expand_models``: one ``ModelItem`` per model; a
model that cannot be loaded is bad input (``Plan.bad_input``: exit status 2,
its one line printed by ``harness.core.progress.finish``), with no item.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness import generators, targets
from harness.contract import MODEL_SEED, SEED, WORK
from harness.core.locks import exclusive
from harness.errors import ModelError
from harness.core import budget
from harness.models import zoo
from harness.models.model import Model

UNLOADED = "-"  # the variant of an item whose model could not be loaded


@dataclass(frozen=True)
class Settings:
    """What every stage's run depends on besides the item itself."""

    n_inputs: int = 1000
    seed: int = SEED.default  # the test inputs (the options every command shares: harness.contract)
    model_seed: int = MODEL_SEED.default  # a zoo model's weights (fixed by default, so generated C stays checkable)
    opt: str = "-O0"
    work_dir: Path = WORK.default
    timeout: float = 600.0
    redo: bool = False
    inputs_from: Path | None = None  # a user's test set run before the n_inputs drawn ones (core.inputs)


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


@dataclass(frozen=True)
class ModelItem:
    """One model, for a stage that runs per model (``expand_models``): no generator, variant or target."""

    model: str
    checks: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.model


@dataclass
class Plan:
    items: list = field(default_factory=list)  # Item, or ModelItem in a per-model plan
    bad_input: list[str] = field(default_factory=list)  # one line per model that could not be loaded
    skipped: list[str] = field(default_factory=list)  # notes on combinations left out (e.g. a timing model)
    per_model: bool = False  # made by expand_models: a model that could not be loaded has no item


# (model or None when it could not be loaded, target profile) -> the item's checks, or None for no item
ChecksFor = Callable[[Model | None, targets.TargetProfile], tuple[str, ...] | None]


def load_model(name: str, settings: Settings) -> Model:
    """Load a zoo name or user file, one process at a time (xdist workers share the cache).

    A model too large to verify with ``settings.n_inputs`` inputs is refused like a bad file
    (``harness.core.budget``), here, so that the plan and every item's run give the same cause.
    """
    cache = settings.work_dir / "zoo"
    cache.mkdir(parents=True, exist_ok=True)
    with exclusive(cache / ".lock"):
        model = zoo.load(name, cache_dir=cache, seed=settings.model_seed)
    budget.check(model, settings.n_inputs, source=name)
    return model


def expand(models: list[str], generator_specs: list[str], target_names: list[str], settings: Settings,
           checks_for: ChecksFor) -> Plan:
    """Every (model, generator, variant, target) item whose ``checks_for`` is not None.

    Unknown generator or target names raise ``ConfigError`` here, before anything runs.
    """
    gens = [generators.get(spec) for spec in generator_specs]
    profiles = [targets.get(name) for name in target_names]
    result = Plan()
    for name in models:
        try:
            model = load_model(name, settings)
        except ModelError as exc:
            result.bad_input.append(str(exc))
            result.items += [Item(name, gen.name, UNLOADED, p.name, checks)
                             for gen in gens for p in profiles if (checks := checks_for(None, p)) is not None]
            continue
        # a file the model could not be given (an exporter's refusal): its variants and references are left out
        result.skipped += [f"{name}: no {fmt} variant or reference: {cause}" for fmt, cause in model.refusals.items()]
        for gen in gens:
            variants = gen.variants(model)
            if not variants:  # the generator reads none of the model's files: said, never silently left out
                result.skipped.append(f"{name}: {gen.name} has no variant for it (it reads none of the model's "
                                      f"files: {', '.join(sorted(model.files))})")
            for variant in variants:
                for profile in profiles:
                    checks = checks_for(model, profile)
                    if checks is not None:
                        result.items.append(Item(name, gen.name, variant, profile.name, checks))
    return result


def expand_models(models: list[str], settings: Settings,
                  checks_for: Callable[[Model], tuple[str, ...]] = lambda _model: ()) -> Plan:
    """One ``ModelItem`` per model, for a stage that runs per model; a model that cannot be loaded (an unknown
    name, a missing or bad file, one too large for ``settings.n_inputs``) is bad input: its line in
    ``bad_input``, and no item, since there is nothing to run on."""
    result = Plan(per_model=True)
    for name in models:
        try:
            model = load_model(name, settings)
        except ModelError as exc:
            result.bad_input.append(str(exc))
            continue
        result.items.append(ModelItem(name, checks_for(model)))
    return result
