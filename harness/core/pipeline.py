"""The steps every stage takes before its own work: generate the C, build it, and
move tensors between the model's canonical layout and the code's.

Each stage keeps its code and builds under its own subdirectory of the item's
work directory (``item_dir``), so stages may run at once on the same item.
The shards of an item (``harness.core.shards``) share its code and builds:
``generate_once`` and ``build_once`` do each step once per machine, under a
lock, whichever worker process gets there first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from harness import generators, runners, targets
from harness import tensors
from harness.core.locks import exclusive
from harness.core.plan import Item, Settings
from harness.digests import digest
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


def generate_once(item: Item, model: Model, settings: Settings, timings: dict, provenance: dict,
                  stage: str = "") -> GeneratedCode:
    """The item's code, generated once for all its shards and targets on this machine.

    Under the item's lock, the code is generated (``generate_code``) unless its folder holds code generated
    from the same model and generator identity whose files still have the SHA-256 recorded then; a worker
    that finds it there reuses it with that provenance (``generate_s`` 0).
    """
    directory = item_dir(item, settings, stage)
    key = digest({"model": model.sha256(), "model_seed": settings.model_seed,
                  "generator": generators.get(item.generator).identity(model, item.variant)})
    stamp = directory / "generated.json"
    with exclusive(directory / ".generate.lock"):
        if stamp.is_file():
            recorded = json.loads(stamp.read_text())
            try:
                code = GeneratedCode.from_directory(Path(recorded["directory"]))
            except AssayError:
                code = None
            if recorded["key"] == key and code is not None and code.source_hashes() == recorded["sources_sha256"]:
                timings["generate_s"] = 0.0
                provenance.update(generator_version=recorded["generator_version"],
                                  sources_sha256=recorded["sources_sha256"])
                return code
            stamp.unlink()
        code = generate_code(item, model, settings, timings, provenance, stage)
        stamp.write_text(json.dumps({"key": key, "directory": str(code.directory),
                                     "generator_version": provenance["generator_version"],
                                     "sources_sha256": provenance["sources_sha256"]}))
        return code


def build_once(item: Item, target: str, code: GeneratedCode, settings: Settings, timings: dict, provenance: dict,
               stage: str = ""):
    """``build_code`` under the build folder's lock: one worker compiles, the others find the build done
    (the runners skip a build whose command and sources are unchanged, ``runners.compiling.compile_once``)."""
    with exclusive(item_dir(item, settings, stage) / f".build-{target}{settings.opt}.lock"):
        return build_code(item, target, code, settings, timings, provenance, stage)


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


def private_build(built, directory: Path):
    """``built`` with its artefact (the library or ELF) hard-linked into ``directory``: a runner uses its
    artefact's folder for the batch's files (inputs, outputs, log), so concurrent runs of one build (shards
    on the workers of one machine) each need a folder of their own. The links' paths are absolute (a relative
    ``--work`` would make them relative): a runner's process may run in another folder (the sandbox's)."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    moved = {}
    for field in dataclasses.fields(built):
        artefact = getattr(built, field.name)
        if isinstance(artefact, Path) and artefact.is_file():
            link = directory / artefact.name
            link.unlink(missing_ok=True)
            try:
                os.link(artefact, link)
            except OSError:  # another file system, or no hard links there
                shutil.copy2(artefact, link)
            moved[field.name] = link
    return dataclasses.replace(built, **moved)


def to_code_layout(inputs: np.ndarray, model: Model, code: GeneratedCode) -> np.ndarray:
    """Canonical input batch -> (N, input_size) in the layout the code declares."""
    converted = tensors.convert(inputs, model.layout, code.input_layout or model.layout)
    return converted.reshape(len(inputs), -1)


def from_code_layout(outputs: np.ndarray, model: Model, code: GeneratedCode) -> np.ndarray:
    """(N, output_size) in the code's layout -> canonical output batch."""
    code_layout = code.output_layout or model.output_layout
    shape = tensors.shape_in(model.output_shape, model.output_layout, code_layout)
    return tensors.convert(outputs.reshape(len(outputs), *shape), code_layout, model.output_layout)
