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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from adlnmt.data.corpus import RATIO_MIN_LEN, PairCounts, length_filter, read_parallel, require_regular_file
from adlnmt.data.data_dir import FORMAT_VERSION, MANIFEST, SIDES
from adlnmt.data.options import PREPARE_DEFAULTS, PrepareOptions
from adlnmt.data.vocab import SPECIAL_IDS, UNK, Vocab, train_sentencepiece
from adlnmt.data.vocab_from import copy_vocabularies
from adlnmt.errors import DataError

_CHUNK = 4096
_INPUTS = ("train_src", "train_tgt", "valid_src", "valid_tgt")
_NOTHING_LEFT = {
    "train": "no training pairs left after removing empty, too long and badly proportioned pairs",
    "valid": "no validation pairs left after removing empty pairs",
}


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


@dataclass
class EncodedSplit:
    """One split after encoding: flat subword ids and sentence lengths per side, and what happened to its pairs.

    A split that ``keeps_references`` (valid) never drops a pair for its length but truncates it (counted in
    ``truncated``) and keeps the raw text of its pairs (``text``); any other split (train) drops long pairs.
    """

    keeps_references: bool
    counts: PairCounts = field(default_factory=PairCounts)
    truncated: int = 0
    ids: dict[str, array] = field(default_factory=lambda: {side: array("i") for side in SIDES})
    lengths: dict[str, array] = field(default_factory=lambda: {side: array("q") for side in SIDES})
    text: dict[str, list[str]] = field(default_factory=lambda: {side: [] for side in SIDES})

    def __len__(self) -> int:
        return len(self.lengths["src"])

    def admit(
        self, pair: tuple[str, str], src_ids: list[int], tgt_ids: list[int], max_len: int, max_ratio: float
    ) -> None:
        """Keep, truncate or count away one encoded pair (text that normalizes to nothing counts as empty)."""
        if not src_ids or not tgt_ids:
            self.counts.empty += 1
        elif self.keeps_references:
            if len(src_ids) > max_len or len(tgt_ids) > max_len:
                self.truncated += 1
            self._add((src_ids[:max_len], tgt_ids[:max_len]), pair)
        elif reason := length_filter(len(src_ids), len(tgt_ids), max_len, max_ratio):
            setattr(self.counts, reason, getattr(self.counts, reason) + 1)
        else:
            self._add((src_ids, tgt_ids), pair)

    def _add(self, ids: tuple[list[int], list[int]], pair: tuple[str, str]) -> None:
        for side, side_ids, line in zip(SIDES, ids, pair, strict=True):
            self.ids[side].extend(side_ids)
            self.lengths[side].append(len(side_ids))
            if self.keeps_references:
                self.text[side].append(line)

    def side_lengths(self, side: str) -> np.ndarray:
        """Subword count of every kept sentence of one side (``int64``)."""
        return np.frombuffer(self.lengths[side], dtype=np.int64)

    def offsets(self, side: str) -> np.ndarray:
        """Start of every sentence of one side in its flat id array, plus the end (``int64``, length n+1)."""
        lengths = self.side_lengths(side)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return offsets


def _atomic_save(path: Path, values: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as handle:
        np.save(handle, values)
    os.replace(tmp, path)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, path)


def _claim_output(out: Path, overwrite: bool) -> None:
    """Check that ``out`` may receive a prepared data set; remove the manifest of one it replaces."""
    if out.exists() and not out.is_dir():
        raise DataError("output path exists and is not a directory", out)
    manifest_path = out / MANIFEST
    if manifest_path.exists():
        if not overwrite:
            raise DataError("already holds a prepared data set; pass --overwrite (overwrite=True) to replace it", out)
        manifest_path.unlink()  # from here on the directory is incomplete until the new manifest is written


def _train_vocabs(
    train_src: Path, train_tgt: Path, out: Path, options: PrepareOptions
) -> tuple[dict[str, str], dict[str, Vocab]]:
    """Train the sentencepiece model(s) on the training text: model file name and vocabulary per side."""
    if options.joint:
        model = train_sentencepiece(
            _joint_text(train_src, train_tgt), out / "spm", options.vocab_size, options.model_type, train_src
        )
        vocab = Vocab.load(model)
        return {side: model.name for side in SIDES}, {side: vocab for side in SIDES}
    spm_files, vocabs = {}, {}
    for index, side in enumerate(SIDES):
        text = _side_text(train_src, train_tgt, index)
        source = (train_src, train_tgt)[index]
        model = train_sentencepiece(text, out / f"spm.{side}", options.vocab_size, options.model_type, source)
        spm_files[side], vocabs[side] = model.name, Vocab.load(model)
    return spm_files, vocabs


def _encode_split(
    src: Path, tgt: Path, vocabs: dict[str, Vocab], options: PrepareOptions, keeps_references: bool
) -> EncodedSplit:
    """Encode one split chunk by chunk with the sentencepiece vocabularies, admitting pair by pair."""
    split = EncodedSplit(keeps_references)
    for chunk in _chunks(read_parallel(src, tgt, split.counts)):
        src_ids = vocabs["src"].encode_batch([s for s, _ in chunk])
        tgt_ids = vocabs["tgt"].encode_batch([t for _, t in chunk])
        for pair, s, t in zip(chunk, src_ids, tgt_ids, strict=True):
            split.admit(pair, s, t, options.max_len, options.max_ratio)
    split.counts.kept = len(split)
    return split


