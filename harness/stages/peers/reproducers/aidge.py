"""Reproduces an Eclipse Aidge finding without Assay (written by ``assay peers report``; docs/peers.md).

Needs only what Aidge itself needs: ``pip install aidge-core==0.10.1 aidge-onnx==0.10.1 aidge-backend-cpu==0.10.1
aidge-export-cpp==0.10.1`` (the versions in ``finding.json``; ONNX and NumPy come with them), gcc and g++. Run
``python reproduce.py`` in this folder. For each implementation named in ``finding.json`` it asks Aidge's own
API for C++ from ``model.onnx``, in a child process of its own: ``aidge_onnx.load_onnx`` then
``aidge_core.export_utils.export(graph, ExportConfig(target="host", compile=False, cuda=False, dformat=...),
[zero sample of batch 1])``, what ``aidge_export_cpp.export`` and Aidge's examples call, into the folder
``export`` of the child's working folder ``c/<implementation>/first/``:

- ``dformat``: the input's data format as ONNX defines it, by rank (``nc``, ``ncw``, ``nchw``), given to the
  export (Aidge then transposes to and from its channels-last kernels at the graph's edges);
- ``no-dformat``: no data format given, Aidge picks one itself (its default);
- ``twice-same-hashseed``, ``twice-other-hashseed``: as ``dformat``, exported twice, by processes with
  ``PYTHONHASHSEED`` 1 and 1, or 1 and 2 (working in ``first/`` and ``second/``, each exporting into its
  ``export``: the same relative name, as the strings Aidge orders hold the export folder's path); the two
  exports' ``dnn`` folders must be the same bytes, else the implementation is REJECTED, naming the first file
  and line that differ.

The export's ``dnn/src`` C++ is compiled by g++ (-O0 -std=c++17 -ffp-contract=off -fno-exceptions -fno-rtti,
``dnn/include`` on the include path; Aidge's ``main.cpp`` and sample data are not) and linked with ``driver.c``,
which calls ``model_forward(input, &result)`` and copies the output out of the pointer it returns (into Aidge's
static activation buffer). An export whose output has another number of values than ``expected.npy``'s is
REJECTED before it runs, naming both shapes. The outputs on ``inputs.npy`` are compared with ``expected.npy``
(computed by Assay, in ONNX's layout: Keras's outputs, or ONNX Runtime's for a model given as ONNX;
``finding.json`` names which) within ``|C - expected| <= atol + rtol * |expected|``
(``reproducer_common.py``); ONNX's own reference implementation (``onnx.reference``) reading ``model.onnx`` is
checked against ``expected.npy`` first. Exit status 1 when an implementation listed as defective is wrong, NaN,
crashes, cannot be generated or is rejected (the defect is reproduced), 0 when every one matches.
"""

import filecmp
import importlib
import json
import os
import subprocess
import sys

import numpy as np

import reproducer_common

HERE = os.path.dirname(os.path.abspath(__file__))
# Imported for what they register: the CPU kernels graph adaptation runs, the export library and its "host" target.
REGISTERING = ("aidge_backend_cpu", "aidge_export_cpp")
# The data format ONNX defines for an input of each rank: batch and channels first.
FORMATS = {2: "nc", 3: "ncw", 4: "nchw"}
# implementation -> (whether the ONNX data format is given, the PYTHONHASHSEEDs of the exports compared)
IMPLEMENTATIONS = {
    "dformat": (True, ()),
    "no-dformat": (False, ()),
    "twice-same-hashseed": (True, ("1", "1")),
    "twice-other-hashseed": (True, ("1", "2")),
}
CALL = ("{ float *result; model_forward(input, &result); "
        "for (int i = 0; i < OUT_SIZE; i++) output[i] = result[i]; }")


