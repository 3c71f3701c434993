"""Parameters (weights, biases, folded batch-norm factors) as C data.

Two modes:

* ``c``: ``const float <prefix><layer>_<what>[N] = {...};`` in ``<prefix>params.c``,
  values printed with ``%.9g`` so each float32 reads back exactly;
* ``incbin``: every array concatenated into ``<prefix>weights.bin``
  (little-endian float32), linked by ``<prefix>weights.S`` with ``.incbin`` as
  one symbol ``<prefix>weights``; the header ``#define``s each parameter as a
  constant offset into it. No C text proportional to the parameter count is
  built, so 60M-parameter models stay cheap to generate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codegen.cwriter import c_ident
from codegen.ir import Graph

PER_LINE = 8
AUTO_INCBIN_ABOVE = 1_000_000


# Parameter arrays by numpy type: quantized weights keep their 8 bits; other integers (index tables, int32 biases
# and requantization constants) are ``int`` (32 bits on every target).
CTYPES = {np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t", np.dtype(np.int32): "int",
          np.dtype(np.float32): "float"}


@dataclass(frozen=True)
class Param:
    symbol: str
    values: np.ndarray  # flat float32, int32 (index tables, quantized biases), or int8/uint8 (quantized weights)

    @property
    def ctype(self) -> str:
        return CTYPES[self.values.dtype]


@dataclass(frozen=True)
class ParamFiles:
    sources: list[str]  # to compile and link
    header: str  # file name of the header declaring every parameter
    data_symbols: list[str]  # global data symbols defined


def collect(graph: Graph, prefix: str) -> tuple[list[Param], dict[tuple[int, str], str]]:
    """Name every parameter array ``<prefix><layer>_<what>``, unique across the model."""
    params, symbols, taken = [], {}, set()
    for node in graph.nodes:
        for key, array in node.params.items():
            base = f"{prefix}{c_ident(node.name)}_{c_ident(key)}"
            symbol, n = base, 1
            while symbol in taken:
                symbol, n = f"{base}_{n}", n + 1
            taken.add(symbol)
            symbols[(id(node), key)] = symbol
            dtype = np.asarray(array).dtype
            dtype = dtype if dtype in (np.int8, np.uint8) else np.int32 if np.issubdtype(dtype, np.integer) \
                else np.float32
            params.append(Param(symbol, np.ascontiguousarray(array, dtype=dtype).reshape(-1)))
    return params, symbols


def resolve_mode(mode: str, params: list[Param]) -> str:
    if mode not in ("auto", "c", "incbin"):
        raise ValueError(f"weights must be 'c', 'incbin' or 'auto', not {mode!r}")
    if mode == "auto":
        return "incbin" if sum(p.values.size for p in params if p.ctype == "float") > AUTO_INCBIN_ABOVE else "c"
    return mode


def write(params: list[Param], out_dir: Path, prefix: str, mode: str, banner: str) -> ParamFiles:
    header = f"{prefix}params.h"
    guard = f"{prefix.upper()}PARAMS_H"
    lines = [f"/* {banner} */", f"#ifndef {guard}", f"#define {guard}", ""]
    if any(p.ctype.endswith("_t") for p in params):
        lines += ["#include <stdint.h>", ""]
    # Integer arrays (index tables, quantized weights) are always C text; float parameters follow the mode.
    in_c = params if mode == "c" else [p for p in params if p.ctype != "float"]
    lines += [f"extern const {p.ctype} {p.symbol}[{p.values.size}];" for p in in_c]
    sources, symbols = [], [p.symbol for p in in_c]
    if in_c:
        sources.append(f"{prefix}params.c")
        _write_c_arrays(in_c, out_dir / sources[0], header, banner)
    if mode == "incbin":
        blob = f"{prefix}weights"
        floats = [p for p in params if p.ctype == "float"]
        offset = 0
        lines.append(f"extern const float {blob}[];")
        for p in floats:
            lines.append(f"#define {p.symbol} ({blob} + {offset})")
            offset += p.values.size
        with open(out_dir / f"{blob}.bin", "wb") as stream:
            for p in floats:
                p.values.astype("<f4", copy=False).tofile(stream)
        (out_dir / f"{blob}.S").write_text(_assembly(blob, banner))
        sources.append(f"{blob}.S")
        symbols.append(blob)
    lines += ["", f"#endif /* {guard} */", ""]
    (out_dir / header).write_text("\n".join(lines))
    return ParamFiles(sources, header, symbols)


def _write_c_arrays(params: list[Param], path: Path, header: str, banner: str) -> None:
    with open(path, "w") as stream:
        stream.write(f"/* {banner} */\n")
        if any(p.ctype == "float" and not np.all(np.isfinite(p.values)) for p in params):
            stream.write("#include <math.h>\n")
        stream.write(f'#include "{header}"\n')
        for p in params:
            stream.write(f"\nconst {p.ctype} {p.symbol}[{p.values.size}] = {{\n")
            stream.write(_format(p.values))
            stream.write("\n};\n")


def _format(values: np.ndarray) -> str:
    """The values as C initialisers, ``PER_LINE`` a line, vectorised."""
    integer = values.dtype != np.float32
    if integer:
        text = values.astype(str)
    else:
        text = np.char.mod("%.9g", values.astype(np.float64))
    if not integer and not np.all(np.isfinite(values)):
        text = np.where(np.isnan(values), "NAN", text)
        text = np.where(np.isposinf(values), "INFINITY", text)
        text = np.where(np.isneginf(values), "-INFINITY", text)
    rows = [", ".join(text[start:start + PER_LINE]) for start in range(0, text.size, PER_LINE)]
    return "    " + ",\n    ".join(rows)


def _assembly(blob: str, banner: str) -> str:
    return "\n".join([
        f"/* {banner} */",
        "    .section .rodata",
        "    .balign 16",
        f"    .global {blob}",
        f"    .type {blob}, %object",
        f"{blob}:",
        f'    .incbin "{blob}.bin"',
        f"    .size {blob}, . - {blob}",
        '    .section .note.GNU-stack,"",%progbits',
        "",
    ])
