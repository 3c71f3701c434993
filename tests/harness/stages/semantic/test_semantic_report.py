"""Reports are built from results records alone and keep each number's provenance."""

from harness.stages.semantic import report
from harness.core.results import ResultStore


def rec(model, error, verdict="pass", reference="keras", cause=None):
    return dict(model=model, generator="assay-v2", variant="keras", target="host", opt="-O0", reference=reference,
                n_inputs=1000, seed=0, verdict=verdict, cause=cause, max_abs_error=error, tolerance=1e-5,
                provenance={"compiler": "gcc (Debian 12.2.0) 12.2.0", "flags": ["-O0", "-std=c99"],
                            "tools": {"keras": "3.x"}})


def test_table1_has_models_as_columns_in_zoo_order_and_marks_failures(tmp_path):
    records = [rec("lenet5", 1.7881e-06), rec("acas-reg50", 2.0265e-06),
               rec("cifarnet", 3e-4, verdict="fail", cause="error above tolerance"),
               rec("acas-reg50", None, verdict="error", reference="onnxruntime", cause="crashed with SIGSEGV")]
    text = report.markdown(records)
    header = next(line for line in text.splitlines() if line.startswith("| Generator"))
    assert header.index("acas-reg50") < header.index("lenet5") < header.index("cifarnet")
    assert "| 2.0265e-06 | 1.7881e-06 | 3.0000e-04 FAIL |" in text
    assert "ERROR" in text and "crashed with SIGSEGV" in text
    assert "1000 inputs, seed 0" in text and "-O0 -std=c99" in text and "1e-05" in text


def test_write_semantic_report_makes_markdown_png_and_html(tmp_path):
    store = ResultStore(tmp_path / "results.json")
    store.put(rec("lenet5", 1.2e-6))
    store.put(rec("lenet5", 2.5e-7, reference="onnxruntime"))
    paths = report.write_semantic_report(store.records(), tmp_path / "rep")
    assert [p.name for p in paths] == ["table1.md", "error_per_model.png", "index.html"]
    assert paths[1].read_bytes().startswith(b"\x89PNG")
    page = paths[2].read_text()
    assert "data:image/png;base64," in page and "1.2000e-06" in page


def test_bitcompare_table_has_targets_as_columns():
    base = rec("acas-reg50", 1e-7)
    arm = dict(base, target="arm7tdmi", bits_vs_host={"values": 10, "differing_values": 0, "differing_inputs": 0,
                                                      "max_ulp": 0, "nan_mismatches": 0})
    m4 = dict(base, target="cortex-m4f", bits_vs_host={"values": 10, "differing_values": 3, "differing_inputs": 2,
                                                        "max_ulp": 1, "nan_mismatches": 0})
    text = report.bits_markdown([base, arm, m4])
    assert "| acas-reg50 | assay-v2 (keras) | -O0 | identical | 3/10 values differ (2 inputs), max 1 ULP |" in text
