"""emlearn (PyPI 0.23.2) as an adapter: dense Keras networks to C, run in its own environment.

emlearn converts a ``keras.Sequential`` of Dense layers (activations merged in) into C that calls its
header-only library (``eml_net.h``). Its two inference strategies are the Assay variants: ``loadable`` (a
table of layers walked by ``eml_net_regress``) and ``inline`` (one unrolled call per layer). Anything else in
the model is refused by emlearn itself: that is the ``not supported`` verdict with emlearn's message.
"""

from __future__ import annotations

from pathlib import Path

from harness.generators.generated import GeneratedCode
from harness.generators.peers import PeerEnv, PeerGenerator
from harness.generators.peers.wrapper import finish
from harness.models.model import Model
from harness.models.names import identifier

PEER = PeerEnv("emlearn")
METHODS = ("loadable", "inline")


class Emlearn(PeerGenerator):
    peer = PEER

    def variants(self, model: Model) -> list[str]:
        return list(METHODS) if "keras" in model.files else []

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        self.single_io(model)
        prefix = identifier(model.name, "m")
        out_dir.mkdir(parents=True, exist_ok=True)
        response = PEER.run({"model": str(model.file("keras").resolve()), "out_dir": str(out_dir.resolve()),
                             "prefix": prefix, "method": variant})
        result = response["result"]
        (net,) = result["files"]
        # emlearn writes the network as a header of definitions: one translation unit that includes it.
        # ``loadable`` has a regression entry; ``inline`` only ``_infer``, which leaves the outputs in its
        # second activation buffer (emlearn's template says so), copied out here.
        call = (f"{prefix}_regress(input, {model.input_size}, output, {model.output_size});" if variant == "loadable"
                else f"{prefix}_infer(input, {model.input_size}, {prefix}_activations1, {prefix}_activations2, "
                     f"{prefix}_activations_length);\n"
                     f"    for (int i = 0; i < {model.output_size}; i++) output[i] = {prefix}_activations2[i];")
        return finish(out_dir, generator={"name": self.name, "version": self.version(), "options": {"method": variant}},
                      model=model, fmt="keras", prefix=f"{prefix}_", call=call, includes=[net], sources=[],
                      headers=[net, *result["headers"]], layers=result["layers"],
                      peer={"environment": response["environment"], "keras_layers": result["keras_layers"]})
