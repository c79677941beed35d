"""A model directory (``adlnmt train``'s ``--model``; its file names in :mod:`adlnmt.store.names`): its
``config.json`` read and checked, its checkpoints listed, its ``metrics.jsonl`` read (a partial last line, left by
a crash, dropped), the checkpoint to load resolved, its vocabulary checked and loaded, and weights loaded into a
model. PyTorch is imported only to load weights.

The model directory owns its vocabulary: ``vocab/`` is written once, when the model is new, and ``config.json``
keeps the SHA-256 of each of its files (``vocab_sha256``); every command that loads the model checks ``vocab/``
against them: a swapped file is an error naming it, never a model that silently translates garbage.

A model is also named when it is made: a random ``model_id`` in ``config.json``, written into the metadata of every
weights file it writes (:data:`~adlnmt.store.names.WEIGHTS_MODEL_ID`), so that loading another model's weights
(``--checkpoint OTHER/best.safetensors`` with the same shapes and vocabularies) is an error, not a quiet swap; files
written before models were named load as before."""

from __future__ import annotations

import hashlib
import json
import math
import struct
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from adlnmt.errors import UserError
from adlnmt.jsontext import parse_json
from adlnmt.model_config import ModelConfig
from adlnmt.store import names
from adlnmt.store.atomic import append_line, atomic_write, describe, file_sha256, read_records, write_records

if TYPE_CHECKING:
    from torch import nn

    from adlnmt.data.data_dir import DataDir
    from adlnmt.model import Seq2Seq

DEFAULT_MAX_INPUT_LEN = 250  # pieces, for data prepared without a max_len option
EARLY_STOP_METRICS = ("ppl", "bleu")  # what ranks the validated checkpoints (train's early_stop_metric)


def validation_score(record: dict[str, Any], metric: str) -> float:
    """How good a validated checkpoint is by ``metric`` (one of EARLY_STOP_METRICS), higher is better: its greedy
    validation BLEU (``bleu``; a record without one: minus its perplexity, below every BLEU), else minus its
    validation perplexity; NaN counts as worst. The one rule for the trainer's best checkpoint, early stopping and the
    checkpoints it keeps, and for ``adlnmt average --best``."""
    value = record.get("valid_bleu") if metric == "bleu" else None
    value = -record["valid_ppl"] if value is None else value
    return -math.inf if math.isnan(value) else float(value)


