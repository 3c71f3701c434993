"""Timing analysis. ``wcet.timing`` holds the timing models that price instructions in cycles; measured
execution (``harness.measurement.cycles``) and the static WCET analyzer (``wcet.analyzer``) use the very same
definitions. The package is standalone: it never imports the harness (``python -m wcet ELF FUNCTION``).
"""
