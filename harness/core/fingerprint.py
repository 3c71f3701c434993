"""Content keys: a hash of everything a stage's record depends on, so that a re-run recomputes exactly
what changed and serves nothing stale.

A record's identity (model name, generator, variant, target, ...) says which
cell of a table it fills; its ``fingerprint`` says what it was computed from:
the model files' bytes, the generator (its version and the digest of its
source, or the bytes of prebuilt C), the target profile with the compiler's
version and flags and the runners' driver code, the tool versions, and the
stage's settings (inputs, seeds, tolerances, ...). A stored record is reused
only when both match; otherwise the item runs again and its record replaces
the old one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness import generators, targets
from harness.core.plan import Item, Settings
from harness.core.provenance import tool_versions
from harness.digests import digest, tree_digest
from harness.models.model import Model

RUNNERS_DIR = Path(__file__).resolve().parents[1] / "runners"


def target_identity(target: str, opt: str) -> dict:
    """The profile (with what it extends), the compiler's version, the flags and the runners' code."""
    profile = targets.get(target)
    return {"profile": dataclasses.asdict(profile), "flags": profile.flags(opt),
            "compiler": profile.compiler_version(), "runners": tree_digest(RUNNERS_DIR)}


def item_fingerprint(item: Item, model: Model, settings: Settings, **stage: object) -> str:
    """The content key of ``item``'s records; ``stage`` adds what only this stage depends on."""
    return digest({"model": model.sha256(), "model_seed": settings.model_seed,
                   "generator": generators.get(item.generator).identity(model, item.variant),
                   "target": target_identity(item.target, settings.opt),
                   "inputs": {"n": settings.n_inputs, "seed": settings.seed, "domain": model.input_domain},
                   "tools": tool_versions(), "stage": stage})
