"""The errors of the WCET library, which is standalone (it never imports the harness).

Every error is one line for the user, naming the file, function or address
concerned. ``WcetError`` is the base a caller catches: the harness reports it
like its own user errors (exit status 2 from the CLI, an ``error`` record in
a campaign), ``python -m wcet`` prints it and exits 2.
"""

from __future__ import annotations


class WcetError(Exception):
    """Something the library cannot accept or do; the message says what and where."""


class ConfigurationError(WcetError):
    """A bad option or input file: a timing model parameter, an annotation file, a missing tool."""


class AnalysisError(WcetError):
    """The analysis cannot go on; ``address`` is the instruction or block concerned, if one is.

    Covers a missing function, a stripped ELF, an instruction it cannot decode or
    time, an unresolved indirect branch, an irreducible or unbounded loop, recursion.
    """

    def __init__(self, message: str, address: int | None = None):
        super().__init__(message)
        self.address = address


class UnboundedLoopsError(AnalysisError):
    """Reachable loops without a bound: ``loops`` lists every one of them (``wcet.loops.Loop``)."""

    def __init__(self, message: str, loops: list):
        super().__init__(message, loops[0].header if loops else None)
        self.loops = loops
