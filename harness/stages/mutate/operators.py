"""Mutation operators: where a C source can be changed, and each change as a text edit.

``code_mutants(path)`` parses a generated source with pycparser (after blanking
comments and preprocessor lines, which pycparser does not take, with spaces, so
that every offset stays the same), lexes it with pycparser's own lexer to know
the exact place of every token, and walks the syntax tree for mutation points:

- ``arith``: a binary ``+ - * /`` replaced by its counterpart (+/-, *//);
- ``assign-op``: ``+=`` / ``-=`` / ``*=`` / ``/=`` replaced (``+=`` by ``-=`` and ``=``);
- ``relational``: ``< <= > >= == !=`` replaced by the others of its direction and its opposite;
- ``loop-bound``: the constant bound of a ``for`` loop, +1 and -1 (its ``<`` is then not also
  made ``<=``, which is the bound +1 again);
- ``read-index`` / ``write-index``: an array subscript, +1 and -1 (a write one past an
  array is the memory-safety mutant the guard words and the sanitizers are for);
- ``delete``: an expression statement (assignment or call) removed;
- ``activation``: ``tanhf(x)``, ``expf(x)``, ``logf(x)`` (LogSoftmax, Log, ReduceLogSum...), ``sqrtf(x)``
  (ReduceL2, Sqrt), ``erff(x)`` (Gelu), a sigmoid or the ReLU select ``(x > 0 ? x : 0)`` swapped with others
  and the identity.

``weight_mutants(path, symbols, ...)`` mutates the initialisers of the named
constant arrays, by their C type: a float array's seeded-chosen elements by a
relative amount (``weight-<r>``); an integer array's (integer-only C for a
quantized model, docs/quantized.md) as ``INTEGER_CONSTANTS`` lists, by the
array's name as the generator writes it (``<prefix><layer>_shift``, ...):

- ``shift``: every requantization shift +1 and -1 (the channel's output doubled or halved);
- ``multiplier-1%``: every requantization multiplier x 1.01 and x 0.99;
- ``multiplier-1``: every requantization multiplier +1 and -1 (an error of 2^-30 of its value or less);
- ``zero-point``: every entry of a zero-point array +1 and -1;
- ``int-bias``: seeded-chosen entries of an int32 bias +1 and -1;
- ``int-weight``: seeded-chosen entries of an int8 weight array +1 and -1 (the integer counterpart of
  ``weight-<r>``);

a change that leaves the array's type's range is not made. ``zero_point_mutants(path, manifest)`` changes the
zero points the C writes as literals (``(x + 128)``, ``... - 17``) by +1 and -1 (``zero-point`` too), found
from the zero points the manifest gives each quantized layer's tensors. ``counted(operator)`` says which
operators count in the code kill rate: the code mutants, ``shift`` and ``zero-point`` (gross changes of the
arithmetic); the others are judged by their detectability, as float weights are (``run``, ``detect``).

Each mutant carries ``equivalent``: the rule that proves it equivalent to the
original, or None. The rules are syntactic and sound for the code they match:
a strict and a non-strict comparison in a select of the two compared values
(``a > b ? a : b``, a ReLU or a max) give equal values (they differ only when
``a == b``, when either value is returned; +0 and -0 are equal); ``<`` and
``!=`` in a counting loop ``for (int i = C0; i < C1; ++i)`` with ``C0 <= C1``
and no other write to ``i``; in the body of such a loop that runs once from 0
(``for (int v = 0; v < 1; ++v)``, a convolution over one input channel), ``v``
is always 0, so ``x + e`` and ``x - e`` are equal when ``e`` is 0 (``v``, or a
product with it) and so are ``e * c`` and ``e / c`` for a constant ``c != 0``;
a weight whose perturbed value rounds to the same float32. Integer C adds the
rules built on value ranges (``ranges``, docs/mutation.md "Quantized models"):
a comparison whose operand never takes a value where the two comparisons differ,
a select whose arms are an arithmetic shift's two forms, a conversion to an
N-bit type of ``x - k`` or ``x + k`` with 2k a multiple of 2^N, and a change
whose values are stored the same wherever it can show (``masked downstream``).

Why pycparser and its lexer rather than regular expressions: a ``-`` may be
binary or unary, a ``>`` may be a comparison in a select or a loop condition,
a subscript may hold brackets and parentheses; the syntax tree says which, and
the tokens say exactly where, so each mutant is one precise edit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pycparser import c_ast, c_lexer, c_parser

from harness.errors import AssayError
from harness.stages.mutate import ranges

ARITH = {"+": "-", "-": "+", "*": "/", "/": "*"}
ASSIGN_OPS = {"+=": ("-=", "="), "-=": ("+=", "="), "*=": ("/=", "="), "/=": ("*=", "=")}
RELATIONAL = {"<": ("<=", ">", "!="), "<=": ("<", ">"), ">": (">=", "<"), ">=": (">", "<"),
              "==": ("!=",), "!=": ("==",)}
STRICTNESS = {frozenset({"<", "<="}), frozenset({">", ">="})}  # swapping within a pair is the select rule
ACTIVATIONS = {  # kind -> the expression of x
    "identity": "{x}",
    "relu": "({x} > 0.0f ? {x} : 0.0f)",
    "tanh": "tanhf({x})",
    "sigmoid": "(1.0f / (1.0f + expf(-({x}))))",
    "exp": "expf({x})",
    "log": "logf({x})",
    "sqrt": "sqrtf({x})",
    "erf": "erff({x})",
}
FUNCTION_KINDS = {"tanhf": "tanh", "expf": "exp", "logf": "log", "sqrtf": "sqrt", "erff": "erf"}
SWAPS = {"relu": ("identity", "tanh"), "tanh": ("identity", "relu"), "sigmoid": ("identity", "tanh"),
         "exp": ("identity", "tanh"), "log": ("identity", "exp"), "sqrt": ("identity", "exp"),
         "erf": ("identity", "tanh")}  # Gelu's erff: tanh is its closest neighbour
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?")
_COMMENT_OR_DIRECTIVE = re.compile(r"/\*.*?\*/|//[^\n]*|^[ \t]*#[^\n]*", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Mutant:
    """One change of one file: ``text[start:end]`` becomes ``replacement``."""

    operator: str
    file: str
    line: int
    start: int
    end: int
    original: str
    replacement: str
    description: str
    equivalent: str | None = None  # the rule that proves the mutant equivalent, if one does
    relative: float | None = None  # weight mutants: the relative perturbation
    element: tuple[str, int] | None = None  # weight mutants: the array's symbol and the element's position in it
    dtype: str = "float32"  # weight mutants: the element's type as the executable stores it (numpy's name)

    def element_bytes(self, literal: str) -> bytes:
        """The bytes the compiler makes of ``literal`` (the original or the replacement) as this mutant's element:
        a float's decimal rounded to a double, then to a float; an integer's value."""
        value = float(literal.rstrip("fF")) if self.dtype == "float32" else int(literal)
        return np.array([value], np.dtype(self.dtype).newbyteorder("<")).tobytes()

    def apply(self, text: str) -> str:
        if text[self.start:self.end] != self.original:
            raise AssayError(f"{self.file}:{self.line}: the source changed under the mutant ({self.description})")
        return text[:self.start] + self.replacement + text[self.end:]


@dataclass
class _Source:
    """A source file's text, its tokens with offsets, and where each token starts."""

    name: str
    text: str
    tokens: list = field(default_factory=list)  # pycparser tokens
    offsets: list[int] = field(default_factory=list)
    at: dict[tuple[int, int], int] = field(default_factory=dict)  # (line, column) -> token index
    match: dict[int, int] = field(default_factory=dict)  # bracket token index -> its partner

    def token(self, node: c_ast.Node) -> int:
        return self.at[(node.coord.line, node.coord.column)]

    def line(self, index: int) -> int:
        return self.tokens[index].lineno

    def span_text(self, first: int, last: int) -> str:
        return self.text[self.offsets[first]:self.end(last)]

    def end(self, index: int) -> int:
        return self.offsets[index] + len(self.tokens[index].value)

    def last(self, node: c_ast.Node) -> int:
        """The index of the last token of an expression (parentheses around it excluded)."""
        if isinstance(node, (c_ast.ID, c_ast.Constant)):
            return self.token(node)
        if isinstance(node, c_ast.ArrayRef):
            return self.match[self._after_parens(self.last(node.name))]
        if isinstance(node, c_ast.FuncCall):
            return self.match[self._after_parens(self.last(node.name))]
        if isinstance(node, c_ast.BinaryOp):
            return self.last(node.right)
        if isinstance(node, c_ast.TernaryOp):
            return self.last(node.iffalse)
        if isinstance(node, c_ast.Assignment):
            return self.last(node.rvalue)
        if isinstance(node, c_ast.UnaryOp):
            inner = self.last(node.expr)
            return self._after_parens(inner) if node.op in ("p++", "p--") else inner
        if isinstance(node, c_ast.Cast):
            return self.last(node.expr)
        raise AssayError(f"{self.name}:{node.coord.line}: no mutation support for {type(node).__name__}")

    def _after_parens(self, index: int) -> int:
        """The first token after ``index`` that is not a closing parenthesis."""
        index += 1
        while self.tokens[index].value == ")":
            index += 1
        return index

    def operator_of(self, node: c_ast.BinaryOp) -> int:
        index = self._after_parens(self.last(node.left))
        if self.tokens[index].value != node.op:
            raise AssayError(f"{self.name}:{node.coord.line}: operator {node.op} not found where expected")
        return index

    def statement_end(self, node: c_ast.Node) -> int:
        """The index of the ``;`` that ends the expression statement ``node``."""
        index = self._after_parens(self.last(node))
        if self.tokens[index].value != ";":
            raise AssayError(f"{self.name}:{node.coord.line}: statement end not found")
        return index


