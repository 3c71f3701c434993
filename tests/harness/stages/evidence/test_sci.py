"""The Software Configuration Index's part about the configuration Assay ran on: a package built on an untested
configuration does not pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.stages.evidence import sci
from harness.stages.evidence.run import Built

IDENTITY = {"version": "0.1.0", "commit": "c" * 40, "dirty": False, "sources_sha256": None,
            "requirements_lock_sha256": "0" * 64}


def doctor(*differences: str, notes: tuple[str, ...] = ()) -> dict:
    return {"schema": "assay-doctor/1", "verdict": "untested" if differences else "tested",
            "differences": list(differences), "notes": list(notes), "assay": IDENTITY}


@pytest.mark.tor("TOR-CFG-001")
def test_an_untested_configuration_fails_the_package_whatever_the_other_parts_say():
    parts = {"semantic": "pass", "memory": "pass", "met": "pass", "wcet": "pass", "coverage": "pass", "inputs": "pass"}
    tested = Built(root=Path("pkg"), archive=Path("pkg.zip"), verdicts=dict(parts), tool_qualification="pass")
    verdict, notes = sci.tested_configuration(doctor(notes=("peer keras2c: not built (built on first use)",)))
    tested.verdicts[sci.TESTED_CONFIGURATION] = verdict
    assert (verdict, notes, tested.verdict) == ("pass", [], "pass")

    untested = Built(root=Path("pkg"), archive=Path("pkg.zip"), verdicts=dict(parts), tool_qualification="pass")
    verdict, notes = sci.tested_configuration(doctor("gcc: 4:12.2.0-4 installed, 4:12.2.0-3 in toolchains/tested.toml",
                                                     "uv: not installed, 0.13.9 in requirements.lock"))
    untested.verdicts[sci.TESTED_CONFIGURATION] = verdict
    untested.notes.extend(notes)
    assert verdict == "fail" and untested.verdict == "fail"
    (note,) = untested.notes
    assert "untested configuration" in note and "gcc: 4:12.2.0-4 installed" in note and "uv: not installed" in note
    assert sci.TESTED_CONFIGURATION != "configuration"  # that part is the archived code being the verified code


def test_the_index_carries_the_doctor_verdict_differences_and_identity_not_its_notes():
    index = sci.configuration_index([], [], [], "-O0", [], [], doctor("uv: not installed", notes=("a note",)))
    assert index["configuration"] == {"verdict": "untested", "differences": ["uv: not installed"],
                                      "qualified_by": None}
    assert index["assay"] == IDENTITY and "a note" not in str(index)
