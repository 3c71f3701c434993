"""The stages, one package each: ``harness.stages.<name>`` holds the stage's run logic
(``run``), its report writer (``report``) and its CLI command (``command``, with
``add_command(subparsers)``).

Adding a stage is adding a package with a ``command`` module and its line in the
entry-point group ``assay.commands`` of ``pyproject.toml``: the CLI finds it
there (``harness.cli``), with no edit to the CLI. A stage imports the core and the
registries, never another stage (tests/architecture/test_architecture.py checks it).
"""
