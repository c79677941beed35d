"""The SLURM executor's pieces that need no cluster: time limits, the grid's slurm: section and the flags, SLURM's
array ids, and the job passing the warning signal on to its worker as SIGTERM."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from adlnmt.cli import build_parser, main
from adlnmt.errors import UserError
from adlnmt.experiment.commands import slurm_flags_given
from adlnmt.experiment.grid import load_grid
from adlnmt.experiment.slurm import SlurmOptions, _expand, parse_time, slurm_options
from adlnmt.experiment.slurm_job import RunJob


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("90", 90), ("1:30", 2), ("2:00:00", 120), ("1-0", 1440), ("1-2:30", 1590), ("0-0:0:59", 1), ("0:59", 1)],
)
def test_slurm_time_limits_in_minutes(text: str, minutes: int) -> None:
    assert parse_time(text) == minutes


@pytest.mark.parametrize("text", ["", "0", "1h", "1:2:3:4", "-5", "1-"])
def test_bad_time_limits_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


def test_array_ids_as_squeue_and_sacct_list_them() -> None:
    assert _expand("12_[0-2,5%4]") == ["12_0", "12_1", "12_2", "12_5"]
    assert _expand("12_3") == ["12_3"] and _expand("7") == ["7"]


def grid_with(tmp_path: Path, section: object) -> Path:
    path = tmp_path / "grid.yaml"
    grid = {"name": "g", "data": {k: f"{k}.txt" for k in ("train_src", "train_tgt", "valid_src", "valid_tgt")},
            "test": [{"name": "t", "src": "t.src", "ref": "t.ref"}],
            "variants": [{"name": "v", "preset": "transformer"}], "slurm": section}  # fmt: skip
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def options_for(path: Path, *flags: str) -> SlurmOptions:
    args = build_parser().parse_args(["experiment", str(path), *flags])
    return slurm_options(load_grid(path), args)


def test_the_grid_files_slurm_section_and_the_flags_over_it(tmp_path: Path) -> None:
    section = {"partition": "gpu", "time": "4:00:00", "gpus": 1, "cpus": 8, "mem": "32G", "account": "nmt",
               "sbatch": {"constraint": "a100", "exclusive": True}, "setup": ["module load cuda"],
               "signal_delay": 300}  # fmt: skip
    path = grid_with(tmp_path, section)
    assert options_for(path) == SlurmOptions(partition="gpu", time=240, gpus=1, cpus=8, mem="32G", account="nmt",
                                             sbatch={"constraint": "a100", "exclusive": True},
                                             setup=("module load cuda",), signal_delay=300)  # fmt: skip
    flagged = options_for(path, "--partition", "long", "--time", "1-0", "--gpus", "2", "--qos", "high",
                          "--sbatch", "constraint=h100", "--sbatch", "nodelist=n1")  # fmt: skip
    assert (flagged.partition, flagged.time, flagged.gpus, flagged.qos, flagged.cpus) == ("long", 1440, 2, "high", 8)
    assert flagged.sbatch == {"constraint": "h100", "exclusive": True, "nodelist": "n1"}


@pytest.mark.parametrize(
    ("section", "message"),
    [({"partiton": "gpu"}, "slurm.partiton: unknown key (did you mean 'partition'?)"),
     ({"time": "soon"}, "slurm.time: expected minutes or a SLURM time"),
     ({"gpus": "two"}, "slurm.gpus: expected int"),
     ({"setup": "module load cuda"}, "slurm.setup: expected a list of shell lines"),
     ({"cpus": 0}, "cpus must be at least 1")],
)  # fmt: skip
def test_a_bad_slurm_section_names_the_file_and_key(tmp_path: Path, section: dict, message: str) -> None:
    path = grid_with(tmp_path, section)
    with pytest.raises(UserError, match=re.escape(message)):
        options_for(path)


def test_bad_flags_are_refused(tmp_path: Path) -> None:
    path = grid_with(tmp_path, None)
    with pytest.raises(UserError, match="--time expects minutes"):
        options_for(path, "--time", "later")
    with pytest.raises(UserError, match="--sbatch expects OPTION=VALUE"):
        options_for(path, "--sbatch", "=x")
    with pytest.raises(UserError, match="--sbatch 'constraint=b': option constraint given more than once"):
        options_for(path, "--sbatch", "constraint=a", "--sbatch", "constraint=b")  # the first lost, silently


def test_the_warning_signal_reaches_the_worker_as_sigterm(tmp_path: Path) -> None:
    """What submitit calls on the warning signal: the worker gets SIGTERM (the trainer's checkpoint-and-exit path),
    is waited for, and the same run is resubmitted."""
    pytest.importorskip("submitit", reason="submitit is not installed (pip install 'adlnmt[slurm]')")
    marker = tmp_path / "got-sigterm"
    worker = (f"import signal, sys, time, pathlib\n"
              f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(marker)!r}).touch(), sys.exit(143)))\n"
              f"print('ready', flush=True)\ntime.sleep(300)\n")  # fmt: skip
    job = RunJob(threads=1)
    job.process = subprocess.Popen([sys.executable, "-c", worker], stdout=subprocess.PIPE, text=True)
    assert job.process.stdout.readline() == "ready\n"
    again = job.checkpoint(str(tmp_path))
    assert marker.exists() and job.process.returncode == 143
    assert isinstance(again.function, RunJob) and again.function.process is None and again.args == (str(tmp_path),)


class FakeRun:
    """What ``slurm.wait`` asks of a run that never finishes (no result, no training state)."""

    def __init__(self, directory: Path) -> None:
        self.dir, self.label, self.log, self.model_dir = directory, "b seed 1", directory / "log.txt", directory / "m"

    def archive_result(self) -> None:
        pass

    def result(self) -> None:
        return None

    def finished_in(self) -> None:
        return None


@pytest.mark.parametrize(("unreported", "state"), [(3, "FAILED"), (99, "")])
def test_wait_keeps_waiting_for_a_job_slurm_does_not_report_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unreported: int, state: str
) -> None:
    """A job that squeue no longer lists and sacct does not know yet (slurmdbd lags on a busy machine) is not ended:
    ``wait`` asks again and reports its real state; one unknown for UNKNOWN_POLLS polls in a row counts as ended."""
    from adlnmt.experiment import slurm

    (tmp_path / slurm.RECORD).write_text(json.dumps({"job_id": "7_1", "folder": str(tmp_path)}))
    answers = iter([{}] * unreported + [{"7_1": state}] * 10)
    asked: list[int] = []
    monkeypatch.setattr(slurm, "job_states", lambda records: asked.append(1) or next(answers))
    monkeypatch.setattr(slurm, "POLL_SECONDS", 0.0)
    monkeypatch.setattr(slurm, "UNKNOWN_POLLS", 5)
    lines: list[str] = []
    outcomes = slurm.wait([FakeRun(tmp_path)], lines.append)  # type: ignore[list-item]
    assert [outcome.returncode for outcome in outcomes] == [1]
    if state:
        assert len(asked) == unreported + 1 and "failed (job 7_1: FAILED)" in lines[0]
    else:
        assert len(asked) == 5 and "unknown to SLURM" in lines[0]


@pytest.mark.parametrize("flags", [("--wait",), ("--partition", "gpu", "--gpus", "1"), ("--sbatch", "exclusive=1")])
def test_slurm_job_flags_without_the_slurm_executor_are_refused(tmp_path: Path, flags: tuple[str, ...],
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """``--partition gpu --gpus 1`` without ``--executor slurm`` trained every run on this machine, saying nothing."""
    path = grid_with(tmp_path, None)
    assert main(["experiment", str(path), "--dry-run", *flags]) == 2
    given = ", ".join(flag for flag in flags if flag.startswith("--"))
    assert f"error: {given}: SLURM job options, read with --executor slurm only" in capsys.readouterr().err
    args = build_parser().parse_args(["experiment", str(path), "--executor", "slurm", *flags])
    assert slurm_flags_given(args) == [flag for flag in flags if flag.startswith("--")]
