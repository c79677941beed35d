"""A stop signal under torchrun (2 gloo ranks on the CPU): rank 0 is signalled while it writes a checkpoint, every
rank stops at that update, and the re-run resumes there in lockstep and ends with the weights of an uninterrupted
DDP run (the state keeps every rank's RNG)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import torch

from .harness import OPTIONS, environment, records

WORKER = Path(__file__).parents[1] / "train" / "ddp_worker.py"


def torchrun(data: Path, model: Path, out: Path, updates: int, hook: str | None = None) -> str:
    launcher = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    command = [launcher, "--standalone", "--nproc_per_node", "2", str(WORKER), str(out), "train", "--data", str(data),
               "--model", str(model), "--max-updates", str(updates), *OPTIONS, "--device", "cpu"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env=environment(hook), timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def parameters(out: Path) -> list[dict[str, torch.Tensor]]:
    return [torch.load(out / f"rank{rank}.pt", weights_only=True) for rank in (0, 1)]


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_sigterm_on_one_rank_stops_every_rank_and_the_rerun_resumes(demo_data: Path, tmp_path: Path) -> None:
    data = demo_data / "data"
    (tmp_path / "b").mkdir()
    stderr = torchrun(data, tmp_path / "stopped", tmp_path / "b", 20, hook="term@update-0000010.safetensors:replaced")
    assert "SIGTERM: checkpoint of update 10 written" in stderr
    stopped = parameters(tmp_path / "b")
    assert same(*stopped)  # both ranks stopped after update 10
    assert "resuming at update 10" in torchrun(data, tmp_path / "stopped", tmp_path / "b", 20)
    assert same(*parameters(tmp_path / "b"))
    assert [r["update"] for r in records(tmp_path / "stopped")] == [10, 20]
    (tmp_path / "s").mkdir()
    torchrun(data, tmp_path / "straight", tmp_path / "s", 20)
    assert same(parameters(tmp_path / "s")[0], parameters(tmp_path / "b")[0])
