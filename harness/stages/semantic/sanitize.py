"""``assay semantic --sanitize N``: the host item's code run again under AddressSanitizer and UBSan.

The oracle compares outputs; it cannot see an out-of-bounds read of a zero or a
write into unused arena padding. ``check`` runs N of the campaign's inputs,
sampled with the campaign's seed, through the sanitized build of the same code
(``harness.runners.sanitized``); a report is a ``RunError`` with the
sanitizer's first line, which ``run.run_item`` turns into an ``error`` verdict
like a crash. Only the host item runs it: the sanitizers exist for the host
compiler, and the code is the same on every target (the ARM targets check the
guard words around their buffers on every run).
"""

from __future__ import annotations

import numpy as np

from harness.core.inputs import make_inputs
from harness.core.pipeline import item_dir, to_code_layout
from harness.core.plan import Item
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.runners import sanitized
from harness.targets import HOST
from harness.stages.semantic.settings import Settings


def sample(n_inputs: int, count: int, seed: int) -> np.ndarray:
    """Indices of ``count`` of the campaign's ``n_inputs`` inputs, seeded, in increasing order."""
    chosen = np.random.default_rng(seed).choice(n_inputs, size=min(count, n_inputs), replace=False)
    return np.sort(chosen)


def check(item: Item, code: GeneratedCode, model: Model, settings: Settings, provenance: dict) -> None:
    """Run ``settings.sanitize`` sampled inputs under the sanitizers; RunError on a report or a damaged guard."""
    if not settings.sanitize or item.target != HOST:
        return
    chosen = sample(settings.n_inputs, settings.sanitize, settings.seed)
    inputs = to_code_layout(make_inputs(model, settings.n_inputs, settings.seed), model, code)[chosen]
    built = sanitized.build(code, item_dir(item, settings) / f"build-sanitized{settings.opt}", settings.opt)
    provenance["sanitizer"] = {"inputs": len(chosen), "flags": list(sanitized.FLAGS),
                               "compiler": built.compiler_version}
    sanitized.run(built, inputs, settings.timeout)
