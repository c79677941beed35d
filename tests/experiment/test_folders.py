"""One folder per grid: a tiny grid run from one directory resumes, reports and trains from any other; its
.gitignore leaves exactly the archive to commit; the two folders of earlier versions are found and kept."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.experiment.folders import BEFORE_SPEED, GITIGNORE, GRID_COPY, Folders, claim, output_folders
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.speed import SPEED_FILE

from .test_experiment import experiment
from .test_runner import small_grid

REPORT = {".gitignore", GRID_COPY, "report.md", "results.md", "results.csv", "runs.csv"}


def tiny_grid(root: Path) -> Path:
    """One variant, two seeds, every path relative to the grid file."""
    files = {f"{split}_{side}": f"corpus/{split}.{side}" for split in ("train", "valid") for side in ("src", "tgt")}
    grid = {
        "name": "tiny",
        "data": {**files, "vocab_size": 150},
        "test": [{"name": "test", "src": "corpus/test.src", "ref": "corpus/test.tgt"}],
        "metrics": ["bleu"],
        "seeds": [1, 2],
        "translate": {"beam": 1},
        "train": {"d_model": 32, "heads": 4, "batch_tokens": 600, "max_updates": 4, "checkpoint_interval": 2,
                  "valid_bleu": False},
        "variants": [{"name": "a", "preset": "transformer-small"}],
    }  # fmt: skip
    path = root / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def grid_run(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """Seed 1 run from the grid's directory, seed 2 from another one (``../project/grid.yaml``)."""
    base = tmp_path_factory.mktemp("folders")
    root, elsewhere = base / "project", base / "elsewhere"
    shutil.copytree(demo_data / "corpus", root / "corpus")
    tiny_grid(root)
    elsewhere.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        first = experiment("grid.yaml", "--threads", "1", "--seeds", "1")
        patch.chdir(elsewhere)
        second = experiment("../project/grid.yaml", "--threads", "1")
    return SimpleNamespace(root=root, elsewhere=elsewhere, folder=root / "results" / "tiny", first=first, second=second)


def test_everything_of_a_grid_is_in_one_folder(grid_run: SimpleNamespace) -> None:
    assert grid_run.first[0] == 0 and grid_run.second[0] == 0, grid_run.first[1] + grid_run.second[1]
    folder = grid_run.folder
    assert sorted(p.name for p in grid_run.root.iterdir()) == ["corpus", "grid.yaml", "results"]
    assert list(grid_run.elsewhere.iterdir()) == []  # nothing written relative to the directory it ran from
    assert {p.name for p in folder.iterdir()} >= REPORT and (folder / "data" / "default").is_dir()
    for seed in (1, 2):
        run = folder / "runs" / "a" / f"seed-{seed}"
        assert (run / "result.json").is_file() and (run / "hyp" / "test.txt").is_file()
        assert any((run / "model").glob("*.safetensors")) and (run / "log.txt").is_file()


def test_a_grid_resumes_from_another_directory(grid_run: SimpleNamespace) -> None:
    stdout = grid_run.second[1]
    assert "2 runs, 1 finished (skipped), 1 to run" in stdout
    assert "preparing" not in stdout  # the data prepared by the first command
    assert f"output {grid_run.folder}" in stdout


def test_every_written_config_holds_absolute_paths(grid_run: SimpleNamespace) -> None:
    run = grid_run.folder / "runs" / "a" / "seed-1"
    options = yaml.safe_load((run / "train.yaml").read_text(encoding="utf-8"))
    assert options["data"] == str(grid_run.folder / "data" / "default") and options["model"] == str(run / "model")
    spec = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert [test["src"] for test in spec["tests"]] == [str(grid_run.root / "corpus" / "test.src")]
    assert all(Path(test["ref"]).is_absolute() for test in spec["tests"])
    manifest = json.loads((grid_run.folder / "data" / "default" / "manifest.json").read_text(encoding="utf-8"))
    assert all(Path(path).is_absolute() for path in manifest["inputs"].values())


