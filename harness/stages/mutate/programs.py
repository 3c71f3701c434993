"""How each mutant becomes a program to run: one schema build for every code mutant of a file, the clean
executable with one element's bytes changed for a weight mutant, one build per mutant as the checked fallback.

- **Schemata** (``schema``): the code mutants of a file are compiled together once, with the host profile's
  flags and the arena-region check (``harness.runners.arenacheck``) as every mutant's own file is; the run picks
  its mutant through ``schema.VARIABLE`` in its environment. When a schema does not compile (a mutant's edit is
  not valid C), its mutants are split in halves and each half compiled apart, down to the mutants that do not
  compile in any schema: those are built alone, and a failed build is a stillborn mutant as before.
- **Weight mutants**: the executable holds the weight array's bytes (``harness.binary.elf.object_bytes``); the
  mutated element's float32 (or integer, for the integer constants of quantized C), the value the compiler makes
  of the mutant's literal, replaces the original's in a
  copy of the clean executable (a split program of the clean code, ``split``, and at ``FAST_OPT`` where the stage
  allows it: ``Programs``), after checking that the original's bytes are there (an array of another type, a
  layout the search does not match: built alone).
- **Alone**: the per-mutant build (only the mutated file compiled again and linked with the clean objects), for
  the mutants above and under ``--builds per-mutant``.

Why: compiling a mutant's file and linking it took ~0.4 s of a mutant that most inputs kill in milliseconds,
and a weight mutant recompiled LeNet-5's 0.6 MB data file; with schemata an item compiles its code once per
file. The sanitized build of a surviving code mutant is a schema too (one build under the sanitizers, each
survivor selected at run time) where the per-mutant path compiled every source under the sanitizers again.
"""

from __future__ import annotations

import shutil
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from harness import targets
from harness.binary.elf import object_bytes
from harness.errors import AssayError
from harness.generators.generated import GeneratedCode
from harness.runners import RunError, arenacheck, host, native, sanitized
from harness.runners.compiling import DRIVERS_DIR, driver_defines, run_compiler
from harness.stages.mutate import operators, schema, split
from harness.targets import HOST

SCHEMA, PATCHED, ALONE = "schema", "patched", "alone"  # how a mutant's program was made (its record's ``build``)
FAST_OPT = "-O2"  # the weight mutants' programs, where the clean code's outputs are the same bits (``Programs``)
BUILDS = ("schemata", "per-mutant")  # ``--builds``


@dataclass(frozen=True)
class Program:
    """A mutant's executable and the environment that selects the mutant in it."""

    executable: Path
    env: dict[str, str] | None
    build: str  # SCHEMA, PATCHED or ALONE
    layer: int | None = None  # the layer its runs can start at and stop after (``split``), if any


