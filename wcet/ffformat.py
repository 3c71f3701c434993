"""OTAWA's two flow-fact file formats, written and read: F4 (``.ff``) and FFX (``.ffx``).

Both map to and from ``wcet.facts.FlowFacts``. The formats are OTAWA's own
(OTAWA 1.2's ``FlowFactLoader``; ../shared/otawa/README.md records which forms
real OTAWA runs accepted). The parsers are deliberately strict: they accept the
subset of OTAWA's grammar that Assay writes and that ``FlowFacts`` can hold,
tokenised exactly as OTAWA's lexer does, and reject everything else with the
file and line. A file Assay writes therefore always parses here, and a file
that parses here is syntactically one OTAWA reads.

F4 (one statement per ``;``; ``//`` and ``/* */`` comments; spaces, tabs and
newlines only)::

    checksum "dense.elf" 0x5c167506;
    loop "dense" + 0xa0 8;                  // bound: back edges per entry of the loop
    loop 0x80dc max 8 total 64;             // absolute header address; total per run of the root
    loop "layer" + 0x52 ?;                  // unknown bound (mkff's template): an error here
    multicall 0x8114 to 0x803c, 0x8000;     // targets of an indirect call
    multibranch 0x8018 to 0x8040, 0x804c;   // targets of an indirect jump (a jump table)
    noreturn "abort";   nocall "trace";   ignorecontrol 0x8040;

Integers are decimal, ``0`` octal, ``0x`` hex or ``0b`` binary and must fit
OTAWA's C ``int``. Addresses are an integer, ``"label"``, ``"label" + N`` or
``"label" - N``; forms that need the ELF's symbols (a label where an absolute
address is needed, ``"label" - N``) are resolved with ``symbols`` if given and
are otherwise an error. ``multicall`` is for calls only and ``multibranch`` for
jumps only, as OTAWA applies them (``CALL_TARGET``, ``BRANCH_TARGET``).
Contextual F4 bounds (``loop ... in "f" / "g";``) name
calling *functions*, which ``FlowFacts`` cannot represent exactly (its
contexts are call sites), so they are rejected; FFX ``<call>`` nesting gives
call-site contexts. ``return``, ``preserve`` and OTAWA's other statements are
rejected as outside the subset.

FFX: XML rooted at ``<flowfacts>``; ``<function label=...>`` holds ``<loop
label=... offset=... maxcount=... totalcount=...>`` (loops may nest; nesting
does not change a bound's meaning) and ``<call address=CALL_SITE>``, which
holds the callee's ``<function>``: a loop inside calls is bounded only in that
call context (``LoopBound.context``: the call sites from the outermost
``<function>``, the analysis root, down). ``<noreturn label=...>``, ``<nocall
label=...>``, ``<ignorecontrol address=...>`` and ``<multicall address=SITE>`` /
``<multibranch address=SITE>`` holding ``<target address=.../>`` elements may
appear at top level (OTAWA's ``FlowFactLoader::scanMultiCall`` and
``scanMultiBranch``, statinf-otawa/otawa master).

Per-execution target sequences (``FlowFacts.sequences``) and the facts of each
execution (``FlowFacts.executions``: a V1 layer's own loop bounds) have no form
in either format: OTAWA cannot use them. ``write_f4`` lists them in comments.

``otawa_checksum(elf)`` is the value mkff writes on the ``checksum`` line:
elm's Fletcher checksum (``elm/checksum/Fletcher.h``) of the whole file.
"""

from __future__ import annotations

import dataclasses
import re
import xml.parsers.expat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wcet.errors import WcetError
from wcet.facts import FlowFacts, LoopBound

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
    return loops, multicalls, multibranches, facts.noreturn, facts.nocall, facts.ignorecontrol, facts.checksum


# ---------------------------------------------------------------- F4 writer


