"""Write a model as an NNEF folder and, given a partition or a schedule, one extended description per item.

The folder is the unambiguous specification of the model (docs/nnef.md):
``graph.nnef`` with every padding, border rule and activation explicit, one
``.dat`` file per variable, and ``petri.svg``, the picture of its execution
semantics (Translation 1). With ``items``, ``items/<ITEM>.nnef`` holds each
item's ``graphitem`` description (send_var/get_var included), checked against
the whole description by the composition rule before anything is written, and
``items/petri.svg`` the coloured net (Translation 2). ``export.json``
(``assay-export/1``) records what was written and from which model bytes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.core.provenance import record_provenance
from harness.formal import nnef_items, petri
from harness.models import nnef
from harness.models.model import Model, file_sha256
from harness.stages.export.spec import SPEC

SCHEMA = SPEC.schema


def export(model: Model, out: Path, items_file: Path | None = None) -> dict:
    out = Path(out)
    if "nnef" in model.files:  # a user's NNEF folder is its own specification: written back as given
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(model.file("nnef"), out)
        source = "nnef"
    else:
        nnef.export_onnx(model.file("onnx"), out, model.name)
        source = "onnx"
    graph = nnef.read(out)  # Khronos' parser accepts what was written, and infers every shape
    shapes = {name: list(tensor.shape) for name, tensor in graph.tensors.items() if tensor.shape is not None}
    text = (out / nnef.GRAPH_FILE).read_text()
    (description,) = nnef_items.parse(text, str(out / nnef.GRAPH_FILE))
    net = petri.translate(description)
    record = {"schema": SCHEMA, "model": model.name, "source_format": source,
              "source_sha256": file_sha256(model.file(source)), "graph": nnef.GRAPH_FILE,
              "layers": [ins.result for ins in description.layers()],
              "variables": sorted(name for name, ins in description.declarations().items() if ins.op == "variable"),
              "places": len(net.places),
              "transitions": len(net.transitions), "picture": _picture(net, out / "petri.svg", model.name),
              "provenance": record_provenance()}
    if items_file is not None:
        record["items"] = _write_items(description, shapes, Path(items_file), out / "items", model.name)
    SPEC.path(out).write_text(json.dumps(record, indent=2) + "\n")
    return record


def _write_items(description, shapes: dict, items_file: Path, directory: Path, name: str) -> dict:
    try:
        data = json.loads(items_file.read_text())
    except (OSError, ValueError) as error:
        raise nnef_items.ItemError(f"{items_file}: cannot read the partition ({error})") from None
    tasks = nnef_items.schedule_tasks(data)
    items = (nnef_items.split(description, nnef_items.partition_from_json(data), shapes) if tasks is None
             else nnef_items.split_schedule(description, tasks, shapes))
    nnef_items.check_composition(description, list(items.values()))
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for item, item_description in items.items():
        (directory / f"{item}.nnef").write_text(item_description.text())
    net = petri.translate_items(list(items.values()))
    return {"partition": str(items_file), "files": {item: f"items/{item}.nnef" for item in items},
            "sends": sum(ins.op == "send_var" for d in items.values() for ins in d.body),
            "picture": _picture(net, directory / "petri.svg", f"{name}: {len(items)} items")}


def _picture(net, path: Path, title: str) -> str | None:
    """The net drawn by Graphviz (path relative to the export), or None when ``dot`` is not installed."""
    drawn = petri.render(petri.to_dot(net, title), path)
    return str(path.relative_to(path.parents[1] if path.parent.name == "items" else path.parent)) if drawn else None
