"""DistributedDataParallel on CPU: 2 gloo processes under torchrun end with identical parameters."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from .conftest import TINY_MODEL, train_two_ranks


def test_two_gloo_ranks_train_in_lockstep(demo_data: Path, tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    model = tmp_path / "model"
    result = train_two_ranks([torchrun, "--standalone", "--nproc_per_node", "2"], tmp_path, demo_data / "data",
                             "--max-updates", "30", "--checkpoint-interval", "10", "--log-interval", "10")  # fmt: skip
    log = [json.loads(line) for line in (model / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in log] == [10, 20, 30]  # only rank 0 writes ...
    assert [line.split(" ")[1] for line in result.stderr.splitlines() if line.startswith("update ")] == [
        "10/30", "20/30", "30/30"]  # ... prints progress lines  # fmt: skip
    if importlib.util.find_spec("tensorboard") is not None:  # ... and TensorBoard events
        assert len(list((model / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert log[-1]["train_loss"] < log[0]["train_loss"]


def test_one_process_under_torchrun_runs_the_distributed_path_and_equals_a_plain_run(
    demo_data: Path, tmp_path: Path
) -> None:
    """torchrun with one process: the process group, DDP wrapper and all-reduces run (as on a single GPU with NCCL,
    see tests/cuda), and with one rank the update is the plain update: bit-identical weights."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    options = [*TINY_MODEL, "--max-updates", "20", "--checkpoint-interval", "10", "--lr", "2e-3", "--no-valid-bleu",
               "--device", "cpu", "--deterministic"]  # fmt: skip
    plain = [sys.executable, "-m", "adlnmt", "train", "--data", str(demo_data / "data"), "--model",
             str(tmp_path / "plain"), *options]  # fmt: skip
    worker = str(Path(__file__).with_name("ddp_worker.py"))
    ddp = [torchrun, "--standalone", "--nproc_per_node", "1", worker, str(tmp_path), "train", "--data",
           str(demo_data / "data"), "--model", str(tmp_path / "ddp"), *options]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for command in (plain, ddp):
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "rank0.pt").is_file()  # written by the worker after DDP training
    for name in ("update-0000010.safetensors", "update-0000020.safetensors"):
        a, b = (load_file(tmp_path / run / "checkpoints" / name) for run in ("plain", "ddp"))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
