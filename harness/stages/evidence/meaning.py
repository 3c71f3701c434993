"""What ``assay evidence verify`` checks of a package's meaning, beyond its bytes: one line per finding.

A package whose files were rewritten consistently (records, hashes, ``evidence.json``) passes every byte check
when the digest file travels with it (docs/known-problems.md, KP-007). These checks read the package's own content
and find what such a rewrite leaves inconsistent:

- each semantic record's verdict follows from its own figures (``oracle.recheck``: the rule the build's part
  verdicts use, ``verdicts.passed``), and its tolerance is the one the plan in ``sci.json`` gives its model;
- every item of the plan (``sci.json``'s ``plan``: model x generator x variant x target x reference, as the
  stages' planner expanded it) has its record, and no record is outside the plan: a deleted failing record is
  found missing;
- the model's hash agrees across ``sci.json``, the archived model file, the generated code's manifests and the
  records' provenance: a model replaced with only its ``sci.json`` hash fixed is found;
- the Assay (commit, lock) of every record is the one ``sci.json`` names, or one the stage's ``reused`` block
  declares (a record reused from an earlier Assay's sealed cache): a rewritten commit or lock hash is found;
- every code's coverage meets the criteria of the package's software level (``verdicts.coverage_shortfall``);
- a semantic record's claim that its judged layers reach the model's output (``layer_local.covers_output``, which
  lets the layers decide where the end-to-end bound is no number: ``oracle.with_layers``) holds for the archived
  ONNX graph: one of its judged layers' tensors is an output of that graph.
"""

from __future__ import annotations

import hashlib

from harness.core import oracle
from harness.core.pipeline import slug
from harness.stages.evidence import verdicts

# The fields that name an item in the plan, per stage (the semantic plan adds the tolerance each record carries).
TOLERANCE_FIELDS = ("tolerance", "rtol")
IDENTITY_FIELDS = ("commit", "requirements_lock_sha256")


def check(files: dict[str, bytes], sci: dict) -> list[str]:
    """Every finding of the module docstring's checks on the package whose files are ``files``."""
    results = {name: verdicts.json_or_none(files.get(verdicts.stage_result(name))) for name in verdicts.STAGES}
    results = {name: document for name, document in results.items() if isinstance(document, dict)}
    lines = []
    for name, document in results.items():
        records = document.get("records") if isinstance(document.get("records"), list) else []
        where = verdicts.stage_result(name)
        if name == "semantic":
            lines += [f"{where}: {_item(r)}: {why}" for r in records if (why := oracle.recheck(r)) is not None]
        lines += _completeness(where, records, (sci.get("plan") or {}).get(name))
        lines += _identity(where, records, sci.get("assay") or {}, document.get("reused") or {})
    if isinstance(sci.get("plan"), dict) and "semantic" not in sci["plan"]:
        lines.append(f"{verdicts.SCI}: its plan names no semantic item")
    elif not isinstance(sci.get("plan"), dict):
        lines.append(f"{verdicts.SCI}: no plan: the package's completeness cannot be checked")
    lines += _model_hashes(files, sci, results.get("semantic", {}).get("records") or [])
    lines += _layer_claims(files, sci, results.get("semantic", {}).get("records") or [])
    coverage = verdicts.json_or_none(files.get(verdicts.COVERAGE))
    if isinstance(coverage, dict):
        level = sci.get("level") or "C"
        lines += [f"{verdicts.COVERAGE}: {code} at level {level}: {', '.join(lacking)}"
                  for code, summary in sorted((coverage.get("codes") or {}).items())
                  if (lacking := verdicts.coverage_shortfall(summary, level))]
    return lines


def _item(record: dict) -> str:
    return " ".join(str(record.get(k)) for k in ("model", "generator", "variant", "target", "reference", "timing")
                     if record.get(k) is not None)


def _completeness(where: str, records: list[dict], planned: list[dict] | None) -> list[str]:
    """Each planned item has a record carrying its fields (the tolerance included), and each record is planned."""
    if planned is None:
        return [f"{where}: not in {verdicts.SCI}'s plan"]
    lines = []
    for item in planned:
        naming = {k: v for k, v in item.items() if k not in TOLERANCE_FIELDS}
        matching = [r for r in records if all(r.get(k) == v for k, v in naming.items())]
        if not matching:
            lines.append(f"{where}: no record of {_item(item)} (planned in {verdicts.SCI})")
        for record in matching:
            lines += [f"{where}: {_item(record)}: {field} {record.get(field)!r}, the plan gives {item[field]!r}"
                      for field in TOLERANCE_FIELDS if field in item and record.get(field) != item[field]]
    fields = {k for item in planned for k in item if k not in TOLERANCE_FIELDS}
    lines += [f"{where}: {_item(r)}: a record outside {verdicts.SCI}'s plan" for r in records
              if not any(all(r.get(k) == item.get(k) for k in fields) for item in planned)]
    return lines


