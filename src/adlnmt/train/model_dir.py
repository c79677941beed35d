"""What training keeps in a model directory besides checkpoints: its settings in ``config.json`` (read through
:class:`adlnmt.store.ModelDir`, the training options completed with their defaults) and ``vocab/`` (the data's
manifest and sentencepiece models), so that a trained model translates and resumes wherever it is moved.

``vocab/`` is written once, when the model is new, and ``config.json`` keeps the SHA-256 of each of its files
(``vocab_sha256``). Resuming checks the data's sentencepiece models against them: the data's token ids must mean
what the model learnt."""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from adlnmt.data.data_dir import MANIFEST, DataDir
from adlnmt.errors import UserError
from adlnmt.model_config import ModelConfig
from adlnmt.store import ModelDir, names
from adlnmt.store.atomic import copy_atomic, file_sha256
from adlnmt.store.model_dir import check_vocabulary_files
from adlnmt.train.config import TrainConfig
from adlnmt.train.init_from import MODEL_KEPT_OPTIONS

# Training options that may change when a run is resumed (how long and where it runs and what it shows, not the
# model or the data order); a change is recorded in metrics.jsonl and config.json (changed_settings).
RESUMABLE_CHANGES = frozenset(
    {
        "max_updates",
        "max_epochs",
        "max_minutes",
        "device",
        "threads",
        "deterministic",
        "compile",
        "progress",
        "patience",
        "keep_last",
        "keep_best",
        "checkpoint_interval",
        "log_interval",
        "tensorboard",
    }
)
PATH_OPTIONS = frozenset({"data", "model"})  # compared by content (the data's manifest), so that directories can move


def data_digest(data: DataDir) -> str:
    """SHA-256 of the data's manifest without its input paths: equal for the same prepared data wherever it lies."""
    content = {key: value for key, value in data.manifest.items() if key != "inputs"}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def vocabulary_files(data: DataDir) -> list[str]:
    """The files translation reads of a data directory: its manifest and sentencepiece model(s)."""
    return sorted({MANIFEST, *data.manifest["spm"].values()})


def vocabulary_hashes(data: DataDir) -> dict[str, str]:
    """SHA-256 of each vocabulary file of ``data`` (see :func:`vocabulary_files`)."""
    return {name: file_sha256(data.path / name) for name in vocabulary_files(data)}


def own_vocabularies(model_dir: Path, data: DataDir) -> dict[str, str]:
    """The vocabulary hashes of the model in ``model_dir``, trained on ``data``: the data's for a new model (its
    ``vocab/`` is written with the first ``config.json``, :func:`write_vocabularies`); for an existing one those in
    its ``config.json``, after checking that its ``vocab/`` and the data's sentencepiece models still match them."""
    files = ModelDir(model_dir)
    if not files.exists():
        return vocabulary_hashes(data)
    hashes = files.vocabulary_hashes(files.config())
    check_vocabulary_files(files.vocab_dir, hashes, hashes, model_dir)
    check_vocabulary_files(data.path, hashes, (name for name in hashes if name != MANIFEST), model_dir)
    return hashes


def write_vocabularies(data: DataDir, model_dir: Path) -> None:
    """Copy the vocabulary files of ``data`` into ``MODEL/vocab`` unless it is there: a model's vocabulary is never
    replaced (call before the first ``config.json`` is written)."""
    files = ModelDir(model_dir)
    if files.exists() and files.vocab_dir.is_dir():
        return
    for name in vocabulary_files(data):
        copy_atomic(data.path / name, files.vocab_dir / name)


# What a model directory holds before its config.json is written (a run killed while it started): the names it
# writes, and the temporaries of atomic writes cut short.
MODEL_DIR_ENTRIES = frozenset({names.LOCK, names.TENSORBOARD_DIR, names.VOCAB_DIR, names.CHECKPOINTS_DIR,
                               names.STATES_DIR, names.METRICS, names.INIT_FROM, names.BEST + names.WEIGHTS_SUFFIX,
                               names.AVERAGED + names.WEIGHTS_SUFFIX})  # fmt: skip


def check_model_folder(model_dir: Path) -> None:
    """Refuse ``--model`` naming a folder that holds anything but a model directory's own files (e.g. the data
    folder): training would write into it. A missing or empty folder, or a model directory (to resume), is fine."""
    if not model_dir.is_dir() or ModelDir(model_dir).exists():
        return
    foreign = sorted(p.name for p in model_dir.iterdir() if p.name not in MODEL_DIR_ENTRIES and ".tmp-" not in p.name)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise UserError(f"{model_dir}: not empty and not a model directory (no {names.CONFIG}; it holds {shown}); "
                        "--model needs a new or empty folder, or a model directory to resume")  # fmt: skip


def read_stored_config(model_dir: Path) -> dict[str, Any]:
    """``config.json`` of a model directory, checked (:meth:`adlnmt.store.ModelDir.config`), with the training
    options added to adlnmt after the model was trained filled in with their defaults."""
    stored = ModelDir(model_dir).config()
    stored["train"] = {option.name: option.default for option in fields(TrainConfig)} | stored["train"]
    return stored


def check_same_run(model_dir: Path, train: dict[str, Any], model: ModelConfig, data: DataDir) -> None:
    """Refuse a model directory that holds a run with other settings than ``train``/``model`` on ``data`` (the
    data compared by content); nothing to check in a new one."""
    if not ModelDir(model_dir).exists():
        return
    stored = read_stored_config(model_dir)
    before = stored["train"]
    # A run started with --init-from recorded the defaults of MODEL's sizes before they were recorded true: those are
    # compared through the "model" entry alone.
    skipped = RESUMABLE_CHANGES | PATH_OPTIONS | (MODEL_KEPT_OPTIONS if train.get("init_from") else frozenset())
    fixed = (k for k in train if k not in skipped)
    changed = sorted(k for k in fixed if before.get(k) != train[k])
    same_data = stored.get("data_digest") == data_digest(data)
    if changed or not same_data or stored["model"] != model.to_dict():
        fields_text = ", ".join(changed + ([] if same_data else ["data"])) or "the model configuration"
        raise UserError(
            f"{model_dir} holds a run with different settings ({fields_text}); "
            "re-run the same command to resume it, or choose a new --model directory"
        )


def changed_settings(before: dict[str, Any], train: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The options of ``train`` that differ from ``before`` (a stored run's; only those a resume may change:
    :func:`check_same_run` refuses the others), as ``{option: {"before": old, "now": new}}``."""
    return {
        name: {"before": before.get(name), "now": train[name]}
        for name in sorted(RESUMABLE_CHANGES)
        if before.get(name) != train[name]
    }
