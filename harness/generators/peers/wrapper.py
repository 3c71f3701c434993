"""What every peer adapter writes after its peer ran: a wrapper C file giving the code Assay's entry signature,
and the ``manifest.json`` (docs/manifest.md) the rest of Assay reads.

Peers have their own calling conventions (ACETONE's ``inference(prediction, nn_input)``, emlearn's
``<name>_regress(in, n, out, n_out)``); the wrapper is one call, so what is checked is the peer's code. The
layer mapping is what the peer itself reported (``layers``) or, when it said nothing, marked unknown.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.tensors import shape_in
from harness.generators.generated import FULL_MANIFEST, GeneratedCode
from harness.models.model import Model

WRAPPER = "assay_entry.c"


def finish(out_dir: Path, *, generator: dict, model: Model, fmt: str, prefix: str, call: str, includes: list[str],
           sources: list[str], headers: list[str], layers: list[dict] | None, peer: dict,
           layouts: tuple[str, str] | None = None, quantization: dict | None = None) -> GeneratedCode:
    """Write the wrapper and the manifest; ``call`` is the C statement calling the peer with ``input``/``output``;
    ``layouts``: the (input, output) layouts of the peer's entry when they are not those of the ``fmt`` file (Aidge
    makes some outputs channels-last); ``quantization``: the requantization rule the adapter declares for the peer's
    integer code (docs/manifest.md), which the oracle then holds it to bit for bit."""
    entry = f"{prefix}assay_entry"
    lines = [f'#include "{name}"' for name in includes]
    (out_dir / WRAPPER).write_text(
        "/* Written by Assay: the peer's entry point under Assay's signature (docs/peers.md). */\n"
        + "\n".join(lines) + f"\n\nvoid {entry}(const float *input, float *output)\n{{\n    {call}\n}}\n")
    in_layout, out_layout = layouts or model.layouts_of(fmt)
    manifest = {
        "schema": "assay-manifest/1",
        "generator": generator,
        "model": {"name": model.name, "source": str(model.file(fmt)), "format": fmt,
                  "sha256": model.sha256()[fmt]},
        "prefix": prefix,
        "entry": {"symbol": entry, "signature": f"void {entry}(const float *input, float *output)", "file": WRAPPER},
        "inputs": [{"name": "input", "shape": _shape(model.input_shape, model.layout, in_layout), "layout": in_layout,
                    "size": model.input_size, "dtype": "float32"}],
        "outputs": [{"name": "output", "shape": _shape(model.output_shape, model.output_layout, out_layout),
                     "layout": out_layout, "size": model.output_size, "dtype": "float32"}],
        "sources": [*sources, WRAPPER],
        "headers": headers,
        "layers": [],  # no source spans or loop bounds: the peer does not say where each layer's code is
        "layer_mapping": ({"status": "recovered", "from": "the peer's own layer list", "layers": layers}
                          if layers else {"status": "unknown", "layers": []}),
        "peer": peer,
        **({"quantization": quantization} if quantization else {}),
    }
    (out_dir / FULL_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return GeneratedCode.from_directory(out_dir)


def _shape(shape: tuple[int, ...], layout: str, target: str) -> list[int]:
    return list(shape_in(shape, layout, target))
