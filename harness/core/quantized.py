"""A quantized (int8) model's yardstick, for every stage that judges its C: the integer arbiter
(``harness.references.integer``, registered as the references ``integer-<rule>``) under the requantization rule
the code's manifest declares, bit for bit (docs/semantic.md, "Quantized models"; docs/mutation.md, "Quantized
models").

Why here and not in a stage: the semantic stage judges the C by it and the mutation stage judges every mutant by
the same rule (a mutant is killed exactly when the semantic stage would fail its C); one module says which models
it applies to, which rules it knows and where its outputs come from, so the two verdicts cannot drift apart.
"""

from __future__ import annotations

import numpy as np

from harness import references
from harness.core import refcache
from harness.core.plan import Settings
from harness.models.model import Model
from harness.references import integer


def is_quantized(model: Model | None) -> bool:
    """Whether ``model`` is a quantized ONNX graph (``integer.QUANTIZED_OPS``): its yardstick is the integer arbiter,
    not the float64 one."""
    return model is not None and "onnx" in model.files and integer.quantized(model.file("onnx"))


def quantization_rule(manifest: dict) -> str | None:
    """The requantization rule a generator's manifest declares for its integer code (``"quantization": {"rule":
    ...}``, docs/quantized.md), or None."""
    declared = manifest.get("quantization")
    return declared.get("rule") if isinstance(declared, dict) and isinstance(declared.get("rule"), str) else None


def not_applicable(rule: str | None) -> str | None:
    """Why the integer arbiter cannot judge code that declares ``rule`` (none, or one it does not know), or None
    when it can; the caller then falls back to the fixed tolerance, saying this."""
    if rule is None:
        return "the generated code declares no requantization rule (its manifest's 'quantization')"
    if rule not in integer.RULES:
        return f"the generated code declares the requantization rule {rule!r}, which the integer arbiter does not " \
               f"know ({', '.join(integer.RULES)})"
    return None


def reference_rule(ref_name: str) -> str | None:
    """The requantization rule reference ``ref_name`` declares its integer kernels follow (its ``integer_rule``:
    ONNX Runtime's float32 one, LiteRT's reference kernels' ``litert`` one), or None: the semantic stage holds that
    reference bit for bit to the arbiter under it, so a reference that strays from its own documented arithmetic is
    a defect named in the record, never absorbed into a tolerance."""
    rule = getattr(references.get(ref_name), "integer_rule", None)
    return rule if rule in integer.RULES else None


def reference_name(rule: str) -> str:
    """The registered reference that evaluates the arbiter under ``rule`` (``harness.references.integer_ref``)."""
    return f"integer-{rule}"


def integer_outputs(model: Model, settings: Settings, rule: str, inputs: np.ndarray | None = None) -> np.ndarray:
    """The integer arbiter's outputs under ``rule`` on ``inputs`` (default the campaign's), cached and sealed
    (``refcache``); raises what the arbiter raises (an op or pattern it refuses, by name)."""
    return refcache.reference_outputs(reference_name(rule), model, settings, inputs)
