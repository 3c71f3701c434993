"""A stage's contract, declared once in ``harness/stages/<name>/spec.py`` as ``SPEC`` (a ``StageSpec``), and the
verdict words every stage's records use.

What a stage makes: its result file, that file's schema and the fields that identify a record, the verdict
words its records carry (``verdict``: the words below, one vocabulary for every stage) and which of them pass or
do not fail a run, the report files it writes beside the result file. What it takes: the stages whose results it reads,
whether it runs per item (model x generator x variant x target, ``harness.core.plan.expand``) or per model
(``harness.core.plan.expand_models``), and its options.

An option (``Option``) is declared once, with its name, type, default and help: the stage's argparse options,
its ``Settings`` dataclass's defaults (``StageSpec.default``) and, for the pytest campaign, the plugin's
``--assay-<name>`` options are made from that one declaration.

A stage may import another stage's ``spec`` module, never its run code (tests/architecture/test_architecture.py): it reads
the other stage's result file through the contract (``harness.core.results.ResultStore.of``,
``StageSpec.passed``) instead of retyping its file name, schema or verdict words.

This module imports nothing of Assay but its errors: a stage's command reads its spec to build its options,
and ``assay wcet --elf`` must start without the core, numpy or a framework.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import AssayError

PER_ITEM, PER_MODEL = "item", "model"

# The verdict words of every stage's records (``verdict``), ``harness.core.oracle``'s too.
PASS, FAIL, ERROR = "pass", "fail", "error"
# The generator refused the model with its own message (harness.errors.NotSupported): neither wrong
# outputs nor a fault, so it is counted apart from both.
NOT_SUPPORTED = "not supported"
# A static figure (WCET, stack bound) on an analysis-only target (``not_runnable`` in its profile): no
# emulator can run the image, so there is nothing to check the figure against; neither a pass nor a failure.
NOT_MEASURED = "not measured"
# A static figure (stack, WCET) the analysis could not bound (a loop or a recursion without a bound): a finding
# about the code, said with its cause, not a wrong figure.
UNBOUNDED = "unbounded"


@dataclass(frozen=True)
class Option:
    """One command-line option, declared once.

    ``help`` may say ``{default}``: the default as the help shows it. ``field`` is the ``Settings`` field the
    option sets (the flag's name with underscores unless given; ``""``: none, the command reads it itself), and
    ``to_setting`` turns the parsed value into that field's value (``--no-arbiter`` -> ``arbiter``). ``pytest``:
    the pytest campaign offers it too, as ``--assay-<name>`` (with ``pytest_help`` if given).
    """

    flag: str
    default: Any = None
    help: str = ""
    type: Callable[[str], Any] | None = None
    action: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    required: bool = False
    field: str | None = None
    to_setting: Callable[[Any], Any] | None = None
    pytest: bool = False
    pytest_help: str | None = None  # the pytest option's help, when it differs

    @property
    def dest(self) -> str:
        """The attribute argparse stores the value under."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def setting(self) -> str:
        """The ``Settings`` field the option sets, or ``""``."""
        return self.dest if self.field is None else self.field

    def shown_default(self) -> str:
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return str(self.default)

    def add_to(self, parser, prefix: str = "") -> None:
        """Add the option to an argparse parser or group, or (``prefix="assay-"``) to a pytest option group."""
        text = self.pytest_help if prefix and self.pytest_help is not None else self.help
        kwargs: dict[str, Any] = {"help": text.format(default=self.shown_default())}
        if self.action is not None:
            kwargs["action"] = self.action
        if self.required:
            kwargs["required"] = True
        if self.action not in ("store_true", "store_false"):
            kwargs.update(default=self.default, **{key: value for key, value in
                                                  (("type", self.type), ("metavar", self.metavar),
                                                   ("choices", self.choices)) if value is not None})
        name = "--" + prefix + self.flag.removeprefix("--")
        add = parser.addoption if hasattr(parser, "addoption") else parser.add_argument
        add(name, **kwargs)

    def value(self, parsed: Any) -> Any:
        """The ``Settings`` value of a parsed value."""
        return parsed if self.to_setting is None else self.to_setting(parsed)


@dataclass(frozen=True)
class StageSpec:
    """What a stage makes and takes (module docstring)."""

    name: str
    result_file: str | None = None  # in the stage's --out folder
    schema: str | None = None
    key_fields: tuple[str, ...] = ()  # what identifies a record in the result file (a store's key)
    verdicts: tuple[str, ...] = ()  # the words of its records' ``verdict``
    passing: tuple[str, ...] = ()  # those that count as passed
    neutral: tuple[str, ...] = ()  # neither passed nor failed: they do not fail a run (e.g. ``not supported``)
    reports: tuple[str, ...] = ()  # report files written beside the result file
    consumes: tuple[str, ...] = ()  # stages whose results it reads (their specs)
    per: str = PER_ITEM  # PER_ITEM or PER_MODEL
    default_targets: str | None = None  # --targets of a per-item stage
    options: tuple[Option, ...] = ()

    def __post_init__(self) -> None:
        if self.per not in (PER_ITEM, PER_MODEL):
            raise ValueError(f"stage {self.name}: per must be {PER_ITEM!r} or {PER_MODEL!r}, not {self.per!r}")
        if not {*self.passing, *self.neutral} <= set(self.verdicts):
            raise ValueError(f"stage {self.name}: passing and neutral verdicts not among {self.verdicts}")

    def path(self, out: Path) -> Path:
        """The result file in the stage's output folder ``out``."""
        if self.result_file is None:
            raise ValueError(f"stage {self.name} writes no result file")
        return Path(out) / self.result_file

    def read(self, path: Path) -> dict:
        """The stage's result when it is one document (not records): an AssayError unless of its schema."""
        document = json.loads(Path(path).read_text())
        if document.get("schema") != self.schema:
            raise AssayError(f"{path}: not an Assay {self.schema} file (schema {document.get('schema')!r})")
        return document

    def passed(self, record: dict) -> bool:
        """The record's verdict passes."""
        return record.get("verdict") in self.passing

    def failed(self, record: dict) -> bool:
        """The record's verdict fails a run: neither passing nor neutral."""
        return record.get("verdict") not in (*self.passing, *self.neutral)

    def option(self, flag: str) -> Option:
        return next(o for o in self.options if o.flag == flag)

    def default(self, setting: str) -> Any:
        """The default of the option that sets ``setting``: what the stage's ``Settings`` field starts as."""
        try:
            return next(o.value(o.default) for o in self.options if o.setting == setting)
        except StopIteration:
            raise KeyError(f"stage {self.name} declares no option for {setting!r}") from None

    def add_options(self, parser, prefix: str = "", only: Callable[[Option], bool] = lambda _option: True) -> None:
        """Add the declared options (those ``only`` keeps) to an argparse parser or a pytest group."""
        for option in self.options:
            if only(option):
                option.add_to(parser, prefix)

    def campaign_options(self) -> list[Option]:
        """The options the pytest campaign offers as ``--assay-<name>`` (``harness.pytest_plugin``)."""
        return [option for option in self.options if option.pytest]

    def settings_values(self, get: Callable[[str], Any], options: Iterable[Option] | None = None) -> dict[str, Any]:
        """``Settings`` keyword arguments from parsed options: ``get(dest)`` is an option's parsed value."""
        return {o.setting: o.value(get(o.dest)) for o in (self.options if options is None else options)
                if o.setting}


# Options of every command that loads models or generates code (harness.cli.add_common_options).
SEED = Option("--seed", 0, "seed for the test inputs (default {default})", type=int, pytest=True)
MODEL_SEED = Option("--model-seed", 0, "seed for the weights of zoo models (default {default}; fixed, so C generated "
                    "earlier can be checked with other --seed inputs)", type=int, pytest=True)
WORK = Option("--work", Path("generated"), "where zoo models, generated C, builds and reference outputs go "
              "(default {default}/)", type=Path, field="work_dir", pytest=True)
COMMON = (SEED, MODEL_SEED, WORK)
DEFAULT_GENERATORS = "assay-v2"


def common_values(get: Callable[[str], Any]) -> dict[str, Any]:
    """``Settings`` keyword arguments of the common options."""
    return {o.setting: o.value(get(o.dest)) for o in COMMON}

