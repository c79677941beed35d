"""A distillation kept without its data: the teacher's translations of the training source as target ids, and the
provenance, so that the distilled data directory can be made again from the prepared data alone (no teacher).

A grid's archive keeps one per distillation step (``experiments/results/NAME/distilled/<key>/``): the students'
training targets are part of the record of their runs, like each run's hypotheses, and a fresh machine trains the
students on exactly those targets instead of training the teacher again. The folder holds no source text or source
ids (the corpus stays where it is):

    record.json             the data directory's ``distilled`` provenance (:mod:`adlnmt.distill.kd`) and, per
                            training shard, its corpus and sentence count
    targets/NNNNNN.npy      shard N's target ids, in :func:`adlnmt.distill.kd.save_chunk`'s format

:func:`restore` writes the data directory as :func:`adlnmt.distill.kd.distill` would: the prepared data's source
shards with the archived targets, checked against the recorded SHA-256 of every target file, the manifest last.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from adlnmt.data.data_dir import MANIFEST, DataDir
from adlnmt.distill.kd import add_shard, distilled_record, finish, load_chunk, save_chunk, vocabulary_record
from adlnmt.errors import UserError
from adlnmt.jsontext import parse_json, read_object
from adlnmt.store.atomic import atomic_write

RECORD = "record.json"
TARGETS = "targets"
RESULT_KEYS = ("train_tgt_sha256", "empty_translations", "finished")  # what a distillation adds to its plan


def archived_record(folder: Path) -> dict[str, Any] | None:
    """The ``distilled`` provenance of the distillation archived in ``folder``, None when there is none."""
    stored = read_object(folder / RECORD)
    return stored.get("distilled") if stored else None


def _target_path(folder: Path, index: int) -> Path:
    return folder / TARGETS / f"{index:06d}.npy"


def archive(out: Path, folder: Path) -> None:
    """Keep the complete distillation in the data directory ``out`` as ``folder`` (replacing one there)."""
    record = distilled_record(out)
    if record is None:
        raise UserError(f"{out}: not a complete distilled data directory; nothing to archive")
    data = DataDir.load(out)
    building = folder.parent / f".{folder.name}.building"
    shutil.rmtree(building, ignore_errors=True)
    shards = []
    for index, entry in enumerate(data.shards("train")):
        tokens, offsets = data.open_shard("train", index).arrays("tgt")
        save_chunk(_target_path(building, index), offsets[1:] - offsets[:-1], tokens)
        shards.append({"corpus": str(entry.get("corpus", "train")), "pairs": int(entry["pairs"])})
    text = json.dumps({"distilled": record, "shards": shards}, indent=2) + "\n"
    atomic_write(building / RECORD, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    shutil.rmtree(folder, ignore_errors=True)
    building.rename(folder)  # a reader sees the old folder or the new one, complete


def restore(data_path: Path, folder: Path, out: Path) -> dict[str, Any]:
    """Write the distilled data directory ``out`` (absent or empty) from the prepared data ``data_path`` (the
    teacher's) and the distillation archived in ``folder``; return its manifest. UserError when the data is not the
    one that was distilled (other vocabularies or shards) or an archived target is missing, damaged or not the one
    recorded."""
    data = DataDir.load(data_path)
    stored = parse_json((folder / RECORD).read_bytes())
    record = stored["distilled"]
    if vocabulary_record(data) != record["vocabularies"]:
        raise UserError(f"{folder}: was distilled from data with other vocabularies than {data.path}")
    entries = data.shards("train")
    layout = [{"corpus": str(entry.get("corpus", "train")), "pairs": int(entry["pairs"])} for entry in entries]
    if layout != stored["shards"]:
        raise UserError(f"{folder}: its training shards (corpus, sentences) are not those of {data.path}")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: exists and is not empty; restore a distillation into a new directory")
    building = out.parent / f".{out.name}.restoring"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    try:
        _rebuild(data, record, folder, building)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    if out.exists():
        out.rmdir()
    building.rename(out)
    return parse_json((out / MANIFEST).read_bytes())


def _rebuild(data: DataDir, record: dict[str, Any], folder: Path, building: Path) -> None:
    """The distilled directory in ``building``: each source shard of ``data`` with its archived targets."""
    shards: list[dict[str, Any]] = []
    targets: dict[str, dict[str, int]] = {}
    for index, entry in enumerate(data.shards("train")):
        source = data.open_shard("train", index)
        loaded = load_chunk(_target_path(folder, index), len(source), data.tgt_vocab.size)
        if loaded is None:
            raise UserError(f"{_target_path(folder, index)}: missing or damaged (shard {index}'s targets)")
        add_shard(building, data, entry, source, *loaded, shards, targets)
    written = {name: entry["sha256"][name] for entry in shards for name in entry["files"]["tgt"].values()}
    if written != record["train_tgt_sha256"]:
        raise UserError(f"{folder}: its targets are not the translations its record names (SHA-256 differs)")
    plan = {key: value for key, value in record.items() if key not in RESULT_KEYS}
    finish(data, building, plan, shards, targets, finished=record["finished"])