def blank(text: str) -> str:
    """``text`` with comments and preprocessor lines replaced by spaces (newlines kept): same offsets."""
    return _COMMENT_OR_DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def load(path: Path) -> tuple[_Source, c_ast.FileAST]:
    """The C file ``path``'s text and tokens, with pycparser's tree of it (``code_mutants``, ``schema``)."""
    return parse(path.read_text(), path.name)


def parse(text: str, name: str) -> tuple[_Source, c_ast.FileAST]:
    """The C ``text`` (of the file ``name``) and its tokens, with pycparser's tree of it."""
    plain = blank(text)
    try:
        tree = syntax_tree(plain, name)
    except c_parser.ParseError as exc:
        raise AssayError(f"{name}: cannot parse for mutation: {exc}") from None
    source = _Source(name, text)
    lexer = c_lexer.CLexer(lambda msg, line, column: None)
    lexer.input(plain)
    line_starts = [0] + [m.end() for m in re.finditer("\n", plain)]
    stack: list[int] = []
    while (token := lexer.token()) is not None:
        index = len(source.tokens)
        source.tokens.append(token)
        source.offsets.append(line_starts[token.lineno - 1] + token.column - 1)
        source.at[(token.lineno, token.column)] = index
        if token.value in "([{":
            stack.append(index)
        elif token.value in ")]}":
            opened = stack.pop()
            source.match[opened], source.match[index] = index, opened
    return source, tree


_STDINT = {"int8_t": "signed char", "uint8_t": "unsigned char", "int16_t": "short", "uint16_t": "unsigned short",
           "int32_t": "int", "uint32_t": "unsigned int", "int64_t": "long long", "uint64_t": "unsigned long long"}


def _stdint(plain: str, name: str) -> str:
    """The typedefs of the ``<stdint.h>`` types ``plain`` uses and does not define, then a line marker that makes
    the line after it line 1 of ``name``: pycparser needs a type's name declared, the blanked ``#include`` no longer
    declares it, and the marker keeps every coordinate of the text's own (integer C: docs/quantized.md)."""
    used = [t for t in _STDINT if re.search(rf"\b{t}\b", plain) and not re.search(rf"typedef[^;]*\b{t}\s*;", plain)]
    if not used:
        return ""
    return "".join(f"typedef {_STDINT[t]} {t};\n" for t in used) + f'# 1 "{name}"\n'


def syntax_tree(plain: str, name: str) -> c_ast.FileAST:
    """pycparser's tree of the blanked C ``plain`` (``blank``) of the file ``name``, its ``<stdint.h>`` types
    declared (``_stdint``); a ``c_parser.ParseError`` when it is not C pycparser takes."""
    return c_parser.CParser().parse(_stdint(plain, name) + plain, filename=name)


def code_mutants(path: Path, constants: ranges.Env | None = None) -> list[Mutant]:
    """Every mutant of the function bodies in the C file ``path``, in source order; ``constants``: the span of the
    values of each constant integer array of the code (``constant_spans``), which the range rules read."""
    source, tree = load(Path(path))
    finder = _Finder(source, {})
    for definition in tree.ext:
        if isinstance(definition, c_ast.FuncDef):
            parameters = definition.decl.type.args.params if definition.decl.type.args else []
            hidden = {getattr(p, "name", None) for p in parameters}  # a parameter hides an array of its name
            finder.env = {k: v for k, v in (constants or {}).items() if k not in hidden}
            finder.visit(definition.body)
    return sorted(finder.mutants, key=lambda m: (m.start, m.operator, m.replacement))


def constant_spans(paths: list[Path], symbols: list[str]) -> ranges.Env:
    """Per ``const`` integer array of ``symbols`` initialised in one of ``paths``, the span of its values: what a
    read of any of its elements gives (a ``const`` object is never written)."""
    found: ranges.Env = {}
    for path in paths:
        text = blank(Path(path).read_text())
        for symbol in symbols:
            numbers = array_numbers(text, symbol)
            if numbers and array_dtype(text, symbol) != "float32" and \
                    re.search(rf"\bconst\b[^;{{}}]*\b{re.escape(symbol)}\s*\[", text):
                values = [int(n.group(0)) for n in numbers]
                found[symbol] = ranges.Span(min(values), max(values))
    return found


