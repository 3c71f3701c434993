"""What every runner's build shares: the batch driver's defines and a build that is skipped when nothing changed."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from harness import sandbox, seal, targets
from harness.digests import file_digest
from harness.generators.generated import GeneratedCode

STAMP_SUFFIX = ".key"
DRIVERS_DIR = Path(__file__).parent  # the drivers' C sources and headers, compiled into every build
COMPILE_TIMEOUT_S = 3600.0  # a compiler running longer is stuck, however large the sources
CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx"})
CXX_STANDARD = "-std=c++17"  # what Aidge's export asks of its compiler (its CMakeLists.txt): the oldest that builds it
# No exceptions and no run-time type information: generated inference code uses neither, and with them the unwinder
# of libgcc comes into a bare-metal image (its tables, ``__exidx_start``); Aidge's own Cortex-M build says the same
CXX_ONLY = ("-fno-exceptions", "-fno-rtti")
OBJECTS = "objects"  # the build folder's subfolder for the C++ sources' objects
_MIB = 1 << 20


@dataclass(frozen=True)
class Build:
    """What every runner's build tells later stages (provenance, timings); runners add their artefacts."""

    code: GeneratedCode
    command: tuple[str, ...]
    compiler_version: str
    flags: tuple[str, ...]
    seconds: float


def driver_defines(code: GeneratedCode) -> list[str]:
    """-D flags that tell a batch driver the entry symbol and the input and output widths."""
    return [f"-DASSAY_ENTRY={code.entry}", f"-DASSAY_IN={code.input_size}", f"-DASSAY_OUT={code.output_size}"]


def link_inputs(code: GeneratedCode, profile: targets.TargetProfile, flags: Sequence[str], build_dir: Path,
                drivers: Sequence[Path], failure: Callable[[str], Exception]) -> tuple[str, list[str]]:
    """(the compiler that links, the inputs its command takes): for C, the profile's C compiler and the sources
    and ``drivers`` as they are. For code with C++ sources (Aidge's export), each of those is first compiled to an
    object by the profile's C++ compiler (``cxx_compiler``) under the same flags (the optimisation level,
    ``-ffp-contract=off``, the target's ABI), with ``CXX_STANDARD`` for the C standard and ``CXX_ONLY``; then
    the C compiler compiles the C sources and links the objects with libstdc++ (``-lstdc++``) for what the C++ may
    need. Not the C++ driver for the link: ``g++`` compiles a ``.c`` file as C++ (even after ``-x c``, for all but
    the first)."""
    cxx = [source for source in code.sources if source.suffix in CXX_SUFFIXES]
    c_inputs = [str(source) for source in code.sources if source.suffix not in CXX_SUFFIXES] + [*map(str, drivers)]
    if not cxx:
        return profile.compiler_path(), c_inputs
    compiler = profile.cxx_compiler_path()
    cxx_flags = [*(flag for flag in flags if not flag.startswith("-std=")), CXX_STANDARD, *CXX_ONLY]
    (build_dir / OBJECTS).mkdir(parents=True, exist_ok=True)
    objects = []
    for source in cxx:
        relative = source.relative_to(code.directory).with_suffix(".o").as_posix()
        obj = build_dir / OBJECTS / relative.replace("/", "__")  # one folder: objects of two folders never meet
        compile_once((compiler, *cxx_flags, f"-I{code.directory}", "-c", str(source), "-o", str(obj)), code, obj,
                     failure)
        objects.append(str(obj))
    return profile.compiler_path(), [*c_inputs, *objects, "-lstdc++"]


def compile_once(command: Sequence[str], code: GeneratedCode, output: Path,
                 failure: Callable[[str], Exception]) -> None:
    """Run ``command`` in the code's directory unless ``output`` came from this very command and sources.

    The stamp beside ``output`` holds a hash of the command, of every source
    file and of the drivers' code (a changed driver must not leave an old build
    in use), so an identical rebuild (a resumed campaign) costs nothing; a
    failed build raises ``failure(stderr)``. The build runs with ``path_maps``
    added: no folder name of this machine gets into the binary.
    """
    command = [*command, *path_maps(code)]
    key = hashlib.sha256(json.dumps([command, code.source_hashes(), driver_hashes()]).encode()).hexdigest()
    stamp = stamp_path(output)
    # reused only when the stamp names this command and these sources, and the output's own bytes (checked by
    # content: a build folder written by an older Assay, whose runs could write there, is not taken on trust),
    # under this user's seal (harness.core.seal: a library and stamp planted together in a work folder are not)
    if output.is_file() and stamp.is_file() and seal.sealed(stamp.read_text(), key, file_digest(output)):
        return
    stamp.unlink(missing_ok=True)
    # In the sandbox (harness.sandbox): the sources can name no file but the code's, the drivers' and the
    # toolchain's (an #include or .incbin of a private file finds nothing), and the build writes its folder only.
    result = run_compiler(command, output.parent, (code.directory, DRIVERS_DIR), code.directory)
    if result.returncode != 0:
        raise failure(result.stderr)
    stamp.write_text(seal.seal(key, file_digest(output)))


