"""OTAWA's two flow-fact file formats, written and read: F4 (``.ff``) and FFX (``.ffx``).

Both map to and from ``wcet.facts.FlowFacts``. The grammar and its meaning
are OTAWA's (statinf-otawa/otawa at 83c9d9b7: ``src/prog/util_fft_lexer.ll``,
``util_fft_parser.yy``, ``flowfact_FlowFactLoader.cpp``; docs/flowfacts.md
lists every form): F4 is tokenised exactly as OTAWA's flex lexer does and
parsed with its bison grammar, FFX elements and location attributes are read
as ``FlowFactLoader`` reads them. What a statement means in Assay's analyzer
is what it means in OTAWA; the statements that can only remove paths or
narrow values (the inlining policy, ``noblock``, value and memory hints,
infeasible paths) are read with no effect, which keeps the bound sound.
Anything outside the language is refused with file and line. A file Assay
writes always parses here, and a file that parses here is one OTAWA reads.

F4 (one statement per ``;``; ``//`` and ``/* */`` comments)::

    checksum "dense.elf" 0x5c167506;
    loop "dense" + 0xa0 8;                  // bound: back edges per entry of the loop
    loop 0x80dc max 8 total 64 min 1;       // total per run of the root; min has no effect on a WCET
    loop "dense" + 0x74 16 in "main" / @0x8114;  // in a call context: functions and @call sites
    loop "dense.c":16 16;                   // the loop headed on that source line
    multicall 0x8114 to "mac", "abort";     // targets of an indirect call
    multibranch "fn" + 0x18 to "fn" + 0x40, "fn" - 0x4;  // targets of an indirect jump (a jump table)
    noreturn "abort";   nocall "trace";   ignorecontrol 0x8040;
    return 0x8010;  preserve 0x8030;  ignoreseq 0x8044;  force call 0x8050;  ignore entry "tail";
    library;  doinline "f";  noblock "g";  memory access 0x8010 0x20000 .. 0x20100;

Integers are decimal, ``0`` octal, ``0x`` hex or ``0b`` binary and must fit
OTAWA's C ``int``. An address is an integer, ``"label"``, ``"label" + N``,
``"label" - N`` or ``"file":line`` in every statement; how it resolves is
``wcet.fflocate``'s: labels through the ELF's symbols (``symbols`` or
``locations``), source lines and call contexts through
``wcet.fflocate.ElfLocations``. A loop at ``"label" + N`` needs no symbol
table (the analyzer names loops that way). ``multicall`` is for calls only
and ``multibranch`` for jumps only, as OTAWA applies them (``CALL_TARGET``,
``BRANCH_TARGET``); several statements for one site add their targets.

FFX: XML rooted at ``<flowfacts>``. Top level: ``<loop>``, ``<function>``,
``<noreturn>``, ``<nocall>``, ``<return>``, ``<ignorecontrol>``,
``<ignoreseq>``, ``<ignore-entry>``, ``<multicall>``/``<multibranch>``
holding ``<target>`` elements, nested ``<flowfacts>``, and the elements read
with no effect (``_FFX_NO_EFFECT``). Inside a ``<function>``, ``<loop>``
or ``<call>``: ``<loop>``, ``<call>`` (holding ``<function>`` elements, or,
the old form, the callee's content directly with ``name=``), ``<function>``,
``<conditional>``/``<condition>``/``<case>``. A location is ``address``,
``label`` [+ ``offset``], ``symbol``, a lone ``offset`` (from the enclosing
function or call) or ``source`` + ``line``; a loop takes ``maxcount``,
``totalcount`` (``NOCOMP``: none) and ``mincount``; other attributes (oRange's
``executed``, ``loopId``, ...) are ignored, as OTAWA ignores them. The
nesting of ``<function>`` and ``<call>`` elements is the loop's call context.

A call context is mapped onto the analyzer's exact call-site contexts
(``LoopBound.context``) with the ELF's call graph (``wcet.fflocate``).
Without the ELF, a context is read only in the form the writers use: the
analysed function (``root``; for FFX, else the outermost ``<function>``),
then call sites by address.

Per-execution target sequences (``FlowFacts.sequences``) and the facts of each
execution (``FlowFacts.executions``: a V1 layer's own loop bounds) have no form
in either format: OTAWA cannot use them. ``write_f4`` lists them in comments.

``otawa_checksum(elf)`` is the value mkff writes on the ``checksum`` line:
elm's Fletcher checksum (``elm/checksum/Fletcher.h``) of the whole file.
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Iterable, Mapping
from pathlib import Path

from wcet.errors import WcetError
from wcet.facts import FlowFacts, LoopBound

TYPE_CHECKING = False  # typing.TYPE_CHECKING's value, without importing typing (wcet/__init__.py)
if TYPE_CHECKING:
    from wcet.fflocate import ElfLocations

INT_MAX = 2**31 - 1  # OTAWA's F4 lexer stores integers in a C int


class FlowFactFormatError(WcetError):
    """A flow-fact file outside the accepted grammar, or facts a format cannot express.

    ``problems`` lists every problem found, each as ``file:line: message``.
    """

    def __init__(self, problems: list[str], what: str = "flow facts"):
        self.problems = list(problems)
        count = len(self.problems)
        super().__init__(f"{what}: {count} problem{'s' if count != 1 else ''}:\n  " + "\n  ".join(self.problems))


# ---------------------------------------------------------------- checksum


def otawa_checksum(elf: Path | bytes) -> int:
    """elm's Fletcher checksum of a file, as mkff writes it and OTAWA checks it.

    elm's ``checksum::Fletcher``: two running sums, both starting at 0xffff,
    over the file read as little-endian 16-bit halves (the byte order of the
    x86 host OTAWA runs on); every 360 bytes and at the end each sum is folded
    once (``s = (s & 0xffff) + (s >> 16)``); the result is ``sum2 << 16 | sum1``
    truncated to 32 bits. For an odd-length file elm adds the last byte with
    the high byte left over from the previous half (its ``half`` buffer is not
    cleared), reproduced here. Computed per block of 360 bytes with NumPy, the
    file read in chunks (a VGG-16 image is 554 MB; one half at a time in Python
    took minutes); ``tests/wcet/test_ffformat.py`` checks it against elm's
    loop as written.
    """
    import numpy as np

    weights = np.arange(_BLOCK, 0, -1, dtype=np.int64)
    sum1 = sum2 = 0xFFFF  # exact, after the last whole block
    previous = b""  # the bytes after the last whole block so far
    high = 0  # the high byte of the last half added
    for chunk in _chunks(elf):
        data = previous + chunk
        full = len(data) // _BLOCK_BYTES * _BLOCK_BYTES
        blocks = np.frombuffer(data, dtype="<u2", count=full // 2).reshape(-1, _BLOCK).astype(np.int64)
        if len(blocks):
            # Per block: s1 += sum(h); s2 += 180 * s1 + sum((180 - k) * h[k]); both folded (``_folded``).
            ones = _folded(sum1, blocks.sum(axis=1))
            before = np.concatenate(([sum1], ones[:-1]))
            twos = _folded(sum2, _BLOCK * before + blocks @ weights)
            sum1, sum2 = int(ones[-1]), int(twos[-1])
        previous = data[full:]
        high = data[full - 1] if full else high
    rest = np.frombuffer(previous, dtype="<u2", count=len(previous) // 2).astype(np.int64)
    if len(previous) % 2:  # the odd last byte, with the high byte of the half before it (0 if none)
        rest = np.append(rest, previous[-1] | ((previous[-2] if len(previous) > 1 else high) << 8))
    sum2 += len(rest) * sum1 + int(rest @ np.arange(len(rest), 0, -1, dtype=np.int64))
    sum1 += int(rest.sum())
    for _ in range(2 if len(rest) == _BLOCK else 1):  # an odd last byte that completes a block: elm folds twice
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return ((sum2 << 16) | sum1) & 0xFFFFFFFF


def _folded(start: int, added):
    """The exact values of a sum that starts at ``start`` (folded, below 2 * 0xffff) and, block after block,
    has ``added[b]`` (below 2**31 - 2**17) added and is then folded once: ``s = (s & 0xffff) + (s >> 16)``.

    A fold keeps the value modulo 0xffff (2**16 = 1 mod 0xffff) and gives a
    value below 2 * 0xffff, so after block b the sum is ``r_b`` or ``r_b +
    0xffff``, ``r_b`` the running total modulo 0xffff: which one (``e_b``) is
    the question. Fold the candidate ``x = r_(b-1) + added[b]`` (the true
    value is ``x`` or ``x + 0xffff``): adding 0xffff = 2**16 - 1 moves one
    from the low half to the high half and leaves the fold unchanged, unless
    the low half is 0 (then the fold is ``x >> 16`` and the true one that plus
    0xffff). So ``e_b`` is read from the fold of ``x`` where its low half is
    not 0, and carried from the block before where it is.
    """
    import numpy as np

    modulus = 0xFFFF
    residues = (start % modulus + np.cumsum(added)) % modulus
    candidates = np.concatenate(([start % modulus], residues[:-1])) + added
    folds = (candidates & 0xFFFF) + (candidates >> 16)
    decided = (candidates & 0xFFFF) != 0
    last = np.maximum.accumulate(np.where(decided, np.arange(len(added)), -1))
    high = np.where(last >= 0, folds[np.maximum(last, 0)] >= modulus, start >= modulus)
    return residues + modulus * high


def _chunks(elf: Path | bytes):
    """The file (or bytes) in pieces of whole checksum blocks, so a 500 MB image is never held at once."""
    size = _BLOCK_BYTES * 4096
    if isinstance(elf, (bytes, bytearray)):
        for start in range(0, len(elf), size):
            yield bytes(elf[start:start + size])
        return
    with Path(elf).open("rb") as stream:
        while chunk := stream.read(size):
            yield chunk


_BLOCK = 180  # halves between folds: elm folds the sums every 360 bytes
_BLOCK_BYTES = 2 * _BLOCK


def content(facts: FlowFacts) -> tuple:
    """What the formats carry of ``facts``, order-free: equal for a file and its write -> parse round trip.

    Comments (source lines, origins, justifications) are written but not read back.
    """
    loops = frozenset((l.function, l.offset, l.max, l.total, l.context) for l in facts.loops)
    multicalls = frozenset((site, tuple(targets)) for site, targets in facts.multicalls.items())
    multibranches = frozenset((site, tuple(targets)) for site, targets in facts.multibranches.items())
    return (loops, multicalls, multibranches, facts.noreturn, facts.nocall, facts.ignorecontrol, facts.returns,
            facts.preserve, facts.ignoreseq, frozenset(facts.forced.items()), facts.ignore_entry, facts.checksum)


# ---------------------------------------------------------------- F4 writer


def write_f4(facts: FlowFacts, elf: Path | None = None, entry: str | None = None,
             header: Iterable[str] = ()) -> str:
    """The F4 text of ``facts``.

    ``elf`` and ``entry`` (the analysed function) go into a header comment;
    without a checksum in ``facts``, the ``checksum`` line is computed from
    ``elf``. Loops are grouped by function, in address order, each with a
    comment giving its source line, origin and justification when known.
    ``header`` lines become more ``//`` comments. A bound in a call context is
    written ``in "ENTRY" / @SITE / ...`` (the analysed function, then each
    call site, outermost first), which reads back as exactly that context;
    without ``entry`` it raises ``FlowFactFormatError``.
    """
    header = [*_header(elf, entry), *header]
    if facts.checksum is None and elf is not None:
        facts = facts._replace(checksum=(Path(elf).name, otawa_checksum(elf)))
    problems = []
    lines = [f"// {_one_line(text)}" for text in header]
    if facts.checksum is not None:
        name, value = facts.checksum
        lines.append(f"checksum {_f4_string(name, problems)} {value:#010x};")
    for name in sorted(facts.noreturn):
        lines.append(f"noreturn {_f4_string(name, problems)};")
    for name in sorted(facts.nocall):
        lines.append(f"nocall {_f4_string(name, problems)};")
    for name in sorted(facts.ignore_entry):
        lines.append(f"ignore entry {_f4_string(name, problems)};")
    for keyword, addresses in (("ignorecontrol", facts.ignorecontrol), ("return", facts.returns),
                               ("preserve", facts.preserve), ("ignoreseq", facts.ignoreseq)):
        lines += [f"{keyword} {_f4_int(address, problems)};" for address in sorted(addresses)]
    lines += [f"force {facts.forced[address]} {_f4_int(address, problems)};" for address in sorted(facts.forced)]
    for keyword, table in (("multicall", facts.multicalls), ("multibranch", facts.multibranches)):
        for site in sorted(table):
            targets = table[site]
            if not targets:
                problems.append(f"{keyword} at {site:#x} has no target")
                continue
            lines.append(f"{keyword} {_f4_int(site, problems)} to "
                         f"{', '.join(_f4_int(t, problems) for t in targets)};")
    for site in sorted(facts.sequences):
        lines.append(f"// sequence at {site:#x} (one target per execution, Assay's precise bound only): "
                     + ", ".join(f"{t:#x}" for t in facts.sequences[site]))
    for site in sorted(facts.executions):
        for k, overlay in enumerate(facts.executions[site]):
            lines.append(f"// execution {k} at {site:#x} (Assay's precise bound only): "
                         + ", ".join([f"loop {l.label()} {l.max}" for l in overlay.loops]
                                     + [f"multicall {a:#x} to {', '.join(f'{t:#x}' for t in ts)}"
                                        for a, ts in sorted(overlay.multicalls.items())]))
    current = object()
    for loop in sorted(facts.loops, key=lambda l: (l.function or "", l.offset)):
        context = ""
        if loop.context:  # OTAWA's ``in`` path: the analysed function, then each call site (``@ADDRESS``)
            if entry is None:
                problems.append(f"loop {loop.label()}: a call-context bound needs the analysed function (entry)")
                continue
            context = " in " + " / ".join([_f4_string(entry, problems),
                                            *(f"@{_f4_int(site, problems)}" for site in loop.context)])
        if loop.function != current:
            current = loop.function
            lines.append("")
            lines.append(f"// Function {loop.function}" if loop.function else "// Loops by absolute address")
        where = (f"{_f4_string(loop.function, problems)} + {_f4_int(loop.offset, problems)}" if loop.function
                 else _f4_int(loop.offset, problems))
        if loop.total is None:
            count = _f4_int(loop.max, problems, hexadecimal=False)
        else:
            count = (f"max {_f4_int(loop.max, problems, hexadecimal=False)} "
                     f"total {_f4_int(loop.total, problems, hexadecimal=False)}")
        notes = [f"{loop.source[0]}:{loop.source[1]}" if loop.source else "", loop.origin, loop.justification]
        comment = "; ".join(_one_line(n) for n in notes if n)
        lines.append(f"loop {where} {count}{context};" + (f" // {comment}" if comment else ""))
    if problems:
        raise FlowFactFormatError(problems, "cannot write F4")
    return "\n".join(lines).lstrip("\n") + "\n"


def _header(elf: Path | None, entry: str | None) -> list[str]:
    if elf is None and entry is None:
        return []
    what = f"{entry} in {Path(elf).name}" if elf is not None and entry else (entry or Path(elf).name)
    return [f"Flow facts for {what}, written by Assay (wcet.ffformat); bounds are back edges per loop entry"]


def _one_line(text: str) -> str:
    return " ".join(str(text).split()).replace("*/", "* /")


def _f4_string(name: str, problems: list[str]) -> str:
    if not name or any(c in name for c in '"\\\n\t'):
        problems.append(f"name {name!r} cannot be written as an F4 string")
    return f'"{name}"'


def _f4_int(value: int, problems: list[str], hexadecimal: bool = True) -> str:
    if not 0 <= value <= (0xFFFFFFFF if hexadecimal else INT_MAX):
        problems.append(f"{value} does not fit OTAWA's F4 integers")
    return f"{value:#x}" if hexadecimal else str(value)


# ---------------------------------------------------------------- F4 lexer

_KEYWORDS = ("access", "branch", "call", "checksum", "control", "doinline", "entry", "force", "ignore",
             "ignorecontrol", "ignoreseq", "in", "inlining-off", "inlining-on", "library", "loop", "max", "min",
             "memory", "multibranch", "multicall", "nocall", "noblock", "noinline", "preserve", "no", "noreturn",
             "register", "return", "seq", "to", "total")
_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")  # the TYPE token
# OTAWA's lexer rules (util_fft_lexer.ll) in their order: flex takes the longest
# match and, among equally long ones, the first rule.
_RULES = [
    ("space", re.compile(r"[ \t]")),
    ("newline", re.compile(r"\n")),
    ("line_comment", re.compile(r"//")),
    ("block_comment", re.compile(r"/\*")),
    ("sym", re.compile(r"[?;,+\-./:@=\[\]()]")),  # flex's [?;,+-/:@=\[\]()]: '+-/' is the range + , - . /
    ("dotdot", re.compile(r"\.\.")),
    *(("kw", re.compile(re.escape(k))) for k in _KEYWORDS),
    *(("type", re.compile(re.escape(t))) for t in _TYPES),
    ("string", re.compile(r'"')),
    ("int", re.compile(r"[1-9][0-9]*")),
    ("int", re.compile(r"0[0-7]*")),
    ("int", re.compile(r"0[xX][0-9a-fA-F]+")),
    ("int", re.compile(r"0[bB][01]+")),
]


class _Token(namedtuple("_Token", [
    "kind",  # "kw", "sym", "int", "string", "dotdot", "bad", "eof"
    "value",
    "line",
    "text",
])):
    __slots__ = ()


def _tokens(text: str, name: str, problems: list[str]) -> list[_Token]:
    tokens: list[_Token] = []
    position, line = 0, 1
    while position < len(text):
        best_kind, best_end = None, position
        for kind, pattern in _RULES:
            match = pattern.match(text, position)
            if match and match.end() > best_end:
                best_kind, best_end = kind, match.end()
        if best_kind is None:
            tokens.append(_Token("bad", text[position], line, text[position]))
            position += 1
            continue
        lexeme = text[position:best_end]
        if best_kind == "space":
            pass
        elif best_kind == "newline":
            line += 1
        elif best_kind == "line_comment":
            end = text.find("\n", best_end)
            best_end = len(text) if end < 0 else end  # the newline itself is counted by the next token
        elif best_kind == "block_comment":
            end = text.find("*/", best_end)
            if end < 0:
                problems.append(f"{name}:{line}: unterminated /* comment")
                best_end = len(text)
            else:
                line += text.count("\n", best_end, end)
                best_end = end + 2
        elif best_kind == "string":
            value, best_end, ok = _string(text, best_end)
            if not ok:
                problems.append(f"{name}:{line}: unterminated string")
            tokens.append(_Token("string", value, line, text[position:best_end]))
        elif best_kind == "int":
            tokens.append(_Token("int", _integer(lexeme), line, lexeme))
        else:
            tokens.append(_Token(best_kind, lexeme, line, lexeme))
        position = best_end
    tokens.append(_Token("eof", None, line, "end of file"))
    return tokens


def _string(text: str, position: int) -> tuple[str, int, bool]:
    """The F4 string starting after its opening quote: (value, end, terminated)."""
    out = []
    while position < len(text):
        char = text[position]
        if char == '"':
            return "".join(out), position + 1, True
        if char == "\n":
            return "".join(out), position, False
        if char == "\\" and position + 1 < len(text) and text[position + 1] != "\n":
            following = text[position + 1]
            out.append({"n": "\n", "t": "\t"}.get(following, "\\" + following))  # as OTAWA: \x keeps the backslash
            position += 2
            continue
        out.append(char)
        position += 1
    return "".join(out), position, False


def _integer(lexeme: str) -> int:
    if lexeme[:2] in ("0x", "0X"):
        return int(lexeme[2:], 16)
    if lexeme[:2] in ("0b", "0B"):
        return int(lexeme[2:], 2)
    if lexeme.startswith("0"):
        return int(lexeme, 8)
    return int(lexeme)


# ---------------------------------------------------------------- F4 parser


class F4Address(namedtuple("F4Address", [
    "label",  # str | None: the label, or the source file of a "file":line address
    "offset",  # int: the integer itself when label is None
    "line",  # int | None = None: the source line of a "file":line address
], defaults=(None,))):
    """An F4 address as written: an integer, ``"label"`` plus a signed offset, or ``"file":line``."""

    __slots__ = ()

    def __str__(self) -> str:
        if self.line is not None:
            return f'"{self.label}":{self.line}'
        if self.label is None:
            return f"{self.offset:#x}"
        if self.offset == 0:
            return f'"{self.label}"'
        sign = "+" if self.offset >= 0 else "-"
        return f'"{self.label}" {sign} {abs(self.offset):#x}'


class F4Statement(namedtuple("F4Statement", [
    "kind",  # str
    "line",  # int
    "address",  # F4Address | None = None
    "max",  # int | None = None: loop; all three None and not unknown: no count given
    "total",  # int | None = None
    "min",  # int | None = None
    "unknown",  # bool = False: loop ... ?  /  multicall ... to ?
    "targets",  # tuple[F4Address, ...] = ()
    "name",  # str | None = None: checksum file name
    "value",  # int | None = None: checksum value
    "context",  # tuple[tuple[str, F4Address], ...] = (): 'in' steps, outermost first: ("function"|"call", address)
    "words",  # str = "": the statement's keywords, for messages
], defaults=(None, None, None, None, False, (), None, None, (), ""))):
    """One F4 statement.

    ``kind``: loop, checksum, return, noreturn, nocall, ignorecontrol,
    ignoreseq, force branch, force call, ignore entry, multicall, multibranch,
    preserve, library, or no effect (statements that cannot change Assay's
    bound, ``_NO_EFFECT``: ``words`` says which).
    """

    __slots__ = ()


_Steps = tuple[tuple[str, F4Address], ...]  # a call context as written: ("function" | "call", location), outermost first



class _Parser:
    __slots__ = ("tokens", "name", "problems", "position", "statements")

    def __init__(self, tokens: list[_Token], name: str, problems: list[str]):
        self.tokens, self.name, self.problems = tokens, name, problems
        self.position = 0
        self.statements: list[F4Statement] = []

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.position + ahead, len(self.tokens) - 1)]

    def take(self) -> _Token:
        token = self.tokens[self.position]
        if token.kind != "eof":
            self.position += 1
        return token

    def is_(self, kind: str, value=None, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == kind and (value is None or token.value == value)

    def expect(self, kind: str, value=None, what: str | None = None) -> _Token:
        if self.is_(kind, value):
            return self.take()
        raise _Syntax(self.peek(), what or repr(value if value is not None else kind))

    def parse(self) -> list[F4Statement]:
        while not self.is_("eof"):
            start = self.position
            try:
                self.statement()
            except _Syntax as error:
                token = error.token
                found = "end of file" if token.kind == "eof" else repr(token.text)
                self.problems.append(f"{self.name}:{token.line}: expected {error.expected}, found {found}")
                # skip to the end of the statement and go on, to report every problem at once
                if self.position == start:
                    self.take()
                while not self.is_("eof") and not self.is_("sym", ";"):
                    self.take()
                if self.is_("sym", ";"):
                    self.take()
        return self.statements

    def add(self, kind: str, line: int, **values) -> None:
        self.expect("sym", ";", "';'")
        self.statements.append(F4Statement(kind, line, **values))

    def statement(self) -> None:
        token = self.peek()
        if token.kind != "kw" or token.value not in _STATEMENTS:
            raise _Syntax(token, "a statement (" + ", ".join(sorted(set(_STATEMENTS) - {"no", "ignore", "force"}))
                          + ")")
        self.take()
        keyword, line = token.value, token.line
        if keyword == "no":  # 'no return' / 'no call'
            second = self.expect("kw", what="'return' or 'call' after 'no'")
            if second.value not in ("return", "call"):
                raise _Syntax(second, "'return' or 'call' after 'no'")
            keyword = "noreturn" if second.value == "return" else "nocall"
        elif keyword == "ignore":  # 'ignore control' / 'ignore seq' / 'ignore entry'
            second = self.expect("kw", what="'control', 'seq' or 'entry' after 'ignore'")
            if second.value not in ("control", "seq", "entry"):
                raise _Syntax(second, "'control', 'seq' or 'entry' after 'ignore'")
            keyword = {"control": "ignorecontrol", "seq": "ignoreseq", "entry": "ignore entry"}[second.value]
        elif keyword == "force":
            second = self.expect("kw", what="'branch' or 'call' after 'force'")
            if second.value not in ("branch", "call"):
                raise _Syntax(second, "'branch' or 'call' after 'force'")
            keyword = f"force {second.value}"
        if keyword == "loop":
            self.loop(line)
        elif keyword == "checksum":
            name = self.expect("string", what="a file name string").value
            value = self.integer(allow_unsigned=True)
            self.add("checksum", line, name=name, value=value)
        elif keyword in ("return", "noreturn", "ignorecontrol", "preserve"):
            self.add(keyword, line, address=self.address())
        elif keyword == "nocall":
            self.add(keyword, line, address=self.id_or_address())
        elif keyword in ("doinline", "noinline", "inlining-on", "inlining-off"):
            address = self.id_or_address()
            self.add("no effect", line, address=address, context=self.opt_in(), words=keyword)
        elif keyword in ("multicall", "multibranch"):
            self.multicall(line, keyword)
        elif keyword == "library":
            self.add("library", line)
        elif keyword == "memory":
            self.memory(line)
        elif keyword == "register":
            self.expect("string", what="a register name string")
            self.expect("sym", "=", "'='")
            self.value()
            self.add("no effect", line, words="register")
        elif keyword == "ignore entry":
            self.add(keyword, line, name=self.expect("string", what="a symbol name string").value)
        elif keyword == "noblock":
            self.add("no effect", line, address=self.id_or_address(), words=keyword)
        else:  # ignoreseq, force branch, force call
            self.add(keyword, line, address=self.address())

    def loop(self, line: int) -> None:
        address = self.address()
        counts: dict[str, int] = {}
        unknown = False
        if self.is_("int"):
            counts["max"] = self.integer()
        elif self.is_("sym", "?"):
            self.take()
            unknown = True
        elif any(self.is_("kw", word) for word in ("max", "total", "min")):
            while any(self.is_("kw", word) for word in ("max", "total", "min")):
                word = self.take()
                value = self.integer()
                if word.value in counts:
                    raise _Syntax(word, f"one '{word.value}' per loop (OTAWA: several '{word.value}' specifications)")
                counts[word.value] = value
        else:
            raise _Syntax(self.peek(), "a bound (an integer, 'max N', 'total N', 'min N' or '?')")
        context = self.opt_in()
        self.add("loop", line, address=address, unknown=unknown, context=context, **counts)

    def opt_in(self) -> tuple[tuple[str, F4Address], ...]:
        """OTAWA's ``opt_in``: ``in STEP / STEP ...``, a step being ADDRESS (a function), ``@ ADDRESS`` or
        ``"label" @ ADDRESS`` (a call site)."""
        if not self.is_("kw", "in"):
            return ()
        self.take()
        steps = [self.step()]
        while self.is_("sym", "/"):
            self.take()
            steps.append(self.step())
        return tuple(steps)

    def step(self) -> tuple[str, F4Address]:
        if self.is_("sym", "@"):
            self.take()
            return "call", self.address()
        if self.is_("string") and self.is_("sym", "@", ahead=1):
            self.take()
            self.take()
            return "call", self.address()
        return "function", self.address()

    def multicall(self, line: int, keyword: str) -> None:
        site = self.address()
        self.expect("kw", "to", "'to'")
        if self.is_("sym", "?"):
            self.take()
            self.add(keyword, line, address=site, unknown=True)
            return
        targets = [self.address()]
        while self.is_("sym", ","):
            self.take()
            targets.append(self.address())
        self.add(keyword, line, address=site, targets=tuple(targets))

    def memory(self, line: int) -> None:
        if self.is_("kw", "access"):  # memory access INST LOW .. HIGH [in ...];
            self.take()
            address = self.address()
            self.address()
            self.expect("dotdot", what="'..'")
            self.address()
            self.add("no effect", line, address=address, context=self.opt_in(), words="memory access")
            return
        self.expect("type", what="'access' or a type (int8 ... uint64) after 'memory'")
        address = self.address()
        self.expect("sym", "=", "'='")
        self.value()
        self.add("no effect", line, address=address, words="memory")

    def value(self) -> None:
        """OTAWA's ``value``: ADDRESS, ``[ ADDRESS .. ADDRESS ]`` or ``( ADDRESS , INT , INT )``."""
        if self.is_("sym", "["):
            self.take()
            self.address()
            self.expect("dotdot", what="'..'")
            self.address()
            self.expect("sym", "]", "']'")
        elif self.is_("sym", "("):
            self.take()
            self.address()
            for _ in range(2):
                self.expect("sym", ",", "','")
                self.integer()
            self.expect("sym", ")", "')'")
        else:
            self.address()

    def id_or_address(self) -> F4Address:
        """OTAWA's ``id_or_address``: an integer or a label, no offset."""
        if self.is_("int"):
            return F4Address(None, self.integer(allow_unsigned=True))
        return F4Address(self.expect("string", what="a function (integer or \"label\")").value, 0)

    def address(self) -> F4Address:
        """OTAWA's ``full_address``: INTEGER, "label", "label" + INTEGER, "label" - INTEGER, "file":INTEGER."""
        if self.is_("int"):
            return F4Address(None, self.integer(allow_unsigned=True))
        label = self.expect("string", what="an address (integer, \"label\" [+|- offset] or \"file\":line)").value
        if self.is_("sym", "+") or self.is_("sym", "-"):
            sign = 1 if self.take().value == "+" else -1
            return F4Address(label, sign * self.integer())
        if self.is_("sym", ":"):
            self.take()
            return F4Address(label, 0, line=self.integer())
        return F4Address(label, 0)

    def integer(self, allow_unsigned: bool = False) -> int:
        token = self.expect("int", what="an integer")
        # OTAWA's lexer: decimal/octal/binary through strtol into an int, hex through strtoul into an int
        limit = 0xFFFFFFFF if allow_unsigned and token.text[:2] in ("0x", "0X") else INT_MAX
        if token.value > limit:
            raise _Syntax(token, f"an integer OTAWA can hold (at most {limit:#x})")
        return token.value