class _Finder(c_ast.NodeVisitor):
    def __init__(self, source: _Source, env: ranges.Env):
        self.source = source
        self.env = env  # the span of every integer variable and constant array in scope (``ranges``)
        self.blocks: list[tuple[c_ast.Compound, int, ranges.Env]] = []  # enclosing blocks: item visited, env at entry
        self.stack: list[c_ast.Node] = []  # the nodes being visited, outermost first
        self.equal_arms: set[int] = set()  # id(cond node) of a select whose arms are equal for every value
        self.casts: dict[int, tuple[int, bool]] = {}  # id(operand) of a cast to an integer type -> the type
        self.mutants: list[Mutant] = []
        self.loop_conditions: dict[int, str | None] = {}  # id(cond node) -> the counting-loop rule, or None
        self.selects: dict[int, bool] = {}  # id(cond node) -> it is the comparison of its select's values
        self.boundaries: dict[int, str] = {}  # id(cond node) -> the value both arms of its select have at equality
        self.bounded: set[int] = set()  # loop conditions with loop-bound mutants: i <= N is i < N + 1 again
        self.zero: list[str] = []  # counters of the enclosing loops that run once, from 0: always 0 in the body
        self.shift_loops: dict[int, str] = {}  # id(cond of a softmax's max loop) -> the shift variable
        self.shift_subtractions: dict[int, str] = {}  # id(x - m in expf(x - m)) -> the shift variable

    def add(self, operator: str, first: int, last: int, replacement: str, description: str,
            equivalent: str | None = None) -> None:
        s = self.source
        self.mutants.append(Mutant(operator, s.name, s.line(first), s.offsets[first], s.end(last),
                                   s.span_text(first, last), replacement, description, equivalent))

    def visit(self, node: c_ast.Node) -> None:
        self.stack.append(node)
        try:
            super().visit(node)
        finally:
            self.stack.pop()

    # statements ---------------------------------------------------------------------------
    def visit_Compound(self, node: c_ast.Compound) -> None:
        self._find_shifts(node)
        entry = dict(self.env)
        for index, item in enumerate(node.block_items or []):
            self.blocks.append((node, index, entry))
            self._maybe_delete(item)
            self.visit(item)
            self.blocks.pop()
        self.env = entry

    def visit_For(self, node: c_ast.For) -> None:
        rule = self._counting_loop(node)
        zero = _fixed_at_zero(node) if rule else None
        if zero is not None:
            self.zero.append(zero)
        cond = node.cond
        if isinstance(cond, c_ast.BinaryOp) and isinstance(cond.right, c_ast.Constant) and \
                cond.right.type == "int" and cond.op in ("<", "<="):
            index = self.source.token(cond.right)
            bound = int(cond.right.value)
            for delta in (1, -1):
                self.add("loop-bound", index, index, str(bound + delta), f"loop bound {bound} -> {bound + delta}",
                         self._shift_rule(id(cond), "the maximum over a non-empty part")
                         if delta == -1 and bound + delta >= 1 and rule and _starts_at_zero(node) else None)
            self.bounded.add(id(cond))
        if cond is not None:
            self.loop_conditions[id(cond)] = rule
        if not isinstance(node.stmt, c_ast.Compound):
            self._maybe_delete(node.stmt)
        outer = dict(self.env)
        for child in (node.init, node.cond):  # node.next (++i) is not mutated: a hang, not a fault
            if child is not None:
                self.visit(child)
        if rule:  # in the body the counter runs from its start to its bound - 1
            self.env[node.init.decls[0].name] = ranges.Span(int(node.init.decls[0].init.value),
                                                            int(cond.right.value) - 1)
        self.visit(node.stmt)
        self.env = outer
        if zero is not None:
            self.zero.pop()

    def _counting_loop(self, node: c_ast.For) -> str | None:
        """The rule that makes ``<`` and ``!=`` equivalent in this loop, or None if it does not hold."""
        init, cond, step = node.init, node.cond, node.next
        if not (isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and
                isinstance(init.decls[0].init, c_ast.Constant) and isinstance(cond, c_ast.BinaryOp) and
                cond.op == "<" and isinstance(cond.left, c_ast.ID) and isinstance(cond.right, c_ast.Constant) and
                isinstance(step, c_ast.UnaryOp) and step.op in ("++", "p++") and isinstance(step.expr, c_ast.ID)):
            return None
        var = init.decls[0].name
        if cond.left.name != var or step.expr.name != var or writes(node.stmt, var):
            return None
        try:
            start, bound = int(init.decls[0].init.value), int(cond.right.value)
        except ValueError:
            return None
        if start > bound:
            return None
        return f"counting loop: {var} steps by 1 from {start} up to {bound} and nothing else writes it, " \
               f"so {var} < {bound} and {var} != {bound} end it at the same step"

    def _maybe_delete(self, item: c_ast.Node) -> None:
        if isinstance(item, (c_ast.Assignment, c_ast.FuncCall)):
            first = self.source.token(item.lvalue if isinstance(item, c_ast.Assignment) else item.name)
            last = self.source.statement_end(item)
            self.add("delete", first, last, ";", f"statement deleted: {self.source.span_text(first, last)}")

    # expressions --------------------------------------------------------------------------
    def visit_Assignment(self, node: c_ast.Assignment) -> None:
        if node.op in ASSIGN_OPS:
            index = self._assign_token(node)
            for other in ASSIGN_OPS[node.op]:
                self.add("assign-op", index, index, other, f"{node.op} -> {other}")
        if isinstance(node.lvalue, c_ast.ArrayRef):
            self._index(node.lvalue, "write-index")
            self.visit(node.lvalue.name)
            self.visit(node.lvalue.subscript)
        else:
            self.visit(node.lvalue)
        self.visit(node.rvalue)

    def _assign_token(self, node: c_ast.Assignment) -> int:
        index = self.source._after_parens(self.source.last(node.lvalue))
        if self.source.tokens[index].value != node.op:
            raise AssayError(f"{self.source.name}:{node.coord.line}: assignment operator not found")
        return index

    def visit_Decl(self, node: c_ast.Decl) -> None:
        if node.init is not None and not isinstance(node.init, c_ast.InitList):
            self.visit(node.init)
        kind = ranges.type_bits(node) if isinstance(node.type, c_ast.TypeDecl) else None
        if kind is None:  # not an integer variable: it hides any of its name
            self.env.pop(node.name, None)
            return
        whole = ranges.type_span(*kind)
        value = ranges.span(node.init, self.env) if "const" in node.quals and node.init is not None else None
        self.env[node.name] = value if value is not None and value.meet(whole.low, whole.high) == value else whole

    def visit_ArrayRef(self, node: c_ast.ArrayRef) -> None:
        self._index(node, "read-index")
        self.generic_visit(node)

    def _index(self, node: c_ast.ArrayRef, operator: str) -> None:
        s = self.source
        close = s.last(node)
        open_ = s.match[close]
        first, last = open_ + 1, close - 1
        subscript = s.span_text(first, last)
        name = s.span_text(s.token(node), open_ - 1) if isinstance(node.name, c_ast.ID) else "array"
        for delta, sign in ((1, "+"), (-1, "-")):
            self.add(operator, first, last, f"({subscript}) {sign} 1", f"{name}[{subscript}] -> index {delta:+d}")

    def visit_BinaryOp(self, node: c_ast.BinaryOp) -> None:
        index = self.source.operator_of(node)
        if node.op in ARITH:
            rule = self._zero_rule(node) or (self._shift_rule(id(node), "minus the maximum")
                                             if node.op == "-" else None) or self._wrap_rule(node) or \
                self._masked_rule(node, ARITH[node.op])
            self.add("arith", index, index, ARITH[node.op], f"{node.op} -> {ARITH[node.op]}", rule)
        elif node.op in RELATIONAL:
            for other in RELATIONAL[node.op]:
                if other == "<=" and id(node) in self.bounded:
                    continue
                self.add("relational", index, index, other, f"{node.op} -> {other}",
                         self._relational_rule(node, other) or self._masked_rule(node, other))
        self.generic_visit(node)

    def _wrap_rule(self, node: c_ast.BinaryOp) -> str | None:
        """``(T)(x - k)`` and ``(T)(x + k)`` for an N-bit integer type T and 2k a multiple of 2^N: the two values
        differ by 2k, so they convert to the same T when neither overflows its own type."""
        target = self.casts.get(id(node))
        k = ranges.constant_of(node.right) if node.op in ("+", "-") else None
        if target is None or not k or (2 * k) % (1 << target[0]):
            return None
        swapped = c_ast.BinaryOp(ARITH[node.op], node.left, node.right)
        if ranges.span(node, self.env) is None or ranges.span(swapped, self.env) is None:
            return None
        return f"equal modulo 2^{target[0]}: x - {k} and x + {k} differ by {2 * k}, a multiple of 2^{target[0]}, " \
               f"neither leaves its type on the values x takes, and the conversion to the {target[0]}-bit type " \
               f"reduces both modulo 2^{target[0]} (gcc's documented implementation-defined conversion)"

    def _masked_rule(self, node: c_ast.BinaryOp, other: str) -> str | None:
        """The rule that makes the mutant of integer code equivalent when the values it can change die or are
        stored the same (``ranges.Masked``): where it can differ (``ranges.where_it_differs``), the clean and the
        mutated statements of its block, and of the enclosing blocks until the variables they write end, store
        one and the same value in every split of their variables' spans."""
        left, right = ranges.span(node.left, self.env), ranges.span(node.right, self.env)
        if left is None or right is None or not self.blocks or node.op == other:
            return None
        block, index, entry = self.blocks[-1]
        statement = block.block_items[index]
        if statement not in self.stack:
            return None
        path = self.stack[self.stack.index(statement):]
        restrictions = ranges.where_it_differs(path, node.op, other, self.env)
        if restrictions is None:
            return None  # differs nowhere: the range rule's case, said there
        runs, depth = [block.block_items], len(self.blocks) - 1
        declared = {i.name for i in block.block_items if isinstance(i, c_ast.Decl)}
        written = {ranges.assigned(i) for i in ranges.walk(block)} - {None}
        while written - declared:  # a variable written that outlives the block: run on to its end
            if depth == 0 or self.blocks[depth - 1][0].block_items[self.blocks[depth - 1][1]] is not block:
                return None
            block, at, _ = self.blocks[depth - 1]
            runs.append(block.block_items[at + 1:])
            declared |= {i.name for i in block.block_items if isinstance(i, c_ast.Decl)}
            depth -= 1
        mutant = c_ast.BinaryOp(other, node.left, node.right)
        clean, changed = (ranges.Masked(runs, restrictions, swap).run(entry) for swap in (None, (id(node), mutant)))
        if clean is None or changed is None or len(clean) != len(changed) or \
                any(a.single is None or a != b for a, b in zip(clean, changed)):
            return None
        where = ", ".join(f"{r.name} in [{r.low}, {r.high}]" for r in restrictions) or "everywhere"
        return f"masked downstream: the mutant can differ only where {where}; there the clean and the mutated " \
               f"statements, run over intervals of their variables split at every constant they compare them with, " \
               f"store the same single value each time ({', '.join(str(a.single) for a in clean) or 'none'}) and " \
               f"what else they compute dies with its block"

    def _zero_rule(self, node: c_ast.BinaryOp) -> str | None:
        """The rule that makes an arithmetic mutant equivalent when an operand is always 0 (a product of the
        counter of a loop that runs once from 0): ``x + z`` and ``x - z`` are both ``x``, ``z * c`` and
        ``z / c`` both 0 for a non-zero constant ``c``."""
        if not self.zero:
            return None
        names = ", ".join(self.zero)
        if node.op in ("+", "-") and _is_zero_valued(node.right, self.zero):
            return f"counter fixed at 0: {names} is 0 in the body of a loop that runs once from 0 " \
                   f"(for (int v = 0; v < 1; ++v), nothing else writes it), so the right operand of " \
                   f"{node.op} is 0 and x + 0 == x - 0"
        if node.op in ("*", "/") and _is_zero_valued(node.left, self.zero) and _is_nonzero_constant(node.right):
            return f"counter fixed at 0: {names} is 0 in the body of a loop that runs once from 0, so the left " \
                   f"operand is 0 and 0 * c == 0 / c == 0 for the constant c"
        return None

    def _find_shifts(self, block: c_ast.Compound) -> None:
        """The softmax blocks of ``block``: a max loop ``for (...) { m = a > m ? a : m; }`` whose variable ``m``
        is read elsewhere in the block only as the subtrahend of ``expf(x - m)``."""
        items = block.block_items or []
        for loop in items:
            var = _max_scan(loop, self.source)
            if var is None:
                continue
            subtractions, only_shift = [], True
            for item in items:
                if item is loop:
                    continue
                for child, parent, grandparent in _walk_with_parents(item):
                    if isinstance(child, c_ast.ID) and child.name == var:
                        if isinstance(parent, c_ast.BinaryOp) and parent.op == "-" and parent.right is child and \
                                isinstance(grandparent, c_ast.ExprList) and len(grandparent.exprs) == 1:
                            subtractions.append(parent)
                        else:
                            only_shift = False
                    if isinstance(child, c_ast.FuncCall) and child.args is not None and \
                            any(isinstance(e, c_ast.BinaryOp) and e in subtractions for e in child.args.exprs) and \
                            not (isinstance(child.name, c_ast.ID) and child.name.name == "expf"):
                        only_shift = False
            if only_shift and subtractions:
                self.shift_loops[id(loop.cond)] = var
                self.shift_subtractions.update({id(node): var for node in subtractions})

    def _shift_rule(self, key: int, what: str) -> str | None:
        """The softmax rule for the loop condition or subtraction ``key`` of a softmax block, or None."""
        var = self.shift_loops.get(key) or self.shift_subtractions.get(key)
        if var is None:
            return None
        return f"softmax shift invariance: exp(x_k - c) / sum_j exp(x_j - c) is the same for every c, and the " \
               f"mutant changes only the shift c ({var}: {what} of the block), not the values exponentiated " \
               f"and summed; equal in real arithmetic, in float32 up to rounding (judged equivalent only when " \
               f"its error is no larger than the clean code's: expf overflow or underflow would show)"

    def _relational_rule(self, node: c_ast.BinaryOp, other: str) -> str | None:
        if other == "!=" and self.loop_conditions.get(id(node)):
            return self.loop_conditions[id(node)]
        if id(node) in self.equal_arms:
            return "select of equal arms: x >= 0 ? x >> e : ~(~x >> e) gives x >> e for every x whichever arm " \
                   "runs (~x = -x - 1, so ~(~x >> e) = x >> e when >> of a negative value shifts in its sign bit, " \
                   "gcc's documented implementation-defined behaviour), so no change of the condition shows"
        if frozenset({node.op, other}) in STRICTNESS and self.selects.get(id(node)):
            return f"select of the compared values: a {node.op} b ? a : b and a {other} b ? a : b differ only " \
                   f"when a == b, where both give the same value (+0 and -0 are equal)"
        if frozenset({node.op, other}) in STRICTNESS and id(node) in self.boundaries:
            return f"select equal at the boundary: x {node.op} c ? A : B and x {other} c ? A : B differ only when " \
                   f"x == c, where A and B, functions of x and constants alone, are equal " \
                   f"({self.boundaries[id(node)]}; +0 and -0 are equal)"
        value = ranges.span(node.left, self.env) if node.op in ranges.RELATIONS else None
        bound = ranges.span(node.right, self.env) if value is not None else None
        if bound is not None and bound.single is not None and \
                ranges.differing(node.op, other, value, bound.single) is None:
            return f"compared value out of reach: the left operand takes only values in [{value.low}, " \
                   f"{value.high}] (loop counters, const locals, constant arrays), where {node.op} " \
                   f"{bound.single} and {other} {bound.single} agree"
        return None

    def visit_FuncCall(self, node: c_ast.FuncCall) -> None:
        self._activation(node)
        self.generic_visit(node)

    def visit_Cast(self, node: c_ast.Cast) -> None:
        kind = ranges.type_bits(node.to_type)
        if kind is not None and kind[0] < 32:
            self.casts[id(node.expr)] = kind
        self.generic_visit(node)

    def visit_TernaryOp(self, node: c_ast.TernaryOp) -> None:
        self._activation(node)
        cond, s = node.cond, self.source
        if _same_value(node.iftrue, node.iffalse, s):
            self.equal_arms.add(id(cond))
        if isinstance(cond, c_ast.BinaryOp):
            text = lambda n: re.sub(r"\s+", "", s.span_text(s.token(n), s.last(n)))  # noqa: E731
            self.selects[id(cond)] = (text(cond.left), text(cond.right)) in (
                (text(node.iftrue), text(node.iffalse)), (text(node.iffalse), text(node.iftrue)))
            at = _value(cond.right, {}) if isinstance(cond.left, c_ast.ID) else None  # x OP constant expression
            if at is not None:
                arms = [_value(arm, {cond.left.name: at}) for arm in (node.iftrue, node.iffalse)]
                if arms[0] is not None and arms[0] == arms[1]:
                    self.boundaries[id(cond)] = f"{cond.left.name} = {at:g}: both arms {arms[0]:g}"
        self.generic_visit(node)

    def _activation(self, node: c_ast.Node) -> None:
        """A swap of the activation computed by ``node`` (tanhf(x), expf(x), a ReLU select)."""
        s = self.source
        kind, argument = _activation_of(node, s)
        if kind is None:
            return
        first, last = s.token(node.cond.left) if kind == "relu" else s.token(node), s.last(node)
        x = s.span_text(s.token(argument), s.last(argument)) if not isinstance(argument, str) else argument
        for other in SWAPS[kind]:
            self.add("activation", first, last, ACTIVATIONS[other].format(x=x), f"{kind} -> {other}")