class Builder:
    """The clean objects of an item's code, and executables that swap one of them for another file."""

    def __init__(self, code: GeneratedCode, work: Path, opt: str):
        self.code, self.work = code, work
        self.profile = targets.get(HOST)
        self.flags = [*self.profile.flags(opt), f"-I{code.directory}", *driver_defines(code)]
        entry = code.manifest.get("entry")
        self.entry_file = entry.get("file") if isinstance(entry, dict) else None
        self.arena_checked = arenacheck.applies(code.manifest) and self.entry_file is not None
        self.entry_lines = (code.directory / self.entry_file).read_text().count("\n") if self.arena_checked else 0
        self.objects = {}
        for source in (*code.sources, native.DRIVER):
            self.objects[source.name] = self.compile(source, work / "clean" / f"{source.name}.o")

    def compile(self, source: Path, obj: Path, keeps_lines: bool = False, hooks: tuple[str, str] = ("", ""),
                defines: tuple[str, ...] = ()) -> Path:
        """Compile ``source`` to ``obj``; the entry's file with the arena-region check around every layer
        (``harness.runners.arenacheck``, with its ``hooks``) when the manifest allows it and the lines are where it
        says (the same number of lines, or ``keeps_lines``: a schema, whose added lines all follow the file's
        own). ``defines``: -D flags in place of the profile's for the same macros (the driver's entry)."""
        obj.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text() if self.arena_checked and source.name == self.entry_file else None
        if text is not None and (keeps_lines or text.count("\n") == self.entry_lines):
            source = obj.with_name(f"checked-{source.name}")
            source.write_text(arenacheck.instrument(text, self.code.manifest, self.entry_file, hooks=hooks))
        names = {flag.split("=")[0] for flag in defines}
        flags = [flag for flag in self.flags if flag.split("=")[0] not in names]
        done = run_compiler([self.profile.compiler_path(), *flags, *defines, "-c", str(source), "-o", str(obj)],
                            obj.parent, (self.code.directory, DRIVERS_DIR), self.code.directory)
        if done.returncode != 0:
            raise RunError(f"compile error: {host.first_diagnostic(done.stderr)}")
        return obj

    def executable(self, directory: Path, replaced: dict[str, Path] | None = None, keeps_lines: bool = False,
                   last: tuple[Path, ...] = (), hooks: tuple[str, str] = ("", ""), driver: Path | None = None
                   ) -> Path:
        """The code linked with the driver into ``directory/assay-mutant``, with ``replaced`` sources compiled
        instead of the clean (``harness.runners.native``: a process start costs milliseconds; ``hooks``: those of
        the arena check), the objects ``last`` after all others, and the object ``driver`` for the driver's."""
        directory.mkdir(parents=True, exist_ok=True)
        objects = dict(self.objects)
        if driver is not None:
            objects[native.DRIVER.name] = driver
        for file, source in (replaced or {}).items():
            objects[file] = self.compile(source, directory / f"{file}.o", keeps_lines, hooks)
        executable = directory / "assay-mutant"
        command = [self.profile.compiler_path(), *map(str, [*objects.values(), *last]), "-o", str(executable),
                   *self.profile.libs]
        folders = {p.parent for p in (*last, *([driver] if driver is not None else []))}
        done = run_compiler(command, directory, (self.work / "clean", *folders), directory)
        if done.returncode != 0:
            raise RunError(f"link error: {host.first_diagnostic(done.stderr)}")
        return executable


def sanitized_build(code: GeneratedCode, replaced: dict[str, str], directory: Path, opt: str,
                    added: dict[str, str] | None = None) -> sanitized.SanitizedBuild:
    """``code`` with the files of ``replaced`` (name -> text) in place of its own and the sources ``added``, built
    under the sanitizers in ``directory`` (a RunError when it does not compile); reused when nothing changed
    (``compile_once``)."""
    return sanitized.build(mutated_code(code, replaced, directory / "src", added), directory / "build", opt)


def mutated_code(code: GeneratedCode, replaced: dict[str, str], source: Path,
                 added: dict[str, str] | None = None) -> GeneratedCode:
    """A copy of ``code`` in the folder ``source`` (made anew) with the files of ``replaced`` (name -> text) in
    place of its own and the sources ``added``: a mutant as code of its own, for the builds that instrument it."""
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(code.directory, source)
    for file, text in {**replaced, **(added or {})}.items():
        (source / file).write_text(text)
    copy = GeneratedCode.from_directory(source)
    return replace(copy, sources=(*copy.sources, *(source / file for file in added or {}
                                                   if source / file not in copy.sources)))


def sanitizer_report(build: Callable[[], sanitized.SanitizedBuild], inputs: np.ndarray, timeout: float,
                     env: dict[str, str] | None = None) -> str | None:
    """The sanitizers' one-line report on the build ``build()`` makes, run on ``inputs`` with ``env``, or on its
    failure to build; None when they report nothing."""
    try:
        sanitized.run(build(), inputs, timeout, env)
    except RunError as exc:
        return str(exc)
    return None


