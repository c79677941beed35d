"""Training started by SLURM's ``srun`` with one task per GPU: torch.distributed's environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT) taken from SLURM's. A launcher that sets it itself (torchrun inside an
allocation) is left alone, and so is a single task (the batch script itself, or ``srun -n 1``)."""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping

PORT_BASE = 20000  # MASTER_PORT, when not given: PORT_BASE + the job id modulo PORT_RANGE (the same on every task)
PORT_RANGE = 20000


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list: ``gpu[07-08,11],cpu3`` → ``gpu07``."""
    match = re.match(r"([^,\[]+)(?:\[([^\],\-]+))?", nodelist.strip())
    if match is None:
        raise ValueError(f"cannot read the SLURM node list {nodelist!r}")
    return match.group(1) + (match.group(2) or "")


def adopt_slurm_environment(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set torch.distributed's variables from those srun gives each task of a step of several tasks; whether it did."""
    tasks = int(environ.get("SLURM_STEP_NUM_TASKS", "1"))
    if "WORLD_SIZE" in environ or "SLURM_PROCID" not in environ or tasks < 2:
        return False
    environ["RANK"] = environ["SLURM_PROCID"]
    environ["WORLD_SIZE"] = str(tasks)
    environ["LOCAL_RANK"] = environ.get("SLURM_LOCALID", "0")
    environ.setdefault("MASTER_ADDR", first_host(environ.get("SLURM_STEP_NODELIST", environ["SLURM_JOB_NODELIST"])))
    environ.setdefault("MASTER_PORT", str(PORT_BASE + int(environ.get("SLURM_JOB_ID", "0")) % PORT_RANGE))
    return True