def _same_value(a: c_ast.Node, b: c_ast.Node, s: _Source) -> bool:
    """Whether the expressions ``a`` and ``b`` give the same value for every value of their variables: ``x >> e``
    and ``~(~x >> e)`` (either order, x and e the same side-effect-free text) under an arithmetic ``>>``."""
    text = lambda n: re.sub(r"\s+", "", s.span_text(s.token(n), s.last(n)))  # noqa: E731
    for plain, twice in ((a, b), (b, a)):
        if isinstance(plain, c_ast.BinaryOp) and plain.op == ">>" and isinstance(twice, c_ast.UnaryOp) and \
                twice.op == "~" and isinstance(twice.expr, c_ast.BinaryOp) and twice.expr.op == ">>" and \
                isinstance(twice.expr.left, c_ast.UnaryOp) and twice.expr.left.op == "~" and \
                all(isinstance(n, (c_ast.ID, c_ast.Constant)) for n in (plain.left, plain.right, twice.expr.right)) \
                and text(plain.left) == text(twice.expr.left.expr) and text(plain.right) == text(twice.expr.right):
            return True
    return False


def _activation_of(node: c_ast.Node, s: _Source) -> tuple[str | None, c_ast.Node | None]:
    if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and node.name.name in FUNCTION_KINDS \
            and node.args is not None and len(node.args.exprs) == 1:
        return FUNCTION_KINDS[node.name.name], node.args.exprs[0]
    if isinstance(node, c_ast.TernaryOp) and isinstance(node.cond, c_ast.BinaryOp) and node.cond.op in (">", ">=") \
            and _is_zero(node.cond.right) and _is_zero(node.iffalse) and \
            s.span_text(s.token(node.cond.left), s.last(node.cond.left)) == \
            s.span_text(s.token(node.iftrue), s.last(node.iftrue)):
        return "relu", node.cond.left
    return None, None