def _identity(where: str, records: list[dict], assay: dict, reused: dict) -> list[str]:
    """The Assay (commit, lock) of each record: the package's, or an earlier one its stage declares reused."""
    own = tuple(assay.get(k) for k in IDENTITY_FIELDS)
    declared = {tuple(entry) for entry in reused.get("by") or [] if isinstance(entry, list)}
    lines = []
    for record in records:
        theirs = (record.get("provenance") or {}).get("assay")
        if not isinstance(theirs, dict):
            continue  # a record made before its item could run (an unloadable model) has no provenance
        found = tuple(theirs.get(k) for k in IDENTITY_FIELDS)
        if found != own and found not in declared:
            lines.append(f"{where}: {_item(record)}: made by Assay commit {found[0]} (lock {str(found[1])[:12]}), "
                         f"not the commit {own[0]} (lock {str(own[1])[:12]}) {verdicts.SCI} names")
    return lines


def _model_hashes(files: dict[str, bytes], sci: dict, records: list[dict]) -> list[str]:
    """One model hash per (model, format) across sci.json, the archived file, the manifests and the records."""
    lines, stated = [], {}
    for model in sci.get("models") or []:
        for fmt, entry in (model.get("files") or {}).items():
            stated[(model.get("name"), fmt)] = entry.get("sha256")
            archived = files.get(f"models/{slug(str(model.get('name')))}/{entry.get('file')}")
            if archived is not None and hashlib.sha256(archived).hexdigest() != entry.get("sha256"):
                lines.append(f"models/{slug(str(model.get('name')))}/{entry.get('file')}: not the {fmt} model "
                             f"{verdicts.SCI} names ({str(entry.get('sha256'))[:12]})")
    for code in sci.get("generated_code") or []:
        manifest = verdicts.json_or_none(files.get(f"{code.get('directory')}/manifest.json"))
        named = (manifest or {}).get("model") if isinstance(manifest, dict) else None
        if isinstance(named, dict) and named.get("sha256") and \
                stated.get((code.get("model"), named.get("format"))) != named.get("sha256"):
            lines.append(f"{code.get('directory')}/manifest.json: generated from model {str(named['sha256'])[:12]}, "
                         f"not the {named.get('format')} model {verdicts.SCI} names")
    for record in records:
        hashes = (record.get("provenance") or {}).get("model_sha256")
        for fmt, value in (hashes.items() if isinstance(hashes, dict) else ()):
            if stated.get((record.get("model"), fmt)) != value:
                lines.append(f"{verdicts.stage_result('semantic')}: {_item(record)}: judged the {fmt} model "
                             f"{str(value)[:12]}, not the one {verdicts.SCI} names")
    return lines


def _layer_claims(files: dict[str, bytes], sci: dict, records: list[dict]) -> list[str]:
    """Each ``covers_output`` claim recomputed from the record's judged layers and the archived ONNX graph's outputs
    (a record cannot vouch for it: with the claim, a record whose end-to-end bound broke passes on its layers)."""
    lines, outputs = [], {}
    where = verdicts.stage_result("semantic")
    for record in records:
        layers = record.get("layer_local")
        if not isinstance(layers, dict) or not layers.get("covers_output"):
            continue
        name = record.get("model")
        if name not in outputs:
            outputs[name] = _graph_outputs(files, sci, name)
        judged = {row.get("graph_tensor") for row in layers.get("layers") or [] if isinstance(row, dict)
                  and row.get("judged")}
        if isinstance(outputs[name], str):
            lines.append(f"{where}: {_item(record)}: its layers are said to reach the model's output, which "
                         f"cannot be checked: {outputs[name]}")
        elif not judged & outputs[name]:
            lines.append(f"{where}: {_item(record)}: its layers are said to reach the model's output, but no "
                         f"judged layer is an output of the archived ONNX graph ({', '.join(sorted(outputs[name]))})")
    return lines


def _graph_outputs(files: dict[str, bytes], sci: dict, name: object) -> set[str] | str:
    """The output names of model ``name``'s archived ONNX graph (the float64 graph the layers were judged in), or
    why there are none."""
    import onnx
    from google.protobuf.message import DecodeError

    entry = next(((m.get("files") or {}).get("onnx") for m in sci.get("models") or [] if m.get("name") == name),
                 None)
    data = files.get(f"models/{slug(str(name))}/{entry.get('file')}") if isinstance(entry, dict) else None
    if data is None:
        return f"the package has no ONNX graph of model {name}"
    try:
        return {out.name for out in onnx.load_model_from_string(data).graph.output}
    except DecodeError as exc:
        return f"model {name}'s archived ONNX graph does not load ({type(exc).__name__})"