def write_f4(facts: FlowFacts, elf: Path | None = None, entry: str | None = None,
             header: Iterable[str] = ()) -> str:
    """The F4 text of ``facts``.

    ``elf`` and ``entry`` (the analysed function) go into a header comment;
    without a checksum in ``facts``, the ``checksum`` line is computed from
    ``elf``. Loops are grouped by function, in address order, each with a
    comment giving its source line, origin and justification when known.
    ``header`` lines become more ``//`` comments. Contextual bounds cannot be
    written in F4 (see the module docstring): they raise ``FlowFactFormatError``.
    """
    header = [*_header(elf, entry), *header]
    if facts.checksum is None and elf is not None:
        facts = dataclasses.replace(facts, checksum=(Path(elf).name, otawa_checksum(elf)))
    problems = []
    lines = [f"// {_one_line(text)}" for text in header]
    if facts.checksum is not None:
        name, value = facts.checksum
        lines.append(f"checksum {_f4_string(name, problems)} {value:#010x};")
    for name in sorted(facts.noreturn):
        lines.append(f"noreturn {_f4_string(name, problems)};")
    for name in sorted(facts.nocall):
        lines.append(f"nocall {_f4_string(name, problems)};")
    for address in sorted(facts.ignorecontrol):
        lines.append(f"ignorecontrol {_f4_int(address, problems)};")
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
        if loop.context:
            problems.append(f"loop {loop.label()}: a call-context bound cannot be written in F4; write FFX")
            continue
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
        lines.append(f"loop {where} {count};" + (f" // {comment}" if comment else ""))
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

_KEYWORDS = ("access", "call", "checksum", "control", "doinline", "entry", "ignore", "ignorecontrol", "ignoreseq",
             "in", "inlining-off", "inlining-on", "int8", "int16", "int32", "int64", "library", "loop", "max",
             "memory", "multibranch", "multicall", "nocall", "noinline", "preserve", "no", "noreturn", "return",
             "seq", "to", "total", "uint8", "uint16", "uint32", "uint64")
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
    ("string", re.compile(r'"')),
    ("int", re.compile(r"[1-9][0-9]*")),
    ("int", re.compile(r"0[0-7]*")),
    ("int", re.compile(r"0[xX][0-9a-fA-F]+")),
    ("int", re.compile(r"0[bB][01]+")),
]


@dataclass(frozen=True)
class _Token:
    kind: str  # "kw", "sym", "int", "string", "dotdot", "bad", "eof"
    value: object
    line: int
    text: str


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


@dataclass(frozen=True)
class F4Address:
    """An F4 address as written: an integer, or a label plus a signed offset."""

    label: str | None
    offset: int  # the integer itself when label is None

    def __str__(self) -> str:
        if self.label is None:
            return f"{self.offset:#x}"
        if self.offset == 0:
            return f'"{self.label}"'
        sign = "+" if self.offset >= 0 else "-"
        return f'"{self.label}" {sign} {abs(self.offset):#x}'


@dataclass(frozen=True)
class F4Statement:
    """One F4 statement: ``kind`` is loop, checksum, noreturn, nocall, ignorecontrol, multicall or multibranch."""

    kind: str
    line: int
    address: F4Address | None = None
    max: int | None = None  # loop; None with total None: '?'
    total: int | None = None
    unknown: bool = False  # loop ... ?  /  multicall ... to ?
    targets: tuple[F4Address, ...] = ()
    name: str | None = None  # checksum file name
    value: int | None = None  # checksum value


