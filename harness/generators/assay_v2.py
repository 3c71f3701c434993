"""Our own ACETONE-style generator, strategy V2 (inlined loops, §3.3), as an adapter.

Its variants are the source formats it reads (``keras``: channels-last C,
``onnx``: channels-first C) and the transformations that change the model
(``harness.generators.codegen_strategy``).
"""

from __future__ import annotations

from pathlib import Path

from codegen import parallel
from harness.generators.codegen_strategy import CodegenStrategy
from harness.generators.generated import GeneratedCode
from harness.models.model import Model


class AssayV2(CodegenStrategy):
    strategy = "v2"

    def generate_parallel(self, model: Model, variant: str, out_dir: Path, cores: int, schedule: list[list[dict]],
                          omit_wait: str | None = None) -> GeneratedCode:
        """Parallel code for ``schedule`` (per core, its ``{"node", "start", "end"}`` tasks; codegen.parallel).

        ``omit_wait`` ("read"/"write") leaves a flag wait out: only for mutation tests of the trace check.
        """
        return self.generate(model, variant, out_dir, cores=cores, schedule=schedule, omit_wait=omit_wait)

    def operator_pair(self, floats: int) -> tuple[str, dict]:
        """The Writing and Reading operators its parallel code inlines for a tensor of ``floats`` floats, as a C
        file of two functions and, per function, its busy wait's line and its loops (``codegen.parallel``): what
        the schedule stage bounds to cost the edges of the scheduling DAG."""
        return parallel.operator_pair(floats)
