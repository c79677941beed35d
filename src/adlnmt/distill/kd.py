"""Distil a prepared data directory: the teacher's 1-best translation of every training source becomes its target.

The output is a data directory of the same format (:mod:`adlnmt.data.prepare`) with the same sentencepiece models,
validation split (its references stay the human ones: students are selected on them) and training source; only the
training target changes. Its ``manifest.json`` carries the provenance under ``distilled``: the data it was made
from (path, SHA-256 of its manifest), the teacher (each model's directory, checkpoint and the SHA-256 of its weights,
or an export's; engine, precision, device), the search settings, the vocabularies' digests and the SHA-256 of the new
target arrays.

Resumable: the training source is translated in chunks of ``chunk_size`` sentences in a fixed order, each chunk
committed atomically to ``chunks/NNNNNN.npy`` under the output as soon as it is translated; the plan (``distill.json``:
everything the result depends on) is written first, and a run with another plan is refused rather than mixed with
it. ``manifest.json`` is written last, so a directory without one is never taken for complete (``DataDir.load``
refuses it); the chunks and the plan are removed after it. A chunk's batches are the same whether or not the run
was interrupted, so a resumed distillation gives the same arrays as an uninterrupted one.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adlnmt.data.data_dir import MANIFEST, DataDir
from adlnmt.data.prepare import offsets_file, token_file
from adlnmt.data.vocab import UNK, Vocab
from adlnmt.errors import UserError
from adlnmt.inference.options import DEFAULT_OPTIONS, SearchOptions
from adlnmt.store import ExportDir, ModelDir, is_export_dir
from adlnmt.store.atomic import atomic_write, copy_atomic, file_sha256

if TYPE_CHECKING:
    from adlnmt.inference.translator import Translator

FORMAT_VERSION = 1
PLAN = "distill.json"
CHUNKS = "chunks"
CHUNK_SIZE = 1000
# the search settings a distillation's result depends on (``workers`` and the like only change its speed)
SEARCH_KEYS = ("beam", "batch_size", "length_penalty", "max_len_ratio", "max_len_extra")


def vocabulary_digests(data: DataDir) -> dict[str, Any]:
    """SHA-256 of each side's :meth:`Vocab.table`, and whether sources carry BOS markers."""

    def digest(vocab: Vocab) -> str:
        return hashlib.sha256(json.dumps(vocab.table()).encode()).hexdigest()

    return {"src": digest(data.src_vocab), "tgt": digest(data.tgt_vocab), "source_markers": data.source_markers}


def check_vocabularies(teacher: DataDir, data: DataDir, name: str) -> None:
    """UserError unless the teacher ``name`` reads and writes the data's vocabularies (the same pieces, scores and
    kinds under every id), with its source layout (:meth:`DataDir.vocabulary_difference`)."""
    difference = teacher.vocabulary_difference(data)
    if difference:
        raise UserError(f"{name}: the teacher's {difference} differs from the one of {data.path}; its "
                        "translations would not be ids of the data's vocabulary: distil with a teacher trained on "
                        "this prepared data (or data with the same sentencepiece models)")  # fmt: skip


def teacher_record(
    models: Sequence[str], checkpoints: Sequence[str], translator: Translator, precision: str, device: str,
    combine: str,
) -> dict[str, Any]:  # fmt: skip
    """The provenance of a teacher: each member (model directory, checkpoint and its weights' SHA-256; or an export
    and the SHA-256 of its manifest), the engine, precision, device and, for an ensemble, how it combines."""
    from adlnmt.store.names import EXPORT_MANIFEST

    chosen = list(checkpoints) or ["best"]  # as adlnmt translate pairs --model and --checkpoint (load_translator)
    if len(models) == 1:
        pairs = [(models[0], checkpoint) for checkpoint in chosen]  # one model, or an ensemble of its checkpoints
    else:
        pairs = list(zip(models, chosen if len(chosen) > 1 else chosen * len(models), strict=True))
    members = []
    for model, checkpoint in pairs:
        path = Path(model).resolve()
        if is_export_dir(path):
            export = ExportDir.load(path)
            members.append({"export": str(path), "format": export.format, "quantize": export.manifest["quantize"],
                            "manifest_sha256": file_sha256(path / EXPORT_MANIFEST)})  # fmt: skip
            continue
        weights = ModelDir(path).resolve(checkpoint)
        if not weights.is_file():
            raise UserError(f"{path}: no {checkpoint} checkpoint ({weights} is missing)")
        members.append({"model": str(path), "checkpoint": checkpoint, "weights": str(weights.resolve()),
                        "weights_sha256": file_sha256(weights)})  # fmt: skip
    record: dict[str, Any] = {"members": members, "engine": translator.engine_name, "precision": precision,
                              "device": device}  # fmt: skip
    if len(members) > 1:
        record["combine"] = combine
    return record


