"""Timing analysis. ``wcet.timing`` holds the timing models that price instructions in cycles; measured
execution (harness.met) uses them now, and the static WCET analyzer will use the very same definitions.
"""
