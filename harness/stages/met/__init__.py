"""Measured execution (paper Tables 2 and 3): exact instruction counts under QEMU, cycles per timing model.

``run`` stores one record per item and timing model (``met.json``), ``report``
writes ``table2.md``, ``command`` adds ``assay met``. Counting and pricing
live in ``harness.measurement``, shared with the WCET stage's soundness check.
"""
