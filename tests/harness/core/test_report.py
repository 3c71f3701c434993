"""Report helpers: the configuration line a report prints from its records' provenance."""

from __future__ import annotations

from harness.core.report import configuration_lines


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
