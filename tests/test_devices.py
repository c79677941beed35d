"""Hostile ``--device`` values (issue 69 point 5): every command that loads a model checks the device first, with
one check (:func:`adlnmt.devices.checked_device`): one message, exit 2, never an AssertionError or RuntimeError
traceback. The commands are given a model directory that does not exist: the device is refused before it is read."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from adlnmt.analysis.contrastive import write_suite
from adlnmt.analysis.demo_suite import demo_suite
from adlnmt.cli import main
from adlnmt.devices import checked_device
from adlnmt.errors import UserError

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


@pytest.mark.parametrize(
    "name, message",
    [("tpu", "not a device"), ("x y", "not a device"), ("mps", "runs on cpu or cuda, not mps"), ("meta", "not meta")],
)
def test_a_device_adlnmt_does_not_run_on_is_refused(name: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        checked_device(name)


@NO_CUDA
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_cuda_without_cuda_is_refused(name: str) -> None:
    with pytest.raises(UserError, match=f"--device {name}: CUDA is not available on this machine"):
        checked_device(name)


def test_the_cpu_and_auto_pass() -> None:
    assert checked_device("cpu") == "cpu"
    assert checked_device("auto") in ("cpu", "cuda")


@NO_CUDA
@pytest.mark.parametrize("device", ["cuda", "tpu"])
@pytest.mark.parametrize(
    "command",
    [
        ["translate", "--model", "M"],
        ["translate", "--model", "M", "--model", "M"],  # an ensemble
        ["score-pairs", "--model", "M", "--source", "S", "--target", "S"],
        ["contrastive", "--model", "M", "--suite", "Q"],
    ],
)
def test_every_command_refuses_the_device_in_one_message(
    command: list[str], device: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    source = tmp_path / "s.txt"
    source.write_text("a b c\n", encoding="utf-8")
    monkeypatch.setattr("sys.stdin", open(source, encoding="utf-8"))  # noqa: SIM115 (closed by pytest)
    write_suite(demo_suite(size=40), tmp_path / "suite.jsonl")
    files = {"M": tmp_path / "no-model", "S": source, "Q": tmp_path / "suite.jsonl"}
    argv = [str(files[arg]) if arg in files else arg for arg in command]
    assert main([*argv, "--device", device]) == 2
    err = capsys.readouterr().err
    shown = device if device == "cuda" else repr(device)
    assert err.startswith(f"error: --device {shown}: ") and "Traceback" not in err


@pytest.mark.parametrize(
    "command",
    [
        ["translate", "--model", "M", "--threads", "100000"],  # PyTorch segfaulted
        ["translate", "--model", "M", "--workers", "100000"],  # one process per batch
        ["export", "--model", "M", "--format", "onnx", "--out", "O", "--threads", "100000"],
        ["prepare", "--train-src", "M", "--train-tgt", "M", "--out", "O", "--workers", "100000"],  # 100,000 processes
    ],
)
def test_more_threads_or_workers_than_cores_are_refused(command: list[str], tmp_path: Path, capsys) -> None:
    import os

    files = {"M": tmp_path / "no-model", "O": tmp_path / "out"}
    argv = [str(files[arg]) if arg in files else arg for arg in command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    flag = command[command.index("100000") - 1]
    cores = os.cpu_count()
    assert err == f"error: {flag} 100000: this machine has {cores} CPU core(s); use at most {cores}\n"
