"""Static subscript bounds check: every affine array index of the generated C stays inside its array.

An out-of-bounds read executed only for some data (``m = x[k] > m ? x[k + 1] : m`` reads ``x[10]`` only
when the last element is the running maximum) is seen by the guard words and the sanitizers only when an
input drives it; when the input domain never does, no run sees it, yet the code is wrong. This check needs
no input: for every subscript ``a[e]`` whose array has a known extent (a declaration ``T a[N]`` in any
source or header, or the entry's pointer parameters with the manifest's input and output sizes) and whose
index ``e`` is affine in the counters of the enclosing ``for (int v = A; v < B; ++v)`` loops (constant
bounds, nothing else writing ``v``; ``const int`` locals defined by such expressions are substituted), the
exact range of ``e`` over the loops' box is compared with ``[0, N)``. Branches narrow the box only
through tests ``v >= c``, ``v < c`` (and the like) of a counter or of a local ``+-v + c`` (the padding
guards of a convolution). The values held in arrays are taken as unknown, so a test of them (``x[k] > m``)
may go either way and restricts nothing; a subscript under a test of its variables in any other form is
left unchecked, as is every subscript that is not affine (both counted). So a report is a subscript that
leaves its array for some iteration of its loops, on a path that some values of the arrays take: a
defect of the code whatever inputs happen to reach it.

A subscript can stay inside its array and still leave the tensor it means: the arena holds every intermediate
tensor, so a softmax whose max loop reads one past the logits (``arena[k + 1]``, ``k < 10``) reads another
tensor's float, or a dead one, inside the arena's declaration. When the manifest says where each layer's
code is (``layers[*].lines``), where each tensor lives (``layers[*].output``: symbol, offset, size) and
which tensors each layer takes (``inputs``: producers' indexes, null for the network input), every
subscript of a layer's code into a buffer that holds tensors (the arena, ``input``, ``output``) must also
lie inside the tensors that layer reads or writes: its inputs' places and its own output's (in-place code
reads what it wrote; a view's place is its source's, so reading through it is reading the source). Only
for sequential code (``arena`` and no ``parallel`` in the manifest): a core of parallel code reads the
copies it received in its own arena, places the manifest does not list per reader.

Why not an abstract interpreter (Frama-C, clang's analyzer): the generated code is loop nests over
constant bounds with affine indexes; an exact check of that shape fits in this file, runs in milliseconds
per mutant, and says exactly which subscript and which iteration range is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pycparser import c_ast, c_parser

from harness.binary.elf import merge_intervals
from harness.errors import AssayError
from harness.stages.mutate.operators import blank, syntax_tree, writes

Affine = dict[str, int]  # variable -> coefficient; "" holds the constant
_DECLARED = re.compile(r"\b(?:float|double|char|short|int|long|unsigned|signed|u?int(?:8|16|32|64)_t)\s+"
                       r"(?:const\s+)?(\w+)\s*\[\s*(\d+)\s*\]")


@dataclass(frozen=True)
class Violation:
    """A subscript that can leave its array, or the tensors its layer may touch (``layer``, ``allowed``): where,
    the index text, its range and the array's extent."""

    line: int
    array: str
    index: str
    low: int
    high: int
    extent: int
    layer: str | None = None
    allowed: tuple[tuple[int, int], ...] = ()

    def __str__(self) -> str:
        where = f"line {self.line}: {self.array}[{self.index}] indexes {self.low}..{self.high}"
        if self.layer is None:
            return f"{where}, {self.array} has {self.extent} elements"
        spans = ", ".join(f"{a}..{b - 1}" for a, b in self.allowed) or "none"
        return f"{where}, outside the tensors layer {self.layer} takes and makes there ({spans})"


