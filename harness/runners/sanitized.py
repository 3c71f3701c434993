"""Memory safety of generated code: a host build under AddressSanitizer and UndefinedBehaviorSanitizer.

An output comparison cannot see an out-of-bounds read that happens to read a
harmless value, or a write into unused arena padding; the sanitizers see both
at the faulting instruction. ``build`` compiles the generated sources with
``target_driver.c`` (the ARM targets' main, which reads an inputs file and
writes an outputs file) into a standalone host executable with gcc
``-fsanitize=address,undefined -fno-omit-frame-pointer``; ``run`` runs a
batch through it and turns the first sanitizer report, or a damaged guard
word, into a ``RunError`` whose message is one line: the report's first line
and the first frame in the generated code.

Why a standalone executable and not the host runner's shared library in its
Python worker (both work on this machine): AddressSanitizer must be the first
library of the process, so a sanitized ``.so`` in the worker needs gcc's
libasan in ``LD_PRELOAD`` of the Python interpreter, of exactly the version the
library was compiled against; its interceptors then serve every allocation of
the interpreter and of cffi too, so a report (or a leak, which must be switched
off) may be about Python rather than the code under test. The executable holds
nothing but the generated code, the driver and the C library: every report is
about the code under test, and the driver is the one the ARM targets run, with
the same guard words (``assay_guards.h``), poisoned here, so that an access one
past the input or output buffer is reported at the instruction.

With ``arena=True`` the entry's file is compiled with the arena-region check around each layer
(``harness.runners.arenacheck``: guard words in the arena floats no live tensor holds, each layer's writes
checked against its output's place), when the manifest says where the layers and tensors are: a write into
arena padding, or into a tensor a later layer overwrites anyway, is then seen too, which no sanitizer sees
(it stays inside the arena's declaration). Its ``#line`` directives keep the file's own line numbers.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import targets
from harness.generators.generated import GeneratedCode
from harness import sandbox
from harness.runners import RunError, arenacheck, native
from harness.runners.compiling import compile_once, driver_defines, link_inputs
from harness.runners.host import compile_error
from harness.targets import compiler_version

FLAGS = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all")
EXIT_STATUS = 66  # what the sanitizers exit with on a report (set in the environment below)
# The sandbox (``sandbox``) cannot limit a sanitized run's address space (the shadow memory alone reserves
# terabytes), so AddressSanitizer limits its memory itself, to the sandbox's limit of a native run.
_MEMORY_MIB = sandbox.settings().memory_mib
ENVIRONMENT = {
    "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode={EXIT_STATUS}:symbolize=1"
                    f":max_allocation_size_mb={_MEMORY_MIB}:hard_rss_limit_mb={_MEMORY_MIB}",
    "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:exitcode={EXIT_STATUS}",
}
_ASAN = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.MULTILINE)
_UBSAN = re.compile(r"^(\S+?:\d+:\d+): runtime error: (.+)$", re.MULTILINE)
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+?:\d+)(:\d+)?$", re.MULTILINE)
_ARENA = re.compile(r"^arena float \d+ .+ by layer \d+ \(.+\)$", re.MULTILINE)  # arenacheck's one line


@dataclass(frozen=True)
class SanitizedBuild:
    executable: Path
    code: GeneratedCode
    command: tuple[str, ...]
    compiler_version: str
    arena_checked: bool = False  # the arena-region check is in the build (``build``'s ``arena``)


def build(code: GeneratedCode, build_dir: Path, opt: str = "-O0", arena: bool = False) -> SanitizedBuild:
    """Compile ``code`` with the driver into a sanitized executable in ``build_dir``; reuse an identical build.
    ``arena``: with the arena-region check around each layer, where the manifest allows it (module docstring)."""
    profile = targets.get(targets.HOST)
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    executable = build_dir / "assay-sanitized"
    flags = [flag for flag in profile.flags(opt) if flag != "-fPIC"]
    # C++ sources (Aidge) are sanitized objects of their own (runners.compiling.link_inputs)
    compiler, inputs = link_inputs(code, profile, [*flags, *FLAGS], build_dir, [native.DRIVER], compile_error)
    checked = _arena_checked(code, build_dir) if arena else None
    if checked is not None:
        inputs[inputs.index(str(checked[0]))] = str(checked[1])
    command = (compiler, *flags, *FLAGS, f"-I{code.directory}", *driver_defines(code), *inputs,
               "-o", str(executable), *profile.libs)
    compile_once(command, code, executable, compile_error)
    return SanitizedBuild(executable=executable, code=code, command=command,
                          compiler_version=compiler_version(compiler), arena_checked=checked is not None)


def _arena_checked(code: GeneratedCode, build_dir: Path) -> tuple[Path, Path] | None:
    """(the entry's file, its copy with the arena-region check), the copy written under ``build_dir`` in a folder
    named by its text (so that the build command, which names it, changes with it); None where the check does not
    apply: no arena or layer places in the manifest, or an entry file that is not one of the sources."""
    entry = code.manifest.get("entry")
    name = entry.get("file") if isinstance(entry, dict) else None
    # a name the ``#line`` directives can quote as it is (the manifest is the code's data, checked as any input)
    original = code.directory / name if isinstance(name, str) and re.fullmatch(r"[\w.+/-]+", name) else None
    if original is None or not arenacheck.applies(code.manifest) or original not in code.sources:
        return None
    text = arenacheck.instrument(original.read_text(), code.manifest, name, keep_lines=True)
    folder = build_dir / f"arena-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    folder.mkdir(exist_ok=True)
    copy = folder / original.name
    copy.write_text(text)
    return original, copy


def run(built: SanitizedBuild, inputs: np.ndarray, timeout: float = 300.0,
        env: dict[str, str] | None = None) -> np.ndarray:
    """The outputs (N, output_size) of ``inputs`` (N, input_size) under the sanitizers; RunError on a report.
    ``env``: more variables for the run (``assay mutate``'s schema build: the mutant it computes)."""
    try:
        return native.run(built.executable, built.code, inputs, timeout, {**ENVIRONMENT, **(env or {})},
                          report_line, limit_memory=False)
    except RunError as exc:
        if str(exc).startswith("timed out"):
            raise RunError(f"{exc} under the sanitizers") from None
        raise


def report_line(output: str, returncode: int) -> str:
    """One line for a failed sanitized run: the sanitizer's first line, the access and where in the code."""
    frame = _FRAME.search(output)
    where = f" in {frame.group(1)} at {Path(frame.group(2)).name}" if frame else ""
    asan = _ASAN.search(output)
    if asan:
        access = _ACCESS.search(output)
        what = f", {access.group(1)} of size {access.group(2)}" if access else ""
        kind = asan.group(1) + (" (a guard word around the input or output buffer)"
                                if asan.group(1) == "use-after-poison" else "")
        return f"AddressSanitizer: {kind}{what}{where}"
    ubsan = _UBSAN.search(output)
    if ubsan:
        return f"UndefinedBehaviorSanitizer: {ubsan.group(2)} at {Path(ubsan.group(1)).name}"
    arena = _ARENA.search(output)
    if arena:
        return f"arena check: {arena.group(0)}"
    return native.failure_line(output, returncode) + " (sanitized run)"
