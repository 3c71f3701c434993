"""What every stage shares, one place for each: the plan of items (``plan``) and the memory
budget that refuses a model too large to verify (``budget``), the model -> generator -> build
steps and the work-directory layout (``pipeline``), the result store and resume (``results``),
progress and the summary line (``progress``), the test oracle's verdict (``oracle``), provenance
(``provenance``), the running configuration against the tested one (``configuration``, ``assay
doctor``), seeded inputs (``inputs``) and report helpers (``report``).

A stage (``harness.stages.<name>``) imports from here and from the registries
(models, generators, references, targets, runners), never from another stage.
"""