def _write_split(out: Path, name: str, split: EncodedSplit, dtype: np.dtype) -> dict[str, dict[str, str]]:
    """Write the token and offsets arrays of both sides of one split; return their file names per side."""
    files = {}
    for side in SIDES:
        _atomic_save(out / token_file(name, side), np.asarray(split.ids[side], dtype=dtype))
        _atomic_save(out / offsets_file(name, side), split.offsets(side))
        files[side] = {"tokens": token_file(name, side), "offsets": offsets_file(name, side)}
    return files


def _write_references(out: Path, name: str, split: EncodedSplit) -> dict[str, str]:
    """Write the raw text of the kept pairs of one split, a file per side; return their names."""
    files = {side: f"{name}.{side}.txt" for side in SIDES}
    for side in SIDES:
        _atomic_write_text(out / files[side], "".join(line + "\n" for line in split.text[side]))
    return files


def _split_summary(split: EncodedSplit, source_markers: bool) -> dict[str, int]:
    """Manifest counts of one split: pairs, then per side pieces, unknown pieces and the longest model sequence."""
    summary = split.counts.as_dict()
    extra = 2 if source_markers else 1
    for side in SIDES:
        summary[f"{side}_pieces"] = len(split.ids[side])
        summary[f"{side}_unk"] = int(np.count_nonzero(np.asarray(split.ids[side]) == UNK))
        # longest sequence the model sees: source with EOS (and BOS), target input/output with BOS or EOS
        summary[f"max_{side}_len"] = int(split.side_lengths(side).max()) + (extra if side == "src" else 1)
    if split.keeps_references:
        summary["truncated"] = split.truncated
    return summary


def _manifest(
    options: PrepareOptions,
    inputs: dict[str, Path],
    vocabs: dict[str, Vocab],
    spm_files: dict[str, str],
    dtype: np.dtype,
    splits: dict[str, EncodedSplit],
    files: dict[str, dict[str, dict[str, str]]],
    text: dict[str, dict[str, str]],
) -> dict[str, Any]:
    """The manifest of a prepared directory: options, vocabularies, counts per split and file names."""
    return {
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
        },
        "inputs": {key: str(path.resolve()) for key, path in inputs.items()},
        "splits": {name: _split_summary(split, options.source_markers) for name, split in splits.items()},
        "files": files,
        "text": text,
    }


def prepare(
    train_src: str | Path,
    train_tgt: str | Path,
    valid_src: str | Path,
    valid_tgt: str | Path,
    out_dir: str | Path,
    vocab_size: int = PREPARE_DEFAULTS.vocab_size,
    joint: bool = PREPARE_DEFAULTS.joint,
    model_type: str = PREPARE_DEFAULTS.model_type,
    max_len: int = PREPARE_DEFAULTS.max_len,
    max_ratio: float = PREPARE_DEFAULTS.max_ratio,
    source_markers: bool = PREPARE_DEFAULTS.source_markers,
    overwrite: bool = False,
    vocab_from: str | Path | None = None,
) -> dict[str, Any]:
    """Prepare a data directory (layout in the module docstring) and return its manifest.

    Steps: train the subword model(s) on the train split, encode every split (``_encode_split``), write its arrays
    (``_write_split``) and valid's reference text, then the manifest (``_manifest``) last.
    Empty pairs are dropped from both splits. Train pairs with a side of more than ``max_len`` subword pieces, or a
    longer/shorter piece ratio above ``max_ratio`` (judged when the longer side has ``RATIO_MIN_LEN`` pieces or more),
    are dropped and counted; valid pairs are never dropped for length but truncated to ``max_len`` pieces (counted).
    ``source_markers`` makes ``Split.src`` start with BOS (EOS always ends it); it is recorded, not stored in tokens.
    Refuses a directory that already holds a manifest unless ``overwrite``. ``vocab_from`` (a model's ``vocab/``)
    copies its sentencepiece models instead of training new ones (the vocabulary options are then the model's).
    """
    options = PrepareOptions(vocab_size, joint, model_type, max_len, max_ratio, source_markers)
    options.check()
    inputs = {key: Path(path) for key, path in zip(_INPUTS, (train_src, train_tgt, valid_src, valid_tgt), strict=True)}
    out = Path(out_dir)
    _claim_output(out, overwrite)
    for path in inputs.values():
        require_regular_file(path, "prepare")
    read_parallel(inputs["train_src"], inputs["train_tgt"])  # fail fast on a missing file, before training anything
    read_parallel(inputs["valid_src"], inputs["valid_tgt"])
    out.mkdir(parents=True, exist_ok=True)
    if vocab_from is None:
        spm_files, vocabs = _train_vocabs(inputs["train_src"], inputs["train_tgt"], out, options)
    else:
        spm_files, vocabs, joint = copy_vocabularies(Path(vocab_from), out)
        options = replace(options, joint=joint)
    largest = max(v.size for v in vocabs.values())
    dtype = np.dtype(np.uint16) if largest <= 2**16 else np.dtype(np.int32)

    splits: dict[str, EncodedSplit] = {}
    for name, keeps_references in (("train", False), ("valid", True)):
        splits[name] = _encode_split(inputs[f"{name}_src"], inputs[f"{name}_tgt"], vocabs, options, keeps_references)
        if not len(splits[name]):
            raise DataError(_NOTHING_LEFT[name], inputs[f"{name}_src"])
    files = {name: _write_split(out, name, split, dtype) for name, split in splits.items()}
    text = {name: _write_references(out, name, split) for name, split in splits.items() if split.keeps_references}
    manifest = _manifest(options, inputs, vocabs, spm_files, dtype, splits, files, text)
    _atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest
