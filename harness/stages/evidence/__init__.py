"""DO-178C evidence package (``assay evidence``): one neural network's generated code on its targets,
with everything a certification engineer hands to the authority, produced by running things.

``run`` builds the package: it runs the other stages through the CLI (``harness.core.stagecall``),
generates the code it archives, measures structural coverage (``coverage``), writes the trace matrix
(``trace``), the configuration index (``sci``) and Assay's own qualification data (``tor``); ``verdicts``
computes every part's verdict from the package's files; ``package`` lists every file with its SHA-256 in
``evidence.json``, keeps timestamps and durations in one volatile file, zips the folder and writes the package
digest; ``integrity`` is what ``assay evidence verify`` checks; ``report`` writes the index page; ``command``
adds ``assay evidence``, ``assay evidence verify`` and ``assay evidence tor-matrix``.
"""
