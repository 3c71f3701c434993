"""Integer value ranges of generated C, and the equivalence proofs of integer mutants built on them.

Integer-only C (a quantized model's, docs/quantized.md) has mutants that no input can tell from the clean code:
a padding test ``ih < 8`` made ``ih != 8`` where ``ih`` never exceeds 8, the rounding of a negative product
changed where a fused ReLU's clamp maps every negative result to 0 anyway. ``span`` gives an interval that holds
every value an integer expression can take, from the ranges of its variables (``Span``: a loop counter's from its
``for`` header, a ``const`` local's from its initialiser, a constant array's from its initialiser, any other
variable's from its type), under C's rules for the operations it models and nothing else: a result that can leave
its type (signed overflow, undefined) or an operation it does not model exactly gives no range (None), so a proof
never rests on a guess. Two implementation-defined behaviours are taken as gcc documents them ("Integers" in the
GCC manual) on every target Assay builds for: ``>>`` of a negative value shifts in copies of the sign bit (floor
division by 2^k), and a conversion to a signed type that cannot hold the value reduces it modulo 2^N.

``masked`` proves the mutants whose change shows only on some values of one variable (``Restriction``), by running
the clean and the mutated straight-line code from there to where its results die, each over intervals split at
the constants the code compares its variables with: equivalent when every value the two store is the same single
value on every split.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pycparser import c_ast

INTEGER_BITS = {"int8_t": 8, "uint8_t": 8, "int16_t": 16, "uint16_t": 16, "int32_t": 32, "uint32_t": 32,
                "int64_t": 64, "int": 32, "signed char": 8, "unsigned char": 8, "short": 16, "long long": 64}
RELATIONS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
             ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}  # c OP x is x FLIP[OP] c
PATHS = 1 << 15  # most statements ``Masked`` runs before it gives up (no proof)
UNREACHED = ("unreached",)  # ``Masked``: no value of the spans takes this path


@dataclass(frozen=True)
class Span:
    """Every value an integer expression can take lies in [low, high]; ``bits``: the width of its type after the
    integer promotions (32 or 64), the range its arithmetic must stay in."""

    low: int
    high: int
    bits: int = 32

    @property
    def single(self) -> int | None:
        return self.low if self.low == self.high else None

    def fits(self) -> bool:
        return -(1 << (self.bits - 1)) <= self.low and self.high < (1 << (self.bits - 1))

    def union(self, other: Span) -> Span:
        return Span(min(self.low, other.low), max(self.high, other.high), max(self.bits, other.bits))

    def meet(self, low: int, high: int) -> Span | None:
        """The part of the span in [low, high], None when empty."""
        low, high = max(self.low, low), min(self.high, high)
        return replace(self, low=low, high=high) if low <= high else None


def type_bits(node: c_ast.Node) -> tuple[int, bool] | None:
    """The width and signedness of the integer type named by the declaration or type name ``node``, or None."""
    while isinstance(node, (c_ast.Decl, c_ast.Typename, c_ast.TypeDecl)):
        node = node.type
    if not isinstance(node, c_ast.IdentifierType):
        return None
    name = " ".join(n for n in node.names if n != "signed")
    name = {"": "int", "unsigned": "uint32_t", "unsigned int": "uint32_t", "char": "signed char"}.get(name, name)
    # long: 64 bits on the host, 32 on a Cortex-M: no width, no range
    bits = INTEGER_BITS.get(name)
    return None if bits is None else (bits, not (name.startswith("u")))


def type_span(bits: int, signed: bool) -> Span:
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return Span(low, high, max(32, bits))


def relation(op: str, left: Span, right: Span) -> Span:
    """The values (0 or 1) of ``left OP right`` over the two spans."""
    if op in ("==", "!="):
        if left.single is not None and left.single == right.single:
            return Span(int(op == "=="), int(op == "=="))
        if left.high < right.low or right.high < left.low:
            return Span(int(op == "!="), int(op == "!="))
        return Span(0, 1)
    lower = op in ("<", "<=")  # monotone: the corners decide
    always = RELATIONS[op](left.high, right.low) if lower else RELATIONS[op](left.low, right.high)
    never = not (RELATIONS[op](left.low, right.high) if lower else RELATIONS[op](left.high, right.low))
    return Span(1, 1) if always else Span(0, 0) if never else Span(0, 1)


def refine(value: Span, op: str, constant: int, truth: bool) -> Span | None:
    """The part of ``value`` where ``x OP constant`` is ``truth``, None when empty."""
    if not truth:
        op = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}[op]
    low, high = {"<": (value.low, constant - 1), "<=": (value.low, constant), ">": (constant + 1, value.high),
                 ">=": (constant, value.high), "==": (constant, constant), "!=": (value.low, value.high)}[op]
    if op == "!=" and value.single == constant:
        return None
    return value.meet(low, high)


def constant_of(node: c_ast.Node) -> int | None:
    if isinstance(node, c_ast.Constant) and node.type == "int":
        return int(node.value.rstrip("uUlL"), 0)
    if isinstance(node, c_ast.UnaryOp) and node.op == "-" and (inner := constant_of(node.expr)) is not None:
        return -inner
    return None


def comparison(node: c_ast.Node) -> tuple[str, str, int] | None:
    """``(x, OP, c)`` when ``node`` compares the variable x with the integer constant c (either side)."""
    if not (isinstance(node, c_ast.BinaryOp) and node.op in RELATIONS):
        return None
    if isinstance(node.left, c_ast.ID) and (c := constant_of(node.right)) is not None:
        return node.left.name, node.op, c
    if isinstance(node.right, c_ast.ID) and (c := constant_of(node.left)) is not None:
        return node.right.name, FLIP[node.op], c
    return None


Env = dict[str, Span]


def span(node: c_ast.Node, env: Env, swap: tuple[int, c_ast.Node] | None = None) -> Span | None:
    """An interval holding every value of the integer expression ``node`` when each variable (or constant array)
    named in ``env`` holds a value in its span; ``swap``: (id of a node, the node evaluated in its place: a
    mutant's). None when ``node`` reads anything else, does what is not modelled, or can leave its type."""
    if swap is not None and id(node) == swap[0]:
        node = swap[1]
    found = _span(node, env, swap)
    return found if found is None or found.fits() else None


def _span(node: c_ast.Node, env: Env, swap: tuple[int, c_ast.Node] | None) -> Span | None:
    if isinstance(node, c_ast.Constant):
        value = constant_of(node)
        if value is None or "u" in node.value.lower() or (node.value[0] == "0" and node.value != "0" and
                                                          not -(1 << 31) <= value < (1 << 31)):
            return None  # unsigned arithmetic (a suffix u, a hexadecimal or octal beyond int) is not modelled
        bits = 64 if "l" in node.value.lower() or not -(1 << 31) <= value < (1 << 31) else 32
        return Span(value, value, bits)
    if isinstance(node, c_ast.ID):
        return env.get(node.name)
    if isinstance(node, c_ast.ArrayRef):  # a constant array's element: any of its values
        return env.get(node.name.name) if isinstance(node.name, c_ast.ID) else None
    if isinstance(node, c_ast.Cast):
        inner, target = span(node.expr, env, swap), type_bits(node.to_type)
        if inner is None or target is None:
            return None
        whole = type_span(*target)
        held = inner.meet(whole.low, whole.high)
        return replace(whole if held != inner else inner, bits=max(32, target[0]))  # else reduced modulo 2^N
    if isinstance(node, c_ast.UnaryOp):
        inner = span(node.expr, env, swap)
        if inner is None or node.op not in ("-", "~", "+"):
            return None
        return {"-": Span(-inner.high, -inner.low, inner.bits), "~": Span(~inner.high, ~inner.low, inner.bits),
                "+": inner}[node.op]
    if isinstance(node, c_ast.TernaryOp):
        return _select(node, env, swap)
    if not isinstance(node, c_ast.BinaryOp):
        return None
    left, right = span(node.left, env, swap), span(node.right, env, swap)
    if left is None or right is None:
        return None
    if node.op in RELATIONS:
        return relation(node.op, left, right)
    bits = max(left.bits, right.bits)
    if node.op in ("+", "-", "*"):
        values = [{"+": a + b, "-": a - b, "*": a * b}[node.op] for a in (left.low, left.high)
                  for b in (right.low, right.high)] if node.op == "*" else \
            [left.low + right.low, left.high + right.high] if node.op == "+" else \
            [left.low - right.high, left.high - right.low]
        return Span(min(values), max(values), bits)
    if node.op in (">>", "<<"):
        if not 0 <= right.low <= right.high < left.bits or (node.op == "<<" and left.low < 0):
            return None  # a shift by a negative or too large count, or of a negative value left: undefined
        values = [a >> b if node.op == ">>" else a << b for a in (left.low, left.high) for b in (right.low, right.high)]
        return Span(min(values), max(values), left.bits)
    if node.op == "&":  # x & m lies in [0, m] for m >= 0, whatever x (two's complement)
        masks = [s.high for s in (left, right) if s.low >= 0]
        return Span(0, min(masks), bits) if masks else None
    return None


def _select(node: c_ast.TernaryOp, env: Env, swap: tuple[int, c_ast.Node] | None) -> Span | None:
    """``c ? a : b``: the arm the condition decides, else both, each with the compared variable narrowed."""
    condition = span(node.cond, env, swap)
    if condition is None:
        return None
    arms = []
    for truth, arm in ((True, node.iftrue), (False, node.iffalse)):
        if (condition.low == condition.high == 0) if truth else (condition.low > 0 or condition.high < 0):
            continue  # this arm is never taken
        narrowed = env
        compared = comparison(node.cond) if not (swap and id(node.cond) == swap[0]) else comparison(swap[1])
        if compared is not None and compared[0] in env:
            part = refine(env[compared[0]], compared[1], compared[2], truth)
            if part is None:
                continue
            narrowed = {**env, compared[0]: part}
        found = span(arm, narrowed, swap)
        if found is None:
            return None
        arms.append(found)
    if not arms:
        return None
    found = arms[0]
    for other in arms[1:]:
        found = found.union(other)
    return found


def differing(op: str, other: str, value: Span, constant: int) -> Span | None:
    """The smallest span holding every x of ``value`` for which ``x OP constant`` and ``x OTHER constant`` differ
    (both are constant on x < c, x == c and x > c, so one point of each part decides it), None when none does."""
    parts = [value.meet(a, b) for a, b in ((value.low, constant - 1), (constant, constant), (constant + 1, value.high))]
    found = [p for p in parts if p is not None and RELATIONS[op](p.low, constant) != RELATIONS[other](p.low, constant)]
    return Span(found[0].low, found[-1].high, value.bits) if found else None


@dataclass(frozen=True)
class Restriction:
    """Where a mutant can differ from the clean code: the variable ``name`` in [low, high] when the mutated node is
    evaluated (the variable is a ``const`` local, or not written in the statements run)."""

    name: str
    low: int
    high: int


def where_it_differs(path: list[c_ast.Node], op: str, other: str, env: Env) -> list[Restriction] | None:
    """The restrictions under which the mutant that makes the binary node ``path[-1]``'s ``op`` into ``other`` can
    give another value, ``path`` its enclosing nodes from the statement down: a comparison of a variable with a
    constant differs only where ``differing`` says, ``e + s`` and ``e - s`` only where ``s`` is not 0 (a
    select of 0 on one side), and a node inside an arm of a select of a variable only where that arm is taken.
    None when the mutant cannot differ anywhere (a restriction is empty)."""
    node, found = path[-1], []
    compared = comparison(node)
    if compared is not None and op in RELATIONS and compared[0] in env:
        name, _, constant = compared
        first, second = (op, other) if isinstance(node.left, c_ast.ID) else (FLIP[op], FLIP[other])
        part = differing(first, second, env[name], constant)
        if part is None:
            return None
        found.append(Restriction(name, part.low, part.high))
    if op in ("+", "-") and isinstance(node.right, c_ast.TernaryOp) and (c := comparison(node.right.cond)):
        zero = [truth for truth, arm in ((True, node.right.iftrue), (False, node.right.iffalse))
                if constant_of(arm) == 0]
        if len(zero) == 1 and c[0] in env:  # differs only where the other arm is taken
            part = refine(env[c[0]], c[1], c[2], not zero[0])
            if part is None:
                return None
            found.append(Restriction(c[0], part.low, part.high))
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, c_ast.TernaryOp) and child is not parent.cond and (c := comparison(parent.cond)) \
                and c[0] in env:
            part = refine(env[c[0]], c[1], c[2], child is parent.iftrue)
            if part is None:
                return None
            found.append(Restriction(c[0], part.low, part.high))
    return found


