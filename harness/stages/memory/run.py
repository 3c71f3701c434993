"""The memory-layout analysis (paper Table 5): model -> generator -> build -> ELF sizes,
static stack bound, measured stack -> one record (docs/memory.md).

An *item* is one (model, generator, variant, target, optimisation level), as
in every stage (``harness.core.plan.expand`` expands them). Running it:

1. generates the C (once per model, generator and variant in a session);
2. builds it with the target's runner, adding ``-fstack-usage
   -fcallgraph-info=su`` (they do not change the code) and reads the ELF:
   ``.text``/``.rodata``/``.data``/``.bss`` of the inference alone (the
   manifest's symbols) and of the whole image, and the static worst-case stack
   of the entry (``harness.binary.stack``);
3. on a QEMU target, builds again with ``-DASSAY_STACK_PAINT=<bytes>``, runs
   the batch and reads the stack high-water mark the driver measured.

Every record also says whether heap allocation (``malloc`` and its kin) is
reachable from the entry (``heap``: from the binary's call graph). Code a
generator wrote that cannot be compiled (``harness.errors.Unbuildable``:
keras2c from PyPI) is an ``error`` whose record still carries what its C says
(``source``: the bytes of local arrays on the deepest call path, a lower bound
of the stack, and the call paths to an allocator; ``harness.binary.source_memory``).

The record's ``verdict``: ``pass`` (a static bound, and no measured figure
above it), ``unbounded`` (the analysis found no bound; ``cause`` says why),
``not supported`` (the generator refused the model with its own message),
``fail`` (measured above the static bound) or ``error`` (generation, build or
run failed). Failures become records, never exceptions.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Container
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness import generators, runners, targets
from harness.binary import elf, source_memory, stack
from harness.contract import MODEL_SEED, SEED, WORK
from harness.core.inputs import make_inputs
from harness.core.pipeline import generate_once, item_dir, to_code_layout
from harness.core.plan import Item, load_model
from harness.core.plan import Settings as CampaignSettings
from harness.core.provenance import record_provenance
from harness.core.results import ResultStore
from harness.core.oracle import ERROR, FAIL, NOT_MEASURED, NOT_SUPPORTED, PASS, UNBOUNDED
from harness.errors import USER_ERRORS, NotSupported, Unbuildable
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.runners import compiling
from harness.runners.qemu import ELF_NAME
from harness.stages.memory.spec import SPEC
from harness.targets import compiler_version

STAGE = "memory"  # work subdirectory, beside the semantic campaign's (both may run at once)
SCHEMA = SPEC.schema
KEY_FIELDS = SPEC.key_fields
STACK_FLAGS = ("-fstack-usage", "-fcallgraph-info=su")


@dataclass(frozen=True)
class Settings:
    """The defaults are the options' (``spec``, and ``harness.contract`` for the shared ones)."""

    opt: str = "-O0"
    work_dir: Path = WORK.default
    seed: int = SEED.default
    model_seed: int = MODEL_SEED.default
    n_inputs: int = SPEC.default("n_inputs")  # inputs run on the target for the measured stack
    paint: int = SPEC.default("paint")  # bytes painted below main's stack pointer
    timeout: float = SPEC.default("timeout")

    def campaign(self) -> CampaignSettings:
        return CampaignSettings(n_inputs=self.n_inputs, seed=self.seed, model_seed=self.model_seed, opt=self.opt,
                                work_dir=self.work_dir, timeout=self.timeout)


@dataclass
class Session:
    """Generated code shared by the items of one model, generator and variant."""

    generated: dict[tuple[str, str, str], GeneratedCode] = field(default_factory=dict)


def open_store(path: Path) -> ResultStore:
    """``memory.json``: records keyed by KEY_FIELDS, written as they come (harness.core.results)."""
    return ResultStore.of(SPEC, path)


