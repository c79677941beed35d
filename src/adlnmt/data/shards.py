"""Token-id shards: the one owner of their files. A shard holds the encoded pairs of one corpus, per side a flat
``.npy`` array of subword ids (``uint16`` when the vocabularies fit, else ``int32``) and a ``.npy`` array of the
length of each sentence in the narrowest unsigned type that holds the longest (``uint8``, ``uint16`` or ``uint32``):
pair i is ``tokens[offsets[i]:offsets[i + 1]]`` with ``offsets`` the cumulative sum of the lengths, which
:class:`~adlnmt.data.dataset.Split` computes when it opens the shard (data format 3; formats 1 and 2 stored the
``int64`` offsets instead, 8 bytes per sentence and side). Both arrays are memory-mappable. Its manifest entry names
the files with their sizes and SHA-256 digests, which :mod:`adlnmt.data.digests` checks before a shard is read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adlnmt.atomic import atomic_write
from adlnmt.data.data_dir import SIDES
from adlnmt.data.digests import file_digest

LENGTH_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32))  # narrowest first


def token_dtype(largest_vocab: int) -> np.dtype:
    """``uint16`` when every id fits (vocabularies of at most 65,536 ids), else ``int32``."""
    return np.dtype(np.uint16) if largest_vocab <= 2**16 else np.dtype(np.int32)


def length_dtype(longest: int) -> np.dtype:
    """The narrowest of LENGTH_DTYPES that holds ``longest`` (``uint8`` up to 255 pieces, ``uint16`` up to 65,535)."""
    for dtype in LENGTH_DTYPES:
        if longest <= np.iinfo(dtype).max:
            return dtype
    raise ValueError(f"a sentence of {longest} pieces is longer than a shard can store")


def shard_stem(split: str, corpus: str, index: int) -> str:
    """Common start of the file names of one shard, e.g. ``train.de-en.00003``."""
    return f"{split}.{corpus}.{index:05d}"


def _save(path: Path, values: np.ndarray) -> None:
    with path.open("wb") as handle:  # a handle: np.save would append ".npy" to a temporary's name
        np.save(handle, values, allow_pickle=False)


@dataclass
class ShardBuilder:
    """The pairs of one shard as they are encoded: per side the id chunks and sentence lengths."""

    dtype: np.dtype
    chunks: dict[str, list[np.ndarray]] = field(default_factory=lambda: {side: [] for side in SIDES})
    lengths: dict[str, list[np.ndarray]] = field(default_factory=lambda: {side: [] for side in SIDES})
    pairs: int = 0

    def add(self, side_ids: dict[str, np.ndarray], side_lengths: dict[str, np.ndarray]) -> None:
        """Append encoded pairs: per side the concatenated ids and the length of each sentence."""
        for side in SIDES:
            self.chunks[side].append(side_ids[side].astype(self.dtype, copy=False))
            self.lengths[side].append(side_lengths[side].astype(np.int64, copy=False))
        self.pairs += len(side_lengths["src"])

    def write(self, out: Path, stem: str) -> dict[str, Any]:
        """Write the files atomically (each a temporary renamed into place) and return the manifest entry."""
        entry: dict[str, Any] = {"pairs": self.pairs, "files": {}, "bytes": {}, "sha256": {}}
        for side in SIDES:
            tokens = np.concatenate(self.chunks[side]) if self.chunks[side] else np.zeros(0, self.dtype)
            lengths = np.concatenate(self.lengths[side]) if self.lengths[side] else np.zeros(0, np.int64)
            lengths = lengths.astype(length_dtype(int(lengths.max(initial=0))))
            names = {"tokens": f"{stem}.{side}.tokens.npy", "lengths": f"{stem}.{side}.lengths.npy"}
            entry["files"][side] = names
            entry[f"{side}_pieces"] = len(tokens)
            for kind, values in (("tokens", tokens), ("lengths", lengths)):
                path = out / names[kind]
                atomic_write(path, lambda tmp, values=values: _save(tmp, values))
                entry["bytes"][names[kind]] = path.stat().st_size
                entry["sha256"][names[kind]] = file_digest(path)
        return entry