_STATEMENTS = ("loop", "checksum", "return", "noreturn", "no", "nocall", "noblock", "doinline", "noinline",
               "inlining-on", "inlining-off", "force", "ignorecontrol", "ignore", "ignoreseq", "multibranch",
               "multicall", "preserve", "memory", "register", "library")


class _Syntax(Exception):
    def __init__(self, token: _Token, expected: str):
        super().__init__(expected)
        self.token, self.expected = token, expected


def parse_f4_statements(text: str | Path, source: str | None = None) -> list[F4Statement]:
    """The statements of F4 ``text`` (or of the file, given a ``Path``), strictly checked; ``source`` names it.

    ``?`` bounds are returned (``unknown``), not refused: mkff's template has them.
    """
    text, name = _read(text, source)
    problems: list[str] = []
    tokens = _tokens(text, name, problems)
    previous, run = None, ""
    for token in tokens:  # one message per run of characters OTAWA's lexer refuses
        if token.kind == "bad" and previous is not None and previous.kind == "bad" and previous.line == token.line:
            run += token.text
            problems[-1] = f"{name}:{token.line}: {run!r} is not F4"
        elif token.kind == "bad":
            run = token.text
            problems.append(f"{name}:{token.line}: {run!r} is not F4")
        previous = token
    statements = _Parser([t for t in tokens if t.kind != "bad"], name, problems).parse() if not problems else []
    if problems:
        raise FlowFactFormatError(problems, f"{name}: not F4 as Assay reads it")
    return statements


