"""``adlnmt shortlist``: a lexical shortlist (:mod:`adlnmt.inference.shortlist`) from a prepared data directory's
training data, by sentence-level co-occurrence.

Per source piece s its ``k`` target pieces t of highest Dice coefficient 2·c(s, t) / (c(s) + c(t)), where c counts the
training sentence pairs that contain a piece (once per pair) and c(s, t) those that contain both (ties: more pairs
first, then the lower id); and the ``k`` target pieces most frequent as tokens. Specials are neither keys nor
targets (they are always allowed). No aligner is needed; the counts are exact (numpy, in chunks of sentences).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adlnmt.bounds import at_least, flag_type
from adlnmt.data.data_dir import DataDir
from adlnmt.errors import UserError
from adlnmt.inference.shortlist import SPECIALS, Shortlist, check_k, vocabulary_digests
from adlnmt.store.atomic import check_writable, path_flag

if TYPE_CHECKING:
    from adlnmt.data.dataset import Split

METHOD = "dice"
CHUNK = 20_000  # sentence pairs counted at a time


def _merge(codes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the ``counts`` of equal ``codes``: the distinct codes, ascending, and their totals."""
    distinct, inverse = np.unique(codes, return_inverse=True)
    return distinct, np.bincount(inverse, weights=counts, minlength=len(distinct)).astype(np.int64)


def _content(pieces: np.ndarray) -> np.ndarray:
    """The distinct non-special ids of a sentence's pieces."""
    ids = np.unique(pieces.astype(np.int64))
    return ids[ids >= len(SPECIALS)]


def _training_chunks(data: DataDir) -> Iterator[tuple[Split, range]]:
    """The training sentences in chunks of at most CHUNK, shard after shard (each opened as it is reached)."""
    for index in range(len(data.shards("train"))):
        split = data.open_shard("train", index)
        for start in range(0, len(split), CHUNK):
            yield split, range(start, min(start + CHUNK, len(split)))


def cooccurrences(data: DataDir) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Counts over the training split, shard by shard: pair codes s·V_tgt + t with their sentence counts, the
    sentence counts of each source and target id, and the token counts of each target id."""
    src_size, tgt_size = data.src_vocab.size, data.tgt_vocab.size
    codes, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    src_sentences, tgt_sentences = np.zeros(src_size, np.int64), np.zeros(tgt_size, np.int64)
    tgt_tokens = np.zeros(tgt_size, np.int64)
    for split, sentences in _training_chunks(data):
        chunk = []
        for i in sentences:
            source, target = _content(split.src_pieces(i)), split.tgt_pieces(i).astype(np.int64)
            distinct = _content(target)
            src_sentences[source] += 1
            tgt_sentences[distinct] += 1
            np.add.at(tgt_tokens, target, 1)
            chunk.append((source[:, None] * tgt_size + distinct[None, :]).ravel())
        new_codes, new_counts = np.unique(np.concatenate([np.zeros(0, np.int64), *chunk]), return_counts=True)
        codes, counts = _merge(np.concatenate([codes, new_codes]), np.concatenate([counts, new_counts]))
    return codes, counts, src_sentences, tgt_sentences, tgt_tokens


def build_shortlist(data: DataDir, k: int) -> Shortlist:
    """The shortlist of ``data``'s training split with up to ``k`` targets per source piece (see the module)."""
    check_k(k)
    src_size, tgt_size = data.src_vocab.size, data.tgt_vocab.size
    codes, counts, src_sentences, tgt_sentences, tgt_tokens = cooccurrences(data)
    source, target = codes // tgt_size, codes % tgt_size
    dice = 2 * counts / (src_sentences[source] + tgt_sentences[target])
    order = np.lexsort((target, -counts, -dice, source))  # by source, then best first
    source, target = source[order], target[order]
    first = np.searchsorted(source, source, side="left")  # where each source's run starts
    kept = np.arange(len(source)) - first < k
    source, target = source[kept], target[kept]
    offsets = np.zeros(src_size + 1, np.int64)
    np.cumsum(np.bincount(source, minlength=src_size), out=offsets[1:])
    tgt_tokens[list(SPECIALS)] = 0
    ranked = np.lexsort((np.arange(tgt_size), -tgt_tokens))
    frequent = ranked[: min(k, int((tgt_tokens > 0).sum()))].astype(np.int64)
    src_digest, tgt_digest = vocabulary_digests(data)
    return Shortlist(k, METHOD, src_digest, tgt_digest, src_size, tgt_size, offsets, target.astype(np.int64), frequent)


def cmd_shortlist(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.is_dir():
        raise UserError(f"{out}: a directory; give the shortlist file's path (e.g. {out / 'lex.safetensors'})")
    if out.exists() and not args.overwrite:
        raise UserError(f"{out} exists; pass --overwrite to replace it")
    data = DataDir.load(args.data)
    check_writable(str(out), inputs=data.files())
    shortlist = build_shortlist(data, args.k)
    shortlist.save(out)
    lists = np.diff(shortlist.offsets)
    print(f"wrote {out}: {int((lists > 0).sum()):,} source pieces with up to {args.k} targets each "
          f"(mean {lists[lists > 0].mean() if lists.any() else 0:.1f}) and {len(shortlist.frequent)} frequent "
          f"target pieces")  # fmt: skip
    return 0


def add_commands(commands: Any) -> None:
    shortlist = commands.add_parser(
        "shortlist", help="build a lexical shortlist (top-k target pieces per source piece) from a data directory"
    )
    shortlist.add_argument(
        "--data",
        required=True,
        type=path_flag,
        help="prepared data directory (adlnmt prepare); reads all its training shards",
    )
    shortlist.add_argument(
        "--k",
        type=flag_type(int, at_least(1)),
        default=50,
        help="target pieces per source piece, and frequent target pieces always allowed (default %(default)s)",
    )
    shortlist.add_argument("--out", required=True, type=path_flag, help="the shortlist file to write (safetensors)")
    shortlist.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    shortlist.set_defaults(func=cmd_shortlist)
