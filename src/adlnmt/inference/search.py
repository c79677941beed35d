"""Greedy and beam search, batched over sentences, on the incremental decoding protocol.

Both take their options as one :class:`SearchOptions` and share a :class:`SearchBatch` (the encoded batch, its
length limits and the dropping of finished sentences). They run on a :class:`~adlnmt.inference.stepper.Stepper`
(incremental or re-fed decoding of a PyTorch model, or a :class:`~adlnmt.inference.stepper.StepEngine`: ONNX
Runtime, ensembles). Finished sentences leave the batch (their rows are dropped with one gather); sentences are
sorted by length into batches (:mod:`adlnmt.inference.batching`, shared with CTranslate2) and returned in input
order. :class:`TorchEngine` is the engine of a PyTorch model.

Scores: ``log_prob`` is the sum of the token log-probabilities including EOS; ``score`` divides it by
the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α (|Y| counts EOS; α = 0 gives log_prob).
Alignments: per output token, the source attention probabilities averaged over every source
attention layer and head of the decoder, [|Y| + 1, S] (rows for each token and EOS; each sums to 1).

Sampling (``SearchOptions.sampling``) draws each token instead of taking the argmax, in the greedy loop; a target
prefix (``translate_ids(..., prefixes=...)``) forces the first tokens of a sentence's hypotheses, then the search goes
on as usual (the prefix's log-probabilities count in the scores; with an empty prefix nothing changes). Lexical
constraints (``translate_ids(..., constraints=...)``, :mod:`adlnmt.inference.constraints`) are searched for by
:func:`constrained_beam_batch` (dynamic beam allocation, :mod:`adlnmt.inference.allocation`), a search of its own:
without constraints nothing of it runs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from adlnmt.data.vocab import BOS, EOS, PAD
from adlnmt.errors import UserError
from adlnmt.inference.allocation import Allocation
from adlnmt.inference.batching import length_batches, length_limit
from adlnmt.inference.constraints import EncodedConstraints
from adlnmt.inference.cuda_graphs import graph_stepper
from adlnmt.inference.engine import CAPABILITIES, Engine
from adlnmt.inference.options import (
    _SHOULD_STOP,
    Hypothesis,
    SearchOptions,
    SearchStopped,
    length_penalty,
    sampling_rule,
)
from adlnmt.inference.shortlist import Shortlist, load_shortlist
from adlnmt.inference.stepper import StepEngine, Stepper
from adlnmt.inference.vocabulary_slice import VocabularySlice
from adlnmt.inference.workers import in_workers
from adlnmt.model import Seq2Seq
from adlnmt.speedups import SPEEDUPS


def sample(log_probs: Tensor, options: SearchOptions, generator: torch.Generator) -> Tensor:
    """One token per row of log_probs [N, V], drawn from the top-k or top-p words at the options' temperature."""
    kind, value = sampling_rule(options.sampling or "")
    logits = log_probs / options.temperature
    if kind == "topk":
        threshold = logits.topk(min(int(value), logits.size(1)), dim=-1).values[:, -1:]  # [N, 1]
        logits = logits.masked_fill(logits < threshold, float("-inf"))
    else:
        ranked, order = logits.sort(dim=-1, descending=True)
        probs = torch.softmax(ranked, dim=-1)
        outside = probs.cumsum(-1) - probs >= value  # the words before already reach P
        logits = torch.full_like(logits, float("-inf")).scatter(1, order, ranked.masked_fill(outside, float("-inf")))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator).squeeze(1)