@dataclass
class _Parser:
    tokens: list[_Token]
    name: str
    problems: list[str]
    position: int = 0
    statements: list[F4Statement] = field(default_factory=list)

    def peek(self) -> _Token:
        return self.tokens[self.position]

    def take(self) -> _Token:
        token = self.tokens[self.position]
        if token.kind != "eof":
            self.position += 1
        return token

    def is_(self, kind: str, value=None) -> bool:
        token = self.peek()
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

    def statement(self) -> None:
        token = self.peek()
        if token.kind != "kw" or token.value not in ("loop", "checksum", "noreturn", "nocall", "no",
                                                          "ignorecontrol", "ignore", "multicall", "multibranch"):
            expected = "a statement (loop, checksum, noreturn, nocall, ignorecontrol, multicall, multibranch)"
            if token.kind == "kw":
                raise _Syntax(token, expected + f"; '{token.value}' is OTAWA syntax outside Assay's subset")
            raise _Syntax(token, expected)
        self.take()
        keyword = token.value
        if keyword == "loop":
            self.loop(token.line)
        elif keyword == "checksum":
            name = self.expect("string", what="a file name string").value
            value = self.integer(allow_unsigned=True)
            self.expect("sym", ";", "';'")
            self.statements.append(F4Statement("checksum", token.line, name=name, value=value))
        elif keyword in ("noreturn", "nocall", "ignorecontrol"):
            self.simple(keyword, token.line)
        elif keyword == "no":
            second = self.expect("kw", what="'return' or 'call' after 'no'")
            if second.value not in ("return", "call"):
                raise _Syntax(second, "'return' or 'call' after 'no'")
            self.simple("noreturn" if second.value == "return" else "nocall", token.line)
        elif keyword == "ignore":
            second = self.expect("kw", "control", "'control' after 'ignore'")
            self.simple("ignorecontrol", token.line)
        else:
            self.multicall(token.line, keyword)

    def simple(self, kind: str, line: int) -> None:
        address = self.address()
        self.expect("sym", ";", "';'")
        self.statements.append(F4Statement(kind, line, address=address))

    def loop(self, line: int) -> None:
        address = self.address()
        maximum = total = None
        unknown = False
        if self.is_("int"):
            maximum = self.integer()
        elif self.is_("sym", "?"):
            self.take()
            unknown = True
        elif self.is_("kw", "max") or self.is_("kw", "total"):
            while self.is_("kw", "max") or self.is_("kw", "total"):
                word = self.take()
                value = self.integer()
                if word.value == "max":
                    if maximum is not None:
                        raise _Syntax(word, "one 'max' per loop")
                    maximum = value
                else:
                    if total is not None:
                        raise _Syntax(word, "one 'total' per loop")
                    total = value
        else:
            raise _Syntax(self.peek(), "a bound (an integer, 'max N', 'total N' or '?')")
        if self.is_("kw", "in"):
            in_token = self.take()
            steps = [self.context_step()]
            while self.is_("sym", "/"):
                self.take()
                steps.append(self.context_step())
            self.expect("sym", ";", "';'")
            self.problems.append(
                f"{self.name}:{in_token.line}: loop {address}: the call-context form 'in {' / '.join(steps)}' "
                "names calling functions, which Assay's flow facts cannot hold; give contexts as FFX <call> "
                "elements")
            return
        self.expect("sym", ";", "';'")
        self.statements.append(F4Statement("loop", line, address=address, max=maximum, total=total,
                                           unknown=unknown))

    def context_step(self) -> str:
        if self.is_("sym", "@"):
            self.take()
            return "@" + str(self.address())
        return str(self.address())

    def multicall(self, line: int, keyword: str) -> None:
        site = self.address()
        self.expect("kw", "to", "'to'")
        if self.is_("sym", "?"):
            self.take()
            self.expect("sym", ";", "';'")
            self.statements.append(F4Statement(keyword, line, address=site, unknown=True))
            return
        targets = [self.address()]
        while self.is_("sym", ","):
            self.take()
            targets.append(self.address())
        self.expect("sym", ";", "';'")
        self.statements.append(F4Statement(keyword, line, address=site, targets=tuple(targets)))

    def address(self) -> F4Address:
        if self.is_("int"):
            return F4Address(None, self.integer(allow_unsigned=True))
        label = self.expect("string", what="an address (integer or \"label\" [+|- offset])").value
        if self.is_("sym", "+") or self.is_("sym", "-"):
            sign = 1 if self.take().value == "+" else -1
            return F4Address(label, sign * self.integer())
        if self.is_("sym", ":"):
            raise _Syntax(self.peek(), "not 'file:line' (source-line addresses do not work in OTAWA's F4)")
        return F4Address(label, 0)

    def integer(self, allow_unsigned: bool = False) -> int:
        token = self.expect("int", what="an integer")
        # OTAWA's lexer: decimal/octal/binary through strtol into an int, hex through strtoul into an int
        limit = 0xFFFFFFFF if allow_unsigned and token.text[:2] in ("0x", "0X") else INT_MAX
        if token.value > limit:
            raise _Syntax(token, f"an integer OTAWA can hold (at most {limit:#x})")
        return token.value


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


