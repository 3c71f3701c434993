"""``codegen`` strategy V1 (§3.2): a generic inference loop over layer structs, calls through pointers.

Sequential models only (its loop passes one tensor on); others are refused
with one line. Variants as assay-v2 (``harness.generators.codegen_strategy``).
"""

from __future__ import annotations

from harness.generators.codegen_strategy import CodegenStrategy


class AssayV1(CodegenStrategy):
    strategy = "v1"
