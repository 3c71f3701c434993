"""A record's provenance says which Assay computed it and on which configuration; content keys do not."""

from __future__ import annotations

from harness import sandbox
from harness.core import configuration, provenance


def test_record_provenance_is_a_fresh_dict_with_the_doctor_verdict_and_identity():
    first = provenance.record_provenance()
    assert set(first) == {"tools", "configuration", "assay", "isolation"}
    assert first["isolation"] == sandbox.isolation().record()  # the sandbox the record's code ran in
    doctor = configuration.report()
    assert first["configuration"] == {"verdict": doctor["verdict"], "differences": doctor["differences"],
                                      "qualified_by": (doctor["qualified_by"] or {}).get("summary")}
    assert first["assay"] == doctor["assay"] and first["tools"] == provenance.tool_versions()
    first["model_sha256"] = "x"  # what stages do to it
    first["configuration"]["differences"].append("added")
    first["assay"]["commit"] = "changed"
    again = provenance.record_provenance()
    assert "model_sha256" not in again and "added" not in again["configuration"]["differences"]
    assert again["assay"] == configuration.report()["assay"] and configuration.report()["assay"]["commit"] != "changed"


def test_content_keys_carry_no_commit_or_configuration():
    """tool_versions() enters result keys: a git commit there would discard every stored result at each commit."""
    versions = provenance.tool_versions()
    assert set(versions) <= {"python", "platform", "assay", "codegen", "numpy", "tensorflow-cpu", "tensorflow",
                             "keras", "onnx", "onnxruntime", "cffi"}