_INTEGER_CASTS = {"int8_t": 8, "uint8_t": 8, "int16_t": 16, "uint16_t": 16, "int32_t": 32, "uint32_t": 32,
                  "int64_t": 64, "uint64_t": 64, "int": 32}
_BINARY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           ">>": lambda a, b: a >> b, "<<": lambda a, b: a << b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
           "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b),
           ">=": lambda a, b: int(a >= b), "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b)}


def _value(node: c_ast.Node, known: dict[str, float]) -> float | None:
    """The value of the expression ``node`` when its only variables are those of ``known``, or None when it reads
    anything else (an array, a call, another variable) or does what this evaluation does not model exactly: a
    shift or bitwise operation of a non-integer, a cast to an integer type of a value it does not hold exactly
    (a fraction, or outside the type's range), a cast to another type."""
    if isinstance(node, c_ast.Constant) and node.type in ("int", "float", "double"):
        text = node.value.rstrip("uUlLfF")
        return int(text, 0) if node.type == "int" else float(text)
    if isinstance(node, c_ast.ID):
        return known.get(node.name)
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "~"):
        inner = _value(node.expr, known)
        if inner is None or (node.op == "~" and not isinstance(inner, int)):
            return None
        return -inner if node.op == "-" else ~inner
    if isinstance(node, c_ast.Cast):
        inner = _value(node.expr, known)
        names = node.to_type.type.type.names if isinstance(node.to_type.type, c_ast.TypeDecl) and \
            isinstance(node.to_type.type.type, c_ast.IdentifierType) else []
        bits = _INTEGER_CASTS.get(" ".join(names))
        if inner is None or bits is None or inner != int(inner):
            return None
        signed = not names[0].startswith("u")
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        return int(inner) if low <= inner <= high else None
    if isinstance(node, c_ast.BinaryOp) and node.op in _BINARY:
        left, right = _value(node.left, known), _value(node.right, known)
        if left is None or right is None or \
                (node.op in (">>", "<<", "&", "|") and not (isinstance(left, int) and isinstance(right, int))):
            return None
        return _BINARY[node.op](left, right)
    if isinstance(node, c_ast.TernaryOp):
        cond = _value(node.cond, known)
        return None if cond is None else _value(node.iftrue if cond else node.iffalse, known)
    return None


