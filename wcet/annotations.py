"""Loop bounds of library code (libgcc soft float, libm), per toolchain, with their justifications.

Generated code calls library routines (``__aeabi_fmul``, ``__aeabi_fdiv``,
``expf``, ...) and some of them loop. Their bounds cannot come from the
generator; they live in ``toolchains/annotations/<compiler>-<version>.toml``,
one file per compiler release, entries selected by *multilib* (the library
variant the profile's flags link: ``<compiler> <cflags> -print-multi-directory``).
A target of a package of its own may add entries in a file of the same name in
the ``annotations/`` folder beside its profile: ``load_for`` reads the files of
several folders as one, the first folder's entries first.

Each annotated function is recognised by its symbol (or an alias) and checked
by the size and SHA-256 of its bytes in the ELF, so a different build of the
library is reported, never silently mis-bounded. Each loop is keyed by the
offset of its header from the function's start and carries its bound (back
edges per entry, OTAWA's meaning), the source line and a justification.
``tests/wcet/test_annotations.py`` measures every bound under QEMU.

    toolchain = Toolchain.of_profile(targets.get("arm7tdmi"))
    annotations = load_for(toolchain)                   # None if no file for this compiler version
    bounds, problems = library_bounds(annotations, toolchain.multilib, program, loops)
"""

from __future__ import annotations

import functools
import re
from collections import namedtuple
from collections.abc import Iterable, Sequence
from pathlib import Path

from wcet import elfread
from wcet.errors import ConfigurationError
from wcet.facts import FlowFacts, LoopBound

ANNOTATION_DIR = Path(__file__).resolve().parent.parent / "toolchains" / "annotations"


class Toolchain(namedtuple("Toolchain", [
    "compiler",  # "arm-none-eabi-gcc"
    "version",  # "12.2.1" (-dumpversion)
    "multilib",  # "." or "thumb/v7e-m+fp/hard" (-print-multi-directory); None: any (by hash alone)
])):
    """Which library build an ELF links: compiler, its version, the multilib the flags select."""

    __slots__ = ()

    @classmethod
    def of_elf(cls, elf: Path) -> "Toolchain | None":
        """What an ARM ELF says of its compiler (its ``.comment``: ``GCC: (...) 12.2.1 ...``), multilib unknown.

        Functions are then recognised by their bytes alone, which is what
        identifies a library build anyway. None if the ELF names no GCC or is not a 32-bit ARM one.
        """
        try:
            elf_file = elfread.ElfFile(Path(elf))
        except elfread.ElfFormatError:  # e.g. a 64-bit host program
            return None
        text = elf_file.kept(".comment").decode(errors="replace")
        match = re.search(r"GCC: \([^)]*\) (\d+\.\d+\.\d+)", text)
        if match is None or elf_file.machine != elfread.EM_ARM:
            return None
        return cls(compiler="arm-none-eabi-gcc", version=match.group(1), multilib=None)

    @classmethod
    def of_profile(cls, profile, opt: str | None = None) -> "Toolchain":
        """Ask the profile's compiler (``harness.targets.TargetProfile``) for its version and multilib."""
        return cls.of_compiler(profile.compiler_path(), tuple(profile.flags(opt)), profile.compiler)

    @classmethod
    def of_compiler(cls, compiler: str, flags: Iterable[str] = (), name: str | None = None) -> "Toolchain":
        import shutil  # here: it imports the compression modules, which bounding an ELF never needs

        found = shutil.which(compiler)
        if found is None:
            raise ConfigurationError(f"compiler '{compiler}' not found")
        version, multilib = _ask(found, tuple(flags))
        return cls(compiler=name or Path(compiler).name, version=version, multilib=multilib)


@functools.cache
def _ask(compiler: str, flags: tuple[str, ...]) -> tuple[str, str]:
    import subprocess

    def run(*arguments: str) -> str:
        result = subprocess.run([compiler, *arguments], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ConfigurationError(f"{compiler} {' '.join(arguments)}: {result.stderr.strip()[:200]}")
        return result.stdout.strip()

    return run("-dumpversion"), run(*flags, "-print-multi-directory")


class AnnotatedLoop(namedtuple("AnnotatedLoop", [
    "offset",  # header - function start
    "bound",  # back edges per entry of the loop
    "line",  # "file:line" of the header in the library's source
    "justification",
])):
    __slots__ = ()


class AnnotatedFunction(namedtuple("AnnotatedFunction", "multilib symbol aliases source size sha256 loops")):
    """``aliases``: tuple[str, ...]; ``size``: bytes; ``loops``: tuple[AnnotatedLoop, ...]."""

    __slots__ = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.symbol, *self.aliases)


