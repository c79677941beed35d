"""What a search is asked and what it gives, without PyTorch: :class:`SearchOptions` (the options of ``adlnmt
translate``), :class:`Hypothesis` and the GNMT length penalty. Shared by the PyTorch search (:mod:`adlnmt.search`)
and the engines that search themselves (CTranslate2), so that a translation without PyTorch never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS/EOS
    log_prob: float  # Σ log p(y_t | y_<t, x), EOS included
    score: float  # log_prob / lp(|tokens| + 1)
    alignment: Tensor | None = None  # [len(tokens) + 1, S_real]


@dataclass(frozen=True)
class SearchOptions:
    """How to search: the options of ``adlnmt translate`` (same meaning and defaults), for :func:`translate_ids`,
    :meth:`adlnmt.translator.Translator.search`, ``adlnmt bench decode`` and experiments."""

    beam: int = 5
    """Beam size k; 1 is greedy search."""
    nbest: int = 1
    """Hypotheses per sentence, best first; at most ``beam``."""
    batch_size: int = 64
    """Sentences per batch (sentences are sorted by length into batches)."""
    length_penalty: float = 1.0
    """GNMT α: hypotheses are ranked by log_prob / ((5 + |Y|) / 6)^α; 0 ranks by log_prob."""
    max_len_ratio: float = 2.0
    """The longest output is ``max_len_ratio · |source| + max_len_extra`` tokens."""
    max_len_extra: int = 10
    """See ``max_len_ratio``."""
    incremental: bool = True
    """One cached decoder step per token; False re-feeds the whole prefix every step (slow; for comparisons)."""
    alignments: bool = False
    """Give every hypothesis its source-attention alignment."""
    workers: int = 1
    """Search the batches in that many forked single-thread CPU processes (:mod:`adlnmt.workers`)."""

    def __post_init__(self) -> None:
        if self.beam < 1 or not 1 <= self.nbest <= self.beam:
            raise ValueError(f"need beam >= 1 and 1 <= nbest <= beam, got beam={self.beam}, nbest={self.nbest}")


DEFAULT_OPTIONS = SearchOptions()  # those of `adlnmt translate` without flags


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT: ((5 + |Y|) / 6)^α."""
    return ((5 + length) / 6) ** alpha
