"""What a model directory keeps besides checkpoints: its ``config.json`` (read with checks) and ``vocab/`` (the
data's manifest and sentencepiece models), so that a trained model translates and resumes wherever it is moved.

The model directory owns its vocabulary: ``vocab/`` is written once, when the model is new, and ``config.json``
keeps the SHA-256 of each of its files (``vocab_sha256``). Resuming checks the data's sentencepiece models against
them (the data's token ids must mean what the model learnt), and every command that loads the model checks
``vocab/``: a swapped file is an error naming it, never a model that silently translates garbage."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from adlnmt.data.dataset import DataDir
from adlnmt.data.prepare import MANIFEST
from adlnmt.errors import UserError
from adlnmt.model_config import ModelConfig
from adlnmt.train.checkpoint import copy_atomic, describe
from adlnmt.train.config import TrainConfig

CONFIG_FILE = "config.json"
VOCAB_DIR = "vocab"
VOCAB_HASHES = "vocab_sha256"  # config.json's entry: vocabulary file name → SHA-256 of its content
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


def file_sha256(path: Path) -> str:
    """SHA-256 of the file's content; UserError naming it when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror or err})") from None


def vocabulary_hashes(data: DataDir) -> dict[str, str]:
    """SHA-256 of each vocabulary file of ``data`` (see :func:`vocabulary_files`)."""
    return {name: file_sha256(data.path / name) for name in vocabulary_files(data)}


def check_vocabulary_files(directory: Path, hashes: dict[str, str], names: Iterable[str], owner: Path) -> None:
    """UserError naming the first of ``names`` in ``directory`` that is missing or differs from its hash in
    ``hashes`` (recorded when the model in ``owner`` was trained)."""
    for name in sorted(names):
        path = directory / name
        if not path.is_file():
            raise UserError(f"{path}: missing (the vocabulary of {owner}); restore it from the data it was trained on")
        if file_sha256(path) != hashes[name]:
            raise UserError(f"{path}: not the vocabulary {owner} was trained with (its SHA-256 differs from the one "
                            f"in {owner / CONFIG_FILE}); restore the original file")  # fmt: skip


def own_vocabularies(model_dir: Path, data: DataDir) -> dict[str, str]:
    """The vocabulary hashes of the model in ``model_dir``, trained on ``data``: the data's for a new model (its
    ``vocab/`` is written with the first ``config.json``, :func:`write_vocabularies`); for an existing one those in
    its ``config.json`` (or, for a model from before they were kept, those of its ``vocab/``), after checking that
    its ``vocab/`` and the data's sentencepiece models still match them."""
    if not (model_dir / CONFIG_FILE).is_file():
        return vocabulary_hashes(data)
    own = model_dir / VOCAB_DIR
    hashes = read_stored_config(model_dir).get(VOCAB_HASHES)
    if not isinstance(hashes, dict):
        if not own.is_dir():
            return vocabulary_hashes(data)
        hashes = {name: file_sha256(own / name) for name in vocabulary_files(data)}
    check_vocabulary_files(own, hashes, hashes, model_dir)
    check_vocabulary_files(data.path, hashes, (name for name in hashes if name != MANIFEST), model_dir)
    return hashes


def write_vocabularies(data: DataDir, model_dir: Path) -> None:
    """Copy the vocabulary files of ``data`` into ``MODEL/vocab`` unless it is there: a model's vocabulary is never
    replaced (call before the first ``config.json`` is written)."""
    if (model_dir / CONFIG_FILE).is_file() and (model_dir / VOCAB_DIR).is_dir():
        return
    for name in vocabulary_files(data):
        copy_atomic(data.path / name, model_dir / VOCAB_DIR / name)


def read_stored_config(model_dir: Path) -> dict[str, Any]:
    """``config.json`` of a model directory with its ``train`` and ``model`` entries checked, settings added to
    adlnmt after the model was trained filled in with their defaults; UserError naming the file when it is
    missing, damaged or incomplete."""
    path = model_dir / CONFIG_FILE
    if not path.is_file():
        raise UserError(f"{model_dir}: not a model directory (no {CONFIG_FILE})")
    try:
        stored = json.loads(path.read_bytes().decode("utf-8"))
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError
        raise UserError(f"{path}: damaged ({describe(err)})") from None
    if not isinstance(stored, dict) or not all(isinstance(stored.get(key), dict) for key in ("train", "model")):
        raise UserError(f"{path}: malformed (expected the objects 'train' and 'model')")
    try:
        stored["model"] = ModelConfig(**stored["model"]).to_dict()
    except TypeError as err:
        raise UserError(f"{path}: malformed model entry ({describe(err)})") from None
    stored["train"] = {option.name: option.default for option in fields(TrainConfig)} | stored["train"]
    return stored


def check_same_run(model_dir: Path, train: dict[str, Any], model: ModelConfig, data: DataDir) -> None:
    """Refuse a model directory that holds a run with other settings than ``train``/``model`` on ``data`` (the
    data compared by content); nothing to check in a new one."""
    if not (model_dir / CONFIG_FILE).is_file():
        return
    stored = read_stored_config(model_dir)
    before = stored["train"]
    fixed = (k for k in train if k not in RESUMABLE_CHANGES | PATH_OPTIONS)
    changed = sorted(k for k in fixed if before.get(k) != train[k])
    same_data = (stored["data_digest"] == data_digest(data) if "data_digest" in stored
                 else before.get("data") == train["data"])  # fmt: skip
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


def load_vocabularies(model_dir: Path, stored: dict[str, Any]) -> DataDir:
    """The vocabularies (and manifest) a model translates with: ``MODEL/vocab``, checked against the hashes in
    ``config.json``, or for a model trained before models kept them, the data directory stored in ``config.json``
    (relative to the current directory)."""
    own = model_dir / VOCAB_DIR
    hashes = stored.get(VOCAB_HASHES)
    if isinstance(hashes, dict):
        check_vocabulary_files(own, hashes, hashes, model_dir)
    return DataDir.load(own if own.is_dir() else stored["train"].get("data") or own)
