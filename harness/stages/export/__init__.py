"""``assay export``: a model written as NNEF, optionally split into item descriptions with their Petri net."""
