"""Loop bounds read from generated C itself (pycparser), independently of the generator's manifest.

``source_loops(sources)`` parses each C file and returns every ``for`` loop of
the chosen functions that is a *counted loop*, with its trip count, and a
problem for every loop that is not one. A counted loop is::

    for (int i = A; i <  B; ++i)     trip count max(0, ceil((B - A) / k)) with step k
    for (int i = A; i <= B; i++)     ... floor((B - A) / k) + 1
    for (i = A; i < B; i += k)       (i declared before; k > 0)
    for (int i = A; i > B; --i)      and the decreasing mirrors: >, >=, i--, i -= k

with ``A``, ``B`` and ``k`` integer literals (a leading ``-`` allowed), ``i`` an
integer variable the body never assigns, increments, decrements or takes the
address of. A *run-time bound* ``B`` is also read: a field of a struct, ``p->f``
or ``t[j].f`` (a generic library whose bounds come from a layer descriptor,
assay-v1), with ``p``, ``t`` and ``j`` variables the body never changes; such a
loop has ``bound`` None and ``bound_expr`` the C text of ``B``, and its value
per call must come from elsewhere (``initialisers`` reads the table the
pointers point into). Anything else in the analysed functions (a ``for`` of another
shape, ``while``, ``do``, ``goto``) is a problem naming the file, line and
function: nothing is silently unbounded.

The trip count is the loop's bound as OTAWA understands it (back-edge
traversals per entry of the loop): at -O0 gcc lays a ``for`` out as ``init;
goto cond; body: ...; step; cond: if (i < B) goto body``, whose header is the
condition block (carrying the ``for``'s line in the DWARF line table) and whose
back edge, step -> condition, is taken once per iteration. A rotated loop
(-O1 and up: ``if (cond) do body while (cond)``) takes its back edge one time
fewer, so the trip count is safe there too.

Preprocessing: the host or target C compiler's ``-E`` with ``-nostdinc`` and
stand-in system headers (standard integer types and the ``math.h`` macros
generated code uses), so pycparser sees plain C99 and the line markers keep
every node's original file and line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pycparser import c_ast, c_parser

from wcet.errors import ConfigurationError, WcetError

# Stand-ins for the C library headers a generated file may include: pycparser
# needs typedef names declared, nothing else.
FAKE_LIBC = """\
#ifndef ASSAY_FAKE_LIBC
#define ASSAY_FAKE_LIBC
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long long int64_t; typedef unsigned long long uint64_t;
typedef int intptr_t; typedef unsigned int uintptr_t;
typedef unsigned int size_t; typedef int ptrdiff_t;
typedef int int_fast32_t; typedef unsigned int uint_fast32_t;
typedef int int_least32_t; typedef unsigned int uint_least32_t;
typedef float float_t; typedef double double_t;
typedef _Bool bool;
#define true 1
#define false 0
#define NULL ((void *)0)
#define INFINITY (1e999f)
#define NAN (0.0f / 0.0f)
#define HUGE_VALF INFINITY
#define HUGE_VAL INFINITY
#define FLT_MAX 3.40282347e+38F
#define FLT_MIN 1.17549435e-38F
#define FLT_EPSILON 1.19209290e-07F
#define INT8_MIN (-128)
#define INT8_MAX 127
#define UINT8_MAX 255
#define INT16_MIN (-32768)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define M_PI 3.14159265358979323846
#endif
"""


class SourceError(WcetError):
    """A generated C file that cannot be preprocessed or parsed."""


@dataclass(frozen=True)
class CLoop:
    """A counted ``for`` loop of the generated C."""

    file: str  # base name
    line: int  # the line of the ``for`` keyword
    function: str
    var: str
    bound: int | None  # trip count per entry of the loop; None for a run-time bound (``bound_expr``)
    parent: int | None  # line of the enclosing for loop in the same function, None for an outermost loop
    text: str  # the loop's head, for messages: "for (int i = 0; i < 8; ++i)"
    bound_expr: str | None = None  # a run-time bound's C expression, ``layer->out_h``: step 1, start 0

    def where(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


@dataclass
class SourceLoops:
    loops: list[CLoop]
    problems: list[str]  # every construct that is not a counted loop, named by file, line and function
    functions: dict[str, tuple[str, int]]  # every function defined: name -> (file, line)
    problem_lines: dict[tuple[str, int], int] = field(default_factory=dict)  # (file, line) -> index in problems


def source_loops(sources: Iterable[Path], functions: set[str] | None = None, include_dirs: Iterable[Path] = (),
                 compiler: str = "gcc", defines: Iterable[str] = (), owned: Iterable[str] = ()) -> SourceLoops:
    """The counted loops of ``functions`` (None: every function) in ``sources``, and every problem.

    A function is analysed in the ``.c`` file that defines it, or, when it is defined in a header named in
    ``owned`` (file names: generated code that is header-only, such as emlearn's ``eml_net.h``), in the first
    ``.c`` file that includes it: once, whatever the number of files that include it.
    """
    result = SourceLoops([], [], {})
    owned = set(owned)
    for source in sources:
        source = Path(source)
        if source.suffix != ".c":
            continue
        unit = parse_c(source, include_dirs, compiler, defines, loop_free_bodies=False)
        for node in unit.ext:
            if not isinstance(node, c_ast.FuncDef):
                continue
            name = node.decl.name
            file = PurePosixPath(node.coord.file).name if node.coord else source.name
            if file != source.name and (file not in owned or name in result.functions):
                continue  # a function of another file: analysed with the file that owns it
            result.functions[name] = (file, node.coord.line if node.coord else 0)
            if functions is not None and name not in functions:
                continue
            _Visitor(name, result).visit(node.body)
    return result


def parse_c(source: Path, include_dirs: Iterable[Path] = (), compiler: str = "gcc",
            defines: Iterable[str] = (), loop_free_bodies: bool = True) -> c_ast.FileAST:
    """Preprocess (``compiler -E`` with stand-in libc headers) and parse one C file.

    ``loop_free_bodies=False``: the body of a function without any ``for``, ``while``, ``do`` or ``goto`` is
    left out (``_without_loop_free_bodies``); what ``source_loops`` reads of such a function, its name and
    line, is kept. V3 code is megabytes of loop-free statements that pycparser would take minutes over.
    """
    found = shutil.which(compiler)
    if found is None:
        raise ConfigurationError(f"reading loop bounds from C needs the preprocessor of '{compiler}'; install it "
                          "(Debian package 'gcc')")
    with tempfile.TemporaryDirectory(prefix="assay-cpp-") as stubs:
        stub_dir = Path(stubs)
        for header in _system_includes(source, include_dirs):
            path = stub_dir / header
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(FAKE_LIBC)
        command = [found, "-E", "-std=c99", "-nostdinc", "-undef", "-D__STDC__=1", "-D__STDC_VERSION__=199901L",
                   *(f"-D{d}" for d in defines), f"-I{source.parent}",
                   *(f"-I{d}" for d in include_dirs), f"-isystem{stub_dir}", str(source)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        first = next((l for l in result.stderr.splitlines() if "error" in l), result.stderr.strip()[:200])
        raise SourceError(f"{source}: cannot preprocess: {first}")
    text = result.stdout if loop_free_bodies else _without_loop_free_bodies(result.stdout)
    try:
        return c_parser.CParser().parse(text, filename=str(source))
    except c_parser.ParseError as exc:  # "file:line:col: message"
        raise SourceError(f"{source}: not C that pycparser reads: {exc}") from None


_TOKENS = re.compile(r'^#[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[{}]|\b(?:for|while|do|goto)\b', re.MULTILINE)


def _without_loop_free_bodies(text: str) -> str:
    """Preprocessed C with the body of every function that has no ``for``, ``while``, ``do`` or ``goto``
    emptied: its lines blanked (line markers kept), so every other line keeps its number.

    Only what the scan needs is tokenised: line markers and other directives, string and character literals
    (braces and keywords in them do not count), braces and the four keywords. A function body is a brace
    block at file scope that follows a ``)``; other file-scope braces (structures, initialisers) are kept.
    """
    pieces, kept, depth, body, loops = [], 0, 0, None, False
    for token in _TOKENS.finditer(text):
        word = token.group()
        if word == "{":
            before = token.start() - 1
            while before >= 0 and text[before] in " \t\r\n":
                before -= 1
            if depth == 0 and before >= 0 and text[before] == ")":
                body, loops = token.end(), False
            depth += 1
        elif word == "}":
            depth -= 1
            if depth == 0 and body is not None:
                if not loops:
                    lines = text[body:token.start()].split("\n")
                    pieces += [text[kept:body], "\n".join(line if line.startswith("#") else "" for line in lines)]
                    kept = token.start()
                body = None
        elif word in ("for", "while", "do", "goto"):
            loops = True
    return "".join(pieces) + text[kept:]


def _system_includes(source: Path, include_dirs: Iterable[Path]) -> set[str]:
    """Every <header> named by the file and its local headers (includes found beside it or on the include
    path, whichever the quotes), that is not itself a local header."""
    seen_files, headers = set(), set()
    pending = [source]
    search = [source.parent, *map(Path, include_dirs)]
    while pending:
        path = pending.pop()
        if path in seen_files or not path.is_file():
            continue
        seen_files.add(path)
        for line in path.read_text(errors="replace").splitlines():
            stripped = line.strip()
            if not stripped.startswith("#"):
                continue
            directive = stripped[1:].strip()
            if not directive.startswith("include"):
                continue
            rest = directive[len("include"):].strip()
            if rest.startswith("<") and ">" in rest:
                name = rest[1:rest.index(">")]
                local = [directory / name for directory in search if (directory / name).is_file()]
                if local:  # a generated header included with <>: read, not stood in for (emlearn's eml_net.h)
                    pending += local
                else:
                    headers.add(name)
            elif rest.startswith('"') and rest.count('"') >= 2:
                name = rest[1:rest.index('"', 1)]
                pending += [directory / name for directory in search]
    return headers


class _Visitor(c_ast.NodeVisitor):
    def __init__(self, function: str, result: SourceLoops):
        self.function = function
        self.result = result
        self.open: list[CLoop | None] = []  # enclosing for loops (None: one that is not counted)

    def _where(self, node: c_ast.Node) -> str:
        coord = node.coord
        file = PurePosixPath(coord.file).name if coord else "?"
        return f"{file}:{coord.line if coord else 0} in {self.function}"

    def _problem(self, node: c_ast.Node, message: str) -> None:
        self.result.problems.append(f"{self._where(node)}: {message}")
        if node.coord:
            key = (PurePosixPath(node.coord.file).name, node.coord.line)
            self.result.problem_lines.setdefault(key, len(self.result.problems) - 1)

    def visit_While(self, node: c_ast.While) -> None:
        self._problem(node, "'while' loop: not a counted loop (generated code must use counted for loops)")
        self.generic_visit(node)

    def visit_DoWhile(self, node: c_ast.DoWhile) -> None:
        if _constant(node.cond) != 0:  # 'do { ... } while (0)', the statement-macro idiom, runs once: no loop
            self._problem(node, "'do ... while' loop: not a counted loop (generated code must use counted for "
                                "loops)")
        self.generic_visit(node)

    def visit_Goto(self, node: c_ast.Goto) -> None:
        self._problem(node, f"'goto {node.name}': may form a loop the analysis cannot bound")

    def visit_For(self, node: c_ast.For) -> None:
        head = _head_text(node)
        counted = _counted(node)
        if isinstance(counted, str):
            self._problem(node, f"'{head}' is not a counted loop: {counted}")
            loop = None
        else:
            var, bound, expression = counted
            parent = next((l for l in reversed(self.open) if l is not None), None)
            coord = node.coord
            loop = CLoop(file=PurePosixPath(coord.file).name, line=coord.line, function=self.function, var=var,
                         bound=bound, parent=parent.line if parent else None, text=head, bound_expr=expression)
            self.result.loops.append(loop)
        self.open.append(loop)
        if node.stmt is not None:
            self.visit(node.stmt)
        self.open.pop()


def _head_text(node: c_ast.For) -> str:
    from pycparser.c_generator import CGenerator

    generator = CGenerator()
    parts = []
    for part in (node.init, node.cond, node.next):
        if part is None:
            parts.append("")
        elif isinstance(part, c_ast.DeclList):
            parts.append(", ".join(generator.visit(d) for d in part.decls))
        else:
            parts.append(generator.visit(part))
    return f"for ({'; '.join(parts)})"


def _counted(node: c_ast.For) -> tuple[str, int | None, str | None] | str:
    """(variable, trip count, None) of a counted loop, (variable, None, the bound's C text) of a loop from 0 by
    1 up to a struct field, or why the loop is not one."""
    # init: "int i = A" or "i = A"
    init = node.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1:
        decl = init.decls[0]
        if not _integer_type(decl.type):
            return "the loop variable is not an integer"
        var, start = decl.name, _constant(decl.init)
    elif isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
        var, start = init.lvalue.name, _constant(init.rvalue)
    else:
        return "the initialisation is not 'int i = constant' or 'i = constant'"
    if start is None:
        return "the initial value is not an integer literal"
    # condition: "i < B", "i <= B", "i > B", "i >= B"
    cond = node.cond
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=", ">", ">=")
            and isinstance(cond.left, c_ast.ID) and cond.left.name == var):
        return f"the condition is not '{var} < constant' (or <=, >, >=)"
    limit = _constant(cond.right)
    field_bound = _field_bound(cond.right) if limit is None else None
    if limit is None and field_bound is None:
        return "the limit is not an integer literal or a struct field"
    # step: ++i, i++, i += k, i = i + k (and the decreasing forms)
    step = _step(node.next, var)
    if step is None:
        return f"the step is not '++{var}', '{var}++', '{var} += constant' or their decreasing forms"
    if step == 0:
        return "the step is zero"
    if (cond.op in ("<", "<=")) != (step > 0):
        return "the step moves away from the limit"
    if _assigns(node.stmt, var):
        return f"the body changes '{var}'"
    if field_bound is not None:
        changed = [name for name in field_bound if _assigns(node.stmt, name)]
        if changed:
            return f"the body changes '{changed[0]}', which the limit reads"
        if start != 0 or step != 1 or cond.op != "<":
            return "a limit read from a struct field needs 'for (i = 0; i < field; ++i)'"
        from pycparser.c_generator import CGenerator

        return var, None, CGenerator().visit(cond.right)
    distance = limit - start if step > 0 else start - limit
    size = abs(step)
    if cond.op in ("<", ">"):
        trips = max(0, -(-distance // size))
    else:
        trips = max(0, distance // size + 1)
    return var, trips, None


def _field_bound(node: c_ast.Node) -> list[str] | None:
    """The variables a run-time bound ``p->f`` or ``t[j].f`` reads, or None if ``node`` is not one."""
    if not isinstance(node, c_ast.StructRef) or not isinstance(node.field, c_ast.ID):
        return None
    base = node.name
    if node.type == "->" and isinstance(base, c_ast.ID):
        return [base.name]
    if (node.type == "." and isinstance(base, c_ast.ArrayRef) and isinstance(base.name, c_ast.ID)
            and isinstance(base.subscript, c_ast.ID)):
        return [base.name.name, base.subscript.name]
    return None


def initialisers(source: Path, symbol: str, include_dirs: Iterable[Path] = (), compiler: str = "gcc") -> list[dict]:
    """The elements of the array ``symbol`` as the C initialises it (designated ``[k] = {.f = v}`` or
    positional ``{.f = v}``): per element, each field's value (an int, a name such as a function's, a list for
    an array field, the C text for anything else). Read from ``source`` (which defines or includes it), so a
    run-time bound ``layer->f`` has a value per element that does not come from the generator's manifest."""
    unit = parse_c(Path(source), include_dirs, compiler)
    for node in unit.ext:
        if isinstance(node, c_ast.Decl) and node.name == symbol and isinstance(node.init, c_ast.InitList):
            break
    else:
        raise SourceError(f"{source}: no initialised array '{symbol}'")
    elements: dict[int, dict] = {}
    position = 0
    for item in node.init.exprs:
        if isinstance(item, c_ast.NamedInitializer):
            designator = item.name[0] if len(item.name) == 1 else None
            index = _constant(designator.expr) if isinstance(designator, c_ast.ArrayDesignator) else None
            if index is None:
                raise SourceError(f"{source}: '{symbol}' has a designator that is not [constant]")
            position, item = index, item.expr
        if not isinstance(item, c_ast.InitList):
            raise SourceError(f"{source}: element {position} of '{symbol}' is not a braced initialiser")
        elements[position] = _fields(item)
        position += 1
    return [elements.get(k, {}) for k in range(max(elements, default=-1) + 1)]