def run_item(item: Item, settings: Settings, store: ResultStore | None = None,
             session: Session | None = None) -> dict:
    """Analyse one item and store its record; never raises for the item's own faults."""
    record = {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
              "opt": settings.opt, "verdict": ERROR, "cause": None, "inference": None, "image": None,
              "stack": None, "heap": None, "build": None, "timings": {},
              "provenance": record_provenance()}
    try:
        _analyse(item, settings, session or Session(), record)
    except NotSupported as exc:  # the generator's own refusal, as in the semantic campaign
        record.update(verdict=NOT_SUPPORTED, cause=str(exc))
    except Unbuildable as exc:
        record.update(verdict=ERROR, cause=str(exc))
        try:
            record["source"] = source_memory.analyse(sorted(exc.directory.glob("*.c")), exc.entries,
                                                     exc.opaque_types)
            record["heap"] = {"allocators": record["source"]["allocators"], "origin": "C source",
                              "paths": [p for e in record["source"]["entries"] for p in e["heap"]]}
        except USER_ERRORS as source_exc:  # the finding stands without it; say why it is missing
            record["cause"] += f"; its source could not be read either: {source_exc}"
    except USER_ERRORS as exc:
        record.update(verdict=ERROR, cause=str(exc))
    except Exception as exc:  # noqa: BLE001 - a generator or tool crash is this item's error, not the session's end
        record.update(verdict=ERROR, cause=f"{type(exc).__name__}: {exc}")
    record["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    if store is not None:
        store.put(record)
    return record


def _analyse(item: Item, settings: Settings, session: Session, record: dict) -> None:
    timings, provenance = record["timings"], record["provenance"]
    model = load_model(item.model, settings.campaign())
    provenance["model_sha256"] = model.sha256()
    code = _generate(item, model, settings, session, timings)
    provenance.update(generator_version=generators.get(item.generator).version(),
                      sources_sha256=code.source_hashes())
    profile = targets.get(item.target)
    runner = runners.for_kind(profile.kind)
    build_dir = (_item_dir(item, settings) / f"{item.target}{settings.opt}").resolve()

    start = time.perf_counter()
    built, image_path, too_large = _build(runner, code, build_dir, profile, settings.opt)
    timings["compile_s"] = time.perf_counter() - start
    compiler = built.compiler_version if built else compiler_version(profile.compiler_path())
    record["build"] = {"compiler": compiler, "flags": [*profile.flags(settings.opt), *STACK_FLAGS],
                       "elf": str(image_path)}
    start = time.perf_counter()
    image = elf.read(image_path)
    flash = profile.read_only_memory()
    record["image"] = elf.image_sizes(image, flash)
    bound = stack.analyse(image, code.entry, stack.read_gcc_stack(stack.gcc_files(build_dir, _c_sources(code))),
                          code.manifest.get("indirect_calls", ()))
    record["inference"] = inference_sizes(image, code, bound, flash)
    record["heap"] = heap_use(bound)
    timings["analyse_s"] = time.perf_counter() - start
    record["stack"] = {"static": bound.as_dict(), "measured": None}
    if too_large:  # sizes and static stack are known; the image cannot run on the target
        record.update(verdict=ERROR, cause=f"{too_large}; stack not measured")
        return
    unrunnable = profile.not_runnable_cause()
    if runners.capable(profile, runners.PAINTS_STACK) and unrunnable is None:
        record["stack"]["measured"] = _measure(model, code, runner, profile, settings, build_dir, bound, timings)
    record.update(_verdict(bound, record["stack"]["measured"], unrunnable))


def _generate(item: Item, model: Model, settings: Settings, session: Session, timings: dict) -> GeneratedCode:
    """Generate once per (model, generator, variant) in a session: the targets share the code; and once per
    machine (``generate_once``): a later run reuses code generated from the same model and generator, without
    loading the model's framework again (a warm evidence build spent most of this stage's time there)."""
    key = (item.model, item.generator, item.variant)
    if key not in session.generated:
        session.generated[key] = generate_once(item, model, settings.campaign(), timings, {}, stage=STAGE)
    return session.generated[key]


def _item_dir(item: Item, settings: Settings) -> Path:
    return item_dir(item, settings.campaign(), STAGE)


def _c_sources(code: GeneratedCode) -> list[Path]:
    return [source for source in code.sources if source.suffix == ".c"]


def _build(runner, code: GeneratedCode, build_dir: Path, profile, opt: str, extra: tuple[str, ...] = ()):
    """Build with the stack-usage flags, gcc's files going to ``build_dir``.

    Returns (build, ELF path, None), or (None, ELF path, cause) when the image
    linked but is too large for the target (the sizes are still worth reporting).
    """
    build_dir = build_dir.resolve()
    expected = stack.gcc_files(build_dir, _c_sources(code))
    if not all(path.is_file() for path in expected):
        compiling.forget_builds(build_dir)  # an earlier build without them: rebuild
    flagged = dataclasses.replace(profile, cflags=(*profile.cflags, *STACK_FLAGS, "-dumpdir", f"{build_dir}/", *extra))
    try:
        built = runner.build(code, build_dir, flagged, opt)
    except runners.RunError as exc:
        linked = build_dir / ELF_NAME
        if str(exc).startswith("image too large") and compiling.stamp_path(linked).is_file():
            return None, linked, str(exc)
        raise
    return built, getattr(built, "elf", None) or built.library, None


def inference_sizes(image: elf.ElfImage, code: GeneratedCode, bound: stack.StackBound,
                    flash: Container[int] | None = None) -> dict | None:
    """Sizes of the manifest's symbols, and of the library functions the entry reaches."""
    symbols = code.manifest.get("symbols")
    if not symbols:  # another tool's code: what the generated files define, read from the DWARF
        files = {path.name for path in code.sources} | {Path(name).name for name in code.manifest.get("headers", [])}
        names = elf.symbols_defined_in(image.path, files)
        if not names:
            return {"text": None, "rodata": None, "data": None, "bss": None, "symbols": [], "missing": [],
                    "note": "the manifest lists no symbols and the DWARF names none in the generated files: "
                            "sizes of the inference alone unknown", "library": library_code(image, bound, set())}
        sizes = elf.symbol_sizes(image, names, flash)
        sizes["note"] = ("the manifest lists no symbols: the functions and variables the generated files define "
                         "(DWARF), Assay's one-call wrapper included")
        sizes["library"] = library_code(image, bound, set(names))
        return sizes
    names = [*symbols.get("code", []), *symbols.get("data", [])]
    sizes = elf.symbol_sizes(image, names, flash)
    sizes["library"] = library_code(image, bound, set(symbols.get("code", [])))
    return sizes


def heap_use(bound: stack.StackBound) -> dict:
    """The allocators (``malloc`` and its kin, newlib's reentrant ``_malloc_r`` too) the entry's call graph
    reaches, each with a call path from the entry: heap use is a finding for certification, not a detail."""
    names = {*source_memory.ALLOCATORS, *(f"_{name}_r" for name in source_memory.ALLOCATORS)}
    reached = {min(names & set(function.aliases)): key for key, function in bound.functions.items()
               if names & set(function.aliases)}  # the standard name, whatever the library calls it (picolibc)
    return {"allocators": sorted(reached), "origin": "binary call graph",
            "paths": [" -> ".join(_call_path(bound, reached[name])) for name in sorted(reached)]}


def _call_path(bound: stack.StackBound, target: str) -> list[str]:
    """A shortest call path from the entry to ``target`` in the stack analysis's call graph."""
    paths, queue = {bound.entry: [bound.entry]}, [bound.entry]
    for name in queue:
        for callee in bound.functions[name].calls if name in bound.functions else []:
            if callee not in paths:
                paths[callee] = paths[name] + [callee]
                queue.append(callee)
    return paths.get(target, [target])


def library_code(image: elf.ElfImage, bound: stack.StackBound, own: set[str]) -> dict:
    """``.text`` of the functions the call graph reached that the generator did not write.

    Extents that overlap (libgcc's ``__aeabi_fsub`` holds ``__addsf3``) count once.
    """
    functions, covered = [], []
    for function in bound.functions.values():
        if own & set(function.aliases) or function.address is None:
            continue
        size = max((s.size for name in function.aliases for s in image.symbols_named(name)), default=0)
        functions.append({"name": function.name, "size": size})
        covered.append((function.address, function.address + size))
    text, reach = 0, None
    for low, high in sorted(covered):
        if reach is not None and low < reach:
            text += max(0, high - reach)
            reach = max(reach, high)
        else:
            text, reach = text + high - low, high
    return {"text": text, "functions": sorted(functions, key=lambda f: f["name"])}


def _measure(model: Model, code: GeneratedCode, runner, profile, settings: Settings,
             build_dir: Path, bound: stack.StackBound, timings: dict) -> dict:
    """Build with the painting driver, run the batch and read the high-water mark."""
    paint_dir = build_dir.with_name(build_dir.name + "-paint")
    start = time.perf_counter()
    built, image_path, too_large = _build(runner, code, paint_dir, profile, settings.opt,
                                          (f"-DASSAY_STACK_PAINT={settings.paint}",))
    if too_large:
        raise runners.RunError(f"painting build: {too_large}")
    timings["compile_paint_s"] = time.perf_counter() - start
    inputs = to_code_layout(make_inputs(model, settings.n_inputs, settings.seed), model, code)
    outcome = runner.run(built, inputs, settings.timeout)
    timings["run_s"] = outcome.wall_seconds
    mark = runner.read_stack_mark(built)
    if mark is None:
        raise runners.RunError("the painting driver wrote no stack measurement")
    if mark.calls != len(inputs):
        raise runners.RunError(f"stack measured over {mark.calls} calls, expected {len(inputs)}")
    if mark.depth >= mark.painted:
        raise runners.RunError(f"stack use reached the end of the painted area ({mark.painted} bytes); "
                               f"paint more (--paint)")
    painted = stack.analyse(elf.read(image_path), code.entry,
                            stack.read_gcc_stack(stack.gcc_files(paint_dir, _c_sources(code))),
                            code.manifest.get("indirect_calls", ()))
    return {"bytes": mark.depth, "painted": mark.painted, "calls": mark.calls, "inputs": len(inputs),
            "seed": settings.seed, "elf": str(image_path),
            "static_of_this_build": painted.bytes,
            "same_static": painted.bytes == bound.bytes and painted.reason == bound.reason}


def _verdict(bound: stack.StackBound, measured: dict | None, unrunnable: str | None = None) -> dict:
    """The record's verdict; ``unrunnable``: why the target cannot run the image (the bound stands alone)."""
    if not bound.bounded:
        return {"verdict": UNBOUNDED, "cause": f"static stack of {bound.entry} unbounded: {bound.reason}"}
    if unrunnable is not None:
        return {"verdict": NOT_MEASURED, "cause": f"{unrunnable}; static stack bound only"}
    if measured is not None and not measured["same_static"]:
        return {"verdict": ERROR, "cause": f"the painting build's static stack ({measured['static_of_this_build']}) "
                                          f"differs from the plain build's ({bound.bytes}): measured a different code"}
    if measured is not None and measured["bytes"] > bound.bytes:
        return {"verdict": FAIL, "cause": f"measured stack {measured['bytes']} bytes above the static bound "
                                         f"{bound.bytes} bytes"}
    return {"verdict": PASS, "cause": None}
