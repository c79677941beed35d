"""MarianMT's tokenizer (``source.spm``, ``target.spm``, ``vocab.json``) as an adlnmt vocabulary, and back.

MarianMT segments text with a side's sentencepiece model and looks each piece up in ``vocab.json``, whose ids are not
the sentencepiece ids: ``</s>`` = 0, ``<unk>`` = 1, …, ``<pad>`` = V − 1 (also the decoder's start token, with an
all-zero embedding row). adlnmt's ids *are* sentencepiece ids with PAD = 0, UNK = 1, BOS = 2, EOS = 3. The import
therefore writes, per side, a new sentencepiece model whose id i is adlnmt id i:

    adlnmt id   piece        Marian id (the rows it takes)
    0  PAD      <pad>        none: an all-zero row, never predicted
    1  UNK      <unk>        <unk> (1)
    2  BOS      <s>          <pad> (V − 1): the zero start embedding; never predicted
    3  EOS      </s>         </s> (0)
    4 …         vocab.json's other pieces in Marian id order (2 … V − 2)
    then        pieces of a side's .spm missing from vocab.json: Marian reads them as <unk>; never predicted

A piece gets the type and score it has in the side's ``.spm`` (so segmentation is unchanged); a piece of vocab.json
the side's ``.spm`` lacks is UNUSED there (kept for its id, never produced by segmentation). With one vocab.json both
sides list the same pieces (equal sizes; tied embeddings stay possible); with ``separate_vocabs`` the source's table
is ``vocab.json`` and the target's ``target_vocab.json``, each renumbered on its own (adlnmt's separate
vocabularies). The export inverts the table (adlnmt id 0 dropped, BOS back to ``<pad>`` at the end)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch
from torch import Tensor

from adlnmt.data.vocab import BOS, EOS, PAD, SPECIAL_IDS, UNK
from adlnmt.errors import UserError
from adlnmt.jsontext import parse_json

SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")  # adlnmt ids 0 … 3
MARIAN_EOS, MARIAN_UNK, MARIAN_PAD = "</s>", "<unk>", "<pad>"
TARGET_VOCAB = "target_vocab.json"  # the target side's vocabulary when tokenizer_config.json has separate_vocabs
NEVER_PREDICTED = -100.0  # output bias of ids MarianMT cannot emit: no mass in float32 sums, small in label smoothing


def _model_proto():
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as err:  # needs protobuf (the hf extra)
        raise UserError(f"reading MarianMT tokenizers needs protobuf ({err}); pip install 'adlnmt[hf]'") from None
    return sentencepiece_model_pb2


@dataclass
class MarianVocabulary:
    """The adlnmt vocabulary of a MarianMT tokenizer: ``pieces[i]`` is adlnmt id i's piece and ``rows[i]`` the Marian
    id whose embedding and output rows it takes (None: a zero row); ``never[i]``: an id MarianMT cannot emit."""

    pieces: list[str]
    rows: list[int | None]
    never: list[bool]
    missing: list[str]  # pieces of the .spm models that vocab.json lacks (Marian: <unk>)
    marian_size: int  # the Marian ids (vocab.json's entries)

    @property
    def size(self) -> int:
        return len(self.pieces)


def read_vocab_json(path: Path, size: int, key: str = "vocab_size") -> dict[str, int]:
    """``vocab.json`` (or ``target_vocab.json``) checked: a mapping of piece → id covering 0 … size − 1 once each
    (``size``: config.json's ``key``)."""
    try:
        table = parse_json(path.read_bytes())
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: damaged ({err})") from None
    if not isinstance(table, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in table.values()):
        raise UserError(f"{path}: malformed (expected a JSON object of piece: integer id)")
    ids = sorted(table.values())
    if ids != list(range(size)):
        raise UserError(f"{path}: its {len(table)} ids are not 0 … {size - 1} once each (config.json {key} "
                        f"{size}); the tokenizer does not belong to this model")  # fmt: skip
    return table


def marian_vocabulary(
    table: dict[str, int], side_models: dict[Path, bytes], eos: int, pad: int, path: Path
) -> MarianVocabulary:
    """The adlnmt vocabulary of ``vocab.json`` ``table`` (read from ``path``; eos and pad ids from config.json) for
    the sentencepiece models of both sides (``side_models``: file → its content)."""
    by_id = {i: piece for piece, i in table.items()}
    if table.get(MARIAN_UNK) is None:
        raise UserError(f"{path}: has no {MARIAN_UNK} entry")
    unk = table[MARIAN_UNK]
    if len({eos, pad, unk}) < 3:
        raise UserError(f"{path}: eos ({eos}), pad ({pad}) and {MARIAN_UNK} ({unk}) must be three different ids")
    if not (isinstance(eos, int) and isinstance(pad, int) and 0 <= eos < len(table) and 0 <= pad < len(table)):
        raise UserError(f"{path}: config.json's eos ({eos!r}) and pad ({pad!r}) ids must be ids of its "
                        f"{len(table)} entries")  # fmt: skip
    clashes = [piece for piece in SPECIAL_PIECES if piece in table and table[piece] not in (eos, pad, unk)]
    if clashes:
        raise UserError(f"{path}: the piece {clashes[0]!r} is an ordinary entry here but a special token in adlnmt")
    pieces = list(SPECIAL_PIECES)
    rows: list[int | None] = [None, unk, pad, eos]
    ordinary = [i for i in range(len(table)) if i not in (eos, pad, unk)]
    pieces += [by_id[i] for i in ordinary]
    rows += ordinary
    known = set(pieces)
    missing: list[str] = []
    for model_path, data in side_models.items():
        for piece in _proto(data, model_path).pieces:
            if piece.type in _SEGMENTING and piece.piece not in known:
                known.add(piece.piece)
                missing.append(piece.piece)
    pieces += missing
    rows += [unk] * len(missing)
    never = [i in (PAD, BOS) or i >= len(table) + 1 for i in range(len(pieces))]
    return MarianVocabulary(pieces, rows, never, missing, len(table))


_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_SEGMENTING = (_NORMAL, _USER_DEFINED, _BYTE)  # the piece types segmentation produces


def _proto(data: bytes, path: Path):
    proto = _model_proto().ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as err:  # protobuf's DecodeError and friends
        raise UserError(f"{path}: not a sentencepiece model ({err})") from None
    if not proto.pieces:
        raise UserError(f"{path}: not a sentencepiece model (no pieces)")
    return proto


def side_model(data: bytes, pieces: list[str], path: Path) -> bytes:
    """A side's sentencepiece model (serialized ``data``, from ``path``) renumbered to ``pieces``: the same
    segmentation, adlnmt's special ids, every piece at its adlnmt id (see the module docstring)."""
    proto = _proto(data, path)
    own = {piece.piece: (piece.type, piece.score) for piece in proto.pieces if piece.type in _SEGMENTING}
    del proto.pieces[:]
    kinds = {PAD: _CONTROL, UNK: _UNKNOWN, BOS: _CONTROL, EOS: _CONTROL}
    for index, piece in enumerate(pieces):
        entry = proto.pieces.add()
        entry.piece = piece
        if index in kinds:
            entry.type, entry.score = kinds[index], 0.0
        else:
            entry.type, entry.score = own.get(piece, (_UNUSED, 0.0))
    spec = proto.trainer_spec
    spec.vocab_size = len(pieces)
    for name, index in SPECIAL_IDS.items():
        setattr(spec, f"{name}_id", index)
        setattr(spec, f"{name}_piece", SPECIAL_PIECES[index])
    result = proto.SerializeToString()
    processor = spm.SentencePieceProcessor()
    try:
        processor.load_from_serialized_proto(result)
    except RuntimeError as err:
        raise UserError(f"{path}: cannot be renumbered into an adlnmt vocabulary ({str(err).strip()})") from None
    return result


FILLER = "<adlnmt-filler-{}>"  # vocab.json entries that bring a side up to the other side's size (never produced)


def marian_table(pieces: list[str], size: int | None = None) -> tuple[dict[str, int], list[int | None]]:
    """The export's ``vocab.json`` (or ``target_vocab.json``) for adlnmt ``pieces`` and, per Marian id, the adlnmt
    id whose rows it takes: ``</s>`` 0, ``<unk>`` 1, adlnmt ids 4 … in order, up to ``size`` entries filler pieces
    (None: zero rows, never predicted; MarianMT has one pad id for both sides, so separate vocabularies have one
    size), ``<pad>`` (adlnmt BOS, the start token) last; PAD dropped."""
    fillers = (size or 0) - (len(pieces) - 1)
    order: list[int | None] = [EOS, UNK, *range(4, len(pieces)), *[None] * fillers, BOS]
    names = [MARIAN_EOS, MARIAN_UNK, *pieces[4:], *(FILLER.format(k) for k in range(fillers)), MARIAN_PAD]
    return {name: index for index, name in enumerate(names)}, order


def select_rows(table: Tensor, index: Sequence[int | None], fill: float = 0.0) -> Tensor:
    """Rows ``index`` of ``table`` [V, …] as a new tensor [len(index), …]; ``fill`` where the index is None."""
    result = table.index_select(0, torch.tensor([0 if row is None else row for row in index])).clone()
    result[[i for i, row in enumerate(index) if row is None]] = fill
    return result