def parse_f4(text: str | Path, source: str | None = None, symbols: Mapping[str, int] | None = None,
             locations: "ElfLocations | None" = None, root: str | None = None) -> FlowFacts:
    """Read F4 ``text`` (or the file, given a ``Path``) into ``FlowFacts``; ``source`` names it in messages.

    Locations are resolved with ``locations`` (``wcet.fflocate.ElfLocations``:
    symbols, DWARF lines, call contexts from its analysed function) or, without
    it, with ``symbols`` (function name -> address, Thumb bit clear) alone;
    a form that needs what is not given is a problem. ``root`` (the analysed
    function) lets a context ``in "root" / @SITE / ...`` be read without the
    ELF. Every problem is reported at once in one ``FlowFactFormatError``:
    syntax outside the grammar, a loop left at ``?`` (listing every unbounded
    loop), an unresolved ``multicall ... to ?``, a location that does not
    resolve, a statement Assay's analyzer does not apply.
    """
    text, name = _read(text, source)
    statements = parse_f4_statements(text, name)
    problems: list[str] = []
    resolve = _Resolver(name, problems, symbols, locations, root)
    library_from = next((i for i, s in enumerate(statements) if s.kind == "library"), len(statements))
    facts = _Collected()
    checksum = None
    for index, statement in enumerate(statements):  # everything but loops: loops by line need the CFGs
        resolve.library = index > library_from
        line, address = statement.line, statement.address
        if statement.kind == "checksum":
            checksum = (statement.name, statement.value)
        elif statement.kind in ("multicall", "multibranch"):
            if statement.unknown:
                what = "indirect call" if statement.kind == "multicall" else "indirect jump"
                resolve.note(line, f"{what} at {address} has unknown targets ('to ?')")
                continue
            facts.multi(statement.kind, resolve.address(address, line, statement.kind),
                        [resolve.address(t, line) for t in statement.targets])
        elif statement.kind in ("ignorecontrol", "return", "preserve", "ignoreseq", "force branch", "force call"):
            value = resolve.address(address, line, "control" if statement.kind != "preserve" else "address")
            if value is not None:
                facts.at_address(statement.kind, value)
        elif statement.kind == "ignore entry":
            facts.ignore_entry.add(statement.name)
        # "no effect" (the inlining policy, noblock, memory access, register, memory TYPE): each only removes
        # paths or narrows values, so without it the bound covers more executions, never fewer
        elif statement.kind in ("noreturn", "nocall"):
            function = resolve.function_name(address, line)
            if function is not None:
                getattr(facts, statement.kind).add(function)
    base = facts.flow_facts()
    for index, statement in enumerate(statements):
        resolve.library = index > library_from
        if statement.kind != "loop":
            continue
        line, address = statement.line, statement.address
        if statement.unknown:
            resolve.note(line, f"loop {address} has no bound ('?')")
            continue
        maximum = statement.max if statement.max is not None else statement.total  # per entry <= per run
        if maximum is None:  # 'min' alone: OTAWA records no bound, and the loop stays unbounded
            continue
        where = resolve.loop(address, line, base)
        if where is None:
            continue
        for context in resolve.contexts(statement.context, where, line, base):
            facts.loops.append(LoopBound(function=where[0], offset=where[1], max=maximum, total=statement.total,
                                         context=context, source=where[2], origin=f"user:{name}"))
    if problems:
        raise FlowFactFormatError(problems, f"{name}: unusable flow facts")
    return facts.flow_facts()._replace(checksum=checksum)


