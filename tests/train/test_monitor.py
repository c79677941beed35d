"""What a run shows while it trains: a progress line every --log-interval updates when stderr is a file, TensorBoard
scalars, `adlnmt plot`; and a resume that changes such settings (and the checkpoint interval), recorded."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adlnmt.cli import main
from adlnmt.train import monitor
from adlnmt.train.monitor import Interval, progress_line

from .test_trainer import records, train_args

needs_tensorboard = pytest.mark.skipif(
    not monitor.tensorboard_installed(), reason="pip install 'adlnmt[tensorboard]' (in the test extra)"
)


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in ``folder`` as (step, value) pairs, read with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_the_progress_line_has_loss_lr_speed_and_eta() -> None:
    interval = Interval(started=100.0)
    for _ in range(4):
        interval.add(2.0, 500, 0.5)
    interval.add(math.nan, 500, math.nan)  # a skipped update: counted as an update, not in the loss
    summary = interval.summary(now=110.0)  # 5 updates in 10 s: 2 s each
    assert summary == {"loss": 2.0, "tokens_per_s": 200.0, "seconds_per_update": 2.0, "grad_norm": 0.5}
    line = progress_line(200, 800, 3, 1e-3, summary)
    assert line == "update 200/800 (25 %) epoch 3: loss 2.000 lr 1.00e-03 |g| 0.50 200 tok/s ETA 20m00s"
    assert progress_line(200, 0, 3, 1e-3, summary).endswith("200 tok/s")  # no limit, no ETA
    assert progress_line(7000, 9000, 1, 1e-3, summary).endswith("ETA 1h06m")


@needs_tensorboard
def test_lines_every_interval_on_a_file_and_tensorboard_events(demo_data: Path, tmp_path: Path) -> None:
    """`adlnmt train ... 2> log`: not a terminal, so no bar, but a line every --log-interval updates."""
    model, board = tmp_path / "m", tmp_path / "board"
    argv = train_args(demo_data / "data", model, "--max-updates", "20", "--checkpoint-interval", "10",
                      "--log-interval", "5", "--tensorboard", str(board), "--progress")  # fmt: skip
    with open(tmp_path / "log", "w") as log:
        subprocess.run([sys.executable, "-m", "adlnmt", *argv], stderr=log, check=True)
    text = (tmp_path / "log").read_text()
    lines = re.findall(r"^update (\d+)/20 \(\d+ %\) epoch \d+: loss [\d.]+ lr [\d.e+-]+ \|g\| [\d.]+ [\d,]+ tok/s "
                       r"ETA \d+m\d\ds$", text, re.MULTILINE)  # fmt: skip
    assert lines == ["5", "10", "15", "20"], text
    assert "\r" not in text  # no progress bar on a file
    found = scalars(board)
    assert [step for step, _ in found["train/loss"]] == [5, 10, 15, 20]
    assert {"train/lr", "train/grad_norm", "train/tokens_per_s"} <= found.keys()
    assert [step for step, _ in found["valid/perplexity"]] == [10, 20]
    assert [value for _, value in found["valid/bleu"]] == pytest.approx([r["valid_bleu"] for r in records(model)])
    assert not (model / "tensorboard").exists()  # written where asked


@needs_tensorboard
def test_tensorboard_is_on_in_the_model_directory_by_default_and_can_be_off(demo_data: Path, tmp_path: Path) -> None:
    common = ["--max-updates", "4", "--checkpoint-interval", "4", "--no-valid-bleu", "--log-interval", "2"]
    assert main(train_args(demo_data / "data", tmp_path / "on", *common)) == 0
    assert [step for step, _ in scalars(tmp_path / "on" / "tensorboard")["train/loss"]] == [2, 4]
    assert main(train_args(demo_data / "data", tmp_path / "off", *common, "--tensorboard", "off")) == 0
    assert not (tmp_path / "off" / "tensorboard").exists()


def test_an_explicit_tensorboard_folder_without_the_package_is_a_clear_error(
    demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(monitor, "tensorboard_installed", lambda: False)
    assert monitor.tensorboard_dir("auto", tmp_path) is None  # the default: quietly nothing
    argv = train_args(demo_data / "data", tmp_path / "m", "--max-updates", "2", "--tensorboard", str(tmp_path / "b"))
    assert main(argv) == 2
    assert "pip install 'adlnmt[tensorboard]'" in capsys.readouterr().err


def test_a_resume_may_change_the_checkpoint_interval_and_records_it(
    demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "m"
    common = ["--no-valid-bleu", "--tensorboard", "off"]
    assert (
        main(train_args(demo_data / "data", model, "--max-updates", "10", "--checkpoint-interval", "5", *common)) == 0
    )
    argv = train_args(demo_data / "data", model, "--max-updates", "20", "--checkpoint-interval", "10",
                      "--log-interval", "0", "--patience", "3", *common)  # fmt: skip
    assert main(argv) == 0
    log = records(model)
    assert [r["update"] for r in log] == [5, 10, 20]
    changed = {
        "checkpoint_interval": {"before": 5, "now": 10},
        "log_interval": {"before": 100, "now": 0},
        "max_updates": {"before": 10, "now": 20},
        "patience": {"before": 16, "now": 3},
    }
    assert log[2]["changed_settings"] == changed and all("changed_settings" not in r for r in log[:2])
    stored = json.loads((model / "config.json").read_text())
    assert stored["changed_settings"] == [{"update": 10, "changed": changed}]
    assert stored["train"]["checkpoint_interval"] == 10
    # Resuming unchanged records nothing more; a setting that changes the model is still refused.
    assert main(argv) == 0
    assert json.loads((model / "config.json").read_text())["changed_settings"] == [{"update": 10, "changed": changed}]
    assert main([*argv, "--lr", "1.0"]) == 2
    assert "different settings (lr)" in capsys.readouterr().err


def test_a_change_made_by_a_session_that_saved_no_checkpoint_reaches_metrics_with_the_next(
    demo_data: Path, tmp_path: Path
) -> None:
    model = tmp_path / "m"
    common = ["--no-valid-bleu", "--tensorboard", "off"]
    first = train_args(demo_data / "data", model, "--max-updates", "10", "--checkpoint-interval", "5", *common)
    assert main(first) == 0
    # a session that changes the interval and ends at once (its max updates already reached): no checkpoint
    assert main(train_args(demo_data / "data", model, "--max-updates", "10", "--checkpoint-interval", "10",
                           "--patience", "3", *common)) == 0  # fmt: skip
    assert [r["update"] for r in records(model)] == [5, 10]
    # the next session changes the patience back and the max updates: what it and the one before changed, net
    assert main(train_args(demo_data / "data", model, "--max-updates", "20", "--checkpoint-interval", "10",
                           *common)) == 0  # fmt: skip
    changed = {"checkpoint_interval": {"before": 5, "now": 10}, "max_updates": {"before": 10, "now": 20}}
    assert records(model)[-1]["update"] == 20 and records(model)[-1]["changed_settings"] == changed
    assert json.loads((model / "config.json").read_text())["changed_settings"] == [{"update": 10, "changed": changed}]


def test_the_guide_lists_every_setting_a_resume_may_change() -> None:
    """docs/training.md's list left out --compile, which a resume may change."""
    from adlnmt.train.model_dir import RESUMABLE_CHANGES

    guide = (Path(__file__).parents[2] / "docs" / "training.md").read_text()
    paragraph = guide.split("**Changing settings on resume.**")[1].split("Any other change is refused")[0]
    listed = set(re.findall(r"`--([a-z-]+)`", paragraph))
    assert listed == {name.replace("_", "-") for name in RESUMABLE_CHANGES}


