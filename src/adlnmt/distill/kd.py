"""Distil a prepared data directory: the teacher's 1-best translation of every training source becomes its target.

The output is a data directory of the current format (token shards, :mod:`adlnmt.data.shards`, written by its
``ShardBuilder``) with the same sentencepiece models, validation split (its references stay the human ones: students
are selected on them), corpora and training shards; only the training target of each shard changes. Its
``manifest.json`` carries the provenance under ``distilled``: the data it was made from (path, SHA-256 of its
manifest), the teacher (each model's directory, checkpoint and the SHA-256 of its weights, or an export's; engine,
precision, device), the search settings, the vocabularies' digests and the SHA-256 of each new target file. A format-1
directory (from before shards) is refused, with the way to prepare it again under the teacher's vocabulary.

Resumable: the training source is read shard by shard and translated in chunks of at most ``chunk_size`` sentences
(a chunk never spans two shards) in a fixed order, each chunk committed atomically to ``chunks/NNNNNN.npy`` under the
output as soon as it is translated; a shard's files are written once its chunks are done. The plan
(``distill.json``: everything the result depends on) is written first, and a run with another plan is refused rather
than mixed with it. ``manifest.json`` is written last, so a directory without one is never taken for complete
(``DataDir.load`` refuses it); the chunks and the plan are removed after it. A chunk's batches are the same whether or
not the run was interrupted, so a resumed distillation gives the same arrays as an uninterrupted one. Memory holds one
shard's targets.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adlnmt.data.data_dir import FORMAT_VERSION as DATA_FORMAT
from adlnmt.data.data_dir import MANIFEST, DataDir
from adlnmt.data.shards import ShardBuilder, shard_stem
from adlnmt.data.vocab import UNK
from adlnmt.errors import UserError
from adlnmt.inference.options import DEFAULT_OPTIONS, SearchOptions
from adlnmt.jsontext import parse_json, read_object
from adlnmt.store import ExportDir, ModelDir, is_export_dir
from adlnmt.store.atomic import atomic_write, copy_atomic, file_sha256

if TYPE_CHECKING:
    from adlnmt.data.dataset import Split
    from adlnmt.inference.translator import Translator

FORMAT_VERSION = 1
PLAN = "distill.json"
CHUNKS = "chunks"
CHUNK_SIZE = 1000
# the search settings a distillation's result depends on (``workers`` and the like only change its speed)
SEARCH_KEYS = ("beam", "batch_size", "length_penalty", "max_len_ratio", "max_len_extra")


def vocabulary_record(data: DataDir) -> dict[str, Any]:
    """What a distillation records of the data's vocabularies: each side's :meth:`Vocab.digest`, and whether sources
    carry BOS markers."""
    return {"src": data.src_vocab.digest(), "tgt": data.tgt_vocab.digest(), "source_markers": data.source_markers}


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
        "sentences": sum(int(entry["pairs"]) for entry in data.shards("train")),
        "vocabularies": vocabulary_record(data),
    }
    return parse_json(json.dumps(plan))  # as it reads back from JSON


def _comparable(teacher: Any) -> Any:
    """A teacher record as compared with another: a model directory's precision None (its default) is fp32."""
    if not isinstance(teacher, dict) or teacher.get("precision") is not None:
        return teacher
    members = teacher.get("members")
    if not isinstance(members, list) or not all(isinstance(m, dict) and "model" in m for m in members):
        return teacher  # an export runs as exported by default
    return {**teacher, "precision": "fp32"}


def _differences(stored: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    """The keys of ``plan`` whose values ``stored`` does not share; for the teacher, which of its entries differ."""
    found = []
    for key in plan:
        if key != "teacher":
            if stored.get(key) != plan[key]:
                found.append(key)
            continue
        ours, theirs = _comparable(plan[key]), _comparable(stored.get(key))
        if ours != theirs:
            entries = ([name for name in ours if theirs.get(name) != ours[name]]
                       if isinstance(theirs, dict) and theirs.keys() == ours.keys() else [])  # fmt: skip
            found.append(f"teacher ({', '.join(entries)})" if entries else "teacher")
    return found


def _write_json(path: Path, value: dict[str, Any]) -> None:
    text = json.dumps(value, indent=2) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def distilled_record(out: Path) -> dict[str, Any] | None:
    """The provenance (``manifest.json``'s ``distilled``) of a complete distilled data directory, else None."""
    manifest = read_object(out / MANIFEST)
    record = manifest.get("distilled") if manifest else None
    return record if isinstance(record, dict) else None


def distillation_identity(record: dict[str, Any]) -> dict[str, Any]:
    """What a student trains on, from a distilled ``record``, by content only (the same wherever the data and the
    teacher lie): the SHA-256 of each teacher member's weights (an export's manifest), and one SHA-256 over the
    translations (over every training target file's)."""
    members = record["teacher"]["members"]
    teacher = [member.get("weights_sha256") or member["manifest_sha256"] for member in members]
    translations = json.dumps(record["train_tgt_sha256"], sort_keys=True).encode()
    return {"teacher_sha256": teacher, "translations_sha256": hashlib.sha256(translations).hexdigest()}


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
        stored = read_object(out / PLAN)
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


@contextlib.contextmanager
def distilling_alone(out: Path) -> Iterator[None]:
    """The body runs with an exclusive flock on the output directory (made if missing; nothing when ``out`` is not a
    directory, which :func:`_claim` refuses): a UserError while another process distils into it."""
    if out.exists() and not out.is_dir():
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"{out}: another process is distilling into this directory; wait for it to end") from None
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _chunk_path(out: Path, index: int) -> Path:
    return out / CHUNKS / f"{index:06d}.npy"