class _Collected:
    """The facts of one file as they are read."""

    __slots__ = ("loops", "multicall", "multibranch", "noreturn", "nocall", "ignorecontrol", "preserve", "returns",
                 "ignoreseq", "forced", "ignore_entry")

    def __init__(self) -> None:
        self.loops: list[LoopBound] = []
        self.multicall: dict[int, tuple[int, ...]] = {}
        self.multibranch: dict[int, tuple[int, ...]] = {}
        self.noreturn: set[str] = set()
        self.nocall: set[str] = set()
        self.ignorecontrol: set[int] = set()
        self.preserve: set[int] = set()
        self.returns: set[int] = set()
        self.ignoreseq: set[int] = set()
        self.forced: dict[int, str] = {}
        self.ignore_entry: set[str] = set()

    def at_address(self, kind: str, address: int) -> None:
        """A fact about the instruction at ``address``: ``kind`` is the statement (F4 words, FFX tag)."""
        if kind.startswith("force "):
            self.forced[address] = kind.split()[1]
        else:
            {"ignorecontrol": self.ignorecontrol, "return": self.returns, "preserve": self.preserve,
             "ignoreseq": self.ignoreseq}[kind].add(address)

    def multi(self, kind: str, site: int | None, targets: list[int | None]) -> None:
        """Targets of an indirect call or jump; OTAWA adds to those already given for the site."""
        targets = [t for t in targets if t is not None]
        if site is not None and targets:
            table = getattr(self, kind)
            table[site] = tuple(dict.fromkeys([*table.get(site, ()), *targets]))

    def flow_facts(self) -> FlowFacts:
        return FlowFacts(loops=tuple(self.loops), multicalls=dict(self.multicall),
                         multibranches=dict(self.multibranch), noreturn=frozenset(self.noreturn),
                         nocall=frozenset(self.nocall), ignorecontrol=frozenset(self.ignorecontrol),
                         returns=frozenset(self.returns), preserve=frozenset(self.preserve),
                         ignoreseq=frozenset(self.ignoreseq), forced=dict(self.forced),
                         ignore_entry=frozenset(self.ignore_entry))


