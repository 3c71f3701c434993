"""What the three ``codegen`` adapters (assay-v1, assay-v2, assay-v3) share: variants and generation.

A variant is the source format read, optionally followed by the §2.2
transformations applied, joined by ``+``:

* ``keras`` / ``onnx`` / ``nnef``: the generator's default transformations
  (``fuse-activation``, Definition 14);
* ``keras+fold-bn+fuse-activation``: exactly the named transformations;
  ``keras+none``: none at all.

``variants(model)`` lists the formats the model has (the default
transformations): what a campaign runs unless told otherwise.
``all_variants(model)`` adds, per format, one variant per transformation that
changes this model (``codegen.applicable_transforms``): ``+none`` when fusing
changes something, ``+<t>+fuse-activation`` for the others; a campaign runs
them with ``--generators assay-v2:all``, so it checks every transformation that
does something against the references, and none that would only repeat the
default.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import codegen
from harness.errors import ConfigError, NotSupported
from harness.generators import Adapter
from harness.generators.generated import GeneratedCode
from harness.models.model import Model

FORMATS = ("keras", "onnx", "nnef")
SEPARATOR = "+"


def split(variant: str) -> tuple[str, tuple[str, ...] | None]:
    """(format, transformations or None for the default) of a variant name."""
    fmt, *names = variant.split(SEPARATOR)
    if fmt not in FORMATS:
        raise ConfigError(f"variant '{variant}': the format must be one of {', '.join(FORMATS)}")
    if not names:
        return fmt, None
    try:
        return fmt, codegen.parse_transforms(names)
    except codegen.UnsupportedModel as exc:
        raise ConfigError(f"variant '{variant}': {exc}") from None


def join(fmt: str, transforms: tuple[str, ...]) -> str:
    return SEPARATOR.join([fmt, *(transforms or ("none",))])


@lru_cache(maxsize=64)
def _applicable(path: str, fmt: str, stamp: tuple[int, int]) -> tuple[str, ...]:
    return codegen.applicable_transforms(path, frontend=fmt)


class CodegenStrategy(Adapter):
    """A ``codegen`` strategy as a generator adapter; subclasses set ``strategy``. Its identity covers
    ``codegen`` (``depends_on``) and the adapter's modules (``Adapter.identity``)."""

    strategy: str
    transformable = True  # ``assay generate --transform`` applies
    takes_max_macs = False  # ``assay generate --max-macs`` applies (V3's size limit)
    depends_on = (Path(codegen.__file__).resolve().parent,)

    def version(self) -> str:
        return codegen.__version__

    def variants(self, model: Model) -> list[str]:
        return [fmt for fmt in FORMATS if fmt in model.files]

    def all_variants(self, model: Model) -> list[str]:
        result = []
        for fmt in (fmt for fmt in FORMATS if fmt in model.files):
            result.append(fmt)
            path = Path(model.file(fmt))
            try:
                stat = path.stat()
                found = _applicable(str(path), fmt, (stat.st_mtime_ns, stat.st_size))
            except codegen.UnsupportedModel:
                continue  # generating the default variant reports the refusal
            default = tuple(codegen.DEFAULT_TRANSFORMS)
            for name in found:
                result.append(join(fmt, () if name in default else (name, *default)))
        return result

    def generate(self, model: Model, variant: str, out_dir: Path, **options) -> GeneratedCode:
        """The code of ``variant``; ``options`` are codegen's: ``cores``, ``schedule``, ``omit_wait`` ask for
        parallel code, one function per core (``codegen.parallel``, V2 only), ``max_macs`` V3's size limit."""
        fmt, transforms = split(variant)
        try:
            codegen.generate(model.file(fmt), out_dir, name=model.name, frontend=fmt, strategy=self.strategy,
                             transforms=transforms, generator_name=self.name, **options)
        except codegen.OverLimit as exc:  # the limit as an Assay user sets it, not as codegen's own CLI does
            raise NotSupported(f"{exc.cause}; generate it anyway with `assay generate --generator {self.name} "
                               "--max-macs N --out DIR`, then check that C with `--generators dir:DIR`") from None
        except codegen.UnsupportedModel as exc:  # its own refusal: the `not supported` verdict, like a peer's
            raise NotSupported(str(exc)) from None
        return GeneratedCode.from_directory(out_dir)
