"""Runners build generated code for a target and execute it outside the harness process."""