def cuts(items: list[c_ast.Node]) -> dict[str, set[int]]:
    """Per variable, the constants the statements ``items`` compare it with: where its span is split."""
    found: dict[str, set[int]] = {}
    for item in items:
        for node in walk(item):
            if (c := comparison(node)) is not None:
                found.setdefault(c[0], set()).update((c[2], c[2] + 1))
    return found


def pieces(value: Span, at: set[int]) -> list[Span]:
    """``value`` split before every point of ``at`` inside it."""
    bounds = sorted(x for x in at if value.low < x <= value.high)
    starts = [value.low, *bounds]
    ends = [b - 1 for b in bounds] + [value.high]
    return [replace(value, low=a, high=b) for a, b in zip(starts, ends)]


class Masked:
    """The values a run of straight-line integer statements stores, over intervals: ``run`` follows every split of
    a variable's span at the constants the statements compare it with (``cuts``) and gives, per store in order,
    the union of the values stored (None when a statement is not modelled, a store's place depends on what the
    statements compute, or there are more than ``PATHS`` paths)."""

    def __init__(self, blocks: list[list[c_ast.Node]], restrictions: list[Restriction],
                 swap: tuple[int, c_ast.Node] | None):
        self.items = [item for block in blocks for item in block]
        self.restrictions = {r.name: r for r in restrictions}
        self.swap = swap
        self.cut = cuts(self.items)
        self.assigned = {assigned(item) for item in self.items} - {None}
        self.paths = 0

    def run(self, env: Env) -> list[Span] | None:
        """The values stored from the variables' spans ``env``, the restrictions applied: to a variable of
        ``env`` the statements do not write, or at the declaration of a ``const`` one (a variable they write
        otherwise: None). No store on a path the restrictions leave none of: ``[]``."""
        for name, r in self.restrictions.items():
            if name in self.assigned:
                if not any(isinstance(i, c_ast.Decl) and i.name == name and "const" in i.quals for i in self.items):
                    return None
                continue
            if name not in env:
                return None
            part = env[name].meet(r.low, r.high)
            if part is None:
                return []
            env = {**env, name: part}
        found = self._from(0, env)
        return [] if found is UNREACHED else found

    def _from(self, index: int, env: Env) -> list[Span] | tuple | None:
        """The stores from item ``index`` on, ``UNREACHED`` when no value of ``env`` reaches them."""
        self.paths += 1
        if self.paths > PATHS:
            return None
        if index == len(self.items):
            return []
        item = self.items[index]
        if isinstance(item, c_ast.Assignment) and isinstance(item.lvalue, c_ast.ArrayRef) and item.op == "=":
            if any(isinstance(n, c_ast.ID) and n.name in self.assigned for n in walk(item.lvalue)):
                return None
            stored, rest = span(item.rvalue, env, self.swap), self._from(index + 1, env)
            return None if stored is None or rest is None else rest if rest is UNREACHED else [stored, *rest]
        name = assigned(item)
        if name is None:
            return None
        if isinstance(item, c_ast.Decl):
            kind = type_bits(item)
            if kind is None:
                return None
            whole = type_span(*kind)
            value = whole if item.init is None else span(item.init, env, self.swap)
            if value is not None and value.meet(whole.low, whole.high) != value:
                value = whole  # reduced modulo 2^N
        else:
            value = span(item.rvalue, env, self.swap) if item.op == "=" else None
            if value is not None and (name not in env or value.meet(env[name].low, env[name].high) != value):
                value = None  # a variable of no known type, or a value it may not hold
        if value is None:
            return None
        if name in self.restrictions and isinstance(item, c_ast.Decl) and "const" in item.quals:
            value = value.meet(self.restrictions[name].low, self.restrictions[name].high)
            if value is None:
                return UNREACHED
        found: list[Span] | tuple = UNREACHED
        for part in pieces(value, self.cut.get(name, set())):
            rest = self._from(index + 1, {**env, name: part})
            if rest is None or (found is not UNREACHED and rest is not UNREACHED and len(rest) != len(found)):
                return None
            found = found if rest is UNREACHED else rest if found is UNREACHED else \
                [a.union(b) for a, b in zip(found, rest)]
        return found


def assigned(item: c_ast.Node) -> str | None:
    """The variable a declaration or a plain assignment to a variable defines, else None."""
    if isinstance(item, c_ast.Decl) and isinstance(item.type, c_ast.TypeDecl):
        return item.name
    if isinstance(item, c_ast.Assignment) and isinstance(item.lvalue, c_ast.ID):
        return item.lvalue.name
    return None


def walk(node: c_ast.Node):
    """``node`` and every node under it."""
    yield node
    for child in node:
        yield from walk(child)
