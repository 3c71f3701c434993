"""Our own ACETONE-style generator, strategy V2 (``codegen``), as an adapter.

Its variants are the source formats it reads: ``keras`` (channels-last C) and
``onnx`` (channels-first C), so one campaign checks both front ends.
"""

from __future__ import annotations

from pathlib import Path

import codegen
from harness.generators.generated import GeneratedCode
from harness.generators import register
from harness.models.model import Model

FORMATS = ("keras", "onnx")


@register("assay-v2")
class AssayV2:
    name: str

    def version(self) -> str:
        return codegen.__version__

    def variants(self, model: Model) -> list[str]:
        return [fmt for fmt in FORMATS if fmt in model.files]

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        codegen.generate(model.file(variant), out_dir, name=model.name, frontend=variant)
        return GeneratedCode.from_directory(out_dir)