def test_plot_draws_the_curves_of_several_runs(demo_data: Path, tmp_path: Path, capsys) -> None:
    common = ["--max-updates", "6", "--checkpoint-interval", "3", "--tensorboard", "off", "--log-interval", "0"]
    for name, lr in (("a", "1e-3"), ("b", "2e-3")):
        assert main(train_args(demo_data / "data", tmp_path / name, *common, "--lr", lr)) == 0
    out = tmp_path / "curves.png"
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and out.stat().st_size > 10_000
    assert "curves of 2 run(s) written to" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["plot", str(tmp_path / "empty"), "--out", str(out)]) == 2
    empty = tmp_path / "empty" / "metrics.jsonl"
    said = capsys.readouterr().err
    assert f"empty: no checkpoint record to plot ({empty}: metrics.jsonl is missing or empty)" in said
    empty.write_text('{"update": 3, "train_lo')  # its only line damaged: said as such, not "missing or empty"
    assert main(["plot", str(tmp_path / "empty"), "--out", str(out)]) == 2
    assert f'({empty}:1: partial last line dropped (\'{{"update": 3, "train_lo\'))' in capsys.readouterr().err


def test_plot_names_a_directory_in_place_of_the_log(tmp_path: Path, capsys) -> None:
    """A directory named metrics.jsonl was said to be 'missing or empty'."""
    (tmp_path / "m" / "metrics.jsonl").mkdir(parents=True)
    assert main(["plot", str(tmp_path / "m"), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'm' / 'metrics.jsonl'}: a directory, not a file of checkpoint records\n"
    assert not (tmp_path / "c.png").exists()


def test_plot_checks_its_file_name_before_drawing(demo_data: Path, tmp_path: Path, capsys) -> None:
    """Issue 69 point 11: an unknown suffix was a matplotlib traceback; a name without suffix or a directory wrote
    NAME.png but reported NAME."""
    common = ["--max-updates", "3", "--checkpoint-interval", "3", "--tensorboard", "off", "--log-interval", "0"]
    assert main(train_args(demo_data / "data", tmp_path / "a", *common)) == 0
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "a"), "--out", str(tmp_path / "c.xyz")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'c.xyz'}: cannot draw a figure as '.xyz'; use one of" in err and ".png" in err
    assert not (tmp_path / "c.xyz").exists() and "Traceback" not in err
    assert main(["plot", str(tmp_path / "a"), "--out", str(tmp_path)]) == 2
    assert f"{tmp_path}: is a directory" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "a"), "--out", f"{tmp_path / 'plots'}/"]) == 2  # wrote plots.png
    assert f"{tmp_path / 'plots'}/: is a directory" in capsys.readouterr().err
    assert not (tmp_path / "plots.png").exists()
    assert main(["plot", str(tmp_path / "a"), "--out", str(tmp_path / "curves")]) == 0
    assert f"written to {tmp_path / 'curves.png'}\n" in capsys.readouterr().err
    assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")
    assert main(["plot", str(tmp_path / "a"), "--out", str(tmp_path / "curves.svg")]) == 0
    assert b"<svg" in (tmp_path / "curves.svg").read_bytes()[:1000]


@needs_tensorboard
def test_a_full_disk_under_tensorboard_is_one_warning_naming_the_folder(
    demo_data: Path, tmp_path: Path, monkeypatch, capfd
) -> None:
    """Issue 69 point 7: the event writer's thread printed a traceback, then the run died with
    ``error: : No space left on device`` (no file named)."""
    import errno
    import os

    from tensorboard.summary.writer import record_writer

    def full_disk(self, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(record_writer.RecordWriter, "write", full_disk)
    board = tmp_path / "board"
    argv = train_args(demo_data / "data", tmp_path / "model", "--max-updates", "4", "--checkpoint-interval", "2",
                      "--log-interval", "1", "--tensorboard", str(board))  # fmt: skip
    assert main(argv) == 0  # the scalars are a view: the run goes on
    err = capfd.readouterr().err
    warning = f"warning: {board}: cannot write TensorBoard events (No space left on device); training goes on"
    assert err.count(warning) == 1 and "Traceback" not in err and "Exception in thread" not in err
    assert len(records(tmp_path / "model")) == 2
