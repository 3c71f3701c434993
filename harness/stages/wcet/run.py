"""The WCET stage (paper Table 4): flow facts, a static bound, and its check against measurement.

An item is one (model, generator, variant, target, optimisation level), as for
measured execution. Its code is generated and cross-built once; then:

1. flow facts are produced automatically (``wcet.flowfacts``: the manifest's
   loop bounds, checked against the C source, mapped onto the binary's loops,
   plus the toolchain's library annotations: ``toolchains/annotations/``, then
   ``annotations/`` beside the target's profile) and written as OTAWA F4
   (``.ff``) and FFX (``.ffx``) files beside the ELF;
2. for each timing model and each engine (``builtin``: ``wcet.analyzer``;
   ``otawa``: ``owcet`` on PATH or unpacked from ``../shared/otawa-bin``, with
   the ``.ff`` and the ``.ffx`` file, which must give the same figure; ``both``:
   the built-in bound cross-checked against OTAWA on both files,
   ``wcet.crosscheck``) the WCET of the entry function is computed, with
   per-layer bounds from the built-in engine. A ``both`` record carries the
   cross-check (``crosscheck``: per file, agreement per function, the first
   instruction decoded otherwise and the declared OTAWA error that explains a
   difference); a difference no declared error explains fails the record;
3. the same code is run under QEMU with the counting plugin and priced by the
   same timing model (``harness.measurement``), and the bound must be at least the
   largest measured cycle count: a smaller bound is a ``fail`` that states
   both numbers. ``tightness`` = WCET / max measured. A target no emulator can
   run (``not_runnable`` in its profile: an analysis-only memory map) is not
   measured: its records are ``not measured``, with the bound and no tightness.

Code whose manifest declares no loops (a peer generator's, an ``assay.json``)
gets its bounds from the C source alone; when some reachable loop has no
literal bound there, the item is ``unbounded``: no WCET, the measured cycles,
and ``unbounded_loops`` listing every loop Assay cannot bound. That list is a
qualification finding about the generator (the report counts it per
generator), not a failure of the campaign.

Records go to ``wcet.json`` as they are computed (one per item, timing model
and engine); a re-run skips items whose records are all there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness import targets
from harness.core.plan import Item
from harness.core.provenance import record_provenance
from harness.core.results import ResultStore
from harness.digests import digest, tree_digest
from harness.core.oracle import ERROR, FAIL, NOT_MEASURED, NOT_SUPPORTED, PASS, UNBOUNDED
from harness.errors import USER_ERRORS, AssayError, NotSupported
from harness.measurement import cycles, execcount
from harness.stages.wcet.spec import SPEC
import wcet
from wcet import timing

SCHEMA = SPEC.schema
KEY_FIELDS = SPEC.key_fields
ENGINES = ("builtin", "otawa", "both")
OTAWA_TIMING = "trivial"  # the one timing model an OTAWA script computes (5 cycles per instruction)
STAGE = "wcet"  # work subdirectory: code and builds of this stage
WCET_DIR = Path(wcet.__file__).resolve().parent  # the analysis library: a changed analyzer recomputes


@dataclass(frozen=True)
class Settings(cycles.Settings):
    """The defaults are the options' (``spec``)."""

    n_inputs: int = SPEC.default("n_inputs")  # measured inputs for the soundness check
    engines: tuple[str, ...] = SPEC.default("engines")
    otawa_script: str = SPEC.default("otawa_script")
    otawa_timeout: float = SPEC.default("otawa_timeout")


def open_store(path: Path) -> ResultStore:
    """``wcet.json``: records keyed by KEY_FIELDS, written as they come (harness.core.results)."""
    return ResultStore.of(SPEC, path)


def _base_record(item: Item, timing_name: str, engine: str, settings: Settings) -> dict:
    return {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
            "opt": settings.opt, "timing": timing_name, "engine": engine, "n_inputs": settings.n_inputs,
            "seed": settings.seed}


