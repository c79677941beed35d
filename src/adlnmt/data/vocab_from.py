"""``adlnmt prepare --vocab-from MODEL``: a data directory encoded with a model's own sentencepiece models (copied from
its ``vocab/``), so that a pretrained or imported model can be fine-tuned on it (``adlnmt train --init-from``)."""

from __future__ import annotations

from pathlib import Path

from adlnmt.data.data_dir import SIDES, DataDir
from adlnmt.data.vocab import Vocab
from adlnmt.errors import DataError

MODEL_VOCAB_DIR = "vocab"  # a model directory's vocabulary folder (adlnmt.store.names.VOCAB_DIR, which data is below)


def copy_vocabularies(vocab_dir: Path, out: Path) -> tuple[dict[str, str], dict[str, Vocab], bool, str]:
    """Copy the sentencepiece model(s) of ``vocab_dir`` (a model's ``vocab/``) into ``out``: their file names per side,
    the vocabularies, whether they are one joint model, and their sentencepiece model type."""
    import shutil

    if not (vocab_dir / "manifest.json").is_file():
        raise DataError("not the vocabulary of a model directory (no vocab/manifest.json)", vocab_dir.parent)
    source = DataDir.load(vocab_dir)
    files = {side: str(source.manifest["spm"][side]) for side in SIDES}
    for name in set(files.values()):
        shutil.copyfile(vocab_dir / name, out / name)
    vocabs = {side: Vocab.load(out / files[side]) for side in SIDES}
    return files, vocabs, bool(source.manifest["joint"]), str(source.manifest["model_type"])


def check_model_tags(vocab_dir: Path, tags: dict[str, str]) -> None:
    """Refuse ``--target-tags`` (``tags``: each corpus's tag) with the vocabulary of a model (``vocab_dir``) whose
    source side lacks one of the tags: a model's vocabulary holds only the tags it was trained with. Nothing is
    checked for a folder that is no model's vocabulary (:func:`copy_vocabularies` says so)."""
    if not (vocab_dir / "manifest.json").is_file():
        return
    vocab = DataDir.load(vocab_dir).src_vocab
    missing = sorted({tag for tag in tags.values() if vocab.tag_id(tag) is None})
    if missing:
        held = vocab.tags()
        raise DataError(f"--target-tags with --vocab-from: the model's source vocabulary has no {', '.join(missing)} "
                        "(a model's vocabulary holds only the tags it was trained with; it has "
                        f"{', '.join(held) or 'none'})", vocab_dir.parent)  # fmt: skip


def model_source_markers(vocab_dir: Path) -> bool | None:
    """Whether the model whose vocabulary is ``vocab_dir`` was trained with a BOS before every source
    (``--source-markers``); None for a folder that is no model's vocabulary (:func:`copy_vocabularies` says so)."""
    if not (vocab_dir / "manifest.json").is_file():
        return None
    return bool(DataDir.load(vocab_dir).manifest.get("source_markers", False))