def _max_scan(node: c_ast.Node, s: _Source) -> str | None:
    """``m`` when ``node`` is a counting loop whose body is only ``m = a > m ? a : m`` (or ``>=``)."""
    if not isinstance(node, c_ast.For):
        return None
    body = node.stmt.block_items if isinstance(node.stmt, c_ast.Compound) else [node.stmt]
    if not body or len(body) != 1 or not isinstance(body[0], c_ast.Assignment) or body[0].op != "=" or \
            not isinstance(body[0].lvalue, c_ast.ID):
        return None
    var, select = body[0].lvalue.name, body[0].rvalue
    if not (isinstance(select, c_ast.TernaryOp) and isinstance(select.cond, c_ast.BinaryOp) and
            select.cond.op in (">", ">=") and isinstance(select.cond.right, c_ast.ID) and
            select.cond.right.name == var and isinstance(select.iffalse, c_ast.ID) and select.iffalse.name == var):
        return None
    text = lambda n: re.sub(r"\s+", "", s.span_text(s.token(n), s.last(n)))  # noqa: E731
    return var if text(select.cond.left) == text(select.iftrue) else None


def _starts_at_zero(node: c_ast.For) -> bool:
    return isinstance(node.init, c_ast.DeclList) and node.init.decls[0].init.value == "0"


def _walk_with_parents(node: c_ast.Node, parent: c_ast.Node | None = None, grandparent: c_ast.Node | None = None):
    yield node, parent, grandparent
    for child in node:
        yield from _walk_with_parents(child, node, parent)


def _fixed_at_zero(node: c_ast.For) -> str | None:
    """The counter of a counting loop (``_counting_loop`` holds) that starts at 0 and runs once: ``v < 1``."""
    start, bound = node.init.decls[0].init.value, node.cond.right.value
    return node.init.decls[0].name if (start, bound) == ("0", "1") else None


def _is_zero_valued(node: c_ast.Node, zero: list[str]) -> bool:
    """Whether the integer expression ``node`` is 0 whatever the other variables: a fixed-at-0 counter, or a
    product with one, or one divided by a non-zero constant."""
    if isinstance(node, c_ast.ID):
        return node.name in zero
    if isinstance(node, c_ast.BinaryOp) and node.op == "*":
        return _is_zero_valued(node.left, zero) or _is_zero_valued(node.right, zero)
    if isinstance(node, c_ast.BinaryOp) and node.op == "/":
        return _is_zero_valued(node.left, zero) and _is_nonzero_constant(node.right)
    return False


def _is_nonzero_constant(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.Constant) and node.type == "int" and int(node.value.rstrip("uUlL"), 0) != 0


def _is_zero(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.Constant) and node.type in ("float", "double", "int") and \
        float(node.value.rstrip("fF")) == 0.0


def writes(node: c_ast.Node | None, var: str) -> bool:
    """Whether ``node`` assigns, increments or takes the address of the variable ``var``."""
    if node is None:
        return False
    for child in _walk(node):
        if isinstance(child, c_ast.Assignment) and isinstance(child.lvalue, c_ast.ID) and child.lvalue.name == var:
            return True
        if isinstance(child, c_ast.UnaryOp) and child.op in ("++", "--", "p++", "p--", "&") and \
                isinstance(child.expr, c_ast.ID) and child.expr.name == var:
            return True
    return False


def _walk(node: c_ast.Node):
    yield node
    for child in node:
        yield from _walk(child)


def _header(text: str, symbol: str) -> re.Match | None:
    """The declaration of the initialised array ``symbol`` in the C ``text`` up to its ``{``; group 1: the word
    before the name (its type)."""
    return re.search(rf"(\w+)\s+{re.escape(symbol)}\s*\[[^\]]*\]\s*=\s*\{{", text)


def array_numbers(text: str, symbol: str) -> list[re.Match]:
    """The numbers initialising the array ``symbol`` in the C ``text``, in order (none when it is not there)."""
    header = _header(text, symbol)
    if header is None:
        return []
    return list(_NUMBER.finditer(text, header.end(), text.index("}", header.end())))


def array_dtype(text: str, symbol: str) -> str:
    """The numpy name of the type of the array ``symbol``'s elements in the C ``text``: an integer type's
    (``INTEGER_TYPES``), else ``float32`` (a weight array of float C as every generator writes it)."""
    header = _header(text, symbol)
    return INTEGER_TYPES.get(header.group(1), "float32") if header else "float32"


def array_values(text: str, symbol: str) -> np.ndarray:
    """The float32 values initialising the array ``symbol`` in the C ``text``: what a weight mutant's element is
    matched with in the model (``detect``)."""
    return np.array([float(n.group(0).rstrip("fF")) for n in array_numbers(text, symbol)], np.float32)


def weight_mutants(path: Path, symbols: list[str], relatives: tuple[float, ...], per_array: int,
                   rng: np.random.Generator) -> list[Mutant]:
    """The mutants of the arrays in ``symbols`` initialised in ``path``: of a float array, ``per_array``
    seeded-chosen elements each scaled by 1 + r for every r in ``relatives`` (a value that rounds to the same float32
    is judged equivalent); of an integer array, those of its class in ``INTEGER_CONSTANTS`` (``integer_mutants``)."""
    text = Path(path).read_text()
    mutants = []
    for symbol in symbols:
        numbers = array_numbers(text, symbol)
        if not numbers:
            continue
        dtype = array_dtype(text, symbol)
        if dtype != "float32":
            mutants += integer_mutants(Path(path).name, text, symbol, numbers, dtype, per_array, rng)
            continue
        for position in sorted(rng.choice(len(numbers), size=min(per_array, len(numbers)), replace=False)):
            number = numbers[position]
            value = np.float32(float(number.group(0).rstrip("fF")))
            line = text.count("\n", 0, number.start()) + 1
            for relative in relatives:
                changed = np.float32(float(value) * (1.0 + relative))
                rule = "the perturbed value rounds to the same float32" if changed == value else None
                mutants.append(Mutant(f"weight-{relative:.0e}", Path(path).name, line, number.start(), number.end(),
                                      number.group(0), f"{float(changed):.9g}",
                                      f"{symbol}[{position}] {float(value):.9g} x (1 + {relative:g})", rule,
                                      relative, (symbol, int(position))))
    return mutants


INTEGER_TYPES = {"int8_t": "int8", "uint8_t": "uint8", "int16_t": "int16", "int32_t": "int32", "int": "int32"}


