"""Training on CUDA: bf16/fp16 autocast (fp16 with the loss scaler), exact resume after kill -9 with deterministic
kernels, NCCL DistributedDataParallel under torchrun on one GPU, and one read of the device per update."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from adlnmt.cli import main
from adlnmt.speedups import SPEEDUPS
from train.conftest import TINY_MODEL

from .conftest import CUDA

pytestmark = CUDA
COMMON = [*TINY_MODEL, "--device", "cuda", "--checkpoint-interval", "10", "--no-valid-bleu", "--lr", "2e-3"]
SRC = Path(__file__).resolve().parents[2] / "src"


def train_argv(data: Path, model: Path, updates: int, *extra: str) -> list[str]:
    return ["train", "--data", str(data), "--model", str(model), "--max-updates", str(updates), *COMMON, *extra]


def records(model: Path) -> list[dict]:
    return [json.loads(line) for line in (model / "metrics.jsonl").read_text().splitlines()]


def weights(model: Path, update: int) -> dict[str, torch.Tensor]:
    return load_file(model / "checkpoints" / f"update-{update:07d}.safetensors")


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def subprocess_env(hook: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    env.pop("ADLNMT_FAULT_HOOK", None)
    return {**env, "ADLNMT_FAULT_HOOK": hook} if hook else env


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_training_on_cuda_lowers_the_loss(demo_data: Path, tmp_path: Path, precision: str) -> None:
    model = tmp_path / precision
    assert main(train_argv(demo_data / "data", model, 40, "--precision", precision)) == 0
    log = records(model)
    assert [r["update"] for r in log] == [10, 20, 30, 40]
    assert all(torch.isfinite(torch.tensor(r["train_loss"])) for r in log)
    assert log[-1]["train_loss"] < log[0]["train_loss"] and log[-1]["valid_ppl"] < log[0]["valid_ppl"]
    state = torch.load(model / "states" / "update-0000040.state.pt", weights_only=True)
    if precision == "fp16":  # the loss scaler ran and its scale is part of the state
        assert state["scaler"]["scale"] > 0
    assert state["progress"]["skipped_updates"] <= 2


def test_kill_9_then_resume_on_cuda_equals_an_uninterrupted_run(demo_data: Path, tmp_path: Path) -> None:
    data = demo_data / "data"
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert main(train_argv(data, straight, 40, "--deterministic")) == 0
    command = [sys.executable, "-m", "adlnmt", *train_argv(data, killed, 40, "--deterministic")]
    hook = "kill@update-0000020.state.pt:replaced"  # right after the state of update 20 is committed
    first = subprocess.run(command, env=subprocess_env(hook), capture_output=True, text=True, timeout=600, check=False)
    assert first.returncode == -9, first.stderr[-2000:]
    resumed = subprocess.run(command, env=subprocess_env(), capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming at update 20" in resumed.stderr
    assert_same_weights(weights(straight, 40), weights(killed, 40))
    assert [r["train_loss"] for r in records(killed)] == [r["train_loss"] for r in records(straight)]


def test_nccl_ddp_under_torchrun_equals_a_plain_run(demo_data: Path, tmp_path: Path) -> None:
    """One process under torchrun runs the whole distributed path (NCCL process group, DDP wrapper, all-reduces);
    with one rank its update is the plain update, so the weights must be bit-identical."""
    data = demo_data / "data"
    assert main(train_argv(data, tmp_path / "plain", 20, "--deterministic")) == 0
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    command = [torchrun, "--standalone", "--nproc_per_node", "1", "-m", "adlnmt",
               *train_argv(data, tmp_path / "ddp", 20, "--deterministic")]  # fmt: skip
    result = subprocess.run(command, env=subprocess_env(), capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_weights(weights(tmp_path / "plain", 20), weights(tmp_path / "ddp", 20))


@pytest.mark.parametrize("chunk_mib", [0, 256])  # the fused loss in 1,024-row chunks (as on a CPU); in one chunk
@pytest.mark.parametrize(("precision", "allowed"), [("fp32", 1), ("bf16", 1), ("fp16", 2)])
def test_an_update_reads_the_device_once(demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         precision: str, allowed: int, chunk_mib: int) -> None:  # fmt: skip
    """Every read of a GPU tensor waits for the device, and the host then has no queued work to run ahead of it. An
    update (batches copied in, forward, the fused loss over several chunks, backward, clipping, Adam) reads the device
    once: loss, tokens, finite check and gradient norm together; fp16's loss scaler reads its overflow check once
    more."""
    from adlnmt.train.trainer import Trainer

    original, counts = Trainer._update, []

    def counted(self: Trainer, batches: list) -> tuple[float, int]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                result = original(self, batches)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        counts.append([str(w.message) for w in caught if "synchroniz" in str(w.message)])
        return result

    monkeypatch.setattr(Trainer, "_update", counted)
    monkeypatch.setattr(SPEEDUPS, "accelerator_loss_chunk_mib", chunk_mib)
    # 3,000-token batches: several of the fused loss's 1,024-row chunks per batch (chunk_mib 0)
    assert main(train_argv(demo_data / "data", tmp_path / "m", 6, "--precision", precision,
                           "--batch-tokens", "3000", "--log-interval", "1")) == 0  # fmt: skip
    later = counts[2:]  # the first updates may initialise libraries
    assert later and all(len(reads) <= allowed for reads in later), later
