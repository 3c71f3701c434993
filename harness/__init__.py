"""Assay: a verification and qualification harness for neural-network C code generators.

Data flows one way: model -> generator -> build -> run -> compare -> report.
"""

__version__ = "0.1.0"
