"""Split-stream execution at layer boundaries, and weak mutation at the first layer output after the mutation.

A mutant of layer k (its edit on the layer's lines, ``layers[*].lines``; a weight mutant: the array read on them)
computes what the clean code computes before layer k. So its run can start at layer k, from the state the clean
code leaves there, instead of computing the layers before again on every input (split-stream execution); and
its layer k's output can be compared, bit for bit, with the clean code's (weak mutation, Howden 1982: the state
right after the mutated part). Both use the manifest's places of the layers' outputs and the clean code's layer
outputs (``harness.runners.probed``, one run of the judged inputs).

The program is the schema build (``schema``) with, in the same translation unit:

- a label before each layer's arena-region check (``harness.runners.arenacheck``'s ``hooks``) and, at the entry
  function's first line, ``switch (assay_schema_resume) { case k: goto ...; }``;
- after each layer's check, ``if (assay_schema_stop == k) return;``;
- ``assay_schema_entry``, the driver's entry, which before calling the code's entry restores, for a run resumed at
  layer k, the arena floats that layer k's check does not overwrite (the live tensors, and its own output when it
  reads it) from a state file beside the inputs (``STATE_FILE``: per input, those floats, then, for a weak run,
  the clean code's output of layer k), and after a run stopped at layer k writes 0 to the first output when
  layer k's output equals the clean code's bit for bit, else 1.

The arena-region check fills everything else of the arena before layer k as in a whole run, so layer k and the
layers after it see exactly the floats a whole run gives them. A layer is resumable only when its code is the
entry function's, at its top level, after no declaration there (a ``goto`` skips nothing the layer reads), every
layer before it writes into the arena only, and each float it keeps was written by an earlier layer. The stage
checks each resumable layer once on the clean code (``Split.check``: resumed there, the outputs are the clean
code's bit for bit; stopped there, the layer's output is the clean one) and drops any that fails.

A mutant whose layer output is bit-identical to the clean code's on every judged input changes nothing later
layers read: its outputs would be the clean code's (the layers after it are the clean code, the arena check
having found no other write). It is reported as probably equivalent (class ``probably_equivalent``), never as
killed, and its whole run is not made; the sanitizers and the static bounds check still judge it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pycparser import c_ast

from harness.generators.generated import GeneratedCode
from harness.runners import arenacheck
from harness.stages.mutate import operators, schema

HOOKS = ("assay_schema_layer_{k}: ", "if (assay_schema_stop == {k}) return;")  # arenacheck.instrument's hooks
ENTRY = "assay_schema_entry"  # the driver's entry in a split program
RESUME, STOP, FLOATS = "ASSAY_RESUME", "ASSAY_STOP", "ASSAY_STATE_FLOATS"  # the run's environment
STATE_FILE = "assay_state.f32"


@dataclass(frozen=True)
class Layer:
    """A layer a run can start at and stop after: its index, lines, output place (symbol, offset, size), and the
    arena floats restored before it, each with the earlier layer whose output holds it and where in that output."""

    index: int
    lines: tuple[int, int]
    place: tuple[str, int, int]
    kept: np.ndarray  # arena positions
    producers: np.ndarray  # per kept position, the layer that wrote it last
    columns: np.ndarray  # per kept position, its place in that layer's output


def layers(code: GeneratedCode, text: str) -> dict[int, Layer]:
    """The resumable layers of ``code``'s entry file (its ``text``), by index; empty when the arena-region check
    does not apply or the entry is not a void function whose layers lie at its top level."""
    manifest, entry = code.manifest, code.manifest.get("entry")
    file = entry.get("file") if isinstance(entry, dict) else None
    if file is None or not arenacheck.applies(manifest):
        return {}
    definition = _entry_definition(code.directory / file, code.entry)
    if definition is None:
        return {}
    starts = _top_level_starts(definition)
    arena = manifest["arena"]
    overwritten = {k: [*free, *whole] for k, free, _, whole in arenacheck.regions(manifest)}
    producer, column = np.full(int(arena["floats"]), -1), np.zeros(int(arena["floats"]), np.int64)
    found, arena_only = {}, True
    for layer in manifest["layers"]:
        out = layer.get("output")
        if out is None:
            continue
        k, place = layer["index"], (out["symbol"], int(out["offset"]), int(out["size"]))
        first, last = layer["lines"]
        if arena_only and layer.get("file") == file and layer.get("function") == code.entry and first in starts \
                and k in overwritten:
            keep = np.ones(len(producer), bool)
            for a, b in overwritten[k]:
                keep[a:b] = False
            kept = np.flatnonzero(keep)
            if (producer[kept] >= 0).all():
                found[k] = Layer(k, (first, last), place, kept, producer[kept].copy(), column[kept].copy())
        if place[0] == arena["symbol"]:
            producer[place[1]:place[1] + place[2]] = k
            column[place[1]:place[1] + place[2]] = np.arange(place[2])
        else:
            arena_only = False
    return found


def _entry_definition(path: Path, name: str) -> c_ast.FuncDef | None:
    """The definition of the void function ``name`` in ``path``, None if it is not there or returns a value."""
    _, tree = operators.load(path)
    for definition in tree.ext:
        if isinstance(definition, c_ast.FuncDef) and definition.decl.name == name:
            returns = definition.decl.type.type
            void = isinstance(returns, c_ast.TypeDecl) and isinstance(returns.type, c_ast.IdentifierType) and \
                returns.type.names == ["void"]
            return definition if void else None
    return None


def _top_level_starts(definition: c_ast.FuncDef) -> set[int]:
    """The lines a layer may start at: any line up to the first line of each top-level statement of the body that
    follows the previous one (the comment lines above it); none after a top-level declaration."""
    starts, previous = set(), definition.body.coord.line
    for item in definition.body.block_items or []:
        if isinstance(item, (c_ast.Decl, c_ast.DeclList)):
            break
        starts.update(range(previous + 1, item.coord.line + 1))
        previous = _last_line(item)
    return starts


def _last_line(node: c_ast.Node) -> int:
    return max([node.coord.line if node.coord else 0, *(_last_line(child) for child in node)])


def instrument(text: str, code: GeneratedCode, found: dict[int, Layer]) -> str:
    """The schema ``text`` of the entry file with the dispatch at the entry's first line and the entry the driver
    calls (``ENTRY``) after the last; the labels and stops come with the arena check (``HOOKS``). Lines stay."""
    arena = code.manifest["arena"]["symbol"]
    source, tree = operators.parse(text, code.manifest["entry"]["file"])
    definition = next(d for d in tree.ext if isinstance(d, c_ast.FuncDef) and d.decl.name == code.entry)
    brace = source.offsets[source.token(definition.body)] + 1
    start = source.offsets[schema.first_token(source, definition)]
    cases = " ".join(f"case {k}: goto assay_schema_layer_{k};" for k in sorted(found) if k > 0)
    text = (text[:start] + "extern int assay_schema_resume, assay_schema_stop; " + text[start:brace]
            + f" switch (assay_schema_resume) {{ {cases} default: break; }}" + text[brace:])
    restore, compare = [], []
    for k, layer in sorted(found.items()):
        copies = "".join(f"        memcpy({arena} + {a}, state + {at}, {b - a} * sizeof(float));\n"
                         for at, a, b in _runs(layer.kept))
        restore.append(f"    case {k}:\n{copies}        break;")
        symbol, offset, size = layer.place
        where = "output" if symbol != arena else arena
        compare.append(f"    case {k}:\n        same = memcmp({where} + {offset}, state + {len(layer.kept)}, "
                       f"{size} * sizeof(float)) == 0;\n        break;")
    newline = "\n"
    return text + f"""
