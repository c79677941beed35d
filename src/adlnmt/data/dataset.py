"""The encoded splits of a prepared data directory (memory-mapped arrays), token-budget length-bucketed batching,
collation and DDP sharding. Only :func:`collate` makes tensors. The directory itself (manifest, vocabularies) is read
by :mod:`adlnmt.data.data_dir`, which needs neither numpy nor PyTorch."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from adlnmt.data.vocab import BOS, EOS, PAD
from adlnmt.errors import DataError

if TYPE_CHECKING:
    import torch


def _load_array(path: Path) -> np.ndarray:
    if not path.is_file():
        raise DataError("data file missing (re-run prepare)", path)
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise DataError(f"corrupt array file ({err})", path) from None


def _offsets(directory: Path, names: dict[str, str], tokens: np.ndarray, tokens_path: Path) -> tuple[np.ndarray, Path]:
    """The ``int64`` offsets (n + 1) of one side's sentences into ``tokens`` and the file they come from: the
    cumulative sum of the ``lengths`` file, computed here in memory (a shard's worth), or the ``offsets`` file itself,
    memory-mapped (formats 1 and 2). DataError naming the file when it does not describe ``tokens``."""
    if "lengths" in names:
        path = directory / names["lengths"]
        lengths = _load_array(path)
        if lengths.ndim != 1 or lengths.dtype.kind != "u":  # the writer picks the width (adlnmt.data.shards)
            raise DataError(f"expected a 1-d array of unsigned integer lengths, found {lengths.dtype} {lengths.shape}",
                            path)  # fmt: skip
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, dtype=np.int64, out=offsets[1:])
        offsets.flags.writeable = False
        if offsets[-1] != len(tokens):
            raise DataError(f"the lengths sum to {offsets[-1]} tokens, {tokens_path.name} holds {len(tokens)}", path)
        return offsets, path
    path = directory / names["offsets"]
    offsets = _load_array(path)
    if offsets.ndim != 1 or offsets.dtype != np.int64 or len(offsets) < 1:
        raise DataError(f"expected a 1-d int64 array, found {offsets.dtype} {offsets.shape}", path)
    if offsets[0] != 0 or offsets[-1] != len(tokens) or np.any(np.diff(offsets) < 0):
        raise DataError(f"offsets do not describe {tokens_path.name} ({len(tokens)} tokens)", path)
    return np.asarray(offsets), path


def _check_ids(tokens: np.ndarray, vocab_size: int, path: Path) -> None:
    """DataError naming ``path`` when a token id lies outside the vocabulary (e.g. the data of another vocabulary)."""
    if len(tokens) and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        found = int(tokens.max()) if int(tokens.max()) >= vocab_size else int(tokens.min())
        raise DataError(f"token id {found} is outside the vocabulary of {vocab_size} ids", path)


class Split:
    """One encoded split: sentence i's source is ``pieces + [EOS]`` (``[BOS] + pieces + [EOS]`` with source markers)
    and its target is the bare pieces (``collate`` adds BOS to the decoder input and EOS to the output).

    Token arrays are memory-mapped; ``files`` names per side its ``tokens`` and its ``lengths`` (or, before data
    format 3, ``offsets``), whose offsets are computed once, here (:func:`_offsets`). ``src_lengths`` /
    ``tgt_lengths`` count the tokens the model sees: the source with its EOS (and BOS), the target plus one (the length
    of both ``tgt_in`` and ``tgt_out``).
    """

    def __init__(
        self,
        name: str,
        directory: Path,
        files: dict[str, dict[str, str]],
        source_markers: bool,
        expected: int | None,
        vocab_sizes: dict[str, int] | None = None,
    ) -> None:
        self.name = name
        self.source_markers = source_markers
        self._tokens: dict[str, np.ndarray] = {}
        self._offsets: dict[str, np.ndarray] = {}
        for side in files:  # src, tgt
            tokens_path = directory / files[side]["tokens"]
            tokens = _load_array(tokens_path)
            if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
                raise DataError(f"expected a 1-d integer array, found {tokens.dtype} {tokens.shape}", tokens_path)
            offsets, index_path = _offsets(directory, files[side], tokens, tokens_path)
            if expected is not None and len(offsets) - 1 != expected:
                raise DataError(f"holds {len(offsets) - 1} sentences, the manifest says {expected}", index_path)
            if vocab_sizes is not None:
                _check_ids(tokens, vocab_sizes[side], tokens_path)
            self._tokens[side], self._offsets[side] = tokens, offsets
        if len(self._offsets["src"]) != len(self._offsets["tgt"]):
            raise DataError(
                f"source has {len(self._offsets['src']) - 1} sentences, target {len(self._offsets['tgt']) - 1}",
                index_path,
            )
        self._extra = 2 if source_markers else 1  # EOS, and BOS with source markers

    def __len__(self) -> int:
        return len(self._offsets["src"]) - 1

    @cached_property
    def src_lengths(self) -> np.ndarray:
        """Model source length of every sentence (``int64``), computed on first use."""
        return np.diff(self._offsets["src"]) + self._extra

    @cached_property
    def tgt_lengths(self) -> np.ndarray:
        """Model target length (of ``tgt_in`` and ``tgt_out``) of every sentence, computed on first use."""
        return np.diff(self._offsets["tgt"]) + 1

    def lengths(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``src_lengths`` and ``tgt_lengths`` of some sentences, read from the offsets (no array of all of them)."""
        src, tgt = self._offsets["src"], self._offsets["tgt"]
        return src[indices + 1] - src[indices] + self._extra, tgt[indices + 1] - tgt[indices] + 1

    def arrays(self, side: str) -> tuple[np.ndarray, np.ndarray]:
        """The memory-mapped ``tokens`` and the ``int64`` offsets of ``side`` (``"src"`` or ``"tgt"``), read-only."""
        return self._tokens[side], self._offsets[side]

    def src_pieces(self, i: int) -> np.ndarray:
        """Source subword ids of sentence ``i`` without any special token (a read-only view)."""
        offsets = self._offsets["src"]
        return self._tokens["src"][offsets[i] : offsets[i + 1]]

    def tgt_pieces(self, i: int) -> np.ndarray:
        """Target subword ids of sentence ``i`` without any special token (a read-only view)."""
        offsets = self._offsets["tgt"]
        return self._tokens["tgt"][offsets[i] : offsets[i + 1]]

    def src(self, i: int) -> np.ndarray:
        """Encoder input ids of sentence ``i`` (int64): pieces + [EOS], with BOS first when the data uses markers."""
        head = [BOS] if self.source_markers else []
        return np.concatenate([np.array(head, dtype=np.int64), self.src_pieces(i).astype(np.int64), [EOS]])

    def tgt(self, i: int) -> np.ndarray:
        """Target ids of sentence ``i`` (int64), pieces only."""
        return self.tgt_pieces(i).astype(np.int64)


@dataclass
class Batch:
    """A padded batch (PAD=0, right padding). ``tgt_in`` = [BOS] + target, ``tgt_out`` = target + [EOS]."""

    src: torch.Tensor  # [B, S] int64
    tgt_in: torch.Tensor  # [B, T] int64
    tgt_out: torch.Tensor  # [B, T] int64
    src_lengths: torch.Tensor  # [B] int64, real source tokens per sentence
    tgt_lengths: torch.Tensor  # [B] int64, real tgt_out tokens per sentence
    indices: np.ndarray  # [B] sentence ids within the split
    src_tokens: int  # real (non-pad) source tokens in the batch
    tgt_tokens: int  # real (non-pad) tgt_out tokens in the batch, i.e. the number of predicted tokens

    def __len__(self) -> int:
        return len(self.indices)

    def to(self, device: torch.device | str) -> Batch:
        """The same batch with its tensors on ``device``; to a GPU through pinned memory, without waiting for the
        device (the copies queue behind its work)."""
        import torch

        cuda = torch.device(device).type == "cuda"

        def move(tensor: torch.Tensor) -> torch.Tensor:
            return (tensor.pin_memory() if cuda else tensor).to(device, non_blocking=cuda)

        return replace(self, src=move(self.src), tgt_in=move(self.tgt_in), tgt_out=move(self.tgt_out),
                       src_lengths=move(self.src_lengths), tgt_lengths=move(self.tgt_lengths))  # fmt: skip


def make_batches(split: Split, batch_tokens: int, seed: int, epoch: int, shuffle: bool = True,
                 mixed_lengths: bool = False) -> list[np.ndarray]:  # fmt: skip
    """Token-budget, length-bucketed batches of the sentence ids of ``split`` (:func:`bucket`): every sentence
    exactly once. With ``shuffle``, random tie-breaks and batch order from ``np.random.default_rng((seed, epoch))``,
    so fully determined by (seed, epoch); ``shuffle=False`` gives length-sorted batches, ties in index order (for
    validation / inference). ``mixed_lengths`` (with ``shuffle``): every batch mixes lengths (what batch norm needs,
    whose statistics otherwise depend on the batch's length)."""
    rng = np.random.default_rng((seed, epoch)) if shuffle else None
    return bucket(np.arange(len(split)), split.src_lengths, split.tgt_lengths, batch_tokens, rng, mixed_lengths)


def bucket(ids: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray, batch_tokens: int,
           rng: np.random.Generator | None, mixed_lengths: bool = False) -> list[np.ndarray]:  # fmt: skip
    """Token-budget batches of ``ids`` (lengths aligned with them): every id exactly once.

    With ``rng``: ties of the (target length, source length) sort are broken by a random permutation, and the
    batch order is shuffled by the same generator (``mixed_lengths``: the permutation alone, no sort: every batch
    mixes lengths). Without: length-sorted, ties in the order of ``ids``. Consecutive sentences are grouped while
    ``max(S, T) * B <= batch_tokens`` (a sentence alone over the budget gets its own batch).
    """
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be positive, got {batch_tokens}")
    n = len(ids)
    if rng is not None:
        perm = rng.permutation(n)
        order = perm if mixed_lengths else perm[np.lexsort((src_len[perm], tgt_len[perm]))]
    else:
        order = np.lexsort((np.arange(n), src_len, tgt_len))
    widths = np.maximum(src_len, tgt_len)[order]
    batches = [ids[order[start:stop]] for start, stop in _budget_cuts(widths, batch_tokens)]
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def _budget_cuts(widths: np.ndarray, batch_tokens: int) -> list[tuple[int, int]]:
    """(start, stop) of each batch when ``widths`` are grouped greedily in order while ``max(width) * count <=
    batch_tokens`` (a sentence alone over the budget gets its own batch). Vectorized per batch: the product grows
    with the count, so a batch ends where it first exceeds the budget, within ``batch_tokens // min(width) + 1``."""
    n, cuts, start = len(widths), [], 0
    reach = batch_tokens // max(int(widths.min(initial=1)), 1) + 2
    counts = np.arange(1, reach + 1)
    while start < n:
        running = np.maximum.accumulate(widths[start : start + reach])
        over = np.flatnonzero(running * counts[: len(running)] > batch_tokens)
        size = max(int(over[0]), 1) if len(over) else len(running)
        cuts.append((start, start + size))
        start += size
    return cuts


def collate(split: Split, indices: np.ndarray | list[int]) -> Batch:
    """Pad the sentences ``indices`` of ``split`` into a Batch (PAD=0 on the right)."""
    import torch

    indices = np.asarray(indices, dtype=np.int64)
    sources = [split.src(int(i)) for i in indices]
    targets = [split.tgt(int(i)) for i in indices]
    size = len(indices)
    src_lengths = np.array([len(s) for s in sources], dtype=np.int64)
    tgt_lengths = np.array([len(t) + 1 for t in targets], dtype=np.int64)
    src = np.full((size, int(src_lengths.max(initial=0))), PAD, dtype=np.int64)
    tgt_in = np.full((size, int(tgt_lengths.max(initial=0))), PAD, dtype=np.int64)
    tgt_out = np.full_like(tgt_in, PAD)
    for row, (s, t) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(s)] = s
        tgt_in[row, 0] = BOS
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
        tgt_out[row, len(t)] = EOS
    return Batch(
        src=torch.from_numpy(src),
        tgt_in=torch.from_numpy(tgt_in),
        tgt_out=torch.from_numpy(tgt_out),
        src_lengths=torch.from_numpy(src_lengths),
        tgt_lengths=torch.from_numpy(tgt_lengths),
        indices=indices,
        src_tokens=int(src_lengths.sum()),
        tgt_tokens=int(tgt_lengths.sum()),
    )


def shard(batches: list[np.ndarray], rank: int, world_size: int) -> list[np.ndarray]:
    """The batches of one DDP rank: every rank gets the same number, ``len(batches) // world_size``.

    Rank r takes batches r, r + world_size, ... of the first ``world_size * (len(batches) // world_size)``; the
    remaining (< world_size) batches at the end are dropped for this epoch (of a window: :mod:`adlnmt.data.stream`).
    Since the batch order is shuffled per epoch, different sentences are dropped in different epochs. Meant for
    training; evaluate on one rank or with all batches. Raises DataError (a ValueError) when there are fewer batches
    than ranks.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank {rank}, world_size {world_size}")
    per_rank = len(batches) // world_size
    if batches and per_rank == 0:
        raise DataError(f"{len(batches)} batches cannot feed {world_size} ranks; lower --batch-tokens")
    return batches[rank : per_rank * world_size : world_size]