class _Resolver:
    """Turns the locations of one file into addresses and contexts; each failure is one problem with the
    file and line. ``library`` (after F4 ``library;``): a label the ELF does not have drops its fact
    silently, as in OTAWA."""

    def __init__(self, name: str, problems: list[str], symbols: Mapping[str, int] | None,
                 locations: "ElfLocations | None", root: str | None):
        self.name, self.problems, self.locations = name, problems, locations
        self.symbols = locations.symbols if locations is not None else symbols
        self.root = root if root is not None else (locations.root if locations is not None else None)
        self.library = False
        self.outermost_is_root = False  # FFX read without the analysed function: its outermost <function>

    def note(self, line: int, message: str) -> None:
        self.problems.append(f"{self.name}:{line}: {message}")

    def _elf(self, where: F4Address, line: int) -> "ElfLocations | None":
        if self.locations is None:
            self.note(line, f"{where} needs the ELF's DWARF line table to resolve (give the ELF: python -m wcet, "
                            "assay wcet --elf)")
        return self.locations

    def address(self, where: F4Address, line: int, use: str = "address") -> int | None:
        """The absolute address of ``where``; for a source line, the one instruction of kind ``use``
        (``wcet.fflocate.INSTRUCTIONS``) on it, or its first address."""
        from wcet.fflocate import INSTRUCTIONS, LocationError

        if where.line is not None:
            locations = self._elf(where, line)
            if locations is None:
                return None
            try:
                if use in INSTRUCTIONS:
                    return locations.instruction_on_line(where.label, where.line, use)
                return locations.line_start(where.label, where.line)
            except LocationError as exc:
                self.note(line, str(exc))
                return None
        if where.label is None:
            return where.offset
        if self.symbols is None:
            self.note(line, f"label \"{where.label}\" needs the ELF's symbols to resolve")
            return None
        if where.label not in self.symbols:
            if not self.library:
                self.note(line, f"label \"{where.label}\" is not a function symbol of the ELF")
            return None
        return self.symbols[where.label] + where.offset

    def function_name(self, where: F4Address, line: int) -> str | None:
        """The function ``where`` starts (a label alone needs no symbols)."""
        if where.label is not None and where.offset == 0 and where.line is None:
            if self.symbols is not None and where.label not in self.symbols:
                if not self.library:
                    self.note(line, f"label \"{where.label}\" is not a function symbol of the ELF")
                return None
            return where.label
        if self.symbols is None and where.line is None:
            self.note(line, f"{where} names a function by address, which needs the ELF's symbols")
            return None
        wanted = self.address(where, line)
        if wanted is None:
            return None
        names = sorted(n for n, a in (self.symbols or {}).items() if a == wanted)
        if not names:
            self.note(line, f"no function starts at {wanted:#x}")
        return names[0] if names else None

    def loop(self, where: F4Address, line: int, facts: FlowFacts) -> tuple[str | None, int, tuple | None] | None:
        """(function or None, offset or absolute header, source line or None) of a loop header."""
        from wcet.fflocate import LocationError

        if where.line is not None:
            locations = self._elf(where, line)
            if locations is None:
                return None
            try:
                return (*locations.loop_on_line(where.label, where.line, facts), (where.label, where.line))
            except LocationError as exc:
                self.note(line, str(exc))
                return None
        if where.label is not None and where.offset >= 0:  # "fn" + N: the analyzer needs no symbol table
            if self.symbols is not None and where.label not in self.symbols:
                if not self.library:
                    self.note(line, f"label \"{where.label}\" is not a function symbol of the ELF")
                return None
            return where.label, where.offset, None
        value = self.address(where, line)
        return None if value is None else (None, value, None)

    def contexts(self, steps: tuple[tuple[str, F4Address], ...], loop: tuple, line: int,
                 facts: FlowFacts) -> list[tuple[int, ...]]:
        """The exact call-site contexts (``LoopBound.context``) a fact given in context ``steps`` applies in
        (``wcet.fflocate``); [()] for every context; without the ELF, ``_contexts_without_elf``."""
        from wcet.fflocate import CALL, FUNCTION, LocationError, Step

        if not steps:
            return [()]
        function = loop[0]
        if function is None and self.locations is not None:
            owner = self.locations.function_of(loop[1])
            function = owner[0] if owner else None
        on_every_chain = {F4Address(name, 0) for name in (self.root, function) if name is not None}
        if all(kind == "function" and where in on_every_chain for kind, where in steps):
            return [()]  # the analysed function and the loop's own function are on every chain to the loop
        if self.locations is None or self.root is None:
            return self._contexts_without_elf(steps, function, line)
        resolved = []
        for kind, where in steps:
            value = self.address(where, line, "call" if kind == "call" else "address")
            if value is None:
                return []
            resolved.append(Step(CALL if kind == "call" else FUNCTION, value))
        if function is None:
            self.note(line, "the loop is in no function symbol: its call context cannot be resolved")
            return []
        try:
            return self.locations.contexts(tuple(resolved), function, facts)
        except (LocationError, WcetError) as exc:
            self.note(line, str(exc))
            return []

    def _contexts_without_elf(self, steps: tuple[tuple[str, F4Address], ...], function: str | None,
                              line: int) -> list[tuple[int, ...]]:
        """A context read without the call graph: FUNCTION root, then CALL sites by address, each optionally
        followed by its callee (taken as written), the last step possibly the loop's own function. The
        root is the analysed function if known, else the first step when call sites follow it (a wrong
        guess only makes the exact chain one the analysis never meets) or, in FFX, the outermost
        <function> (the form Assay writes)."""
        (kind, first), rest = steps[0], steps[1:]
        calls = any(kind == "call" for kind, _ in rest)
        root = self.root if self.root is not None or not (self.outermost_is_root or calls) else first.label
        if root is None or kind != "function" or first != F4Address(root, 0):
            self.note(line, f"a call context from {first} needs the ELF to resolve"
                      + (f" (the analysed function is {self.root})" if self.root else ""))
            return []
        sites, previous = [], "function"
        for index, (kind, where) in enumerate(rest):
            plain = where.line is None and (where.label is None if kind == "call" else not where.offset)
            callee = kind == "function" and (previous == "call" or (index == len(rest) - 1 and
                                                                    where.label == function))
            if not plain or (kind == "function" and not callee):
                self.note(line, f"the call context step {where} needs the ELF and the analysed function to "
                                "resolve (python -m wcet, assay wcet --elf)")
                return []
            if kind == "call":
                sites.append(where.offset)
            previous = kind
        return [tuple(sites)]