def save_chunk(path: Path, lengths: Sequence[int] | np.ndarray, tokens: Sequence[int] | np.ndarray) -> None:
    """One committed chunk of target ids: int32 [count, its lengths, its tokens] (the tokens of all, in order)."""
    values = np.concatenate([np.array([len(lengths)], dtype=np.int64), np.asarray(lengths, dtype=np.int64),
                             np.asarray(tokens, dtype=np.int64)]).astype(np.int32)  # fmt: skip

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.save(handle, values, allow_pickle=False)

    atomic_write(path, write)


def load_chunk(path: Path, count: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray] | None:
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
    translator: Translator, data: DataDir, split: Split, lo: int, hi: int, options: SearchOptions
) -> list[list[int]]:
    sources = [data.source_ids(split.src_pieces(i).tolist(), translator.max_input_len) for i in range(lo, hi)]
    found = translator.engine.translate_ids(sources, options, None)
    return [list(hyps[0].tokens) if hyps else [] for hyps in found]


def _chunk_bounds(sizes: Sequence[int], chunk_size: int) -> list[tuple[int, int, int]]:
    """The chunks in order, as (shard, first, end) sentence ranges within a shard: a chunk never spans two shards."""
    return [(shard, lo, min(size, lo + chunk_size)) for shard, size in enumerate(sizes)
            for lo in range(0, size, chunk_size)]  # fmt: skip


