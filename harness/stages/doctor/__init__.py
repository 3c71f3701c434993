"""``assay doctor``: the running configuration against the tested one (``harness.core.configuration``,
docs/configuration.md)."""
