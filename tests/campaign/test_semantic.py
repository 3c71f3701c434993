"""The semantic-preservation campaign as test items (paper Table 1, section 4.2).

By default: the default zoo tier, assay-v2 from both Keras and ONNX sources,
host gcc -O0, 1000 seeded inputs, compared with Keras and ONNX Runtime.
"""


def test_semantic_preservation(assay_item, assay_campaign):
    records = assay_campaign.run(assay_item)
    assert [r["reference"] for r in records] == list(assay_item.checks)
    problems = [f"{r['reference']}: {r['verdict']}: {r['cause']}" for r in records if r["verdict"] != "pass"]
    assert not problems, "; ".join(problems)
    for record in records:
        assert 0.0 <= record["max_abs_error"] <= record["tolerance"]