class Programs:
    """Every mutant's program (``Program``) and its sanitized run, made as the module says.

    A weight mutant changes data, not code: where ``fast`` (a builder at ``FAST_OPT``) is given, its programs can be
    that build's (``weights_on_fast``), which the stage allows only when the clean code built so computes, bit for
    bit, what the code under test computes on every judged input (with ``-ffp-contract=off`` and no
    ``-ffast-math``, gcc keeps every float operation of the source, in its order, at every level)."""

    def __init__(self, builder: Builder, mutants: list[operators.Mutant], clean: Path, schemata: bool,
                 fast: Builder | None = None):
        self.builder, self.mutants, self.clean, self.schemata = builder, mutants, clean, schemata
        self.base = clean  # the executable weight mutants are written into
        self.fast: Path | None = None  # the same at FAST_OPT, when built
        self.layers: dict[int, split.Layer] = {}  # the layers runs can start at (``split``), of the entry's file
        self.layer_of: dict[int, int | None] = {}  # mutant number -> its layer
        self.selection: dict[int, tuple[Path, str]] = {}  # mutant number -> (schema executable, its selection)
        self.schema_texts: dict[Path, tuple[str, str]] = {}  # schema executable -> (file, schema text)
        self.places: dict[tuple[Path, str], tuple[int, int] | None] = {}  # (base, weight array) -> (offset, size)
        self.left_out: dict[int, str] = {}  # code mutants built alone, and why
        self._lock = threading.Lock()
        self._bytes: dict[Path, bytes] = {}
        self._drivers: dict[int, Path] = {}
        self._sanitized: dict[Path, sanitized.SanitizedBuild | RunError] = {}
        if not schemata:
            return
        select = builder.work / "schema" / schema.SELECT_FILE
        select.parent.mkdir(parents=True, exist_ok=True)
        select.write_text(schema.SELECT_SOURCE)
        self.select = builder.compile(select, select.with_suffix(".o"))
        entry = builder.entry_file
        text = (builder.code.directory / entry).read_text() if entry else ""
        if builder.arena_checked:
            self.layers = split.layers(builder.code, text)
        weights = any(m.element is not None for m in mutants)
        if self.layers:  # every mutant runs in a split program; the weight mutants in one without code mutants
            empty = schema.build(builder.code.directory / entry, [])
            self.base = self._build(entry, empty, "base", builder)
            if fast is not None and weights:
                self.fast = self._build(entry, empty, "base-fast", fast)
            self.layer_of = {n: split.layer_of(m, self.layers, text) for n, m in enumerate(mutants)}
        elif fast is not None and weights:
            self.fast = fast.executable(fast.work / "clean")
        files: dict[str, list[int]] = {}
        for number, mutant in enumerate(mutants):
            if mutant.element is None:
                files.setdefault(mutant.file, []).append(number)
        for file, numbers in files.items():
            self._schema(file, numbers)

    def weights_on_fast(self, allowed: bool) -> None:
        """Make the weight mutants' programs from the ``FAST_OPT`` build when ``allowed`` (the stage checked it)."""
        if allowed and self.fast is not None:
            self.base = self.fast

    def _schema(self, file: str, numbers: list[int]) -> None:
        """The schema of the mutants ``numbers`` of ``file``, built; if it does not compile, each half apart."""
        built = schema.build(self.builder.code.directory / file, [self.mutants[n] for n in numbers])
        self.left_out.update({numbers[i]: why for i, why in built.left_out.items()})
        held = [numbers[i] for i in built.selection]
        if not held:
            return
        try:
            executable = self._build(file, built, f"{file}-{held[0]}-{len(held)}", self.builder)
        except RunError as exc:
            if len(held) == 1:
                self.left_out[held[0]] = f"its schema does not compile ({exc})"
                return
            self._schema(file, held[:len(held) // 2])
            self._schema(file, held[len(held) // 2:])
            return
        self.schema_texts[executable] = (file, built.text)
        for i, selection in built.selection.items():
            self.selection[numbers[i]] = (executable, selection)

    def _build(self, file: str, built: schema.Schema, name: str, builder: Builder) -> Path:
        """The executable of the schema ``built`` of ``file`` in the folder ``name``, made by ``builder``: a split
        program (``split``) for the entry's file when its layers allow it."""
        directory = builder.work / "schema" / name
        directory.mkdir(parents=True, exist_ok=True)
        source = directory / file
        if self.layers and file == builder.entry_file:
            try:
                source.write_text(split.instrument(built.text, builder.code, self.layers))
            except AssayError as exc:  # a mutant's edit that is not C: as gcc would, pycparser refuses the text
                raise RunError(f"compile error: {exc}") from None
            return builder.executable(directory, {file: source}, keeps_lines=True, last=(self.select,),
                                      hooks=split.HOOKS, driver=self._driver(builder))
        source.write_text(built.text)
        return builder.executable(directory, {file: source}, keeps_lines=True, last=(self.select,))

    def _driver(self, builder: Builder) -> Path:
        """The driver of ``builder``'s split programs, which calls ``split.ENTRY``."""
        if id(builder) not in self._drivers:
            self._drivers[id(builder)] = builder.compile(native.DRIVER, builder.work / "schema" / "driver.o",
                                                         defines=(f"-DASSAY_ENTRY={split.ENTRY}",))
        return self._drivers[id(builder)]

    def _place(self, mutant: operators.Mutant) -> tuple[int, int] | None:
        """Where the base executable holds the weight array of ``mutant``: (offset, size), when it is an array of
        the mutant's element type (float32, or an integer of quantized C) with as many elements as the file's
        initialiser has numbers; else None (built alone)."""
        key = (self.base, mutant.element[0])
        with self._lock:
            if key not in self.places:
                found = object_bytes(self.base, key[1])
                count = len(operators.array_numbers((self.builder.code.directory / mutant.file).read_text(), key[1]))
                size = np.dtype(mutant.dtype).itemsize * count
                self.places[key] = found if found is not None and found[1] == size else None
            return self.places[key]

    def program(self, number: int, mutant: operators.Mutant, directory: Path) -> Program:
        """The program of mutant ``number``, made in ``directory`` when it needs files of its own; a RunError when
        the mutant's own build fails (a stillborn mutant)."""
        if number in self.selection:
            executable, selection = self.selection[number]
            layer = self.layer_of.get(number) if mutant.file == self.builder.entry_file else None
            return Program(executable, {schema.VARIABLE: selection}, SCHEMA, layer)
        if mutant.element is not None and self.schemata and self._place(mutant) is not None:
            patched = self._patched(mutant, directory)
            if patched is not None:
                return Program(patched, None, PATCHED, self.layer_of.get(number))
        directory.mkdir(parents=True, exist_ok=True)
        source = directory / mutant.file
        source.write_text(mutant.apply((self.builder.code.directory / mutant.file).read_text()))
        return Program(self.builder.executable(directory, {mutant.file: source}), None, ALONE)

    def _patched(self, mutant: operators.Mutant, directory: Path) -> Path | None:
        """A copy of the base executable in ``directory`` whose weight element is the mutant's; None when the
        element's bytes there are not the original value's."""
        offset, _ = self._place(mutant)
        width = np.dtype(mutant.dtype).itemsize
        at = offset + width * mutant.element[1]
        with self._lock:
            if self.base not in self._bytes:
                self._bytes[self.base] = self.base.read_bytes()
        data = bytearray(self._bytes[self.base])
        original, mutated = (mutant.element_bytes(text) for text in (mutant.original, mutant.replacement))
        if data[at:at + width] != original:
            return None
        data[at:at + width] = mutated
        directory.mkdir(parents=True, exist_ok=True)
        patched = directory / "assay-patched"
        patched.unlink(missing_ok=True)
        patched.write_bytes(bytes(data))
        patched.chmod(stat.S_IRWXU)
        return patched

    def sanitizer_report(self, number: int, mutant: operators.Mutant, directory: Path, inputs: np.ndarray,
                         timeout: float, opt: str) -> str | None:
        """The sanitizers' report on mutant ``number``: its schema's sanitized build (made once, beside
        ``directory``) run with its selection, else its own file's build in ``directory``."""
        code = self.builder.code
        if number not in self.selection:
            text = mutant.apply((code.directory / mutant.file).read_text())
            return sanitizer_report(lambda: sanitized_build(code, {mutant.file: text}, directory, opt), inputs,
                                    timeout)
        executable, selection = self.selection[number]
        return sanitizer_report(lambda: self._sanitized_schema(executable, directory.parent, opt), inputs, timeout,
                                {schema.VARIABLE: selection})

    def _sanitized_schema(self, executable: Path, folder: Path, opt: str) -> sanitized.SanitizedBuild:
        """The sanitized build of the schema ``executable`` was made from: built by the first survivor that needs
        it, then shared."""
        with self._lock:
            if executable not in self._sanitized:
                file, text = self.schema_texts[executable]
                try:
                    self._sanitized[executable] = sanitized_build(
                        self.builder.code, {file: text}, folder / f"sanitized-{executable.parent.name}", opt,
                        {schema.SELECT_FILE: schema.SELECT_SOURCE})
                except RunError as exc:
                    self._sanitized[executable] = exc
            built = self._sanitized[executable]
        if isinstance(built, RunError):
            raise built
        return built