def run_item(item: Item, settings: Settings, store: ResultStore) -> list[dict]:
    """Analyse and check one item; never raises for the item's own faults (they become error records)."""
    fingerprint = cycles.content_key(item, settings, engines=settings.engines, otawa_script=settings.otawa_script,
                                     wcet_library=tree_digest(WCET_DIR), annotations=_annotations_digest(item),
                                     **({"otawa": _otawa_identity(), "otawa_timeout": settings.otawa_timeout}
                                        if set(settings.engines) & {"otawa", "both"} else {}))
    if not settings.redo and fingerprint is not None:
        previous = store.find_all([_base_record(item, name, engine, settings)
                                   for name in item.checks for engine in settings.engines], fingerprint)
        if previous is not None:
            return previous
    from wcet.flowfacts import SOURCE_ORIGIN, FlowFactError

    seconds: dict[str, float] = {}
    provenance: dict = record_provenance()
    unbounded: list[str] | None = None
    refused = False
    try:
        unmeasured = targets.get(item.target).not_runnable_cause()
        if unmeasured is None:
            counts, code, built = cycles.count_item(item, settings, STAGE, seconds, provenance)
        else:  # an analysis-only memory map: built and bounded, never run
            counts, (_, code, built) = None, cycles.build_item(item, settings, STAGE, seconds, provenance)
        regions, layer_names, dispatch = _regions(built.elf, code)
        start = time.perf_counter()
        try:
            facts, fact_files = _flow_facts(built.elf, code, targets.get(item.target).annotation_dirs())
        except FlowFactError as exc:
            if exc.origin != SOURCE_ORIGIN:
                raise  # the generator's own manifest disagrees with its code: an error
            unbounded = exc.problems
        seconds["flowfacts_s"] = time.perf_counter() - start
        cause = None
    except NotSupported as exc:  # the generator's own refusal, as in the semantic campaign
        cause, refused = str(exc), True
    except USER_ERRORS as exc:
        cause = str(exc)
    except Exception as exc:  # a tool crash is this item's error, not the campaign's end
        cause = f"{type(exc).__name__}: {exc}"
    records = []
    for name in item.checks:
        model = timing.get(name, **settings.timing_options.get(name, {}))
        measured = None if cause or counts is None else cycles.price(counts, model)
        for engine in settings.engines:
            record = _base_record(item, name, engine, settings)
            record.update(timing_params=model.params(), seconds=dict(seconds), provenance=provenance,
                          fingerprint=fingerprint)
            if cause:
                record.update(verdict=NOT_SUPPORTED if refused else ERROR, cause=cause)
            elif unbounded is not None:
                totals = measured.cycles.sum(axis=1) if measured else None
                record.update(verdict=UNBOUNDED, unbounded_loops=unbounded,
                              max_measured_cycles=int(totals.max()) if measured else None,
                              median_measured_cycles=float(np.median(totals)) if measured else None,
                              cause=f"{len(unbounded)} loop{'s' if len(unbounded) != 1 else ''} or calls Assay "
                                    f"cannot bound from the C source or the machine code (no manifest loop bounds): "
                                    f"{unbounded[0]}"
                                    + (" ..." if len(unbounded) > 1 else ""))
            else:
                record["flow_facts"] = fact_files
                record["binary_bounds"] = _binary_bounds(facts)
                record.update(_bound(engine, built.elf, code.entry, facts, model, regions, layer_names, measured,
                                     settings, dispatch, unmeasured))
            record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            store.put(record)
            records.append(record)
    return records


def _binary_bounds(facts) -> list[dict]:
    """The loops bounded from the machine code (``wcet.binloops``: code whose C gives no counted loop), each
    with its proof in one line, so that a reader of ``wcet.json`` sees which bounds rest on that analysis."""
    from wcet.binloops import ORIGIN

    return [{"loop": bound.label(), "bound": bound.max, "justification": bound.justification}
            for bound in facts.loops if bound.origin == ORIGIN]


def _annotations_digest(item: Item) -> str | None:
    """The digest of the library loop annotations the item's target reads: an edited bound recomputes."""
    try:
        folders = targets.get(item.target).annotation_dirs()
    except USER_ERRORS:
        return None
    return digest([tree_digest(folder, (".toml",)) for folder in folders])


def _flow_facts(elf: Path, code, annotation_dirs: tuple[Path, ...] | None = None) -> tuple[object, dict[str, str]]:
    """Facts for the generated code, also written as .ff and .ffx beside the ELF. The headers count as
    generated code too: header-only generators (emlearn) define their functions there. Library loops are
    bounded by the annotations in ``annotation_dirs`` (the target's, ``TargetProfile.annotation_dirs``;
    None: Assay's alone)."""
    from wcet import annotations, ffformat, flowfacts

    headers = [code.directory / name for name in code.manifest.get("headers", [])]
    facts = flowfacts.facts_for_generated(elf, code.manifest, [*code.sources, *headers], code.entry,
                                          annotation_dirs=annotation_dirs or (annotations.ANNOTATION_DIR,))
    f4, ffx = elf.with_suffix(".ff"), elf.with_suffix(".ffx")
    f4.write_text(ffformat.write_f4(facts, elf, code.entry))
    ffx.write_text(ffformat.write_ffx(facts, elf, code.entry))
    return facts, {"f4": str(f4), "ffx": str(ffx)}