class ModelDir:
    """The files of the model directory ``path`` (none of them is read before a method asks for it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"ModelDir({str(self.path)!r})"

    @property
    def config_file(self) -> Path:
        return self.path / names.CONFIG

    @property
    def metrics_file(self) -> Path:
        return self.path / names.METRICS

    @property
    def vocab_dir(self) -> Path:
        return self.path / names.VOCAB_DIR

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / names.CHECKPOINTS_DIR

    @property
    def states_dir(self) -> Path:
        return self.path / names.STATES_DIR

    @property
    def best_weights(self) -> Path:
        return self.path / (names.BEST + names.WEIGHTS_SUFFIX)

    @property
    def averaged_weights(self) -> Path:
        return self.path / (names.AVERAGED + names.WEIGHTS_SUFFIX)

    def weights_path(self, update: int) -> Path:
        return self.checkpoints_dir / names.weights_name(update)

    def state_path(self, update: int) -> Path:
        return self.states_dir / names.state_name(update)

    # --- config.json ------------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the directory holds a model (its ``config.json``)."""
        return self.config_file.is_file()

    def require(self) -> None:
        """A UserError naming the directory unless it holds a model (its ``config.json``)."""
        if not self.exists():
            raise UserError(f"{self.path}: not a model directory (no {names.CONFIG})")

    def config(self) -> dict[str, Any]:
        """``config.json`` with its ``train`` and ``model`` entries checked and the model entry completed with the
        defaults of settings added after the model was trained; UserError naming the file when it is missing,
        damaged or malformed."""
        self.require()
        path = self.config_file
        try:
            stored = parse_json(path.read_bytes())
        except (OSError, ValueError) as err:  # parse_json's JsonError is a ValueError
            raise UserError(f"{path}: damaged ({describe(err)})") from None
        if isinstance(stored, dict) and "model_type" in stored:  # what transformers writes, e.g. an OPUS-MT download
            raise UserError(f"{path}: a Hugging Face model ({stored['model_type']}), not an adlnmt model directory; "
                            f"import it first: adlnmt import {self.path} --from hf-marian --out MODEL")  # fmt: skip
        if not isinstance(stored, dict) or not all(isinstance(stored.get(key), dict) for key in ("train", "model")):
            raise UserError(f"{path}: malformed (expected the objects 'train' and 'model')")
        try:
            stored["model"] = ModelConfig(**stored["model"]).to_dict()
        except TypeError as err:
            raise UserError(f"{path}: malformed model entry ({describe(err)})") from None
        return stored

    def model_id(self) -> str | None:
        """The model's name in ``config.json`` (None: no model here yet, or one made before models were named)."""
        if not self.exists():
            return None
        found = self.config().get(names.MODEL_ID)
        return found if isinstance(found, str) else None

    def write_config(self, stored: dict[str, Any]) -> None:
        text = json.dumps(stored, indent=2, sort_keys=True)
        atomic_write(self.config_file, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    # --- checkpoints ------------------------------------------------------------------------------

    def checkpoint_files(self) -> list[tuple[int, Path]]:
        """Every weights and state file (``checkpoints/``, ``states/``) as (update, path), oldest first."""
        pattern = names.CHECKPOINT_PREFIX + "*"
        paths = [*self.checkpoints_dir.glob(pattern), *self.states_dir.glob(pattern)]
        return sorted((int(m.group(1)), p) for p in paths if (m := names.CHECKPOINT_FILE.fullmatch(p.name)))

    def checkpoints(self) -> dict[int, Path]:
        """The weights files in ``checkpoints/`` by update, oldest first."""
        return {u: p for u, p in self.checkpoint_files() if p.name.endswith(names.WEIGHTS_SUFFIX) and p.is_file()}

    def states(self) -> list[tuple[int, Path]]:
        """The training states in ``states/`` as (update, path), oldest first."""
        return [(u, p) for u, p in self.checkpoint_files() if p.name.endswith(names.STATE_SUFFIX)]

    def resolve(self, checkpoint: str) -> Path:
        """The weights file of ``checkpoint``: best | last (the newest in ``checkpoints/``) | averaged (written by
        ``adlnmt average``) | a path to a .safetensors file."""
        if checkpoint in (names.BEST, names.AVERAGED):
            return self.best_weights if checkpoint == names.BEST else self.averaged_weights
        if checkpoint == names.LAST:
            files = self.checkpoints()
            if not files:
                raise UserError(f"{self.path}: no checkpoints yet")
            return files[max(files)]
        return Path(checkpoint)

    # --- metrics.jsonl ----------------------------------------------------------------------------

    def metrics(self) -> tuple[list[dict[str, Any]], str | None]:
        """The records of ``metrics.jsonl`` in file order and a description of a partial last line (None when
        there is none, :func:`adlnmt.store.atomic.read_records`); no file: no records."""
        return read_records(self.metrics_file)

    def checkpoint_records(self) -> list[dict[str, Any]]:
        """The record of each validated checkpoint, oldest first (a later record of an update wins: a resumed run
        logs its checkpoint again)."""
        by_update = {record["update"]: record for record in self.metrics()[0]}
        return [by_update[update] for update in sorted(by_update)]

    def checkpoint_scores(self) -> dict[int, float]:
        """Each validated checkpoint's :func:`validation_score` by the model's own ``early_stop_metric`` (its
        ``config.json``); UserError naming the file when there is none, or for a record without a validation
        perplexity."""
        if not self.metrics_file.exists():  # a directory: named as such by metrics()
            raise UserError(f"{self.metrics_file}: not found; choosing the best checkpoints needs the validation log")
        metric = self.config()["train"].get("early_stop_metric", "ppl")
        scores = {}
        for record in self.checkpoint_records():
            value = record.get("valid_ppl")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise UserError(f"{self.metrics_file}: the record of update {record['update']} has no valid_ppl")
            scores[record["update"]] = validation_score(record, metric)
        return scores

    def append_metrics(self, record: dict[str, Any]) -> None:
        append_line(self.metrics_file, json.dumps(record))

    def write_metrics(self, records: list[dict[str, Any]]) -> None:
        write_records(self.metrics_file, records)

    # --- vocabulary and weights -------------------------------------------------------------------

    def vocabulary_hashes(self, stored: dict[str, Any]) -> dict[str, str]:
        """The SHA-256 of each ``vocab/`` file as ``stored`` (its ``config.json``) records them."""
        hashes = stored.get(names.VOCAB_HASHES)
        if not isinstance(hashes, dict) or not all(isinstance(value, str) for value in hashes.values()):
            raise UserError(f"{self.config_file}: malformed ({names.VOCAB_HASHES} is not a mapping of file: SHA-256)")
        return hashes

    def vocabularies(self, stored: dict[str, Any] | None = None) -> DataDir:
        """The vocabularies (and data manifest) the model translates with: ``vocab/``, checked against the hashes
        in ``config.json`` (``stored``: it, already read)."""
        from adlnmt.data.data_dir import DataDir

        hashes = self.vocabulary_hashes(self.config() if stored is None else stored)
        check_vocabulary_files(self.vocab_dir, hashes, hashes, self.path)
        return DataDir.load(self.vocab_dir)

    def load_model(self, checkpoint: str) -> tuple[Seq2Seq, DataDir, int]:
        """The model (fp32, CPU) with the weights of ``checkpoint`` (see :meth:`resolve`), its vocabulary and its
        input length limit in pieces."""
        from adlnmt.model import Seq2Seq

        stored = self.config()
        model = Seq2Seq(ModelConfig(**stored["model"]))
        weights = self.resolve(checkpoint)
        load_weights(model, weights)
        self.check_owner(weights, stored)
        data = self.vocabularies(stored)
        return model, data, input_limit(model, data)

    def check_owner(self, weights: Path, stored: dict[str, Any]) -> None:
        """A UserError when ``weights`` (readable) were written by another model than this one (``stored``: its
        ``config.json``); a file or model without a name passes."""
        own, owner = stored.get(names.MODEL_ID), weights_model_id(weights)
        if isinstance(own, str) and owner is not None and owner != own:
            raise UserError(
                f"{weights}: the weights of another model (model id {owner}), not of {self.path} (model id {own}); "
                "give the folder of the model they belong to as --model"
            )


def new_model_id() -> str:
    """A new model's name: random, so that no two models share one."""
    return uuid.uuid4().hex


@contextmanager
def _weights_file(path: Path) -> Iterator[tuple[dict[str, Any], BinaryIO]]:
    """The safetensors file ``path`` open: its JSON header (its tensors' names, dtypes, shapes and offsets, and
    ``__metadata__``) and the handle at its first tensor byte; a file that is not one is a UserError naming it."""
    try:
        with path.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = parse_json(handle.read(size))
            if not isinstance(header, dict):
                raise ValueError("its header is not a JSON object")
            yield header, handle
    except (OSError, ValueError, struct.error) as err:
        raise UserError(f"{path}: not a readable weights file ({describe(err)})") from None


def weights_digest(path: Path) -> str:
    """The SHA-256 of the weights in the safetensors file ``path``: its tensors' names, dtypes, shapes and bytes, not
    its metadata, which names the model that wrote it and which safetensors writes in no fixed order; so the same
    weights digest alike however often and by whichever model they were written (a file's own SHA-256 need not)."""
    with _weights_file(path) as (header, handle):
        header.pop("__metadata__", None)
        digest = hashlib.sha256(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def weights_model_id(path: Path) -> str | None:
    """The name of the model that wrote the weights file ``path`` (its metadata); None for a file written before
    models were named, or by another program."""
    with _weights_file(path) as (header, _):
        metadata = header.get("__metadata__")
    owner = metadata.get(names.WEIGHTS_MODEL_ID) if isinstance(metadata, dict) else None
    return owner if isinstance(owner, str) else None


def files_read(models: Iterable[str | Path], checkpoints: Iterable[str | None] = ()) -> list[Path]:
    """The files a command running ``models`` (model or export directories) with ``checkpoints`` may read, which its
    outputs must never replace: a model directory's config, metrics, weights, checkpoints, training states and
    vocabulary; every file of another folder (an export); a checkpoint given as a path."""
    found: list[Path] = []
    for path in map(Path, models):
        model = ModelDir(path)
        if model.exists():
            found += [model.config_file, model.metrics_file, model.best_weights, model.averaged_weights]
            found += [file for _, file in model.checkpoint_files()]
            found += [file for file in model.vocab_dir.rglob("*") if file.is_file()]
        elif path.is_dir():
            found += [file for file in path.rglob("*") if file.is_file()]
    keywords = (names.BEST, names.LAST, names.AVERAGED)
    return found + [Path(checkpoint) for checkpoint in checkpoints if checkpoint and checkpoint not in keywords]


def input_limit(model: Seq2Seq, data: DataDir) -> int:
    """The most source pieces ``model`` reads (longer inputs are cut to it, with a warning): the data's max_len
    (what it was trained on), or fewer where its learned positions cover fewer (markers and EOS take positions
    too)."""
    limit = int(data.manifest.get("options", {}).get("max_len", DEFAULT_MAX_INPUT_LEN))
    encoder = model.position_limits()[0]
    if encoder is not None:
        limit = min(limit, encoder - 1 - int(data.source_markers))
    return max(limit, 1)


def check_vocabulary_files(directory: Path, hashes: dict[str, str], files: Iterable[str], owner: Path) -> None:
    """UserError naming the first of ``files`` in ``directory`` that is missing or differs from its hash in
    ``hashes`` (recorded when the model in ``owner`` was trained)."""
    for name in sorted(files):
        path = directory / name
        if not path.is_file():
            raise UserError(f"{path}: missing (the vocabulary of {owner}); restore it from the data it was trained on")
        if file_sha256(path) != hashes[name]:
            raise UserError(f"{path}: not the vocabulary {owner} was trained with (its SHA-256 differs from the one "
                            f"in {owner / names.CONFIG}); restore the original file")  # fmt: skip


def load_weights(model: nn.Module, path: Path) -> None:
    """Load the safetensors weights in ``path`` into ``model`` (tied tensors stored once, as ``save_model`` writes
    them); UserError naming the file when it is missing, damaged or of another model."""
    from safetensors.torch import load_model

    if not path.is_file():
        raise UserError(f"{path}: checkpoint not found")
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except Exception as err:  # safetensors raises several types for damaged files
        mismatch = next((line.strip() for line in str(err).splitlines() if "size mismatch" in line), None)
        if mismatch:  # a readable file of another model's shapes
            raise UserError(f"{path}: does not match the model ({mismatch})") from None
        raise UserError(f"{path}: not a readable safetensors checkpoint ({describe(err)})") from None
    if missing or unexpected:
        raise UserError(
            f"{path}: does not match the model (missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]})"
        )
