"""keras2c (PyPI 2.0) as an adapter, run in its own TensorFlow 2.15 (Keras 2) environment.

Variants: ``stack`` (keras2c's default: every weight and activation array a local of the generated function)
and ``malloc`` (``malloc=True``: large arrays allocated at initialisation). keras2c's C code includes its
backend library (``./include/k2c_include.h`` and its ``.c`` files), which neither the PyPI wheel nor the
sdist of keras2c 2.0 contain (docs/peers.md, finding K2): the code cannot be compiled. The adapter says so
in one line, with what the generated source itself shows: the bytes of arrays the entry function declares
on the stack, and whether it calls ``malloc``. The error (``Unbuildable``) names the code's directory and the
functions a caller calls (``<name>_initialize``, ``<name>``, ``<name>_terminate``), so the memory stage reports
the stack arrays and the heap allocation from the source (``harness.binary.source_memory``).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.errors import Unbuildable
from harness.generators.generated import GeneratedCode
from harness.generators.peers import PeerEnv, PeerGenerator
from harness.generators.peers.keras_graph import write
from harness.models.model import Model
from harness.models.names import identifier

PEER = PeerEnv("keras2c")
VARIANTS = ("stack", "malloc")
BACKEND = "include/k2c_include.h"
LOCAL_ARRAY = re.compile(r"^\s{0,4}float\s+\w+\[(\d+)\]", re.MULTILINE)


class Keras2c(PeerGenerator):
    peer = PEER

    def variants(self, model: Model) -> list[str]:
        return list(VARIANTS) if "keras" in model.files else []

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        self.single_io(model)
        out_dir.mkdir(parents=True, exist_ok=True)
        spec, weights = write(model, out_dir.parent / f"{out_dir.name}-model" / "graph")
        function = "k2c_" + identifier(model.name)
        PEER.run({"spec": str(spec.resolve()), "weights": str(weights.resolve()), "out_dir": str(out_dir.resolve()),
                  "function_name": function, "malloc": variant == "malloc"})
        source = (out_dir / f"{function}.c").read_text()
        floats = sum(int(n) for n in LOCAL_ARRAY.findall(source))
        raise Unbuildable(f"keras2c {self.version()} wrote {function}.c, which includes ./{BACKEND}: the PyPI "
                          f"package ships no C backend, so the code cannot be compiled (docs/peers.md K2); "
                          f"the source declares {floats * 4} bytes of float arrays as locals of {function} and "
                          f"calls malloc {source.count('malloc(')} times", directory=out_dir,
                          entries=[f"{function}_initialize", function, f"{function}_terminate"],
                          opaque_types=["k2c_tensor"])
