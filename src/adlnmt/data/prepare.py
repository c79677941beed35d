"""``prepare``: train subword models on a sample, encode and filter one or several parallel corpora as a stream (in
worker processes), and write a data directory of memory-mappable token shards in bounded memory.

Layout of a prepared directory (format 3; every path relative to it; ``manifest.json`` is written last, so a directory
with a manifest is complete, and it names every file with its size and SHA-256):

* ``spm.model`` (joint) or ``spm.src.model`` + ``spm.tgt.model`` (separate): sentencepiece models, trained on a
  uniform reservoir sample of at most ``spm_sample`` training pairs (all of them, in corpus order, when fewer);
* ``train.{corpus}.{i:05d}.{side}.tokens.npy`` / ``.lengths.npy``: shard i of a training corpus (about
  ``shard_size`` pairs each; format in :mod:`adlnmt.data.shards`), pieces only (no BOS/EOS, which ``Split`` adds;
  the target-language tag, when used, is the first source piece);
* ``valid.{side}.tokens.npy`` / ``.lengths.npy``: the validation pairs of every corpus, one after the other
  (``valid_corpora`` in the manifest says which range is whose); ``valid.src.txt`` / ``valid.tgt.txt``: their raw
  text (references for BLEU);
* ``manifest.json``: counts (per split and per corpus), vocabulary sizes, options, corpora and their weights, shards.

An interrupted prepare leaves ``prepare.state.json`` (the shards written so far, committed one by one): the same
command continues after the last shard; other options or changed inputs start clean.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import random
import shutil
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from itertools import chain, compress, takewhile
from pathlib import Path
from typing import Any

import numpy as np

from adlnmt.atomic import atomic_write, fsync_dir
from adlnmt.data.corpus import (
    BLOCK_LINES,
    RATIO_MIN_LEN,
    LineBlock,
    blank,
    decode_block,
    length_faults,
    read_line_blocks,
    read_parallel,
    require_regular_file,
)
from adlnmt.data.data_dir import FORMAT_VERSION, MANIFEST, SIDES
from adlnmt.data.digests import file_digest
from adlnmt.data.language_codes import SourceEncoder
from adlnmt.data.options import PREPARE_DEFAULTS, PrepareOptions
from adlnmt.data.shards import ShardBuilder, shard_stem, token_dtype
from adlnmt.data.vocab import SPECIAL_IDS, UNK, Vocab, language_tag, train_sentencepiece
from adlnmt.data.vocab_from import check_model_tags, copy_vocabularies, model_source_markers
from adlnmt.errors import DataError
from adlnmt.jsontext import JsonError, parse_json

CHUNK_PAIRS = 8192  # shards end after a multiple of this many non-blank pairs of their corpus
STATE = "prepare.state.json"
DEFAULT_SPM_SAMPLE = 1_000_000
DEFAULT_SHARD_SIZE = 1_000_000
LEGACY_CORPUS = "train"  # the corpus name of --train-src/--train-tgt
_NOTHING_LEFT = {
    "train": "no training pairs left after removing empty, too long and badly proportioned pairs",
    "valid": "no validation pairs left after removing empty pairs",
}


@dataclass(frozen=True)
class Corpus:
    """One parallel corpus: its name, the two files and its sampling weight."""

    name: str
    src: Path
    tgt: Path
    weight: float = 1.0


def parse_corpus(text: str, flag: str = "--train", weighted: bool = True) -> Corpus:
    """``NAME=SRC,TGT[:WEIGHT]`` (the weight only where ``weighted``) as a Corpus; DataError saying what is wrong."""
    name, sep, files = text.partition("=")
    if not sep or not name.strip() or "," not in files:
        raise DataError(f"{flag} expects NAME=SRC,TGT{'[:WEIGHT]' if weighted else ''}, got {text!r}")
    name = name.strip()
    if not all(c.isalnum() or c in "-_" for c in name):
        raise DataError(f"{flag}: corpus name {name!r} may hold only letters, digits, '-' and '_'")
    weight = 1.0
    head, colon, tail = files.rpartition(":")
    if weighted and colon and "," in head and not any(c in tail for c in "/\\"):  # "x:/path": a path, no weight
        try:
            weight = float(tail)
        except ValueError:
            raise DataError(f"{flag} {name}: weight {tail!r} is not a number") from None
        if not (math.isfinite(weight) and weight > 0):
            raise DataError(f"{flag} {name}: weight must be a positive number, got {tail}")
        files = head
    src, _, tgt = files.partition(",")
    if not src or not tgt or "," in tgt:
        raise DataError(f"{flag} {name}: expected two files SRC,TGT, got {files!r}")
    for path in (src, tgt):  # "valid.tgt:0.5" reported as "valid.tgt:0.5: file not found" reads as file:line
        head, _, tail = path.rpartition(":")
        if head and not Path(path).exists() and Path(head).is_file() and _is_number(tail):
            why = "one weight per corpus, after TGT" if weighted else "a validation set takes no weight"
            raise DataError(f"{flag} {name}: no file {path!r}, but {head} followed by ':{tail}' ({why})")
    return Corpus(name, Path(src), Path(tgt), weight)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def target_language(corpus: str) -> str:
    """The target language of a corpus named ``SRC-TGT`` (e.g. ``de-en`` → ``en``); DataError otherwise."""
    parts = corpus.split("-")
    if len(parts) != 2 or not all(parts):
        raise DataError(f"corpus name {corpus!r} does not name its languages as SRC-TGT (e.g. de-en), which "
                        "--target-tags needs")  # fmt: skip
    return parts[1]


def _target_tags(corpora: Sequence[Corpus]) -> dict[str, str]:
    """The target-language tag of every corpus (``--target-tags``); DataError for one language spelled in two cases
    (``en-DE`` and ``fr-de``), which would be two tags, two languages to the model."""
    tags: dict[str, str] = {}
    for corpus in corpora:
        tag = tags[corpus.name] = language_tag(target_language(corpus.name))
        twins = (name for name, seen in tags.items() if seen != tag and seen.casefold() == tag.casefold())
        if other := next(twins, None):
            raise DataError(f"--target-tags: corpora {other!r} and {corpus.name!r} spell one target language in two "
                            f"cases ({tags[other]} and {tag}); spell it alike")  # fmt: skip
    return tags


# --- encoding (in worker processes) -----------------------------------------------------------------------------


@dataclass
class Encoder:
    """What a worker needs to encode chunks: the vocabularies and the filter."""

    vocabs: dict[str, Vocab]
    max_len: int
    max_ratio: float

    def __post_init__(self) -> None:  # an imported multi-target model's codes (>>fra<<) stay one source piece
        self.encode = {"src": SourceEncoder(self.vocabs["src"]).batch, "tgt": self.vocabs["tgt"].encode_batch}


_ENCODER: Encoder | None = None


def _init_worker(models: dict[str, bytes], max_len: int, max_ratio: float) -> None:
    global _ENCODER
    _ENCODER = Encoder({side: Vocab.from_bytes(data) for side, data in models.items()}, max_len, max_ratio)


FATES = ("kept", "empty", "too_long", "bad_ratio")  # what becomes of a non-blank pair (Encoded.fates)
KEPT, EMPTY, TOO_LONG, BAD_RATIO = range(len(FATES))


@dataclass
class Encoded:
    """One encoded block of lines, or a part of one: per non-blank pair its line number and its fate (an index into
    FATES); per side the ids of the kept pairs back to back and their lengths; the lines read and the kept pairs
    truncated (for a split that keeps references, which also keeps their raw text); the number of its last line."""

    lines: np.ndarray
    fates: np.ndarray
    ids: dict[str, np.ndarray]
    lengths: dict[str, np.ndarray]
    read: int = 0
    truncated: int = 0
    text: dict[str, list[str]] = field(default_factory=dict)
    end: int = 0

    def part(self, start: int, stop: int) -> Encoded:
        """The non-blank pairs ``start:stop`` (of a split without references)."""
        kept_before = np.count_nonzero(self.fates[:start] == KEPT), np.count_nonzero(self.fates[:stop] == KEPT)
        ids, lengths = {}, {}
        for side in SIDES:
            ends = np.cumsum(self.lengths[side])
            first, last = (int(ends[k - 1]) if k else 0 for k in kept_before)
            ids[side] = self.ids[side][first:last]
            lengths[side] = self.lengths[side][kept_before[0] : kept_before[1]]
        return Encoded(self.lines[start:stop], self.fates[start:stop], ids, lengths)


def encode_block(block: LineBlock, names: tuple[Path, Path], tag: int | None, keeps_references: bool) -> Encoded:
    """Decode a block of lines (``names``: its files, for errors), drop blank pairs, encode the rest, drop (train) or
    truncate (valid) them by length, prepend the source tag id ``tag``; DataError for invalid UTF-8.

    Text that normalizes to nothing counts as empty. The tag is not counted by the length filter.
    """
    assert _ENCODER is not None, "encode_block runs after _init_worker"
    enc = _ENCODER
    src, tgt, error = decode_block(block, *names)
    if error is not None:
        raise error
    keep = [i for i, pair in enumerate(zip(src, tgt, strict=True)) if not blank(*pair)]
    texts = {"src": [src[i] for i in keep], "tgt": [tgt[i] for i in keep]}
    encoded = {side: enc.encode[side](texts[side]) for side in SIDES}
    lengths = {side: np.fromiter(map(len, encoded[side]), np.int64, count=len(keep)) for side in SIDES}
    empty = (lengths["src"] == 0) | (lengths["tgt"] == 0)
    fates = np.full(len(keep), KEPT, dtype=np.int8)
    truncated = 0
    if keeps_references:
        truncated = int(np.count_nonzero(~empty & ((lengths["src"] > enc.max_len) | (lengths["tgt"] > enc.max_len))))
        encoded = {side: [ids[: enc.max_len] for ids in encoded[side]] for side in SIDES}
        lengths = {side: np.minimum(lengths[side], enc.max_len) for side in SIDES}
    else:
        too_long, bad_ratio = length_faults(lengths["src"], lengths["tgt"], enc.max_len, enc.max_ratio)
        fates[too_long] = TOO_LONG
        fates[bad_ratio] = BAD_RATIO
    fates[empty] = EMPTY
    kept = fates == KEPT
    ids = {}
    for side in SIDES:
        lengths[side] = lengths[side][kept]
        chosen = encoded[side] if kept.all() else compress(encoded[side], kept)
        ids[side] = np.fromiter(chain.from_iterable(chosen), np.int32, count=int(lengths[side].sum()))
    if tag is not None:
        ids["src"] = np.insert(ids["src"], np.cumsum(lengths["src"]) - lengths["src"], tag)
        lengths["src"] = lengths["src"] + 1
    text = {side: list(compress(texts[side], kept)) for side in SIDES} if keeps_references else {}
    return Encoded(
        np.asarray(keep, np.int64) + block.first,
        fates,
        ids,
        lengths,
        len(block.src),
        truncated,
        text,
        block.first + len(block.src) - 1,
    )


class _Ready:
    """A result computed in this process, read like a pool's pending result."""

    def __init__(self, value: Encoded) -> None:
        self.value = value

    def get(self) -> Encoded:
        return self.value


