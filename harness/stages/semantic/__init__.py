"""Semantic preservation (paper Table 1): model -> generator -> build -> run -> compare with references.

``run`` plans and runs the items (one record per reference in ``results.json``),
``oracle`` is the verdict (infinity norm, Definition 15), ``bitcompare`` the
cross-target comparison with the host, ``report`` writes ``table1.md``,
``index.html`` and ``bitcompare.md``, ``command`` adds ``assay semantic`` and
``assay report``.
"""
