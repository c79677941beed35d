"""The one check of a ``--device`` flag (train, translate, ensembles, score-pairs, contrastive, serve, bench): a
device PyTorch does not know, one this toolkit does not run on, or CUDA on a machine without it (or a GPU index it
lacks) is a UserError naming the flag's value, before any model is loaded; so are more CPU threads or worker
processes than the machine has cores."""

from __future__ import annotations

import os

from adlnmt.errors import UserError

DEVICE_TYPES = ("cpu", "cuda")


def checked_device(name: str) -> str:
    """``name`` (cpu, cuda, cuda:N; auto: a GPU if there is one) as the device it names, checked against this
    machine."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise UserError(f"--device {name!r}: not a device; use cpu, cuda or cuda:N") from None
    if device.type not in DEVICE_TYPES:
        raise UserError(f"--device {name}: adlnmt runs on cpu or cuda, not {device.type}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device {name}: CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise UserError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return name


def check_cpu_count(flag: str, count: int) -> None:
    """A UserError when ``flag`` asks for more CPU threads or processes than this machine has cores (PyTorch crashes
    on tens of thousands of threads; more than one per core only slows a run down)."""
    cores = os.cpu_count() or 1
    if count > cores:
        raise UserError(f"{flag} {count}: this machine has {cores} CPU core(s); use at most {cores}")
