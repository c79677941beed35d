"""Training speed: real optimizer updates (forward, label-smoothed loss, backward, gradient clipping, AdamW step:
the trainer's own ``_update``) on batches of a prepared data directory or of random sentence pairs.

Batches come from ``make_batches`` + ``collate`` (the trainer's batching) and are built and moved to the device
before timing. After ``warmup`` untimed updates, ``updates`` updates are timed; the target tokens are the
non-padding ``tgt_out`` tokens (what the loss is computed on).
"""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

import numpy as np
import torch

from adlnmt.bench.machine import busy_note
from adlnmt.bench.measure import timed
from adlnmt.bench.models import FIRST_WORD_ID, SYNTHETIC_LENGTHS, synthetic_lengths
from adlnmt.data.dataset import Batch, Split, collate, make_batches
from adlnmt.data.vocab import EOS
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


def prepared_batches(
    split: Split | RandomPairs, batch_tokens: int, count: int, seed: int, device: torch.device
) -> list[Batch]:
    """The first ``count`` batches of the split's first shuffled epoch (cycled when it has fewer), on ``device``."""
    order = make_batches(split, batch_tokens, seed, 0)
    return [collate(split, indices).to(device) for indices in itertools.islice(itertools.cycle(order), count)]


def measure_training(
    label: str, config: TrainConfig, model: Seq2Seq, batches: list[Batch], warmup: int, device: torch.device
) -> dict[str, Any]:
    """``warmup`` untimed updates, then one update per remaining batch, timed."""
    updater = Updater(config, model, device)
    for batch in batches[:warmup]:
        updater.update(batch)
    timed_batches = batches[warmup:]
    timing = timed(lambda: [updater.update(batch) for batch in timed_batches][-1], device)
    tokens = sum(batch.tgt_tokens for batch in timed_batches)
    sentences = sum(len(batch) for batch in timed_batches)
    row = {
        "preset": label,
        "parameters": model.parameter_count(),
        "batch_tokens": config.batch_tokens,
        "updates": len(timed_batches),
        "sentences": sentences,
        "target_tokens": tokens,
        "seconds": timing.seconds,
        "updates_per_s": len(timed_batches) / timing.seconds,
        "tokens_per_s": tokens / timing.seconds,
        "sentences_per_s": sentences / timing.seconds,
        "peak_mb": timing.peak_mb,
        "added_mb": timing.added_mb,
        "busy_beside": timing.busy_beside,
        "loss": timing.result,
    }
    print(f"  {label}: {row['updates_per_s']:.2f} updates/s, {row['tokens_per_s']:.0f} target tokens/s "
          f"({row['seconds']:.1f} s{busy_note(timing.busy_beside)})", file=sys.stderr)  # fmt: skip
    return row
