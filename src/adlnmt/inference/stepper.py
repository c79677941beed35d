"""One decoding session over a batch of rows: next-token log-probabilities for the search.

A :class:`Stepper` drives a PyTorch :class:`~adlnmt.model.Seq2Seq` incrementally (one cached decoder step per
token, the default) or re-fed (the whole prefix through the decoder every step — the regime of the AAN paper's
baseline, kept for comparisons and tests; the search refuses it to other engines), or a :class:`StepEngine`
(ONNX Runtime, ensembles). PAD and BOS are never predicted. With a
:class:`~adlnmt.inference.vocabulary_slice.VocabularySlice` (``--shortlist``) the log-probabilities are over its ids.
Alignments: the source attention probabilities of the step averaged over every source attention layer and head of
the decoder, [N, S] (:func:`alignment_of`, also the exported ONNX step graph's).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import torch
from torch import Tensor

from adlnmt.data.vocab import BOS, PAD
from adlnmt.inference.engine import Engine
from adlnmt.inference.vocabulary_slice import VocabularySlice
from adlnmt.layers.base import DecoderState, SourceMemory
from adlnmt.model import Seq2Seq, iter_layers


def alignment_of(attention: Sequence[Tensor]) -> Tensor:
    """The alignment row [N, S] of a step: its source attention maps [N, h, t, S] (one per source attention layer;
    the step is the last query) averaged over the layers and heads."""
    return torch.stack([a[:, :, -1].float().mean(1) for a in attention]).mean(0)


class StepEngine(Engine):
    """An engine that the PyTorch search (:func:`adlnmt.inference.search.translate_ids`) drives one decoder step at a
    time (ONNX Runtime sessions, ensembles): the incremental protocol of :class:`~adlnmt.model.Seq2Seq` with the
    step's log-softmax (and alignment) inside."""

    device = "cpu"

    @abstractmethod
    def encode(self, src: Tensor) -> SourceMemory:
        """src [B, S] → the source memory."""

    @abstractmethod
    def init_state(self, memory: SourceMemory) -> DecoderState:
        """The decoder state before the first step (its tensors are reordered and dropped by the search)."""

    @abstractmethod
    def next_log_probs(
        self, tokens: Tensor, memory: SourceMemory, state: DecoderState, alignments: bool
    ) -> tuple[Tensor, Tensor | None]:
        """tokens [N] → float32 log-probabilities [N, V] and, if ``alignments``, the alignment [N, S]; advances
        ``state``."""


class Stepper:
    """One decoding session over a batch of rows (sentences × hypotheses): next-token log-probabilities
    for the rows' last tokens, and the row bookkeeping beam search needs."""

    def __init__(
        self, model: Seq2Seq | StepEngine, memory: SourceMemory, incremental: bool = True, alignments: bool = False,
        vocabulary: VocabularySlice | None = None,
    ) -> None:  # fmt: skip
        """``vocabulary``: the log-probabilities are those of its ids only, normalised over them (a PyTorch model)."""
        assert vocabulary is None or isinstance(model, Seq2Seq), "a vocabulary slice needs a PyTorch model"
        self.model = model
        self.vocabulary = vocabulary
        self.memory = memory
        self.incremental = incremental
        self.alignments = alignments
        self.state = model.init_state(memory) if incremental else None
        self.prefix = memory.mask.new_zeros(memory.mask.size(0), 0, dtype=torch.long)  # [N, t] (re-fed mode)
        self.attention_layers = (
            sum(1 for layer in iter_layers(model.decoder) if layer.reads_source) if isinstance(model, Seq2Seq) else 0
        )

    def step(self, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        """tokens [N] → log-probabilities [N, V] and, if asked, the alignment [N, S] of this step."""
        if not isinstance(self.model, Seq2Seq):
            assert self.state is not None
            log_probs, alignment = self.model.next_log_probs(tokens, self.memory, self.state, self.alignments)
            log_probs[:, PAD] = float("-inf")
            log_probs[:, BOS] = float("-inf")
            return log_probs, alignment
        attention: list[Tensor] | None = [] if self.alignments else None
        if self.incremental:
            states = self.model.decode_step(tokens, self.memory, self.state, attention, project=False)  # [N, d]
        else:
            self.prefix = torch.cat([self.prefix, tokens.unsqueeze(1)], dim=1)  # [N, t + 1]
            states = self.model.decoder_states(self.prefix, self.memory, attention)  # [N, t + 1, d]
        if self.vocabulary is None:
            logits = self.model.output(states)  # [N, (t + 1,) V]
        else:
            logits = self.vocabulary.project(self.model.output, states)  # [N, (t + 1,) V']
        if not self.incremental:
            logits = logits[:, -1]  # [N, V]
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        log_probs[:, PAD] = float("-inf")
        log_probs[:, BOS] = float("-inf")
        if attention is None:
            return log_probs, None
        return log_probs, alignment_of(attention[-self.attention_layers :])  # this step's maps

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
