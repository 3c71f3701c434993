"""`assay conformance`: single-layer and small-graph models against every generator (docs/conformance.md)."""