def export(model, folder, with_dformat):
    """Aidge's export of ``model`` into ``folder`` (run in a child process: ``reproduce.py --export``)."""
    import aidge_core
    import aidge_onnx
    import onnx
    from aidge_core.export_utils.config import ExportConfig

    for name in REGISTERING:
        importlib.import_module(name)
    aidge_core.Log.set_console_level(aidge_core.Level.Error)
    dims = [[dim.dim_value if dim.dim_value > 0 else 1 for dim in value.type.tensor_type.shape.dim]
            for value in onnx.load(model, load_external_data=False).graph.input]
    dformat = FORMATS.get(len(dims[0])) if with_dformat else None
    aidge_core.export_utils.export(aidge_onnx.load_onnx(model),
                                   ExportConfig(target="host", export_folder=folder, dformat=dformat, compile=False,
                                                cuda=False),
                                   [aidge_core.Tensor(np.zeros(shape, np.float32)) for shape in dims])


def _export_in_child(finding, workdir, with_dformat, hashseed):
    """``export`` into ``workdir/export`` by a fresh Python process working in ``workdir`` (with ``hashseed`` as
    its PYTHONHASHSEED when given); return that folder. The child's own error, if it fails, is raised here as
    the implementation's verdict."""
    os.makedirs(workdir, exist_ok=True)
    env = dict(os.environ, **({"PYTHONHASHSEED": hashseed} if hashseed else {}))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--export", os.path.join(HERE, finding["model"]),
                           "export", "1" if with_dformat else "0"], cwd=workdir, env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()] or ["no output"]
        raise RuntimeError(lines[-1].strip())
    return os.path.join(workdir, "export")


def _first_difference(one, other):
    """The first file (and line) in which two export folders differ, or None."""
    compared = filecmp.dircmp(one, other)
    alone = compared.left_only + compared.right_only
    if alone:
        return f"{alone[0]} is in one export only"
    for name in compared.common_files:
        with open(os.path.join(one, name), "rb") as a, open(os.path.join(other, name), "rb") as b:
            left, right = a.read().splitlines(), b.read().splitlines()
        if left != right:
            line = next((k for k, (x, y) in enumerate(zip(left, right)) if x != y), min(len(left), len(right)))
            shown = left[line].decode(errors="replace") if line < len(left) else "(end of file)"
            return f"{os.path.relpath(os.path.join(one, name), HERE)} line {line + 1}: {shown!r}"
    for name in compared.common_dirs:
        found = _first_difference(os.path.join(one, name), os.path.join(other, name))
        if found:
            return found
    return None


def make(finding, implementation):
    with_dformat, hashseeds = IMPLEMENTATIONS[implementation]
    out = os.path.join(HERE, "c", implementation)
    folder = _export_in_child(finding, os.path.join(out, "first"), with_dformat, hashseeds[0] if hashseeds else None)
    if hashseeds:
        again = _export_in_child(finding, os.path.join(out, "second"), with_dformat, hashseeds[1])
        differs = _first_difference(os.path.join(folder, "dnn"), os.path.join(again, "dnn"))
        if differs:
            raise reproducer_common.Rejected(f"two exports, PYTHONHASHSEED {hashseeds[0]} and {hashseeds[1]}, "
                                             f"differ: {differs}")
    with open(os.path.join(folder, ".aidge-export.json")) as handle:
        output = json.load(handle)["outputs"][0]
    if int(np.prod(output["dims"])) != finding["output_size"]:
        raise reproducer_common.Rejected(f"the export's output {output['name']} has dims {output['dims']}, "
                                         f"{finding['output_size']} values expected")
    sources = sorted(os.path.join(root, name) for root, _, names in os.walk(os.path.join(folder, "dnn", "src"))
                     for name in names if name.endswith(".cpp"))
    return reproducer_common.build(HERE, finding, os.path.join(folder, "dnn", "include"), sources, "forward.hpp",
                                   CALL)


def predict(finding, inputs):
    """ONNX's reference implementation on ``model.onnx``, one input at a time (batch 1, as the export)."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    model = onnx.load(os.path.join(HERE, finding["model"]))
    evaluator = ReferenceEvaluator(model)
    name = model.graph.input[0].name
    return np.stack([evaluator.run(None, {name: sample[None]})[0][0] for sample in inputs])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--export"]:
        export(sys.argv[2], sys.argv[3], sys.argv[4] == "1")
        sys.exit(0)
    sys.exit(reproducer_common.main(HERE, predict, make, reader="ONNX's reference implementation"))
