"""The semantic-preservation campaign as test items (paper Table 1, section 4.2).

By default: the default zoo tier, assay-v2 from both Keras and ONNX sources,
host gcc -O0, 1000 seeded inputs (200 in the default test command: conftest.py), compared with Keras and ONNX
Runtime. The
test itself is in the package (``harness/stages/semantic/pytest_items.py``), where
``assay semantic --workers N`` and remote xdist workers find it.
"""

from harness.stages.semantic.pytest_items import test_semantic_preservation  # noqa: F401  (collected here)