def parse_f4(text: str | Path, source: str | None = None, symbols: Mapping[str, int] | None = None) -> FlowFacts:
    """Read F4 ``text`` (or the file, given a ``Path``) into ``FlowFacts``; ``source`` names it in messages.

    ``symbols`` (function name -> address, Thumb bit clear) resolves the forms
    that need them. Every problem is reported at once in one
    ``FlowFactFormatError``: syntax outside the grammar, a loop left at ``?``
    (listing every unbounded loop), an unresolved ``multicall ... to ?``, a
    label that needs symbols.
    """
    text, name = _read(text, source)
    statements = parse_f4_statements(text, name)
    problems: list[str] = []
    loops: list[LoopBound] = []
    multicalls: dict[int, tuple[int, ...]] = {}
    multibranches: dict[int, tuple[int, ...]] = {}
    noreturn, nocall, ignorecontrol = set(), set(), set()
    checksum = None
    origin = f"user:{name}"

    def absolute(address: F4Address, line: int) -> int | None:
        if address.label is None:
            return address.offset
        if symbols is None or address.label not in symbols:
            problems.append(f"{name}:{line}: label \"{address.label}\" needs the ELF's symbols to resolve")
            return None
        return symbols[address.label] + address.offset

    def function_name(address: F4Address, line: int) -> str | None:
        if address.label is not None and address.offset == 0:
            return address.label
        if symbols is None:
            problems.append(f"{name}:{line}: {address} names a function by address, which needs the ELF's symbols")
            return None
        wanted = absolute(address, line)
        names = sorted(n for n, a in (symbols or {}).items() if a == wanted)
        if wanted is not None and not names:
            problems.append(f"{name}:{line}: no function starts at {wanted:#x}")
        return names[0] if names else None

    for statement in statements:
        line, address = statement.line, statement.address
        if statement.kind == "checksum":
            checksum = (statement.name, statement.value)
        elif statement.kind == "loop":
            if statement.unknown:
                problems.append(f"{name}:{line}: loop {address} has no bound ('?')")
                continue
            if statement.max is None:
                problems.append(f"{name}:{line}: loop {address} has only a 'total' bound; Assay needs 'max'")
                continue
            if address.label is not None and address.offset >= 0:
                function, offset = address.label, address.offset
            else:
                function, offset = None, absolute(address, line)
                if offset is None:
                    continue
            loops.append(LoopBound(function=function, offset=offset, max=statement.max, total=statement.total,
                                   origin=origin))
        elif statement.kind in ("multicall", "multibranch"):
            site = absolute(address, line)
            what = "indirect call" if statement.kind == "multicall" else "indirect jump"
            if statement.unknown:
                problems.append(f"{name}:{line}: {what} at {address} has unknown targets ('to ?')")
                continue
            targets = tuple(absolute(t, line) for t in statement.targets)
            if site is not None and None not in targets:
                (multicalls if statement.kind == "multicall" else multibranches)[site] = targets
        elif statement.kind == "ignorecontrol":
            value = absolute(address, line)
            if value is not None:
                ignorecontrol.add(value)
        else:
            function = function_name(address, line)
            if function is not None:
                (noreturn if statement.kind == "noreturn" else nocall).add(function)
    if problems:
        raise FlowFactFormatError(problems, f"{name}: unusable flow facts")
    return FlowFacts(loops=tuple(loops), multicalls=multicalls, multibranches=multibranches,
                     noreturn=frozenset(noreturn), nocall=frozenset(nocall), ignorecontrol=frozenset(ignorecontrol),
                     checksum=checksum)


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
    for address in sorted(facts.ignorecontrol):
        out.append(f'\t<ignorecontrol address="{address:#x}"/>')
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


