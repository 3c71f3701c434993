"""Eclipse Aidge (CEA, PyPI 0.10.1) as an adapter: ONNX in, ``aidge-export-cpp``'s standalone C++ out, run in its
own environment.

Aidge imports ONNX into its graph, adapts the graph to an export library and writes C++17: one ``forward.cpp``
whose ``model_forward(const float *input, float **output)`` (``extern "C"``) calls header-only kernel templates,
the weights as ``const float`` arrays in ``.cpp`` files of their own, and every activation in one static byte
array laid out by Aidge's memory manager (``static unsigned char mem_0[N]``); the output pointer it returns points
into that array. The wrapper copies the output out of it. The C++ is compiled by the target's C++ compiler under
the C flags (``runners.compiling.link_inputs``).

One variant, ``default``: Aidge's ``host`` export target, float32. It is the code for every Assay target: Aidge's
Cortex-M library, ``aidge-export-arm-cortexm`` 0.10.1, cannot be imported from PyPI (docs/peers.md, Aidge).
"""

from __future__ import annotations

import re

from pathlib import Path

from harness.errors import ModelError, NotSupported
from harness.generators.generated import GeneratedCode
from harness.generators.peers import PeerEnv, PeerGenerator
from harness.generators.peers.wrapper import finish
from harness.models.model import Model
from harness.tensors import shape_in

PEER = PeerEnv("aidge", package="aidge-export-cpp")  # its release names the adapter's version
TARGET = "host"  # Aidge's export target: aidge-export-cpp's generic C++
VARIANTS = ("default",)


class Aidge(PeerGenerator):
    peer = PEER

    def variants(self, model: Model) -> list[str]:
        return list(VARIANTS) if "onnx" in model.files else []

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        self.single_io(model)
        out_dir.mkdir(parents=True, exist_ok=True)
        response = PEER.run({"action": "compile", "model": str(model.file("onnx").resolve()),
                             "out_dir": str(out_dir.resolve()), "target": TARGET})
        result = response["result"]
        if len(result["inputs"]) != 1 or len(result["outputs"]) != 1 or len(result["parameters"]) != 2:
            raise ModelError(f"aidge on {model.name}: {len(result['inputs'])} inputs and "
                             f"{len(result['outputs'])} outputs (entry {result['signature']!r}); Assay's entry "
                             "takes one of each")
        layouts = entry_layouts(model, result["export_manifest"])
        output_type = entry_output_type(result["signature"])
        # The output is a pointer into Aidge's static activation buffer: copied to Assay's output before return, an
        # integer output as its exact values (docs/quantized.md, "Integer graph inputs and outputs").
        call = (f"{output_type} *result;\n    model_forward(input, &result);\n"
                f"    for (int i = 0; i < {model.output_size}; ++i) {{\n        output[i] = (float) result[i];\n    }}")
        return finish(out_dir, generator={"name": self.name, "version": self.version(),
                                          "options": {"target": TARGET, "dtype": "float32",
                                                      "dformat": result["dformat"]}},
                      model=model, fmt="onnx", prefix="aidge_", includes=[result["header"]],
                      sources=result["files"], call=call, headers=result["headers"], layers=result["nodes"],
                      peer={"environment": response["environment"], "signature": result["signature"],
                            "static_buffers": result["static_buffers"], "operators": result["operators"],
                            "export_manifest": result["export_manifest"], "inputs": result["inputs"],
                            "outputs": result["outputs"]},
                      layouts=layouts)


# The C types of an output of Aidge's entry whose every value is a float32 (the wrapper converts it exactly).
EXACT_OUTPUT_TYPES = ("float", "int8_t", "uint8_t", "int16_t", "uint16_t")
_ENTRY = re.compile(r"model_forward\s*\(\s*const\s+(\w+)\s*\*\s*\w+\s*,\s*(\w+)\s*\*\*")


def entry_output_type(signature: str) -> str:
    """The C type of the output of Aidge's entry ``model_forward(const T *in, U **out)``, which the wrapper reads:
    Aidge casts an integer graph input from float itself (its import adds a ``Cast``), but writes an integer graph
    output in its own type (``uint8_t **`` for a QuantizeLinear). NotSupported for an input that is not float or
    an output whose values are not all float32 values: reading them through a ``float *`` would judge the
    wrapper, not Aidge."""
    found = _ENTRY.search(signature)
    if found is None:
        raise NotSupported(f"aidge: the export's entry is {signature!r}, not model_forward(const T *, U **)")
    if found.group(1) != "float":
        raise NotSupported(f"aidge: the export's entry takes {found.group(1)} values; Assay passes float32")
    if found.group(2) not in EXACT_OUTPUT_TYPES:
        raise NotSupported(f"aidge: the export's entry writes {found.group(2)} values, which a float32 does not "
                           "hold exactly")
    return found.group(2)


def entry_layouts(model: Model, export: dict) -> tuple[str, str]:
    """(input, output) layout of Aidge's entry, from the dims its export manifest gives (the batch axis first when
    the ONNX tensor has one): the ONNX file's layout, or its channels-last form where Aidge's graph adaptation made
    the tensor channels-last. NotSupported where neither matches (Aidge computed another shape), or both do
    (equal sizes on every axis): the dims cannot say then how Aidge orders the values."""
    found = []
    for shape, canonical, layout, tensor in ((model.input_shape, model.layout, model.layouts_of("onnx")[0],
                                              export["inputs"][0]),
                                             (model.output_shape, model.output_layout, model.layouts_of("onnx")[1],
                                              export["outputs"][0])):
        dims = tensor["dims"][1:] if len(tensor["dims"]) == len(shape) + 1 else tensor["dims"]
        candidates = {layout, layout[1:] + layout[0] if layout[0] == "C" else layout}
        matching = [c for c in sorted(candidates) if list(shape_in(shape, canonical, c)) == dims]
        if len(matching) != 1:
            why = "it matches neither the model's layout nor its channels-last form" if not matching else \
                "the adapter cannot tell its layout"
            raise NotSupported(f"aidge: the export's tensor {tensor['name']} has dims {tensor['dims']}; the model's "
                               f"is {list(shape)} ({canonical}): {why}")
        found.append(matching[0])
    return found[0], found[1]
