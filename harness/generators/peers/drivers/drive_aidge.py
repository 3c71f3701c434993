"""Eclipse Aidge driver: an ONNX model -> ``aidge-export-cpp``'s C++ (run by the peer's own Python; imports
nothing of Assay).

Request ``{"model": .onnx path, "out_dir": dir, "target": Aidge's export target}``: the model goes through
Aidge's own path, ``aidge_onnx.load_onnx`` then ``aidge_core.export_utils.export`` (the call its examples and
``aidge_export_cpp.export`` make) with ``compile=False`` (Assay compiles, under its flags and in its sandbox) and
no CUDA. The export writes a CMake project: ``dnn/include`` (the entry's header ``forward.hpp``, the kernels, the
layers' configuration headers, the parameters' declarations), ``dnn/src`` (``forward.cpp`` and one ``.cpp`` per
parameter tensor), and Aidge's own ``main.cpp``, sample data and memory statistics. The driver copies
``dnn/include``'s contents to the output folder's root (the sources include ``"forward.hpp"``,
``"kernels/cpp/..."``, so that folder is the include root) and ``dnn/src`` to ``src/``, byte for byte; the rest
stays in the scratch folder. A dynamic batch axis is pinned to 1 by the sample input the export takes.

Result: the sources and headers, the data format given, the entry's prototype from ``forward.hpp``, the export's
own manifest (inputs, outputs, memory peak), the static buffers ``forward.cpp`` declares, the ONNX operators and
nodes, and the model's inputs and outputs (names and shapes).
"""

import importlib
import json
import os
import re
import shutil

from _onnx import tensors
from _protocol import main, says

EXPORT = "aidge-export"
# Imported for what they register: the CPU kernels the export's graph adaptation runs, and the export library
# with its "host" target.
REGISTERING = ("aidge_backend_cpu", "aidge_export_cpp")
# The input's data format by rank, as ONNX defines it (batch and channels first): Aidge's export otherwise picks
# one itself and takes a 4-D ONNX input for channels-last (docs/peers.md, I5); with it, Aidge transposes to and
# from its own channels-last kernels at the graph's edges.
FORMATS = {2: "nc", 3: "ncw", 4: "nchw"}


def generate(request):
    import aidge_core
    import aidge_onnx
    import numpy
    import onnx
    from aidge_core.export_utils.config import ExportConfig

    for name in REGISTERING:
        importlib.import_module(name)
    aidge_core.Log.set_console_level(aidge_core.Level.Error)
    model = onnx.load(request["model"], load_external_data=False)
    inputs = tensors(model.graph.input, model)
    graph = aidge_onnx.load_onnx(request["model"])
    samples = [aidge_core.Tensor(numpy.zeros([dim if isinstance(dim, int) and dim > 0 else 1
                                              for dim in tensor["shape"]], dtype=numpy.float32))
               for tensor in inputs]
    folder = os.path.join(os.getcwd(), EXPORT)
    dformat = FORMATS.get(len(inputs[0]["shape"])) if len(inputs) == 1 else None
    aidge_core.export_utils.export(graph, ExportConfig(target=request["target"], export_folder=folder, dformat=dformat,
                                                       compile=False, cuda=False), samples)
    out = request["out_dir"]
    shutil.copytree(os.path.join(folder, "dnn", "include"), out, dirs_exist_ok=True)
    shutil.copytree(os.path.join(folder, "dnn", "src"), os.path.join(out, "src"), dirs_exist_ok=True)
    written = sorted(os.path.relpath(os.path.join(root, name), out)
                     for root, _, names in os.walk(out) for name in names)
    with open(os.path.join(out, "forward.hpp"), encoding="utf-8") as handle:
        header = handle.read()
    with open(os.path.join(out, "src", "forward.cpp"), encoding="utf-8") as handle:
        forward = handle.read()
    found = re.search(r"^void model_forward\s*\(([^)]*)\);", header, re.MULTILINE)
    with open(os.path.join(folder, ".aidge-export.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    return {"files": [name for name in written if name.endswith(".cpp")], "header": "forward.hpp", "dformat": dformat,
            "headers": [name for name in written if name.endswith((".h", ".hpp"))],
            "signature": " ".join(found.group(0).split()) if found else None,
            "parameters": [" ".join(p.split()) for p in found.group(1).split(",")] if found else [],
            "static_buffers": [{"name": name, "bytes": int(size)}
                               for name, size in re.findall(r"^static unsigned char (\w+)\[(\d+)\];", forward,
                                                            re.MULTILINE)],
            "export_manifest": manifest,
            "operators": sorted({node.op_type for node in model.graph.node}),
            "inputs": inputs, "outputs": tensors(model.graph.output, model),
            "nodes": [{"index": i, "op": node.op_type, "name": node.name} for i, node in enumerate(model.graph.node)]}



if __name__ == "__main__":
    # Aidge refuses an operator its export library lacks in graph adaptation ("NoImplError: No implementation
    # found for node X[Flatten]") or in the scheduler's export ("Operator X doesn't have an exportable backend"),
    # an ONNX operator its importer lacks with "... is not supported", and an operator its CPU backend cannot run
    # while the export propagates shapes ("forward() not implemented yet for operator of type DequantizeLinear").
    main(generate, refuses=says("no implementation found", "exportable backend", "not supported", "unsupported",
                                "not implemented yet for operator"))
