"""Every layer's output of generated code: an instrumented host build whose entry returns them all.

The manifest says where each layer's output tensor is once the layer has run
(``layers[*].output``: the C array, offset and size; docs/manifest.md) and
where the layer's code ends (``lines``). ``build`` copies the code, inserts
after each layer's last line a call ``assay_probe(k, <array> + <offset>,
<size>)`` (in the same translation unit, so the arena, a ``static`` array, is
reachable), and adds ``assay_probe.c``, whose entry ``assay_probed_inference``
calls the generated entry and hands the batch driver the concatenation of all
layer outputs as its "output". The host runner then runs it like any code: in
its worker process, under a timeout, with guard words around the buffers.

Why copies at the end of each layer and not a read of the arena after the
call: the arena is reused by liveness, so a layer's output is overwritten by a
later layer; only at the layer's end is it known to be complete and intact.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.generators.generated import GeneratedCode
from harness.runners import RunError, host

PROBE_FILE = "assay_probe.c"
PROBED_ENTRY = "assay_probed_inference"
BATCH_FLOATS = 1 << 24  # outputs held at once (64 MiB): cifarnet's layers make ~1e5 floats per input


@dataclass(frozen=True)
class Probe:
    """A layer whose output the instrumented build returns, at ``offset`` floats into the concatenation."""

    index: int  # the layer's index in the manifest
    name: str
    tensor: str  # the source model's name of the output tensor
    offset: int
    size: int
    shape: tuple[int, ...]
    layout: str | None


@dataclass(frozen=True)
class ProbedBuild:
    build: host.HostBuild
    probes: tuple[Probe, ...]


def probes_of(manifest: dict) -> list[Probe]:
    """The layers that have an output buffer in the manifest, in code order; empty when it gives none."""
    probes, offset = [], 0
    for layer in manifest.get("layers", []):
        out = layer.get("output")
        if out is None:
            continue
        probes.append(Probe(layer["index"], layer["name"], out["tensor"], offset, int(out["size"]),
                            tuple(out.get("shape", (out["size"],))), out.get("layout")))
        offset += int(out["size"])
    return probes


def build(code: GeneratedCode, build_dir: Path) -> ProbedBuild:
    """The instrumented copy of ``code`` in ``build_dir/src``, built for the host runner in ``build_dir``."""
    manifest = code.manifest
    probes = probes_of(manifest)
    if not probes:
        raise RunError("the manifest gives no layer output buffers (layers[*].output): per-layer outputs "
                       "cannot be read")
    build_dir = Path(build_dir).resolve()
    source_dir = build_dir / "src"
    if source_dir.exists():
        shutil.rmtree(source_dir)
    shutil.copytree(code.directory, source_dir)
    layers = {layer["index"]: layer for layer in manifest["layers"]}
    files = {layers[p.index]["file"] for p in probes}
    for file in files:
        path = source_dir / file
        lines = path.read_text().splitlines()
        inserts: dict[int, list[str]] = {}
        for number, probe in enumerate(probes):
            layer = layers[probe.index]
            if layer["file"] != file:
                continue
            out = layer["output"]
            inserts.setdefault(layer["lines"][1], []).append(
                f"    assay_probe({number}, {out['symbol']} + {out['offset']}, {probe.size});")
        text = ["void assay_probe(int layer, const float *data, int size);"]
        for number, line in enumerate(lines, start=1):
            text.append(line)
            text.extend(inserts.get(number, []))
        path.write_text("\n".join(text) + "\n")
    total = sum(p.size for p in probes)
    offsets = ", ".join(str(p.offset) for p in probes)
    (source_dir / PROBE_FILE).write_text(f"""/* Written by Assay (harness/runners/probed.py): every layer's output, concatenated. */
#include <string.h>

void {code.entry}(const float *input, float *output);
void assay_probe(int layer, const float *data, int size);
void {PROBED_ENTRY}(const float *input, float *layers);

static const long assay_probe_offsets[] = {{{offsets}}};
static float *assay_probe_destination;
static float assay_probe_output[{code.output_size}];

void assay_probe(int layer, const float *data, int size)
{{
    memcpy(assay_probe_destination + assay_probe_offsets[layer], data, (size_t)size * sizeof *data);
}}

void {PROBED_ENTRY}(const float *input, float *layers)
{{
    assay_probe_destination = layers;
    {code.entry}(input, assay_probe_output);
}}
""")
    probed = GeneratedCode(directory=source_dir, entry=PROBED_ENTRY, input_size=code.input_size, output_size=total,
                           input_layout=code.input_layout, output_layout=None,
                           sources=(*(source_dir / s.name for s in code.sources), source_dir / PROBE_FILE),
                           manifest=manifest)
    return ProbedBuild(host.build(probed, build_dir), tuple(probes))


def run(built: ProbedBuild, inputs: np.ndarray, timeout: float = 300.0) -> Iterator[tuple[int, list[np.ndarray]]]:
    """Every probed layer's outputs for ``inputs`` (in the code's input layout), a chunk at a time so that no
    more than BATCH_FLOATS are held: (the chunk's first input, one (n, size) array per probe in the code's
    layout for that tensor)."""
    step = max(1, BATCH_FLOATS // built.build.code.output_size)
    for start in range(0, len(inputs), step):
        outputs = host.run(built.build, inputs[start:start + step], timeout).outputs
        yield start, [outputs[:, p.offset:p.offset + p.size] for p in built.probes]
