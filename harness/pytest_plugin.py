"""Assay's pytest plugin (loaded through the ``pytest11`` entry point).

The campaign *is* a test session: any test that asks for the ``assay_item``
fixture is parametrized over the campaign's items (model x generator x variant
x target), so ``pytest -n 2`` spreads them over cores and JUnit XML comes free.
The ``assay_campaign`` fixture runs an item and writes its records to
``--assay-out``/results.json, under a lock shared by the xdist workers.

``--assay-shard-size K`` makes each shard of K inputs of an item its own test
(``harness.stages.semantic.sharded``), so xdist spreads one model's inputs over
every worker, local (``-n N``) or remote (``--tx ssh=host//python=/srv/assay/.venv/bin/python``).
Each test's outcome travels to the controller in its report (xdist serialises
a report's attributes): the records of an item, or the shard's file. The
controller writes them into its own ``--assay-out`` (a remote worker has its
own file system), tells new workers which shards it already holds, and at the
end merges every item whose shards are all there into its ``results.json``
(docs/sharding.md).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.contract import COMMON, DEFAULT_GENERATORS, common_values
from harness.core.plan import UNLOADED, Item, load_model
from harness.core.results import ResultStore
from harness.core.shards import Shard, ShardStore, split
from harness.stages.semantic import sharded
from harness.stages.semantic.run import Settings, content_key, plan, run_item
from harness.stages.semantic.spec import SPEC
from harness.targets import HOST

SHARDS_DIR = "shards"  # beside results.json: the finished shards (harness.core.shards)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "Assay semantic-preservation campaign")
    group.addoption("--assay-models", default=None,
                    help="comma-separated zoo names or model files (default: the default zoo tier)")
    group.addoption("--assay-generators", default=DEFAULT_GENERATORS,
                    help=f"comma-separated generators (default {DEFAULT_GENERATORS})")
    group.addoption("--assay-targets", default=SPEC.default_targets,
                    help=f"comma-separated target profiles (default {SPEC.default_targets})")
    group.addoption("--assay-out", default=None,
                    help="directory for results.json (default: a temporary directory of the session)")
    group.addoption("--assay-opt", default="-O0", help="optimisation level (default -O0)")
    # the semantic stage's own options and the common ones, declared once (harness/stages/semantic/spec.py,
    # harness.contract): --assay-references, --assay-inputs, --assay-seed, --assay-work, ...
    for option in (*COMMON, *SPEC.campaign_options()):
        option.add_to(group, prefix="assay-")
    group.addoption("--run-slow", action="store_true",
                    help="also run tests marked slow (full-tier models: AlexNet, VGG-16)")
    group.addoption("--wcet", action="store_true",
                    help="run the WCET checks (tests marked wcet): flow facts, the static analyzer on the zoo, "
                         "soundness against measured cycles")
    group.addoption("--peers", action="store_true",
                    help="run the tests that drive external generators in their own environments (tests marked "
                         "peers; the first run builds the environments: several minutes, ~4 GB from PyPI)")


# marker -> (option that enables it, reason shown when skipped)
_GATED = {"slow": ("run_slow", "slow: run with --run-slow"),
          "wcet": ("wcet", "WCET check: run with pytest --wcet"),
          "peers": ("peers", "external generator in its own environment: run with pytest --peers")}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long-running test, run only with --run-slow")
    config.addinivalue_line("markers", "wcet: WCET check, run only with --wcet")
    config.addinivalue_line("markers", "peers: drives an external generator in its own venv, run only with --peers")
    config.addinivalue_line("markers", "tor(*ids): the Tool Operational Requirements (docs/tor.md) the test verifies")
    out = config.getoption("assay_out")
    if config.getoption("assay_shard_size") is not None and not out:
        raise pytest.UsageError("--assay-shard-size needs --assay-out: the shards are merged into its results.json")
    if out and not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(Controller(config, Path(out)), "assay-controller")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Name in the JUnit XML (a ``plugins`` property of the suite) every plugin module this run loaded beyond pytest's
    own: the TOR matrix keeps it and ``assay evidence verify`` refuses a run with a plugin the qualification run
    does not name (a do-nothing plugin that makes every test pass, issue 39 B3). Only the process writing the XML
    has it (the xdist controller); ``xml_key`` is pytest's own stash key for its JUnit writer."""
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    if xml is not None:
        xml.add_global_property("plugins", " ".join(loaded_plugins(session.config)))


