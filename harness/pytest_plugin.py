"""Assay's pytest plugin (loaded through the ``pytest11`` entry point).

The campaign *is* a test session: any test that asks for the ``assay_item``
fixture is parametrized over the campaign's items (model x generator x variant
x target), so ``pytest -n 2`` spreads them over cores and JUnit XML comes free.
The ``assay_campaign`` fixture runs an item and writes its records to
``--assay-out``/results.json, under a lock shared by the xdist workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.core.plan import Item
from harness.stages.semantic.run import Settings, plan, run_item
from harness.core.results import ResultStore


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "Assay semantic-preservation campaign")
    group.addoption("--assay-models", default=None,
                    help="comma-separated zoo names or model files (default: the default zoo tier)")
    group.addoption("--assay-generators", default="assay-v2", help="comma-separated generators (default assay-v2)")
    group.addoption("--assay-references", default="keras,onnxruntime", help="comma-separated references")
    group.addoption("--assay-targets", default="host", help="comma-separated target profiles (default host)")
    group.addoption("--assay-inputs", type=int, default=1000, help="test inputs per model (default 1000)")
    group.addoption("--assay-seed", type=int, default=0, help="seed for the test inputs (default 0)")
    group.addoption("--assay-model-seed", type=int, default=0, help="seed for zoo weights (default 0)")
    group.addoption("--assay-out", default=None,
                    help="directory for results.json (default: a temporary directory of the session)")
    group.addoption("--assay-work", default="generated",
                    help="directory for zoo models, generated C and builds (default generated/)")
    group.addoption("--assay-redo", action="store_true", help="recompute items already in results.json")
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
    return Settings(n_inputs=config.getoption("assay_inputs"), seed=config.getoption("assay_seed"),
                    model_seed=config.getoption("assay_model_seed"), work_dir=Path(config.getoption("assay_work")), redo=config.getoption("assay_redo"))


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
    metafunc.parametrize("assay_item", campaign.items, ids=[item.id for item in campaign.items])


@dataclass
class Campaign:
    settings: Settings
    store: ResultStore

    def run(self, item: Item) -> list[dict]:
        return run_item(item, self.settings, self.store)


@pytest.fixture(scope="session")
def assay_campaign(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    out = request.config.getoption("assay_out")
    directory = Path(out) if out else tmp_path_factory.mktemp("assay-campaign")
    return Campaign(_settings(request.config), ResultStore(directory / "results.json"))
