"""Timing analysis: flow facts, the OTAWA driver and the built-in WCET analyzer (not yet implemented)."""
