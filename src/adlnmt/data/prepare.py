"""``prepare``: train subword models, encode and filter a parallel corpus, write a compact binary data directory.

Layout of a prepared directory (every path relative to it; ``manifest.json`` is written last, so a directory with a
manifest is complete):

* ``spm.model`` (joint) or ``spm.src.model`` + ``spm.tgt.model`` (separate): sentencepiece models;
* ``{split}.{side}.tokens.npy`` for split ``train``/``valid`` and side ``src``/``tgt``: all subword ids of the split
  concatenated (pieces only: no BOS/EOS, which ``Split`` adds), ``uint16`` when every vocabulary has at most 65,536
  ids, else ``int32``;
* ``{split}.{side}.offsets.npy``: ``int64``, length n+1; sentence i is ``tokens[offsets[i]:offsets[i + 1]]``;
* ``valid.src.txt`` / ``valid.tgt.txt``: the raw valid text aligned with the encoded valid split (references for BLEU);
* ``manifest.json``: counts, vocabulary sizes, options and file names.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from adlnmt.data.corpus import RATIO_MIN_LEN, PairCounts, length_filter, read_parallel
from adlnmt.data.vocab import MODEL_TYPES, SPECIAL_IDS, UNK, Vocab, train_sentencepiece
from adlnmt.errors import DataError

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SIDES = ("src", "tgt")
_CHUNK = 4096


def token_file(split: str, side: str) -> str:
    """File name of the flat token array of one split and side."""
    return f"{split}.{side}.tokens.npy"


def offsets_file(split: str, side: str) -> str:
    """File name of the offsets array of one split and side."""
    return f"{split}.{side}.offsets.npy"


def _chunks(pairs: Iterator[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    chunk: list[tuple[str, str]] = []
    for pair in pairs:
        chunk.append(pair)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _joint_text(src: Path, tgt: Path) -> Iterator[str]:
    for s, t in read_parallel(src, tgt):
        yield s
        yield t


def _side_text(src: Path, tgt: Path, index: int) -> Iterator[str]:
    for pair in read_parallel(src, tgt):
        yield pair[index]


class _Encoded:
    """Growing flat token arrays and lengths of both sides of one split."""

    def __init__(self) -> None:
        self.tokens = {side: array("i") for side in SIDES}
        self.lengths = {side: array("q") for side in SIDES}

    def add(self, src_ids: list[int], tgt_ids: list[int]) -> None:
        for side, ids in zip(SIDES, (src_ids, tgt_ids), strict=True):
            self.tokens[side].extend(ids)
            self.lengths[side].append(len(ids))

    def __len__(self) -> int:
        return len(self.lengths["src"])


def _atomic_save(path: Path, values: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as handle:
        np.save(handle, values)
    os.replace(tmp, path)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, path)


def prepare(
    train_src: str | Path,
    train_tgt: str | Path,
    valid_src: str | Path,
    valid_tgt: str | Path,
    out_dir: str | Path,
    vocab_size: int = 8000,
    joint: bool = True,
    model_type: str = "bpe",
    max_len: int = 250,
    max_ratio: float = 3.0,
    source_markers: bool = False,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Prepare a data directory (layout in the module docstring) and return its manifest.

    Empty pairs are dropped from both splits. Train pairs with a side of more than ``max_len`` subword pieces, or a
    longer/shorter piece ratio above ``max_ratio`` (judged when the longer side has ``RATIO_MIN_LEN`` pieces or more),
    are dropped and counted; valid pairs are never dropped for length but truncated to ``max_len`` pieces (counted).
    ``source_markers`` makes ``Split.src`` start with BOS (EOS always ends it); it is recorded, not stored in tokens.
    Refuses a directory that already holds a manifest unless ``overwrite``.
    """
    if model_type not in MODEL_TYPES:
        raise DataError(f"model type must be one of {', '.join(MODEL_TYPES)}, got {model_type!r}")
    if max_len < 1:
        raise DataError(f"max_len must be at least 1, got {max_len}")
    if not max_ratio >= 1.0:
        raise DataError(f"max_ratio must be at least 1, got {max_ratio}")
    train_src, train_tgt, valid_src, valid_tgt = (Path(p) for p in (train_src, train_tgt, valid_src, valid_tgt))
    out = Path(out_dir)
    manifest_path = out / MANIFEST
    if out.exists() and not out.is_dir():
        raise DataError("output path exists and is not a directory", out)
    if manifest_path.exists():
        if not overwrite:
            raise DataError("already holds a prepared data set; pass --overwrite (overwrite=True) to replace it", out)
        manifest_path.unlink()  # from here on the directory is incomplete until the new manifest is written
    read_parallel(train_src, train_tgt)  # fail fast on a missing file, before training anything
    read_parallel(valid_src, valid_tgt)
    out.mkdir(parents=True, exist_ok=True)

    if joint:
        model = train_sentencepiece(_joint_text(train_src, train_tgt), out / "spm", vocab_size, model_type)
        spm_files = {"src": model.name, "tgt": model.name}
        vocab = Vocab.load(model)
        vocabs = {"src": vocab, "tgt": vocab}
    else:
        spm_files, vocabs = {}, {}
        for index, side in enumerate(SIDES):
            text = _side_text(train_src, train_tgt, index)
            model = train_sentencepiece(text, out / f"spm.{side}", vocab_size, model_type)
            spm_files[side], vocabs[side] = model.name, Vocab.load(model)
    largest = max(v.size for v in vocabs.values())
    dtype = np.dtype(np.uint16) if largest <= 2**16 else np.dtype(np.int32)

    train_counts, train = PairCounts(), _Encoded()
    for chunk in _chunks(read_parallel(train_src, train_tgt, train_counts)):
        src_ids = vocabs["src"].encode_batch([s for s, _ in chunk])
        tgt_ids = vocabs["tgt"].encode_batch([t for _, t in chunk])
        for s, t in zip(src_ids, tgt_ids, strict=True):
            if not s or not t:  # text that normalizes to nothing counts as empty
                train_counts.empty += 1
                continue
            reason = length_filter(len(s), len(t), max_len, max_ratio)
            if reason is not None:
                setattr(train_counts, reason, getattr(train_counts, reason) + 1)
                continue
            train.add(s, t)
    train_counts.kept = len(train)
    if not len(train):
        raise DataError("no training pairs left after removing empty, too long and badly proportioned pairs", train_src)

    valid_counts, valid, truncated = PairCounts(), _Encoded(), 0
    valid_text: dict[str, list[str]] = {side: [] for side in SIDES}
    for chunk in _chunks(read_parallel(valid_src, valid_tgt, valid_counts)):
        src_ids = vocabs["src"].encode_batch([s for s, _ in chunk])
        tgt_ids = vocabs["tgt"].encode_batch([t for _, t in chunk])
        for (s_text, t_text), s, t in zip(chunk, src_ids, tgt_ids, strict=True):
            if not s or not t:
                valid_counts.empty += 1
                continue
            if len(s) > max_len or len(t) > max_len:
                truncated += 1
            valid.add(s[:max_len], t[:max_len])
            valid_text["src"].append(s_text)
            valid_text["tgt"].append(t_text)
    valid_counts.kept = len(valid)
    if not len(valid):
        raise DataError("no validation pairs left after removing empty pairs", valid_src)

    splits: dict[str, Any] = {}
    files: dict[str, Any] = {}
    extra = 2 if source_markers else 1
    for split, encoded, counts in (("train", train, train_counts), ("valid", valid, valid_counts)):
        info = counts.as_dict()
        files[split] = {}
        for side in SIDES:
            tokens = np.asarray(encoded.tokens[side], dtype=dtype)
            lengths = np.frombuffer(encoded.lengths[side], dtype=np.int64)
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            _atomic_save(out / token_file(split, side), tokens)
            _atomic_save(out / offsets_file(split, side), offsets)
            files[split][side] = {"tokens": token_file(split, side), "offsets": offsets_file(split, side)}
            info[f"{side}_pieces"] = len(tokens)
            info[f"{side}_unk"] = int(np.count_nonzero(tokens == UNK))
            # longest sequence the model sees: source with EOS (and BOS), target input/output with BOS or EOS
            info[f"max_{side}_len"] = int(lengths.max()) + (extra if side == "src" else 1)
        splits[split] = info
    splits["valid"]["truncated"] = truncated
    text_files = {side: f"valid.{side}.txt" for side in SIDES}
    for side in SIDES:
        _atomic_write_text(out / text_files[side], "".join(line + "\n" for line in valid_text[side]))

    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "joint": joint,
        "model_type": model_type,
        "source_markers": source_markers,
        "special_ids": dict(SPECIAL_IDS),
        "src_vocab_size": vocabs["src"].size,
        "tgt_vocab_size": vocabs["tgt"].size,
        "spm": spm_files,
        "dtype": dtype.name,
        "options": {
            "vocab_size": vocab_size,
            "max_len": max_len,
            "max_ratio": max_ratio,
            "ratio_min_len": RATIO_MIN_LEN,
            "source_markers": source_markers,
        },
        "inputs": {
            "train_src": str(train_src.resolve()),
            "train_tgt": str(train_tgt.resolve()),
            "valid_src": str(valid_src.resolve()),
            "valid_tgt": str(valid_tgt.resolve()),
        },
        "splits": splits,
        "files": files,
        "text": {"valid": text_files},
    }
    _atomic_write_text(manifest_path, json.dumps(manifest, indent=2) + "\n")
    return manifest
