"""Forced decoding: the log-probability a model gives a given translation (fairseq's ``--score-reference``,
``sockeye-score``, ``marian-scorer``).

Each target is teacher-forced through the model in one pass (:meth:`adlnmt.model.Seq2Seq.forward`; input-feeding
decoders step through it): log p(y_t | y_<t, x) for every target piece and the final EOS, the same values the
search adds up (its ``log_prob`` of a hypothesis equals the forced score of its tokens). Pairs are sorted by length
into batches and returned in input order. A CTranslate2 export scores with CTranslate2's ``score_batch`` instead
(the engines that score: those whose capabilities say ``scores``).

``PairScorer.load("model_dir").score(["Ein Hund läuft."], ["A dog runs."])`` → one :class:`PairScore` per pair.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from adlnmt.data.vocab import BOS, EOS
from adlnmt.errors import UserError
from adlnmt.inference.batching import length_batches
from adlnmt.inference.engine import able
from adlnmt.inference.search import evaluating, pad_batch
from adlnmt.inference.translator import Translator, not_one_string
from adlnmt.model import Seq2Seq
from adlnmt.store import is_export_dir

SCORING_ENGINES = tuple(able("scores"))


@dataclass
class PairScore:
    """The forced-decoding score of one (source, target) pair."""

    token_log_probs: list[float]  # log p(y_t | y_<t, x) of each target piece, then of EOS
    pieces: list[str]  # the target pieces, then the EOS piece

    @property
    def log_prob(self) -> float:
        """Σ log p(y_t | y_<t, x), EOS included."""
        return sum(self.token_log_probs)

    @property
    def tokens(self) -> int:
        """Scored tokens: the target pieces and EOS."""
        return len(self.token_log_probs)

    def score(self, normalize: bool = False) -> float:
        """``log_prob``, or with ``normalize`` the mean log-probability per token."""
        return self.log_prob / self.tokens if normalize else self.log_prob

    def to_dict(self, normalize: bool = False) -> dict[str, Any]:
        return {"score": self.score(normalize), "log_prob": self.log_prob, "tokens": self.tokens,
                "pieces": self.pieces, "token_log_probs": self.token_log_probs}  # fmt: skip


def batches_by_length(lengths: Sequence[tuple[int, int]], batch_size: int) -> list[list[int]]:
    """Indices sorted by (source, target) length, cut into batches of ``batch_size``."""
    if batch_size < 1:
        raise UserError(f"the batch size must be at least 1, got {batch_size}")
    return length_batches(lengths, batch_size)


def forced_log_probs(
    model: Seq2Seq,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    batch_size: int = 64,
    device: torch.device | str = "cpu",
) -> list[list[float]]:
    """log p(y_t | y_<t, x) of every target token and EOS, per pair in input order: encoded ``sources`` (as the
    search takes them, ending with EOS) and ``targets`` (pieces only, no BOS/EOS), teacher-forced in batches."""
    results: list[list[float]] = [[] for _ in sources]
    lengths = [(len(s), len(t)) for s, t in zip(sources, targets, strict=True)]
    with evaluating(model), torch.inference_mode():
        for rows in batches_by_length(lengths, batch_size):
            src = pad_batch([sources[i] for i in rows], device)
            tgt_in = pad_batch([[BOS, *targets[i]] for i in rows], device)
            tgt_out = pad_batch([[*targets[i], EOS] for i in rows], device)
            log_probs = torch.log_softmax(model(src, tgt_in).float(), dim=-1)  # [B, T, V]
            chosen = log_probs.gather(2, tgt_out.unsqueeze(-1)).squeeze(-1).tolist()  # [B, T]
            for row, values in zip(rows, chosen, strict=True):
                results[row] = values[: len(targets[row]) + 1]
    return results


class PairScorer:
    """Forced-decoding scores of raw (source, target) sentence pairs with a loaded :class:`Translator`."""

    def __init__(self, translator: Translator) -> None:
        if not translator.engine.capabilities.scores:
            raise UserError(f"forced scoring runs on the {' and '.join(SCORING_ENGINES)} engines, "
                            f"not {translator.engine_name}")  # fmt: skip
        self.translator = translator

    @classmethod
    def load(
        cls, model_dir: str | Path, checkpoint: str = "best", device: str = "cpu", engine: str | None = None
    ) -> PairScorer:
        """A model directory (on torch; an export engine is a UserError naming ``adlnmt export``) or a CTranslate2
        export (on CTranslate2). ``engine`` None: the directory's own; an engine that does not run the directory
        (torch for an export) is a UserError naming the one that does."""
        if engine is not None and engine not in SCORING_ENGINES:
            raise UserError(f"unknown scoring engine {engine!r}; choose one of {', '.join(SCORING_ENGINES)}")
        own = "auto" if is_export_dir(model_dir) else "torch"
        return cls(Translator.load(model_dir, checkpoint, device, engine=engine or own))

    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        batch_size: int = 64,
        where: Sequence[tuple[str, str]] | None = None,
    ) -> list[PairScore]:
        """One :class:`PairScore` per pair, in input order; sources and targets longer than the model's limits are
        cut (with a warning naming the line), as for translation. ``where``: per pair, the names of its source and
        its target in those warnings (``suite.jsonl:7``, ``suite.jsonl:7 variant 2``) instead of their line numbers;
        a warning repeated word for word is given once."""
        not_one_string(sources, "sources")
        not_one_string(targets, "targets")
        if len(sources) != len(targets):
            raise UserError(f"{len(sources)} sources but {len(targets)} targets: need one target per source")
        translator = self.translator
        tgt_pieces = translator.data.tgt_vocab.encode_batch(list(targets))
        if where is None:
            src_ids = [translator.encode(line, number) for number, line in enumerate(sources, start=1)]
            tgt_ids = [translator.cut_target(ids, number, "target") for number, ids in enumerate(tgt_pieces, start=1)]
        else:
            src_ids, tgt_ids = self.cut_named(sources, tgt_pieces, where)
        if translator.model is not None:
            values = forced_log_probs(translator.model, src_ids, tgt_ids, batch_size, translator.device)
        else:
            values = self.ctranslate2_log_probs(src_ids, tgt_ids, batch_size)
        vocab = translator.data.tgt_vocab
        return [
            PairScore(token_log_probs, [vocab.piece(t) for t in [*ids, EOS]])
            for ids, token_log_probs in zip(tgt_ids, values, strict=True)
        ]

    def cut_named(
        self, sources: Sequence[str], targets: Sequence[list[int]], where: Sequence[tuple[str, str]]
    ) -> tuple[list[list[int]], list[list[int]]]:
        """The source ids and the target pieces of each pair cut to the model's limits, with a warning on stderr
        naming each cut side as ``where`` does (each distinct warning once)."""
        if len(where) != len(sources):
            raise UserError(f"{len(where)} names for {len(sources)} pairs: need one per pair")
        translator = self.translator
        warned: dict[str, None] = {}  # in order, each once
        src_ids: list[list[int]] = []
        tgt_ids: list[list[int]] = []
        for source, target, (source_name, target_name) in zip(sources, targets, where, strict=True):
            encoded, limit = translator.encode_line(source), translator.max_input_len
            src_ids.append(encoded.ids)
            if encoded.pieces > limit:
                warned[f"{source_name}: source of {encoded.pieces} pieces truncated to {limit}"] = None
            limit = translator.max_target_len
            if limit is not None and len(target) > limit:
                warned[f"{target_name}: target of {len(target)} pieces truncated to {limit}"] = None
                target = target[:limit]
            tgt_ids.append(target)
        for warning in warned:
            print(f"warning: {warning}", file=sys.stderr)
        return src_ids, tgt_ids

    def ctranslate2_log_probs(
        self, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], batch_size: int
    ) -> list[list[float]]:
        """CTranslate2's ``score_batch`` on the same length-sorted batches (it adds BOS and EOS to the targets)."""
        engine: Any = self.translator.engine
        src_vocab, tgt_vocab = engine.src_vocab, engine.tgt_vocab
        results: list[list[float]] = [[] for _ in sources]
        for rows in batches_by_length([(len(s), len(t)) for s, t in zip(sources, targets, strict=True)], batch_size):
            scored = engine.translator.score_batch(
                [[src_vocab.piece(i) for i in sources[row]] for row in rows],
                [[tgt_vocab.piece(i) for i in targets[row]] for row in rows],
                max_batch_size=len(rows),
            )
            for row, result in zip(rows, scored, strict=True):
                if len(result.log_probs) != len(targets[row]) + 1:
                    raise UserError(
                        f"target line {row + 1}: CTranslate2 scored {len(result.log_probs)} of its "
                        f"{len(targets[row]) + 1} tokens (longer than the exported positions?)"
                    )
                results[row] = list(result.log_probs)
        return results
