"""Options of the tiny model the training tests train, and two distributed ranks training it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import torch

TINY_MODEL = [
    "--encoder", "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
    "--decoder", "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "--d-model", "32", "--heads", "4", "--batch-tokens", "600", "--threads", "1", "--no-progress",
]  # fmt: skip


def train_two_ranks(launcher: list[str], tmp_path: Path, data: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``ddp_worker.py`` training the tiny model into ``tmp_path/model`` on ``data`` under ``launcher`` (two
    processes: torchrun or srun), one thread each; asserts it succeeded and both ranks ended with identical
    parameters, and returns the finished process."""
    command = [*launcher, str(Path(__file__).with_name("ddp_worker.py")), str(tmp_path), "train", "--data", str(data),
               "--model", str(tmp_path / "model"), *TINY_MODEL, "--lr", "2e-3", "--no-valid-bleu", "--device", "cpu",
               *flags]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    assert rank0.keys() == rank1.keys()
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), name
    return result
