"""``codegen`` strategy V3 (§3.4): no loops, weights as literals, one statement per multiply-accumulate.

Refuses models above ``codegen`` V3's default limit of 2,000,000
multiply-accumulates with one line naming the count and ``assay generate
--max-macs``, the one command that raises it. Variants as assay-v2
(``harness.generators.codegen_strategy``).
"""

from __future__ import annotations

from harness.generators.codegen_strategy import CodegenStrategy


class AssayV3(CodegenStrategy):
    strategy = "v3"
    takes_max_macs = True
