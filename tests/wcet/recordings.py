"""Where the recorded real OTAWA runs are: ``shared/otawa`` beside the repository (as CI checks it out)."""

from pathlib import Path

import pytest

OTAWA = Path(__file__).resolve().parents[3] / "shared" / "otawa"
needs_recordings = pytest.mark.skipif(not OTAWA.is_dir(), reason="../shared/otawa (recorded OTAWA runs) not found")