class Annotations(namedtuple("Annotations", [
    "path",
    "compiler",
    "version",
    "multilibs",  # tuple[str, ...]: the multilibs the file was checked for (an empty list of functions is a finding)
    "functions",  # tuple[AnnotatedFunction, ...]
])):
    __slots__ = ()

    def candidates(self, multilib: str | None, names: Iterable[str]) -> list[AnnotatedFunction]:
        """Entries for a function called any of ``names`` in ``multilib`` (None: in any multilib)."""
        names = set(names)
        return [f for f in self.functions if (multilib is None or f.multilib == multilib) and names & set(f.names)]


def annotation_path(compiler: str, version: str, directory: Path = ANNOTATION_DIR) -> Path:
    return Path(directory) / f"{compiler}-{version}.toml"


def load_for(toolchain: Toolchain, directory: Path | Sequence[Path] = ANNOTATION_DIR) -> Annotations | None:
    """The annotation file of ``toolchain``'s compiler and version, or None if there is none.

    ``directory`` may be several folders (Assay's first, then those of a target's package): their files for the
    toolchain read as one, named by the first, its entries first (a build annotated in both is bounded by the
    first's)."""
    folders = [directory] if isinstance(directory, (str, Path)) else list(directory)
    found = [load(path) for folder in folders
             if (path := annotation_path(toolchain.compiler, toolchain.version, folder)).is_file()]
    if len(found) <= 1:
        return found[0] if found else None
    return found[0]._replace(multilibs=tuple(dict.fromkeys(m for a in found for m in a.multilibs)),
                             functions=tuple(f for a in found for f in a.functions))


def load(path: Path) -> Annotations:
    """Read and validate one annotation file (every entry needs a bound, a hash and a justification)."""
    import tomllib  # here: a bound whose loops the given facts settle never reads an annotation (wcet.bound)

    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"{path}: unreadable annotation file ({exc})") from None

    def need(table: dict, key: str, kind: type, where: str):
        value = table.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise ConfigurationError(f"{path}: {where}: '{key}' must be a {kind.__name__}")
        return value

    functions = []
    for index, entry in enumerate(data.get("function", [])):
        where = f"function #{index + 1}"
        symbol = need(entry, "symbol", str, where)
        where = f"function {symbol}"
        digest = need(entry, "sha256", str, where)
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ConfigurationError(f"{path}: {where}: sha256 must be 64 lowercase hex digits")
        loops = []
        for loop in entry.get("loop", []):
            offset = need(loop, "offset", int, where)
            bound = need(loop, "bound", int, f"{where} + {offset:#x}")
            justification = need(loop, "justification", str, f"{where} + {offset:#x}").strip()
            if bound < 0 or not justification:
                raise ConfigurationError(f"{path}: {where} + {offset:#x}: a bound needs a value >= 0 and a justification")
            loops.append(AnnotatedLoop(offset=offset, bound=bound, line=str(loop.get("line", "")),
                                       justification=" ".join(justification.split())))
        if len({l.offset for l in loops}) != len(loops):
            raise ConfigurationError(f"{path}: {where}: two bounds for one loop")
        functions.append(AnnotatedFunction(multilib=need(entry, "multilib", str, where), symbol=symbol,
                                           aliases=tuple(entry.get("aliases", [])),
                                           source=str(entry.get("source", "")), size=need(entry, "size", int, where),
                                           sha256=digest, loops=tuple(loops)))
    return Annotations(path=path, compiler=need(data, "compiler", str, "top level"),
                       version=need(data, "version", str, "top level"),
                       multilibs=tuple(data.get("multilibs", [])), functions=tuple(functions))