@dataclass(frozen=True)
class Span:
    """A layer's code, lines ``first`` to ``last`` of its file, and per buffer that holds tensors the
    ranges [start, end) of it that the layer may touch: its inputs' places (adjacent or overlapping ones
    joined: one loop may read two inputs laid end to end) and its output's apart (a subscript that runs from
    an input into the output, as ``x[i + 1]`` over the last input float into an output laid just after it,
    is a defect, not in-place code)."""

    first: int
    last: int
    layer: str
    allowed: dict[str, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class Report:
    violations: tuple[Violation, ...]
    checked: int  # subscripts whose range was computed
    unchecked: int  # subscripts left out (not affine, unknown extent, or under a condition on their variables)


def extents(texts: list[str], manifest: dict) -> tuple[dict[str, int], str | None, list[int]]:
    """Array extents: declarations ``T a[N]`` of a scalar type T; the entry function's name and the sizes of
    its buffers, inputs then outputs (the full manifest's, or the small ``assay.json``'s two)."""
    found: dict[str, int] = {}
    for text in texts:
        for match in _DECLARED.finditer(blank(text)):
            found[match.group(1)] = int(match.group(2))
    entry = manifest.get("entry")
    if isinstance(entry, dict):
        sizes = [int(t["size"]) for t in [*manifest.get("inputs", []), *manifest.get("outputs", [])]]
        return found, entry.get("symbol"), sizes
    if entry is not None and "input_size" in manifest and "output_size" in manifest:
        return found, str(entry), [int(manifest["input_size"]), int(manifest["output_size"])]
    return found, None, []


def spans(manifest: dict, file: str) -> list[Span]:
    """The layers of sequential code in ``file`` that have an output place, each with the tensors it may touch;
    none when the manifest does not give the places (no ``arena`` nor ``integer_arenas``: quantized C's int8
    tensors, placed in elements of their arena as float tensors are; parallel code, another generator's)."""
    layers = manifest.get("layers") or []
    if not (manifest.get("arena") or manifest.get("integer_arenas")) or "parallel" in manifest:
        return []
    place = {layer["index"]: _place(layer["output"]) for layer in layers if "output" in layer}
    inputs = manifest.get("inputs") or []
    network_input = ("input", 0, int(inputs[0]["size"])) if len(inputs) == 1 else None
    found = []
    for layer in layers:
        if layer.get("file") != file or "output" not in layer or not layer.get("lines"):
            continue
        producers = [p for p in (network_input if j is None else place.get(j) for j in layer.get("inputs") or [])
                     if p is not None]
        own = place[layer["index"]]
        allowed = {symbol: (*merge_intervals([(a, b) for s, a, b in producers if s == symbol]),
                            *([own[1:]] if own[0] == symbol else []))
                   for symbol in {s for s, _, _ in place.values()}}
        first, last = layer["lines"]
        found.append(Span(int(first), int(last), f"{layer['index']} {layer['name']}", allowed))
    return found


def _place(output: dict) -> tuple[str, int, int]:
    return output["symbol"], int(output["offset"]), int(output["offset"]) + int(output["size"])


def check(text: str, arrays: dict[str, int], name: str = "source", entry: str | None = None,
          buffers: list[int] | None = None, layers: list[Span] | None = None) -> Report:
    """The subscripts of the functions in C ``text`` that can leave their arrays: ``arrays`` (name -> extent) at
    file scope, and in the function ``entry`` its pointer parameters, in order, of the sizes ``buffers`` when
    they are as many (a parameter of any function hides a file-scope array of its name); and, on the lines of
    ``layers``, those that can leave the tensors the layer may touch in a buffer that holds tensors."""
    try:
        tree = syntax_tree(blank(text), name)
    except c_parser.ParseError as exc:
        raise AssayError(f"{name}: cannot parse for the bounds check: {exc}") from None
    walker = _Walker(arrays, layers or [])
    for definition in tree.ext:
        if isinstance(definition, c_ast.FuncDef):
            declared = [p for p in (definition.decl.type.args.params if definition.decl.type.args else [])
                        if getattr(p, "name", None)]
            walker.sizes = {k: v for k, v in arrays.items() if k not in {p.name for p in declared}}
            pointers = [p.name for p in declared if isinstance(p.type, c_ast.PtrDecl)]
            if definition.decl.name == entry and buffers and len(pointers) == len(declared) == len(buffers):
                walker.sizes.update(zip(pointers, buffers))
            walker.block(definition.body, {}, {}, frozenset())
    return Report(tuple(walker.violations), walker.checked, walker.unchecked)


def check_code(code_directory: Path, manifest: dict, file: str, text: str | None = None) -> Report:
    """``check`` of ``file`` of generated code (or of ``text`` in its place), extents from all its C files."""
    files = sorted(p for p in Path(code_directory).iterdir() if p.suffix in (".c", ".h") and p.name != file)
    own = (Path(code_directory) / file).read_text() if text is None else text
    arrays, entry, buffers = extents([p.read_text() for p in files] + [own], manifest)
    return check(own, arrays, file, entry, buffers, spans(manifest, file))


class _Walker:
    def __init__(self, sizes: dict[str, int], layers: list[Span]):
        self.sizes = sizes
        self.layers = layers
        self.violations: list[Violation] = []
        self.checked = 0
        self.unchecked = 0

    def block(self, node: c_ast.Node | None, box: dict[str, tuple[int, int]], names: dict[str, Affine],
              guarded: frozenset[str]) -> None:
        """Walk statement ``node`` with the loop counters' ranges ``box``, the const locals ``names`` (their
        affine definitions) and the variables a condition on the path mentions in a way not understood."""
        if node is None:
            return
        if isinstance(node, c_ast.Compound):
            names = dict(names)
            for item in node.block_items or []:
                self.block(item, box, names, guarded)
                if isinstance(item, c_ast.Decl):
                    self._declare(item, names)
            return
        if isinstance(node, c_ast.For):
            self._loop(node, box, names, guarded)
            return
        if isinstance(node, c_ast.If):
            self._branches(node, self.block, box, names, guarded)
            return
        if isinstance(node, (c_ast.While, c_ast.DoWhile)):  # a counter of an unknown range: nothing inside is checked
            self.block(node.stmt, box, names, guarded | frozenset(box) | frozenset(names))
            self.expression(node.cond, box, names, guarded | frozenset(box) | frozenset(names))
            return
        if isinstance(node, c_ast.Decl):
            if node.init is not None and not isinstance(node.init, c_ast.InitList):
                self.expression(node.init, box, names, guarded)
            return
        self.expression(node, box, names, guarded)

    def _declare(self, decl: c_ast.Decl, names: dict[str, Affine]) -> None:
        """Record ``const int v = <affine>``; any other local shadows an outer name with an unknown value."""
        names.pop(decl.name, None)
        if "const" in (decl.quals or []) and isinstance(decl.type, c_ast.TypeDecl) and \
                isinstance(decl.type.type, c_ast.IdentifierType) and decl.type.type.names == ["int"]:
            value = _affine(decl.init, names) if decl.init is not None else None
            if value is not None:
                names[decl.name] = value

    def _loop(self, node: c_ast.For, box: dict[str, tuple[int, int]], names: dict[str, Affine],
              guarded: frozenset[str]) -> None:
        counter = _counter(node)
        inner_box = dict(box)
        inner_names = {k: v for k, v in names.items() if counter is None or k != counter[0]}
        if counter is None:  # its variables are unknown in the body
            written = frozenset(d.name for d in node.init.decls) if isinstance(node.init, c_ast.DeclList) else \
                frozenset()
            self.block(node.stmt, inner_box, inner_names, guarded | written)
            return
        var, low, high = counter
        if low > high:  # the body never runs
            return
        inner_box[var] = (low, high)
        self.block(node.stmt, inner_box, inner_names, guarded - {var})

    def _branches(self, node: c_ast.If | c_ast.TernaryOp, visit, box: dict[str, tuple[int, int]],
                  names: dict[str, Affine], guarded: frozenset[str]) -> None:
        """An ``if`` statement or a ``?:`` expression: its condition, the true branch in the box the condition
        narrows, the false branch with the condition's variables unchecked; ``visit`` walks a branch."""
        self.expression(node.cond, box, names, guarded)
        inner_box, inner_guarded = self._narrow(node.cond, box, names, guarded)
        visit(node.iftrue, inner_box, names, inner_guarded)
        visit(node.iffalse, box, names, guarded | _variables(node.cond, names))

    def _narrow(self, cond: c_ast.Node, box: dict[str, tuple[int, int]], names: dict[str, Affine],
                guarded: frozenset[str]) -> tuple[dict[str, tuple[int, int]], frozenset[str]]:
        """The box inside the true branch of ``cond``: each ``v >= c``, ``v < c`` (and the like) of a counter
        narrows it; the variables of any other part of the condition become unchecked there."""
        box = dict(box)
        unknown = set(guarded)
        for part in _conjuncts(cond):
            bound = _simple_test(part)
            if bound is not None and bound[0] in box and bound[0] not in names:
                var, low, high = bound
                old = box[var]
                box[var] = (max(old[0], low), min(old[1], high))
            elif bound is not None and bound[0] in names and _unit_of_one(names[bound[0]], box) is not None:
                var, sign, offset = _unit_of_one(names[bound[0]], box)  # local = sign * var + offset
                low, high = sorted((sign * (bound[1] - offset), sign * (bound[2] - offset)))
                old = box[var]
                box[var] = (max(old[0], low), min(old[1], high))
            else:
                unknown |= _variables(part, names)
        return box, frozenset(unknown)

    def expression(self, node: c_ast.Node | None, box: dict[str, tuple[int, int]], names: dict[str, Affine],
                   guarded: frozenset[str]) -> None:
        if node is None:
            return
        if isinstance(node, c_ast.TernaryOp):
            self._branches(node, self.expression, box, names, guarded)
            return
        if isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||"):
            self.expression(node.left, box, names, guarded)
            self.expression(node.right, box, names, guarded | _variables(node.left, names))
            return
        if isinstance(node, c_ast.ArrayRef):
            self._subscript(node, box, names, guarded)
        for child in node:
            self.expression(child, box, names, guarded)

    def _subscript(self, node: c_ast.ArrayRef, box: dict[str, tuple[int, int]], names: dict[str, Affine],
                   guarded: frozenset[str]) -> None:
        array = node.name.name if isinstance(node.name, c_ast.ID) else None
        index = _affine(node.subscript, names)
        extent = self.sizes.get(array) if array else None
        if extent is None or index is None or any(v and (v not in box or v in guarded) for v in index):
            self.unchecked += 1
            return
        self.checked += 1
        if any(box[v][0] > box[v][1] for v in index if v):  # a branch no iteration takes
            return
        low = high = index.get("", 0)
        for var, coefficient in index.items():
            if var:
                a, b = coefficient * box[var][0], coefficient * box[var][1]
                low, high = low + min(a, b), high + max(a, b)
        if low < 0 or high >= extent:
            self.violations.append(Violation(node.coord.line, array, _text(node.subscript), low, high, extent))
            return
        for span in self.layers:
            allowed = span.allowed.get(array)
            if span.first <= node.coord.line <= span.last and allowed is not None and \
                    not any(a <= low and high < b for a, b in allowed):
                self.violations.append(Violation(node.coord.line, array, _text(node.subscript), low, high, extent,
                                                 span.layer, allowed))


def _unit_of_one(form: Affine, box: dict[str, tuple[int, int]]) -> tuple[str, int, int] | None:
    """(v, s, c) when the affine ``form`` is s * v + c for one counter v of ``box`` and s = 1 or -1."""
    terms = [(k, v) for k, v in form.items() if k]
    if len(terms) == 1 and terms[0][0] in box and terms[0][1] in (1, -1):
        return terms[0][0], terms[0][1], form.get("", 0)
    return None


def _counter(node: c_ast.For) -> tuple[str, int, int] | None:
    """(v, first, last) of ``for (int v = A; v < B; ++v)`` (or ``<=``) with constants and nothing else writing v."""
    init, cond, step = node.init, node.cond, node.next
    if not (isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and isinstance(init.decls[0].init, c_ast.Constant)
            and isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=") and isinstance(cond.left, c_ast.ID)
            and isinstance(cond.right, c_ast.Constant) and isinstance(step, c_ast.UnaryOp)
            and step.op in ("++", "p++") and isinstance(step.expr, c_ast.ID)):
        return None
    var = init.decls[0].name
    if cond.left.name != var or step.expr.name != var or writes(node.stmt, var):
        return None
    try:
        first, bound = _int(init.decls[0].init), _int(cond.right)
    except ValueError:
        return None
    return var, first, bound - 1 if cond.op == "<" else bound


def _affine(node: c_ast.Node, names: dict[str, Affine]) -> Affine | None:
    """``node`` as an affine integer form over counters (const locals substituted), or None if it is not one."""
    if isinstance(node, c_ast.Constant):
        try:
            return {"": _int(node)}
        except ValueError:
            return None
    if isinstance(node, c_ast.ID):
        return dict(names[node.name]) if node.name in names else {node.name: 1}
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        inner = _affine(node.expr, names)
        return None if inner is None else {k: (-v if node.op == "-" else v) for k, v in inner.items()}
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        left, right = _affine(node.left, names), _affine(node.right, names)
        if left is None or right is None:
            return None
        sign = 1 if node.op == "+" else -1
        out = dict(left)
        for k, v in right.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v or k == ""}
    if isinstance(node, c_ast.BinaryOp) and node.op == "*":
        left, right = _affine(node.left, names), _affine(node.right, names)
        if left is None or right is None:
            return None
        for constant, other in ((left, right), (right, left)):
            if set(constant) <= {""}:
                c = constant.get("", 0)
                return {k: v * c for k, v in other.items() if v * c or k == ""}
    return None


