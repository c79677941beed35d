"""Greedy and beam search, batched over sentences, on the incremental decoding protocol.

Both run on a :class:`Stepper`: incremental (one cached decoder step per token, the default) or
re-fed (the whole prefix through the decoder every step — the regime of the AAN paper's baseline,
kept for comparisons and tests). Finished sentences leave the batch (their rows are dropped with one
gather); sentences are sorted by length into batches and returned in input order.

Scores: ``log_prob`` is the sum of the token log-probabilities including EOS; ``score`` divides it by
the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α (|Y| counts EOS; α = 0 gives log_prob).
Alignments: per output token, the source attention probabilities averaged over every source
attention layer and head of the decoder, [|Y| + 1, S] (rows for each token and EOS; each sums to 1).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from adlnmt.data.vocab import BOS, EOS, PAD
from adlnmt.errors import UserError
from adlnmt.layers.base import SourceMemory
from adlnmt.model import Seq2Seq, iter_layers
from adlnmt.speedups import SPEEDUPS
from adlnmt.workers import in_workers


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS/EOS
    log_prob: float  # Σ log p(y_t | y_<t, x), EOS included
    score: float  # log_prob / lp(|tokens| + 1)
    alignment: Tensor | None = None  # [len(tokens) + 1, S_real]


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT: ((5 + |Y|) / 6)^α."""
    return ((5 + length) / 6) ** alpha


