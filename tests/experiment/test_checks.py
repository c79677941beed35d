"""``--dry-run`` checks every input file the grid reads; it and a report list the results they could not read."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from adlnmt.cli import main
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.runner import plan_runs

from .test_runner import grid_at


def test_dry_run_checks_every_input_file(demo_data: Path, tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(demo_data / "corpus", corpus)
    grid = grid_at(tmp_path, corpus, 150)
    assert main(["experiment", str(grid), "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    (corpus / "test.tgt").unlink()
    (corpus / "valid.src").unlink()
    capsys.readouterr()
    assert main(["experiment", str(grid), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{grid}: 2 input(s) cannot be read:" in err
    assert f"{corpus / 'test.tgt'} (test 'test' ref): not found" in err
    assert f"{corpus / 'valid.src'} (data.valid_src): not found" in err
    assert not (tmp_path / "out").exists()


def test_a_prepared_data_directory_is_checked_too(demo_data: Path, tmp_path: Path, capsys) -> None:
    grid = grid_at(tmp_path, demo_data / "corpus", 150)
    raw = yaml.safe_load(grid.read_text())
    raw["data"] = str(tmp_path / "nowhere")
    raw["variants"] = raw["variants"][:1]
    grid.write_text(yaml.safe_dump(raw))
    assert main(["experiment", str(grid), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    assert f"{tmp_path / 'nowhere'}: data directory not found" in capsys.readouterr().err


def test_the_report_lists_the_results_it_could_not_read(demo_data: Path, tmp_path: Path, capsys) -> None:
    grid_path = grid_at(tmp_path, demo_data / "corpus", 150)
    out = tmp_path / "out"
    runs = plan_runs(load_grid(grid_path), out, out)  # as with --out: the archive is the output directory
    damaged, wrong = runs[0].archive / "result.json", runs[1].dir / "result.json"
    for path, text in ((damaged, '{"fingerprint": '), (wrong, "[1, 2]")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    reason = "unreadable (invalid JSON: Expecting value at line 1 column 17)"
    for mode, status in (("--report-only", 2), ("--dry-run", 0)):  # --dry-run said "new", nothing about the file
        assert main(["experiment", str(grid_path), "--out", str(out), mode]) == status  # nothing finished
        stdout = capsys.readouterr().out
        assert f"warning: {runs[0].label}: {damaged}: {reason}: counted as not finished" in stdout
        assert f"warning: {runs[1].label}: {wrong}: not a run's result (not a JSON object)" in stdout
        assert stdout.count("warning:") == 2