def _regions(elf: Path, code) -> tuple[dict[str, list[tuple[int, int]]], list[str], execcount.Dispatch | None]:
    """Address ranges of each manifest layer (and of the code outside layers), from the DWARF line table, and
    the dispatch call of a generic inference loop (V1), whose instruction is in no region: the measurement
    counts its k-th execution, and what it calls, in the k-th layer (docs/met.md), and so does ``_bound``."""
    from wcet import armcode

    program = armcode.load_code(elf)  # decoded once for facts, regions and bounds
    names = execcount.bucket_names(code.manifest)
    call = execcount.dispatch(program, code.manifest, code.entry)
    hole = (call.address, call.address + call.size) if call else (0, 0)
    regions: dict[str, list[tuple[int, int]]] = {}
    for span in armcode.layer_ranges(program, code.manifest, code.entry):
        for start, end in ((span.start, min(span.end, hole[0])), (max(span.start, hole[1]), span.end)):
            if start < end:
                regions.setdefault(names[span.bucket], []).append((start, end))
    return regions, names, call


def _bound(engine: str, elf: Path, entry: str, facts, model, regions: dict, layer_names: list[str],
           measured: cycles.Figures | None, settings: Settings, dispatch: execcount.Dispatch | None = None,
           unmeasured: str | None = None) -> dict:
    """One engine's WCET, per-layer figures and the soundness verdict against the measured cycles (None: the
    target cannot be run, the verdict is ``not measured`` and ``unmeasured`` the cause). With a dispatch call (V1), layer k's figure is
    that call's k-th execution: its instruction plus its callee's WCET in that execution (the precise
    analysis), beside what the context-insensitive bound charges it."""
    totals = measured.cycles.sum(axis=1) if measured else np.zeros(0)
    max_measured = int(totals.max()) if measured else None
    per_layer_measured = ({name: int(measured.cycles[:, i].max()) for i, name in enumerate(measured.bucket_names)}
                          if measured else {})
    start = time.perf_counter()
    try:
        if engine in ("builtin", "both"):
            from wcet.analyzer import analyze

            result = analyze(elf, entry, facts, model, regions)
            wcet_cycles, per_region = int(result.wcet_cycles), dict(result.regions)
            precise = result.wcet_cycles_precise
            details = {"loops": len(result.loops), "functions": len(result.functions)}
            insensitive = {}
            for execution in result.executions:
                if dispatch is not None and int(execution["site"], 16) == dispatch.address:
                    name = layer_names[dispatch.buckets[execution["index"]]]
                    per_region[name] = execution["call_cycles"] + execution["wcet_cycles"]
                    insensitive[name] = execution["call_cycles"] + execution["insensitive_cycles"]
        else:
            wcet_cycles, details = _otawa(elf, entry, model, settings)
            per_region, insensitive = {}, {}
            precise = None  # OTAWA has no per-execution targets: only the context-insensitive bound
        analysis_s = time.perf_counter() - start
        crosscheck = _cross_check(elf, entry, model, settings) if engine == "both" else None
    except USER_ERRORS as exc:
        return {"verdict": ERROR, "cause": str(exc), "max_measured_cycles": max_measured}
    layers = [{"layer": name, "wcet_cycles": per_region.get(name), "max_measured_cycles": per_layer_measured.get(name),
               **({"wcet_cycles_insensitive": insensitive[name]} if name in insensitive else {})}
              for name in layer_names if name in per_region or per_layer_measured.get(name)]
    figures = {"wcet_cycles": wcet_cycles, "wcet_cycles_precise": precise, "max_measured_cycles": max_measured,
               "median_measured_cycles": float(np.median(totals)) if measured else None,
               "tightness": wcet_cycles / max_measured if max_measured else None,
               "layers": layers, "analysis_s": analysis_s, **details}
    if engine == "both":
        figures["crosscheck"] = crosscheck
    unexplained = [f"{name}: {check['line']}" for name, check in (crosscheck or {}).get("files", {}).items()
                   if check["status"] == "unexplained"]
    if unexplained:  # two independent analyses disagree and no declared OTAWA error says why: never accepted
        return {"verdict": FAIL, "cause": "Assay and OTAWA disagree, unexplained: " + "; ".join(unexplained),
                **figures}
    if measured is None:
        return {"verdict": NOT_MEASURED, "cause": unmeasured, **figures}
    unsound = [f"{lay['layer']}: WCET {lay['wcet_cycles']} < measured {lay['max_measured_cycles']}"
               for lay in layers if lay["wcet_cycles"] is not None and lay["wcet_cycles"] < lay["max_measured_cycles"]]
    if wcet_cycles < max_measured:
        unsound.insert(0, f"WCET {wcet_cycles} < measured {max_measured} cycles")
    if precise is not None and precise < max_measured:
        unsound.insert(0, f"precise WCET {precise} < measured {max_measured} cycles")
    return {"verdict": FAIL if unsound else PASS, "cause": "unsound: " + "; ".join(unsound) if unsound else None,
            **figures}


