"""The data pipeline: corpus reading, toy corpus, subword vocabularies, streaming prepare into token shards, datasets,
batching, and training batches read from shards.

Names are imported lazily so that ``adlnmt.data.commands`` (used by the CLI parser) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "PairCounts": "corpus",
    "read_lines": "corpus",
    "read_parallel": "corpus",
    "Batch": "dataset",
    "DataDir": "dataset",
    "Split": "dataset",
    "collate": "dataset",
    "make_batches": "dataset",
    "shard": "dataset",
    "write_demo_corpus": "demo",
    "Corpus": "prepare",
    "prepare": "prepare",
    "EpochBatches": "stream",
    "EpochPlan": "stream",
    "ShardedTrainData": "stream",
    "BOS": "vocab",
    "EOS": "vocab",
    "PAD": "vocab",
    "UNK": "vocab",
    "Vocab": "vocab",
    "train_sentencepiece": "vocab",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