def library_bounds(annotations: Annotations | None, multilib: str | None, program, loops: Iterable) -> tuple[
        list[LoopBound], list[str]]:
    """Bounds for library loops (``wcet.loops.Loop`` of ``program``), and a problem for each loop without one.

    A problem names the loop (function + offset, address, source line) and
    says why: no annotation file, no entry for the function (in ``multilib``,
    or in any when it is None), the function's bytes differ from every
    annotated build, no bound for that offset.
    """
    bounds: list[LoopBound] = []
    problems: list[str] = []
    code = program.code
    for loop in loops:
        symbol = code.containing(loop.header)
        names = code.names_at(symbol.start) if symbol else []
        if annotations is None:
            problems.append(f"library loop {loop.label()} has no bound: no annotation file for this compiler "
                            f"(expected {ANNOTATION_DIR.name}/<compiler>-<version>.toml)")
            continue
        entry, why = _matching(annotations, multilib, code, symbol, names)
        if entry is None:
            problems.append(f"library loop {loop.label()} has no bound: {why}")
            continue
        offset = loop.header - symbol.start
        annotated = next((l for l in entry.loops if l.offset == offset), None)
        if annotated is None:
            problems.append(f"library loop {loop.label()} has no bound: {annotations.path.name} bounds "
                            f"{entry.symbol} at offsets {', '.join(hex(l.offset) for l in entry.loops) or 'none'}, "
                            f"not {offset:#x}")
            continue
        bounds.append(_bound(annotations, entry, annotated, loop.function, loop.offset, loop.source_line))
    return bounds, problems


def _bound(annotations: Annotations, entry: AnnotatedFunction, loop: AnnotatedLoop, function: str, offset: int,
           source: tuple[str, int] | None) -> LoopBound:
    if source is None and ":" in loop.line:
        file, _, line = loop.line.rpartition(":")
        source = (file, int(line)) if line.isdigit() else None
    return LoopBound(function=function, offset=offset, max=loop.bound, source=source,
                     justification=loop.justification, origin=f"annotation:{annotations.path.name}")


def _matching(annotations: Annotations, multilib: str | None, code, symbol, names: list[str]) -> tuple[
        AnnotatedFunction | None, str]:
    """The annotated build ``symbol`` is (by names, size and bytes), or None and why not."""
    if symbol is None:
        return None, "it is in no function symbol"
    candidates = annotations.candidates(multilib, names)
    where = f"for multilib '{multilib}' " if multilib is not None else ""
    if not candidates:
        return None, (f"{'/'.join(names)} is not annotated {where}in {annotations.path.name}; derive and measure "
                      "its bounds, and add its entry (docs/flowfacts.md)")
    from wcet.armcode import sha256
    from wcet.errors import AnalysisError

    size = symbol.end - symbol.start
    try:
        digest = sha256(code.bytes(symbol.start, symbol.end)).hexdigest()
    except AnalysisError:  # not within one loaded section: no annotated build
        digest = sha256(b"").hexdigest()
    for entry in candidates:
        if entry.size == size and entry.sha256 == digest:
            return entry, ""
    return None, (f"{symbol.name} in {code.path.name} ({size} bytes, sha256 {digest[:16]}...) is not the build "
                  f"annotated {where}in {annotations.path.name} ("
                  + ", ".join(f"{c.size} bytes, sha256 {c.sha256[:16]}..." for c in candidates)
                  + "): a different library build; derive and measure its bounds again, and add its entry "
                    "(docs/flowfacts.md)")


def library_facts(elf: Path, toolchain: Toolchain | None = None,
                  directory: Path | Sequence[Path] = ANNOTATION_DIR) -> FlowFacts:
    """Bounds for every annotated library loop present in ``elf`` (any ELF, no manifest needed).

    The toolchain defaults to what the ELF's ``.comment`` says; functions are
    recognised by name and bytes. Functions whose bytes differ from every
    annotated build get no bounds (the analysis then reports their loops as
    unbounded).
    """
    toolchain = toolchain or Toolchain.of_elf(elf)
    annotations = load_for(toolchain, directory) if toolchain is not None else None
    if annotations is None:
        return FlowFacts()
    from wcet.armcode import load_code

    code = load_code(elf)
    loops, done = [], set()
    for name, function in code.functions.items():
        if function.start in done:
            continue
        names = code.names_at(function.start)
        entry, _ = _matching(annotations, toolchain.multilib, code, function, names)
        if entry is None:
            continue
        done.add(function.start)
        label = names[0] if names else name
        loops += [_bound(annotations, entry, loop, label, loop.offset, None) for loop in entry.loops]
    return FlowFacts(loops=tuple(loops))
