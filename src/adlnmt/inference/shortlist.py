"""Lexical shortlists: the one owner of their file format, and the target ids a batch may output.

A shortlist (``adlnmt shortlist``, built by :mod:`adlnmt.inference.shortlist_build`) keeps, per source piece, up to
``k`` target pieces, best first, and the ``k`` most frequent target pieces. A batch may output the union over its
sentences of their source pieces' targets, the frequent pieces, the specials (PAD, UNK, BOS, EOS) and the ids of any
target prefix (:meth:`Shortlist.allowed`): outputs depend on the other sentences of the batch, as in Marian and
Sockeye. The search applies it with :class:`~adlnmt.inference.vocabulary_slice.VocabularySlice`; CTranslate2 reads
it as its vocabulary map (:func:`vmap_text`, ``vmap.txt``).

File (safetensors, no pickle): int64 arrays ``offsets`` [src_size + 1] and ``targets`` (the targets of source id s
are ``targets[offsets[s]:offsets[s + 1]]``, compressed sparse rows) and ``frequent`` [≤ k]; the metadata holds the
format name and version, ``k``, the building method, the vocabulary sizes and the SHA-256 of the source and target
sentencepiece models: a shortlist is refused by a model of other vocabularies. Without PyTorch.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from adlnmt.data.vocab import SPECIAL_IDS
from adlnmt.errors import UserError
from adlnmt.store.atomic import atomic_write

if TYPE_CHECKING:
    from adlnmt.data.data_dir import DataDir
    from adlnmt.data.vocab import Vocab

FORMAT = "adlnmt-shortlist"
FORMAT_VERSION = 2  # 2: vocabularies digested by their tables (1: by their files' bytes, which hold a path)
SPECIALS = tuple(sorted(SPECIAL_IDS.values()))  # always allowed: PAD, UNK, BOS, EOS keep their ids in a slice
VMAP = "vmap.txt"  # CTranslate2 reads its vocabulary map from this file in the model directory


def check_k(k: int) -> int:
    """``k`` when it is a positive number of target pieces, else a UserError."""
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise UserError(f"shortlist k must be a positive number of target pieces, got {k!r}")
    return k


def vocabulary_digests(data: DataDir) -> tuple[str, str]:
    """The :meth:`Vocab.digest` of the source and target vocabularies of a data, model or export directory."""
    return data.src_vocab.digest(), data.tgt_vocab.digest()


@dataclass(frozen=True)
class Shortlist:
    """Per source id up to ``k`` target ids, best first, and the ``k`` most frequent target ids."""

    k: int
    method: str
    src_digest: str
    tgt_digest: str
    src_size: int
    tgt_size: int
    offsets: np.ndarray  # [src_size + 1] int64
    targets: np.ndarray  # [offsets[-1]] int64
    frequent: np.ndarray  # [≤ k] int64

    def translations(self, source_id: int) -> np.ndarray:
        """The target ids of ``source_id``, best first."""
        return self.targets[self.offsets[source_id] : self.offsets[source_id + 1]]

    def allowed(self, sources: Sequence[Sequence[int]], prefixes: Sequence[Sequence[int]] | None = None) -> np.ndarray:
        """The sorted target ids a batch of encoded ``sources`` may output: the specials, the frequent ids, the
        targets of every source id of the batch and the ids of its target ``prefixes``."""
        ids = np.unique(np.fromiter((i for s in sources for i in s), dtype=np.int64))
        ids = ids[(ids >= 0) & (ids < self.src_size)]
        starts, ends = self.offsets[ids], self.offsets[ids + 1]
        rows = [self.targets[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        forced = np.fromiter((i for p in prefixes or () for i in p), dtype=np.int64)
        return np.unique(np.concatenate([np.array(SPECIALS, dtype=np.int64), self.frequent, forced, *rows]))

    def check_vocabularies(self, data: DataDir, path: str | Path) -> None:
        """A UserError when the shortlist in ``path`` was built for other vocabularies than ``data``'s."""
        src, tgt = vocabulary_digests(data)
        wrong = [side for side, mine, theirs in (("source", self.src_digest, src), ("target", self.tgt_digest, tgt))
                 if mine != theirs]  # fmt: skip
        if wrong:
            raise UserError(
                f"{path}: this shortlist was built for another {' and '.join(wrong)} vocabulary than the model's "
                f"({data.path}); build one from the model's data with `adlnmt shortlist`"
            )

    def save(self, path: str | Path) -> None:
        """Write the shortlist to ``path`` atomically."""
        from safetensors.numpy import save_file

        metadata = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "k": str(self.k), "method": self.method,
                    "src_digest": self.src_digest, "tgt_digest": self.tgt_digest, "src_size": str(self.src_size),
                    "tgt_size": str(self.tgt_size)}  # fmt: skip
        arrays = {"offsets": self.offsets, "targets": self.targets, "frequent": self.frequent}
        atomic_write(Path(path), lambda tmp: save_file(arrays, str(tmp), metadata=metadata))

    @classmethod
    def load(cls, path: str | Path) -> Shortlist:
        """The shortlist in ``path``, every field and id checked; a UserError naming the file and what is wrong."""
        path = Path(path)
        if path.is_dir():
            raise UserError(f"{path}: a directory, not a shortlist file (give the file `adlnmt shortlist --out` wrote)")
        if not path.is_file():
            raise UserError(f"{path}: no such shortlist file (build one with `adlnmt shortlist`)")
        try:
            from safetensors import safe_open

            with safe_open(str(path), "np") as handle:
                metadata = handle.metadata() or {}
                arrays = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118 (not a dict)
        except Exception as err:  # safetensors raises its own error types for damaged files
            raise UserError(f"{path}: not a shortlist file ({str(err).splitlines()[0] if str(err) else err})") from None
        if metadata.get("format") != FORMAT or metadata.get("format_version") != str(FORMAT_VERSION):
            found = f"{metadata.get('format')!r} version {metadata.get('format_version')!r}"
            raise UserError(f"{path}: not a shortlist of format {FORMAT} version {FORMAT_VERSION} (found {found}); "
                            "build it again with `adlnmt shortlist`")  # fmt: skip
        try:
            numbers = {name: int(metadata[name]) for name in ("k", "src_size", "tgt_size")}
            shortlist = cls(**numbers, method=metadata["method"], src_digest=metadata["src_digest"],
                            tgt_digest=metadata["tgt_digest"], offsets=arrays["offsets"], targets=arrays["targets"],
                            frequent=arrays["frequent"])  # fmt: skip
        except (KeyError, ValueError) as err:
            raise UserError(f"{path}: damaged shortlist (bad or missing entry {err})") from None
        if problem := shortlist.problem():
            raise UserError(f"{path}: damaged shortlist ({problem})")
        return shortlist

    def problem(self) -> str | None:
        """What makes the fields inconsistent (an untrusted file), None when nothing does."""
        if self.k <= 0 or self.src_size <= len(SPECIALS) or self.tgt_size <= len(SPECIALS):
            return f"k {self.k}, vocabulary sizes {self.src_size} and {self.tgt_size}"
        for name in ("offsets", "targets", "frequent"):
            array = getattr(self, name)
            if array.dtype != np.int64 or array.ndim != 1:
                return f"{name} is {array.dtype} of shape {array.shape}, not a 1-d int64 array"
        counts = np.diff(self.offsets)
        if len(self.offsets) != self.src_size + 1 or self.offsets[0] != 0 or self.offsets[-1] != len(self.targets):
            return f"offsets do not describe {len(self.targets)} targets of {self.src_size} source ids"
        if (counts < 0).any() or (counts > self.k).any() or len(self.frequent) > self.k:
            return f"a list is longer than k = {self.k} or of negative length"
        ids = np.concatenate([self.targets, self.frequent])
        if len(ids) and (ids.min() < 0 or ids.max() >= self.tgt_size):
            return f"a target id lies outside the target vocabulary of {self.tgt_size}"
        return None


@functools.lru_cache(maxsize=4)
def _load_cached(path: Path, stamp: tuple[int, int]) -> Shortlist:
    return Shortlist.load(path)


def load_shortlist(path: str | Path) -> Shortlist:
    """:meth:`Shortlist.load`, read once per file version (the search asks for it per call)."""
    path = Path(path).resolve()
    try:
        status = path.stat()
    except OSError:
        return Shortlist.load(path)  # the error naming the file
    return _load_cached(path, (status.st_mtime_ns, status.st_size))


def vmap_text(shortlist: Shortlist, src_vocab: Vocab, tgt_vocab: Vocab) -> str:
    """CTranslate2's vocabulary map of ``shortlist``: one line per source piece with targets, ``piece<TAB>targets``
    (space-separated pieces), and a first line with an empty key: the frequent pieces (always allowed)."""
    lines = ["\t" + " ".join(tgt_vocab.piece(int(i)) for i in shortlist.frequent)]
    for source in range(len(SPECIALS), shortlist.src_size):
        targets = shortlist.translations(source)
        if len(targets):
            lines.append(src_vocab.piece(source) + "\t" + " ".join(tgt_vocab.piece(int(i)) for i in targets))
    return "\n".join(lines) + "\n"
