"""Ensembles: several models searched as one (checkpoints of one model, or different architectures).

An :class:`Ensemble` is a :class:`~adlnmt.inference.stepper.StepEngine` for the one greedy/beam/sampling search of
:mod:`adlnmt.inference.search`: each member runs its own incremental
:class:`~adlnmt.inference.stepper.Stepper` on its own encoding of the batch, and every step the members'
next-token distributions are combined:

- ``log-linear`` (default): the mean of the members' log-probabilities, 1/M Σ_m log p_m(y), not renormalised
  (as Sockeye's): a hypothesis' log-probability is then the mean of the members' log-probabilities of it;
- ``linear``: the mean of the members' probabilities, p(y) = 1/M Σ_m p_m(y).

A one-member ensemble returns the member's log-probabilities unchanged (the same output as the model alone).
Alignments come from the first member. Members may differ in architecture but must share the source and the
target vocabularies; beam reorders and dropped sentences reach every member's state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from adlnmt.devices import checked_device
from adlnmt.errors import UserError
from adlnmt.inference.constraints import EncodedConstraints
from adlnmt.inference.engine import CAPABILITIES
from adlnmt.inference.options import Hypothesis, SearchOptions
from adlnmt.inference.search import translate_ids
from adlnmt.inference.stepper import StepEngine, Stepper
from adlnmt.inference.translator import Translator, with_precision
from adlnmt.layers.base import DecoderState, SourceMemory
from adlnmt.model import Seq2Seq
from adlnmt.store import ModelDir
from adlnmt.store.export_dir import is_export_dir

COMBINATIONS = ("log-linear", "linear")


@dataclass
class EnsembleMemory(SourceMemory):
    """The first member's memory (whose mask and lengths the search reads) and every member's own."""

    members: list[SourceMemory] = field(default_factory=list)

    @classmethod
    def of(cls, members: list[SourceMemory]) -> EnsembleMemory:
        first = members[0]
        return cls(first.final, first.mask, first.blocks, members)

    def select(self, index: Tensor) -> EnsembleMemory:
        return EnsembleMemory.of([member.select(index) for member in self.members])


class EnsembleState(DecoderState):
    """The members' decoding sessions; beam reorders and row selections reach each of them."""

    def __init__(self, steppers: list[Stepper]) -> None:
        super().__init__(int(steppers[0].memory.mask.size(0)))
        self.steppers = steppers

    def reorder(self, index: Tensor) -> None:
        for stepper in self.steppers:
            stepper.reorder(index)

    def select(self, index: Tensor) -> None:
        for stepper in self.steppers:
            stepper.select(index)
        self.batch_size = int(index.numel())


def combine(log_probs: Sequence[Tensor], combination: str) -> Tensor:
    """The members' log-probabilities [N, V] each → the ensemble's [N, V] (see the module docstring)."""
    if len(log_probs) == 1:
        return log_probs[0]
    stacked = torch.stack(list(log_probs))  # [M, N, V]
    if combination == "linear":
        return torch.logsumexp(stacked, dim=0) - math.log(len(log_probs))
    return stacked.mean(0)


class Ensemble(StepEngine):
    """Members searched as one model by the PyTorch search (a Translator's engine)."""

    name = "ensemble"
    capabilities = CAPABILITIES[name]

    def __init__(self, members: Sequence[Seq2Seq], combination: str = "log-linear", device: str = "cpu") -> None:
        if not members:
            raise UserError("an ensemble needs at least one model")
        if combination not in COMBINATIONS:
            raise UserError(f"unknown ensemble combination {combination!r}; choose one of {', '.join(COMBINATIONS)}")
        sizes = {member.config.tgt_vocab_size for member in members}
        if len(sizes) > 1:
            raise UserError(f"ensemble members need one target vocabulary; their sizes differ: {sorted(sizes)}")
        self.members = [member.eval() for member in members]
        self.combination = combination
        self.device = device
        self.max_output_len = min((m.max_output_len for m in members if m.max_output_len is not None), default=None)

    def encode(self, src: Tensor) -> EnsembleMemory:
        return EnsembleMemory.of([member.encode(src) for member in self.members])

    def init_state(self, memory: SourceMemory) -> EnsembleState:
        assert isinstance(memory, EnsembleMemory)
        return EnsembleState([Stepper(model, own) for model, own in zip(self.members, memory.members, strict=True)])

    def next_log_probs(
        self, tokens: Tensor, memory: SourceMemory, state: DecoderState, alignments: bool
    ) -> tuple[Tensor, Tensor | None]:
        """tokens [N] → the combined log-probabilities [N, V] and the first member's alignment [N, S]."""
        assert isinstance(state, EnsembleState)
        state.steppers[0].alignments = alignments
        steps = [stepper.step(tokens) for stepper in state.steppers]
        state.step += 1
        return combine([log_probs for log_probs, _ in steps], self.combination), steps[0][1]

    def translate_ids(
        self,
        sources: Sequence[Sequence[int]],
        options: SearchOptions,
        prefixes: Sequence[Sequence[int]] | None = None,
        constraints: Sequence[EncodedConstraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        return translate_ids(self, sources, options, self.device, prefixes=prefixes, constraints=constraints)


def load_ensemble(
    model_dirs: Sequence[str | Path],
    checkpoints: Sequence[str] = ("best",),
    device: str = "cpu",
    precision: str = "fp32",
    combination: str = "log-linear",
) -> Translator:
    """A Translator searching the ensemble of ``model_dirs`` (one checkpoint for all, or one per model), which
    must share their vocabularies; its input limit is the smallest of the members'."""
    if len(checkpoints) not in (1, len(model_dirs)):
        raise UserError(f"give one checkpoint, or one per model ({len(model_dirs)}), not {len(checkpoints)}")
    chosen = list(checkpoints) * len(model_dirs) if len(checkpoints) == 1 else list(checkpoints)
    device = checked_device(device)
    members, limits, data = [], [], None
    for model_dir, checkpoint in zip(map(Path, model_dirs), chosen, strict=True):
        if is_export_dir(model_dir):
            raise UserError(f"{model_dir}: an export directory; an ensemble's members are model directories (torch)")
        model, own, limit = ModelDir(model_dir).load_model(checkpoint)
        if data is None:
            data = own
        difference = data.vocabulary_difference(own)
        if difference:
            raise UserError(f"{model_dir}: its {difference} differs from {model_dirs[0]}'s; ensemble members need the "
                            "same vocabularies (the same pieces, scores and kinds under every id)")  # fmt: skip
        members.append(with_precision(model.to(device), precision, device))
        limits.append(limit)
    assert data is not None
    ensemble = Ensemble(members, combination, device)
    return Translator(None, data, min(limits), device, Path(model_dirs[0]), ensemble)
