"""The grid's contrastive suites: parsed, passed to the worker, and reported by row and distance with intervals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from adlnmt.errors import UserError
from adlnmt.experiment.contrastive import accuracy_interval, contrastive_section
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.rows import Row
from adlnmt.experiment.runner import plan_runs, write_spec

from .sample_results import run_result, suite


def grid_with_suite(tmp_path: Path, **suite: object) -> Path:
    for file in ("a.src", "a.tgt"):
        (tmp_path / file).write_text("x\n")
    items = [{"source": "s", "reference": "r", "contrastive": ["w"], "phenomenon": "sva", "distance": d}
             for d in (1, 1, 1, 4)]  # fmt: skip
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))
    grid = {"name": "g", "test": [{"name": "t", "src": "a.src", "ref": "a.tgt"}],
            "data": {"train_src": "a.src", "train_tgt": "a.tgt", "valid_src": "a.src", "valid_tgt": "a.tgt"},
            "train": {"d_model": 32, "heads": 4}, "variants": [{"name": "a", "preset": "transformer-small"}],
            "contrastive": [{"name": "sva", "suite": "suite.jsonl", **suite}]}  # fmt: skip
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    return tmp_path / "grid.yaml"


def test_a_contrastive_suite_reaches_the_worker_without_changing_fingerprints(tmp_path: Path) -> None:
    grid = load_grid(grid_with_suite(tmp_path, normalize=True))
    assert [(s.name, s.suite.name, s.normalize) for s in grid.contrastive] == [("sva", "suite.jsonl", True)]
    run = plan_runs(grid, tmp_path / "out")[0]
    raw = yaml.safe_load((tmp_path / "grid.yaml").read_text())
    del raw["contrastive"]
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(raw))
    assert plan_runs(load_grid(tmp_path / "grid.yaml"), tmp_path / "out")[0].fingerprint == run.fingerprint
    write_spec(grid, run, tmp_path / "data", "cpu", 1)
    spec = json.loads((run.dir / "run.json").read_text())
    assert spec["contrastive"] == [{"name": "sva", "suite": str(tmp_path / "suite.jsonl"), "normalize": True}]


def test_a_bad_suite_entry_is_an_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"contrastive\[0\]\.normalize"):
        load_grid(grid_with_suite(tmp_path, normalize="yes"))


def test_the_section_gives_accuracy_by_row_and_distance_with_intervals(tmp_path: Path) -> None:
    grid = load_grid(grid_with_suite(tmp_path))
    perfect = run_result(contrastive={"sva": suite([True, True, True, True])})
    half = [run_result(contrastive={"sva": suite([True, False, True, False])}),
            run_result(contrastive={"sva": suite([False, True, True, False])})]  # fmt: skip
    rows = [Row("best", [perfect], 1), Row("mixed", half, 2), Row("unscored", [run_result()], 1)]
    text = contrastive_section(grid, rows, tmp_path / "plots")
    assert "| row | seeds | all | d 1 (3) | d 4 (1) |" in text
    assert "| best | 1 | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] |" in text
    assert "| mixed | 2 | 50.0 [" in text and "| 66.7 [" in text and "| 0.0 [0.0, 0.0] |" in text
    assert "unscored" not in text  # a run evaluated before the suite was added
    assert (tmp_path / "plots" / "contrastive-sva.png").stat().st_size > 0


def test_seed_variance_widens_the_interval() -> None:
    agree = (np.random.default_rng(0).random((1, 400)) < 0.7).astype(float)
    one = accuracy_interval(np.vstack([agree, agree]), np.random.default_rng(1))
    two = accuracy_interval(np.vstack([agree, 1 - agree]), np.random.default_rng(1))  # seeds disagree everywhere
    assert two[2] - two[1] > 2 * (one[2] - one[1])
