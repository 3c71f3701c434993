"""A C text writer that knows the line number of everything it writes.

The manifest's layer spans and loop lines come from here, so they are exact by
construction rather than recovered by parsing the C afterwards.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

INDENT = "    "
INT_MAX = 2**31 - 1  # loop counters and indices are C ``int``s (at least 32 bits on every target)


@dataclass
class Loop:
    id: str
    var: str
    bound: int | str  # a literal trip count, or (V1's library) the C expression of a run-time bound
    line: int
    parent: str | None

    def record(self) -> dict:
        return {"id": self.id, "var": self.var, "bound": self.bound, "line": self.line, "parent": self.parent}


class CWriter:
    """Accumulates lines; ``loop`` opens a counted ``for`` with a literal bound and records it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0
        self.loops: list[Loop] = []  # every loop written, in order
        self._open_loops: list[Loop] = []
        self._next_loop = 0

    @property
    def line_number(self) -> int:
        """The 1-based number of the last line written."""
        return len(self.lines)

    def line(self, text: str = "") -> int:
        self.lines.append(f"{INDENT * self.depth}{text}" if text else "")
        return self.line_number

    def comment(self, text: str) -> int:
        text = " ".join(str(text).split()).replace("*/", "* /").replace("/*", "/ *")
        return self.line(f"/* {text} */")

    @contextmanager
    def block(self, head: str):
        """``head {`` ... ``}``, for functions and ``if`` guards."""
        self.line(f"{head} {{" if head else "{")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self.line("}")

    @contextmanager
    def loop(self, var: str, bound: int | str):
        """``for (int var = 0; var < bound; ++var) {`` with ``bound`` a literal constant.

        A ``str`` bound is a C expression evaluated at run time; only V1's
        generic library writes those, and its manifest gives each call's value.
        """
        if not isinstance(bound, str):
            bound = int(bound)
            if not 1 <= bound <= INT_MAX:
                raise ValueError(f"loop over {var} with bound {bound}")
        parent = self._open_loops[-1].id if self._open_loops else None
        line = self.line(f"for (int {var} = 0; {var} < {bound}; ++{var}) {{")
        record = Loop(f"L{self._next_loop}", var, bound, line, parent)
        self._next_loop += 1
        self.loops.append(record)
        self._open_loops.append(record)
        self.depth += 1
        try:
            yield record
        finally:
            self.depth -= 1
            self._open_loops.pop()
            self.line("}")

    @contextmanager
    def nest(self, pairs):
        """Nested loops over ``(var, bound)`` pairs, outermost first."""
        pairs = list(pairs)
        if not pairs:
            yield
            return
        with self.loop(*pairs[0]):
            with self.nest(pairs[1:]):
                yield

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def c_float(value: float) -> str:
    """A C float literal that reads back as exactly ``float32(value)``."""
    value = np.float32(value)
    if np.isnan(value):
        return "NAN"
    if np.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    text = "%.9g" % float(value)
    if not any(ch in text for ch in ".e"):
        text += ".0"
    return text + "f"


def c_ident(text: str) -> str:
    """``text`` made into a lowercase C identifier fragment."""
    out = "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in str(text).lower())
    out = "_".join(part for part in out.split("_") if part) or "x"
    if out[0].isdigit():
        out = "m" + out
    return out