@dataclass(frozen=True)
class IntegerConstants:
    """One class of mutants of the integer constant arrays of quantized C: which arrays (their name's ending, as
    the generator writes ``<prefix><layer>_<parameter>``, or their element type for the weights), the changes of an
    entry (``+n``: added; ``*f``: multiplied, rounded half away from zero), every entry or a seeded sample of
    ``--weights-per-array``, and whether the class counts in the code kill rate (``counted``) or is judged by its
    detectability, as float weights are."""

    operator: str
    suffix: str | None  # the array's name ends so; None: an int8 or uint8 array no other class takes (weights)
    changes: tuple[str, ...]
    sampled: bool
    counted: bool

    def takes(self, symbol: str, dtype: str) -> bool:
        return symbol.endswith(self.suffix) if self.suffix else dtype in ("int8", "uint8")


INTEGER_CONSTANTS = (  # the one list of the integer constant mutants; an array takes the first classes that match
    IntegerConstants("shift", "_shift", ("+1", "-1"), sampled=False, counted=True),
    IntegerConstants("zero-point", "_zero_point", ("+1", "-1"), sampled=False, counted=True),
    IntegerConstants("multiplier-1%", "_multiplier", ("*1.01", "*0.99"), sampled=False, counted=False),
    IntegerConstants("multiplier-1", "_multiplier", ("+1", "-1"), sampled=False, counted=False),
    IntegerConstants("int-bias", "_bias", ("+1", "-1"), sampled=True, counted=False),
    IntegerConstants("int-weight", None, ("+1", "-1"), sampled=True, counted=False),
)
UNCOUNTED = {c.operator for c in INTEGER_CONSTANTS if not c.counted}


def counted(operator: str) -> bool:
    """Whether a mutant of ``operator`` counts in the code kill rate (else it is judged by its detectability: the
    float weights' ``weight-<r>`` and the uncounted integer classes)."""
    return not operator.startswith("weight-") and operator not in UNCOUNTED


def _changed(value: int, change: str) -> int:
    if change.startswith("*"):
        scaled = abs(value) * float(change[1:])
        return int(np.sign(value)) * int(np.floor(scaled + 0.5))
    return value + int(change)


def integer_mutants(file: str, text: str, symbol: str, numbers: list[re.Match], dtype: str, per_array: int,
                    rng: np.random.Generator) -> list[Mutant]:
    """The mutants of the integer array ``symbol`` (of element type ``dtype``, initialised by ``numbers`` in the
    file ``file`` of text ``text``): every class of ``INTEGER_CONSTANTS`` that takes it, from the first whose name
    ending matches (a multiplier takes both of its classes); a change outside ``dtype``'s range, or none, is not
    made. An array no class takes (an int32 table the generator names otherwise) has none."""
    classes = [c for c in INTEGER_CONSTANTS if c.suffix and c.takes(symbol, dtype)] or \
        [c for c in INTEGER_CONSTANTS if c.takes(symbol, dtype)]
    low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    mutants = []
    for kind in classes:
        positions = sorted(rng.choice(len(numbers), size=min(per_array, len(numbers)), replace=False)) \
            if kind.sampled else range(len(numbers))
        for position in positions:
            number = numbers[position]
            value = int(number.group(0))
            line = text.count("\n", 0, number.start()) + 1
            for change in kind.changes:
                mutated = _changed(value, change)
                if mutated == value or not low <= mutated <= high:
                    continue
                mutants.append(Mutant(kind.operator, file, line, number.start(), number.end(), number.group(0),
                                      str(mutated), f"{symbol}[{position}] {value} -> {mutated} ({change})",
                                      element=(symbol, int(position)), dtype=dtype))
    return mutants


def zero_point_mutants(path: Path, manifest: dict) -> list[Mutant]:
    """The zero points the C file ``path`` writes as literals, each +1 and -1 (``zero-point``): in the lines of a
    layer the manifest gives (``layers``, docs/quantized.md), a ``+`` or ``-`` of an integer or float constant
    whose signed addend is the negated zero point of one of the layer's input tensors (``x - zp``, written
    ``(x + 128)`` for zp = -128) or the zero point of its output tensor (``... - 17`` for zp = -17), and whose
    left operand is a value rather than an index (an array element, a cast, a select, a call): the subscripts'
    ``+ 1`` and arena offsets are not zero points, whatever their value."""
    path = Path(path)
    layers = [layer for layer in manifest.get("layers", []) if layer.get("file") == path.name and layer.get("lines")]
    zero_points = {layer.get("index"): (layer.get("output") or {}).get("zero_point") for layer in layers}
    source, tree = load(path)
    mutants = []
    for node, _, _ in _walk_with_parents(tree):
        if not (isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-") and isinstance(node.right, c_ast.Constant)
                and node.right.type in ("int", "float") and
                isinstance(node.left, (c_ast.ArrayRef, c_ast.Cast, c_ast.TernaryOp, c_ast.FuncCall))):
            continue
        literal = node.right.value
        addend = float(literal.rstrip("fF")) * (1 if node.op == "+" else -1)
        layer = next((k for k in layers if k["lines"][0] <= node.coord.line <= k["lines"][1]), None)
        if layer is None:
            continue
        tensors = [(f"input of layer {layer['index']}", -zero_points.get(i)) for i in layer.get("inputs") or []
                   if zero_points.get(i)] + \
            ([(f"output of layer {layer['index']}", zero_points[layer["index"]])] if zero_points.get(layer["index"])
             else [])
        where = next((what for what, wanted in tensors if wanted == addend), None)
        if where is None:
            continue
        index = source.token(node.right)
        for delta in (1, -1):  # the zero point +1 and -1: the addend of an input's -zp moves the other way
            zero_point = (-addend if where.startswith("input") else addend) + delta
            moved = -zero_point if where.startswith("input") else zero_point
            magnitude = moved if node.op == "+" else -moved  # the literal, its operator kept
            if magnitude < 0:
                continue
            text = str(int(magnitude)) if node.right.type == "int" else f"{magnitude:.1f}f"
            mutants.append(Mutant("zero-point", path.name, source.line(index), source.offsets[index],
                                  source.end(index), literal, text,
                                  f"zero point of the {where} {int(zero_point - delta)} -> {int(zero_point)} "
                                  f"({node.op} {literal} -> {node.op} {text})"))
    return sorted(mutants, key=lambda m: (m.start, m.replacement))
