"""Report helpers: the configuration line a report prints from its records' provenance, the lines of the records
a result file holds as superseded."""

from __future__ import annotations

from harness.core.report import configuration_lines, superseded_count, superseded_lines


def record(verdict: str, differences: list[str], commit: str | None = "a" * 40, dirty: bool = False) -> dict:
    return {"provenance": {"configuration": {"verdict": verdict, "differences": differences},
                           "assay": {"version": "0.1.0", "commit": commit, "dirty": dirty,
                                     "sources_sha256": None if commit and not dirty else "b" * 64}}}


def test_one_line_per_configuration_and_none_without_it():
    assert configuration_lines([{"provenance": {"tools": {}}}, {}]) == []
    tested = record("tested", [])
    assert configuration_lines([tested, tested]) == [
        "Configuration: Assay 0.1.0 at commit aaaaaaaaaaaa, on the tested configuration (assay doctor, "
        "docs/configuration.md)."]
    (line,) = configuration_lines([record("untested", [f"p{i}: 1 installed, 2 in requirements.lock" for i in range(7)],
                                          commit=None)])
    assert line.startswith("Configuration: Assay 0.1.0, sources bbbbbbbbbbbb, on an untested configuration (7 "
                           "differences: p0: 1 installed, 2 in requirements.lock; ")
    assert "p4: " in line and "p5: " not in line and "; 2 more)" in line


def test_one_line_per_superseded_content_naming_both_hashes_and_the_verdicts():
    entries = [{"model": "dir ü/net.keras", "source_sha256": "a" * 64, "superseded_by": None, "count": 3,
                "superseded_at": "2026-12-06T06:00:00+00:00", "verdicts": {"pass": 2, "fail": 1}, "records": []},
               {"model": "dir ü/net.keras", "source_sha256": None, "superseded_by": "b" * 64, "count": 1,
                "superseded_at": "2026-12-06T06:01:00+00:00", "verdicts": {"error": 1}}]
    first, second = superseded_lines(entries)
    assert first == ("dir ü/net.keras: 3 records of its earlier content (SHA-256 aaaaaaaaaaaa; 1 fail, 2 pass) "
                     "superseded at 2026-12-06T06:00:00+00:00 by a run on no readable file; kept whole in the "
                     "results file's superseded list, not judged")
    assert "(no readable file; 1 error)" in second and "SHA-256 bbbbbbbbbbbb; counted in" in second
    assert superseded_count(entries) == 4 and superseded_lines([]) == []
