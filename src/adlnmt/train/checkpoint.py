"""Checkpoint files: atomic writes, weights as safetensors, training state loadable without pickle.

A model directory holds ``config.json``, ``checkpoints/update-NNNNNNN.safetensors`` (weights of each kept
checkpoint), ``best.safetensors``, ``state.pt`` (everything needed to resume: weights, optimizer,
schedule, counters, RNG states, data position; loaded with ``weights_only=True``) and ``metrics.jsonl``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model
from torch import nn

from adlnmt.errors import UserError


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` then fsync and rename over ``path``: a kill leaves the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def save_weights(model: nn.Module, path: Path) -> None:
    atomic_write(path, lambda tmp: save_model(model, str(tmp)))


def load_weights(model: nn.Module, path: Path) -> None:
    if not path.is_file():
        raise UserError(f"{path}: checkpoint not found")
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except Exception as err:  # safetensors raises several types for damaged files
        raise UserError(f"{path}: not a readable safetensors checkpoint ({err})") from None
    if missing or unexpected:
        raise UserError(
            f"{path}: does not match the model (missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]})"
        )


def save_state(state: dict[str, Any], path: Path) -> None:
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def load_state(path: Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a damaged file: never unpickle arbitrary code, say which file
        raise UserError(f"{path}: cannot read the training state ({err})") from None


def checkpoint_path(model_dir: Path, update: int) -> Path:
    return model_dir / "checkpoints" / f"update-{update:07d}.safetensors"


def prune(model_dir: Path, keep_last: int, keep_best: int = 0, scores: dict[int, float] | None = None) -> None:
    """Keep the newest ``keep_last`` checkpoint files and the ``keep_best`` best by ``scores`` (update → score,
    higher is better); best.safetensors is kept apart anyway."""
    files = {int(p.stem.split("-")[1]): p for p in (model_dir / "checkpoints").glob("update-*.safetensors")}
    newest = sorted(files)[-keep_last:] if keep_last > 0 else []
    ranked = sorted((u for u in files if scores and u in scores), key=lambda u: (-scores[u], -u))
    keep = set(newest) | set(ranked[:keep_best])
    for update, path in files.items():
        if update not in keep:
            path.unlink(missing_ok=True)


def copy_atomic(source: Path, target: Path) -> None:
    atomic_write(target, lambda tmp: shutil.copyfile(source, tmp))
