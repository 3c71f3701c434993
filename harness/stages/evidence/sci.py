"""The Software Configuration Index: every configuration item the verification depends on, with its
identity (SHA-256 or version), so that the authority can tell exactly what was verified and rebuild it; and
whether Assay ran on the configuration it was tested with (``assay doctor``), which Assay, and the part verdict
that says so (``tested-configuration``).
"""

from __future__ import annotations

import functools
import hashlib
import re
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from harness import targets
from harness.core import qualification
from harness.core.provenance import tool_versions
from harness.models.model import Model
from harness.runners.compiling import DRIVERS_DIR
from harness.stages.evidence.package import sha256

SCHEMA = "assay-sci/1"
# The part verdict about the configuration Assay ran on; "configuration" is another part's: the archived code is
# the code the semantic stage verified (run.py).
TESTED_CONFIGURATION = "tested-configuration"


@functools.cache
def debian_version(package: str) -> str | None:
    """The installed version of a Debian package, or None where dpkg does not know it."""
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                            check=False)
    return result.stdout.strip() or None


@functools.cache
def first_line(command: tuple[str, ...]) -> str | None:
    result = subprocess.run(list(command), capture_output=True, text=True, check=False)
    return (result.stdout.strip().splitlines() or [None])[0]


@functools.cache
def python_packages() -> dict[str, str]:
    """Every Python distribution Assay requires (its installed metadata's ``Requires-Dist``, extras left out) with
    the version installed: gcovr, capstone, pyelftools, highspy, ortools, pycparser, pytest, h5py, ... each one
    that can change a figure of the package or a test of Assay."""
    names = {re.match(r"[A-Za-z0-9._-]+", requirement)[0] for requirement in metadata.requires("assay") or []
             if "extra ==" not in requirement}
    versions = {}
    for name in sorted(names, key=str.lower):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


_OPENED_SCRIPT = re.compile(r"^opened script file (\S+)$", re.MULTILINE)


@functools.cache
def linker_script_used(name: str, opt: str) -> Path | None:
    """The linker script a target's link reads (``-Tpicolibc.ld`` is found on the C library's search path): a
    one-line program linked with the profile's flags and ``-Wl,--verbose``, which names the script it opened."""
    profile = targets.get(name)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "main.c").write_text("int main(void) { return 0; }\n")
        done = subprocess.run([profile.compiler_path(), *profile.flags(opt), "main.c", *profile.ldflags,
                               "-Wl,--verbose", "-o", "main.elf", *profile.libs], cwd=folder, capture_output=True,
                              text=True, check=False)
    opened = _OPENED_SCRIPT.findall(done.stdout + done.stderr)
    return Path(opened[-1]) if opened and Path(opened[-1]).is_file() else None


def drivers() -> list[Path]:
    """The C drivers and headers compiled into every build with the generated code (``target_driver.c``, ...)."""
    return sorted([*DRIVERS_DIR.glob("*.c"), *DRIVERS_DIR.glob("*.h")])


def target_item(name: str, opt: str) -> dict:
    """Compiler, flags, linker script, C library and emulator of one target, with versions."""
    profile = targets.get(name)
    compiler = profile.compiler_path()
    script = profile.linker_script or (linker_script_used(name, opt)
                                       if any(flag.startswith("-T") for flag in profile.ldflags) else None)
    item = {"target": name, "profile": f"toolchains/{profile.path.name}", "profile_sha256": sha256(profile.path),
            "compiler": profile.compiler, "compiler_version": first_line((compiler, "--version")),
            "compiler_package": profile.package, "compiler_package_version": debian_version(profile.package),
            "flags": profile.flags(opt), "ldflags": list(profile.ldflags), "libs": list(profile.libs),
            "linker_script": (f"toolchains/{profile.linker_script.name}" if profile.linker_script else
                              next((flag[2:] for flag in profile.ldflags if flag.startswith("-T")), None)),
            "linker_script_file": (f"toolchains/{script.name}" if profile.linker_script else
                                   str(script) if script else None),
            "linker_script_sha256": sha256(script) if script else None,
            "c_library_package": profile.runtime_package,
            "c_library_version": debian_version(profile.runtime_package) if profile.runtime_package else None}
    if profile.emulator:
        item.update(emulator=profile.emulator, emulator_version=first_line((profile.emulator_path(), "--version")),
                    emulator_package=profile.emulator_package)
    return item


