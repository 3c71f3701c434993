"""Static WCET (paper Table 4): flow facts, the bound from the ``wcet`` library, and its check against
measured cycles.

``run`` adapts the standalone ``wcet`` library to the items (``wcet.json``),
``report`` writes ``table4.md`` and ``layers.md``, ``command`` adds ``assay
wcet`` (campaign and ``--elf`` modes).
"""