@dataclass
class _Element:
    tag: str
    attributes: dict[str, str]
    line: int
    children: list["_Element"] = field(default_factory=list)


def _xml_tree(text: str, name: str) -> _Element:
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


def parse_ffx(text: str | Path, source: str | None = None, root: str | None = None) -> FlowFacts:
    """Read FFX ``text`` (or the file, given a ``Path``) into ``FlowFacts``, strictly; ``source`` names it.

    Accepted: ``<flowfacts>`` holding ``<function>``, ``<loop>``, ``<noreturn>``,
    ``<nocall>``, ``<ignorecontrol address>`` and ``<multicall address>`` /
    ``<multibranch address>`` holding ``<target address>`` elements; a ``<function>`` or ``<loop>`` holding ``<loop>`` and
    ``<call address=...>``; a ``<call>`` holding exactly one ``<function>``.
    Locations are ``label`` (or ``name``) with an optional ``offset``, or
    ``address``; a loop needs ``maxcount`` (``totalcount`` optional). If
    ``root`` is given, every ``<function>`` holding calls must be it.
    """
    text, name = _read(text, source)
    document = _xml_tree(text, name)
    problems: list[str] = []
    loops: list[LoopBound] = []
    noreturn, nocall, ignorecontrol = set(), set(), set()
    multi: dict[str, dict[int, tuple[int, ...]]] = {"multicall": {}, "multibranch": {}}
    origin = f"user:{name}"
    if document.tag != "flowfacts":
        raise FlowFactFormatError([f"{name}:{document.line}: the root element is <{document.tag}>, not <flowfacts>"],
                                  f"{name}: not FFX")

    def check_attributes(element: _Element, allowed: set[str]) -> None:
        extra = sorted(set(element.attributes) - allowed)
        if extra:
            problems.append(f"{name}:{element.line}: <{element.tag}> does not take {', '.join(extra)}")

    def integer(element: _Element, key: str, signed: bool = False) -> int | None:
        raw = element.attributes.get(key)
        if raw is None:
            return None
        value = _ffx_integer(raw.strip(), signed)
        if value is None:
            problems.append(f"{name}:{element.line}: {key}={raw!r} is not an integer")
        return value

    def location(element: _Element) -> tuple[str | None, int] | None:
        label = element.attributes.get("label", element.attributes.get("name"))
        if "label" in element.attributes and "name" in element.attributes:
            problems.append(f"{name}:{element.line}: both label and name")
        if "source" in element.attributes or "line" in element.attributes:
            problems.append(f"{name}:{element.line}: source/line locations need the ELF's line table; "
                            "Assay reads label/offset or address")
            return None
        if "address" in element.attributes:
            if label is not None or "offset" in element.attributes:
                problems.append(f"{name}:{element.line}: address together with label/offset")
                return None
            value = integer(element, "address")
            return None if value is None else (None, value)
        if label is None:
            problems.append(f"{name}:{element.line}: <{element.tag}> without a location (label or address)")
            return None
        offset = integer(element, "offset", signed=True) if "offset" in element.attributes else 0
        if offset is None:
            return None
        if offset < 0:
            problems.append(f"{name}:{element.line}: negative offset")
            return None
        return label, offset

    def function_body(element: _Element, function: str, context: tuple[int, ...], top: bool) -> None:
        for child in element.children:
            if child.tag == "loop":
                loop(child, function, context)
            elif child.tag == "call":
                call(child, context, top)
            else:
                problems.append(f"{name}:{child.line}: <{child.tag}> inside <{element.tag}>")

    def loop(element: _Element, function: str | None, context: tuple[int, ...]) -> None:
        check_attributes(element, {"label", "name", "offset", "address", "maxcount", "totalcount"})
        where = location(element)
        maximum, total = integer(element, "maxcount"), integer(element, "totalcount")
        if "maxcount" not in element.attributes:
            problems.append(f"{name}:{element.line}: loop without maxcount")
        if where is not None and maximum is not None and (total is not None or "totalcount" not in element.attributes):
            label, offset = where
            if context and label is not None and label != function:
                problems.append(f"{name}:{element.line}: loop in {label} inside the context of {function}")
            loops.append(LoopBound(function=label, offset=offset, max=maximum, total=total, context=context,
                                   origin=origin))
        if element.children:
            function_body(element, function, context, top=False)

    def function_label(element: _Element, unnamed: str) -> str | None:
        """The label of a <function> element, or None after noting why it cannot be used."""
        check_attributes(element, {"label", "name", "address", "offset"})
        where = location(element)
        if where is None:
            return None
        if where[0] is None or where[1] != 0:
            problems.append(f"{name}:{element.line}: {unnamed}")
            return None
        return where[0]

    def call(element: _Element, context: tuple[int, ...], top: bool) -> None:
        check_attributes(element, {"address"})
        site = integer(element, "address")
        if site is None:
            problems.append(f"{name}:{element.line}: <call> needs address= (the call site)")
            return
        functions = [c for c in element.children if c.tag == "function"]
        if len(functions) != 1 or len(element.children) != 1:
            problems.append(f"{name}:{element.line}: <call> must hold exactly one <function>")
            return
        callee = functions[0]
        label = function_label(callee, "a called <function> is named by its label")
        if label is not None:
            function_body(callee, label, (*context, site), top=False)

    for child in document.children:
        if child.tag == "function":
            label = function_label(child, "a <function> is named by its label")
            if label is None:
                continue
            if root is not None and label != root and any(c.tag == "call" for c in child.children):
                problems.append(f"{name}:{child.line}: call contexts from {label}, but the root is {root}")
            function_body(child, label, (), top=True)
        elif child.tag == "loop":
            loop(child, None, ())
        elif child.tag == "ignorecontrol":
            check_attributes(child, {"address"})
            address = integer(child, "address")
            if address is None or child.children:
                problems.append(f"{name}:{child.line}: <ignorecontrol> takes an address and no content")
            else:
                ignorecontrol.add(address)
        elif child.tag in multi:
            check_attributes(child, {"address"})
            site = integer(child, "address")
            targets = []
            for target in child.children:
                check_attributes(target, {"address"})
                value = integer(target, "address") if target.tag == "target" else None
                if target.tag != "target" or value is None or target.children:
                    problems.append(f"{name}:{target.line}: <{child.tag}> holds only <target address=.../>")
                else:
                    targets.append(value)
            if site is None:
                problems.append(f"{name}:{child.line}: <{child.tag}> needs address= (the branch)")
            elif not targets:
                problems.append(f"{name}:{child.line}: <{child.tag}> at {site:#x} has no target")
            else:
                multi[child.tag][site] = tuple(targets)
        elif child.tag in ("noreturn", "nocall"):
            check_attributes(child, {"label", "name"})
            label = child.attributes.get("label", child.attributes.get("name"))
            if label is None or child.children:
                problems.append(f"{name}:{child.line}: <{child.tag}> takes a label and no content")
            else:
                (noreturn if child.tag == "noreturn" else nocall).add(label)
        else:
            problems.append(f"{name}:{child.line}: <{child.tag}> is outside Assay's FFX subset")
    if problems:
        raise FlowFactFormatError(problems, f"{name}: not FFX as Assay reads it")
    return FlowFacts(loops=tuple(loops), multicalls=multi["multicall"], multibranches=multi["multibranch"],
                     noreturn=frozenset(noreturn), nocall=frozenset(nocall), ignorecontrol=frozenset(ignorecontrol))


def _ffx_integer(raw: str, signed: bool) -> int | None:
    match = re.fullmatch(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", raw)
    if not match or (match.group(1) == "-" and not signed):
        return None
    sign = -1 if match.group(1) == "-" else 1
    return sign * _integer(match.group(2))