def model_item(model: Model) -> dict:
    hashes = model.sha256()
    return {"name": model.name, "files": {fmt: {"file": path.name, "sha256": hashes[fmt]}
                                          for fmt, path in sorted(model.files.items())}}


QUALIFICATION_JUNIT = "sci/qualification/junit.xml"  # the run that qualified a configuration tested.toml lacks
QUALIFICATION_RECORD = "sci/qualification/record.json"


def tested_configuration(doctor: dict, read=None) -> tuple[str, list[str]]:
    """The ``tested-configuration`` part of a package from ``assay doctor``'s report (``assay-doctor/1``):
    ``pass`` when the build ran on the tested configuration, else ``fail`` with a note listing the differences.
    The doctor's notes (a peer environment or the QEMU plugin built on first use) do not fail it.

    A configuration tested by its own qualification run (``qualified_by``, ``assay evidence qualify``) passes only
    when the package holds that run's JUnit XML (``read(QUALIFICATION_JUNIT)``: its bytes, or None) with the
    SHA-256 the report names, and the XML's cases all passed or were skipped: the claim is checked from the
    package's own content, not taken from the report."""
    if doctor["verdict"] != "tested" or doctor["differences"]:
        return "fail", [f"untested configuration (assay doctor, docs/configuration.md): "
                        f"{'; '.join(doctor['differences'])}"]
    qualified = doctor.get("qualified_by")
    if not qualified:
        return "pass", []
    junit = read(QUALIFICATION_JUNIT) if read is not None else None
    if junit is None:
        return "fail", [f"tested by its own qualification run, but {QUALIFICATION_JUNIT} is not in the package"]
    if hashlib.sha256(junit).hexdigest() != qualified.get("junit_sha256"):
        return "fail", [f"{QUALIFICATION_JUNIT} is not the JUnit XML of the qualification run sci.json names"]
    try:
        counts = qualification.junit_counts(junit)
    except ValueError:
        return "fail", [f"{QUALIFICATION_JUNIT} is not JUnit XML"]
    if counts.failed or counts.errors or not counts.passed:
        return "fail", [f"{QUALIFICATION_JUNIT}: the qualification run did not pass ({counts.failed} failed, "
                        f"{counts.errors} errors)"]
    return "pass", [f"configuration {qualified.get('summary', 'qualified by its own run')}; that run's JUnit XML "
                    f"and record are in sci/qualification/"]


def configuration_index(models: list[Model], generated: list[dict], target_names: list[str], opt: str,
                        images: list[dict], commands: list[str], doctor: dict, command_line: str | None = None,
                        archived: list[dict] | None = None, plan: dict[str, list[dict]] | None = None,
                        level: str | None = None) -> dict:
    """The index as plain data (``sci.json``); ``doctor``: ``assay doctor``'s report at the start of the build
    (its verdict and differences, and Assay's identity, are kept; its notes change as caches fill);
    ``command_line``: the ``assay evidence`` command that built the package; ``archived``: the files copied into the
    package beside the code (models, drivers, linker scripts, flow facts), each with its SHA-256; ``plan``: per stage,
    the items (and for the semantic stage the references and tolerances) the package must hold a record of;
    ``level``: the DO-178C software level the package is built for (its coverage criterion: ``verdicts``)."""
    return {"schema": SCHEMA, "models": [model_item(m) for m in models], "generated_code": generated,
            "plan": plan or {}, "level": level,
            "targets": [target_item(name, opt) for name in target_names], "images": images,
            "tools": tool_versions(), "python_packages": python_packages(), "commands": commands,
            "command_line": command_line, "archived": archived or [],
            "configuration": {"verdict": doctor["verdict"], "differences": list(doctor["differences"]),
                              "qualified_by": _without_folder(doctor.get("qualified_by"))},
            "assay": dict(doctor["assay"]),
            "isolation": doctor.get("isolation")}  # the sandbox the package's code ran in (docs/sandbox.md)


def _without_folder(qualified: dict | None) -> dict | None:
    """The qualification run as the package names it: no folder of this machine (the run is in the package)."""
    return None if qualified is None else {k: v for k, v in qualified.items() if k != "folder"}
