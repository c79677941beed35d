"""Training under srun: torch.distributed's environment from SLURM's, and (on the single-node SLURM of
scripts/slurm/start.sh) two srun tasks training in lockstep as under torchrun."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from adlnmt.train.device import pick_device
from adlnmt.train.launch import PORT_BASE, adopt_slurm_environment, first_host
from slurm_cluster import slurm_cluster  # noqa: F401 (a fixture)

from .conftest import train_two_ranks

SRUN_TASK = {"SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4",
             "SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_JOB_NODELIST": "gpu[07-08]",
             "SLURM_JOB_ID": "4321"}  # fmt: skip


@pytest.mark.parametrize(
    ("nodelist", "host"), [("gpu[07-08,11],cpu3", "gpu07"), ("node5", "node5"), ("a,b", "a"), ("n[3]", "n3")]
)
def test_the_first_host_of_a_node_list(nodelist: str, host: str) -> None:
    assert first_host(nodelist) == host


def test_an_srun_task_gets_its_rank_world_size_and_master() -> None:
    environ = dict(SRUN_TASK)
    assert adopt_slurm_environment(environ)
    assert {k: environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")} == {
        "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "gpu07", "MASTER_PORT": str(PORT_BASE + 4321)
    }  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [{"WORLD_SIZE": "2", "RANK": "0"},  # torchrun inside the allocation set them: left as they are
     {"SLURM_STEP_NUM_TASKS": "1"},  # srun -n 1
     {"SLURM_STEP_NUM_TASKS": None}],  # the batch script itself (no step of several tasks)
)  # fmt: skip
def test_a_launcher_or_a_single_task_is_left_alone(change: dict[str, str | None]) -> None:
    environ = {**SRUN_TASK, **change}
    environ = {k: v for k, v in environ.items() if v is not None}
    before = dict(environ)
    assert not adopt_slurm_environment(environ)
    assert environ == before


def test_an_explicit_master_wins() -> None:
    environ = {**SRUN_TASK, "MASTER_ADDR": "head", "MASTER_PORT": "29500"}
    adopt_slurm_environment(environ)
    assert (environ["MASTER_ADDR"], environ["MASTER_PORT"]) == ("head", "29500")


@pytest.mark.slurm
def test_two_srun_tasks_train_in_lockstep(slurm_cluster: None, demo_data: Path, tmp_path: Path) -> None:  # noqa: F811
    srun = ["srun", "--ntasks", "2", "--cpus-per-task", "1", sys.executable]
    train_two_ranks(srun, tmp_path, demo_data / "data", "--max-updates", "10", "--checkpoint-interval", "5")
    assert "WORLD_SIZE" not in os.environ  # set in the tasks only


@pytest.mark.parametrize(("visible", "local_rank", "device"), [(4, 3, "cuda:3"), (1, 3, "cuda:0")])
def test_each_task_trains_on_its_own_gpu(
    monkeypatch: pytest.MonkeyPatch, visible: int, local_rank: int, device: str
) -> None:
    """All of a node's GPUs visible to each task (--gpus-per-node): the local rank's; only its own (--gpus-per-task=1):
    that one."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    assert pick_device("cuda", local_rank) == pick_device("auto", local_rank) == torch.device(device)
