"""Measuring the executable: exact instruction counts under QEMU (``execcount``, a TCG plugin) and their
price in cycles under a timing model (``cycles``); ``options`` are the command-line options every
command that measures or bounds cycles shares (``assay met``, ``assay wcet``).
"""
