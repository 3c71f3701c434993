"""``assay semantic --sanitize N`` (default 16): the host item's code run again under AddressSanitizer and
UBSan, with the arena-region check.

The oracle compares outputs; it cannot see an out-of-bounds read of a zero or a
write into unused arena padding. ``check`` runs N of the campaign's inputs,
sampled with the campaign's seed, through the sanitized build of the same code
(``harness.runners.sanitized``), whose entry file also carries the arena-region
check (``harness.runners.arenacheck``: guard words in the free arena, each
layer's writes checked against its output's place) where the manifest says
where the layers and tensors are; a report is a ``RunError`` with the
sanitizer's (or the check's) first line, which ``run.run_item`` turns into an
``error`` verdict like a crash. Only the host item runs it: the sanitizers exist
for the host compiler, and the code is the same on every target (the ARM targets
check the guard words around their buffers on every run). It is on by default
because a memory fault that leaves the outputs right is still a defect; its cost
(one more build and N inputs per host item) is in docs/benchmarks.md; ``--sanitize
0`` turns it off, and the records and table1.md say so (``OFF``).
"""

from __future__ import annotations

import time

import numpy as np

from harness.core.inputs import campaign_inputs, campaign_size
from harness.core.pipeline import item_dir, to_code_layout
from harness.core.plan import Item
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.runners import sanitized
from harness.targets import HOST
from harness.stages.semantic.settings import Settings

OFF = "off (--sanitize 0)"  # the record's provenance ``sanitizer`` of a host item run without the memory checks


def sample(n_inputs: int, count: int, seed: int) -> np.ndarray:
    """Indices of ``count`` of the campaign's ``n_inputs`` inputs, seeded, in increasing order."""
    chosen = np.random.default_rng(seed).choice(n_inputs, size=min(count, n_inputs), replace=False)
    return np.sort(chosen)


def check(item: Item, code: GeneratedCode, model: Model, settings: Settings, provenance: dict, timings: dict
          ) -> None:
    """Run ``settings.sanitize`` sampled inputs under the sanitizers and the arena-region check; RunError on a
    report, a damaged guard or a layer writing outside its output. With ``--sanitize 0`` the host item's provenance
    says the checks were off."""
    if item.target != HOST:
        return
    if not settings.sanitize:
        provenance["sanitizer"] = OFF
        return
    start = time.perf_counter()
    chosen = sample(campaign_size(model, settings), settings.sanitize, settings.seed)
    inputs = to_code_layout(campaign_inputs(model, settings), model, code)[chosen]
    built = sanitized.build(code, item_dir(item, settings) / f"build-sanitized{settings.opt}", settings.opt,
                            arena=True)
    provenance["sanitizer"] = {"inputs": len(chosen), "flags": list(sanitized.FLAGS),
                               "compiler": built.compiler_version, "arena_check": built.arena_checked}
    try:
        sanitized.run(built, inputs, settings.timeout)
    finally:
        timings["sanitize_s"] = time.perf_counter() - start
