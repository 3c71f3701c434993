"""Arena-region check: each layer of generated code writes only its own output tensor in the arena, and
writes all of it.

The guard words around the driver's buffers see a write past the input or the output; the sanitizers see a
write past the arena. Neither sees a write from one layer into arena space that no live tensor holds at that
moment (one past its output, into a region a later layer overwrites anyway) or into a live tensor a later
layer still reads, when the value written happens not to change the outputs. The manifest says where every
layer's output lives (``layers[*].output``), which layer reads which (``inputs``) and where each layer's code
ends (``lines``), so ``instrument`` can put around each layer, in the same translation unit (the arena is a
``static`` array): before it, the arena floats that hold no live tensor and are not its output are filled
with a guard (a NaN with a payload) and the live tensors it must not change are copied; after it, both are
checked. The layer's own output is filled with the guard too, unless the layer reads that place (in-place
code, a view of its source): after the layer, a guard left in it is a float of the output the layer did not
write. Such a layer is wrong even when no later layer happens to read that float (floor pooling drops the
last row of an odd-sized map): its output is not the tensor the manifest and the reference's intermediate
outputs say it computes, and the stale value it leaves would be read by any other consumer. A violation
prints one line naming the layer and the float and exits the process with status ``EXIT_STATUS`` (the host
runner reports it as the worker's failure, with that line).

Used by ``assay mutate`` on the host; the code under test is the same text with calls added between layers.
"""

from __future__ import annotations

EXIT_STATUS = 70
GUARD_BITS = "0x7FC0A55Bu"  # a quiet NaN with a payload, unlike assay_guards.h's so the two are told apart


def applies(manifest: dict) -> bool:
    """Whether the manifest gives what the check needs: an arena and every layer's output place."""
    arena = manifest.get("arena")
    return bool(arena) and any("output" in layer for layer in manifest.get("layers", []))


Span = tuple[int, int]


def regions(manifest: dict) -> list[tuple[int, list[Span], list[Span], list[Span]]]:
    """Per layer with an output: (its index, the free ranges to guard, the live ranges to keep, its output
    range when it must write all of it), floats [start, end) of the arena. Live: an arena tensor made by an
    earlier layer that this or a later layer reads (views share their source's storage), minus the layer's
    own output (in-place code may rewrite it). The output must be written whole unless the layer reads some
    of that place (in place, or a view): then it holds the input's values, not the guard, before the layer."""
    arena = manifest["arena"]
    layers = [layer for layer in manifest["layers"] if "output" in layer]
    place = {layer["index"]: _range(layer, arena["symbol"]) for layer in layers}
    last_read: dict[int, int] = {}
    for layer in manifest["layers"]:
        for producer in layer.get("inputs") or []:
            if producer is not None:
                last_read[producer] = max(last_read.get(producer, -1), layer["index"])
    result = []
    for layer in layers:
        k = layer["index"]
        own = place[k]
        live = sorted({place[j] for j in place if j < k and place[j] and last_read.get(j, -1) >= k
                       and place[j] != own})
        live = [span for span in live if not own or not _overlap(span, own)]
        taken = sorted([*live, *([own] if own else [])])
        free, at = [], 0
        for start, end in taken:
            if start > at:
                free.append((at, start))
            at = max(at, end)
        if at < arena["floats"]:
            free.append((at, arena["floats"]))
        read = [place.get(j) for j in layer.get("inputs") or [] if j is not None]
        whole = [own] if own and not any(span and _overlap(span, own) for span in read) else []
        result.append((k, free, live, whole))
    return result