def _int(node: c_ast.Constant) -> int:
    if node.type not in ("int", "unsigned int", "long int", "unsigned long int"):
        raise ValueError(node.value)
    return int(node.value.rstrip("uUlL"), 0)


def _conjuncts(node: c_ast.Node) -> list[c_ast.Node]:
    if isinstance(node, c_ast.BinaryOp) and node.op == "&&":
        return [*_conjuncts(node.left), *_conjuncts(node.right)]
    return [node]


def _simple_test(node: c_ast.Node) -> tuple[str, float, float] | None:
    """(v, low, high) that ``v op c`` or ``c op v`` (integer constant c) keeps v within, or None."""
    if not (isinstance(node, c_ast.BinaryOp) and node.op in ("<", "<=", ">", ">=")):
        return None
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    if isinstance(node.left, c_ast.ID) and isinstance(node.right, c_ast.Constant):
        var, op, constant = node.left.name, node.op, node.right
    elif isinstance(node.right, c_ast.ID) and isinstance(node.left, c_ast.Constant):
        var, op, constant = node.right.name, flip[node.op], node.left
    else:
        return None
    try:
        c = _int(constant)
    except ValueError:
        return None
    inf = float("inf")
    return {"<": (var, -inf, c - 1), "<=": (var, -inf, c), ">": (var, c + 1, inf), ">=": (var, c, inf)}[op]


def _variables(node: c_ast.Node | None, names: dict[str, Affine]) -> frozenset[str]:
    """The identifiers a condition ``node`` tests, with the counters behind each const local it names; not
    those inside a subscript: ``x[k] > m`` tests a value held in an array, which may be anything, and says
    nothing of which ``k`` reach the branch."""
    found: set[str] = set()
    for child in _outside_subscripts(node) if node is not None else ():
        if isinstance(child, c_ast.ID):
            found.add(child.name)
            found |= {k for k in names.get(child.name, {}) if k}
    return frozenset(found)


def _outside_subscripts(node: c_ast.Node):
    yield node
    if isinstance(node, c_ast.ArrayRef):
        return
    for child in node:
        yield from _outside_subscripts(child)


def _walk(node: c_ast.Node):
    yield node
    for child in node:
        yield from _walk(child)


def _text(node: c_ast.Node) -> str:
    from pycparser import c_generator
    return c_generator.CGenerator().visit(node)