def _read(source: Path | str, name: str | None) -> tuple[str, str]:
    """(text, name for messages): a ``Path`` is read; a ``str`` is the text itself."""
    if isinstance(source, Path):
        try:
            raw = source.read_bytes()
        except OSError as exc:
            raise FlowFactFormatError([f"{source}: cannot read ({exc.strerror})"]) from None
        try:
            return raw.decode("utf-8"), name or source.name
        except UnicodeDecodeError:
            raise FlowFactFormatError([f"{source}: not UTF-8 text"]) from None
    return source, name or "<text>"


# ---------------------------------------------------------------- FFX writer


def write_ffx(facts: FlowFacts, elf: Path | None = None, entry: str | None = None,
              call_targets: Mapping[int, str] | None = None, header: Iterable[str] = ()) -> str:
    """The FFX text of ``facts``.

    Context-free loops go in a ``<function>`` per function. A loop with a call
    context is written inside ``<function label=ENTRY>`` and nested ``<call
    address=SITE><function label=CALLEE>`` elements, as OTAWA reads them
    (shared/otawa/arm7tdmi/dense-context.ffx): ``entry`` names the analysed
    function; the function each call site calls comes from ``call_targets`` or,
    failing that, from decoding the call in ``elf`` (the last site's callee is
    the loop's function).
    ``multicall``, ``multibranch`` and ``ignorecontrol`` facts are top-level
    elements (module docstring). A contextual bound without ``entry`` raises
    ``FlowFactFormatError``.
    """
    root = entry
    header = [*_header(elf, entry), *header]
    if elf is not None and any(len(loop.context) > 1 for loop in facts.loops):
        call_targets = {**_call_targets(elf, {site for loop in facts.loops for site in loop.context[:-1]}),
                        **(call_targets or {})}
    problems: list[str] = []
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    out += [f"<!-- {_one_line(text).replace('--', '- -')} -->" for text in header]
    out.append("<flowfacts>")
    for name in sorted(facts.noreturn):
        out.append(f"\t<noreturn label={quoteattr(name)}/>")
    for name in sorted(facts.nocall):
        out.append(f"\t<nocall label={quoteattr(name)}/>")
    out += [f"\t<ignore-entry name={quoteattr(name)}/>" for name in sorted(facts.ignore_entry)]
    for tag, addresses in (("ignorecontrol", facts.ignorecontrol), ("return", facts.returns),
                           ("ignoreseq", facts.ignoreseq)):
        out += [f'\t<{tag} address="{address:#x}"/>' for address in sorted(addresses)]
    for what, addresses in (("preserve", facts.preserve), ("force", facts.forced)):
        if addresses:
            problems.append(f"{what} (" + ", ".join(f"{a:#x}" for a in sorted(addresses)) + ") has no FFX form; "
                            "write F4")
    for tag, table in (("multicall", facts.multicalls), ("multibranch", facts.multibranches)):
        for site in sorted(table):
            if not table[site]:
                problems.append(f"{tag} at {site:#x} has no target")
            out.append(f'\t<{tag} address="{site:#x}">')
            out += [f'\t\t<target address="{target:#x}"/>' for target in table[site]]
            out.append(f"\t</{tag}>")
    # tree: function name -> {"loops": [...], "calls": {site: (callee, subtree)}}
    free: dict[str | None, list[LoopBound]] = {}
    contextual = {"loops": [], "calls": {}}
    for loop in facts.loops:
        if not loop.context:
            free.setdefault(loop.function, []).append(loop)
            continue
        if root is None:
            problems.append(f"loop {loop.label()}: a call-context bound needs the analysed function (entry)")
            continue
        if loop.function is None:
            problems.append(f"loop {loop.label()}: a call-context bound needs a function-relative address")
            continue
        node = contextual
        for depth, site in enumerate(loop.context):
            last = depth == len(loop.context) - 1
            callee = loop.function if last else (call_targets or {}).get(site)
            if callee is None:
                problems.append(f"loop {loop.label()}: which function the call at {site:#x} calls is not given")
                break
            entry = node["calls"].setdefault(site, (callee, {"loops": [], "calls": {}}))
            if entry[0] != callee:
                problems.append(f"call at {site:#x} calls both {entry[0]} and {callee}")
                break
            node = entry[1]
        else:
            node["loops"].append(loop)
    for function in sorted(free, key=lambda f: (f is None, f or "")):
        loops = sorted(free[function], key=lambda l: l.offset)
        if function is None:
            out += [f"\t{_ffx_loop(loop, problems)}" for loop in loops]
            continue
        out.append(f"\t<function label={quoteattr(function)}>")
        out += [f"\t\t{_ffx_loop(loop, problems)}" for loop in loops]
        out.append("\t</function>")
    if contextual["calls"]:
        out.append(f"\t<function label={quoteattr(root)}>")
        _ffx_calls(contextual, 2, out, problems)
        out.append("\t</function>")
    out.append("</flowfacts>")
    if problems:
        raise FlowFactFormatError(problems, "cannot write FFX")
    return "\n".join(out) + "\n"