def loaded_plugins(config: pytest.Config) -> list[str]:
    """The module names of the plugins registered beyond pytest's own (``_pytest.*``), conftest files included."""
    return sorted({plugin.__name__ for _name, plugin in config.pluginmanager.list_name_plugin()
                   if isinstance(plugin, types.ModuleType) and plugin.__name__.split(".")[0] != "_pytest"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # the TOR IDs go into the JUnit XML as properties: the TOR matrix reads them there
        item.user_properties += [("tor", tor_id) for marker in item.iter_markers("tor") for tor_id in marker.args]
    for marker, (option, reason) in _GATED.items():
        if config.getoption(option):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)


def _settings(config: pytest.Config) -> Settings:
    def option(dest: str):
        return config.getoption(f"assay_{dest}")

    return Settings(**SPEC.settings_values(option, SPEC.campaign_options()), **common_values(option),
                    opt=option("opt"))


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "assay_item" not in metafunc.fixturenames:
        return
    from harness.models import zoo

    config = metafunc.config
    models = config.getoption("assay_models")
    campaign = plan(_split(models) if models else zoo.names("default"),
                    _split(config.getoption("assay_generators")), _split(config.getoption("assay_references")),
                    _split(config.getoption("assay_targets")), _settings(config))
    size = config.getoption("assay_shard_size")
    if size is not None:
        sharded.check_settings(_settings(config), size)
    units = campaign.items if size is None else [
        ShardItem(item, shard) for item in campaign.items for shard in _shards_of(item, size, config)]
    metafunc.parametrize("assay_item", units, ids=[unit.id for unit in units])


def _shards_of(item: Item, size: int, config: pytest.Config) -> list[Shard]:
    """An item's shards; an item whose model cannot be loaded is one test (an empty shard) that records its
    error as an unsharded run does."""
    return split(config.getoption("assay_inputs"), size) if item.variant != UNLOADED else [Shard(0, 0, 0)]


@dataclass(frozen=True)
class ShardItem:
    """One shard of an item: a test of its own, so that xdist spreads an item's inputs over its workers."""

    item: Item
    shard: Shard

    @property
    def checks(self) -> tuple[str, ...]:
        return self.item.checks

    @property
    def id(self) -> str:
        return f"{self.item.id}/{self.shard.id}"


@dataclass
class Campaign:
    """Runs the campaign's tests in this process; ``payload`` is what the last one sends to the controller."""

    settings: Settings
    store: ResultStore
    held: dict  # shard file name -> the shard's checks: what the controller already holds (remote workers)
    payload: dict | None = None

    @property
    def shards(self) -> ShardStore:
        return ShardStore(self.store.path.parent / SHARDS_DIR)

    def run(self, unit: Item | ShardItem) -> list[dict]:
        """The item's records, or the shard's own verdict per reference (its slice of the inputs)."""
        if isinstance(unit, Item) or unit.shard.size == 0:
            item = unit if isinstance(unit, Item) else unit.item
            records = run_item(item, self.settings, self.store)
            self.payload = {"records": records}
            return records
        fingerprint = content_key(unit.item, load_model(unit.item.model, self.settings), self.settings)
        name = self.shards.name(unit.item.id, fingerprint, unit.shard)
        if name in self.held and not self.settings.redo:  # finished in an earlier session, kept by the controller
            self.payload = {"shard": {"item": _item_fields(unit.item), "name": name}}
            return self.held[name]
        stored = sharded.run_shard(unit.item, unit.shard, self.settings, self.shards)
        self.payload = {"shard": {"item": _item_fields(unit.item),
                                  **self.shards.payload(unit.item.id, fingerprint, unit.shard)}}
        return stored.meta["checks"]


def _item_fields(item: Item) -> list:
    return [item.model, item.generator, item.variant, item.target, list(item.checks)]


@pytest.fixture(scope="session")
def assay_campaign(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    out = request.config.getoption("assay_out")
    directory = Path(out) if out else tmp_path_factory.mktemp("assay-campaign")
    held = getattr(request.config, "workerinput", {}).get("assay_held", {})
    settings = _settings(request.config)
    return Campaign(settings, ResultStore.of(SPEC, SPEC.path(directory), settings.keep_history), held)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Attach the campaign's payload to the test's report: xdist sends a report's attributes to the controller."""
    report = yield
    campaign = getattr(item, "funcargs", {}).get("assay_campaign")
    if call.when == "call" and isinstance(campaign, Campaign) and campaign.payload is not None:
        report.assay_payload, campaign.payload = campaign.payload, None
    return report


def _origin(report: pytest.TestReport, meta: dict) -> str:
    """Where a shard was computed, as a line names it: the host's name, and the gateway xdist reached it by
    (``report.node``, on the controller) when that is SSH: hosts may share a name (clones of one image)."""
    spec = getattr(getattr(getattr(report, "node", None), "gateway", None), "spec", None)
    return f"{meta['host']} (ssh={spec.ssh})" if getattr(spec, "ssh", None) else meta["host"]


class Controller:
    """The session's side that owns ``--assay-out``: it stores what every worker's tests send (their records,
    their shards) and merges the sharded items at the end. Without xdist it is the same process."""

    def __init__(self, config: pytest.Config, out: Path):
        self.config = config
        self.store = ResultStore.of(SPEC, SPEC.path(out), _settings(config).keep_history)
        self.shards = ShardStore(out / SHARDS_DIR)
        self.sharded: dict[str, Item] = {}  # item id -> item, for every item a shard was reported of
        # item id -> {(content key, host): the meta of a shard received from there}
        self.origins: dict[str, dict[tuple[str, str], dict]] = {}
        self.lines: list[str] = []

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """A new xdist worker learns which shards are held here, so a remote one does not recompute them."""
        if self.config.getoption("assay_shard_size") is not None:
            node.workerinput["assay_held"] = {name: meta["checks"] for name, meta in self.shards.held().items()}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "assay_payload", None)
        if payload is None:
            return
        for record in payload.get("records", []):
            if self.store.get(self.store.key(record)) != record:  # a remote worker's: not in this file yet
                self.store.put(record)
        if "shard" in payload:
            shard = payload["shard"]
            model, generator, variant, target, checks = shard["item"]
            item = Item(model, generator, variant, target, tuple(checks))
            self.sharded[item.id] = item
            if "data" in shard:
                meta = self.shards.receive(shard).meta
                self.origins.setdefault(item.id, {})[meta["fingerprint"], _origin(report, meta)] = meta

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Merge every item whose shards are all held into results.json (the same records as unsharded)."""
        size = self.config.getoption("assay_shard_size")
        settings = _settings(self.config)
        # host items first: their merged outputs are what the other targets are compared with bit for bit
        for item in sorted(self.sharded.values(), key=lambda item: item.target != HOST):
            records = sharded.merge(item, settings, size, self.shards, self.store)
            if records is None:
                own = content_key(item, load_model(item.model, settings), settings)
                foreign = sorted(((origin, meta) for (key, origin), meta in self.origins.get(item.id, {}).items()
                                  if key != own), key=lambda found: found[0])
                if foreign:
                    self.lines += [f"{item.id}: not merged: {sharded.other_key(own, meta, origin)}"
                                   for origin, meta in foreign]
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
                else:
                    self.lines.append(f"{item.id}: shards missing; run again to complete it (finished shards are kept)")
                continue
            bad = [f"{r['reference']}: {r['verdict']}: {r['cause']}" for r in records if not SPEC.passed(r)]
            self.lines.append(f"{item.id}: {len(split(settings.n_inputs, size))} shards merged"
                              + (f"; {'; '.join(bad)}" if bad else ""))
            if bad and session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.lines:
            terminalreporter.write_sep("-", f"assay: sharded items merged into {self.store.path}")
            for line in self.lines:
                terminalreporter.write_line(line)
