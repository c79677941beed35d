"""Damaged, malicious or foreign files: one clear error naming the file (exit status 2, no traceback), or, for a
damaged newest checkpoint, a report and the resume from the newest intact one."""

from __future__ import annotations

import errno
import io
import json
import os
import pickle
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from adlnmt.cli import main
from adlnmt.data.prepare import prepare
from adlnmt.errors import UserError
from adlnmt.store.atomic import write_output
from adlnmt.train.lock import DirectoryLock

from .harness import differences, outcome, records, train_argv

UPDATES = 20


def train(data: Path, model: Path, updates: int = UPDATES, *extra: str) -> int:
    return main([*train_argv(data, model, updates), *extra])


@pytest.fixture(scope="module")
def trained(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model trained to update 20 (checkpoints at 10 and 20)."""
    model = tmp_path_factory.mktemp("trained") / "model"
    assert train(demo_data / "data", model) == 0
    return model


@pytest.fixture
def model(trained: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(trained, copy)
    (copy / "train.lock").unlink()
    return copy


def error_of(capsys: pytest.CaptureFixture, status: int) -> str:
    assert status == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_a_damaged_newest_state_is_reported_and_the_older_one_resumed(
    demo_data: Path, trained: Path, model: Path, capsys
) -> None:
    newest = model / "states" / "update-0000020.state.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated
    assert train(demo_data / "data", model) == 0
    err = capsys.readouterr().err
    assert f"warning: {newest}: cannot read the training state" in err and "resuming at update 10" in err
    assert differences(outcome(trained, UPDATES), outcome(model, UPDATES)) == []


def test_a_damaged_newest_weights_file_is_rewritten_from_its_state(
    demo_data: Path, trained: Path, model: Path, capsys
) -> None:
    weights = model / "checkpoints" / "update-0000020.safetensors"
    weights.write_bytes(b"garbage")
    assert train(demo_data / "data", model, 30) == 0
    assert f"{weights}: missing or damaged; rewritten from the training state" in capsys.readouterr().err
    assert [r["update"] for r in records(model)] == [10, 20, 30]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"\x00garbage\xff" * 10, "cannot read the training state"),
        (None, "not a training state (missing or malformed: model, optimizer, schedule, progress, rng_cpu)"),
    ],
)
def test_no_intact_state_is_refused_never_a_restart(
    demo_data: Path, model: Path, capsys, content: bytes | None, reason: str
) -> None:
    for state in (model / "states").iterdir():
        if content is None:
            torch.save({"weights": torch.zeros(2)}, state)  # loads, but the wrong structure
        else:
            state.write_bytes(content)
    message = error_of(capsys, train(demo_data / "data", model))
    assert f"cannot resume: {model / 'states'}" in message and reason in message
    assert [r["update"] for r in records(model)] == [10, 20]  # nothing changed


def test_missing_states_beside_checkpoints_are_refused(demo_data: Path, model: Path, capsys) -> None:
    shutil.rmtree(model / "states")
    best = (model / "best.safetensors").read_bytes()
    message = error_of(capsys, train(demo_data / "data", model))
    assert "cannot resume: it holds checkpoints but no training state" in message and "--model" in message
    assert (model / "best.safetensors").read_bytes() == best


class Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_malicious_state_is_refused_and_runs_nothing(demo_data: Path, model: Path, tmp_path: Path, capsys) -> None:
    marker = tmp_path / "pwned"
    for state in (model / "states").iterdir():
        torch.save({"model": Touch(marker)}, state, pickle_module=pickle)
    message = error_of(capsys, train(demo_data / "data", model))
    assert "refused, it holds objects that would run code" in message
    assert not marker.exists()


def test_a_partial_last_metrics_line_is_dropped_on_resume(demo_data: Path, model: Path, capsys) -> None:
    with open(model / "metrics.jsonl", "a") as handle:
        handle.write('{"update": 30, "epoch": 1, "train_lo')  # a crash or a full disk mid-line
    assert train(demo_data / "data", model, 30) == 0
    assert "partial last line dropped" in capsys.readouterr().err
    assert [r["update"] for r in records(model)] == [10, 20, 30]


def test_a_damaged_config_json_is_a_clear_error_in_train_and_translate(demo_data: Path, model: Path, capsys) -> None:
    config = model / "config.json"
    config.write_text(config.read_text()[:100])
    assert f"{config}: damaged" in error_of(capsys, train(demo_data / "data", model))
    assert f"{config}: damaged" in error_of(capsys, main(["translate", "--model", str(model), "--input", str(config)]))
    config.write_text('{"train": {}, "model": {"layers": 7}}')
    assert f"{config}: malformed model entry" in error_of(capsys, main(["translate", "--model", str(model)]))


@pytest.fixture
def data(demo_data: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(demo_data / "data", copy)
    return copy


SHARD = "train.train.00000"  # the first training shard of a corpus given as --train-src/--train-tgt


def set_manifest(data: Path, **entries: object) -> None:
    manifest = json.loads((data / "manifest.json").read_text())
    (data / "manifest.json").write_text(json.dumps({**manifest, **entries}))


@pytest.mark.parametrize(
    ("damage", "named", "reason"),
    [
        (lambda d: set_manifest(d, splits=7), "manifest.json", "malformed manifest: splits"),
        (lambda d: (d / "manifest.json").write_text('{"format_version": 1, '), "manifest.json", "invalid JSON"),
        (lambda d: (d / "spm.model").unlink(), "spm.model", "sentencepiece model not found"),
        (lambda d: (d / "spm.model").write_bytes(b"junk"), "spm.model", "not a valid sentencepiece model"),
        (lambda d: truncate(d / f"{SHARD}.src.tokens.npy"), f"{SHARD}.src.tokens.npy", "truncated"),
        (lambda d: beyond_vocabulary(d / f"{SHARD}.tgt.tokens.npy"), f"{SHARD}.tgt.tokens.npy", "digest"),
    ],
)
def test_damaged_data_is_one_line_naming_the_file(data: Path, tmp_path: Path, capsys, damage, named, reason) -> None:
    damage(data)
    message = error_of(capsys, train(data, tmp_path / "model"))
    assert named in message and reason in message


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:50])


def beyond_vocabulary(path: Path) -> None:
    tokens = np.load(path)
    tokens[len(tokens) // 2] = 60000
    np.save(path, tokens)


def test_a_carriage_return_inside_a_validation_target_line_trains(demo_data: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(demo_data / "corpus", corpus)
    lines = (corpus / "valid.tgt").read_text().split("\n")
    lines[3] = lines[3].replace(" ", " \r ", 1)
    (corpus / "valid.tgt").write_bytes("\n".join(lines).encode())
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt", tmp_path / "data",
            vocab_size=150)  # fmt: skip
    assert main([*train_argv(tmp_path / "data", tmp_path / "model", 5), "--valid-bleu"]) == 0
    assert "valid_bleu" in records(tmp_path / "model")[0]


def test_a_second_trainer_on_the_same_directory_is_refused(demo_data: Path, model: Path, capsys) -> None:
    lock = DirectoryLock(model)
    try:
        message = error_of(capsys, train(demo_data / "data", model, 30))
    finally:
        lock.release()
    assert f"{model}: another training run (process {os.getpid()}) is using this model directory" in message
    assert [r["update"] for r in records(model)] == [10, 20]


def test_output_to_a_full_device_names_it(monkeypatch) -> None:
    class FullDevice(io.StringIO):
        def flush(self) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sys, "stdout", FullDevice())
    with pytest.raises(UserError) as info:
        write_output(None, "a translation\n")
    assert str(info.value) == "<stdout>: cannot write (No space left on device)"
