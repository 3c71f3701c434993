"""The Software Configuration Index: every configuration item the verification depends on, with its
identity (SHA-256 or version), so that the authority can tell exactly what was verified and rebuild it; and
whether Assay ran on the configuration it was tested with (``assay doctor``), which Assay, and the part verdict
that says so (``tested-configuration``).
"""

from __future__ import annotations

import functools
import subprocess

from harness import targets
from harness.core.provenance import tool_versions
from harness.models.model import Model
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


def target_item(name: str, opt: str) -> dict:
    """Compiler, flags, linker script, C library and emulator of one target, with versions."""
    profile = targets.get(name)
    compiler = profile.compiler_path()
    item = {"target": name, "profile": f"toolchains/{profile.path.name}", "profile_sha256": sha256(profile.path),
            "compiler": profile.compiler, "compiler_version": first_line((compiler, "--version")),
            "compiler_package": profile.package, "compiler_package_version": debian_version(profile.package),
            "flags": profile.flags(opt), "ldflags": list(profile.ldflags), "libs": list(profile.libs),
            "linker_script": (f"toolchains/{profile.linker_script.name}" if profile.linker_script else
                              next((flag[2:] for flag in profile.ldflags if flag.startswith("-T")), None)),
            "linker_script_sha256": sha256(profile.linker_script) if profile.linker_script else None,
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


def tested_configuration(doctor: dict) -> tuple[str, list[str]]:
    """The ``tested-configuration`` part of a package from ``assay doctor``'s report (``assay-doctor/1``):
    ``pass`` when the build ran on the tested configuration, else ``fail`` with a note listing the differences.
    The doctor's notes (a peer environment or the QEMU plugin built on first use) do not fail it."""
    if doctor["verdict"] == "tested" and not doctor["differences"]:
        return "pass", []
    return "fail", [f"untested configuration (assay doctor, docs/configuration.md): "
                    f"{'; '.join(doctor['differences'])}"]


def configuration_index(models: list[Model], generated: list[dict], target_names: list[str], opt: str,
                        images: list[dict], commands: list[str], doctor: dict) -> dict:
    """The index as plain data (``sci.json``); ``doctor``: ``assay doctor``'s report at the start of the build
    (its verdict and differences, and Assay's identity, are kept; its notes change as caches fill)."""
    return {"schema": SCHEMA, "models": [model_item(m) for m in models], "generated_code": generated,
            "targets": [target_item(name, opt) for name in target_names], "images": images,
            "tools": tool_versions(), "commands": commands,
            "configuration": {"verdict": doctor["verdict"], "differences": list(doctor["differences"])},
            "assay": dict(doctor["assay"])}
