"""The export stage's contract (``harness.contract``): ``export.json`` (schema ``assay-export/1``) beside one
model's NNEF folder."""

from __future__ import annotations

from harness.contract import PER_MODEL, StageSpec

SPEC = StageSpec(
    name="export",
    result_file="export.json",
    schema="assay-export/1",
    per=PER_MODEL,
)
