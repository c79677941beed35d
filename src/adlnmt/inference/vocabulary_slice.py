"""The target vocabulary a batch may output (``--shortlist``): the output projection restricted to its ids, and the
map between the slice's positions and the vocabulary's ids.

The ids are sorted and start with the specials, so PAD, UNK, BOS and EOS keep their ids as positions: the search
bars and forces them unchanged. The projection is z · W[ids]ᵀ + b[ids] (the slice of the weights is taken once per
batch); the search takes the log-softmax over the slice and maps the chosen positions back to ids
(:meth:`VocabularySlice.to_ids`). Whenever the full softmax's argmax lies in the slice it is the slice's argmax
too, so greedy output is unchanged; scores are normalised over the slice.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from adlnmt.inference.shortlist import SPECIALS


def dense_weight(output: nn.Module) -> tuple[Tensor, Tensor | None]:
    """The weight [V, d] and bias [V] of an output projection: an ``nn.Linear`` or its dynamically quantised int8
    version (its weight dequantised)."""
    weight = output.weight() if callable(output.weight) else output.weight
    bias = output.bias() if callable(output.bias) else output.bias
    return (weight.dequantize() if weight.is_quantized else weight), bias


class VocabularySlice:
    """The sorted target ids ``ids`` [V'] a batch may output (the specials first)."""

    def __init__(self, ids: np.ndarray, vocab_size: int, device: torch.device | str = "cpu") -> None:
        if list(ids[: len(SPECIALS)]) != list(SPECIALS) or (np.diff(ids) <= 0).any() or ids[-1] >= vocab_size:
            raise ValueError(f"a vocabulary slice needs sorted distinct ids below {vocab_size}, specials first")
        self.ids = torch.as_tensor(ids, dtype=torch.long, device=device)  # [V']
        self.position = torch.full((vocab_size,), -1, dtype=torch.long, device=device)  # id → position, -1: outside
        self.position[self.ids] = torch.arange(len(ids), device=device)
        self._weights: tuple[Tensor, Tensor | None] | None = None

    def __len__(self) -> int:
        return self.ids.numel()

    def project(self, output: nn.Module, states: Tensor) -> Tensor:
        """states [..., d] → logits [..., V'] of the slice's ids."""
        if self._weights is None:
            weight, bias = dense_weight(output)
            self._weights = weight.index_select(0, self.ids), None if bias is None else bias.index_select(0, self.ids)
        weight, bias = self._weights
        return nn.functional.linear(states.to(weight.dtype), weight, bias)

    def to_ids(self, positions: Tensor) -> Tensor:
        """Positions in the slice → vocabulary ids (same shape)."""
        return self.ids[positions]

    def to_positions(self, ids: Tensor) -> Tensor:
        """Vocabulary ids, each in the slice → their positions (same shape)."""
        return self.position[ids]