def pad_batch(sentences: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> Tensor:
    """Right-padded [B, S] LongTensor of token ids."""
    width = max(1, max((len(s) for s in sentences), default=1))
    batch = torch.full((len(sentences), width), PAD, dtype=torch.long)
    for row, sentence in enumerate(sentences):
        batch[row, : len(sentence)] = torch.as_tensor(list(sentence), dtype=torch.long)
    return batch.to(device)


def bar_eos(log_probs: Tensor, rows: Tensor) -> None:
    """In place: EOS impossible in the rows [N] (bool) that have not reached their minimum length."""
    log_probs[:, EOS].masked_fill_(rows, float("-inf"))


@functools.cache
def block_size(vocab: int, largest: int) -> int:
    """The largest divisor of ``vocab`` that is at most ``largest`` (0 when below 8: not worth blocks)."""
    return next((d for d in range(min(largest, vocab), 7, -1) if vocab % d == 0), 0)


def best_continuations(scores: Tensor, log_probs: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """The ``count`` best scores[b, i] + log_probs[b·k + i, w] of every sentence b: scores [B, k] and
    log_probs [B·k, V] → values [B, count] (best first) and their indices i·V + w [B, count].

    With ``SPEEDUPS.topk_block`` the words are cut into blocks; the best ``count`` candidates lie in the
    ``count`` blocks with the highest maxima (a candidate outside them is beaten by those maxima), so
    only those blocks go through top-k.
    """
    active, k = scores.shape
    vocab = log_probs.size(1)
    size = block_size(vocab, SPEEDUPS.topk_block) if SPEEDUPS.topk_block else 0
    blocks_per_row = vocab // size if size else 0
    if k * blocks_per_row <= count:
        return (scores.view(-1, 1) + log_probs).view(active, k * vocab).topk(count, dim=1)
    blocks = log_probs.view(active, k * blocks_per_row, size)  # [B, k·C, size]
    row_scores = scores.repeat_interleave(blocks_per_row, dim=1)  # [B, k·C]
    best = (blocks.amax(-1) + row_scores).topk(count, dim=1).indices  # [B, count] block ids
    members = blocks.gather(1, best.unsqueeze(-1).expand(-1, -1, size))  # [B, count, size]
    members = members + row_scores.gather(1, best).unsqueeze(-1)
    values, within = members.view(active, count * size).topk(count, dim=1)  # [B, count]
    return values, best.gather(1, within // size) * size + within % size


def rows_in_place(origin: Tensor) -> Tensor:
    """The order [B, k] in which to lay out each sentence's k continuations (their parent beams ``origin``
    [B, k], in score order) so that the first child of every parent takes its parent's row: a beam reorder
    then copies only the other rows (``GrowingTensor.reorder``). Slot s gets continuation order[b, s]."""
    batch, k = origin.shape
    beams = torch.arange(k, device=origin.device)
    same_parent = origin.unsqueeze(2) == origin.unsqueeze(1)  # [B, c, c']
    first = ~(same_parent & (beams.unsqueeze(1) > beams)).any(-1)  # [B, c]: no earlier sibling
    taken = ((origin.unsqueeze(1) == beams.view(1, k, 1)) & first.unsqueeze(1)).any(-1)  # [B, slot]
    free_slots = (taken.long() * k + beams).sort(dim=1).values % k  # free slots first, ascending
    rank = (~first).long().cumsum(1) - 1  # among the later siblings
    slot = torch.where(first, origin, free_slots.gather(1, rank.clamp(min=0)))  # [B, c]
    return torch.empty_like(origin).scatter_(1, slot, beams.expand(batch, k))


class SearchBatch:
    """What greedy and beam search share for a batch src [B, S]: the encoded sentences in a :class:`Stepper`
    with ``k`` rows each (rows b·k … b·k + k − 1 of active sentence b), the sentences still searched, the step,
    the length limits ``max_len`` / ``min_len`` [B], and dropping the finished sentences."""

    def __init__(
        self,
        model: Seq2Seq | StepEngine,
        src: Tensor,
        max_len: Tensor,
        min_len: Tensor | None,
        options: SearchOptions,
        k: int = 1,
        prefix: Tensor | None = None,
        vocabulary: VocabularySlice | None = None,
    ) -> None:
        memory = model.encode(src)
        self.src_lengths: list[int] = memory.mask.sum(1).tolist()
        if k > 1:
            memory = memory.select(torch.arange(src.size(0), device=src.device).repeat_interleave(k))
        self.stepper = (
            graph_stepper(model, memory, int(max_len.max()) + 1, options.incremental, options.alignments)
            if options.cuda_graphs
            else Stepper(model, memory, options.incremental, options.alignments, vocabulary)
        )
        self.vocabulary = vocabulary  # the words the search chooses are its positions
        self.k = k
        self.sentences = torch.arange(src.size(0), device=src.device)  # original sentence of each active one
        self.active: list[int] = list(range(src.size(0)))  # the same, on the host
        self.limit = max_len.to(src.device)
        self.limits: list[int] = max_len.tolist()
        self.floor = None if min_len is None else min_len.to(src.device)
        self.prefix = prefix if vocabulary is None or prefix is None else vocabulary.to_positions(prefix)  # [B, P]
        self.step = 0

    def per_row(self, per_sentence: Tensor) -> Tensor:
        """[B_act] values of the active sentences → [N] values of their rows."""
        return per_sentence if self.k == 1 else per_sentence.repeat_interleave(self.k)

    def next_log_probs(self, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        """:meth:`Stepper.step` for the rows' last tokens [N], with EOS barred before the minimum length; raises
        :class:`SearchStopped` instead when the search is to stop (:func:`stop_when`)."""
        should_stop = _SHOULD_STOP.get()
        if should_stop is not None and should_stop():
            raise SearchStopped(f"search stopped after {self.step} steps")
        log_probs, alignment = self.stepper.step(tokens)  # [N, V], [N, S]
        if self.floor is not None:
            bar_eos(log_probs, self.per_row(self.floor[self.sentences] > self.step))
        if self.prefix is not None and self.step < self.prefix.size(1):
            log_probs = force_tokens(log_probs, self.per_row(self.prefix[self.sentences, self.step]))
        return log_probs, alignment

    def to_ids(self, words: Tensor) -> Tensor:
        """The vocabulary ids of chosen ``words`` (positions in the vocabulary slice, when there is one)."""
        return words if self.vocabulary is None else self.vocabulary.to_ids(words)

    def sentence_ids(self) -> list[int]:
        """The original sentence of each active one (read from the device when ``host_bookkeeping`` is off)."""
        return self.active if SPEEDUPS.host_bookkeeping else [int(s) for s in self.sentences]

    def at_limit(self) -> Tensor:
        """[N] bool: the rows whose sentence has reached its maximum length (they may only end now)."""
        return self.per_row(self.limit[self.sentences] <= self.step)

    def any_at_limit(self) -> bool:
        """Whether any active sentence has reached its maximum length (from the host lists when it can)."""
        if SPEEDUPS.host_bookkeeping:
            return any(self.limits[s] <= self.step for s in self.active)
        return bool(self.at_limit().any())

    def drop(self, done: list[bool]) -> tuple[Tensor, Tensor]:
        """Drop the active sentences ``done`` [B_act] and their rows → the indices of the sentences and of the
        rows that go on, for the caller's own per-sentence and per-row tensors."""
        kept = [i for i, ends in enumerate(done) if not ends]
        keep = torch.tensor(kept, dtype=torch.long, device=self.sentences.device)  # [B_left]
        rows = (keep.unsqueeze(1) * self.k + torch.arange(self.k, device=keep.device)).flatten()
        self.sentences = self.sentences[keep]
        self.active = [self.active[i] for i in kept]
        self.stepper.select(rows)
        return keep, rows


def force_tokens(log_probs: Tensor, forced: Tensor) -> Tensor:
    """log_probs [N, V] where each row with a forced token ``forced`` [N] (PAD: none) may only continue with it,
    at its log-probability."""
    chosen = forced.unsqueeze(1)
    only = torch.full_like(log_probs, float("-inf")).scatter(1, chosen, log_probs.gather(1, chosen))
    return torch.where(forced.ne(PAD).unsqueeze(1), only, log_probs)


def force_eos(log_probs: Tensor, forced: Tensor) -> Tensor:
    """log_probs [N, V] where the rows ``forced`` [N] (bool) may only end: EOS keeps its log-probability,
    every other word gets -inf."""
    eos_only = torch.full_like(log_probs[0], float("-inf"))
    eos_only[EOS] = 0.0
    return torch.where(forced.unsqueeze(1), eos_only + log_probs[:, EOS : EOS + 1], log_probs)


@dataclass
class Beams:
    """The k open hypotheses of every active sentence, in rows b·k … b·k + k − 1 of active sentence b."""

    scores: Tensor  # [B_act, k] cumulative log-probabilities
    tokens: Tensor  # [N] the last token of each row
    history: Tensor  # [N, t] the tokens of each row, without BOS
    aligned: Tensor  # [N, t, S] the alignments of each row (t = 0 without alignments)

    @classmethod
    def start(cls, src: Tensor, k: int) -> Beams:
        """Beams for src [B, S] before the first step: only beam 0 of each sentence is alive, at BOS."""
        batch = src.size(0)
        scores = torch.full((batch, k), float("-inf"), device=src.device)
        scores[:, 0] = 0.0
        tokens = torch.full((batch * k,), BOS, dtype=torch.long, device=src.device)
        return cls(
            scores, tokens, tokens.new_zeros(batch * k, 0), torch.zeros(batch * k, 0, src.size(1), device=src.device)
        )

    def advance(self, scores: Tensor, parents: Tensor, tokens: Tensor) -> None:
        """Row i continues the hypothesis of row ``parents[i]`` with ``tokens[i]``; new scores [B_act, k]."""
        self.scores, self.tokens = scores, tokens
        self.history = torch.cat([self.history[parents], tokens.unsqueeze(1)], dim=1)
        self.aligned = self.aligned[parents]

    def keep(self, sentences: Tensor, rows: Tensor) -> None:
        """Keep the active sentences ``sentences`` and their rows ``rows`` (see :meth:`SearchBatch.drop`)."""
        self.scores = self.scores[sentences]
        self.tokens, self.history, self.aligned = self.tokens[rows], self.history[rows], self.aligned[rows]


def continuations(top_scores: Tensor, rows: Tensor, words: Tensor, origin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The k best candidates of each sentence that do not end (of its 2k best [B_act, 2k]: their scores, rows
    and words, and beams ``origin``) → scores [B_act, k], parent rows [N] and tokens [N] of the next step."""
    active, k = top_scores.size(0), top_scores.size(1) // 2
    goes_on = ~words.eq(EOS)
    chosen = goes_on & (goes_on.cumsum(1) <= k)  # [B_act, 2k], exactly k per sentence
    slots = rows_in_place(origin[chosen].view(active, k)) if SPEEDUPS.rows_in_place else None
    scores, parents, tokens = (
        x[chosen].view(active, k) if slots is None else x[chosen].view(active, k).gather(1, slots)
        for x in (top_scores, rows, words)
    )
    return scores, parents.flatten(), tokens.flatten()


def end_hypotheses(
    finished: list[list[Hypothesis]], batch: SearchBatch, beams: Beams, candidates: tuple[Tensor, Tensor, Tensor],
    options: SearchOptions,
) -> None:  # fmt: skip
    """Add to ``finished`` the hypotheses that EOS ends among the k best ``candidates`` (scores, rows, words
    [B_act, 2k]) of each sentence, until a sentence has k."""
    top_scores, rows, words = candidates
    k = batch.k
    ends = words.eq(EOS) & torch.isfinite(top_scores)
    ends[:, k:] = False  # only EOS among the k best ends a hypothesis
    ids = batch.sentence_ids()
    for b, row, log_prob, tokens in ended(ends, rows, top_scores, beams.history):
        sentence = ids[b]
        if len(finished[sentence]) >= k:
            continue
        score = log_prob / length_penalty(batch.step + 1, options.length_penalty)
        alignment = beams.aligned[row, :, : batch.src_lengths[sentence]].clone() if options.alignments else None
        finished[sentence].append(Hypothesis(tokens, log_prob, score, alignment))


def ended(
    ends: Tensor, rows: Tensor, top_scores: Tensor, history: Tensor
) -> Iterator[tuple[int, int, float, list[int]]]:
    """(active sentence, row, log-probability, its tokens) of each candidate ``ends`` [B_act, 2k] marks, read
    from the device in one batch of transfers (``host_bookkeeping``) or one read per value."""
    if not SPEEDUPS.host_bookkeeping:
        for b, r in ends.nonzero().tolist():
            row = int(rows[b, r])
            yield b, row, float(top_scores[b, r]), history[row].tolist()
        return
    sentence, candidate = ends.nonzero().unbind(1)  # [E] each
    ended_rows = rows[sentence, candidate]
    yield from zip(
        sentence.tolist(),
        ended_rows.tolist(),
        top_scores[sentence, candidate].tolist(),
        history[ended_rows].tolist(),
        strict=True,
    )


@torch.inference_mode()
def beam_batch(
    model: Seq2Seq | StepEngine, src: Tensor, max_len: Tensor, options: SearchOptions, min_len: Tensor | None = None,
    prefix: Tensor | None = None, vocabulary: VocabularySlice | None = None,
) -> list[list[Hypothesis]]:  # fmt: skip
    """Beam search for a batch src [B, S]; up to ``options.nbest`` hypotheses per sentence, best first.

    Each step takes the 2k best continuations of every sentence: EOS among its k best ends a
    hypothesis, the k best others continue (so the beam stays full). A sentence is done when k
    hypotheses have ended or it reaches ``max_len[b]`` tokens (EOS is forced there); EOS is barred
    before ``min_len[b]`` tokens (min_len = max_len forces an exact output length, for speed sweeps); ``prefix``
    [B, P] forces each sentence's first tokens (PAD-padded); ``vocabulary`` restricts the words (``--shortlist``).
    """
    k = options.beam
    batch = SearchBatch(model, src, max_len, min_len, options, k, prefix, vocabulary)
    beams = Beams.start(src, k)
    finished: list[list[Hypothesis]] = [[] for _ in range(src.size(0))]
    while batch.sentences.numel() > 0:
        log_probs, alignment = batch.next_log_probs(beams.tokens)  # [N, V], [N, S]
        if batch.any_at_limit():
            log_probs = force_eos(log_probs, batch.at_limit())
        vocab, active = log_probs.size(1), batch.sentences.numel()
        top_scores, top_ids = best_continuations(beams.scores, log_probs, min(2 * k, k * vocab))  # [B_act, 2k]
        origin = torch.div(top_ids, vocab, rounding_mode="floor")  # beam each candidate extends
        words = batch.to_ids(top_ids % vocab)
        rows = origin + torch.arange(active, device=src.device).unsqueeze(1) * k  # [B_act, 2k] row indices
        if alignment is not None:
            beams.aligned = torch.cat([beams.aligned, alignment.unsqueeze(1)], dim=1)  # [N, t + 1, S]
        end_hypotheses(finished, batch, beams, (top_scores, rows, words), options)
        scores, parents, tokens = continuations(top_scores, rows, words, origin)
        batch.stepper.reorder(parents)
        beams.advance(scores, parents, tokens)
        batch.step += 1
        done = [len(finished[s]) >= k or batch.limits[s] < batch.step for s in batch.sentence_ids()]
        if any(done):
            beams.keep(*batch.drop(done))
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[: options.nbest] for hyps in finished]


@torch.inference_mode()
def constrained_beam_batch(
    model: Seq2Seq | StepEngine, src: Tensor, max_len: Tensor, options: SearchOptions,
    constraints: Sequence[EncodedConstraints | None], min_len: Tensor | None = None, prefix: Tensor | None = None,
) -> list[list[Hypothesis]]:  # fmt: skip
    """:func:`beam_batch` with lexical ``constraints`` per sentence, by dynamic beam allocation
    (:mod:`adlnmt.inference.allocation`; beam 1 for greedy search, scored as greedy search scores): up to
    ``options.nbest`` hypotheses per sentence that contain every include phrase and no exclude phrase, best first; none
    for a sentence whose hypotheses reached ``max_len`` without meeting its include phrases."""
    k = options.beam
    alpha = options.length_penalty if k > 1 else 0.0  # greedy search scores by the log-probability
    batch = SearchBatch(model, src, max_len, min_len, options, k, prefix)
    beams = Beams.start(src, k)
    allocation = Allocation(constraints, k)
    finished: list[list[tuple[Hypothesis, bool]]] = [[] for _ in range(src.size(0))]
    while batch.sentences.numel() > 0:
        log_probs, alignment = batch.next_log_probs(beams.tokens)  # [N, V], [N, S]
        at_limit = batch.at_limit()  # [N]
        ids = batch.sentence_ids()
        allocation.restrict(log_probs, ids, beams.history, at_limit.tolist())
        if batch.any_at_limit():
            log_probs = force_eos(log_probs, at_limit)
        if alignment is not None:
            beams.aligned = torch.cat([beams.aligned, alignment.unsqueeze(1)], dim=1)  # [N, t + 1, S]
        best = best_continuations(beams.scores, log_probs, min(2 * k, k * log_probs.size(1)))  # [B_act, 2k] each
        endings, (scores, parents, tokens) = allocation.select(beams.scores, log_probs, ids, best)
        for ending in endings:
            sentence = ids[ending.sentence]
            if len(finished[sentence]) < k:
                score = ending.log_prob / length_penalty(batch.step + 1, alpha)
                aligned = (
                    beams.aligned[ending.row, :, : batch.src_lengths[sentence]].clone() if options.alignments else None
                )
                hypothesis = Hypothesis(beams.history[ending.row].tolist(), ending.log_prob, score, aligned)
                finished[sentence].append((hypothesis, ending.met))
        batch.stepper.reorder(parents)
        beams.advance(scores, parents, tokens)
        batch.step += 1
        done = [len(finished[s]) >= k or batch.limits[s] < batch.step for s in batch.sentence_ids()]
        if any(done):
            sentences, rows = batch.drop(done)
            beams.keep(sentences, rows)
            allocation.keep(rows.tolist())
    met = [[h for h, all_met in found if all_met] for found in finished]
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[: options.nbest] for hyps in met]


@torch.inference_mode()
def greedy_batch(
    model: Seq2Seq | StepEngine, src: Tensor, max_len: Tensor, options: SearchOptions, min_len: Tensor | None = None,
    prefix: Tensor | None = None, generator: torch.Generator | None = None, vocabulary: VocabularySlice | None = None,
) -> list[Hypothesis]:  # fmt: skip
    """The argmax continuation of each sentence of src [B, S], ``min_len[b]`` to ``max_len[b]`` tokens long, after
    its ``prefix`` (see :func:`beam_batch`, also for ``vocabulary``); with a ``generator``, tokens sampled by
    ``options.sampling`` instead."""
    batch = SearchBatch(model, src, max_len, min_len, options, 1, prefix, vocabulary)
    size = src.size(0)
    tokens = torch.full((size,), BOS, dtype=torch.long, device=src.device)
    outputs: list[list[int]] = [[] for _ in range(size)]
    log_prob = [0.0] * size
    rows_alignment: list[list[Tensor]] = [[] for _ in range(size)]
    while batch.sentences.numel() > 0:
        log_probs, alignment = batch.next_log_probs(tokens)  # [B_act, V]
        tokens = log_probs.argmax(-1) if generator is None else sample(log_probs, options, generator)  # [B_act]
        tokens = torch.where(batch.at_limit(), torch.full_like(tokens, EOS), tokens)
        chosen = log_probs.gather(1, tokens.unsqueeze(1)).squeeze(1).tolist()
        tokens = batch.to_ids(tokens)
        token_ids = tokens.tolist()
        for i, (row, token) in enumerate(zip(batch.sentence_ids(), token_ids, strict=True)):
            log_prob[row] += chosen[i]
            if alignment is not None:
                rows_alignment[row].append(alignment[i, : batch.src_lengths[row]])
            if token != EOS:
                outputs[row].append(token)
        finished = [token == EOS for token in token_ids]
        batch.step += 1
        if any(finished):
            keep, _ = batch.drop(finished)
            tokens = tokens[keep]
    return [
        Hypothesis(outputs[b], log_prob[b], log_prob[b], torch.stack(rows_alignment[b]) if options.alignments else None)
        for b in range(size)
    ]


def translate_ids(
    model: Seq2Seq | StepEngine,
    sources: Sequence[Sequence[int]],
    options: SearchOptions,
    device: torch.device | str = "cpu",
    exact_lengths: Sequence[int] | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
    constraints: Sequence[EncodedConstraints | None] | None = None,
) -> list[list[Hypothesis]]:
    """Search for encoded ``sources`` (each ending with EOS) on the model's ``device``, in input order:
    ``options.nbest`` hypotheses each (greedy when beam = 1; samples with ``options.sampling``), at most
    ``max_len_ratio · |source| + max_len_extra`` tokens long (at most the model's ``max_output_len``), or exactly
    ``exact_lengths[i]`` tokens long when given (speed measurements with untrained models); ``prefixes[i]`` (target
    ids) starts every hypothesis of sentence i (the length limit grows to hold it); ``constraints[i]`` (lexical
    constraints, :mod:`adlnmt.inference.constraints`) are searched for by :func:`constrained_beam_batch` (the length
    limit grows by their include tokens): a sentence whose include phrases cannot be met within it is searched again
    without them (its exclusions kept). With ``options.shortlist`` each batch may only output the ids its shortlist
    allows it (:meth:`~adlnmt.inference.shortlist.Shortlist.allowed`: the union over the batch).

    Sentences are sorted by length into batches of ``batch_size`` (with sampling, each sentence ``nbest`` times);
    ``workers > 1`` searches the batches in that many forked single-thread CPU processes
    (:mod:`adlnmt.inference.workers`), with the same batches and results. ``model`` may be a :class:`StepEngine`
    instead (a UserError for what it lacks: :meth:`~adlnmt.inference.engine.Engine.check`)."""
    forced = prefixes if prefixes is not None and any(prefixes) else None
    constrained = constraints if constraints is not None and any(constraints) else None
    if not isinstance(model, Seq2Seq):
        model.check(options, forced is not None, constrained is not None)
    if constrained is not None and options.sampling:
        raise UserError("lexical constraints need beam or greedy search, not sampling")
    if options.workers > 1 and torch.device(device).type != "cpu":
        raise UserError(f"worker processes are for the CPU; with device {device} use 1 worker")
    shortlist = None if options.shortlist is None else usable_shortlist(model, options)
    copies = options.nbest if options.sampling else 1
    sentence = [i for i in range(len(sources)) for _ in range(copies)]  # the sentence of each searched row
    batches = length_batches([len(sources[i]) for i in sentence], options.batch_size)

    def search(number: int) -> list[list[Hypothesis]]:
        rows = [sentence[row] for row in batches[number]]
        src = pad_batch([sources[i] for i in rows], device)
        max_len = torch.tensor([length_limit(len(sources[i]), options) for i in rows])
        min_len = prefix = None
        if exact_lengths is not None:
            max_len = min_len = torch.tensor([exact_lengths[i] for i in rows])
        if forced is not None:
            prefix = pad_batch([forced[i] for i in rows], device)
            max_len = torch.maximum(max_len, torch.tensor([len(forced[i]) for i in rows]))
        lines = None if constrained is None else [constrained[i] for i in rows]
        if lines is not None:
            max_len = max_len + torch.tensor([line.include_tokens if line else 0 for line in lines])
        if model.max_output_len is not None:  # within the model's learned positions
            max_len = max_len.clamp(max=model.max_output_len)
            min_len = None if min_len is None else min_len.clamp(max=model.max_output_len)
        if lines is not None:
            return constrained_beam_batch(model, src, max_len, options, lines, min_len, prefix)
        vocabulary = None
        if shortlist is not None:
            batch_prefixes = None if forced is None else [forced[i] for i in rows]
            allowed = shortlist.allowed([sources[i] for i in rows], batch_prefixes)
            vocabulary = VocabularySlice(allowed, shortlist.tgt_size, device)
        if options.sampling or options.beam == 1:
            seeded = torch.Generator(src.device).manual_seed(options.seed * 1_000_003 + number)
            return [[h] for h in greedy_batch(model, src, max_len, options, min_len, prefix,
                                              seeded if options.sampling else None, vocabulary)]  # fmt: skip
        return beam_batch(model, src, max_len, options, min_len, prefix, vocabulary)

    found_rows: list[list[Hypothesis]] = [[] for _ in sentence]
    with evaluating(model):
        longest_first = list(reversed(range(len(batches))))
        for number, found in zip(longest_first, in_workers(search, longest_first, options.workers), strict=True):
            for row, hyps in zip(batches[number], found, strict=True):
                found_rows[row] = hyps
    if constrained is not None:
        unmet = [i for i, hyps in enumerate(found_rows) if not hyps]
        if unmet:
            exclusions = [line.without_include() if line else None for line in (constrained[i] for i in unmet)]
            again = translate_ids(model, [sources[i] for i in unmet], options, device, None,
                                  None if forced is None else [forced[i] for i in unmet], exclusions)  # fmt: skip
            for i, hyps in zip(unmet, again, strict=True):
                found_rows[i] = hyps
    return [[h for hyps in found_rows[i * copies : (i + 1) * copies] for h in hyps] for i in range(len(sources))]


def usable_shortlist(model: Seq2Seq | StepEngine, options: SearchOptions) -> Shortlist:
    """The shortlist ``options`` name, a UserError when it does not fit the model's target vocabulary or the search
    (the vocabulary digests are checked where the vocabularies are known: the Translator)."""
    assert options.shortlist is not None
    shortlist = load_shortlist(options.shortlist)
    size = model.output.out_features if isinstance(model, Seq2Seq) else None
    if size is not None and size != shortlist.tgt_size:
        raise UserError(f"{options.shortlist}: built for a target vocabulary of {shortlist.tgt_size}, not {size}")
    if options.cuda_graphs:
        raise UserError("--shortlist and --cuda-graphs do not go together (a graph has a fixed vocabulary)")
    return shortlist


@contextmanager
def evaluating(model: Seq2Seq | StepEngine) -> Iterator[None]:
    """A PyTorch model in eval mode meanwhile (its mode is restored after); engines have no modes."""
    if not isinstance(model, Seq2Seq):
        yield
        return
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


class TorchEngine(Engine):
    """The PyTorch search on a model (:func:`translate_ids`)."""

    name = "torch"
    capabilities = CAPABILITIES[name]

    def __init__(self, model: Seq2Seq, device: torch.device | str = "cpu") -> None:
        self.model = model
        self.device = device
        self.max_output_len = model.max_output_len

    def translate_ids(
        self,
        sources: Sequence[Sequence[int]],
        options: SearchOptions,
        prefixes: Sequence[Sequence[int]] | None = None,
        constraints: Sequence[EncodedConstraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        return translate_ids(self.model, sources, options, self.device, prefixes=prefixes, constraints=constraints)


def greedy(model: Seq2Seq, sources: Sequence[Sequence[int]], batch_size: int = 64,
           device: torch.device | str = "cpu") -> list[list[int]]:  # fmt: skip
    """Greedy token ids for encoded sources, in input order (used for validation BLEU)."""
    found = translate_ids(model, sources, SearchOptions(beam=1, batch_size=batch_size), device)
    return [hyps[0].tokens for hyps in found]