def _plan(data: DataDir, teacher: dict[str, Any], options: SearchOptions, chunk_size: int) -> dict[str, Any]:
    plan = {
        "format_version": FORMAT_VERSION,
        "data": {"path": str(data.path.resolve()), "manifest_sha256": file_sha256(data.path / MANIFEST)},
        "teacher": teacher,
        "search": {key: getattr(options, key) for key in SEARCH_KEYS},
        "chunk_size": chunk_size,
        "sentences": len(data.split("train")),
        "vocabularies": vocabulary_digests(data),
    }
    return json.loads(json.dumps(plan))  # as it reads back from JSON


def _differences(stored: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    return [key for key in plan if stored.get(key) != plan[key]]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write_json(path: Path, value: dict[str, Any]) -> None:
    text = json.dumps(value, indent=2) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def distilled_record(out: Path) -> dict[str, Any] | None:
    """The provenance (``manifest.json``'s ``distilled``) of a complete distilled data directory, else None."""
    manifest = _read_json(out / MANIFEST)
    record = manifest.get("distilled") if manifest else None
    return record if isinstance(record, dict) else None


def _claim(out: Path, plan: dict[str, Any], log: Callable[[str], None]) -> bool:
    """Whether ``out`` already holds this distillation, complete; refuse one that holds anything else."""
    if (out / MANIFEST).exists():
        record = distilled_record(out)
        if record is None:
            raise UserError(f"{out}: already holds a prepared data directory; distil into a new directory")
        if differences := _differences(record, plan):
            raise UserError(f"{out}: holds data distilled with other {', '.join(differences)}; choose another --out "
                            "(or delete it to distil again)")  # fmt: skip
        return True
    if (out / PLAN).exists():
        stored = _read_json(out / PLAN)
        if stored is None:
            raise UserError(f"{out / PLAN}: unreadable; delete {out} to distil again")
        if differences := _differences(stored, plan):
            raise UserError(f"{out}: an unfinished distillation with other {', '.join(differences)} is there; "
                            "resume it with the same teacher and settings, or delete it")  # fmt: skip
        done = len(list((out / CHUNKS).glob("*.npy")))
        log(f"{out}: resuming an interrupted distillation ({done} chunk(s) done)")
        return False
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: exists and is not an unfinished distillation; choose a new directory")
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / PLAN, plan)
    return False


def _chunk_path(out: Path, index: int) -> Path:
    return out / CHUNKS / f"{index:06d}.npy"


def _save_chunk(path: Path, translations: list[list[int]]) -> None:
    """One committed chunk: int32 [count, its lengths, its tokens]."""
    lengths = [len(tokens) for tokens in translations]
    values = np.array([len(translations), *lengths, *(t for tokens in translations for t in tokens)], dtype=np.int32)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.save(handle, values, allow_pickle=False)

    atomic_write(path, write)