def _call_targets(elf: Path, sites: set[int]) -> dict[int, str]:
    """The function each direct call at ``sites`` calls, decoded from ``elf``."""
    from wcet.armcode import load_code

    code = load_code(elf)
    targets = {}
    for site in sites:
        try:
            insn = code.decode(site)
        except WcetError:
            continue
        operands = getattr(insn, "operands", [])
        if insn.mnemonic.startswith("bl") and operands and operands[0].type == 2:  # ARM_OP_IMM
            names = code.names_at(operands[0].imm & ~1)
            if names:
                targets[site] = names[0]
    return targets


def quoteattr(text: str) -> str:
    """``xml.sax.saxutils.quoteattr``, imported when an FFX file is written (it pulls in ``urllib``, which
    reading facts and bounding an ELF do without)."""
    from xml.sax import saxutils

    return saxutils.quoteattr(text)


def _ffx_calls(node: dict, depth: int, out: list[str], problems: list[str]) -> None:
    tabs = "\t" * depth
    for site in sorted(node["calls"]):
        callee, subtree = node["calls"][site]
        out.append(f'{tabs}<call address="{site:#x}">')
        out.append(f"{tabs}\t<function label={quoteattr(callee)}>")
        out += [f"{tabs}\t\t{_ffx_loop(loop, problems)}" for loop in sorted(subtree["loops"], key=lambda l: l.offset)]
        _ffx_calls(subtree, depth + 2, out, problems)
        out.append(f"{tabs}\t</function>")
        out.append(f"{tabs}</call>")


def _ffx_loop(loop: LoopBound, problems: list[str]) -> str:
    if loop.max < 0 or (loop.total is not None and loop.total < 0):
        problems.append(f"loop {loop.label()}: negative bound")
    where = (f'label={quoteattr(loop.function)} offset="{loop.offset:#x}"' if loop.function
             else f'address="{loop.offset:#x}"')
    total = f' totalcount="{loop.total}"' if loop.total is not None else ""
    notes = [f"{loop.source[0]}:{loop.source[1]}" if loop.source else "", loop.origin, loop.justification]
    comment = "; ".join(_one_line(n).replace("--", "- -") for n in notes if n)
    return f'<loop {where} maxcount="{loop.max}"{total}/>' + (f" <!-- {comment} -->" if comment else "")


# ---------------------------------------------------------------- FFX parser


class _Element:
    __slots__ = ("tag", "attributes", "line", "children")

    def __init__(self, tag: str, attributes: dict[str, str], line: int):
        self.tag, self.attributes, self.line = tag, attributes, line
        self.children: list[_Element] = []


def _xml_tree(text: str, name: str) -> _Element:
    import xml.parsers.expat  # here: only .ffx files are XML

    parser = xml.parsers.expat.ParserCreate()
    stack: list[_Element] = []
    top: list[_Element] = []

    def start(tag, attributes):
        element = _Element(tag, dict(attributes), parser.CurrentLineNumber)
        (stack[-1].children if stack else top).append(element)
        stack.append(element)

    def end(tag):
        stack.pop()

    def characters(data):
        if data.strip():
            raise FlowFactFormatError([f"{name}:{parser.CurrentLineNumber}: text {data.strip()!r} outside any "
                                       "attribute"], f"{name}: not FFX as Assay reads it")

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(text.encode("utf-8"), True)
    except xml.parsers.expat.ExpatError as exc:
        raise FlowFactFormatError([f"{name}:{exc.lineno}: not well-formed XML ({xml.parsers.expat.ErrorString(exc.code)})"],
                                  f"{name}: not FFX") from None
    return top[0]


