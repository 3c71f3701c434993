"""Exact instruction counts of the inference function under QEMU, per call and per layer.

The QEMU TCG plugin ``harness/runners/qemu_plugin/assay_count.c`` (built here with the
host's gcc on first use, or by ``.ci/setup``, where ``plugin.library_path`` says) counts, for each call of the
entry function, how often each instruction ran, in which *bucket* (a layer of
the generated code, or 0 for the generated code outside any layer: prologue,
epilogue), and how often an instruction that ends a run of straight-line code
was followed by a jump rather than by the next instruction. Instructions of
callees (libgcc soft float, ``expf``, ``memcpy``) go to the bucket of the code
that called them. The plugin's header comment gives the argument that the
counts are exact; docs/met.md gives it in full.

``count(built, inputs)`` runs one batch through the QEMU runner
(``harness.runners.qemu.run``: same files, timeout and exit-status handling)
with the plugin loaded, and returns one ``CallCounts`` per input.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from harness.errors import ConfigError
from harness.runners.countplugin import PLUGIN_SOURCE, library_path
from harness.runners import RunError, qemu
from wcet import armcode

MAP_FILE = "assay_count.map"
OUT_FILE = "assay_count.out"


@dataclass
class CallCounts:
    """One call of the entry: ``counts[bucket][address] = [executions, jumps]``.

    ``jumps`` is how many of those executions were followed by an instruction
    other than the next one in memory (a taken branch, a call, a return); it
    is only non-zero for an instruction that writes the PC.
    """

    counts: dict[int, dict[int, list[int]]] = field(default_factory=dict)
    vcpu: int = 0  # the emulated core that made the call (SMP guests)

    def instructions(self, bucket: int | None = None) -> int:
        """Instructions executed in ``bucket`` (None: in the whole call)."""
        buckets = self.counts.values() if bucket is None else [self.counts.get(bucket, {})]
        return sum(pair[0] for per_address in buckets for pair in per_address.values())

    def per_address(self) -> dict[int, int]:
        """Executions per instruction address, all buckets together."""
        total: dict[int, int] = {}
        for per_address in self.counts.values():
            for address, (executions, _) in per_address.items():
                total[address] = total.get(address, 0) + executions
        return total


@dataclass
class ExecCounts:
    calls: list[CallCounts]
    bucket_names: list[str]  # index = bucket: [outside layers, layer 0, layer 1, ...]
    code: armcode.ArmCode
    outputs: np.ndarray
    emulator_seconds: float


def plugin_library(cache_dir: Path | None = None, compiler: str = "gcc") -> Path:
    """The plugin as a shared library, compiled from its source on first use (keyed by the source's hash)."""
    library = library_path(cache_dir)
    directory = library.parent
    if library.is_file():
        return library
    found = shutil.which(compiler)
    if found is None:
        raise ConfigError(f"the QEMU counting plugin needs a host C compiler '{compiler}'; "
                          "install the Debian package 'gcc'")
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{library.name}.{os.getpid()}.tmp"
    result = subprocess.run([found, "-shared", "-fPIC", "-O2", "-std=c99", "-Wall", "-Werror", "-o", str(partial),
                             str(PLUGIN_SOURCE)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        first = (result.stderr.strip().splitlines() or ["no message"])[0]
        raise ConfigError(f"cannot build the QEMU counting plugin: {first}")
    partial.replace(library)  # atomic: concurrent builders write the same bytes
    return library


def bucket_names(manifest: dict) -> list[str]:
    return ["(outside layers)", *(layer["name"] for layer in manifest.get("layers", []))]


@dataclass(frozen=True)
class Dispatch:
    """The entry's call through the layer table (assay-v1's ``net[i].layer_type``): its instruction, and the
    bucket of the layer each execution runs, in order (the manifest layer whose ``net_index`` is k)."""

    address: int
    size: int
    buckets: tuple[int, ...]


def dispatch(code: armcode.ArmCode, manifest: dict, entry: str) -> Dispatch | None:
    """The dispatch call of ``entry``, or None when the manifest has no per-layer sequence for one."""
    from wcet.program import Program

    layers = {layer.get("net_index"): number + 1 for number, layer in enumerate(manifest.get("layers", []))}
    for call in manifest.get("indirect_calls", []):
        if call.get("function") != entry or call.get("sequence") is None or "table" not in call:
            continue
        buckets = tuple(layers.get(k, armcode.OUTSIDE_LAYERS) for k in range(len(call["sequence"])))
        where = (PurePosixPath(call["file"]).name, int(call["line"]))
        program = Program(code)
        sites = [a for a, _ in program.cfg(entry).unresolved if code.line(a) == where]
        if len(sites) != 1:
            raise ConfigError(f"the dispatch call at {where[0]}:{where[1]}: {len(sites)} indirect calls on that "
                              f"line of {entry}, not one")
        return Dispatch(sites[0], code.decode(sites[0]).size, buckets)
    return None


def write_map(code: armcode.ArmCode, manifest: dict, entry: str, path: Path) -> list[str]:
    """Write the plugin's map file (entry address, buckets, address ranges, the dispatch call of a generic
    inference loop); return the bucket names."""
    names = bucket_names(manifest)
    ranges = armcode.layer_ranges(code, manifest, entry)
    lines = [f"entry {code.function(entry).start:x}", f"buckets {len(names)}"]
    lines += [f"range {r.start:x} {r.end:x} {r.bucket}" for r in ranges]
    call = dispatch(code, manifest, entry)
    if call is not None:
        lines.append(f"dispatch {call.address:x} {len(call.buckets)} " + " ".join(map(str, call.buckets)))
    path.write_text("\n".join(lines) + "\n")
    return names


def count(built: qemu.QemuBuild, inputs: np.ndarray, timeout: float = 600.0,
          cache_dir: Path | None = None, smp_run=None) -> ExecCounts:
    """Run ``inputs`` under QEMU with the counting plugin; one ``CallCounts`` per input. ``smp_run``: the SMP
    runner's ``run`` when ``built`` is sequential code built for it (``harness.runners.qemu_smp``)."""
    code = armcode.ArmCode(built.elf)
    names = write_map(code, built.code.manifest, built.code.entry, built.elf.parent / MAP_FILE)
    runner, extra = (qemu.run, ()) if smp_run is None else (_smp(smp_run), SMP_COUNTING_ARGS)
    outcome, calls = _run_counted(built, inputs, timeout, cache_dir, runner, extra)
    if len(calls) != len(inputs):
        raise RunError(f"the counting plugin saw {len(calls)} calls of {built.code.entry} for {len(inputs)} inputs")
    return ExecCounts(calls=calls, bucket_names=names, code=code, outputs=outcome.outputs,
                      emulator_seconds=outcome.c_seconds)


def _run_counted(built: qemu.QemuBuild, inputs: np.ndarray, timeout: float, cache_dir: Path | None, runner,
                 extra_args: tuple[str, ...]):
    """Run with the plugin loaded (map file written already); the runner's outcome and the calls counted."""
    work = built.elf.parent
    map_path, out_path = work / MAP_FILE, work / OUT_FILE
    # the plugin writes its counts in the run's fresh folder (QEMU's working folder); the runner copies them
    # beside the ELF, read as untrusted, before the folder goes (keep=)
    argument = f"{plugin_library(cache_dir)},map={map_path},out={OUT_FILE}"
    if argument.count(",") != 2:
        raise ConfigError(f"QEMU plugin arguments cannot contain commas: {argument}")
    out_path.unlink(missing_ok=True)
    profile = dataclasses.replace(built.profile, emulator_args=(*built.profile.emulator_args, *extra_args,
                                                                "-plugin", argument))
    try:
        outcome = runner(dataclasses.replace(built, profile=profile), inputs, timeout, keep=(OUT_FILE,))
    except RunError as exc:
        raise RunError(f"{exc} (with the counting plugin; QEMU's messages are in {work / qemu.LOG_FILE})") from None
    return outcome, parse(out_path)


# one host thread runs the vCPUs in turn: the plugin's per-vCPU state needs no lock (assay_count.c)
SMP_COUNTING_ARGS = ("-accel", "tcg,thread=single")


def _smp(run):
    """The SMP runner's ``run`` (untraced) as a function returning the batch's outcome or raising."""
    def batch(built, inputs, timeout, keep=()):
        outcome = run(built, inputs, timeout, trace=False, keep=keep)
        if outcome.run is None:
            raise RunError(f"SMP run with the counting plugin failed: {outcome.error}")
        return outcome.run
    return batch


@dataclass
class CoreCounts:
    """Instructions of one core's inference function over the calls counted (one per input)."""

    core: int
    work: list[int]  # per call: its instructions, the busy waits excluded
    waits: list[int]  # per call: the instructions of its busy waits (flag polling)
    items: dict[int, int]  # event id -> most instructions one call spent in it (waits excluded)


def count_parallel(built: qemu.QemuBuild, inputs: np.ndarray, run, timeout: float = 600.0,
                   cache_dir: Path | None = None) -> list[CoreCounts]:
    """Per core, the instructions of its function for each input under SMP QEMU (``run``: the SMP runner's,
    built without trace and delays), the busy waits counted apart.

    Buckets: one per item of the manifest's ``parallel.per_core`` (layer or operator, by event id), the
    busy-wait line of every operator in a bucket of its own; every core function is an entry. vCPU k runs
    core k's function (PSCI CPU_ON k); a call whose items are another core's is an error.
    """
    manifest = built.code.manifest
    per_core = manifest["parallel"]["per_core"]
    file = Path(manifest["entry"]["file"]).name
    events = [item for core in per_core for item in core["items"]]
    waits = 1 + len(events)
    spans = [(file, item["wait_line"], item["wait_line"], waits) for item in events if item.get("wait_line")]
    spans += [(file, item["lines"][0], item["lines"][1], 1 + item["event"]) for item in events]
    code = armcode.ArmCode(built.elf)
    ranges = armcode.layer_ranges(code, manifest, manifest["entry"]["symbol"], spans)
    lines = [f"entry {code.function(f).start:x}" for f in manifest["parallel"]["functions"]]
    lines += [f"buckets {waits + 1}"] + [f"range {r.start:x} {r.end:x} {r.bucket}" for r in ranges]
    (built.elf.parent / MAP_FILE).write_text("\n".join(lines) + "\n")
    _, calls = _run_counted(built, inputs, timeout, cache_dir, _smp(run), SMP_COUNTING_ARGS)
    owner = {item["event"]: core["core"] for core in per_core for item in core["items"]}
    result = [CoreCounts(core["core"], [], [], {}) for core in per_core]
    for call in calls:
        cores = {owner[bucket - 1] for bucket in call.counts if 0 < bucket < waits}
        if cores - {call.vcpu} or call.vcpu >= len(result):
            raise RunError(f"vCPU {call.vcpu} ran items of core(s) {sorted(cores)}: not its own function")
        entry = result[call.vcpu]
        entry.work.append(call.instructions() - call.instructions(waits))
        entry.waits.append(call.instructions(waits))
        for bucket in call.counts:
            if 0 < bucket < waits:
                entry.items[bucket - 1] = max(entry.items.get(bucket - 1, 0), call.instructions(bucket))
    if any(len(core.work) != len(inputs) for core in result if per_core[core.core]["items"]):
        raise RunError(f"the counting plugin saw {[len(c.work) for c in result]} calls per core for "
                       f"{len(inputs)} inputs")
    return result


def parse(path: Path) -> list[CallCounts]:
    """Read the plugin's output file (format in assay_count.c)."""
    if not path.is_file():
        raise RunError("the counting plugin wrote no output (QEMU without plugin support?)")
    segments: dict[int, list[int]] = {}
    calls: list[CallCounts] = []
    current: CallCounts | None = None
    with path.open() as stream:
        for line in stream:
            kind, _, rest = line.partition(" ")
            fields = rest.split()
            if kind == "D":
                segments[int(fields[0])] = [int(a, 16) for a in fields[2:]]
            elif kind == "C":
                if current is None:
                    raise RunError(f"{path}: counts outside a call")
                addresses = segments[int(fields[0])]
                bucket, executions, jumps = int(fields[1]), int(fields[2]), int(fields[3])
                per_address = current.counts.setdefault(bucket, {})
                for address in addresses:
                    per_address.setdefault(address, [0, 0])[0] += executions
                if jumps:
                    per_address[addresses[-1]][1] += jumps
            elif kind == "I":
                current = CallCounts(vcpu=int(fields[1]) if len(fields) > 1 else 0)
            elif kind == "E":
                if current is None:
                    raise RunError(f"{path}: end of a call that did not begin")
                calls.append(current)
                current = None
            elif kind == "X":
                cause = rest.strip()
                if cause == "incomplete":
                    raise RunError("the program ended inside a call of the inference function")
                raise RunError(f"the counting plugin failed: {cause.removeprefix('error ')}")
    return calls


def main() -> int:
    """``python -m harness.measurement.execcount``: build the plugin (set-up) and print where it is."""
    print(plugin_library())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