/* Added by Assay (harness/stages/mutate/split.py): a run resumed at a layer, or stopped after one. */
#include <string.h>

extern const float *assay_schema_state(void);

void {ENTRY}(const float *input, float *output)
{{
    const float *state = assay_schema_resume > 0 || assay_schema_stop >= 0 ? assay_schema_state() : 0;
    int same = 1;
    switch (assay_schema_resume) {{
{newline.join(restore)}
    default:
        break;
    }}
    {code.entry}(input, output);
    if (assay_schema_stop >= 0) {{
        switch (assay_schema_stop) {{
{newline.join(compare)}
        default:
            break;
        }}
        output[0] = same ? 0.0f : 1.0f;
    }}
}}
"""


def _runs(positions: np.ndarray) -> list[tuple[int, int, int]]:
    """Consecutive positions as (where in the state, first, end)."""
    runs, at = [], 0
    for run in np.split(positions, np.flatnonzero(np.diff(positions) != 1) + 1):
        if len(run):
            runs.append((at, int(run[0]), int(run[-1]) + 1))
            at += len(run)
    return runs


def layer_of(mutant: operators.Mutant, found: dict[int, Layer], text: str) -> int | None:
    """The resumable layer whose lines hold ``mutant``'s edit, or, for a weight mutant, that first reads its array
    (``text``: the entry file's); None when none does (the run starts at the beginning)."""
    if mutant.element is None:
        return next((k for k, layer in found.items() if layer.lines[0] <= mutant.line <= layer.lines[1]), None)
    lines = text.splitlines()
    pattern = re.compile(rf"\b{re.escape(mutant.element[0])}\b")
    for k, layer in sorted(found.items()):
        if any(pattern.search(line) for line in lines[layer.lines[0] - 1:layer.lines[1]]):
            return k
    return None


class Split:
    """The clean code's state before each resumable layer and its output, for the judged inputs: what a run
    resumed or stopped there reads (``files``), and its environment (``env``)."""

    def __init__(self, found: dict[int, Layer], outputs: dict[int, np.ndarray]):
        self.layers = dict(found)
        self.outputs = outputs  # the clean code's output of each layer: (inputs, size) in the code's layout
        self.kept = {}
        for k, layer in found.items():
            kept = np.empty((len(outputs[k]), len(layer.kept)), np.float32)
            for j in np.unique(layer.producers):
                mine = layer.producers == j
                kept[:, mine] = outputs[int(j)][:, layer.columns[mine]]
            self.kept[k] = kept

    def env(self, k: int, weak: bool) -> dict[str, str]:
        """A run's variables: resumed at layer ``k``, and stopped after it when ``weak``."""
        floats = len(self.layers[k].kept) + (self.layers[k].place[2] if weak else 0)
        return {RESUME: str(k), **({STOP: str(k)} if weak else {}), FLOATS: str(floats)}

    def files(self, k: int, rows: np.ndarray, weak: bool) -> dict[str, bytes]:
        """The state file of a run of the judged inputs ``rows`` resumed at layer ``k`` (and stopped, ``weak``)."""
        state = [self.kept[k][rows]] + ([self.outputs[k][rows]] if weak else [])
        return {STATE_FILE: np.ascontiguousarray(np.concatenate(state, axis=1), "<f4").tobytes()}
