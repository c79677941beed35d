"""The long fault sweep (20 random interruption points): every run ends identical to the uninterrupted one."""

from __future__ import annotations

from pathlib import Path

import pytest

from .sweep import sweep


@pytest.mark.slow
def test_twenty_random_interruptions_all_end_identical(demo_data: Path, tmp_path: Path) -> None:
    figures = sweep(demo_data / "data", points=20, seed=1, work=tmp_path)
    assert figures["identical"] == figures["points"] == 20