def test_a_run_trains_on_with_its_train_yaml_from_any_directory(
    grid_run: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = grid_run.folder / "runs" / "a" / "seed-1"
    monkeypatch.chdir(grid_run.elsewhere)
    assert main(["train", "--config", os.path.relpath(run / "train.yaml"), "--max-updates", "6"]) == 0
    records = [json.loads(line) for line in (run / "model" / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in records if "valid_ppl" in r] == [2, 4, 6]  # resumed at 4 on the grid's data


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_folder_commits_its_archive_and_not_the_weights(grid_run: SimpleNamespace, tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    shutil.copytree(grid_run.folder, folder)
    (folder / "runs" / "a" / "seed-1" / SPEED_FILE).write_text("{}", encoding="utf-8")  # a speed: section's record
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    listed = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
    files = {line.removeprefix("?? ") for line in listed}
    runs = {f"runs/a/seed-{seed}/{name}" for seed in (1, 2) for name in ("result.json", "hyp/test.txt")}
    runs.add(f"runs/a/seed-1/{SPEED_FILE}")
    assert files - {f for f in files if f.startswith("plots/") or f.startswith("claims.")} == REPORT | runs


def test_the_two_folders_of_earlier_versions_are_kept(grid_run: SimpleNamespace, tmp_path: Path) -> None:
    """A grid begun before one folder per grid: runs in runs/NAME (one stopped part-way), archive in results/NAME."""
    root = tmp_path / "project"
    shutil.copytree(grid_run.root, root, ignore=shutil.ignore_patterns("results"))
    shutil.copytree(grid_run.folder, root / "runs" / "tiny", ignore=shutil.ignore_patterns(".gitignore"))
    (root / "runs" / "tiny" / "runs" / "a" / "seed-2" / "result.json").unlink()  # stopped after its training
    (root / "runs" / "tiny" / "runs" / "a" / "seed-2" / "trained.json").unlink()
    status, stdout = experiment(str(root / "grid.yaml"), "--dry-run")
    assert status == 0 and "two folders, as before one folder per grid" in stdout
    assert f"output {root / 'runs' / 'tiny'}, archive and report {root / 'results' / 'tiny'}" in stdout
    assert "seed 1 finished, seed 2 started (resumes at update 4)" in stdout
    status, stdout = experiment(str(root / "grid.yaml"), "--report-only")  # archives seed 1 where it was
    assert status == 0 and (root / "results" / "tiny" / "runs" / "a" / "seed-1" / "result.json").is_file()
    assert not (root / "results" / "tiny" / "runs" / "a" / "seed-1" / "model").exists()
    shutil.rmtree(root / "runs")  # a fresh clone of a committed two-folder archive still trains apart from it
    folders = output_folders(load_grid(root / "grid.yaml"))
    assert (folders.work, folders.archive) == (root / "runs" / "tiny", root / "results" / "tiny")


def test_a_report_of_a_grid_never_run_makes_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    tiny_grid(tmp_path)
    status, _ = experiment("grid.yaml", "--report-only")
    assert status != 0 and "no finished run of this experiment" in capsys.readouterr().err
    assert not (tmp_path / "results").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("flag", "doing"), [("--retime", "time again"), ("--score-added", "score on the added")])
def test_retiming_or_scoring_a_grid_never_run_makes_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, doing: str
) -> None:
    """Nothing finished, nothing to do: the --out folder was made (grid.yaml, .gitignore, the lock) all the same."""
    status, _ = experiment(str(tiny_grid(tmp_path)), "--out", str(tmp_path / "out"), flag)
    assert status == 2 and f"none of the selected runs has finished: nothing to {doing}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_which_folders_a_grid_gets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    grid = load_grid(small_grid(tmp_path).relative_to(tmp_path), "cpu")
    folder = tmp_path / "results" / "g-cpu"
    found = output_folders(grid)
    assert (found.work, found.archive, found.one, found.note) == (folder, folder, True, "")
    assert output_folders(grid, "out").work == tmp_path / "out" == output_folders(grid, "out").archive
    explicit = output_folders(grid, "out", "archive")
    assert (explicit.work, explicit.archive, explicit.note) == (tmp_path / "out", tmp_path / "archive", "")
    elsewhere = output_folders(grid, None, "archive")  # the archive and report apart from the data and weights
    assert (elsewhere.work, elsewhere.archive) == (folder, tmp_path / "archive")
    (tmp_path / "runs" / "g-cpu").mkdir(parents=True)  # the runs folder of earlier versions
    assert output_folders(grid).work == tmp_path / "runs" / "g-cpu" != output_folders(grid).archive
    folder.mkdir(parents=True)
    (folder / GRID_COPY).write_text("")  # ... but this folder is the grid's own
    assert output_folders(grid).one


@pytest.mark.parametrize(
    ("out", "results", "refused"),
    [
        ("", None, "--out '': an empty folder (an unset shell variable?)"),  # was the current directory
        (None, " ", "--results ' ': an empty folder"),  # was the default folder
        ("out", "", "--results '': an empty folder"),  # was --out
        ("a-file", None, "is a file, not a folder"),
        ("out", "a-file/archive", "is a file, not a folder"),
    ],
)
def test_an_empty_out_or_results_or_one_a_file_blocks_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str | None, results: str | None, refused: str
) -> None:
    """``--out "$UNSET"`` made the current directory the grid's folder (grid.yaml, .gitignore, data/, runs/ there)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("mine\n")
    grid = load_grid(small_grid(tmp_path).relative_to(tmp_path), "cpu")
    with pytest.raises(UserError, match=re.escape(refused)):
        output_folders(grid, out, results)


def test_a_tensorboard_folder_of_a_grid_is_relative_to_it(tmp_path: Path) -> None:
    grid = load_grid(small_grid(tmp_path, train={"tensorboard": "tb"}), "cpu")
    assert grid.variants[0].train["tensorboard"] == str(tmp_path / "tb")
    off = load_grid(small_grid(tmp_path, train={"tensorboard": "off"}), "cpu")
    assert off.variants[0].train["tensorboard"] == "off"


def test_a_gitignore_of_an_earlier_version_is_brought_up_to_date_and_a_users_is_kept(tmp_path: Path) -> None:
    grid = load_grid(tiny_grid(tmp_path))
    for earlier, after in ((BEFORE_SPEED, GITIGNORE), ("/data/\n", "/data/\n")):
        folder = tmp_path / "out"
        folder.mkdir(exist_ok=True)
        (folder / ".gitignore").write_text(earlier, encoding="utf-8")
        claim(Folders(folder, folder), grid)
        assert (folder / ".gitignore").read_text(encoding="utf-8") == after