class EncoderPool:
    """Encodes blocks of lines in order, in ``workers`` processes (or in this one with 1), at most 2 × workers in
    flight."""

    def __init__(self, vocabs: dict[str, Vocab], options: PrepareOptions, workers: int) -> None:
        models = {side: vocab.to_bytes() for side, vocab in vocabs.items()}
        self.pool = None
        self.depth = 2 * workers
        if workers > 1:
            context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
            init = (models, options.max_len, options.max_ratio)
            self.pool = context.Pool(workers, initializer=_init_worker, initargs=init)
        else:
            _init_worker(models, options.max_len, options.max_ratio)

    def map(self, corpus: Corpus, tag: int | None, keeps_references: bool, skip: int = 0) -> Iterator[Encoded]:
        """The encoded blocks of a corpus's lines after the first ``skip``, in order. Errors come in the order of the
        lines: one found at the end of the files is raised once every block before it is encoded."""
        names = (corpus.src, corpus.tgt)
        blocks = read_line_blocks(corpus.src, corpus.tgt, BLOCK_LINES, skip)
        pending: deque[Any] = deque()
        at_end: DataError | None = None
        while True:
            try:
                block = next(blocks)
            except StopIteration:
                break
            except DataError as err:
                at_end = err
                break
            task = (block, names, tag, keeps_references)
            pending.append(
                _Ready(encode_block(*task)) if self.pool is None else self.pool.apply_async(encode_block, task)
            )
            if len(pending) >= self.depth:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
        if at_end is not None:
            raise at_end

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()


