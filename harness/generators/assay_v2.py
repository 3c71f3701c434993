"""Our own ACETONE-style generator, strategy V2 (``codegen``), as an adapter.

Its variants are the source formats it reads: ``keras`` (channels-last C),
``onnx`` and ``nnef`` (channels-first C), so one campaign checks every front end.
"""

from __future__ import annotations

from pathlib import Path

import codegen
from harness.digests import tree_digest
from harness.errors import NotSupported
from harness.generators import register
from harness.generators.generated import GeneratedCode
from harness.models.model import Model

FORMATS = ("keras", "onnx", "nnef")


@register("assay-v2")
class AssayV2:
    name: str

    def version(self) -> str:
        return codegen.__version__

    def variants(self, model: Model) -> list[str]:
        return [fmt for fmt in FORMATS if fmt in model.files]

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        try:
            codegen.generate(model.file(variant), out_dir, name=model.name, frontend=variant)
        except codegen.UnsupportedModel as exc:  # its own refusal: the `not supported` verdict, like a peer's
            raise NotSupported(str(exc)) from None
        return GeneratedCode.from_directory(out_dir)

    def identity(self, model: Model, variant: str) -> dict:
        """The generator's version and its source: a changed generator regenerates, even at one version."""
        return {"name": self.name, "version": codegen.__version__,
                "source": tree_digest(Path(codegen.__file__).resolve().parent)}
