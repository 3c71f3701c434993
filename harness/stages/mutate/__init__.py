"""Oracle adequacy by mutation (``assay mutate``, issue 9 point 7).

``operators`` finds the mutation points of generated C (pycparser) and makes
each mutant a text edit, ``run`` builds and judges every mutant with the host
runner and ``harness.core.oracle`` and classifies the survivors, ``report``
writes ``mutation.md``, ``command`` adds ``assay mutate``.
"""
