"""The steps every stage takes before its own work: generate the C, build it, and
move tensors between the model's canonical layout and the code's.

Each stage keeps its code and builds under its own subdirectory of the item's
work directory (``item_dir``), so stages may run at once on the same item.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from harness import generators, runners, targets
from harness.core import tensors
from harness.core.plan import Item, Settings
from harness.errors import AssayError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model


def item_dir(item: Item, settings: Settings, stage: str = "") -> Path:
    """Where an item's generated code and builds live: one tree per model, generator and variant.

    ``stage`` separates stages (met, memory, wcet) that may regenerate the same code concurrently.
    """
    return settings.work_dir / slug(item.model) / slug(item.generator) / item.variant / stage


def slug(text: str) -> str:
    """``text`` as one safe path component."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def generate_code(item: Item, model: Model, settings: Settings, timings: dict, provenance: dict,
                  stage: str = "") -> GeneratedCode:
    """Generate fresh code into the item's ``src`` directory (prebuilt code stays where it is).

    Fills ``timings["generate_s"]`` and the generator's provenance; a generator exception becomes an AssayError.
    """
    generator = generators.get(item.generator)
    start = time.perf_counter()
    source_dir = item_dir(item, settings, stage) / "src"
    if source_dir.exists():
        shutil.rmtree(source_dir)
    try:
        code = generator.generate(model, item.variant, source_dir)
    except AssayError:
        raise
    except Exception as exc:
        raise AssayError(f"generator failed: {type(exc).__name__}: {exc}") from exc
    timings["generate_s"] = time.perf_counter() - start
    provenance.update(generator_version=generator.version(), sources_sha256=code.source_hashes())
    return code


def build_code(item: Item, target: str, code: GeneratedCode, settings: Settings, timings: dict, provenance: dict,
               stage: str = ""):
    """Build ``code`` for ``target`` under the item's work directory (never beside prebuilt sources)."""
    profile = targets.get(target)
    runner = runners.for_kind(profile.kind)
    built = runner.build(code, item_dir(item, settings, stage) / f"build-{target}{settings.opt}", profile,
                         settings.opt)
    timings["compile_s"] = built.seconds
    provenance.update(compiler=built.compiler_version, flags=list(built.flags))
    return built


def to_code_layout(inputs: np.ndarray, model: Model, code: GeneratedCode) -> np.ndarray:
    """Canonical input batch -> (N, input_size) in the layout the code declares."""
    converted = tensors.convert(inputs, model.layout, code.input_layout or model.layout)
    return converted.reshape(len(inputs), -1)


def from_code_layout(outputs: np.ndarray, model: Model, code: GeneratedCode) -> np.ndarray:
    """(N, output_size) in the code's layout -> canonical output batch."""
    code_layout = code.output_layout or model.output_layout
    shape = tensors.shape_in(model.output_shape, model.output_layout, code_layout)
    return tensors.convert(outputs.reshape(len(outputs), *shape), code_layout, model.output_layout)
