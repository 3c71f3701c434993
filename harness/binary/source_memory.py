"""Stack arrays and heap allocation read from C source, for generated code that cannot be compiled.

keras2c's code from PyPI includes a backend the package does not ship (docs/peers.md, K2), so there is no
ELF to bound the stack of. What its C itself says is still a memory finding worth reporting rather than
hiding (the paper's §4.3): how many bytes of arrays each function declares as locals, the call paths from
the functions a caller would call, and which of them reach ``malloc``. This is a *lower* bound of the stack
(locals that are not arrays, saved registers and the missing backend's own frames are not counted), and the
heap finding is exact for the calls the source makes.

Parsing: ``wcet.csource.parse_c`` (gcc's preprocessor, stand-in libc headers, pycparser); a quoted include
that is missing is replaced by a header that declares the given type names opaquely, which is all pycparser
needs to read the code that uses them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pycparser import c_ast

from wcet.csource import parse_c

ALLOCATORS = ("malloc", "calloc", "realloc", "aligned_alloc")
# Bytes per element on the 32-bit ARM targets (and what gcc's host x86-64 gives for the float types).
_SIZES = {"char": 1, "int8_t": 1, "uint8_t": 1, "short": 2, "int16_t": 2, "uint16_t": 2, "int": 4,
          "int32_t": 4, "uint32_t": 4, "float": 4, "size_t": 4, "long": 4, "double": 8, "int64_t": 8,
          "uint64_t": 8}


@dataclass
class SourceFunction:
    name: str
    local_array_bytes: int = 0  # automatic (non-static) arrays of known element type and constant size
    calls: list[str] = field(default_factory=list)


def analyse(sources: Iterable[Path], entries: list[str], opaque_types: Iterable[str] = ()) -> dict:
    """The source memory finding of ``entries`` (the functions a caller calls, in order) in ``sources``."""
    functions: dict[str, SourceFunction] = {}
    with tempfile.TemporaryDirectory(prefix="assay-stub-") as stubs:
        for source in sources:
            source = Path(source)
            if source.suffix != ".c":
                continue
            _stub_missing_includes(source, Path(stubs), list(opaque_types))
            unit = parse_c(source, include_dirs=[Path(stubs)])
            for node in unit.ext:
                if isinstance(node, c_ast.FuncDef):
                    functions[node.decl.name] = _function(node)
    reports = []
    for entry in entries:
        if entry not in functions:
            continue
        depth, path = _deepest(entry, functions, ())
        heap = _heap_paths(entry, functions, ())
        reports.append({"entry": entry, "local_array_bytes_on_deepest_path": depth, "deepest_path": list(path),
                        "heap": [" -> ".join(p) for p in heap]})
    return {"origin": "C source (not compiled)",
            "functions": {f.name: {"local_array_bytes": f.local_array_bytes, "calls": sorted(set(f.calls))}
                          for f in functions.values()},
            "entries": reports,
            "stack_lower_bound": max((r["local_array_bytes_on_deepest_path"] for r in reports), default=0),
            "allocators": sorted({p.rsplit(" -> ", 1)[1] for r in reports for p in r["heap"]})}


def _stub_missing_includes(source: Path, stubs: Path, opaque_types: list[str]) -> None:
    """Write a stand-in for each quoted include of ``source`` that is not beside it."""
    declarations = "".join(f"typedef struct {name}_opaque {name};\n" for name in opaque_types)
    for line in source.read_text(errors="replace").splitlines():
        text = line.strip()
        if not text.startswith("#include") or '"' not in text:
            continue
        name = text.split('"')[1]
        if not (source.parent / name).is_file():
            stub = stubs / name
            stub.parent.mkdir(parents=True, exist_ok=True)
            guard = "ASSAY_STUB_TYPES"
            stub.write_text(f"#ifndef {guard}\n#define {guard}\n{declarations}#endif\n")


def _function(node: c_ast.FuncDef) -> SourceFunction:
    result = SourceFunction(node.decl.name)
    for child in _walk(node.body):
        if isinstance(child, c_ast.Decl) and isinstance(child.type, c_ast.ArrayDecl) and "static" not in child.storage:
            result.local_array_bytes += _array_bytes(child.type)
        elif isinstance(child, c_ast.FuncCall) and isinstance(child.name, c_ast.ID):
            result.calls.append(child.name.name)
    return result


def _array_bytes(node: c_ast.Node) -> int:
    count = 1
    while isinstance(node, c_ast.ArrayDecl):
        if not isinstance(node.dim, c_ast.Constant):
            return 0  # a size the source does not state: not counted (the figure is a lower bound)
        count *= int(node.dim.value.rstrip("uUlL"), 0)
        node = node.type
    names = node.type.names if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType) \
        else []
    element = next((_SIZES[n] for n in reversed(names) if n in _SIZES), 0)
    return count * element


def _deepest(name: str, functions: dict[str, SourceFunction], seen: tuple[str, ...]) -> tuple[int, tuple[str, ...]]:
    """Largest sum of local arrays along a call path from ``name`` through the functions the source defines."""
    function = functions[name]
    best, best_path = 0, ()
    for callee in dict.fromkeys(function.calls):
        if callee in functions and callee not in seen and callee != name:
            depth, path = _deepest(callee, functions, (*seen, name))
            if depth > best:
                best, best_path = depth, path
    return function.local_array_bytes + best, (name, *best_path)


def _heap_paths(name: str, functions: dict[str, SourceFunction], seen: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every call path from ``name`` to an allocator (one per allocator call site's function)."""
    paths = []
    for callee in dict.fromkeys(functions[name].calls):
        if callee in ALLOCATORS:
            paths.append((*seen, name, callee))
        elif callee in functions and callee not in seen and callee != name:
            paths += _heap_paths(callee, functions, (*seen, name))
    return paths


def _walk(node: c_ast.Node | None):
    if node is None:
        return
    yield node
    for _, child in node.children():
        yield from _walk(child)
