"""emx-onnx-cgen (PyPI 1.4.0), emmtrix's ONNX-to-C generator, as an adapter, run in its own environment.

emx-onnx-cgen reads ONNX and writes one C file per model: a function ``<name>(input, output)`` whose parameters
are the ONNX tensors as C arrays (channels-first, the batch axis pinned to 1 by the driver), the weights as
``const`` arrays and one static function per node. Its variants are the option a certification team would
choose between: ``default`` (temporaries larger than 1024 bytes come from ``malloc``, freed before return)
and ``no-heap`` (``--large-temp-threshold 0``: every temporary on the stack, emmtrix's allocation-free mode).
Both ask for the weights in the C (``--large-weight-threshold 0``): by default emx-onnx-cgen writes weights
beyond 100 KiB to a ``.bin`` file read with ``fopen`` at run time, which a bare-metal target has no file for.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import ModelError
from harness.generators.generated import GeneratedCode
from harness.generators.peers import PeerEnv, PeerGenerator
from harness.generators.peers.wrapper import finish
from harness.models.model import Model
from harness.models.names import identifier

PEER = PeerEnv("emx-onnx-cgen")
# emx-onnx-cgen's integer kernels (QLinearConv, QGemm, QLinearMatMul, QuantizeLinear) requantize as ONNX Runtime's
# MLAS does: a float32 scale ``s_x * s_w / s_y``, the int32 accumulator times it in float32, rounded half to even
# (``nearbyint``), plus the zero point, saturated (its generated C; docs/peers.md, "Quantized models"). emx-onnx-cgen
# declares no rule itself; the adapter declares this one for code with quantized operators, so that the oracle holds
# that code to the integer arbiter under it, bit for bit, instead of a tolerance: a claim every campaign refutes or
# confirms. Its QDQ groups run as float ops, for which the arbiter has no rule: those verdicts fall back, visibly.
INTEGER_RULE = {"rule": "onnxruntime", "declared_by": "Assay's emx-onnx-cgen adapter (the peer declares none)"}
QUANTIZED_BOUNDARY = {"QuantizeLinear", "DequantizeLinear"}  # every quantized graph has one of these
COMMON = ("--large-weight-threshold", "0")
VARIANTS: dict[str, tuple[str, ...]] = {"default": (), "no-heap": ("--large-temp-threshold", "0")}


class EmxOnnxCgen(PeerGenerator):
    peer = PEER

    def variants(self, model: Model) -> list[str]:
        return list(VARIANTS) if "onnx" in model.files else []

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        self.single_io(model)
        self.float_io(model.file("onnx"))
        name = "emx_" + identifier(model.name)
        options = [*COMMON, *VARIANTS[variant]]
        out_dir.mkdir(parents=True, exist_ok=True)
        response = PEER.run({"action": "compile", "model": str(model.file("onnx").resolve()),
                             "out_dir": str(out_dir.resolve()), "name": name, "options": options})
        result = response["result"]
        if len(result["inputs"]) != 1 or len(result["outputs"]) != 1 or not result["signature"]:
            raise ModelError(f"emx-onnx-cgen on {model.name}: {len(result['inputs'])} inputs and "
                             f"{len(result['outputs'])} outputs (entry {result['signature']!r}); Assay's entry "
                             f"takes one of each, without size parameters")
        # The parameters are arrays of the ONNX shapes (``const float input[restrict 1][1][28][28]``): the flat
        # float buffers of Assay's entry convert to them through ``void *``, with the same layout in memory.
        return finish(out_dir, generator={"name": self.name, "version": self.version(),
                                          "options": {"cli": options, "command": result["command"]}},
                      model=model, fmt="onnx", prefix=f"{name}_", includes=[], sources=result["files"],
                      call=f"{result['signature']};\n    {name}((const void *)input, (void *)output);",
                      headers=[], layers=result["nodes"],
                      peer={"environment": response["environment"], "command": result["command"],
                            "operators": result["operators"], "inputs": result["inputs"],
                            "outputs": result["outputs"]},
                      quantization=INTEGER_RULE if QUANTIZED_BOUNDARY & set(result["operators"]) else None)
