"""The one exception the WCET analyzer raises for a problem with its input.

``AnalysisError`` covers everything the analysis cannot accept: a missing
function, a stripped ELF, an instruction it cannot decode or time, an
unresolved indirect branch, an irreducible or unbounded loop, recursion. Its
message is one line that names the address concerned. It is an ``AssayError``,
so the CLI reports it without a traceback (exit status 2, bad input).
"""

from __future__ import annotations

from harness.errors import AssayError


class AnalysisError(AssayError):
    """The analysis cannot go on; ``address`` is the instruction or block concerned, if one is."""

    def __init__(self, message: str, address: int | None = None):
        super().__init__(message)
        self.address = address


class UnboundedLoopsError(AnalysisError):
    """Reachable loops without a bound: ``loops`` lists every one of them (``wcet.loops.Loop``)."""

    def __init__(self, message: str, loops: list):
        super().__init__(message, loops[0].header if loops else None)
        self.loops = loops