def _fields(init: c_ast.InitList) -> dict:
    from pycparser.c_generator import CGenerator

    fields = {}
    for item in init.exprs:
        if isinstance(item, c_ast.NamedInitializer) and len(item.name) == 1 and isinstance(item.name[0], c_ast.ID):
            fields[item.name[0].name] = _value(item.expr, CGenerator())
    return fields


def _value(node: c_ast.Node, generator) -> object:
    if isinstance(node, c_ast.InitList):
        return [_value(e, generator) for e in node.exprs]
    constant = _constant(node)
    if constant is not None:
        return constant
    if isinstance(node, c_ast.ID):
        return node.name
    return generator.visit(node)


def _integer_type(node: c_ast.Node) -> bool:
    if not isinstance(node, c_ast.TypeDecl) or not isinstance(node.type, c_ast.IdentifierType):
        return False
    names = node.type.names
    return bool(names) and all(n in ("int", "long", "short", "unsigned", "signed", "char", "size_t", "int32_t",
                                     "uint32_t", "int16_t", "uint16_t", "int8_t", "uint8_t") for n in names)


def _constant(node: c_ast.Node | None) -> int | None:
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        value = _constant(node.expr)
        return None if value is None else (-value if node.op == "-" else value)
    if isinstance(node, c_ast.Constant) and node.type in ("int", "unsigned int", "long int", "unsigned long int",
                                                          "long long int", "unsigned long long int"):
        text = node.value.rstrip("uUlL")
        try:
            if text[:2] in ("0x", "0X"):
                return int(text[2:], 16)
            if text[:2] in ("0b", "0B"):
                return int(text[2:], 2)
            if len(text) > 1 and text.startswith("0"):
                return int(text, 8)
            return int(text)
        except ValueError:
            return None
    return None