def pad_batch(sentences: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> Tensor:
    """Right-padded [B, S] LongTensor of token ids."""
    width = max(1, max((len(s) for s in sentences), default=1))
    batch = torch.full((len(sentences), width), PAD, dtype=torch.long)
    for row, sentence in enumerate(sentences):
        batch[row, : len(sentence)] = torch.as_tensor(list(sentence), dtype=torch.long)
    return batch.to(device)


class Stepper:
    """One decoding session over a batch of rows (sentences × hypotheses): next-token log-probabilities
    for the rows' last tokens, and the row bookkeeping beam search needs."""

    def __init__(self, model: Seq2Seq, memory: SourceMemory, incremental: bool = True, alignments: bool = False):
        self.model = model
        self.memory = memory
        self.incremental = incremental
        self.alignments = alignments
        self.state = model.init_state(memory) if incremental else None
        self.prefix = memory.mask.new_zeros(memory.mask.size(0), 0, dtype=torch.long)  # [N, t] (re-fed mode)
        self.attention_layers = sum(1 for layer in iter_layers(model.decoder) if layer.reads_source)

    def step(self, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        """tokens [N] → log-probabilities [N, V] and, if asked, the alignment [N, S] of this step."""
        attention: list[Tensor] | None = [] if self.alignments else None
        if self.incremental:
            logits = self.model.decode_step(tokens, self.memory, self.state, attention)  # [N, V]
        else:
            self.prefix = torch.cat([self.prefix, tokens.unsqueeze(1)], dim=1)  # [N, t + 1]
            logits = self.model.decode_full(self.prefix, self.memory, attention)[:, -1]  # [N, V]
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        log_probs[:, PAD] = float("-inf")
        log_probs[:, BOS] = float("-inf")
        if attention is None:
            return log_probs, None
        last = attention[-self.attention_layers :]  # this step's maps, one per source attention layer
        alignment = torch.stack([a[:, :, -1].float().mean(1) for a in last]).mean(0)  # [N, S]
        return log_probs, alignment

    def reorder(self, index: Tensor) -> None:
        """Row i continues the hypothesis of row ``index[i]`` of the same sentence."""
        if self.state is not None:
            self.state.reorder(index)
        self.prefix = self.prefix.index_select(0, index)

    def select(self, index: Tensor) -> None:
        """Keep (or repeat) rows ``index`` of any sentences (e.g. drop finished sentences)."""
        if self.state is not None:
            self.state.select(index)
        self.prefix = self.prefix.index_select(0, index)
        self.memory = self.memory.select(index)


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


@torch.inference_mode()
def beam_batch(
    model: Seq2Seq,
    src: Tensor,
    max_len: Tensor,
    beam: int,
    nbest: int = 1,
    alpha: float = 0.0,
    incremental: bool = True,
    alignments: bool = False,
    min_len: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Beam search for a batch src [B, S]; up to ``nbest`` hypotheses per sentence, best first.

    Each step takes the 2k best continuations of every sentence: EOS among its k best ends a
    hypothesis, the k best others continue (so the beam stays full). A sentence is done when k
    hypotheses have ended or it reaches ``max_len[b]`` tokens (EOS is forced there); EOS is barred
    before ``min_len[b]`` tokens (min_len = max_len forces an exact output length, for speed sweeps).
    """
    batch, k = src.size(0), beam
    memory = model.encode(src)
    src_lengths = memory.mask.sum(1).tolist()
    stepper = Stepper(model, memory.select(torch.arange(batch, device=src.device).repeat_interleave(k)),
                      incremental, alignments)  # fmt: skip
    sentences = torch.arange(batch, device=src.device)  # original sentence of each active sentence
    scores = torch.full((batch, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0  # [B_act, k] cumulative log-probabilities; only beam 0 is alive at first
    tokens = torch.full((batch * k,), BOS, dtype=torch.long, device=src.device)
    history = tokens.new_zeros(batch * k, 0)  # [N, t]
    aligned = torch.zeros(batch * k, 0, src.size(1), device=src.device)  # [N, t, S]
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    limit = max_len.to(src.device)
    floor = None if min_len is None else min_len.to(src.device)
    step = 0
    while sentences.numel() > 0:
        log_probs, alignment = stepper.step(tokens)  # [N, V], [N, S]
        if floor is not None:
            bar_eos(log_probs, (floor[sentences] > step).repeat_interleave(k))
        vocab = log_probs.size(1)
        forced = (limit[sentences] <= step).repeat_interleave(k)  # [N]: these rows may only end now
        if bool(forced.any()):
            eos_only = torch.full_like(log_probs[0], float("-inf"))
            eos_only[EOS] = 0.0
            log_probs = torch.where(forced.unsqueeze(1), eos_only + log_probs[:, EOS : EOS + 1], log_probs)
        active = sentences.numel()
        top_scores, top_ids = best_continuations(scores, log_probs, min(2 * k, k * vocab))  # [B_act, 2k]
        origin = torch.div(top_ids, vocab, rounding_mode="floor")  # beam each candidate extends
        words = top_ids % vocab
        rows = origin + torch.arange(active, device=src.device).unsqueeze(1) * k  # [B_act, 2k] row indices
        if alignment is not None:
            aligned = torch.cat([aligned, alignment.unsqueeze(1)], dim=1)  # [N, t + 1, S]
        ends = words.eq(EOS) & torch.isfinite(top_scores)
        ends[:, k:] = False  # only EOS among the k best ends a hypothesis
        for b, r in ends.nonzero().tolist():
            sentence = int(sentences[b])
            if len(finished[sentence]) >= k:
                continue
            row = int(rows[b, r])
            log_prob = float(top_scores[b, r])
            length = step + 1
            hyp_alignment = aligned[row, :, : src_lengths[sentence]].clone() if alignment is not None else None
            finished[sentence].append(Hypothesis(history[row].tolist(), log_prob,
                                                 log_prob / length_penalty(length, alpha), hyp_alignment))  # fmt: skip
        # The k best candidates that do not end continue.
        goes_on = ~words.eq(EOS)
        chosen = goes_on & (goes_on.cumsum(1) <= k)  # [B_act, 2k], exactly k per sentence
        slots = rows_in_place(origin[chosen].view(active, k)) if SPEEDUPS.rows_in_place else None
        scores, parents, tokens = (
            x[chosen].view(active, k) if slots is None else x[chosen].view(active, k).gather(1, slots)
            for x in (top_scores, rows, words)
        )
        parents, tokens = parents.flatten(), tokens.flatten()  # [N]
        stepper.reorder(parents)
        history = torch.cat([history[parents], tokens.unsqueeze(1)], dim=1)
        aligned = aligned[parents]
        step += 1
        done = torch.tensor([len(finished[int(s)]) >= k for s in sentences], device=src.device)
        done |= limit[sentences] < step
        if bool(done.any()):
            keep = (~done).nonzero().squeeze(1)  # active sentences that go on
            keep_rows = (keep.unsqueeze(1) * k + torch.arange(k, device=src.device)).flatten()
            sentences, scores = sentences[keep], scores[keep]
            tokens, history, aligned = tokens[keep_rows], history[keep_rows], aligned[keep_rows]
            stepper.select(keep_rows)
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in finished]


@torch.inference_mode()
def greedy_batch(
    model: Seq2Seq,
    src: Tensor,
    max_len: Tensor,
    incremental: bool = True,
    alignments: bool = False,
    min_len: Tensor | None = None,
) -> list[Hypothesis]:
    """The argmax continuation of each sentence of src [B, S], ``min_len[b]`` to ``max_len[b]`` tokens long."""
    batch = src.size(0)
    memory = model.encode(src)
    src_lengths = memory.mask.sum(1).tolist()
    stepper = Stepper(model, memory, incremental, alignments)
    alive = torch.arange(batch, device=src.device)  # original row of each active row
    tokens = torch.full((batch,), BOS, dtype=torch.long, device=src.device)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    log_prob = [0.0] * batch
    rows_alignment: list[list[Tensor]] = [[] for _ in range(batch)]
    limit = max_len.to(src.device)
    floor = None if min_len is None else min_len.to(src.device)
    step = 0
    while alive.numel() > 0:
        log_probs, alignment = stepper.step(tokens)  # [B_active, V]
        if floor is not None:
            bar_eos(log_probs, floor[alive] > step)
        tokens = log_probs.argmax(-1)  # [B_active]
        tokens = torch.where(limit[alive] <= step, torch.full_like(tokens, EOS), tokens)
        chosen = log_probs.gather(1, tokens.unsqueeze(1)).squeeze(1).tolist()
        for i, (row, token) in enumerate(zip(alive.tolist(), tokens.tolist(), strict=True)):
            log_prob[row] += chosen[i]
            if alignment is not None:
                rows_alignment[row].append(alignment[i, : src_lengths[row]])
            if token != EOS:
                outputs[row].append(token)
        finished = tokens.eq(EOS)
        step += 1
        if bool(finished.any()):
            keep = (~finished).nonzero().squeeze(1)  # [B_left]
            alive, tokens = alive[keep], tokens[keep]
            stepper.select(keep)
    return [
        Hypothesis(outputs[b], log_prob[b], log_prob[b], torch.stack(rows_alignment[b]) if alignments else None)
        for b in range(batch)
    ]


def translate_ids(
    model: Seq2Seq,
    sources: Sequence[Sequence[int]],
    beam: int = 1,
    nbest: int = 1,
    batch_size: int = 64,
    alpha: float = 0.0,
    max_len_ratio: float = 2.0,
    max_len_extra: int = 10,
    incremental: bool = True,
    alignments: bool = False,
    device: torch.device | str = "cpu",
    exact_lengths: Sequence[int] | None = None,
    workers: int = 1,
) -> list[list[Hypothesis]]:
    """Search for encoded ``sources`` (each ending with EOS), in input order: ``nbest`` hypotheses each
    (greedy when beam = 1), at most ``max_len_ratio · |source| + max_len_extra`` tokens long, or exactly
    ``exact_lengths[i]`` tokens long when given (speed measurements with untrained models).

    Sentences are sorted by length into batches of ``batch_size``; ``workers > 1`` searches the batches in that
    many forked single-thread processes (CPU only; :mod:`adlnmt.workers`), with the same batches and results."""
    if beam < 1 or not 1 <= nbest <= beam:
        raise ValueError(f"need beam >= 1 and 1 <= nbest <= beam, got beam={beam}, nbest={nbest}")
    if workers > 1 and torch.device(device).type != "cpu":
        raise UserError(f"worker processes are for the CPU; with device {device} use 1 worker")
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]

    def search(number: int) -> list[list[Hypothesis]]:
        rows = batches[number]
        src = pad_batch([sources[i] for i in rows], device)
        lengths = torch.tensor([len(sources[i]) for i in rows])
        max_len = (lengths.float() * max_len_ratio).long() + max_len_extra
        min_len = None
        if exact_lengths is not None:
            max_len = min_len = torch.tensor([exact_lengths[i] for i in rows])
        if beam == 1:
            return [[h] for h in greedy_batch(model, src, max_len, incremental, alignments, min_len)]
        return beam_batch(model, src, max_len, beam, nbest, alpha, incremental, alignments, min_len)

    results: list[list[Hypothesis]] = [[] for _ in sources]
    was_training = model.training
    model.eval()
    try:
        longest_first = list(reversed(range(len(batches))))
        for number, found in zip(longest_first, in_workers(search, longest_first, workers), strict=True):
            for row, hyps in zip(batches[number], found, strict=True):
                results[row] = hyps
    finally:
        model.train(was_training)
    return results


def greedy(model: Seq2Seq, sources: Sequence[Sequence[int]], batch_size: int = 64,
           device: torch.device | str = "cpu") -> list[list[int]]:  # fmt: skip
    """Greedy token ids for encoded sources, in input order (used for validation BLEU)."""
    return [hyps[0].tokens for hyps in translate_ids(model, sources, batch_size=batch_size, device=device)]
