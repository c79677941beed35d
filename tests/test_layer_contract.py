"""The contract checks themselves must catch broken layers (otherwise every layer test is vacuous)."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context, Layer
from layer_contract import (
    Setup,
    check_causality,
    check_gradients,
    check_incremental,
    check_low_precision,
    check_padding_invariance,
)


class _Broken(Layer):
    def __init__(self) -> None:
        super().__init__()
        self.out_dim = 4
        self.linear = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 4)


class PeeksAtTheFuture(_Broken):
    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.linear(x) + x.flip(1).cumsum(1).flip(1) * 0.1  # sum over later positions


class ReadsPadding(_Broken):
    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.linear(x) + x.mean(1, keepdim=True)  # mean over all positions, padding included


class ForgetsItsState(_Broken):
    """Full pass: causal cumulative sum; step: ignores the history."""

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.linear(x.cumsum(1))


class ReordersNothing(_Broken):
    """Correct single sequence, but keeps its running sum outside the decoder state."""

    def init_state(self, ctx: Context) -> None:
        self.total = torch.zeros(ctx.state.batch_size, 1, 4)

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.linear(x.cumsum(1))

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        self.total = self.total + x
        return self.linear(self.total)


class KeepsAnFp32Average(_Broken):
    """Updates an fp32 running average from its (bf16, under autocast) input, as bnorm did before 0f41c27."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("average", torch.zeros(4))

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        with torch.no_grad():
            self.average.lerp_(x.mean((0, 1)), 0.1)
        return self.linear(x) + self.unused(x)


def setup(layer: Layer, side: Side = Side.DECODER) -> Setup:
    return Setup(layer, side, 4, 4, 3)


def test_future_peeking_is_caught() -> None:
    with pytest.raises(AssertionError, match="leaked"):
        check_causality(setup(PeeksAtTheFuture()))


def test_padding_reading_is_caught() -> None:
    with pytest.raises(AssertionError, match="padding"):
        check_padding_invariance(setup(ReadsPadding(), Side.ENCODER))


def test_stateless_step_is_caught() -> None:
    with pytest.raises(AssertionError):
        check_incremental(setup(ForgetsItsState()))


def test_state_outside_the_decoder_state_is_caught_by_reordering() -> None:
    with pytest.raises(AssertionError, match="reordered"):
        check_incremental(setup(ReordersNothing()))


def test_unreached_parameter_is_caught() -> None:
    with pytest.raises(AssertionError, match="no gradient reaches unused"):
        check_gradients(setup(ForgetsItsState(), Side.ENCODER))


def test_low_precision_failure_is_caught() -> None:
    with pytest.raises(RuntimeError, match="expected dtype float"):
        check_low_precision(setup(KeepsAnFp32Average(), Side.ENCODER))
