"""Nonsense numbers are refused the same way by every command, from the ranges declared with the options
(:mod:`adlnmt.bounds`): out of range, nan or inf is a message naming the option and status 2, never a traceback and
never a silent run (``--max-updates -1`` once trained nothing and reported a best checkpoint at update 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from adlnmt.cli import build_parser, main
from adlnmt.errors import UserError
from adlnmt.experiment.schema import Reader
from adlnmt.train import trainer

from .conftest import TINY_MODEL

TRAIN = ["train", "--data", "d", "--model", "m"]
TRANSLATE = ["translate", "--model", "m"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*TRAIN, "--seed", str(2**70)], "argument --seed: must be in [0, 4294967295], got 1180591620717411303424"),
        ([*TRAIN, "--seed", "-1"], "argument --seed: must be in [0, 4294967295], got -1"),
        ([*TRAIN, "--lr", "nan"], "argument --lr: must be a finite number >= 0, got nan"),
        ([*TRAIN, "--max-updates", "-1"], "argument --max-updates: must be >= 0, got -1"),
        ([*TRAIN, "--max-minutes", "-1"], "argument --max-minutes: must be >= 0, got -1"),
        ([*TRAIN, "--threads", "-1"], "argument --threads: must be >= 0, got -1"),
        ([*TRAIN, "--dropout", "inf"], "argument --dropout: must be a finite number in [0, 1), got inf"),
        ([*TRANSLATE, "--batch-size", "0"], "argument --batch-size: must be >= 1, got 0"),
        ([*TRANSLATE, "--max-len-ratio", "-1"], "argument --max-len-ratio: must be >= 0, got -1"),
        ([*TRANSLATE, "--length-penalty", "nan"], "argument --length-penalty: must be a finite number >= 0, got nan"),
        ([*TRANSLATE, "--threads", "-1"], "argument --threads: must be >= 0, got -1"),
        ([*TRANSLATE, "--beam", "0"], "argument --beam: must be >= 1, got 0"),
        (["export", "--model", "m", "--format", "onnx", "--out", "o", "--threads", "-3"],
         "argument --threads: must be >= 0, got -3"),
        (["demo-corpus", "--out", "o", "--seed", "-1"], "argument --seed: must be in [0, 4294967295], got -1"),
        ([*TRAIN, "--seed", "1.5"], "argument --seed: expected an integer, got '1.5'"),
    ],
)  # fmt: skip
def test_nonsense_flags_are_refused_naming_the_flag(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(argv)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (f"seed: {2**70}\n", "option 'seed' must be in [0, 4294967295], got 1180591620717411303424"),
        ("lr: .nan\n", "option 'lr' must be a finite number >= 0, got nan"),
        ("max_updates: -1\n", "option 'max_updates' must be >= 0, got -1"),
        ("max_minutes: -.inf\n", "option 'max_minutes' must be a finite number >= 0, got -inf"),
    ],
)
def test_yaml_values_are_checked_against_the_same_ranges(tmp_path: Path, capsys, yaml_text: str, message: str) -> None:
    """The flags' ranges, the error naming the file and the option as written there (not a flag never given)."""
    options = tmp_path / "options.yaml"
    options.write_text(yaml_text)
    assert main(["train", "--data", "d", "--model", "m", "--config", str(options)]) == 2
    assert f"error: {options}: {message}\n" in capsys.readouterr().err


def test_grid_seeds_take_the_same_range(tmp_path: Path) -> None:
    with pytest.raises(
        UserError, match=r"seeds\[1\]: must be a positive integer of at most 4294967295, got 1180591620717411303424"
    ):
        Reader(tmp_path / "grid.yaml").positive_ints([1, 2**70], "seeds")


def test_a_model_too_large_for_memory_is_an_error(
    demo_data: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The allocator's own refusal (a request for 4 PB, refused at once on any machine, nothing touched) while the
    model is built: a message, not its traceback."""
    monkeypatch.setattr(trainer, "Seq2Seq", lambda config: torch.empty(2**50))
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(tmp_path / "model"), *TINY_MODEL,
            "--max-updates", "1"]  # fmt: skip
    assert main(argv) == 2
    assert "error: the model does not fit in the memory of cpu" in capsys.readouterr().err
