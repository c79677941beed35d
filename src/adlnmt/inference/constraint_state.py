"""How far a hypothesis has come in meeting a line's lexical constraints, without PyTorch: the include phrases as a
trie (:class:`ConstraintTrie`, with the state of a hypothesis, :class:`ConstraintState`) and the exclude phrases
(:class:`Exclusions`, the tokens a hypothesis may not write next). Phrases are token-id tuples
(:class:`~adlnmt.inference.constraints.EncodedConstraints`).

The include phrases are met in any order (Hu et al. 2019's unordered constraints, as fairseq's): a state is a node
of the trie (the phrase prefix being written) and how many times each phrase has been completed. A token that
continues the prefix towards a phrase still needed goes down the trie; a phrase is credited when its last token is
written; any other token drops the prefix (its tokens no longer count) and may start a phrase afresh from the root.
A phrase given n times must be written n times. The state's :meth:`~ConstraintTrie.progress` (the constraint tokens
met: those of completed phrases plus the prefix being written) is its bank in dynamic beam allocation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class ConstraintState(NamedTuple):
    """A hypothesis' place in a :class:`ConstraintTrie`: its ``node`` (0: the root) and, per phrase end of the
    trie (``ConstraintTrie.terminals``), how many times it has been ``completed``."""

    node: int
    completed: tuple[int, ...]


class ConstraintTrie:
    """The include phrases of one line as a prefix tree of token ids (nodes numbered from 0, the root)."""

    def __init__(self, phrases: Sequence[Sequence[int]]) -> None:
        self.children: list[dict[int, int]] = [{}]  # node → token → child node
        self.depth = [0]
        self.ends = [0]  # node → how many of the phrases end there
        for phrase in phrases:
            node = 0
            for token in phrase:
                child = self.children[node].get(token)
                if child is None:
                    child = len(self.children)
                    self.children[node][token] = child
                    self.children.append({})
                    self.depth.append(self.depth[node] + 1)
                    self.ends.append(0)
                node = child
            self.ends[node] += 1
        self.terminals = [node for node, count in enumerate(self.ends) if count]
        self.terminal_index = {node: index for index, node in enumerate(self.terminals)}
        self.below = [self._terminals_below(node) for node in range(len(self.children))]
        self.total_tokens = sum(len(phrase) for phrase in phrases)
        # the search asks about the same few states again and again: each answer is computed once
        self._advanced: dict[tuple[ConstraintState, int], ConstraintState] = {}
        self._progress: dict[ConstraintState, int] = {}
        self._next_tokens: dict[ConstraintState, frozenset[int]] = {}

    def _terminals_below(self, node: int) -> tuple[int, ...]:
        """The indices (into ``terminals``) of the phrase ends at ``node`` or under it."""
        found, stack = [], [node]
        while stack:
            current = stack.pop()
            if self.ends[current]:
                found.append(self.terminal_index[current])
            stack.extend(self.children[current].values())
        return tuple(sorted(found))

    def start(self) -> ConstraintState:
        """The state of an empty hypothesis."""
        return ConstraintState(0, (0,) * len(self.terminals))

    def needed(self, node: int, completed: Sequence[int]) -> bool:
        """Whether a phrase through ``node`` is still to be completed."""
        return any(completed[t] < self.ends[self.terminals[t]] for t in self.below[node])

    def advance(self, state: ConstraintState, token: int) -> ConstraintState:
        """The state after writing ``token``."""
        key = (state, token)
        if key not in self._advanced:
            self._advanced[key] = self._advance(state, token)
        return self._advanced[key]

    def _advance(self, state: ConstraintState, token: int) -> ConstraintState:
        child = self.children[state.node].get(token)
        if child is None or not self.needed(child, state.completed):
            child = self.children[0].get(token)  # drop the prefix; the token may start a phrase
            if child is None or not self.needed(child, state.completed):
                return ConstraintState(0, state.completed)
        completed = state.completed
        if self.ends[child]:
            index = self.terminal_index[child]
            if completed[index] < self.ends[child]:
                completed = (*completed[:index], completed[index] + 1, *completed[index + 1 :])
        return ConstraintState(child, completed)

    def progress(self, state: ConstraintState) -> int:
        """The constraint tokens met: those of the completed phrases and of the prefix being written (when it
        leads to a phrase still needed); its bank in dynamic beam allocation, 0 … ``total_tokens``."""
        if state not in self._progress:
            done = sum(count * self.depth[self.terminals[t]] for t, count in enumerate(state.completed))
            self._progress[state] = done + (self.depth[state.node] if self.needed(state.node, state.completed) else 0)
        return self._progress[state]

    def finished(self, state: ConstraintState) -> bool:
        """Whether every phrase has been written (as often as given)."""
        return not self.needed(0, state.completed)

    def next_tokens(self, state: ConstraintState) -> frozenset[int]:
        """The tokens that would make progress: those continuing the prefix or starting a phrase still needed."""
        if state not in self._next_tokens:
            nodes = (0, state.node) if state.node else (0,)
            self._next_tokens[state] = frozenset(
                token
                for node in nodes
                for token, child in self.children[node].items()
                if self.needed(child, state.completed)
            )
        return self._next_tokens[state]


class Exclusions:
    """The exclude phrases of one line: which tokens would complete one of them after a hypothesis' last tokens."""

    def __init__(self, phrases: Sequence[Sequence[int]]) -> None:
        self.phrases = [tuple(phrase) for phrase in phrases]
        self.context = max((len(phrase) - 1 for phrase in self.phrases), default=0)
        """How many of a hypothesis' last tokens :meth:`banned` reads."""

    def banned(self, last: Sequence[int]) -> set[int]:
        """The tokens a hypothesis ending with the tokens ``last`` (at least its last ``context`` ones, or all it
        has) may not write next."""
        tail = tuple(last)
        return {phrase[-1] for phrase in self.phrases if tail[len(tail) - len(phrase) + 1 :] == phrase[:-1]}
