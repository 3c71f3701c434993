"""``assay doctor [--json]``: one line per difference between this machine and the configuration Assay was
tested with, the notes, then the verdict and which Assay this is; exit 0 only when there is no difference."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DESCRIPTION = """\
Compares the running configuration with the tested one and prints one line per difference:
  - Python packages: every package of requirements.lock installed at exactly its version, and no
    installed distribution that the lock does not pin (pip and Assay itself aside);
  - the interpreter's major.minor (one of toolchains/tested.toml's) and the platform;
  - the Debian packages of toolchains/tested.toml, each at exactly the version tested on this distribution
    (dpkg-query; /etc/os-release names the distribution). A "results" package (compilers, C libraries, QEMU,
    clang/LLVM for MC/DC, the sandbox) at another version, or on a distribution the file has no versions for,
    is a difference, unless 'assay evidence qualify' passed on exactly this configuration: then it is a note
    naming that run. A "test-only" package (chromium, chromium-driver, openssh-server, graphviz) at another
    version is a note: it cannot change a result. One installed only by 'bash .ci/setup --test' and missing
    is a note;
  - each built peer environment's pip freeze against its lock (harness/generators/peers/<name>.txt);
  - whether generated code and peer tools can run sandboxed (bubblewrap: no network, system folders
    read-only, a scratch folder writable, limits; docs/sandbox.md): a note says which sandbox, and its
    absence is a difference.
A peer environment or the QEMU counting plugin that is not built yet is a note, not a difference: both are
built on first use from what was tested. OTAWA is a note too (only 'assay wcet --engine otawa|both' uses it):
whether ../shared/otawa-bin holds its archive, the archive's SHA-256, whether it is unpacked, the version
owcet prints, or the dynamic loader's message where it cannot load. The last line gives the verdict (tested or untested) and which
Assay this is (version, git commit or SHA-256 of the sources, SHA-256 of requirements.lock). Every result
file records the same verdict and identity in its provenance, and an evidence package built on an untested
configuration does not pass (docs/configuration.md).

Exit status: 0 when there is no difference (notes do not count), 1 otherwise, 2 when the tested
configuration cannot be read."""


def cmd_doctor(args: argparse.Namespace) -> int:
    from harness.core import configuration

    report = configuration.report(args.lock, args.tested)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for line in report["differences"]:
            print(line)
        for note in report["notes"]:
            print(f"note: {note}")
        print(summary(report))
    return 1 if report["differences"] else 0


def summary(report: dict) -> str:
    """The last line: the verdict, how many differences, and which Assay this is."""
    assay, count = report["assay"], len(report["differences"])
    source = (f"commit {assay['commit'][:12]}" if assay["commit"] else "not a git checkout")
    if assay["dirty"]:
        source += " with changes"
    if assay["sources_sha256"]:
        source += f", sources sha256 {assay['sources_sha256'][:12]}"
    lock = assay["requirements_lock_sha256"]
    verdict = report["verdict"] + (" (by its own qualification run)" if report.get("qualified_by") else "")
    return (f"{verdict} configuration ({count} difference{'' if count == 1 else 's'}); Assay "
            f"{assay['version']}, {source}, requirements.lock " + (f"sha256 {lock[:12]}" if lock else "not found"))


def add_command(subparsers) -> None:
    from harness.core import configuration

    parser = subparsers.add_parser(
        "doctor", help="compare this machine with the configuration Assay was tested with",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true",
                        help="print the report as JSON (schema assay-doctor/1: verdict, differences, notes, assay, "
                             "isolation, otawa)")
    parser.add_argument("--lock", type=Path, default=configuration.LOCK,
                        help="the Python lock file to compare with (default: requirements.lock of this source tree)")
    parser.add_argument("--tested", type=Path, default=configuration.TESTED_FILE,
                        help="the tested interpreter, platform and Debian packages (default: toolchains/tested.toml)")
    parser.set_defaults(func=cmd_doctor)
