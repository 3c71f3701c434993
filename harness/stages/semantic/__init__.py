"""Semantic preservation (paper Table 1): model -> generator -> build -> run -> compare with references.

``run`` plans and runs the items (one record per reference in ``results.json``)
and takes each verdict from ``harness.core.oracle`` (infinity norm, Definition 15,
shared with the mutation stage), ``bitcompare`` is the
cross-target comparison with the host, ``report`` writes ``table1.md``,
``index.html`` and ``bitcompare.md``, ``command`` adds ``assay semantic`` and
``assay report``.
"""
