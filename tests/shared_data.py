"""Where the tests find the real Multi30k: ``../shared/data/multi30k`` beside the repository, as the grids name it;
a test that reads it skips cleanly where it is absent (a CI clone)."""

from pathlib import Path

import pytest

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"

needs_multi30k = pytest.mark.skipif(not MULTI30K.is_dir(), reason=f"needs Multi30k at {MULTI30K}")