# --- the sample for sentencepiece ------------------------------------------------------------------------------


def reservoir_sample(corpora: Sequence[Corpus], size: int, seed: int = 1) -> list[tuple[str, str]]:
    """A uniform sample of at most ``size`` non-empty training pairs of all corpora (reservoir sampling, seeded), in
    corpus order: every pair, in order, when there are no more than ``size``."""
    rng = random.Random(seed)
    sample: list[tuple[int, tuple[str, str]]] = []
    seen = 0
    for corpus in corpora:
        for pair in read_parallel(corpus.src, corpus.tgt):
            if seen < size:
                sample.append((seen, pair))
            else:
                slot = rng.randrange(seen + 1)
                if slot < size:
                    sample[slot] = (seen, pair)
            seen += 1
    sample.sort(key=lambda item: item[0])
    return [pair for _, pair in sample]


def _drain(sample: list[tuple[str, str]], index: int | None) -> Iterator[str]:
    """The sentences of the sample (both sides, or side ``index``) in order, each pair released once fed, so that
    the sample and sentencepiece's copy of it are not both whole in memory."""
    sample.reverse()
    while sample:
        pair = sample.pop()
        yield from pair if index is None else (pair[index],)


def _train_vocabs(
    sample: list[tuple[str, str]], source: Path, out: Path, options: PrepareOptions, tags: Sequence[str]
) -> dict[str, str]:
    """Train the sentencepiece model(s) on the sample (emptied); the model file name per side. Tags go into the
    source model (and the joint one)."""
    if options.joint:
        text = _drain(sample, None)
        model = train_sentencepiece(text, out / "spm", options.vocab_size, options.model_type, source, tags)
        return {side: model.name for side in SIDES}
    files = {}
    for index, side in enumerate(SIDES):
        text = _drain(sample, index) if side == "tgt" else (pair[index] for pair in sample)
        side_tags = tags if side == "src" else ()
        model = train_sentencepiece(text, out / f"spm.{side}", options.vocab_size, options.model_type, source,
                                    side_tags)  # fmt: skip
        files[side] = model.name
    return files