def _load_chunk(path: Path, count: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(lengths, tokens) of a committed chunk of ``count`` sentences, or None when it is missing or damaged."""
    try:
        values = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if values.ndim != 1 or values.dtype != np.int32 or len(values) < 1 + count or values[0] != count:
        return None
    lengths, tokens = values[1 : 1 + count].astype(np.int64), values[1 + count :]
    if (
        (lengths < 0).any()
        or int(lengths.sum()) != len(tokens)
        or (len(tokens) and (tokens.min() < 0 or tokens.max() >= vocab_size))
    ):
        return None  # fmt: skip
    return lengths, tokens


def _translate_chunk(
    translator: Translator, data: DataDir, lo: int, hi: int, options: SearchOptions
) -> list[list[int]]:
    split = data.split("train")
    sources = [data.source_ids(split.src_pieces(i).tolist(), translator.max_input_len) for i in range(lo, hi)]
    found = translator.engine.translate_ids(sources, options, None)
    return [list(hyps[0].tokens) if hyps else [] for hyps in found]


def _finish(data: DataDir, out: Path, plan: dict[str, Any], lengths: np.ndarray, tokens: np.ndarray
            ) -> dict[str, Any]:  # fmt: skip
    """Write the data directory around the new training target; ``manifest.json`` last."""
    manifest = json.loads(json.dumps(data.manifest))
    names = {*manifest["spm"].values()}
    for split, sides in manifest["files"].items():
        for side, files in sides.items():
            if (split, side) != ("train", "tgt"):
                names.update(files.values())
    for sides in manifest.get("text", {}).values():
        names.update(sides.values())
    for name in sorted(names):
        copy_atomic(data.path / name, out / name)
    dtype = np.dtype(manifest.get("dtype", "int32"))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    arrays = {token_file("train", "tgt"): tokens.astype(dtype), offsets_file("train", "tgt"): offsets}
    digest = hashlib.sha256()
    for name, values in arrays.items():

        def write(tmp: Path, values: np.ndarray = values) -> None:
            with open(tmp, "wb") as handle:
                np.save(handle, values, allow_pickle=False)

        atomic_write(out / name, write)
        digest.update(np.ascontiguousarray(values).tobytes())
    manifest["files"]["train"]["tgt"] = {"tokens": token_file("train", "tgt"), "offsets": offsets_file("train", "tgt")}
    summary = manifest["splits"]["train"]
    summary.update(tgt_pieces=len(tokens), tgt_unk=int(np.count_nonzero(tokens == UNK)),
                   max_tgt_len=int(lengths.max(initial=0)) + 1)  # fmt: skip
    manifest["distilled"] = {
        **plan,
        "train_tgt_sha256": digest.hexdigest(),
        "empty_translations": int(np.count_nonzero(lengths == 0)),
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    _write_json(out / MANIFEST, manifest)
    return manifest


def _clean(out: Path) -> None:
    shutil.rmtree(out / CHUNKS, ignore_errors=True)
    (out / PLAN).unlink(missing_ok=True)


def distill(
    data_path: str | Path,
    out: str | Path,
    translator: Translator,
    teacher: dict[str, Any],
    options: SearchOptions = DEFAULT_OPTIONS,
    chunk_size: int = CHUNK_SIZE,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Translate the training source of the data directory ``data_path`` with ``translator`` (its 1-best under
    ``options``) into the new data directory ``out``; return its manifest. ``teacher``: the translator's provenance
    (:func:`teacher_record`). Resumes an interrupted distillation of the same plan; a complete one is left as it is."""
    if options.sampling is not None or options.nbest != 1 or options.alignments or not options.incremental:
        raise UserError("distillation keeps the teacher's 1-best search result: no sampling, n-best or alignments")
    if chunk_size < 1:
        raise UserError(f"chunk size must be at least 1, got {chunk_size}")
    data, out = DataDir.load(data_path), Path(out)
    if out.resolve() == data.path.resolve():
        raise UserError(f"{out}: distil into a new directory, not into the data directory itself")
    check_vocabularies(translator.data, data, str(translator.model_dir or "the teacher"))
    train = data.split("train")  # the search's limits (beam, memory, output lengths) for the longest source
    translator.check(options, False, min(chunk_size, len(train)), int(train.src_lengths.max(initial=0)))
    plan = _plan(data, teacher, options, chunk_size)
    if _claim(out, plan, log):
        _clean(out)
        log(f"{out}: already distilled with this teacher and these settings")
        return json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    total = plan["sentences"]
    chunks = -(-total // chunk_size)
    lengths, tokens = [], []
    vocab_size = data.tgt_vocab.size
    for index in range(chunks):
        lo, hi = index * chunk_size, min(total, (index + 1) * chunk_size)
        path = _chunk_path(out, index)
        loaded = _load_chunk(path, hi - lo, vocab_size) if path.exists() else None
        if loaded is None:
            if path.exists():
                log(f"{path}: damaged, translated again")
            _save_chunk(path, _translate_chunk(translator, data, lo, hi, options))
            loaded = _load_chunk(path, hi - lo, vocab_size)
            assert loaded is not None
            log(f"chunk {index + 1}/{chunks}: sentences {lo + 1:,}-{hi:,} of {total:,} translated")
        lengths.append(loaded[0])
        tokens.append(loaded[1])
    manifest = _finish(data, out, plan, np.concatenate(lengths), np.concatenate(tokens))
    _clean(out)
    log(f"{out}: {total:,} training targets distilled ({manifest['distilled']['empty_translations']} empty)")
    return manifest
