"""Assay's own ACETONE-style predictable C code generator, strategies V1, V2 and V3.

``generate(model, out_dir, strategy="v2")`` reads a Keras (``.keras``/``.h5``)
or ONNX model and writes C99 with static memory only, plus ``manifest.json``
(docs/manifest.md): V1 a generic loop over layer structs calling through
function pointers, V2 one function with every layer inlined as counted loops
with literal bounds, V3 no loops at all. ``transforms`` selects the
semantics-preserving transformations of §2.2. It never imports the harness:
it is the tool under test. See docs/codegen.md.
"""

from codegen.errors import OverLimit, UnsupportedModel
from codegen.pipeline import STRATEGIES, __version__, applicable_transforms, generate
from codegen.transforms import DEFAULT as DEFAULT_TRANSFORMS
from codegen.transforms import ORDER as TRANSFORMS
from codegen.transforms import parse as parse_transforms

__all__ = ["DEFAULT_TRANSFORMS", "STRATEGIES", "TRANSFORMS", "OverLimit", "UnsupportedModel", "__version__",
           "applicable_transforms", "generate", "parse_transforms"]