# --- state, manifest ---------------------------------------------------------------------------------------------


def _input_identity(path: Path) -> dict[str, Any]:
    stat = path.stat()
    return {"path": str(path.resolve()), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _fingerprint(settings: dict[str, Any], corpora: Sequence[Corpus], valid: Sequence[Corpus],
                 vocab_from: str | Path | None) -> str:  # fmt: skip
    """What an interrupted prepare must match to be continued: the data format written, options and the identity of
    every input file (shards of another format are never continued), and the content of the vocabulary copied
    (``vocab_from``: shards encoded with another would be mixed with the new one's)."""
    inputs = [[c.name, _input_identity(c.src), _input_identity(c.tgt), c.weight] for c in (*corpora, *valid)]
    if vocab_from is not None and Path(vocab_from).is_dir():  # (one that is not: refused when it is copied)
        files = sorted(path for path in Path(vocab_from).iterdir() if path.is_file())
        inputs.append({path.name: file_digest(path) for path in files})
    return hashlib.sha256(json.dumps([FORMAT_VERSION, settings, inputs], sort_keys=True).encode()).hexdigest()


def _write_json(path: Path, value: Any) -> None:
    text = json.dumps(value, indent=2) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8", newline="\n"))


def _listed_files(record: dict[str, Any]) -> set[str]:
    """Every file a manifest or a prepare state names (to remove when a directory is replaced or started clean)."""
    names = set(record.get("spm", {}).values()) | {f"{Path(n).stem}.vocab" for n in record.get("spm", {}).values()}
    shard_lists = [
        *record.get("shards", {}).values(),
        *(c.get("shards", []) for c in record.get("corpora", {}).values()),
    ]
    for shards in shard_lists:
        for shard in shards:
            names |= set(shard.get("bytes", {}))
    for files in record.get("files", {}).values():  # format 1
        names |= {str(name) for side in files.values() for name in side.values()}
    for text in record.get("text", {}).values():
        names |= set(text.values())
    return names


def _remove_files(out: Path, names: set[str]) -> None:
    for name in names:
        if name and "/" not in name and name not in (MANIFEST, STATE):
            (out / name).unlink(missing_ok=True)


def _claim_output(out: Path, overwrite: bool, inputs: Sequence[Path]) -> Path:
    """The directory to prepare in: ``out`` (new, empty, or an interrupted prepare's), or, replacing the prepared data
    set in it (``overwrite``), a folder beside it that :func:`_swap_in` puts in its place once complete, so that a
    failed or interrupted replacement leaves the old data set as it was. Refuses an ``out`` that holds other files
    than a prepared data set's, and inputs inside ``out``."""
    if out.exists() and not out.is_dir():
        raise DataError("output path exists and is not a directory", out)
    replacing = out.with_name(f".{out.name}.replacing")
    if not out.exists() and (replacing / MANIFEST).is_file():  # a swap cut short between its two renames
        _swap_in(replacing, out)
    inside = [str(path) for path in inputs if out.resolve() in path.resolve().parents]
    if inside:
        raise DataError(f"an input lies inside the output directory ({', '.join(inside)}); choose another --out", out)
    if not out.is_dir():
        return out
    present = {path.name for path in out.iterdir()}
    manifest_path = out / MANIFEST
    if manifest_path.exists():
        if not overwrite:
            raise DataError("already holds a prepared data set; pass --overwrite to replace it", out)
        try:
            old = parse_json(manifest_path.read_bytes())
        except JsonError:
            old = {}
        ours = _listed_files(old) if isinstance(old, dict) else set()
        if others := sorted(present - ours - {MANIFEST, STATE}):
            raise DataError(f"holds other files than its prepared data set ({', '.join(others[:5])}); move them out "
                            "before replacing it, or choose another --out", out)  # fmt: skip
        return replacing
    if present and STATE not in present:
        raise DataError(f"exists and holds other files ({', '.join(sorted(present)[:5])}), not a prepared data set "
                        "or an interrupted prepare; choose a new or empty directory", out)  # fmt: skip
    return out


def _swap_in(prepared: Path, out: Path) -> None:
    """Put the complete data set ``prepared`` in the place of ``out`` (the old one removed once it is replaced)."""
    old = out.with_name(f".{out.name}.replaced")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        os.rename(out, old)
    os.rename(prepared, out)
    fsync_dir(out.parent)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def _made_for_this_call(out: Path) -> Iterator[None]:
    """Make the folder ``out`` (and its missing parents); should bad input (a DataError) fail the prepare inside, remove
    what this call made, so that it leaves nothing behind. A folder that existed before is kept, and so is everything
    after any other failure (an interrupted prepare resumes from its state file)."""
    missing = list(takewhile(lambda folder: not folder.exists(), (out, *out.parents)))
    out.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except DataError:
        if missing:
            shutil.rmtree(missing[-1], ignore_errors=True)
        raise


@dataclass
class Tally:
    """Counts of a corpus or split as its chunks are encoded."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("read", "empty", "too_long", "bad_ratio", "kept", "truncated"), 0))  # fmt: skip
    pieces: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    unk: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    longest: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))

    def add(self, block: Encoded) -> None:
        """Count the non-blank pairs of a block (the caller counts the lines read and blank)."""
        for fate, count in zip(FATES, np.bincount(block.fates, minlength=len(FATES)).tolist(), strict=True):
            self.counts[fate] += count
        self.counts["truncated"] += block.truncated
        for side in SIDES:
            self.pieces[side] += len(block.ids[side])
            self.unk[side] += int(np.count_nonzero(block.ids[side] == UNK))
            self.longest[side] = max(self.longest[side], int(block.lengths[side].max(initial=0)))

    def merge(self, other: Tally) -> None:
        for key in self.counts:
            self.counts[key] += other.counts[key]
        for side in SIDES:
            self.pieces[side] += other.pieces[side]
            self.unk[side] += other.unk[side]
            self.longest[side] = max(self.longest[side], other.longest[side])

    def summary(self, source_markers: bool, keeps_references: bool) -> dict[str, int]:
        """Manifest counts: pairs, then per side pieces, unknown pieces and the longest sequence the model sees
        (source with EOS and BOS, target input/output with BOS or EOS)."""
        summary = {key: self.counts[key] for key in ("read", "empty", "too_long", "bad_ratio", "kept")}
        extra = 2 if source_markers else 1
        for side in SIDES:
            summary[f"{side}_pieces"] = self.pieces[side]
            summary[f"{side}_unk"] = self.unk[side]
            summary[f"max_{side}_len"] = self.longest[side] + (extra if side == "src" else 1)
        if keeps_references:
            summary["truncated"] = self.counts["truncated"]
        return summary


# --- prepare -------------------------------------------------------------------------------------------------------


def _corpora(train_src: str | Path | None, train_tgt: str | Path | None, valid_src: str | Path | None,
             valid_tgt: str | Path | None, corpora: Sequence[Corpus], valid: Sequence[Corpus]
             ) -> tuple[list[Corpus], list[Corpus]]:  # fmt: skip
    """The training and validation corpora, from the four files (one corpus) or the named corpora; DataError for a
    mix, a repeated or unknown name."""
    if train_src is not None or train_tgt is not None:
        if corpora or None in (train_src, train_tgt):
            raise DataError("give either both --train-src and --train-tgt, or named corpora (--train NAME=SRC,TGT)")
        corpora = [Corpus(LEGACY_CORPUS, Path(train_src), Path(train_tgt))]  # type: ignore[arg-type]
    if valid_src is not None or valid_tgt is not None:
        if valid or None in (valid_src, valid_tgt):
            raise DataError("give either both --valid-src and --valid-tgt, or named sets (--valid NAME=SRC,TGT)")
        if len(corpora) > 1:
            raise DataError("--valid-src/--valid-tgt with several --train corpora: name the corpus each validation "
                            "set belongs to (--valid NAME=SRC,TGT)")  # fmt: skip
        valid = [Corpus(corpora[0].name if corpora else LEGACY_CORPUS, Path(valid_src), Path(valid_tgt))]  # type: ignore[arg-type]
    if not corpora:
        raise DataError("no training corpus given (--train-src/--train-tgt or --train NAME=SRC,TGT)")
    if not valid:
        raise DataError("no validation set given (--valid-src/--valid-tgt or --valid NAME=SRC,TGT)")
    names = [c.name for c in corpora]
    for kind, group in (("training corpus", names), ("validation set", [v.name for v in valid])):
        folded = [n.casefold() for n in group]  # de-en and DE-EN: one shard file on a case-insensitive file system
        if repeated := [n for n, f in zip(group, folded, strict=True) if folded.count(f) > 1]:
            raise DataError(f"{kind} {repeated[0]!r} given twice" if group.count(repeated[0]) > 1 else
                            f"{kind} names {repeated[0]!r} and {repeated[1]!r} differ only in case (one file name "
                            "on a case-insensitive file system)")  # fmt: skip
    for flag, group, files in (("--train", corpora, train_src), ("--valid", valid, valid_src)):
        for c in group:
            if c.src.exists() and c.tgt.exists() and c.src.samefile(c.tgt):
                given = f"{flag}-src and {flag}-tgt" if files is not None else f"{flag} {c.name}"
                raise DataError(f"{given}: source and target are the same file", c.tgt)
    for v in valid:
        if v.name not in names:
            raise DataError(f"--valid names the unknown corpus {v.name!r} (training corpora: {', '.join(names)})")
    return list(corpora), list(valid)


def prepare(
    train_src: str | Path | None = None,
    train_tgt: str | Path | None = None,
    valid_src: str | Path | None = None,
    valid_tgt: str | Path | None = None,
    out_dir: str | Path = "",
    vocab_size: int = PREPARE_DEFAULTS.vocab_size,
    joint: bool = PREPARE_DEFAULTS.joint,
    model_type: str = PREPARE_DEFAULTS.model_type,
    max_len: int = PREPARE_DEFAULTS.max_len,
    max_ratio: float = PREPARE_DEFAULTS.max_ratio,
    source_markers: bool = PREPARE_DEFAULTS.source_markers,
    overwrite: bool = False,
    *,
    corpora: Sequence[Corpus] = (),
    valid: Sequence[Corpus] = (),
    target_tags: bool = False,
    spm_sample: int = DEFAULT_SPM_SAMPLE,
    shard_size: int = DEFAULT_SHARD_SIZE,
    workers: int = 1,
    vocab_from: str | Path | None = None,
) -> dict[str, Any]:
    """Prepare a data directory (layout in the module docstring) and return its manifest.

    Training text: the four files (one corpus named ``train``) or ``corpora`` with ``valid`` (validation sets named
    after training corpora). Steps: a reservoir sample of ``spm_sample`` pairs trains the subword model(s); the
    validation sets are encoded (never dropped for length: truncated to ``max_len`` pieces, counted); each training
    corpus is read once as a stream and encoded chunk by chunk in ``workers`` processes into shards of about
    ``shard_size`` pairs, each committed to ``prepare.state.json`` as it is written; the manifest comes last.
    Empty pairs are dropped. Train pairs with a side of more than ``max_len`` subword pieces, or a longer/shorter
    piece ratio above ``max_ratio`` (judged when the longer side has ``RATIO_MIN_LEN`` pieces or more), are dropped
    and counted. ``target_tags``: every source starts with the tag of its corpus's target language (``<2en>`` for a
    corpus named ``de-en``), one id of the vocabulary, not counted by the length filter. ``source_markers`` makes
    ``Split.src`` start with BOS; it is recorded, not stored in tokens. Memory is bounded by the sample, one shard
    and the chunks in flight, whatever the corpus size. Refuses a directory that holds a manifest unless
    ``overwrite``. Bad input (a DataError) leaves no folder behind that this call made. The output does not depend
    on ``workers``. ``vocab_from`` (a model's ``vocab/``) copies its sentencepiece models instead of training new
    ones (the vocabulary options and source markers are then the model's; tags only those it holds)."""
    options = PrepareOptions(vocab_size, joint, model_type, max_len, max_ratio, source_markers)
    options.check()
    if not str(out_dir):
        raise DataError("no output directory given (out_dir, --out)")
    for name, value in (("spm_sample", spm_sample), ("shard_size", shard_size), ("workers", workers)):
        if value < 1:
            raise DataError(f"{name} must be at least 1, got {value}")
    corpora, valid = _corpora(train_src, train_tgt, valid_src, valid_tgt, corpora, valid)
    tags = _target_tags(corpora) if target_tags else {}
    out = Path(out_dir)
    if vocab_from is not None and target_tags:
        check_model_tags(Path(vocab_from), tags)
    if vocab_from is not None and (markers := model_source_markers(Path(vocab_from))) is not None:
        if source_markers and not markers:
            raise DataError("--source-markers with --vocab-from: the model was trained without a BOS before every "
                            "source; leave it out", Path(vocab_from).parent)  # fmt: skip
        options = replace(options, source_markers=markers)  # the model's input, as it was trained on it
    for corpus in (*corpora, *valid):
        require_regular_file(corpus.src, "prepare")
        require_regular_file(corpus.tgt, "prepare")
        read_parallel(corpus.src, corpus.tgt)  # fail fast on a missing file, before training anything
    for corpus in valid:  # read whole now: the training corpora are read whole by the subword sample
        if not sum(1 for _ in read_parallel(corpus.src, corpus.tgt)):
            raise DataError(_NOTHING_LEFT["valid"], corpus.src)
    final, out = out, _claim_output(out, overwrite, [path for c in (*corpora, *valid) for path in (c.src, c.tgt)])
    with _made_for_this_call(out):
        settings = {**asdict(options), "spm_sample": spm_sample, "shard_size": shard_size, "target_tags": target_tags,
                    "vocab_from": None if vocab_from is None else str(Path(vocab_from).resolve())}  # fmt: skip
        fingerprint = _fingerprint(settings, corpora, valid, vocab_from)
        state = _resume_state(out, fingerprint)

        if vocab_from is not None:
            state["spm"], _, joint, model_type = copy_vocabularies(Path(vocab_from), out)
            options = replace(options, joint=joint, model_type=model_type)  # the model's, as the manifest then says
        elif "spm" not in state:
            sample = reservoir_sample(corpora, spm_sample)
            state["spm"] = _train_vocabs(sample, corpora[0].src, out, options, sorted(set(tags.values())))
            _write_json(out / STATE, state)
        spm_files = state["spm"]
        vocabs = {side: Vocab.load(out / spm_files[side]) for side in SIDES}
        tag_ids = {name: vocabs["src"].tag_id(tag) for name, tag in tags.items()}
        dtype = token_dtype(max(v.size for v in vocabs.values()))

        pool = EncoderPool(vocabs, options, workers)
        try:
            valid_entry, valid_tally, valid_ranges, text = _encode_valid(out, valid, pool, tag_ids, dtype)
            for corpus in corpora:
                _encode_corpus(out, corpus, pool, tag_ids.get(corpus.name), dtype, shard_size, state)
        finally:
            pool.close()

        train_tally = Tally()
        corpus_summaries = {}
        for corpus in corpora:
            tally = _corpus_tally(state["corpora"][corpus.name])
            if not tally.counts["kept"]:  # one of several corpora left empty would silently train without it
                named = f" of training corpus {corpus.name!r}" if len(corpora) > 1 else ""
                raise DataError(_NOTHING_LEFT["train"].replace("pairs left", f"pairs{named} left"), corpus.src)
            train_tally.merge(tally)
            corpus_summaries[corpus.name] = {
                "weight": corpus.weight,
                "tag": tags.get(corpus.name),
                "train": tally.summary(options.source_markers, False),
                "valid": valid_ranges.get(corpus.name),
            }
        manifest = {
            "format_version": FORMAT_VERSION,
            "joint": options.joint,
            "model_type": options.model_type,
            "source_markers": options.source_markers,
            "special_ids": dict(SPECIAL_IDS),
            "src_vocab_size": vocabs["src"].size,
            "tgt_vocab_size": vocabs["tgt"].size,
            "spm": spm_files,
            "dtype": dtype.name,
            "options": {
                "vocab_size": options.vocab_size,
                "max_len": options.max_len,
                "max_ratio": options.max_ratio,
                "ratio_min_len": RATIO_MIN_LEN,
                "source_markers": options.source_markers,
                "spm_sample": spm_sample,
                "shard_size": shard_size,
                "target_tags": target_tags,
            },
            "inputs": _inputs(corpora, valid, settings["vocab_from"]),
            "corpora": corpus_summaries,
            "splits": {
                "train": train_tally.summary(options.source_markers, False),
                "valid": valid_tally.summary(options.source_markers, True),
            },
            "shards": {
                "train": [shard for corpus in corpora for shard in state["corpora"][corpus.name]["shards"]],
                "valid": [valid_entry],
            },
            "text": {"valid": text},
        }
        _write_json(out / MANIFEST, manifest)
        (out / STATE).unlink(missing_ok=True)
        if out != final:
            _swap_in(out, final)
        return manifest


def _inputs(corpora: Sequence[Corpus], valid: Sequence[Corpus], vocab_from: str | None) -> dict[str, str]:
    """The files read, links followed: ``train_src`` ... for one corpus given as four files, else per corpus; and
    ``vocab_from``, the model vocabulary copied, when one was."""
    copied = {} if vocab_from is None else {"vocab_from": vocab_from}
    if len(corpora) == 1 and corpora[0].name == LEGACY_CORPUS and len(valid) == 1:
        files = (corpora[0].src, corpora[0].tgt, valid[0].src, valid[0].tgt)
        return {**{key: str(p.resolve()) for key, p in zip(("train_src", "train_tgt", "valid_src", "valid_tgt"),
                                                           files, strict=True)}, **copied}  # fmt: skip
    named = {f"train.{c.name}.{side}": getattr(c, side) for c in corpora for side in SIDES}
    named |= {f"valid.{v.name}.{side}": getattr(v, side) for v in valid for side in SIDES}
    return {**{key: str(path.resolve()) for key, path in named.items()}, **copied}


def _resume_state(out: Path, fingerprint: str) -> dict[str, Any]:
    """The state of an interrupted prepare of the same inputs and options, or a fresh one (the files of another,
    interrupted prepare removed)."""
    path = out / STATE
    try:
        state = parse_json(path.read_bytes()) if path.is_file() else None
    except JsonError:
        state = None
    if isinstance(state, dict) and state.get("fingerprint") == fingerprint:
        return state
    _remove_files(out, _listed_files(state) if isinstance(state, dict) else set())
    for stray in (*out.glob("train.*.npy"), *out.glob(".*.tmp-*")):  # shards written but never committed
        stray.unlink()
    path.unlink(missing_ok=True)
    return {"fingerprint": fingerprint, "corpora": {}}


def _encode_valid(out: Path, valid: Sequence[Corpus], pool: EncoderPool, tag_ids: dict[str, int | None],
                  dtype: np.dtype) -> tuple[dict[str, Any], Tally, dict[str, list[int]], dict[str, str]]:  # fmt: skip
    """Encode every validation set into one shard (truncating, keeping the raw text); its entry, counts, the range of
    each set and the names of the text files."""
    builder, tally, ranges = ShardBuilder(dtype), Tally(), {}
    lines: dict[str, list[str]] = {side: [] for side in SIDES}
    for corpus in valid:
        start = builder.pairs
        for block in pool.map(corpus, tag_ids.get(corpus.name), keeps_references=True):
            builder.add(block.ids, block.lengths)
            tally.add(block)
            tally.counts["read"] += block.read
            tally.counts["empty"] += block.read - len(block.fates)
            for side in SIDES:
                lines[side] += block.text[side]
        if builder.pairs == start:
            raise DataError(_NOTHING_LEFT["valid"], corpus.src)
        ranges[corpus.name] = [start, builder.pairs]
    entry = builder.write(out, "valid")
    text = {side: f"valid.{side}.txt" for side in SIDES}
    for side in SIDES:
        content = "".join(line + "\n" for line in lines[side])
        atomic_write(out / text[side], lambda tmp, content=content: tmp.write_text(content, "utf-8", newline="\n"))
    return entry, tally, ranges, text


def _encode_corpus(out: Path, corpus: Corpus, pool: EncoderPool, tag: int | None, dtype: np.dtype, shard_size: int,
                   state: dict[str, Any]) -> None:  # fmt: skip
    """Encode one training corpus into shards, continuing after the shards ``state`` records; each shard written is
    committed to the state file with the counts and the lines (and blank pairs) read up to its last pair. A shard
    ends at the first multiple of CHUNK_PAIRS non-blank pairs (counted from the start of the corpus) by which it
    holds ``shard_size`` kept pairs."""
    record = state["corpora"].setdefault(
        corpus.name, {"shards": [], "lines": 0, "blank": 0, "done": False, "tally": asdict(Tally())}
    )
    if record["done"]:
        return
    tally, builder = Tally(**record["tally"]), ShardBuilder(dtype)
    lines, pairs = record["lines"], record["lines"] - record["blank"]  # read, and non-blank among them

    def commit(lines: int, pairs: int, done: bool) -> None:
        nonlocal builder
        if builder.pairs:
            entry = builder.write(out, shard_stem("train", corpus.name, len(record["shards"])))
            record["shards"].append({"corpus": corpus.name, **entry})
        record.update(lines=lines, blank=lines - pairs, done=done, tally=asdict(tally))
        _write_json(out / STATE, state)
        builder = ShardBuilder(dtype)

    for block in pool.map(corpus, tag, keeps_references=False, skip=lines):
        start = 0
        while start < len(block.fates):
            stop = min(len(block.fates), start + CHUNK_PAIRS - pairs % CHUNK_PAIRS)
            part = block.part(start, stop)
            builder.add(part.ids, part.lengths)
            tally.add(part)
            pairs += stop - start
            if pairs % CHUNK_PAIRS == 0 and builder.pairs >= shard_size:
                commit(int(block.lines[stop - 1]), pairs, done=False)
            start = stop
        lines = block.end
    commit(lines, pairs, done=True)


def _corpus_tally(record: dict[str, Any]) -> Tally:
    """The counts of a finished corpus: the encoded chunks' and the lines read, blank pairs among them."""
    tally = Tally(**record["tally"])
    tally.counts["read"] = record["lines"]
    tally.counts["empty"] += record["blank"]
    return tally
