"""Reports are built from results records alone and keep each number's provenance."""

from harness.stages.semantic import report
from harness.core.results import ResultStore


def rec(model, error, verdict="pass", reference="keras", cause=None, **more):
    return dict(model=model, generator="assay-v2", variant="keras", target="host", opt="-O0", reference=reference,
                n_inputs=1000, seed=0, verdict=verdict, cause=cause, max_abs_error=error, tolerance=1e-5,
                provenance={"compiler": "gcc (Debian 12.2.0) 12.2.0", "flags": ["-O0", "-std=c99"],
                            "tools": {"keras": "3.x"}}, **more)


def test_table1_has_models_as_columns_in_zoo_order_and_marks_failures(tmp_path):
    records = [rec("lenet5", 1.7881e-06), rec("acas-reg50", 2.0265e-06),
               rec("cifarnet", 3e-4, verdict="fail", cause="error above tolerance"),
               rec("acas-reg50", None, verdict="error", reference="onnxruntime", cause="crashed with SIGSEGV")]
    text = report.markdown(records)
    header = next(line for line in text.splitlines() if line.startswith("| Generator"))
    assert header.index("acas-reg50") < header.index("lenet5") < header.index("cifarnet")
    assert "| pass 2.0265e-06 | pass 1.7881e-06 | fail 3.0000e-04 |" in text
    assert "| error | – | – |" in text and "crashed with SIGSEGV" in text
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


def test_each_record_shows_its_verdict_rule_bound_and_margin():
    """The first report a user reads (issue 40): verdict word, the rule that judged, its bound and the margin."""
    fixed = rec("lenet5", 2e-7, rtol=5e-6, max_abs_reference=0.9, margin=52.5)
    derived = rec("acas-reg50", 3e-7, reference="onnxruntime", rtol=5e-6, max_abs_reference=10.0, margin=40.0,
                  accumulation="sequential;taps=;flatten=",
                  derived={"verdict": "pass", "cause": None, "bound": 4.5e-6, "c_distance": 1e-7, "tightness": 45.0,
                           "reference_distance": 2e-7, "reference_defect": None, "fixed_verdict": "pass"})
    fallback = rec("cifarnet", 1e-6, rtol=0.0, max_abs_reference=1.0, margin=10.0,
                   derived={"fallback": "no derived bound for Elu: the fixed tolerance decides"})
    broken = rec("mobilenetv2", 1e-9, verdict="error", cause="derived tolerance: no finite derived bound from "
                 "Softmax 'output' on", rtol=5e-6, max_abs_reference=0.3, margin=9e3,
                 derived={"verdict": "error", "cause": "...", "bound": None, "c_distance": 1e-9, "tightness": None,
                          "reference_distance": 1e-9, "reference_defect": None, "fixed_verdict": "pass"})
    lines = report.markdown([fixed, derived, fallback, broken]).splitlines()
    assert "| lenet5 | assay-v2 (keras) | host -O0 | keras | pass | fixed | 1.450e-05 | 2.000e-07 | 52.5 |" in lines
    assert ("| acas-reg50 | assay-v2 (keras) | host -O0 | onnxruntime | pass | derived (sequential;taps=;flatten= "
            "order) | 4.500e-06 | 1.000e-07 | 45 |") in lines
    assert "| cifarnet | assay-v2 (keras) | host -O0 | keras | pass | fixed (derived fell back) | 1.000e-05 | " \
           "1.000e-06 | 10 |" in lines
    assert "| mobilenetv2 | assay-v2 (keras) | host -O0 | keras | error | derived (any order) | – | 1.000e-09 " \
        "| – |" \
        in lines
    page = report.html_page([fixed, broken], _png())
    assert "<td class='pass'>pass</td><td class=''>fixed</td>" in page and "<td class='error'>error</td>" in page


def _png():
    from pathlib import Path
    import tempfile

    path = Path(tempfile.mkdtemp()) / "plot.png"
    path.write_bytes(b"\x89PNG")
    return path


def test_the_plot_shows_the_bound_and_its_legend_covers_no_point():
    """The README's first command: lenet5, both variants, both references, four markers near 1e-7 (the legend
    used to sit on them): every marker and bound dash lies inside the axes, the legend outside them."""
    records = [dict(rec("lenet5", e, reference=ref, rtol=5e-6, max_abs_reference=1.0, margin=50.0), variant=variant)
               for e, ref, variant in ((1.1e-7, "keras", "keras"), (1.3e-7, "onnxruntime", "keras"),
                                       (0.9e-7, "keras", "onnx"), (1.2e-7, "onnxruntime", "onnx"))]
    fig = report.figure(records)
    fig.canvas.draw()
    (ax,) = fig.axes
    frame = ax.get_window_extent()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= frame.x1  # beside the axes: no overlap with anything drawn in them
    points = [(x, y) for collection in ax.collections for x, y in collection.get_offsets()]
    assert len(points) == 8  # four markers and four bound dashes
    assert {round(y, 9) for _, y in points} >= {1.5e-5}  # the bound: atol 1e-5 + rtol 5e-6 x 1.0
    for x, y in ax.transData.transform(points):
        assert frame.x0 <= x <= frame.x1 and frame.y0 <= y <= frame.y1