def _otawa_identity() -> str | None:
    """Which OTAWA an ``otawa``/``both`` record comes from, for its content key: the archive's SHA-256, or the
    path of the owcet on PATH (None: none; the records are then errors, recomputed once OTAWA is there)."""
    from harness.core import otawa_install
    from wcet import otawa

    if otawa.available():
        return f"PATH {otawa.tool(otawa.OWCET)}"
    found = otawa_install.installed()
    return None if found is None or not found.loads else found.sha256


def otawa_home() -> Path | None:
    """Where OTAWA's tools are: None when ``owcet`` is on PATH (or ``$OTAWA_HOME``), else the unpacked
    ``../shared/otawa-bin`` (``harness.core.otawa_install``); an error naming why when there is none that loads."""
    from harness.core import otawa_install
    from wcet import otawa

    if otawa.available():
        return None
    found = otawa_install.installed()
    if found is None:
        raise AssayError("OTAWA is not installed (no owcet on PATH, and ../shared/otawa-bin is not unpacked: "
                         "bash .ci/setup --otawa); use --engine builtin")
    if not found.loads:
        raise AssayError(f"OTAWA cannot load here: {found.problem}")
    return found.home


def _otawa(elf: Path, entry: str, model, settings: Settings) -> tuple[int, dict]:
    """OTAWA's WCET with the same flow facts, from the .ff and the .ffx file (which must agree); only where OTAWA is
    installed and its model is the same."""
    from wcet import otawa

    home = otawa_home()
    if model.name != OTAWA_TIMING or settings.otawa_script != OTAWA_TIMING:
        raise AssayError(f"no OTAWA script is the same model as timing '{model.name}'; compare with --timing trivial")
    figures = {}
    for name, suffix in (("f4", ".ff"), ("ffx", ".ffx")):
        outcome = otawa.run_owcet(elf, entry, elf.with_suffix(suffix), settings.otawa_script, {},
                                  timeout=settings.otawa_timeout, home=home)
        if outcome.error:
            raise AssayError(f"OTAWA ({suffix}): {outcome.error}")
        figures[name] = int(outcome.wcet_cycles)
    if figures["f4"] != figures["ffx"]:
        raise AssayError(f"OTAWA gives {figures['f4']} cycles with the .ff file and {figures['ffx']} with the .ffx")
    return figures["f4"], {"otawa": figures}


def _cross_check(elf: Path, entry: str, model, settings: Settings) -> dict:
    """``wcet.crosscheck`` on the .ff and the .ffx file; a timing model no OTAWA script computes is not compared."""
    from wcet import crosscheck

    if model.name != OTAWA_TIMING or settings.otawa_script != OTAWA_TIMING:
        return {"status": crosscheck.NOT_COMPARED,
                "cause": f"no OTAWA script computes timing '{model.name}' (only trivial)", "files": {}}
    home = otawa_home()
    files = {}
    for name, suffix in (("f4", ".ff"), ("ffx", ".ffx")):
        check = crosscheck.cross_check(elf, entry, elf.with_suffix(suffix), model, settings.otawa_script, home,
                                       settings.otawa_timeout)
        files[name] = {**check.as_dict(), "line": check.describe()}
    statuses = {check["status"] for check in files.values()}
    status = next(s for s in (crosscheck.UNEXPLAINED, crosscheck.EXPLAINED, crosscheck.AGREE) if s in statuses)
    return {"status": status, "cause": None, "files": files}