def _step(node: c_ast.Node | None, var: str) -> int | None:
    if isinstance(node, c_ast.UnaryOp) and isinstance(node.expr, c_ast.ID) and node.expr.name == var:
        return {"++": 1, "p++": 1, "--": -1, "p--": -1}.get(node.op)
    if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID) and node.lvalue.name == var:
        if node.op in ("+=", "-="):
            value = _constant(node.rvalue)
            return None if value is None else (value if node.op == "+=" else -value)
        if node.op == "=" and isinstance(node.rvalue, c_ast.BinaryOp) and node.rvalue.op in ("+", "-"):
            binary = node.rvalue
            if isinstance(binary.left, c_ast.ID) and binary.left.name == var:
                value = _constant(binary.right)
                return None if value is None else (value if binary.op == "+" else -value)
            if binary.op == "+" and isinstance(binary.right, c_ast.ID) and binary.right.name == var:
                return _constant(binary.left)
    return None


def _assigns(node: c_ast.Node | None, var: str) -> bool:
    """Whether ``node`` may change ``var``: an assignment, ++/--, or its address taken.

    A declaration of another ``var`` in an inner scope shadows it; this check is
    conservative and counts writes to the shadowing variable too.
    """
    if node is None:
        return False
    for child in _walk(node):
        if isinstance(child, c_ast.Assignment) and isinstance(child.lvalue, c_ast.ID) and child.lvalue.name == var:
            return True
        if (isinstance(child, c_ast.UnaryOp) and child.op in ("++", "p++", "--", "p--", "&")
                and isinstance(child.expr, c_ast.ID) and child.expr.name == var):
            return True
    return False


def _walk(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk(child)
