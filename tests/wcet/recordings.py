"""Where the recorded real OTAWA runs are: ``tests/wcet/otawa-recordings/``, in the tree (a copy of the workplace's
``shared/otawa``, byte for byte, its README saying how each file was made), so that TOR-WCET-002 holds from a clone
and the package's configuration index covers its data (Assay's commit, or its sources' SHA-256, includes tests/)."""

from pathlib import Path

import pytest

OTAWA = Path(__file__).resolve().parent / "otawa-recordings"
needs_recordings = pytest.mark.skipif(not OTAWA.is_dir(), reason="tests/wcet/otawa-recordings not found")
