"""Dynamic beam allocation (Post & Vilar 2018; over a whole batch of sentences as Hu et al. 2019): how a beam search
step chooses its hypotheses when the lines have lexical constraints (:mod:`adlnmt.inference.constraints`). Used by
:func:`adlnmt.inference.search.constrained_beam_batch` only: a search without constraints never comes here. The
candidates' scores are gathered for the batch in a few tensor operations; the hypotheses' constraint states and the
round-robin over banks are Python (their cost per step: benchmarks/NOTES.md, "Lexically constrained decoding").

Each row (hypothesis) has a :class:`~adlnmt.inference.constraint_state.ConstraintState` of its sentence's include
phrases. Every step, per sentence:

- EOS is barred in the rows whose include phrases are not all met (except at the length limit, where the search
  ends them anyway and the hypothesis counts as unmet), and each row's tokens that would complete an exclude phrase
  are barred (-inf);
- the candidates are the 2k best continuations of the sentence (as the plain search finds them), each row's best
  token, and each row's tokens that make progress on an include phrase (:meth:`ConstraintTrie.next_tokens`);
  duplicates once;
- the k slots go round-robin over the banks (a candidate's bank: the constraint tokens it has met), best bank
  first: the best candidate of every bank, then the second best of every bank, and so on, so that hypotheses that
  are further along are kept beside the better-scored ones, and unused slots of a bank go to the others;
- an EOS candidate chosen that way ends a hypothesis; the k chosen among the candidates that do not end continue.

With no include phrases all candidates share bank 0 and the choice is the plain beam search's (by score).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from adlnmt.data.vocab import EOS, PAD
from adlnmt.inference.constraint_state import ConstraintState, ConstraintTrie, Exclusions
from adlnmt.inference.constraints import EncodedConstraints


class Candidate(NamedTuple):
    """A continuation: row ``row`` of the batch writes ``word``, reaching ``score`` (cumulative log-probability)
    and the constraint ``state`` of ``bank`` met tokens."""

    bank: int
    score: float
    row: int
    word: int
    state: ConstraintState


def allocate(candidates: Sequence[Candidate], k: int) -> list[Candidate]:
    """The ``k`` candidates dynamic beam allocation keeps: round-robin over the banks, the highest bank first (the
    best of each bank, then the second best of each, …); fewer when there are fewer."""
    banks: dict[int, list[Candidate]] = {}
    for candidate in sorted(candidates, key=lambda c: -c.score):  # stable: ties keep the candidates' order
        banks.setdefault(candidate.bank, []).append(candidate)
    order = [banks[bank] for bank in sorted(banks, reverse=True)]
    chosen: list[Candidate] = []
    for rank in range(min(k, max(map(len, order), default=0))):
        chosen.extend(members[rank] for members in order if rank < len(members))
    return chosen[:k]


@dataclass(frozen=True)
class Ending:
    """A hypothesis ended by EOS: active sentence ``sentence``, its ``row``, ``log_prob`` and whether it ``met``
    every include phrase."""

    sentence: int
    row: int
    log_prob: float
    met: bool


class Allocation:
    """The constraint states of the rows of a beam search batch (k rows per active sentence) and the step's choice
    of hypotheses by dynamic beam allocation. ``constraints[b]`` are sentence b's (None: none)."""

    def __init__(self, constraints: Sequence[EncodedConstraints | None], k: int) -> None:
        self.tries = [ConstraintTrie(c.include if c else ()) for c in constraints]
        self.exclusions = [Exclusions(c.exclude if c else ()) for c in constraints]
        self.context = max((exclusions.context for exclusions in self.exclusions), default=0)
        self.k = k
        self.states = [trie.start() for trie in self.tries for _ in range(k)]  # per row

    def restrict(self, log_probs: Tensor, sentences: Sequence[int], history: Tensor, at_limit: Sequence[bool]) -> None:
        """In place on log_probs [N, V] of the rows of the active ``sentences`` (their batch indices; ``history``
        [N, t] their tokens, ``at_limit`` [N] whether a row's sentence is at its length limit): EOS barred until
        every include phrase is met (not at the limit), and the tokens that would complete an exclude phrase."""
        steps = history.size(1)
        tails = history[:, max(0, steps - self.context) :].tolist() if self.context else [[]] * len(self.states)
        rows, words = [], []
        for row, state in enumerate(self.states):
            sentence = sentences[row // self.k]
            if not at_limit[row] and not self.tries[sentence].finished(state):
                rows.append(row)
                words.append(EOS)
            if self.exclusions[sentence].phrases:
                banned = self.exclusions[sentence].banned(tails[row])
                rows.extend([row] * len(banned))
                words.extend(banned)
        if rows:
            index = (torch.tensor(rows, device=log_probs.device), torch.tensor(words, device=log_probs.device))
            log_probs.index_put_(index, torch.tensor(float("-inf"), device=log_probs.device))

    def select(
        self, scores: Tensor, log_probs: Tensor, sentences: Sequence[int], best: tuple[Tensor, Tensor]
    ) -> tuple[list[Ending], tuple[Tensor, Tensor, Tensor]]:
        """One step for beams of scores [B_act, k] and their rows' log_probs [N, V], whose ``best`` continuations
        are given (scores [B_act, 2k] and indices beam · V + word, best first): the hypotheses EOS ends, and the next
        scores [B_act, k], parent rows [N] and tokens [N]; the rows' constraint states follow their parents."""
        active, k = scores.shape
        vocab = log_probs.size(1)
        top_scores, top_ids = best
        flat_scores = scores.view(-1)  # [N]
        row_best, best_words = log_probs.max(dim=1)  # [N]
        best_scores = flat_scores + row_best
        extra_rows, extra_words = [], []
        for row, state in enumerate(self.states):
            tokens = self.tries[sentences[row // k]].next_tokens(state)
            extra_rows.extend([row] * len(tokens))
            extra_words.extend(sorted(tokens))
        extra_scores = []
        if extra_rows:
            extra_scores = (flat_scores[extra_rows] + log_probs[extra_rows, extra_words]).tolist()
        per_sentence: list[list[tuple[int, int, float]]] = [[] for _ in range(active)]
        for b, (values, ids) in enumerate(zip(top_scores.tolist(), top_ids.tolist(), strict=True)):
            per_sentence[b].extend((b * k + i // vocab, i % vocab, value) for value, i in zip(values, ids, strict=True))
        for row, (value, word) in enumerate(zip(best_scores.tolist(), best_words.tolist(), strict=True)):
            per_sentence[row // k].append((row, word, value))
        for row, word, value in zip(extra_rows, extra_words, extra_scores, strict=True):
            per_sentence[row // k].append((row, word, value))
        endings: list[Ending] = []
        chosen: list[Candidate] = []
        for b, found in enumerate(per_sentence):
            trie = self.tries[sentences[b]]
            candidates = []
            for (row, word), value in {(row, word): value for row, word, value in found}.items():
                if math.isinf(value):
                    continue
                state = self.states[row] if word == EOS else trie.advance(self.states[row], word)
                candidates.append(Candidate(trie.progress(state), value, row, word, state))
            endings.extend(Ending(b, c.row, c.score, trie.finished(c.state))
                           for c in allocate(candidates, k) if c.word == EOS)  # fmt: skip
            going_on = allocate([c for c in candidates if c.word != EOS], k)
            dead = Candidate(0, float("-inf"), b * k, PAD, self.states[b * k])  # fills a beam short of candidates
            chosen.extend(going_on + [dead] * (k - len(going_on)))
        self.states = [c.state for c in chosen]
        device = scores.device
        return endings, (
            torch.tensor([c.score for c in chosen], dtype=scores.dtype, device=device).view(active, k),
            torch.tensor([c.row for c in chosen], dtype=torch.long, device=device),
            torch.tensor([c.word for c in chosen], dtype=torch.long, device=device),
        )

    def keep(self, rows: Sequence[int]) -> None:
        """Keep the states of ``rows`` (the rows of the sentences that go on)."""
        self.states = [self.states[row] for row in rows]
