"""Generator adapters behind one interface, named in one registry.

A generator turns a ``Model`` into a directory of C plus a manifest:
``generate(model, variant, out_dir) -> GeneratedCode``. ``variants(model)`` says
which variants it can produce for that model (for ``assay-v2``: the source
format it reads). Generators are named in the entry-point group
``assay.generators`` (``harness.registry``; Assay's own in its
``pyproject.toml``), so an installed package adds one without an edit here: one
class, usually a subclass of ``Adapter``, and one entry-point line
(docs/architecture.md, "A generator"). ``dir:PATH`` names C generated elsewhere
(``harness.generators.prebuilt``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol

from harness import registry
from harness.digests import tree_digest
from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model, file_sha256


class Generator(Protocol):
    name: str

    def version(self) -> str: ...

    def variants(self, model: Model) -> list[str]: ...

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode: ...

    def identity(self, model: Model, variant: str) -> dict:
        """What the generated code depends on besides the model's bytes (content-keyed resume)."""
        ...


# What ``get`` checks a registered generator has, so a missing one is one line naming it, not an
# AttributeError in the middle of a campaign.
METHODS = ("version", "variants", "generate", "identity")
PREBUILT_PREFIX = "dir:"


class Adapter:
    """What a generator adapter inherits: its ``name`` (set by ``get`` from its registration) and ``identity``.

    ``identity(model, variant)`` is what the generated code depends on besides the model's bytes: the content
    keys of every stage's records (``harness.core.fingerprint``) and the reuse of generated code
    (``harness.core.pipeline.generate_once``) hash it, so a changed generator regenerates and recomputes, even
    at one version. Here it is the name, the version, the source of every module the adapter's class is made
    of (its own module and its base classes': an edited option in the adapter counts) and the content of
    every file or folder in ``depends_on`` (the tool it drives: ``codegen/`` for assay-v2; a folder counts by
    its ``.py``, ``.c``, ``.h`` and ``.toml`` files). An adapter whose code depends on anything else (an
    environment of its own: ``peers.PeerGenerator``) adds it to this.
    """

    name: str = ""
    depends_on: tuple[Path, ...] = ()

    def identity(self, model: Model, variant: str) -> dict:
        return {"name": self.name, "version": self.version(), "adapter": adapter_sources(type(self)),
                "depends_on": [_content_digest(Path(path)) for path in self.depends_on]}  # not where they are


def adapter_sources(cls: type) -> dict[str, str]:
    """module -> SHA-256 of its source, for the module of ``cls`` and of each of its base classes (not this
    one's: the registry's own code makes no C)."""
    found = {}
    for klass in cls.__mro__:
        module = sys.modules.get(klass.__module__)
        path = getattr(module, "__file__", None)
        if klass.__module__ not in (__name__, "builtins") and path:
            found[klass.__module__] = file_sha256(Path(path))
    return found


def _content_digest(path: Path) -> str:
    if path.is_dir():
        return tree_digest(path.resolve())
    return file_sha256(path) if path.is_file() else "missing"


def names() -> list[str]:
    """The registered generators, sorted (``dir:PATH`` aside)."""
    return registry.names("generators")


def get(spec: str) -> Generator:
    """A generator by name, ``NAME:V1:V2`` for some of its variants only (``NAME:all`` for every variant,
    the optional ones included), or ``dir:PATH`` for an already generated C directory."""
    if spec.startswith(PREBUILT_PREFIX):
        from harness.generators.prebuilt import Prebuilt

        return Prebuilt(Path(spec[len(PREBUILT_PREFIX):]), spec)
    name, _, chosen = spec.partition(VARIANT_SEPARATOR)
    if name not in names():
        raise ConfigError(f"unknown generator '{name}'; known generators: {', '.join(names())}, "
                          f"or {PREBUILT_PREFIX}PATH for a directory of generated C with an assay.json")
    generator = registry.load("generators", name)()
    missing = [method for method in METHODS if not callable(getattr(generator, method, None))]
    if missing:
        raise ConfigError(f"generator '{name}' of {registry.origin(registry.entries('generators')[name])} has no "
                          f"{', '.join(f'{method}()' for method in missing)}; a generator subclasses "
                          "harness.generators.Adapter (docs/architecture.md, 'A generator')")
    generator.name = name
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
