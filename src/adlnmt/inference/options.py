"""What a search is asked and what it gives, without PyTorch: :class:`SearchOptions` (the options of ``adlnmt
translate``, with the sampling rules), :class:`Hypothesis`, the GNMT length penalty and the stop hook
(:func:`stop_when`: a search stopped between steps, e.g. by the server's deadline). Shared by the PyTorch search
(:mod:`adlnmt.inference.search`) and the engines that search themselves (CTranslate2), so that a translation
without PyTorch never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adlnmt.bounds import POSITIVE, SEED, at_least
from adlnmt.errors import UserError
from adlnmt.flags import option, out_of_bounds
from adlnmt.store.atomic import path_flag

if TYPE_CHECKING:
    from torch import Tensor


class SearchStopped(Exception):
    """A search given up between two steps because the ``should_stop`` of :func:`stop_when` said so."""


_SHOULD_STOP: ContextVar[Callable[[], bool] | None] = ContextVar("should_stop", default=None)


@contextmanager
def stop_when(should_stop: Callable[[], bool]) -> Iterator[None]:
    """Searches in this thread meanwhile raise :class:`SearchStopped` before their next step once ``should_stop()``
    is true (e.g. the server's deadline of the requests searched)."""
    token = _SHOULD_STOP.set(should_stop)
    try:
        yield
    finally:
        _SHOULD_STOP.reset(token)


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS/EOS
    log_prob: float  # Σ log p(y_t | y_<t, x), EOS included
    score: float  # log_prob / lp(|tokens| + 1)
    alignment: Tensor | None = None  # [len(tokens) + 1, S_real]


@dataclass(frozen=True)
class SearchOptions:
    """How to search, for :func:`translate_ids`, :meth:`adlnmt.inference.translator.Translator.search`, ``adlnmt
    bench decode`` and experiments; each field declares its flag of ``adlnmt translate`` (:mod:`adlnmt.flags`)."""

    beam: int = option(5, "beam size; 1 = greedy (default %(default)s)", bounds=at_least(1))
    """Beam size k; 1 is greedy search."""
    nbest: int = option(1, "hypotheses per input; >1 writes JSON lines", bounds=at_least(1))
    """Hypotheses per sentence, best first; at most ``beam``."""
    batch_size: int = option(64, "sentences per batch (default %(default)s)", bounds=at_least(1))
    """Sentences per batch (sentences are sorted by length into batches)."""
    length_penalty: float = option(1.0, "GNMT α (default %(default)s; 0 = none)", bounds=at_least(0))
    """GNMT α: hypotheses are ranked by log_prob / ((5 + |Y|) / 6)^α; 0 ranks by log_prob."""
    max_len_ratio: float = option(
        2.0, "longest output = ratio · source length + --max-len-extra (default %(default)s)", bounds=at_least(0)
    )
    """The longest output is ``max_len_ratio · |source| + max_len_extra`` tokens."""
    max_len_extra: int = option(10, "see --max-len-ratio (default %(default)s)", bounds=at_least(0))
    """See ``max_len_ratio``."""
    incremental: bool = option(True, "re-feed the whole prefix every step (slow)", flag="uncached", switch=True)
    """One cached decoder step per token; False re-feeds the whole prefix every step (slow; for comparisons)."""
    alignments: bool = option(
        False,
        "write JSON lines with source-attention alignments (mean over layers and heads), the source pieces and hard "
        "alignments: 'i-j' pairs, source piece i (0-based, markers and EOS not counted) most attended by target piece "
        "j (EOS not counted), as fairseq's --print-alignment",
        switch=True,
    )
    """Give every hypothesis its source-attention alignment."""
    workers: int = option(
        1,
        "CPU: search N batches at a time, each on 1 thread (torch, onnxruntime: forked processes; ctranslate2: "
        "replicas sharing the weights); fastest with N = cores (default %(default)s)",
        bounds=at_least(1),
    )
    """Search that many batches at a time on single threads: forked CPU processes (:mod:`adlnmt.inference.workers`;
    torch and ONNX Runtime), CTranslate2's replicas (:mod:`adlnmt.inference.ctranslate2_engine`)."""
    cuda_graphs: bool = option(
        False, "CUDA: replay each decoder step from a captured CUDA graph (token-identical to eager)", switch=True
    )
    """Decoder steps at fixed (padded) shapes, captured in CUDA graphs on CUDA (:mod:`adlnmt.inference.cuda_graphs`)."""
    sampling: str | None = option(
        None,
        "sample instead of searching: from the K most likely words, or the fewest whose probability reaches P; "
        "--nbest N samples per input (--beam is not used)",
        metavar="topk:K|topp:P",
    )
    """Sample instead of searching: ``topk:K`` draws each token from the K most likely ones, ``topp:P`` from the
    fewest most likely ones whose probability reaches P (nucleus); ``nbest`` samples per sentence, in the order
    drawn (``beam`` is not used). None: greedy or beam search."""
    temperature: float = option(1.0, "sampling temperature (default %(default)s)", bounds=POSITIVE)
    """Sampling: the log-probabilities are divided by it before top-k / top-p (below 1 sharper, above flatter)."""
    seed: int = option(1, "sampling seed: same seed, same samples (default %(default)s)", bounds=SEED)
    """Sampling: every batch's generator is seeded from it and the batch's number, so samples are reproducible."""
    shortlist: str | None = option(
        None,
        "lexical shortlist (adlnmt shortlist): each batch may only output the target pieces its source pieces list, "
        "the frequent ones and the specials (faster; scores normalised over them)",
        metavar="FILE",
        parse=path_flag,
    )
    """A lexical shortlist file (:mod:`adlnmt.inference.shortlist`): each batch's output vocabulary is restricted to
    the union over its sentences (greedy output is unchanged whenever the full softmax's choice is in it). None: the
    whole vocabulary."""

    def __post_init__(self) -> None:
        if problems := out_of_bounds(self):  # each field's range, as its flag checks it
            raise UserError("; ".join(problems))
        if self.sampling is not None:
            sampling_rule(self.sampling)
        elif self.nbest > self.beam:
            raise ValueError(f"need nbest <= beam, got beam={self.beam}, nbest={self.nbest}")


DEFAULT_OPTIONS = SearchOptions()  # those of `adlnmt translate` without flags


def sampling_rule(spec: str) -> tuple[str, float]:
    """``topk:K`` → ("topk", K) with K a positive integer; ``topp:P`` → ("topp", P) with 0 < P <= 1."""
    kind, _, value = spec.partition(":")
    try:
        number = float(value) if kind == "topp" else int(value)
    except ValueError:
        number = 0
    if kind not in ("topk", "topp"):
        raise UserError(f"unknown sampling {spec!r}: use topk:K (K >= 1) or topp:P (0 < P <= 1)")
    if not (0 < number <= 1 if kind == "topp" else number >= 1):
        rule = "P must be a number in (0, 1]" if kind == "topp" else "K must be an integer >= 1"
        raise UserError(f"sampling {spec!r}: {rule}")
    return kind, number


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT: ((5 + |Y|) / 6)^α."""
    return ((5 + length) / 6) ** alpha