def write_shard(out: Path, data: DataDir, source: Split, corpus: str, index: int, lengths: np.ndarray,
                 tokens: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """Write shard ``index`` of ``corpus``: the source shard's pieces with the new targets; its manifest entry."""
    builder = ShardBuilder(np.dtype(data.manifest["dtype"]))
    src_tokens, src_offsets = source.arrays("src")
    builder.add({"src": src_tokens, "tgt": tokens}, {"src": np.diff(src_offsets), "tgt": lengths})
    return {"corpus": corpus, **builder.write(out, shard_stem("train", corpus, index))}


def add_shard(out: Path, data: DataDir, entry: dict[str, Any], source: Split, lengths: np.ndarray, tokens: np.ndarray,
              shards: list[dict[str, Any]], targets: dict[str, dict[str, int]]) -> None:  # fmt: skip
    """Write the next training shard (the source shard of manifest ``entry`` with the targets ``lengths`` and
    ``tokens``) and add it to ``shards`` and its corpus's counts to ``targets`` (:func:`finish`'s arguments)."""
    corpus = str(entry.get("corpus", "train"))
    counts = targets.setdefault(corpus, {"pieces": 0, "unk": 0, "longest": 0, "empty": 0})
    in_corpus = sum(1 for written in shards if written["corpus"] == corpus)
    shards.append(write_shard(out, data, source, corpus, in_corpus, lengths, tokens))
    counts["pieces"] += len(tokens)
    counts["unk"] += int(np.count_nonzero(tokens == UNK))
    counts["longest"] = max(counts["longest"], int(lengths.max(initial=0)))
    counts["empty"] += int(np.count_nonzero(lengths == 0))


def kept_files(data: DataDir) -> list[str]:
    """The files of ``data`` a distillation copies as they are: the vocabularies, the other splits' shards, the
    validation text."""
    names = {*data.manifest["spm"].values()}
    for split, entries in data.manifest["shards"].items():
        if split != "train":
            names.update(name for entry in entries for name in entry["bytes"])
    for sides in data.manifest.get("text", {}).values():
        names.update(sides.values())
    return sorted(names)


def finish(data: DataDir, out: Path, plan: dict[str, Any], shards: list[dict[str, Any]],
           targets: dict[str, dict[str, int]], finished: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Copy the files kept as they are, then write the manifest (last) naming the new training ``shards``;
    ``targets``: per corpus the new target's ``pieces``, ``unk``, ``longest`` and ``empty`` translations;
    ``finished``: when the distillation finished (default: now)."""
    manifest = parse_json(json.dumps(data.manifest))
    for name in kept_files(data):
        copy_atomic(data.path / name, out / name)
    for model in {*data.manifest["spm"].values()}:  # the pieces' readable listing (spm.vocab), where the data has one
        listing = Path(model).with_suffix(".vocab").name
        if (data.path / listing).is_file():
            copy_atomic(data.path / listing, out / listing)
    manifest["shards"]["train"] = shards

    def update(summary: dict[str, Any], counts: list[dict[str, int]]) -> None:
        summary.update(tgt_pieces=sum(c["pieces"] for c in counts), tgt_unk=sum(c["unk"] for c in counts),
                       max_tgt_len=max(c["longest"] for c in counts) + 1)  # fmt: skip

    for corpus, counts in targets.items():
        update(manifest["corpora"][corpus]["train"], [counts])
    update(manifest["splits"]["train"], list(targets.values()))
    manifest["distilled"] = {
        **plan,
        "train_tgt_sha256": {
            name: entry["sha256"][name] for entry in shards for name in entry["files"]["tgt"].values()
        },
        "empty_translations": sum(c["empty"] for c in targets.values()),
        "finished": finished or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
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
    if data.manifest["format_version"] != DATA_FORMAT:
        raise UserError(
            f"{data.path}: a data directory of format {data.manifest['format_version']} (an older adlnmt prepare); "
            f"distillation writes format {DATA_FORMAT}: prepare the corpus again with the teacher's vocabulary "
            "(adlnmt prepare ... --vocab-from TEACHER_MODEL) and distil that"
        )
    check_vocabularies(translator.data, data, str(translator.model_dir or "the teacher"))
    if missing := [name for name in kept_files(data) if not (data.path / name).is_file()]:  # copied at the end
        raise UserError(f"{data.path}: {', '.join(missing)} missing (its manifest names them); prepare it again")
    shards = [data.open_shard("train", index) for index in range(len(data.shards("train")))]
    longest = max((int(shard.src_lengths.max(initial=0)) for shard in shards), default=0)
    sentences = min(chunk_size, max((len(shard) for shard in shards), default=0))  # a chunk never spans two shards
    translator.check(options, sentences=sentences, longest_source=longest)  # beam, memory, output lengths
    plan = _plan(data, teacher, options, chunk_size)
    with distilling_alone(out):
        return _distil_into(out, data, translator, plan, options, chunk_size, log)


def _distil_into(out: Path, data: DataDir, translator: Translator, plan: dict[str, Any], options: SearchOptions,
                 chunk_size: int, log: Callable[[str], None]) -> dict[str, Any]:  # fmt: skip
    """:func:`distill`'s work once its input is checked and ``out`` is this process's."""
    if _claim(out, plan, log):
        _clean(out)
        log(f"{out}: already distilled with this teacher and these settings")
        return parse_json((out / MANIFEST).read_bytes())
    total = plan["sentences"]
    entries = data.shards("train")
    bounds = _chunk_bounds([int(entry["pairs"]) for entry in entries], chunk_size)
    vocab_size = data.tgt_vocab.size
    shards: list[dict[str, Any]] = []
    targets: dict[str, dict[str, int]] = {}
    done = 0  # sentences of the shards before
    for shard, entry in enumerate(entries):
        source, lengths, tokens = data.open_shard("train", shard), [], []
        for index, lo, hi in [(index, lo, hi) for index, (owner, lo, hi) in enumerate(bounds) if owner == shard]:
            path = _chunk_path(out, index)
            loaded = load_chunk(path, hi - lo, vocab_size) if path.exists() else None
            if loaded is None:
                if path.exists():
                    log(f"{path}: damaged, translated again")
                translations = _translate_chunk(translator, data, source, lo, hi, options)
                save_chunk(
                    path, [len(tokens) for tokens in translations], [t for tokens in translations for t in tokens]
                )
                loaded = load_chunk(path, hi - lo, vocab_size)
                assert loaded is not None
                log(f"chunk {index + 1}/{len(bounds)}: sentences {done + lo + 1:,}-{done + hi:,} of {total:,} "
                    "translated")  # fmt: skip
            lengths.append(loaded[0])
            tokens.append(loaded[1])
        add_shard(out, data, entry, source, np.concatenate(lengths), np.concatenate(tokens), shards, targets)
        done += len(source)
    manifest = finish(data, out, plan, shards, targets)
    _clean(out)
    log(f"{out}: {total:,} training targets distilled ({manifest['distilled']['empty_translations']} empty)")
    return manifest