def parse_ffx(text: str | Path, source: str | None = None, root: str | None = None,
              locations: "ElfLocations | None" = None, symbols: Mapping[str, int] | None = None) -> FlowFacts:
    """Read FFX ``text`` (or the file, given a ``Path``) into ``FlowFacts``; ``source`` names it.

    The elements and locations of OTAWA's ``FlowFactLoader`` (module
    docstring); attributes it does not read (oRange's ``executed``,
    ``loopId``, ``exact``, ...) are ignored as it ignores them. Locations are
    resolved with ``locations`` (``wcet.fflocate.ElfLocations``) or, without
    it, with ``symbols`` (function name -> address) if given: labels with
    offsets, addresses, and call contexts from the outermost ``<function>``,
    taken to be the analysed function (``root``, if given, must be it).
    """
    text, name = _read(text, source)
    document = _xml_tree(text, name)
    if document.tag != "flowfacts":
        raise FlowFactFormatError([f"{name}:{document.line}: the root element is <{document.tag}>, not <flowfacts>"],
                                  f"{name}: not FFX")
    problems: list[str] = []
    resolve = _Resolver(name, problems, symbols, locations, root)
    resolve.outermost_is_root = True
    facts = _Collected()
    loops: list[tuple[_Element, tuple]] = []  # (element, context steps): read once the other facts are known

    def integer(element: _Element, key: str, signed: bool = True) -> int | None:
        raw = element.attributes.get(key)
        if raw is None:
            return None
        value = _ffx_integer(raw.strip(), signed)
        if value is None:
            resolve.note(element.line, f"{key}={raw!r} is not an integer")
        return value

    def location(element: _Element, path: _Steps) -> F4Address | None:
        """OTAWA's ``scanAddress``: symbol, address, label [+ offset], offset (from the enclosing function or
        call), source + line; None after noting why not."""
        attributes = element.attributes
        if "symbol" in attributes:
            return F4Address(attributes["symbol"], 0)
        if "address" in attributes:
            value = integer(element, "address", signed=False)
            return None if value is None else F4Address(None, value)
        if "label" in attributes:
            offset = integer(element, "offset") if "offset" in attributes else 0
            return None if offset is None else F4Address(attributes["label"], offset)
        if "offset" in attributes:
            offset = integer(element, "offset")
            if offset is None:
                return None
            if not path:
                resolve.note(element.line, "'offset' outside any addressed element")
                return None
            enclosing = path[-1][1]
            if enclosing.line is not None:
                base = resolve.address(enclosing, element.line)
                return None if base is None else F4Address(None, base + offset)
            return enclosing._replace(offset=enclosing.offset + offset)
        if "source" in attributes:
            line = integer(element, "line")
            if "line" not in attributes:
                resolve.note(element.line, "a 'source' without a 'line'")
            return None if line is None else F4Address(attributes["source"], 0, line=line)
        resolve.note(element.line, f"<{element.tag}> without a location (address, label [offset], symbol, offset "
                                   "or source and line)")
        return None

    def body(element: _Element, path: _Steps) -> None:
        """OTAWA's ``scanXBody``: the top level (and a nested <flowfacts>)."""
        for child in element.children:
            tag = child.tag
            if tag in ("loop", "function"):
                content_element(child, path)
            elif tag == "flowfacts":
                body(child, path)
            elif tag in ("noreturn", "nocall", "return", "ignorecontrol"):
                where = location(child, path)
                if where is None:
                    continue
                if tag in ("noreturn", "nocall"):
                    function = resolve.function_name(where, child.line)
                    if function is not None:
                        (facts.noreturn if tag == "noreturn" else facts.nocall).add(function)
                else:
                    value = resolve.address(where, child.line, "control")
                    if value is not None:
                        (facts.returns if tag == "return" else facts.ignorecontrol).add(value)
            elif tag in ("multicall", "multibranch"):
                where = location(child, path)
                targets = []
                for target in child.children:
                    if target.tag != "target":
                        resolve.note(target.line, f"<{tag}> holds <target> elements, not <{target.tag}>")
                        continue
                    at = location(target, path)
                    targets.append(None if at is None else resolve.address(at, target.line))
                if where is not None:
                    if not child.children:
                        resolve.note(child.line, f"<{tag}> at {where} has no target")
                    facts.multi(tag, resolve.address(where, child.line, tag), targets)
            elif tag == "ignoreseq":
                where = location(child, path)
                value = None if where is None else resolve.address(where, child.line, "control")
                if value is not None:
                    facts.at_address(tag, value)
            elif tag == "ignore-entry":
                if not child.attributes.get("name"):
                    resolve.note(child.line, "<ignore-entry> without a name")
                else:
                    facts.ignore_entry.add(child.attributes["name"])
            elif tag not in _FFX_NO_EFFECT:
                resolve.note(child.line, f"<{tag}> is not an FFX element OTAWA reads at the top level")


    def content_element(element: _Element, path: _Steps) -> None:
        """One element of a function's, loop's or call's content (OTAWA's ``scanXContent``)."""
        tag = element.tag
        if tag == "loop":
            loops.append((element, path))
            content(element, path)
        elif tag == "function":
            if "name" in element.attributes:
                where = F4Address(element.attributes["name"], 0)
            else:
                where = location(element, path)
            if where is not None:
                content(element, (*path, ("function", where)))
        elif tag == "call":
            where = location(element, path)
            if where is None:
                return
            inner = (*path, ("call", where))
            functions = [child for child in element.children if child.tag == "function"]
            if functions:  # <call LOCATION><function .../>...</call>
                for child in element.children:
                    if child.tag != "function":
                        resolve.note(child.line, f"<{child.tag}> inside a <call> that holds <function> elements")
                    else:
                        content_element(child, inner)
                return
            if "name" in element.attributes:  # the old form: the call's content, its callee named
                inner = (*inner, ("function", F4Address(element.attributes["name"], 0)))
            content(element, inner)
        elif tag in ("conditional", "condition", "case", "iteration"):
            content(element, path)
        elif tag not in _FFX_NO_EFFECT:
            resolve.note(element.line, f"<{tag}> is not an FFX element OTAWA reads inside a function, loop or call")

    def content(element: _Element, path: _Steps) -> None:
        for child in element.children:
            content_element(child, path)

    body(document, ())
    base = facts.flow_facts()
    for element, path in loops:
        bounds = {key: integer(element, key) if element.attributes.get(key, "").strip() != "NOCOMP" else None
                  for key in ("maxcount", "totalcount", "mincount")}
        where = location(element, path)
        maximum = bounds["maxcount"] if bounds["maxcount"] is not None else bounds["totalcount"]
        if where is None or maximum is None:  # no bound: OTAWA warns and goes on; the loop stays unbounded
            continue
        loop = resolve.loop(where, element.line, base)
        if loop is None:
            continue
        for context in resolve.contexts(path, loop, element.line, base):
            facts.loops.append(LoopBound(function=loop[0], offset=loop[1], max=maximum, total=bounds["totalcount"],
                                         context=context, source=loop[2], origin=f"user:{name}"))
    if problems:
        raise FlowFactFormatError(problems, f"{name}: not FFX as Assay reads it")
    return facts.flow_facts()


# FFX elements read and given no effect: the inlining policy, noblock, value and memory hints (Assay has no value
# or data-cache analysis) and infeasible paths; each only removes paths or narrows values, so without it the
# bound covers more executions, never fewer
_FFX_NO_EFFECT = ("doinline", "noinline", "inlining-on", "inlining-off", "noblock", "mem-access", "mem-set",
                  "reg-set", "state", "not-all", "edge")


def _ffx_integer(raw: str, signed: bool) -> int | None:
    match = re.fullmatch(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", raw)
    if not match or (match.group(1) == "-" and not signed):
        return None
    sign = -1 if match.group(1) == "-" else 1
    return sign * _integer(match.group(2))
