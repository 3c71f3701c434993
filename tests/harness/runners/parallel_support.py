"""Parallel code for the runner tests: lenet5-split on hand-made two-core schedules, inception-mini on a DSH
schedule of its own DAG (weights: loop iterations per layer, a stand-in for WCETs that keeps tests fast)."""

from __future__ import annotations

from math import prod
from pathlib import Path

from harness import generators
from harness.generators.generated import GeneratedCode
from harness.models import zoo
from harness.scheduling import layers, run, to_json

BRANCH_A = ["split_a1_conv", "split_a1_avgpool"]
BRANCH_B = ["split_b1_conv", "split_b1_avgpool"]
TAIL = ["split_concat", "conv1", "avgpool1", "flatten1", "dense1", "dense2", "dense3"]


def tasks(names: list[str], start: int = 0, step: int = 10) -> list[dict]:
    return [{"node": name, "start": start + step * k, "end": start + step * (k + 1)} for k, name in enumerate(names)]


# core 1 computes branch b and sends it to core 0 (the paper's Algorithms 2 and 3)
SPLIT_SCHEDULE = [tasks(BRANCH_A + TAIL), tasks(BRANCH_B)]
# core 1 computes both branches: two messages per inference on one channel
TWO_MESSAGES = [tasks(TAIL, start=40), tasks(BRANCH_A + BRANCH_B)]


def iterations(layer: dict) -> int:
    """Loop iterations of a layer's code (each loop's trip count times its parents')."""
    bounds = {loop["id"]: loop for loop in layer["loops"]}

    def total(loop: dict) -> int:
        return loop["bound"] * (total(bounds[loop["parent"]]) if loop["parent"] in bounds else 1)
    return sum(total(loop) for loop in layer["loops"])


def dsh_schedule(code: GeneratedCode, cores: int) -> list[list[dict]]:
    wcets = {layer["name"]: iterations(layer) for layer in code.manifest["layers"]}
    dag = layers.from_manifest(code.manifest, wcets, layers.CopyCost())
    dag, schedule, problems = run(dag, cores, "dsh")
    assert not problems
    return [core["tasks"] for core in to_json(dag, schedule)["schedule"]]


def load(name: str, cache: Path):
    return zoo.load(name, cache_dir=cache)


def sequential(model, out: Path) -> GeneratedCode:
    return generators.get("assay-v2").generate(model, "keras", out)


def parallel(model, out: Path, cores: int, schedule: list[list[dict]], omit_wait: str | None = None) -> GeneratedCode:
    return generators.get("assay-v2").generate_parallel(model, "keras", out, cores, schedule, omit_wait)


def sizes(model) -> int:
    return prod(model.input_shape)
