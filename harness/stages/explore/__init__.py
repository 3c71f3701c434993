"""Design-space exploration (OpTC): sensitivity analysis, global weighted pruning, Pareto fronts.

``run`` explores (``explore.json``) with the structured pruning of ``pruning``, ``report`` writes
``pareto.md`` and ``index.html``, ``command`` adds ``assay explore``.
"""
