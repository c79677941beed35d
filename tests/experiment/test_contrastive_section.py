"""The grid's contrastive suites: parsed, passed to the worker, and reported by row and distance with intervals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from adlnmt.cli import main
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


@pytest.mark.parametrize(("content", "said"), [(None, "suite.jsonl: file not found"), ("{no json\n", "suite.jsonl:1:")])
def test_a_missing_or_malformed_suite_is_an_error_before_anything_trains(
    tmp_path: Path, content: str | None, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The suite was first read after a run had trained: --dry-run passed, then every run trained and failed."""
    path = grid_with_suite(tmp_path)
    suite_file = tmp_path / "suite.jsonl"
    if content is None:
        suite_file.unlink()
    else:
        suite_file.write_text(content)
    out = tmp_path / "out"
    assert main(["experiment", str(path), "--out", str(out), "--dry-run"]) == 2
    assert f"grid.yaml: contrastive suite 'sva': {suite_file}" in capsys.readouterr().err
    assert main(["experiment", str(path), "--out", str(out), "--threads", "1"]) == 2
    assert said in capsys.readouterr().err and not (out / "data").exists() and not (out / "runs").exists()


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


def test_a_row_that_loses_agreement_over_distance_is_told_from_the_baseline(tmp_path: Path) -> None:
    """200 adjacent and 100 distant items: the baseline is as good far as near; row 'b' drops 30 points far, row 'c'
    has the baseline's outcomes. Their drops, and each against the baseline's, with intervals that tell them apart."""
    distances = [1] * 200 + [3] * 50 + [5] * 50 + [2] * 10
    path = grid_with_suite(tmp_path)
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps({"source": "s", "reference": "r", "contrastive": ["w"],
                                                              "phenomenon": "sva", "distance": d}) + "\n"
                                                  for d in distances))  # fmt: skip
    raw = yaml.safe_load(path.read_text())
    raw["variants"] += [{"name": "b", "preset": "transformer-small"}, {"name": "c", "preset": "transformer-small"}]
    raw["baseline"] = "a"
    path.write_text(yaml.safe_dump(raw))
    grid = load_grid(path)
    rng = np.random.default_rng(3)
    flat = [(rng.random(len(distances)) < 0.9).tolist() for _ in range(2)]
    dropping = [[ok if d < 3 else ok and rng.random() < 0.67 for ok, d in zip(seed, distances, strict=True)]
                for seed in flat]  # fmt: skip
    rows = [Row(name, [run_result(contrastive={"sva": suite(outcome)}) for outcome in outcomes], 2)
            for name, outcomes in (("a", flat), ("b", dropping), ("c", flat))]  # fmt: skip
    text = contrastive_section(grid, rows, tmp_path / "plots")
    assert "All suites pooled: 200 adjacent items (d = 1) and 100 distant ones (d ≥ 3)" in text
    lines = {line.split(" | ")[0][2:]: line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
    drop = lambda cell: [float(v) for v in cell.replace("[", "").replace("]", "").replace(",", "").split()]  # noqa: E731
    a, b = (drop(lines[name][4]) for name in "ab")
    assert abs(a[0]) < 8 and a[1] < 0 < a[2]  # the baseline keeps its accuracy over distance
    assert b[0] > 20 and b[1] > 10  # b loses it
    against_b, against_c = drop(lines["b"][5].rstrip(" |")), drop(lines["c"][5].rstrip(" |"))
    assert against_b[1] > 0 and against_c[0] == 0.0 and against_c[1] < 0 < against_c[2]
    assert lines["a"][5].rstrip(" |") == "–"
