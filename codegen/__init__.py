"""Assay's own ACETONE-style predictable C code generator, strategy V2 (inlined inference).

``generate(model, out_dir)`` reads a Keras (``.keras``/``.h5``) or ONNX model and
writes one C99 inference function whose layers are inlined as counted loops
with literal bounds, static buffers only, plus ``manifest.json``
(docs/manifest.md). It never imports the harness: it is the tool under test.
See docs/codegen.md.
"""

from codegen.errors import UnsupportedModel
from codegen.pipeline import GENERATOR_NAME, __version__, generate

__all__ = ["GENERATOR_NAME", "UnsupportedModel", "__version__", "generate"]
