"""Training batches read from the shards of a data directory in bounded memory, with an exact position to resume.

An epoch is cut into *windows* (the shuffle buffer) of at most ``buffer`` pairs; each window is batched like the
in-memory data always was (:func:`~adlnmt.data.dataset.bucket`: sort by length with random tie-breaks, cut
token-budget batches, shuffle the batches), and rank r of ``world`` takes batches r, r + world, ... of each window
(:func:`~adlnmt.data.dataset.shard`: the last < world batches of a window are left out for that epoch). Only the
current window's pair ids and lengths and the shards it touches are in memory, so start-up time and memory do not
grow with the corpus.

What an epoch holds. Corpus i (n_i pairs, weight w_i) gets ``c_i`` pairs per epoch: all of them once (c_i = n_i)
when there is one corpus or when the weights and ``temperature`` leave every share proportional to size; else
c = the largest-remainder rounding of N · p_i with p_i ∝ (w_i n_i / Σ w_j n_j)^(1/T) (Arivazhagan et al. 2019;
T = 1 proportional to weight × size, T → ∞ uniform). Corpus i's pairs for epoch e form a stream: passes over the
corpus (more than one when c_i > n_i, i.e. upsampled), each pass its shards in a random order and each shard's pairs
in a random order, cut after c_i pairs. Window k of K = ⌈N / buffer⌉ takes the k-th K-th of every corpus's stream,
so every window holds the corpora in the epoch's proportions.

Every random choice comes from a generator seeded by (seed, epoch, ...): the batches of window k are a pure function
of (data, batch_tokens, buffer, temperature, seed, epoch, k, rank, world), and the position (epoch, window, batch)
resumes exactly. Window 0 uses the generator ``np.random.default_rng((seed, epoch))`` of the unsharded batching,
so a corpus that fits one window is batched exactly as :func:`adlnmt.data.dataset.make_batches` batches it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from adlnmt.data.data_dir import DataDir
from adlnmt.data.dataset import Split, bucket, shard
from adlnmt.errors import DataError

_SHARD_ORDER, _PAIR_ORDER = 1_000_003, 2_000_003  # seed tags of the shard and pair permutations


def epoch_counts(sizes: list[int], weights: list[float], temperature: float) -> list[int]:
    """Pairs per corpus in one epoch (module docstring): the sizes themselves when the shares are proportional. The
    shares are computed from logarithms, so that a small temperature tends to all pairs from the largest mass (the
    powers of the shares would underflow to 0 / 0)."""
    total = sum(sizes)
    relative = np.array(weights, dtype=np.float64) / max(weights)  # at most 1: weight × pairs never overflows
    mass = relative * np.array(sizes, dtype=np.float64)
    with np.errstate(divide="ignore"):  # a weight below the smallest double relative to the largest: share 0
        scaled = np.where(mass > 0, np.log(mass) / temperature, -np.inf)
    shares = np.exp(scaled - scaled.max())
    shares /= shares.sum()
    if np.allclose(shares, np.array(sizes) / total, rtol=0, atol=1e-12):
        return list(sizes)
    raw = shares * total
    counts = np.floor(raw).astype(np.int64)
    for i in np.argsort(-(raw - counts), kind="stable")[: total - int(counts.sum())]:
        counts[i] += 1
    return [int(c) for c in counts]


@dataclass(frozen=True)
class CorpusShards:
    """The training shards of one corpus: global shard indices, their sizes and the first global id of each."""

    name: str
    shards: list[int]
    sizes: list[int]
    bases: list[int]

    @property
    def pairs(self) -> int:
        return sum(self.sizes)


class ShardedTrainData:
    """The training pairs of a data directory, all shards of all corpora, addressed by a global id (shard after
    shard in manifest order); ``src(i)`` / ``tgt(i)`` as :class:`~adlnmt.data.dataset.Split` has them, so that
    :func:`~adlnmt.data.dataset.collate` batches them. Shards are opened (memory-mapped) when first read and closed
    when the window moves on (:meth:`keep_open`)."""

    def __init__(self, data: DataDir) -> None:
        self.data = data
        entries = data.shards("train")
        self.sizes = [int(entry["pairs"]) for entry in entries]
        self.bases = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self._starts = self.bases.tolist()
        corpora = data.corpora()
        by_name: dict[str, list[int]] = {}
        for index, entry in enumerate(entries):
            by_name.setdefault(entry.get("corpus", "train"), []).append(index)
        self.corpora = [
            CorpusShards(name, shards, [self.sizes[s] for s in shards], [int(self.bases[s]) for s in shards])
            for name, shards in by_name.items()
        ]
        self.weights = [float(corpora.get(c.name, {}).get("weight", 1.0)) for c in self.corpora]
        self._open: dict[int, Split] = {}  # the shards of the current window (each holds its offsets in memory)

    def __len__(self) -> int:
        return int(self.bases[-1])

    def shard(self, index: int) -> Split:
        """Shard ``index`` (global), opened (and its files verified) on first use."""
        if index not in self._open:
            self._open[index] = self.data.open_shard("train", index)
        return self._open[index]

    def keep_open(self, ids: np.ndarray) -> None:
        """Close the open shards that hold none of ``ids`` (a window's): an open shard holds its offsets in memory,
        so what stays open follows the shuffle buffer, not the corpus. A closed shard opens again when read."""
        needed = set(np.unique(np.searchsorted(self.bases, ids, side="right") - 1).tolist())
        self._open = {index: split for index, split in self._open.items() if index in needed}

    def _locate(self, i: int) -> tuple[Split, int]:
        index = bisect.bisect_right(self._starts, i) - 1  # per sentence: bisect on a list beats numpy on a scalar
        return self.shard(index), i - self._starts[index]

    def src(self, i: int) -> np.ndarray:
        split, local = self._locate(i)
        return split.src(local)

    def tgt(self, i: int) -> np.ndarray:
        split, local = self._locate(i)
        return split.tgt(local)

    def lengths(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Source and target model lengths (:class:`Split`'s ``src_lengths`` / ``tgt_lengths``) of sorted ids."""
        src, tgt = np.empty(len(ids), np.int64), np.empty(len(ids), np.int64)
        shard_of = np.searchsorted(self.bases, ids, side="right") - 1
        for index in np.unique(shard_of):
            mask = shard_of == index
            src[mask], tgt[mask] = self.shard(int(index)).lengths(ids[mask] - self.bases[index])
        return src, tgt


class EpochPlan:
    """The windows of the epochs of a :class:`ShardedTrainData` (module docstring) and the batches of one rank."""

    def __init__(self, train: ShardedTrainData, batch_tokens: int, seed: int, buffer: int, temperature: float,
                 mixed_lengths: bool = False, rank: int = 0, world: int = 1) -> None:  # fmt: skip
        if buffer < 1 or not temperature > 0:
            raise ValueError(f"need buffer >= 1 and temperature > 0, got {buffer}, {temperature}")
        self.train, self.batch_tokens, self.seed = train, batch_tokens, seed
        self.mixed_lengths, self.rank, self.world = mixed_lengths, rank, world
        self.counts = epoch_counts([c.pairs for c in train.corpora], train.weights, temperature)
        self.pairs = sum(self.counts)
        self.windows = max(1, math.ceil(self.pairs / buffer))

    def proportions(self) -> dict[str, tuple[int, float]]:
        """Per corpus: pairs drawn in an epoch and the share of the epoch they make."""
        return {c.name: (n, n / self.pairs) for c, n in zip(self.train.corpora, self.counts, strict=True)}

    def _stream(self, epoch: int, corpus: int, start: int, stop: int) -> np.ndarray:
        """Global ids at positions [start, stop) of corpus ``corpus``'s stream in ``epoch``."""
        info = self.train.corpora[corpus]
        n, parts = info.pairs, []
        position = start
        while position < stop:
            pass_, offset = divmod(position, n)
            take = min(stop - position, n - offset)  # within this pass
            order = np.random.default_rng((self.seed, epoch, pass_, corpus, _SHARD_ORDER)).permutation(len(info.shards))
            sizes = np.array(info.sizes)[order]
            ends = np.cumsum(sizes)
            first = int(np.searchsorted(ends, offset, side="right"))
            cursor, remaining = offset, take
            for slot in range(first, len(order)):
                if remaining == 0:
                    break
                shard_start = int(ends[slot] - sizes[slot])
                local_from = cursor - shard_start
                local_to = min(int(sizes[slot]), local_from + remaining)
                shard = info.shards[order[slot]]
                seed = (self.seed, epoch, pass_, shard, _PAIR_ORDER)
                pairs = np.random.default_rng(seed).permutation(int(sizes[slot]))[local_from:local_to]
                parts.append(pairs + info.bases[order[slot]])
                cursor += local_to - local_from
                remaining -= local_to - local_from
            position += take
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def window_ids(self, epoch: int, window: int) -> np.ndarray:
        """The sorted global ids of one window (a pair drawn twice, upsampled, appears twice)."""
        parts = []
        for corpus, count in enumerate(self.counts):
            start, stop = (count * window) // self.windows, (count * (window + 1)) // self.windows
            parts.append(self._stream(epoch, corpus, start, stop))
        return np.sort(np.concatenate(parts), kind="stable")

    def window_batches(self, epoch: int, window: int, dealt: int = 0) -> list[np.ndarray]:
        """This rank's batches (global ids) of one window, after its first ``dealt`` batches (taken by the ranks of
        another number of them: :func:`dealt_after`); none when fewer than one per rank are left after those."""
        ids = self.window_ids(epoch, window)
        self.train.keep_open(ids)
        src_len, tgt_len = self.train.lengths(ids)
        rng = np.random.default_rng((self.seed, epoch) if window == 0 else (self.seed, epoch, window))
        rest = bucket(ids, src_len, tgt_len, self.batch_tokens, rng, self.mixed_lengths)[dealt:]
        return [] if dealt and len(rest) < self.world else shard(rest, self.rank, self.world)


def dealt_after(dealt: int, batch: int, world: int) -> int:
    """The batches of a window taken once ``world`` ranks have each taken ``batch`` of those left after its first
    ``dealt``: rank r takes batches r, r + world, ... of them, so together the first ``batch × world``. A run resumed
    with another number of ranks deals the window's batches after these among its own: none taken twice or skipped
    (beyond the < world left over at the end of a window, as always)."""
    return dealt + batch * world


class EpochBatches:
    """One rank's batches of one epoch from a position (window, batches of it dealt to ranks of another number,
    batch of this rank after those); ``position`` is that of the next batch, ``done`` says the epoch has none left.
    Computes a window when it reaches it."""

    def __init__(self, plan: EpochPlan, epoch: int, window: int = 0, batch: int = 0, dealt: int = 0) -> None:
        if not 0 <= window < plan.windows:
            raise DataError(f"the saved data position (window {window}) lies outside this epoch's {plan.windows} "
                            "windows: the data or the shuffle buffer changed since the checkpoint")  # fmt: skip
        self.plan, self.epoch, self.window, self.batch, self.dealt = plan, epoch, window, batch, dealt
        self._batches = plan.window_batches(epoch, window, dealt)
        if batch > len(self._batches):
            raise DataError(f"the saved data position (batch {batch} of window {window}) lies beyond its "
                            f"{len(self._batches)} batches: the data or the batch size changed since the "
                            "checkpoint")  # fmt: skip
        self._settle()

    def _settle(self) -> None:
        """Move past finished windows, so that ``done`` and ``position`` are current."""
        while self.batch >= len(self._batches) and self.window + 1 < self.plan.windows:
            self.window, self.batch, self.dealt = self.window + 1, 0, 0
            self._batches = self.plan.window_batches(self.epoch, self.window)

    @property
    def done(self) -> bool:
        return self.batch >= len(self._batches)

    @property
    def position(self) -> tuple[int, int, int]:
        """(window, batches of it dealt before this rank's, batch of this rank)."""
        return self.window, self.dealt, self.batch

    def take(self, count: int) -> list[np.ndarray]:
        """Up to ``count`` next batches (fewer only at the end of the epoch)."""
        taken: list[np.ndarray] = []
        while len(taken) < count and not self.done:
            taken.append(self._batches[self.batch])
            self.batch += 1
            self._settle()
        return taken

    def __iter__(self) -> Iterator[np.ndarray]:
        while not self.done:
            yield from self.take(1)