def run_compiler(command: Sequence[str | Path], build_dir: Path, readable: Sequence[Path],
                 cwd: Path) -> subprocess.CompletedProcess:
    """A compiler or linker on untrusted sources, in the sandbox (``harness.sandbox``) under Assay's own user id
    without any capability, in ``cwd``: it reads ``readable``, the system's toolchain and, of the paths its
    command names, only those inside ``readable``, the build folder and the target profiles' folders (an
    absolute path smuggled into the command through a manifest's text is not bound), and writes ``build_dir``
    only, so that an ``#include`` or ``.incbin`` of a private file finds nothing. Its address space, resident
    memory and time grow with the sources' size (``compile_limits``): a macro-expansion bomb ends there. Every
    build of generated C goes through here (the runners, ``assay mutate``, the evidence's MC/DC build)."""
    memory_mib, timeout = compile_limits(cwd)
    return sandbox.run(command, build_dir, timeout, readable=readable, own_user=False, cwd=cwd,
                       memory_mib=memory_mib, capture_output=True, text=True,
                       named_within=(*readable, build_dir, *targets.folders()))


COMPILE_BASE_MIB, COMPILE_MIB_PER_SOURCE_MIB = 4096, 24  # gcc's cc1 holds about 10-20 bytes per source byte
COMPILE_BASE_S, COMPILE_S_PER_SOURCE_MIB = 300.0, 30.0


def compile_limits(folder: Path) -> tuple[int, float]:
    """(MiB of memory, seconds) a compile of the sources in ``folder`` may take: a base plus a share per MiB of
    source, the time at most ``COMPILE_TIMEOUT_S``."""
    size_mib = sum(p.stat().st_size for p in Path(folder).iterdir() if p.is_file() and not p.is_symlink()) / _MIB
    return (int(COMPILE_BASE_MIB + COMPILE_MIB_PER_SOURCE_MIB * size_mib),
            min(COMPILE_TIMEOUT_S, COMPILE_BASE_S + COMPILE_S_PER_SOURCE_MIB * size_mib))


def path_maps(code: GeneratedCode) -> list[str]:
    """``-fdebug-prefix-map`` and ``-fmacro-prefix-map`` flags (gcc and clang): the code's folder becomes ``.``
    and the drivers' folder ``assay-drivers`` in the debug information and ``__FILE__``, so that the same code and
    flags give the same bytes wherever the work folder and Assay are (an evidence package rebuilds byte for byte
    from another ``--work``, docs/evidence.md); the DWARF line table still names each file, which is what its
    readers match. Not ``-ffile-prefix-map``: it would also rewrite the coverage notes' paths, which gcov reads."""
    folders = {str(code.directory): ".", str(Path(code.directory).resolve()): ".",
               str(DRIVERS_DIR): "assay-drivers", str(DRIVERS_DIR.resolve()): "assay-drivers"}
    return [f"-f{kind}-prefix-map={old}={new}" for old, new in folders.items() for kind in ("debug", "macro")]


def driver_hashes() -> dict[str, str]:
    """SHA-256 of each driver source and header beside this module."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted([*DRIVERS_DIR.glob("*.c"), *DRIVERS_DIR.glob("*.h")])}


def stamp_path(output: Path) -> Path:
    """The file that says which command and sources ``output`` was built from."""
    return output.with_name(output.name + STAMP_SUFFIX)


def forget_builds(build_dir: Path) -> None:
    """Make the next build in ``build_dir`` run even if command and sources are unchanged (C++ objects too)."""
    for stamp in [*build_dir.glob(f"*{STAMP_SUFFIX}"), *build_dir.glob(f"{OBJECTS}/*{STAMP_SUFFIX}")]:
        stamp.unlink()
