"""Subword vocabularies: deterministic sentencepiece training and a small wrapper with fixed special ids."""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import sentencepiece as spm

from adlnmt.atomic import atomic_write
from adlnmt.data.options import BOS, EOS, MODEL_TYPES, PAD, SPECIAL_IDS, UNK
from adlnmt.errors import DataError


def language_tag(language: str) -> str:
    """The target-language tag put before a source (Sockeye/Johnson et al. style): ``<2en>`` for ``en``."""
    return f"<2{language}>"


def tag_text(piece: str) -> bool:
    """Whether ``piece`` has the form of a language tag, ``<2xx>`` without spaces."""
    return len(piece) > 3 and piece.startswith("<2") and piece.endswith(">") and not any(c.isspace() for c in piece)


class _Feed:
    """Iterates sentences for sentencepiece and remembers an exception (sentencepiece would wrap it in RuntimeError)."""

    def __init__(self, items: Iterable[str | os.PathLike]) -> None:
        self.items = items
        self.error: BaseException | None = None
        self.count = 0

    def __iter__(self) -> Iterator[str]:
        from adlnmt.data.corpus import read_lines

        try:
            for item in self.items:
                lines = read_lines(item) if isinstance(item, os.PathLike) else [item]
                for line in lines:
                    if line.strip():
                        self.count += 1
                        yield line
        except BaseException as err:
            self.error = err
            raise


def train_sentencepiece(
    texts_or_files: Iterable[str | os.PathLike],
    model_prefix: str | Path,
    vocab_size: int,
    model_type: str = "bpe",
    source: str | Path | None = None,
    user_defined_symbols: Sequence[str] = (),
) -> Path:
    """Train a sentencepiece model deterministically and return the path of ``{model_prefix}.model``; ``source``
    names the input in errors.

    Items of ``texts_or_files`` that are ``os.PathLike`` (e.g. ``Path``) are text files read line by line (gzip when
    named ``*.gz``); ``str`` items are sentences. Empty lines are skipped. Special ids: PAD=0, UNK=1, BOS=2, EOS=3.
    The whole input is used in order (no sampling or shuffling) with one thread, so the same input gives the same
    model, byte for byte wherever it is written (sentencepiece would record ``model_prefix`` in it: it writes to
    memory instead, and the model and its ``.vocab`` listing are written atomically). ``vocab_size`` is a soft
    limit: a tiny corpus yields a smaller vocabulary rather than an error (``PrepareOptions.check`` refuses one with
    no room beside the special ids).
    ``user_defined_symbols`` (e.g. the language tags ``<2en>``) get one id each, right after the special ids.
    """
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    feed = _Feed(texts_or_files)
    prefix = Path(model_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    spm.set_random_generator_seed(1)
    written = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(feed),
            model_writer=written,
            vocab_size=vocab_size,
            model_type=model_type,
            pad_id=PAD,
            unk_id=UNK,
            bos_id=BOS,
            eos_id=EOS,
            character_coverage=1.0,
            hard_vocab_limit=False,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            num_threads=1,
            minloglevel=2,
            **({"user_defined_symbols": list(user_defined_symbols)} if user_defined_symbols else {}),
        )
    except RuntimeError as err:
        if feed.error is not None:
            raise feed.error from None
        if feed.count == 0:
            raise DataError("no text to train the subword model on (every line is empty)", source) from None
        raise DataError(f"sentencepiece training failed: {str(err).strip()}") from None
    model = written.getvalue()
    listing = "".join(f"{piece}\t{score:g}\n" for piece, score, _ in Vocab.from_bytes(model).table())
    atomic_write(prefix.with_name(prefix.name + ".vocab"), lambda tmp: tmp.write_text(listing, encoding="utf-8"))
    path = prefix.with_name(prefix.name + ".model")
    atomic_write(path, lambda tmp: tmp.write_bytes(model))
    return path