def instrument(text: str, manifest: dict, file: str, keep_lines: bool = False, hooks: tuple[str, str] = ("", "")
               ) -> str:
    """The C text of ``file`` with the checks around every layer of it; unchanged when the check does not apply.
    ``keep_lines``: a ``#line`` directive after each inserted call, so that a diagnostic in the code (a sanitizer's
    report) names the line of ``file`` it names without the checks. ``hooks``: C put before each layer's check
    (a label) and after its check of what it wrote (a statement), ``{k}`` the layer's index (``assay mutate``
    starts a run at a layer and stops one after it: ``harness.stages.mutate.split``)."""
    if not applies(manifest):
        return text
    arena = manifest["arena"]["symbol"]
    layers = {layer["index"]: layer for layer in manifest["layers"] if layer.get("file") == file}
    before, after, cases_before, cases_after = {}, {}, [], []
    for k, free, live, whole in regions(manifest):
        if k not in layers:
            continue
        first, last = layers[k]["lines"]
        before.setdefault(first, []).append(f"    {hooks[0].format(k=k)}assay_arena_before({k});")
        after.setdefault(last, []).append(f"    assay_arena_after({k});")
        if hooks[1]:
            after[last].append(f"    {hooks[1].format(k=k)}")
        cases_before.append(f"    case {k}:\n" + "".join(f"        assay_fill({a}, {b});\n" for a, b in [*free, *whole])
                            + "".join(f"        memcpy(assay_shadow + {a}, {arena} + {a}, {b - a} * sizeof(float));\n"
                                      for a, b in live) + "        break;")
        cases_after.append(f"    case {k}:\n" + "".join(f"        assay_expect_guard({k}, {a}, {b});\n" for a, b in free)
                           + "".join(f"        assay_expect_same({k}, {a}, {b});\n" for a, b in live)
                           + "".join(f"        assay_expect_written({k}, {a}, {b});\n" for a, b in whole)
                           + "        break;")
    lines = ["void assay_arena_before(int layer);", "void assay_arena_after(int layer);"]
    for number, line in enumerate(text.splitlines(), start=1):
        lines.extend(before.get(number, []))
        if keep_lines and number in before:
            lines.append(f'#line {number} "{file}"')
        lines.append(line)
        lines.extend(after.get(number, []))
        if keep_lines and number in after:
            lines.append(f'#line {number + 1} "{file}"')
    floats = manifest["arena"]["floats"]
    lines.append(f"""
/* Added by Assay (harness/runners/arenacheck.py): each layer writes only its output in the arena, all of it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float assay_shadow[{floats}];

static void assay_fill(int from, int to)
{{
    const uint32_t guard = {GUARD_BITS};
    for (int i = from; i < to; ++i) {{
        memcpy(&{arena}[i], &guard, sizeof guard);
    }}
}}

static void assay_violation(int layer, int at, const char *what, const char *where)
{{
    fprintf(stderr, "arena float %d %s by layer %d (%s)\\n", at, what, layer, where);
    fflush(stderr);
    exit({EXIT_STATUS});
}}

static void assay_expect_guard(int layer, int from, int to)
{{
    for (int i = from; i < to; ++i) {{
        uint32_t word;
        memcpy(&word, &{arena}[i], sizeof word);
        if (word != {GUARD_BITS}) {{
            assay_violation(layer, i, "(no live tensor) written", "outside its output");
        }}
    }}
}}

static void assay_expect_same(int layer, int from, int to)
{{
    for (int i = from; i < to; ++i) {{
        if (memcmp(&{arena}[i], &assay_shadow[i], sizeof(float)) != 0) {{
            assay_violation(layer, i, "(a live tensor) changed", "outside its output");
        }}
    }}
}}

static void assay_expect_written(int layer, int from, int to)
{{
    for (int i = from; i < to; ++i) {{
        uint32_t word;
        memcpy(&word, &{arena}[i], sizeof word);
        if (word == {GUARD_BITS}) {{
            assay_violation(layer, i, "not written", "in its output");
        }}
    }}
}}

void assay_arena_before(int layer)
{{
    switch (layer) {{
{chr(10).join(cases_before)}
    default:
        break;
    }}
}}

void assay_arena_after(int layer)
{{
    switch (layer) {{
{chr(10).join(cases_after)}
    default:
        break;
    }}
}}""")
    return "\n".join(lines) + "\n"


def _range(layer: dict, arena: str) -> tuple[int, int] | None:
    out = layer["output"]
    return (int(out["offset"]), int(out["offset"]) + int(out["size"])) if out["symbol"] == arena else None


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]
