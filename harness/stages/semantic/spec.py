"""The semantic campaign's contract (``harness.contract``): ``results.json``, schema ``assay-results/2``.

Its store is the core's default one (``harness.core.results``: the pytest campaign and ``assay report`` open it
too), so the schema and key are the core's. Its options are declared here once: ``assay semantic``'s
(``command``), the defaults of ``run.Settings`` and the pytest campaign's ``--assay-<name>`` (``pytest``: True)
are made from them.
"""

from __future__ import annotations

import operator
from pathlib import Path

from harness.contract import ERROR, FAIL, NOT_SUPPORTED, PASS, Option, StageSpec
from harness.core import results

OPTIONS = (
    Option("--references", "keras,onnxruntime,litert", "comma-separated reference runtimes, each run on the models it "
           "supports (default {default})", field="", pytest=True),
    Option("--atol", None, "absolute tolerance for every model (default: each model's own, 1e-5 for the zoo)",
           type=float, pytest=True),
    Option("--rtol", None, "relative tolerance for every model (default: each model's own, 5e-6); an output passes "
           "when |C - reference| <= atol + rtol x |reference|", type=float, pytest=True),
    Option("--tolerance", "derived", "derived: |C - float64| <= the bound of a correct float32 implementation, "
           "derived per output and input from the model's weights, and, where the code's manifest names its layer "
           "output buffers, every layer of the C within the bound of its own rounding from the C's own input to it "
           "(layer-local); the fixed tolerance is then a second opinion: a record within the derived bound but "
           "above it passes with a review line (docs/semantic.md; a model with an op that has no bound falls back to "
           "fixed, visibly). fixed: |C - reference| <= atol + rtol x |reference| (--atol, --rtol) decides alone. "
           "Default {default}", choices=("fixed", "derived"), pytest=True),
    Option("--derived-inputs", 100, "with --tolerance derived: the inputs the derived rule judges, a seeded sample "
           "of N of the campaign's plus every input outside the fixed tolerance (default {default}; 0: all of them; "
           "the derived bound costs far more per input than the run)", type=int, metavar="N", pytest=True),
    Option("--no-arbiter", False, "do not evaluate the model in float64 to tell which of C and reference is closer",
           action="store_true", field="arbiter", to_setting=operator.not_, pytest=True),
    Option("--sanitize", 16, "also run N of the inputs (seeded sample) of each host item under AddressSanitizer and "
           "UndefinedBehaviorSanitizer, with guard words in the arena and each layer's writes checked against its "
           "output's place; a report is an error verdict (default {default}; 0 turns the memory checks off, which "
           "the run and table1.md say)", type=int, metavar="N", pytest=True),
    Option("--inputs", 1000, "number of test inputs per model (default {default}), drawn uniformly from its input "
           "domain; with --inputs-from, drawn beside the file's (0: the file's alone)", type=int, field="n_inputs",
           pytest=True),
    Option("--inputs-from", None, "also run the user's own test set: a .npy of inputs (N, *input shape), or an .npz "
           "with 'x' and optional class labels 'y'; classifiers get top-1 agreement, flips, accuracy with labels and "
           "the decisions the derived bound guarantees (docs/semantic.md)", type=Path, metavar="FILE"),
    Option("--timeout", 600.0, "seconds allowed for one batch run before it counts as a hang (default {default})",
           type=float, pytest=True),
    Option("--cores", 1, "N > 1: run parallel code, one function per core (docs/parallel.md; default {default})",
           type=int, field=""),
    Option("--schedule", None, "with --cores: ish, dsh (default) or cpsat (run `assay schedule`), or a schedule.json",
           field=""),
    Option("--delays", 0, "with --cores: K more runs with seeded random delays before every layer and operator",
           type=int, field=""),
    Option("--interference", 0.0, "with --cores: margin on every WCET of the composed parallel WCET, e.g. 0.2 for "
           "+20 %% (default {default}: no interference counted; docs/parallel.md)", type=float, field=""),
    Option("--shard-size", None, "run each item in shards of K inputs: finished shards are kept (OUT/shards/) and a "
           "killed run resumes with the missing ones; the records are those of an unsharded run (docs/sharding.md)",
           type=int, metavar="K", field="", pytest=True,
           pytest_help="one test per K inputs of each item (xdist spreads the shards of a model over the workers); "
                       "the controller merges them into --assay-out/results.json, which it needs"),
    Option("--workers", 0, "run the campaign on N local pytest-xdist workers (with --shard-size, the shards of one "
           "model spread over them); default {default}: in this process", type=int, metavar="N", field=""),
    Option("--tx", [], "also an xdist gateway, e.g. ssh=host//python=/srv/assay/.venv/bin/python (repeatable; the "
           "host's venv, absolute): the checkout's harness, codegen, wcet, toolchains and lock are rsynced to it "
           "(docs/sharding.md)", action="append", metavar="SPEC", field=""),
    Option("--redo", False, "recompute items already in results.json", action="store_true", pytest=True),
    Option("--keep-history", False, "keep whole, in results.json's superseded list (shown by assay report), the "
           "records of a model file's earlier contents that a run on its new content supersedes; without it they "
           "are only counted there", action="store_true", pytest=True),
)

SPEC = StageSpec(
    name="semantic",
    result_file="results.json",
    schema=results.SCHEMA,
    key_fields=results.KEY_FIELDS,
    verdicts=(PASS, FAIL, ERROR, NOT_SUPPORTED),
    passing=(PASS,),
    neutral=(NOT_SUPPORTED,),  # a generator's refusal fails nothing; only refusals at all: exit 2 (command.py)
    reports=("table1.md", "bitcompare.md", "error_per_model.png"),
    default_targets="host",
    options=OPTIONS,
)
