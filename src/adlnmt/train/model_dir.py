"""What a model directory keeps besides checkpoints: its ``config.json`` (read with checks) and ``vocab/`` (the
data's manifest and sentencepiece models), so that a trained model translates and resumes wherever it is moved."""

from __future__ import annotations

import hashlib
import json
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
# Training options that may change when a run is resumed (how long and where it runs, not what it computes).
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
    }
)
PATH_OPTIONS = frozenset({"data", "model"})  # compared by content (the data's manifest), so that directories can move


def data_digest(data: DataDir) -> str:
    """SHA-256 of the data's manifest without its input paths: equal for the same prepared data wherever it lies."""
    content = {key: value for key, value in data.manifest.items() if key != "inputs"}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def copy_vocabularies(data: DataDir, model_dir: Path) -> None:
    """Copy the manifest and the sentencepiece model(s) into ``MODEL/vocab``: all translation reads of the data."""
    for name in sorted({MANIFEST, *data.manifest["spm"].values()}):
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


def load_vocabularies(model_dir: Path, stored: dict[str, Any]) -> DataDir:
    """The vocabularies (and manifest) a model translates with: ``MODEL/vocab``, or for a model trained before
    models kept them, the data directory stored in ``config.json`` (relative to the current directory)."""
    own = model_dir / VOCAB_DIR
    return DataDir.load(own if own.is_dir() else stored["train"].get("data") or own)
