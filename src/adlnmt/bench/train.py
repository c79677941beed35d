"""Training speed: real optimizer updates (forward, label-smoothed loss, backward, gradient clipping, AdamW step:
the trainer's own ``_update``) on batches of a prepared data directory or of random sentence pairs.

A prepared directory is read as ``adlnmt train`` reads it (:func:`training_batches`: every shard of every corpus,
memory-mapped, in the epoch plan's windows and order) and each batch is collated at its update, inside the timed
loop, as training does; or (``memory``) the same batches are collated into memory before timing, which leaves the
data path out: the ratio of the two rates is what reading from shards costs. Random pairs are batched by
``make_batches`` + ``collate`` before timing. After ``warmup`` untimed updates, ``updates`` updates are timed; the
target tokens are the non-padding ``tgt_out`` tokens (what the loss is computed on).
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from adlnmt.bench.machine import busy_note
from adlnmt.bench.measure import timed
from adlnmt.bench.models import FIRST_WORD_ID, SYNTHETIC_LENGTHS, synthetic_lengths
from adlnmt.data.data_dir import DataDir
from adlnmt.data.dataset import Batch, collate, make_batches
from adlnmt.data.stream import EpochBatches, EpochPlan, ShardedTrainData
from adlnmt.data.vocab import EOS
from adlnmt.errors import DataError
from adlnmt.model import Seq2Seq
from adlnmt.train.config import TrainConfig
from adlnmt.train.device import precision_setup
from adlnmt.train.schedule import Schedule
from adlnmt.train.trainer import Progress, Trainer, make_optimizer


class Updater(Trainer):
    """The trainer's update step on a given model, without a data or model directory.

    ``Trainer.__init__`` is not called (it loads a data directory and checks a model directory); this sets the
    attributes ``Trainer._update`` and ``Trainer._loss`` use, as ``Trainer.__init__`` does for one process."""

    def __init__(self, config: TrainConfig, model: Seq2Seq, device: torch.device) -> None:
        self.config, self.device, self.world, self.rank, self.main = config, device, 1, 0, True
        self.distributed = False
        self.model = self.network = model.train()
        self.optimizer = make_optimizer(model, config, device)
        self.schedule = Schedule(config)
        self.progress = Progress()
        self.scaler = precision_setup(config.precision, device)

    def update(self, batch: Batch) -> float:
        """One optimizer update; the loss per target token."""
        loss, _ = self._update([batch])
        self.progress.update += 1
        return loss


class RandomPairs:
    """Random sentence pairs laid out like a prepared split (``adlnmt.data.dataset.Split``), so that
    ``make_batches`` and ``collate`` batch them as they batch a corpus. Targets have the given lengths; each
    source is 2 words shorter to 2 longer."""

    def __init__(self, tgt_lengths: list[int], vocab: int, rng: np.random.Generator) -> None:
        src_lengths = np.maximum(1, np.asarray(tgt_lengths) + rng.integers(-2, 3, size=len(tgt_lengths)))
        self._src = [rng.integers(FIRST_WORD_ID, vocab, size=n) for n in src_lengths.tolist()]
        self._tgt = [rng.integers(FIRST_WORD_ID, vocab, size=n) for n in tgt_lengths]
        self.src_lengths = src_lengths + 1  # + EOS
        self.tgt_lengths = np.asarray(tgt_lengths) + 1  # tgt_in/tgt_out length

    def __len__(self) -> int:
        return len(self._tgt)

    def src(self, i: int) -> np.ndarray:
        return np.append(self._src[i], EOS)

    def tgt(self, i: int) -> np.ndarray:
        return self._tgt[i]


def random_pairs(batches: int, batch_tokens: int, vocab: int, seed: int) -> RandomPairs:
    """Enough random pairs (targets of ``synthetic_lengths``) for about ``batches`` batches of ``batch_tokens``."""
    rng = np.random.default_rng(seed)
    count = math.ceil(1.2 * batches * batch_tokens / (sum(SYNTHETIC_LENGTHS) / 2 + 3))
    return RandomPairs(synthetic_lengths(count, rng), vocab, rng)


def prepared_batches(split: RandomPairs, batch_tokens: int, count: int, seed: int, device: torch.device) -> list[Batch]:
    """The first ``count`` batches of the pairs' first shuffled epoch (cycled when it has fewer), on ``device``."""
    order = make_batches(split, batch_tokens, seed, 0)
    return [collate(split, indices).to(device) for indices in itertools.islice(itertools.cycle(order), count)]


def training_batches(
    data: DataDir, batch_tokens: int, count: int, seed: int
) -> tuple[ShardedTrainData, list[np.ndarray]]:
    """The training pairs of ``data`` as ``adlnmt train`` reads them and the ids of the first ``count`` batches it
    trains on with this batch size and seed (training's default shuffle buffer, temperature and batching; epoch
    after epoch when one has fewer)."""
    train, defaults = ShardedTrainData(data), TrainConfig()
    plan = EpochPlan(train, batch_tokens, seed, defaults.shuffle_buffer, defaults.temperature)
    batches: list[np.ndarray] = []
    epoch = 0
    while len(batches) < count:
        taken = EpochBatches(plan, epoch).take(count - len(batches))
        if not taken:
            raise DataError("an epoch of its training data holds no batch", data.path)
        batches += taken
        epoch += 1
    return train, batches


def measure_training(
    label: str, config: TrainConfig, model: Seq2Seq, batch: Callable[[int], Batch], count: int, warmup: int,
    device: torch.device,
) -> dict[str, Any]:  # fmt: skip
    """``warmup`` untimed updates, then one update per remaining batch up to ``count``, timed; ``batch(i)`` gives
    batch i on ``device`` (inside the timed loop)."""
    updater = Updater(config, model, device)
    for i in range(warmup):
        updater.update(batch(i))

    def run() -> tuple[float, int, int]:
        loss, tokens, sentences = math.nan, 0, 0
        for i in range(warmup, count):
            current = batch(i)
            loss = updater.update(current)
            tokens, sentences = tokens + current.tgt_tokens, sentences + len(current)
        return loss, tokens, sentences

    timing = timed(run, device)
    loss, tokens, sentences = timing.result
    updates = count - warmup
    row = {
        "preset": label,
        "parameters": model.parameter_count(),
        "batch_tokens": config.batch_tokens,
        "updates": updates,
        "sentences": sentences,
        "target_tokens": tokens,
        "seconds": timing.seconds,
        "updates_per_s": updates / timing.seconds,
        "tokens_per_s": tokens / timing.seconds,
        "sentences_per_s": sentences / timing.seconds,
        "peak_mb": timing.peak_mb,
        "added_mb": timing.added_mb,
        "busy_beside": timing.busy_beside,
        "loss": loss,
    }
    print(f"  {label}: {row['updates_per_s']:.2f} updates/s, {row['tokens_per_s']:.0f} target tokens/s "
          f"({row['seconds']:.1f} s{busy_note(timing.busy_beside)})", file=sys.stderr)  # fmt: skip
    return row
