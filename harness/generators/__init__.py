"""Generator adapters behind one interface, named in one registry.

A generator turns a ``Model`` into a directory of C plus a manifest:
``generate(model, variant, out_dir) -> GeneratedCode``. ``variants(model)`` says
which variants it can produce for that model (for ``assay-v2``: the source
format it reads). Adding a generator is one new module and one line in
``_MODULES``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model


class Generator(Protocol):
    name: str

    def version(self) -> str: ...

    def variants(self, model: Model) -> list[str]: ...

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode: ...

    def identity(self, model: Model, variant: str) -> dict:
        """What the generated code depends on besides the model's bytes (content-keyed resume)."""
        ...


_MODULES = ("harness.generators.assay_v1", "harness.generators.assay_v2", "harness.generators.assay_v3",
            "harness.generators.prebuilt", "harness.generators.acetone_nnet", "harness.generators.keras2c",
            "harness.generators.emlearn")
_REGISTRY: dict[str, type] = {}
PREBUILT_PREFIX = "dir:"


def register(name: str):
    """Class decorator: make a generator adapter available under ``name``."""

    def add(cls: type) -> type:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return add


def _load() -> None:
    for module in _MODULES:
        importlib.import_module(module)


def names() -> list[str]:
    _load()
    return sorted(n for n in _REGISTRY if n != "prebuilt")


def get(spec: str) -> Generator:
    """A generator by name, ``NAME:V1:V2`` for some of its variants only (``NAME:all`` for every variant,
    the optional ones included), or ``dir:PATH`` for an already generated C directory."""
    _load()
    if spec.startswith(PREBUILT_PREFIX):
        return _REGISTRY["prebuilt"](Path(spec[len(PREBUILT_PREFIX):]), spec)
    name, _, chosen = spec.partition(VARIANT_SEPARATOR)
    if name not in _REGISTRY or name == "prebuilt":
        raise ConfigError(f"unknown generator '{name}'; known generators: {', '.join(names())}, "
                          f"or {PREBUILT_PREFIX}PATH for a directory of generated C with an assay.json")
    generator = _REGISTRY[name]()
    return _Chosen(generator, tuple(chosen.split(VARIANT_SEPARATOR))) if chosen else generator


VARIANT_SEPARATOR = ":"


ALL = "all"


class _Chosen:
    """A generator restricted to some of its variants (``acetone-nnet:6loops:default``), or widened to all of
    them (``assay-v2:all``: the optional transformation variants too); each model keeps the chosen ones it has.
    Why: a peer whose every generation starts its own TensorFlow (ACETONE: ~25 s) cannot run all its variants
    on a large campaign in reasonable time, and optional variants multiply every stage's work. Everything else
    is the generator's own."""

    def __init__(self, generator: Generator, chosen: tuple[str, ...]) -> None:
        self._generator = generator
        self.chosen = chosen

    def variants(self, model: Model) -> list[str]:
        plain = self._generator.variants(model)
        if self.chosen != (ALL,) and set(self.chosen) <= set(plain):
            # only default variants asked: finding the optional ones may load the model (TensorFlow, ~20 s)
            return [variant for variant in plain if variant in self.chosen]
        every = getattr(self._generator, "all_variants", self._generator.variants)(model)
        return every if self.chosen == (ALL,) else [variant for variant in every if variant in self.chosen]

    def __getattr__(self, attribute: str):
        return getattr(self._generator, attribute)
