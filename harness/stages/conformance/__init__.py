"""`assay conformance`: single-layer and small-graph models (``cases``) against every generator
(docs/conformance.md)."""
