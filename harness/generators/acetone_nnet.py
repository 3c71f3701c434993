"""acetone-nnet (PyPI 1.0.post1), ONERA's ACETONE, as an adapter, run in its own Keras 2 environment.

ACETONE picks an implementation per layer type; the convolution has nine (``6loops``, ``std_gemm_nn|tn|nt|tt``,
``indirect_gemm_nn|tn|nt|tt``), the other layers one (``default``). Each convolution implementation is an
Assay variant, so a campaign checks each separately; a model without convolution has the one variant
``default``. The model reaches ACETONE through its Keras importer (the graph rebuilt in Keras 2,
``peers/keras_graph.py``): its ONNX importer crashes on every ``Gemm`` with the ONNX default ``alpha = 1``
(docs/peers.md, finding A1), which is every Dense layer exported to ONNX.
"""

from __future__ import annotations

from pathlib import Path

from harness.generators.generated import GeneratedCode
from harness.generators.peers import PeerEnv, PeerGenerator
from harness.generators.peers.keras_graph import write
from harness.generators.peers.wrapper import finish
from harness.models.model import Model

PEER = PeerEnv("acetone-nnet")
CONV_VARIANTS = ("6loops", "std_gemm_nn", "std_gemm_tn", "std_gemm_nt", "std_gemm_tt",
                 "indirect_gemm_nn", "indirect_gemm_tn", "indirect_gemm_nt", "indirect_gemm_tt")
DEFAULT = "default"
# ACETONE writes a test main and data set beside the inference code: not part of what is checked.
NOT_COMPILED = ("main.c", "test_dataset.c")


class AcetoneNnet(PeerGenerator):
    peer = PEER

    def variants(self, model: Model) -> list[str]:
        if "keras" not in model.files:
            return []
        return list(CONV_VARIANTS) if _has_conv(model) else [DEFAULT]

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        self.single_io(model)
        out_dir.mkdir(parents=True, exist_ok=True)
        spec, weights = write(model, out_dir.parent / f"{out_dir.name}-model" / "graph")
        versions = {} if variant == DEFAULT else {"Conv2D": variant}
        response = PEER.run({"spec": str(spec.resolve()), "weights": str(weights.resolve()),
                             "out_dir": str(out_dir.resolve()),
                             "function_name": "inference", "versions": versions})
        result = response["result"]
        sources = [name for name in result["files"] if name.endswith(".c") and name not in NOT_COMPILED]
        headers = [name for name in result["files"] if name.endswith(".h")]
        return finish(out_dir, generator={"name": self.name, "version": self.version(),
                                          "options": {"versions": versions or "ACETONE defaults"}},
                      model=model, fmt="keras", prefix="acetone_", includes=["inference.h"], sources=sources,
                      call="inference(output, (float *)input);  /* ACETONE: inference(prediction, nn_input) */",
                      headers=headers, layers=result["layers"],
                      peer={"environment": response["environment"], "implementations": result["implementations"]})


def _has_conv(model: Model) -> bool:
    """Whether the Keras model has a convolution (read from the file's config, without loading Keras)."""
    import zipfile

    with zipfile.ZipFile(model.file("keras")) as archive:
        return '"class_name": "Conv2D"' in archive.read("config.json").decode()
