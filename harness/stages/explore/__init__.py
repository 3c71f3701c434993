"""Design-space exploration (OpTC): sensitivity analysis, global weighted pruning, Pareto fronts.

``run`` explores (``explore.json``), ``report`` writes ``pareto.md`` and ``index.html``, ``command`` adds
``assay explore``.
"""
