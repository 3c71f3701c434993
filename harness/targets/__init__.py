"""Target profiles: plain TOML files, validated when loaded.

Profiles live in folders, each named once in the entry-point group ``assay.targets`` (``harness.registry``): the
entry point is a folder (a ``str`` or ``Path`` attribute of a module). Assay's own is ``toolchains/``, declared in
its ``pyproject.toml`` as ``assay = "harness.targets:PROFILE_DIR"``; an installed package declares the folder of
its own profiles the same way. A new target is one new ``<name>.toml`` in such a folder; nothing else registers it.
A name found in two folders is a ConfigError naming both files, never a silent pick.

What a profile names is looked up beside it first: the profile it ``extends`` (else any known target), its
``linker_script`` and the reset code of a ``qemu-smp`` profile (else in ``toolchains/``). ``assay wcet`` reads the
library loop annotations (``wcet.annotations``) of ``toolchains/annotations/``, then those of the ``annotations/``
folder beside the profile (``TargetProfile.annotation_dirs``).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness import registry
from harness.errors import ConfigError, RunError
from wcet import timing

PROFILE_DIR = Path(__file__).resolve().parents[2] / "toolchains"  # Assay's own profiles (assay.targets: assay)
ANNOTATIONS = "annotations"  # the folder of library loop annotations beside a folder of profiles (wcet.annotations)
# TOML files in toolchains/ that are not target profiles: the tested configuration (`assay doctor`).
NOT_PROFILES = frozenset({"tested"})
# The profile of the machine Assay runs on (toolchains/host.toml): the target every other target is compared
# with bit for bit, where the sanitizers and the mutation campaign run.
HOST = "host"

_REQUIRED = {"name": str, "description": str, "kind": str, "compiler": str, "package": str,
             "cflags": list, "opt_levels": list, "default_opt": str, "ldflags": list, "libs": list,
             "timing": str}
# Keys any profile may have: the C++ compiler of the same toolchain, for generators that write C++ (Aidge), and its
# Debian package. A profile without them builds C only: C++ sources are then refused by name (runners.compiling).
_OPTIONAL = {"cxx_compiler": str, "cxx_package": str}

# Keys that only some runner kinds use: their types, and per kind which are
# required and which are optional. A key not listed for a profile's kind is refused; a kind
# Assay does not know (another package's runner) may take any of them.
_KIND_KEY_TYPES = {"emulator": str, "emulator_package": str, "emulator_args": list,
                   "runtime_package": str, "memory": dict, "linker_script": str, "not_runnable": str}
_KIND_KEYS = {
    "host": {"required": set(), "optional": set()},
    "qemu-user": {"required": {"emulator", "emulator_package"},
                  "optional": {"emulator_args", "runtime_package", "memory"}},
    "qemu-system": {"required": {"emulator", "emulator_package", "memory"},
                    "optional": {"emulator_args", "runtime_package", "linker_script", "not_runnable"}},
    # bare-metal SMP for parallel code (harness/runners/qemu_smp.py)
    "qemu-smp": {"required": {"emulator", "emulator_package", "memory"},
                 "optional": {"emulator_args", "runtime_package"}},
}
_MEMORY_REGIONS = ("flash", "ram", "boot")
# "boot" is optional: where the reset reads the vector table when code and constants ("flash") live
# elsewhere (cortex-m4f-ext: the Cortex-M4 boots from address 0, the code is in the MPS2's PSRAM).
_OPTIONAL_REGIONS = {"boot"}


@dataclass(frozen=True)
class MemoryRegion:
    """One memory of the target: ``size`` in bytes, ``origin`` its address (None: not fixed by us)."""

    name: str
    size: int
    origin: int | None = None


@dataclass(frozen=True)
class TargetProfile:
    """How to build (and later run) generated code for one target."""

    name: str
    description: str
    kind: str
    compiler: str
    package: str
    cflags: tuple[str, ...]
    opt_levels: tuple[str, ...]
    default_opt: str
    ldflags: tuple[str, ...]
    libs: tuple[str, ...]
    timing: str  # the timing model (wcet.timing) that turns counts into cycles, for MET and WCET alike
    path: Path
    emulator: str | None = None  # the program that runs the built image (None: runs natively)
    emulator_package: str | None = None
    emulator_args: tuple[str, ...] = ()
    runtime_package: str | None = None  # the Debian package with the C library the link needs
    memory: tuple[MemoryRegion, ...] = ()
    # our linker script, beside the profile or in toolchains/ (None: the C library's own, named in ldflags)
    linker_script: Path | None = None
    # why no emulator can run this profile's images (None: runnable); such a profile is for static analysis only
    not_runnable: str | None = None
    cxx_compiler: str | None = None  # the toolchain's C++ compiler (None: this profile builds C only)
    cxx_package: str | None = None

    def accepts_timing(self, name: str) -> bool:
        """Whether timing model ``name`` describes this target: its own model, or a generic one (trivial)."""
        return name == self.timing or timing.model_class(name).generic

    def annotation_dirs(self) -> tuple[Path, ...]:
        """Where ``assay wcet`` reads library loop annotations for this target: Assay's ``toolchains/annotations/``,
        then the ``annotations/`` folder beside the profile (a package's own), in that order."""
        return tuple(dict.fromkeys((PROFILE_DIR / ANNOTATIONS, self.path.parent / ANNOTATIONS)))

    def region(self, name: str) -> MemoryRegion | None:
        """The memory region called ``name`` ("flash", "ram"), or None if the profile gives none."""
        return next((region for region in self.memory if region.name == name), None)

    def read_only_memory(self) -> "AddressRanges | None":
        """Addresses of the memories that hold code and constants (flash, boot), where a writable section
        (a vector table) is constant at run time; None if the profile does not place its flash."""
        ranges = tuple(range(region.origin, region.origin + region.size) for region in self.memory
                       if region.name in ("flash", "boot") and region.origin is not None)
        return AddressRanges(ranges) if ranges else None

    def not_runnable_cause(self) -> str | None:
        """One line naming the profile and why no emulator can run its images; None if one can."""
        if self.not_runnable is None:
            return None
        return f"target {self.name} is not runnable (analysis only): {self.not_runnable}"

    def check_runnable(self) -> None:
        """RunError with ``not_runnable_cause()`` if no emulator can run this profile's images."""
        cause = self.not_runnable_cause()
        if cause is not None:
            raise RunError(cause)

    def compiler_path(self) -> str:
        """The compiler executable; a ConfigError naming the package if it is missing."""
        found = shutil.which(self.compiler)
        if found is None:
            raise ConfigError(f"target {self.name}: compiler '{self.compiler}' not found; "
                              f"install the Debian package '{self.package}'")
        return found

    def cxx_compiler_path(self) -> str:
        """The C++ compiler executable; a ConfigError naming the profile or the package if there is none."""
        if self.cxx_compiler is None:
            raise ConfigError(f"target {self.name}: the code has C++ sources and the profile names no "
                              "'cxx_compiler' (it builds C only)")
        found = shutil.which(self.cxx_compiler)
        if found is None:
            raise ConfigError(f"target {self.name}: C++ compiler '{self.cxx_compiler}' not found; "
                              f"install the Debian package '{self.cxx_package}'")
        return found

    def compiler_version(self) -> str:
        """The first line of the compiler's ``--version`` (a ConfigError if the compiler is missing)."""
        return compiler_version(self.compiler_path())

    def emulator_path(self) -> str:
        """The emulator executable; a ConfigError naming the package if it is missing."""
        found = shutil.which(self.emulator) if self.emulator else None
        if found is None:
            raise ConfigError(f"target {self.name}: emulator '{self.emulator}' not found; "
                              f"install the Debian package '{self.emulator_package}'")
        return found

    def flags(self, opt: str | None = None) -> list[str]:
        """Compiler flags for the given optimisation level (default: the profile's)."""
        opt = opt or self.default_opt
        if opt not in self.opt_levels:
            raise ConfigError(f"target {self.name}: optimisation level {opt} not in {', '.join(self.opt_levels)}")
        return [opt, *self.cflags]


@dataclass(frozen=True)
class AddressRanges:
    """Address ranges tested with ``in``, as one ``range`` is."""

    ranges: tuple[range, ...]

    def __contains__(self, address: object) -> bool:
        return any(address in block for block in self.ranges)


@functools.cache  # asked by every build (each shard's too); a compiler does not change under a running process
def compiler_version(compiler: str) -> str:
    """The first line of ``compiler --version``: what a build's provenance and every content key name."""
    result = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
    return result.stdout.splitlines()[0] if result.stdout else compiler


def _read(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """The profile's keys, with ``extends = "other"`` resolved: the other profile's keys, overridden by these."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read target profile: {exc}") from None
    parent = data.pop("extends", None)
    if parent is None:
        return data
    parent_path = path.with_name(f"{parent}.toml") if isinstance(parent, str) else None
    if parent_path is not None and not parent_path.is_file():
        parent_path = None if parent in NOT_PROFILES else profile_paths().get(parent)
    if parent_path is None:
        raise ConfigError(f"{path}: extends unknown target {parent!r}")
    if parent_path in seen:
        raise ConfigError(f"{path}: 'extends' cycle through {parent}")
    return {**_read(parent_path, (*seen, path)), **data}


def load_profile(path: Path) -> TargetProfile:
    """Read and validate one profile file."""
    data = _read(path)
    for key, kind in _REQUIRED.items():
        if key not in data:
            raise ConfigError(f"{path}: missing key '{key}'")
        if not isinstance(data[key], kind):
            raise ConfigError(f"{path}: key '{key}' must be a {kind.__name__}")
    if data["kind"] not in registry.names("runners"):
        raise ConfigError(f"{path}: kind '{data['kind']}' is not one of {', '.join(registry.names('runners'))}")
    kind_keys = _KIND_KEYS.get(data["kind"], {"required": set(), "optional": set(_KIND_KEY_TYPES)})
    for key in sorted(kind_keys["required"]):
        if key not in data:
            raise ConfigError(f"{path}: missing key '{key}' (required for kind '{data['kind']}')")
    unknown = set(data) - set(_REQUIRED) - set(_OPTIONAL) - kind_keys["required"] - kind_keys["optional"]
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} for kind '{data['kind']}'")
    types = {**_KIND_KEY_TYPES, **_OPTIONAL}
    for key in sorted(set(data) & set(types)):
        if not isinstance(data[key], types[key]):
            raise ConfigError(f"{path}: key '{key}' must be a {types[key].__name__}")
    if ("cxx_compiler" in data) != ("cxx_package" in data):
        raise ConfigError(f"{path}: 'cxx_compiler' and 'cxx_package' go together")
    if data["name"] != path.stem:
        raise ConfigError(f"{path}: name '{data['name']}' differs from the file name")
    if data["timing"] not in timing.names():
        raise ConfigError(f"{path}: timing model '{data['timing']}' is not one of {', '.join(timing.names())}")
    if data["default_opt"] not in data["opt_levels"]:
        raise ConfigError(f"{path}: default_opt '{data['default_opt']}' is not in opt_levels")
    for key in ("cflags", "ldflags", "libs", "opt_levels", "emulator_args"):
        if not all(isinstance(item, str) for item in data.get(key, [])):
            raise ConfigError(f"{path}: key '{key}' must be a list of strings")
    fields = {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}
    if "memory" in data:
        fields["memory"] = _memory(path, data["memory"], origins_required=data["kind"] in ("qemu-system", "qemu-smp"))
    if "linker_script" in data:
        fields["linker_script"] = _linker_script(path, data["linker_script"])
    return TargetProfile(path=path, **fields)


def _linker_script(path: Path, name: str) -> Path:
    """The profile's linker script: a file name beside the profile or in toolchains/, which must exist."""
    script = beside(path, name)
    if script is None:
        where = " or ".join(str(folder) for folder in dict.fromkeys((path.parent, PROFILE_DIR)))
        raise ConfigError(f"{path}: key 'linker_script': no file {name!r} in {where}")
    return script


def beside(profile: Path, name: str) -> Path | None:
    """The file called ``name`` (a plain file name) beside the profile file ``profile``, else in toolchains/; None
    if there is none."""
    if Path(name).name != name:
        return None
    return next((folder / name for folder in dict.fromkeys((profile.parent, PROFILE_DIR))
                 if (folder / name).is_file()), None)


def _memory(path: Path, table: dict, origins_required: bool) -> tuple[MemoryRegion, ...]:
    """Validate ``[memory.flash]``/``[memory.ram]`` (and optional ``[memory.boot]``) tables of ``size`` and
    ``origin`` (bytes)."""
    unknown = set(table) - set(_MEMORY_REGIONS)
    if unknown:
        raise ConfigError(f"{path}: unknown memory region(s) {', '.join(sorted(unknown))}; "
                          f"expected {', '.join(_MEMORY_REGIONS)}")
    regions = []
    for name in _MEMORY_REGIONS:
        region = table.get(name)
        if region is None:
            if origins_required and name not in _OPTIONAL_REGIONS:
                raise ConfigError(f"{path}: missing key 'memory.{name}'")
            continue
        if not isinstance(region, dict):
            raise ConfigError(f"{path}: key 'memory.{name}' must be a table with 'size' and 'origin'")
        unknown = set(region) - {"size", "origin"}
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} in 'memory.{name}'")
        size, origin = region.get("size"), region.get("origin")
        if not _is_int(size) or size <= 0:
            raise ConfigError(f"{path}: key 'memory.{name}.size' must be a positive integer (bytes)")
        if origin is None and origins_required:
            raise ConfigError(f"{path}: missing key 'memory.{name}.origin'")
        if origin is not None and (not _is_int(origin) or origin < 0):
            raise ConfigError(f"{path}: key 'memory.{name}.origin' must be a non-negative integer (address)")
        regions.append(MemoryRegion(name=name, size=size, origin=origin))
    return tuple(regions)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def folders() -> list[Path]:
    """The folders of profiles: one per entry point of ``assay.targets`` (Assay's ``toolchains/`` among them)."""
    found = []
    for name in registry.names("targets"):
        folder = registry.load("targets", name)
        if not isinstance(folder, (str, Path)) or not Path(folder).is_dir():
            raise ConfigError(f"target folder '{name}' of {registry.origin(registry.entries('targets')[name])} "
                              f"is not a folder: {folder!r}")
        found.append(Path(folder).resolve())
    return list(dict.fromkeys(found))


def profile_paths() -> dict[str, Path]:
    """name -> profile file, over every folder; a ConfigError if two folders define one name."""
    found: dict[str, Path] = {}
    for folder in folders():
        for path in sorted(folder.glob("*.toml")):
            if path.stem in NOT_PROFILES:
                continue
            other = found.setdefault(path.stem, path)
            if other != path:
                raise ConfigError(f"target '{path.stem}' is defined twice: {other} and {path}; remove one of them")
    return found


def names() -> list[str]:
    return sorted(profile_paths())


def get(name: str) -> TargetProfile:
    """The profile called ``name``; an unknown name lists the known ones."""
    path = profile_paths().get(name)
    if path is None:
        known = ", ".join(names()) or "none: is Assay installed (pip install -e .)?"
        raise ConfigError(f"unknown target '{name}'; known targets: {known}")
    return load_profile(path)
