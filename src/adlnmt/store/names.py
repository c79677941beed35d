"""Every file and folder name of a model directory (``adlnmt train``) and of an export directory (``adlnmt
export``), in one place.

A model directory::

    config.json                          the run's settings, model configuration, vocabulary hashes (CONFIG)
    vocab/                               the data's manifest and sentencepiece model(s) (VOCAB_DIR)
    metrics.jsonl                        one JSON record per validated checkpoint (METRICS)
    checkpoints/update-NNNNNNN.safetensors   weights of each kept checkpoint (CHECKPOINTS_DIR, weights_name)
    states/update-NNNNNNN.state.pt       the training state of the newest checkpoints (STATES_DIR, state_name)
    best.safetensors, averaged.safetensors   the best checkpoint's weights; `adlnmt average`'s output
    train.lock                           held by the one process writing the directory (LOCK)
    tensorboard/                         TensorBoard events of ``--tensorboard auto`` (TENSORBOARD_DIR)

An export directory: ``export.json`` (EXPORT_MANIFEST), ``vocab/``, ``diagram.svg`` (DIAGRAM) and the format's
graphs or converted model."""

from __future__ import annotations

import re

CONFIG = "config.json"
VOCAB_DIR = "vocab"
VOCAB_HASHES = "vocab_sha256"  # config.json's entry: vocabulary file name → SHA-256 of its content
MODEL_ID = "model_id"  # config.json's entry: a random name given to a model when it is made, kept by every resume
WEIGHTS_MODEL_ID = "adlnmt_model_id"  # the same name in the metadata of each weights file the model writes
METRICS = "metrics.jsonl"
CHECKPOINTS_DIR = "checkpoints"
STATES_DIR = "states"
WEIGHTS_SUFFIX = ".safetensors"
STATE_SUFFIX = ".state.pt"
BEST = "best"  # --checkpoint best: BEST + WEIGHTS_SUFFIX
LAST = "last"  # --checkpoint last: the newest file in checkpoints/
AVERAGED = "averaged"  # --checkpoint averaged: AVERAGED + WEIGHTS_SUFFIX, written by `adlnmt average`
CHECKPOINT_CHOICES = (BEST, LAST, AVERAGED)
LOCK = "train.lock"
TENSORBOARD_DIR = "tensorboard"
EXPORT_MANIFEST = "export.json"
INIT_FROM = "init_from.json"  # which tensors `adlnmt train --init-from` copied, initialised afresh, left unused
DIAGRAM = "diagram.svg"  # the architecture, drawn at export time for `adlnmt serve` without PyTorch
CHECKPOINT_PREFIX = "update-"
# a file of checkpoints/ or states/: update-NNNNNNN (at least 7 digits) and its kind
CHECKPOINT_FILE = re.compile(rf"{CHECKPOINT_PREFIX}(\d{{7,}})({re.escape(WEIGHTS_SUFFIX)}|{re.escape(STATE_SUFFIX)})")


def weights_name(update: int) -> str:
    """``update-NNNNNNN.safetensors``: the weights of the checkpoint at ``update``."""
    return f"{CHECKPOINT_PREFIX}{update:07d}{WEIGHTS_SUFFIX}"


def state_name(update: int) -> str:
    """``update-NNNNNNN.state.pt``: the training state of the checkpoint at ``update``."""
    return f"{CHECKPOINT_PREFIX}{update:07d}{STATE_SUFFIX}"
