"""emx-onnx-cgen driver: an ONNX model -> emmtrix's C, and emmtrix's own verifier (run by the peer's own Python;
imports nothing of Assay).

Requests, by ``action``:

- ``compile``: {"model": .onnx path, "out_dir": dir, "name": C identifier, "options": [CLI options]}. The
  model goes through the very code path of ``emx-onnx-cgen compile`` (its argument parser and
  ``_compile_model``, which turns the tool's own ``UnsupportedOpError``/``CodegenError``/``ShapeInferenceError``
  into one message), so the C is byte for byte the command's. A dynamic batch axis is pinned to 1
  (``--input-dim NAME:0=1``): the generated function then has no size parameters. Result: the C file, the
  command line that makes it, the entry function's C prototype, the ONNX operators and nodes, and the model's
  inputs and outputs (names and shapes).
- ``verify``: {"model": .onnx path, "options": [CLI options], "cases": [dir, ...]}, each dir holding
  ``input_0.pb``: ``emx-onnx-cgen verify --test-data-dir`` on each, in a child process (it compiles and runs
  C itself, in a temporary folder under the request's scratch folder), which compares with ONNX Runtime.
  Result: per case, the exit status, the verdict line the tool printed, its "Worst diff" line (the output
  element, the two values, the ULP) when it printed one, and the command.
"""

import os
import re
import shlex
import subprocess
import sys

from _onnx import tensors
from _protocol import main, says

VERIFY_TIMEOUT_S = 600


def generate(request):
    if request.get("action") == "verify":
        return verify(request)
    import onnx
    from emx_onnx_cgen import cli

    model = onnx.load(request["model"], load_external_data=False)
    out_c = os.path.join(request["out_dir"], request["name"] + ".c")
    os.makedirs(request["out_dir"], exist_ok=True)
    argv = ["compile", request["model"], out_c, "--model-name", request["name"], *request["options"],
            *_pin_batch(model)]
    args = cli._build_parser().parse_args(argv)
    args.command_line = cli._format_command_line(["emx-onnx-cgen", *argv])
    result = cli._compile_model(args)
    if result.error:
        raise RuntimeError(result.error)  # the tool's own message: its refusals say "Unsupported ..."
    if result.weight_data is not None or result.data_source is not None or result.support_files:
        raise RuntimeError("emx-onnx-cgen wrote files besides the C source (weights file, data file or "
                           "support headers); the request asked for one self-contained C file")
    with open(out_c, "w", encoding="utf-8") as handle:
        handle.write(result.generated)
    found = re.search(rf"^void {request['name']}\(.*\)(?= {{$)", result.generated, re.MULTILINE)
    return {"files": [os.path.basename(out_c)], "command": shlex.join(["emx-onnx-cgen", *argv]),
            "signature": found.group(0) if found else None,
            "operators": sorted({node.op_type for node in model.graph.node}),
            "inputs": tensors(model.graph.input, model), "outputs": tensors(model.graph.output, model),
            "nodes": [{"index": i, "op": node.op_type, "name": node.name}
                      for i, node in enumerate(model.graph.node)]}


def verify(request):
    import onnx

    pins = _pin_batch(onnx.load(request["model"], load_external_data=False))
    cases = []
    for case in request["cases"]:
        shown = ["emx-onnx-cgen", "verify", request["model"], "--color", "never", "--test-data-dir", case,
                 *request["options"], *pins]
        command = [os.path.join(os.path.dirname(sys.executable), shown[0]), *shown[1:],
                   "--temp-dir-root", os.getcwd()]  # its build folder in the request's scratch folder
        proc = subprocess.run(command, capture_output=True, text=True, timeout=VERIFY_TIMEOUT_S, check=False)
        lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        worst = [line for line in lines if line.startswith("Worst diff:")]
        cases.append({"case": case, "exit": proc.returncode, "verdict": lines[-1] if lines else "(no output)",
                      "worst": worst[-1] if worst else None, "command": shlex.join(shown)})
    return {"cases": cases}


def _pin_batch(model):
    """``--input-dim NAME:0=1`` for each input whose first axis is dynamic (the batch of an exported model)."""
    initializers = {init.name for init in model.graph.initializer}
    pins = []
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name not in initializers and dims and not dims[0].HasField("dim_value"):
            pins += ["--input-dim", f"{value.name}:0=1"]
    return pins



if __name__ == "__main__":
    # emx-onnx-cgen refuses an operator or attribute it lacks with "Unsupported op ai.onnx.X" or another
    # "Unsupported ..."/"not supported" message (its UnsupportedOpError and CodegenError texts).
    main(generate, refuses=says("unsupported", "not supported"))
