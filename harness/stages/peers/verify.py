"""``assay peers verify --models ... --out DIR``: emx-onnx-cgen's own verifier beside Assay's oracle.

emx-onnx-cgen ships ``emx-onnx-cgen verify``: it generates the C again, compiles it (``cc -std=c99 -O1``), runs
it on a test data set and compares with ONNX Runtime within 100 ULP (``--max-ulp``; an absolute floor of one
machine epsilon). Here both judge the same code on the same inputs: each of the first ``inputs`` inputs of
Assay's seeded set becomes a test data set (``input_0.pb``, the ONNX layout, batch 1) given to the tool's
verifier with each variant's options, and ``assay semantic`` (run as a user would, ``harness.core.stagecall``)
checks the same variants on the same inputs. ``DIR/verify.json`` and ``DIR/verify.md`` put the verdicts side
by side; docs/peers.md explains where they disagree.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.core import stagecall
from harness.core.inputs import make_inputs
from harness.core.plan import Settings, load_model
from harness.generators.emx_onnx_cgen import COMMON, PEER, VARIANTS
from harness.stages.semantic.spec import SPEC as SEMANTIC
from harness.tensors import convert, shape_in

SCHEMA = "assay-peer-verify/1"


def compare(models: list[str], n_inputs: int, seed: int, work: Path, out: Path, log=print) -> list[dict]:
    """One row per (model, variant): the tool's verdict per input and Assay's records; written to ``out``."""
    import onnx
    from onnx import numpy_helper

    settings = Settings(n_inputs=n_inputs, seed=seed, work_dir=work)
    rows = []
    for name in models:
        model = load_model(name, settings)
        onnx_file = model.file("onnx").resolve()
        graph_input = onnx.load(onnx_file, load_external_data=False).graph.input[0].name
        layout = model.layouts_of("onnx")[0]
        batch = convert(make_inputs(model, n_inputs, seed), model.layout, layout)
        shape = shape_in(model.input_shape, model.layout, layout)
        cases = []
        for k, sample in enumerate(batch):
            case = out / "cases" / model.name / f"input_{k}"
            case.mkdir(parents=True, exist_ok=True)
            tensor = numpy_helper.from_array(sample.reshape(1, *shape).astype("float32"), graph_input)
            (case / "input_0.pb").write_bytes(tensor.SerializeToString())
            cases.append(str(case.resolve()))
        log(f"verify: {model.name}: assay semantic on {n_inputs} inputs")
        semantic = stagecall.call(SEMANTIC, ["--models", name, "--generators", "emx-onnx-cgen", "--inputs",
                                             str(n_inputs), "--seed", str(seed), "--work", str(work)],
                                  out / "semantic" / model.name)
        for variant, options in VARIANTS.items():
            log(f"verify: {model.name}: emx-onnx-cgen verify ({variant}) on {n_inputs} inputs")
            answer = PEER.run({"action": "verify", "model": str(onnx_file), "options": [*COMMON, *options],
                               "cases": cases})
            assay = [r for r in semantic.records if r["variant"] == variant]
            rows.append({"model": model.name, "variant": variant,
                         "emx": [{key: case[key] for key in ("exit", "verdict", "worst")}
                                 for case in answer["result"]["cases"]],
                         "emx_command": answer["result"]["cases"][0]["command"] if cases else None,
                         "assay": [{"reference": r.get("reference"), "verdict": r["verdict"],
                                    "max_abs_error": r.get("max_abs_error"), "cause": r.get("cause")} for r in assay],
                         "assay_command": " ".join(semantic.command)})
    (out / "verify.json").write_text(json.dumps({"schema": SCHEMA, "inputs": n_inputs, "seed": seed,
                                                 "rows": rows}, indent=2) + "\n")
    (out / "verify.md").write_text(markdown(rows, n_inputs, seed))
    return rows


def markdown(rows: list[dict], n_inputs: int, seed: int) -> str:
    lines = ["# emx-onnx-cgen's verifier beside Assay's oracle", "",
             f"The first {n_inputs} inputs of Assay's set (seed {seed}), one `emx-onnx-cgen verify --test-data-dir` "
             "run each (its generated C at -O1 against ONNX Runtime, 100 ULP), and `assay semantic` on the same "
             "inputs (-O0, keras and onnxruntime, atol + rtol x |reference|).", "",
             "| model | variant | emx-onnx-cgen verify | Assay (reference: verdict, max error) | agree |",
             "|---|---|---|---|---|"]
    for row in rows:
        emx_ok = sum(case["exit"] == 0 for case in row["emx"])
        verdicts = sorted({case["verdict"] for case in row["emx"] if case["exit"] != 0})
        emx = f"{emx_ok}/{len(row['emx'])} OK" + (f"; {'; '.join(verdicts)}" if verdicts else "")
        assay = "; ".join(f"{r['reference']}: {r['verdict']}"
                          + (f", {r['max_abs_error']:.4e}" if r["max_abs_error"] is not None else "")
                          for r in row["assay"])
        agree = (emx_ok == len(row["emx"])) == all(r["verdict"] == "pass" for r in row["assay"])
        lines.append(f"| {row['model']} | {row['variant']} | {emx} | {assay} | {'yes' if agree else '**no**'} |")
    return "\n".join(lines) + "\n"
