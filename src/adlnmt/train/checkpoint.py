"""The training-state commit protocol of a model directory (its files: :mod:`adlnmt.store.names`): weights as
safetensors, training states loadable without pickle, pruning and the tidying of a resume.

``checkpoints/update-NNNNNNN.safetensors`` holds the weights of each kept checkpoint, ``states/update-NNNNNNN.state.pt``
everything needed to resume at that update (weights, optimizer, schedule, counters, RNG states, data position;
loaded with ``weights_only=True``; kept for the newest checkpoints). Every file is written atomically
(:mod:`adlnmt.store.atomic`, with its fault-injection points); within one checkpoint the state file is written last:
it commits the checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from adlnmt.errors import UserError
from adlnmt.store import ModelDir
from adlnmt.store.atomic import atomic_write, describe
from adlnmt.store.names import STATE_SUFFIX, WEIGHTS_MODEL_ID

STATES_KEPT = 2  # training states kept besides the newest checkpoint's: fallbacks when the newest is damaged
STATE_ENTRIES: dict[str, type] = {
    "model": dict,
    "optimizer": dict,
    "schedule": dict,
    "progress": dict,
    "rng_cpu": torch.Tensor,
}


def save_weights(model: nn.Module, path: Path, model_id: str) -> None:
    """Write ``model``'s weights to ``path``, named as the weights of the model ``model_id`` (its config.json's)."""
    tensors, metadata = stored_tensors(model)
    metadata[WEIGHTS_MODEL_ID] = model_id
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def stored_tensors(model: nn.Module) -> tuple[dict[str, Tensor], dict[str, str]]:
    """The model's tensors as ``safetensors.torch.save_model`` stores them (so that ``load_model`` reads them): a
    tensor tied under several names once, under the first name, the others in the metadata as ``name → kept``.
    Unlike ``save_model`` this also works on CUDA, where cuDNN packs each RNN's weights into one buffer of which
    every parameter is a view: such views are copied out."""
    tensors: dict[str, Tensor] = {}
    metadata: dict[str, str] = {}
    kept: dict[int, str] = {}  # storage address → name stored
    for name, tensor in sorted(model.state_dict().items()):
        storage = tensor.untyped_storage()
        whole = tensor.data_ptr() == storage.data_ptr() and tensor.nbytes == storage.nbytes()
        if not whole:
            tensor = tensor.clone()  # a view into a larger buffer: its own copy
        address = tensor.untyped_storage().data_ptr()
        if tensor.numel() and address in kept:
            metadata[name] = kept[address]
            continue
        kept[address] = name
        tensors[name] = tensor.detach().contiguous()
    return tensors, metadata


def weights_match(path: Path, tensors: dict[str, Tensor]) -> bool:
    """Whether ``path`` is a readable weights file whose every tensor equals the one of its name in ``tensors``."""
    try:
        stored = load_file(path)
    except Exception:  # missing or damaged (safetensors raises several types)
        return False
    return bool(stored) and all(name in tensors and torch.equal(t, tensors[name]) for name, t in stored.items())


def save_state(state: dict[str, Any], path: Path) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:  # through Python's file object: a full disk raises OSError(ENOSPC)
            torch.save(state, handle)

    atomic_write(path, write)


def load_state(path: Path) -> dict[str, Any]:
    """The dict saved in ``path``, read without unpickling code; UserError naming the file when it is missing,
    empty, damaged, or holds anything but tensors and plain values."""
    if not path.is_file():
        raise UserError(f"{path}: training state not found")
    if path.stat().st_size == 0:
        raise UserError(f"{path}: empty file (cut off while written?)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # never unpickle arbitrary code; say which file and why
        if "Weights only load failed" in str(err):
            reason = "refused, it holds objects that would run code"
            raise UserError(f"{path}: cannot read the training state: {reason}") from None
        raise UserError(f"{path}: cannot read the training state ({describe(err)})") from None
    if not isinstance(state, dict):
        raise UserError(f"{path}: not a training state (a {type(state).__name__}, expected a dict)")
    return state


def check_state(state: dict[str, Any], path: Path) -> None:
    """UserError naming ``path`` when ``state`` lacks an entry of a trainer's state or has one of the wrong type."""
    wrong = [name for name, kind in STATE_ENTRIES.items() if not isinstance(state.get(name), kind)]
    if wrong:
        raise UserError(f"{path}: not a training state (missing or malformed: {', '.join(wrong)})")


def saved_states(model_dir: Path) -> list[Path]:
    """Training states to resume from, newest first."""
    return [path for _, path in reversed(ModelDir(model_dir).states())]


def prune(model_dir: Path, keep_last: int, keep_best: int = 0, scores: dict[int, float] | None = None,
          current: int | None = None) -> None:  # fmt: skip
    """Keep the newest ``keep_last`` checkpoints, the ``keep_best`` best by ``scores`` (update → score, higher is
    better), the training states of the newest ``STATES_KEPT`` of them and every file of update ``current``; with
    ``scores``, only checkpoints that have one count (an interruption's checkpoint goes once a newer one exists).
    best.safetensors is kept apart anyway."""
    files = ModelDir(model_dir).checkpoint_files()
    weights = sorted({u for u, _ in files if scores is None or u in scores})
    ranked = sorted((u for u in weights if scores and u in scores), key=lambda u: (-scores[u], -u))
    keep_weights = set(weights[-keep_last:] if keep_last > 0 else []) | set(ranked[:keep_best]) | {current}
    keep_states = set(weights[-STATES_KEPT:]) | {current}
    for update, path in files:
        if update not in (keep_states if path.name.endswith(STATE_SUFFIX) else keep_weights):
            path.unlink(missing_ok=True)


def discard_after(model_dir: Path, update: int) -> list[Path]:
    """Delete the files of checkpoints newer than ``update`` (uncommitted or damaged); returns them."""
    dropped = [path for u, path in ModelDir(model_dir).checkpoint_files() if u > update]
    for path in dropped:
        path.unlink(missing_ok=True)
    return dropped


def remove_temporaries(model_dir: Path) -> list[Path]:
    """Delete the temporary files of writes a kill cut short (call only while holding the directory's lock)."""
    files = ModelDir(model_dir)
    folders = (files.path, files.checkpoints_dir, files.states_dir)
    found = [path for folder in folders for path in folder.glob(".*.tmp-*")]
    for path in found:
        path.unlink(missing_ok=True)
    return found
