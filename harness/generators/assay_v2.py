"""Our own ACETONE-style generator, strategy V2 (inlined loops, §3.3), as an adapter.

Its variants are the source formats it reads (``keras``: channels-last C,
``onnx``: channels-first C) and the transformations that change the model
(``harness.generators.codegen_strategy``).
"""

from __future__ import annotations

from harness.generators import register
from harness.generators.codegen_strategy import CodegenStrategy


@register("assay-v2")
class AssayV2(CodegenStrategy):
    strategy = "v2"