class Vocab:
    """A sentencepiece model with the special ids PAD=0, UNK=1, BOS=2, EOS=3."""

    def __init__(self, processor: spm.SentencePieceProcessor, path: str | Path | None = None) -> None:
        self.processor = processor
        self.path = None if path is None else Path(path)
        actual = {
            "pad": processor.pad_id(),
            "unk": processor.unk_id(),
            "bos": processor.bos_id(),
            "eos": processor.eos_id(),
        }
        if actual != SPECIAL_IDS:
            raise DataError(f"sentencepiece model has special ids {actual}, expected {SPECIAL_IDS}", path)

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """Load a ``.model`` file; DataError naming it when it is missing or not a sentencepiece model."""
        path = Path(path)
        if not path.is_file():
            raise DataError("sentencepiece model not found", path)
        return cls.from_bytes(path.read_bytes(), path)

    @classmethod
    def from_bytes(cls, data: bytes, path: str | Path | None = None) -> Vocab:
        """Load from the serialized model (e.g. stored in a checkpoint); ``path`` only labels errors."""
        processor = spm.SentencePieceProcessor()
        try:
            processor.load_from_serialized_proto(data)
        except (RuntimeError, OSError) as err:
            raise DataError(f"not a valid sentencepiece model ({str(err).strip()})", path) from None
        return cls(processor, path)

    def to_bytes(self) -> bytes:
        """The serialized model, loadable with ``Vocab.from_bytes``."""
        return self.processor.serialized_model_proto()

    def table(self) -> list[tuple[str, float, str]]:
        """What makes the ids mean the same: every id's piece, score and kind. (Model files trained before
        2026-11-30, or by sentencepiece itself, record the path they were written to, which changes nothing, so two
        models are compared by their tables, never by their bytes.)"""
        processor = self.processor
        kinds = (("control", processor.is_control), ("unknown", processor.is_unknown), ("unused", processor.is_unused),
                 ("byte", processor.is_byte))  # fmt: skip

        def kind(i: int) -> str:
            return next((name for name, test in kinds if test(i)), "normal")

        return [(processor.id_to_piece(i), round(float(processor.get_score(i)), 6), kind(i)) for i in range(self.size)]

    def digest(self) -> str:
        """SHA-256 of :meth:`table`: two vocabularies with one digest give every id the same meaning, whatever their
        files' bytes."""
        return hashlib.sha256(json.dumps(self.table()).encode()).hexdigest()

    @property
    def size(self) -> int:
        """Number of ids, specials included."""
        return self.processor.get_piece_size()

    def __len__(self) -> int:
        return self.size

    def encode(self, text: str) -> list[int]:
        """Subword ids of ``text`` (pieces only, no BOS/EOS); characters never seen map to UNK. A leading language
        tag of this vocabulary (``"<2en> text"``) is its one id followed by the ids of the rest."""
        tag, rest = self.split_tag(text)
        return ([] if tag is None else [tag]) + self.processor.encode(rest, out_type=int)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` for many texts at once (faster); texts must not start with a language tag."""
        return self.processor.encode(list(texts), out_type=int)

    def tag_id(self, tag: str) -> int | None:
        """The id of the language tag ``tag`` (e.g. ``<2en>``), None when this vocabulary does not hold it."""
        id_ = self.processor.piece_to_id(tag)
        return id_ if tag_text(tag) and id_ != UNK else None

    def tags(self) -> list[str]:
        """The language tags this vocabulary holds (``<2en>``, ...: a model trained with ``--target-tags``)."""
        return [piece for piece in self.pieces(list(range(self.size))) if tag_text(piece)]

    def split_tag(self, text: str) -> tuple[int | None, str]:
        """``text`` split into the id of its leading language tag of this vocabulary (None: none) and the rest."""
        head, _, rest = text.lstrip().partition(" ")
        id_ = self.tag_id(head) if head.startswith("<2") else None
        return (id_, rest) if id_ is not None else (None, text)

    def decode(self, ids: Iterable[int]) -> str:
        """Detokenized text of ``ids``; PAD, BOS and EOS are skipped wherever they occur (nothing stops decoding)."""
        return self.processor.decode([int(i) for i in ids if int(i) not in (PAD, BOS, EOS)])

    def piece(self, id_: int) -> str:
        """The subword string of one id."""
        if not 0 <= id_ < self.size:
            raise IndexError(f"id {id_} out of range for a vocabulary of {self.size}")
        return self.processor.id_to_piece(int(id_))

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The subword strings of ``ids`` (one call into sentencepiece)."""
        if ids and not 0 <= min(ids) <= max(ids) < self.size:
            raise IndexError(f"an id of {list(ids)} is out of range for a vocabulary of {self.size}")
        return self.processor.id_to_piece(list(ids))

    def ids(self, pieces: Sequence[str]) -> list[int]:
        """The ids of subword strings (one call into sentencepiece); a string not in the vocabulary gives UNK."""
        return self.processor.piece_to_id(list(pieces))
