"""The runner's checks before anything trains (test sets, prepared data) and the order it runs in."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import yaml

from adlnmt.errors import UserError
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.results import RESULT_FILE
from adlnmt.experiment.runner import _outcome, check_inputs, plan_runs, prepare_data, running_order, write_spec

from .sample_results import run_result


def grid_at(tmp_path: Path, corpus: Path, vocab_size: int, ref: str = "test.tgt") -> Path:
    files = {f"{split}_{side}": str(corpus / f"{split}.{ext}")
             for split in ("train", "valid") for side, ext in (("src", "src"), ("tgt", "tgt"))}  # fmt: skip
    grid = {
        "name": "g",
        "data": {**files, "vocab_size": vocab_size},
        "test": [{"name": "test", "src": str(corpus / "test.src"), "ref": str(corpus / ref)}],
        "train": {"d_model": 32, "heads": 4},
        "variants": [
            {"name": "a", "preset": "transformer-small"},
            {"name": "b", "preset": "comet-source-markers", "data": {"source_markers": True}},
        ],
    }
    path = tmp_path / f"grid-{vocab_size}.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def test_data_is_prepared_once_per_set_of_options_and_checked(demo_data: Path, tmp_path: Path) -> None:
    grid = load_grid(grid_at(tmp_path, demo_data / "corpus", 150))
    out = tmp_path / "out"
    dirs = prepare_data(grid, out, log=lambda _: None)
    assert dirs == {"default": out / "data" / "default", "source_markers-true": out / "data" / "source_markers-true"}
    manifest = (dirs["default"] / "manifest.json").read_text()
    assert prepare_data(grid, out, log=pytest.fail) == dirs  # reused, not prepared again
    assert (dirs["default"] / "manifest.json").read_text() == manifest
    assert [(run.variant.name, run.seed, run.dir.relative_to(out).as_posix()) for run in plan_runs(grid, out)] == [
        ("a", 1, "runs/a/seed-1"), ("b", 1, "runs/b/seed-1")]  # fmt: skip
    other = load_grid(grid_at(tmp_path, demo_data / "corpus", 120))
    with pytest.raises(UserError, match=r"data/default was prepared with other vocab_size than .*grid-120.yaml"):
        prepare_data(other, out, log=lambda _: None)


def test_data_reached_through_a_link_is_prepared_once(demo_data: Path, tmp_path: Path) -> None:
    (tmp_path / "linked").symlink_to(demo_data / "corpus")
    grid = load_grid(grid_at(tmp_path, tmp_path / "linked", 150))
    dirs = prepare_data(grid, tmp_path / "out", log=lambda _: None)
    assert prepare_data(grid, tmp_path / "out", log=pytest.fail) == dirs  # the manifest's resolved paths match


def test_a_test_set_with_misaligned_files_is_an_error(demo_data: Path, tmp_path: Path) -> None:
    check_inputs(load_grid(grid_at(tmp_path, demo_data / "corpus", 150)))
    (tmp_path / "short.tgt").write_text("one line\n")
    grid = load_grid(grid_at(tmp_path, demo_data / "corpus", 150, ref=str(tmp_path / "short.tgt")))
    with pytest.raises(UserError, match=r"test set 'test': .*test.src has 60 lines but .*short.tgt has 1"):
        check_inputs(grid)


def test_fingerprints_do_not_depend_on_where_the_tree_or_its_data_lies(tmp_path: Path) -> None:
    for name in ("first", "second/deeper"):
        root = tmp_path / name
        root.mkdir(parents=True)
        corpus = root / "corpus" if name == "first" else tmp_path / "elsewhere"  # second: reached through a link
        corpus.mkdir()
        if name != "first":
            (root / "corpus").symlink_to(corpus)
        for file in ("a.src", "a.tgt", "t.src", "t.tgt"):
            (corpus / file).write_text("x\n")
        grid = {"name": "g", "test": [{"name": "t", "src": "corpus/t.src", "ref": "corpus/t.tgt"}],
                "data": {"train_src": "corpus/a.src", "train_tgt": "corpus/a.tgt", "valid_src": "corpus/a.src",
                         "valid_tgt": "corpus/a.tgt"},
                "train": {"d_model": 32, "heads": 4},
                "variants": [{"name": "a", "preset": "transformer-small"}]}  # fmt: skip
        (root / "grid.yaml").write_text(yaml.safe_dump(grid))
    first, second = (plan_runs(load_grid(tmp_path / n / "grid.yaml"), tmp_path / n / "out") for n in
                     ("first", "second/deeper"))  # fmt: skip
    assert [r.fingerprint for r in first] == [r.fingerprint for r in second]
    assert first[0].archive == tmp_path / "first" / "results" / "g" / "runs" / "a" / "seed-1"
    grid["train"]["dropout"] = 0.3
    (tmp_path / "first" / "grid.yaml").write_text(yaml.safe_dump(grid))
    changed = plan_runs(load_grid(tmp_path / "first" / "grid.yaml"), tmp_path / "out")
    assert changed[0].fingerprint != first[0].fingerprint


def test_runs_stopped_part_way_run_first_and_the_rest_seed_by_seed(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    for file in ("a.src", "a.tgt"):
        (tmp_path / "c" / file).write_text("x\n")
    grid = {"name": "g", "seeds": [1, 2], "test": [{"name": "t", "src": "c/a.src", "ref": "c/a.tgt"}],
            "data": {"train_src": "c/a.src", "train_tgt": "c/a.tgt", "valid_src": "c/a.src", "valid_tgt": "c/a.tgt"},
            "train": {"d_model": 32, "heads": 4},
            "variants": [{"name": n, "preset": "transformer-small"} for n in ("a", "b", "c")]}  # fmt: skip
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    runs = plan_runs(load_grid(tmp_path / "grid.yaml"), tmp_path / "out")
    assert [r.label for r in running_order(runs)] == ["a seed 1", "b seed 1", "c seed 1", "a seed 2", "b seed 2",
                                                       "c seed 2"]  # fmt: skip
    for run in (runs[4], runs[1]):
        (run.model_dir / "states").mkdir(parents=True)
        (run.model_dir / "states" / "update-0000200.state.pt").write_bytes(b"")
    (runs[2].model_dir / "checkpoints").mkdir(parents=True)  # weights without a state cannot be resumed
    (runs[2].model_dir / "checkpoints" / "update-0000200.safetensors").write_bytes(b"")
    assert [r.label for r in running_order(runs)] == ["c seed 1", "a seed 2", "a seed 1", "b seed 1", "b seed 2",
                                                       "c seed 2"]  # fmt: skip


def small_grid(tmp_path: Path, **extra: object) -> Path:
    (tmp_path / "c").mkdir(exist_ok=True)
    for file in ("a.src", "a.tgt", "b.src", "b.tgt"):
        (tmp_path / "c" / file).write_text("x\n")
    grid = {"name": "g", "test": [{"name": "t", "src": "c/a.src", "ref": "c/a.tgt"}], "metrics": ["bleu"],
            "data": {"train_src": "c/a.src", "train_tgt": "c/a.tgt", "valid_src": "c/a.src", "valid_tgt": "c/a.tgt"},
            "variants": [{"name": "a", "preset": "transformer-small"}],
            "scales": {"cpu": {"train": {"d_model": 32, "heads": 4, "max_updates": 3000, "patience": 3}}},
            **extra}  # fmt: skip
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(grid))
    return path


def test_an_added_evaluation_keeps_the_fingerprints_and_is_run_by_new_evaluations(tmp_path: Path) -> None:
    before = plan_runs(load_grid(small_grid(tmp_path), "cpu"), tmp_path / "out")
    added = {"since": "2026-11-26", "test": [{"name": "u", "src": "c/b.src", "ref": "c/b.tgt"}], "metrics": ["chrf"]}
    grid = load_grid(small_grid(tmp_path, added_evaluation=added), "cpu")
    after = plan_runs(grid, tmp_path / "out")
    assert [r.fingerprint for r in after] == [r.fingerprint for r in before]  # committed runs stay finished
    assert [t.name for t in grid.tests] == ["t", "u"] and grid.metrics == ("bleu", "chrf")
    write_spec(grid, after[0], tmp_path / "data", "cpu", 1)
    spec = json.loads((after[0].dir / "run.json").read_text())
    assert [t["name"] for t in spec["tests"]] == ["t", "u"] and spec["metrics"] == ["bleu", "chrf"]  # scored on all
    again = {**added, "metrics": ["bleu"]}
    with pytest.raises(UserError, match=r"added_evaluation.metrics: 'bleu' is already in 'metrics'"):
        load_grid(small_grid(tmp_path, added_evaluation=again), "cpu")
    typo = {**added, "since": "2026-13-01"}
    with pytest.raises(UserError, match=r"added_evaluation.since: expected a date \(YYYY-MM-DD\), got '2026-13-01'"):
        load_grid(small_grid(tmp_path, added_evaluation=typo), "cpu")


@pytest.mark.parametrize(("updates", "finished"), [(2800, True), (3000, False)])
def test_a_run_early_stopped_under_an_earlier_cap_stands_one_that_reached_it_does_not(
    tmp_path: Path, updates: int, finished: bool
) -> None:
    old = plan_runs(load_grid(small_grid(tmp_path), "cpu"), tmp_path / "out")[0]
    run_result(fingerprint=old.fingerprint, updates=updates).save(old.archive / RESULT_FILE)
    raw = yaml.safe_load((tmp_path / "grid.yaml").read_text())
    raw["scales"]["cpu"]["train"]["max_updates"] = 6000
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(raw))
    assert plan_runs(load_grid(tmp_path / "grid.yaml", "cpu"), tmp_path / "out")[0].finished_in() is None  # no claim
    raw["scales"]["cpu"]["earlier_max_updates"] = [3000]
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(raw))
    run = plan_runs(load_grid(tmp_path / "grid.yaml", "cpu"), tmp_path / "out")[0]
    assert run.fingerprint != old.fingerprint
    assert (run.finished_in() == run.archive) is finished
    raw["scales"]["cpu"]["earlier_max_updates"] = [6000]
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(UserError, match=r"earlier_max_updates: earlier caps must lie below"):
        load_grid(tmp_path / "grid.yaml", "cpu")


def test_a_worker_a_stop_signal_ends_after_it_wrote_its_result_finished_its_run(tmp_path: Path) -> None:
    """A SIGTERM reaching a worker between its result.json and its exit: the command said "stopped ... checkpointed;
    running the experiment again resumes it" and counted the run among those not finished."""
    run = plan_runs(load_grid(small_grid(tmp_path), "cpu"), tmp_path / "out")[0]
    assert not _outcome(run, -signal.SIGTERM, 1.0).ok  # ended before its result: the next command resumes it
    run_result(fingerprint="0" * 16).save(run.dir / RESULT_FILE)  # another setting's result: not this run's
    assert not _outcome(run, -signal.SIGTERM, 1.0).ok
    result = run_result(fingerprint=run.fingerprint)
    result.save(run.dir / RESULT_FILE)
    (run.dir / result.tests["test"].hypotheses).parent.mkdir()
    (run.dir / result.tests["test"].hypotheses).write_text("x\n")
    outcome = _outcome(run, -signal.SIGTERM, 1.0)
    assert outcome.ok and outcome.result is not None
    assert outcome.stopped  # the signal still stops the command: no further run, distillation or timing
    assert run.finished_in() == run.archive != run.dir  # archived as any finished run
