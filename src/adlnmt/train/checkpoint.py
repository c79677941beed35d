"""Checkpoint files: atomic writes, weights as safetensors, training states loadable without pickle.

A model directory holds ``config.json``, ``vocab/`` (the data's manifest and sentencepiece models, for translation),
``checkpoints/update-NNNNNNN.safetensors`` (weights of each kept checkpoint), ``states/update-NNNNNNN.state.pt``
(everything needed to resume at that update: weights, optimizer, schedule, counters, RNG states, data position;
loaded with ``weights_only=True``; kept for the newest checkpoints), ``best.safetensors`` and ``metrics.jsonl``.
Within one checkpoint the state file is written last: it commits the checkpoint.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file
from torch import Tensor, nn

from adlnmt.errors import UserError

FAULT_HOOK = "ADLNMT_FAULT_HOOK"
STATES_KEPT = 2  # training states kept besides the newest checkpoint's: fallbacks when the newest is damaged
LEGACY_STATE = "state.pt"  # the single state file of model directories written before per-checkpoint states
CHECKPOINT_FILE = re.compile(r"update-(\d{7,})\.(safetensors|state\.pt)")
STATE_ENTRIES: dict[str, type] = {
    "model": dict,
    "optimizer": dict,
    "schedule": dict,
    "progress": dict,
    "rng_cpu": torch.Tensor,
}


def fault_point(point: str) -> None:
    """Test hook. With ``ADLNMT_FAULT_HOOK=ACTION@GLOB``, a point whose name matches GLOB (fnmatch) kills this process
    (``kill``: SIGKILL), signals it (``term``: SIGTERM, ``int``: SIGINT) or fails as on a full disk (``enospc``).
    Every atomic write of a file NAME passes ``NAME:written`` (temporary file complete, not yet renamed) and
    ``NAME:replaced``."""
    action, _, pattern = os.environ.get(FAULT_HOOK, "").partition("@")
    if not pattern or not fnmatch(point, pattern):
        return
    if action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    os.kill(os.getpid(), {"kill": signal.SIGKILL, "term": signal.SIGTERM, "int": signal.SIGINT}[action])


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` then fsync and rename over ``path``: a kill leaves the old file or the new one. A failed write
    (e.g. a full disk) is a UserError naming ``path``; the old file stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        fault_point(f"{path.name}:written")
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except (OSError, SafetensorError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UserError(f"{path}: cannot write ({reason}); its previous version is intact") from None
    finally:
        tmp.unlink(missing_ok=True)
    fault_point(f"{path.name}:replaced")


def save_weights(model: nn.Module, path: Path) -> None:
    tensors, metadata = stored_tensors(model)
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata or None))


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


def load_weights(model: nn.Module, path: Path) -> None:
    if not path.is_file():
        raise UserError(f"{path}: checkpoint not found")
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except Exception as err:  # safetensors raises several types for damaged files
        raise UserError(f"{path}: not a readable safetensors checkpoint ({describe(err)})") from None
    if missing or unexpected:
        raise UserError(
            f"{path}: does not match the model (missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]})"
        )


def weights_match(path: Path, tensors: dict[str, Tensor]) -> bool:
    """Whether ``path`` is a readable weights file whose every tensor equals the one of its name in ``tensors``."""
    try:
        stored = load_file(path)
    except Exception:  # missing or damaged (safetensors raises several types)
        return False
    return bool(stored) and all(name in tensors and torch.equal(t, tensors[name]) for name, t in stored.items())


def describe(err: BaseException) -> str:
    """An exception as a short reason (its type when it has no message, e.g. ``EOFError``)."""
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


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


def checkpoint_path(model_dir: Path, update: int) -> Path:
    return model_dir / "checkpoints" / f"update-{update:07d}.safetensors"


def state_path(model_dir: Path, update: int) -> Path:
    return model_dir / "states" / f"update-{update:07d}.state.pt"


def checkpoint_files(model_dir: Path) -> list[tuple[int, Path]]:
    """Every weights and state file (``checkpoints/``, ``states/``) as (update, path), oldest first."""
    paths = [*(model_dir / "checkpoints").glob("update-*"), *(model_dir / "states").glob("update-*")]
    return sorted((int(m.group(1)), p) for p in paths if (m := CHECKPOINT_FILE.fullmatch(p.name)))


def state_files(model_dir: Path) -> list[tuple[int, Path]]:
    """The training states in ``states/`` as (update, path), oldest first."""
    return [(update, path) for update, path in checkpoint_files(model_dir) if path.name.endswith(".state.pt")]


def saved_states(model_dir: Path) -> list[Path]:
    """Training states to resume from, newest first (a legacy ``state.pt`` last)."""
    states = [path for _, path in reversed(state_files(model_dir))]
    legacy = model_dir / LEGACY_STATE
    return states + ([legacy] if legacy.is_file() else [])


def prune(model_dir: Path, keep_last: int, keep_best: int = 0, scores: dict[int, float] | None = None,
          current: int | None = None) -> None:  # fmt: skip
    """Keep the newest ``keep_last`` checkpoints, the ``keep_best`` best by ``scores`` (update → score, higher is
    better), the training states of the newest ``STATES_KEPT`` of them and every file of update ``current``; with
    ``scores``, only checkpoints that have one count (an interruption's checkpoint goes once a newer one exists).
    best.safetensors is kept apart anyway."""
    files = checkpoint_files(model_dir)
    weights = sorted({u for u, _ in files if scores is None or u in scores})
    ranked = sorted((u for u in weights if scores and u in scores), key=lambda u: (-scores[u], -u))
    keep_weights = set(weights[-keep_last:] if keep_last > 0 else []) | set(ranked[:keep_best]) | {current}
    keep_states = set(weights[-STATES_KEPT:]) | {current}
    for update, path in files:
        if update not in (keep_states if path.name.endswith(".state.pt") else keep_weights):
            path.unlink(missing_ok=True)


def discard_after(model_dir: Path, update: int) -> list[Path]:
    """Delete the files of checkpoints newer than ``update`` (uncommitted or damaged); returns them."""
    dropped = [path for u, path in checkpoint_files(model_dir) if u > update]
    for path in dropped:
        path.unlink(missing_ok=True)
    return dropped


def remove_temporaries(model_dir: Path) -> list[Path]:
    """Delete the temporary files of writes a kill cut short (call only while holding the directory's lock)."""
    folders = (model_dir, model_dir / "checkpoints", model_dir / "states")
    found = [path for folder in folders for path in folder.glob(".*.tmp-*")]
    for path in found:
        path.unlink(missing_ok=True)
    return found


def copy_atomic(source: Path, target: Path) -> None:
    atomic_write(target, lambda tmp: shutil.copyfile(source, tmp))


def append_line(path: Path, text: str) -> None:
    """Append one line and fsync it (so that it is on disk before the checkpoint it belongs to commits)."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as err:
        raise UserError(f"{path}: cannot write ({err.strerror or err})") from None


def read_records(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The records of a JSON-lines file and a description of a partial last line (cut off by a crash or a full
    disk), None when there is none. A damaged line before the last one is a UserError naming it."""
    if not path.is_file():
        return [], None
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    records, partial = [], None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("update"), int):
                raise ValueError("not a checkpoint record")
        except ValueError as err:
            if any(rest.strip() for rest in lines[number:]):
                raise UserError(f"{path}:{number}: damaged record ({describe(err)})") from None
            partial = f"{path}:{number}: partial last line dropped ({line[:40]!r})"
            continue
        records.append(record)
    return records, partial


def write_records(path: Path, records: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(record) + "\n" for record in records)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
