"""The zoo's tiers, apart from ``zoo`` so that the CLI can offer them without importing NumPy and the loaders
(``assay wcet --elf`` starts in a fraction of a second: tests/harness/test_cli.py)."""

TIERS = ("default", "full", "trained", "tiny", "int8")
