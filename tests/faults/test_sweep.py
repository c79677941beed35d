"""The long fault sweep (20 random interruption points): every run ends identical to the uninterrupted one."""

from __future__ import annotations

from pathlib import Path

import pytest

from .sweep import sweep


@pytest.mark.slow
def test_twenty_random_interruptions_all_end_identical(demo_data: Path, tmp_path: Path) -> None:
    figures = sweep(demo_data / "data", points=20, seed=1, work=tmp_path)
    assert figures["identical"] == figures["points"] == 20
    assert figures["interrupted"] >= 15  # the moments lie inside the training, so (nearly) all interrupt it


@pytest.mark.slow
def test_an_experiment_interrupted_at_random_loses_no_run_and_repeats_none(demo_data: Path, tmp_path: Path) -> None:
    from .experiment_sweep import sweep as experiment_sweep

    figures = experiment_sweep(demo_data, points=6, seed=1, work=tmp_path)
    assert figures["clean"] == figures["points"] == 6
