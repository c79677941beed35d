"""ConvWindow and WindowedConv: reach and padding (causal / centred, dilated), the sliding decoder window,
and a kernel-only layer that gets the layer contract from the base class."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import Tensor, nn

from adlnmt.adl.registry import REGISTRY, Kind, Param, Side, register
from adlnmt.layers.base import DecoderState
from adlnmt.layers.context import BuildContext
from adlnmt.layers.window import ConvWindow, WindowedConv
from layer_contract import check_contract, lengths_mask


@pytest.mark.parametrize(
    ("kernel", "dilation", "causal", "reach", "before"),
    [
        (1, 1, False, 0, 0),
        (3, 1, False, 2, 1),
        (4, 1, False, 3, 1),  # even kernel: one tap further right than left
        (5, 2, False, 8, 4),
        (4, 3, False, 9, 3),
        (1, 1, True, 0, 0),
        (3, 1, True, 2, 2),
        (5, 2, True, 8, 8),
        (4, 3, True, 9, 9),
    ],
)
def test_reach_and_padding(kernel: int, dilation: int, causal: bool, reach: int, before: int) -> None:
    window = ConvWindow(2, kernel, dilation, causal)
    assert (window.reach, window.before) == (reach, before)
    x = torch.randn(2, 5, 2) + 3
    padded = window.pad(x, lengths_mask([5, 3], 5))  # [B, 5 + reach, 2]
    assert padded.shape == (2, 5 + reach, 2)
    assert torch.equal(padded[0, before : before + 5], x[0])
    assert torch.equal(padded[1, before : before + 3], x[1, :3])
    real = torch.zeros(2, 5 + reach, dtype=torch.bool)
    real[0, before : before + 5] = real[1, before : before + 3] = True
    assert not padded[~real].any(), "zeros around the sequence and at its padding positions"


def test_slide_keeps_the_last_reach_inputs() -> None:
    window = ConvWindow(3, kernel=3, dilation=2, causal=True)
    owner = nn.Linear(1, 1)
    state = DecoderState(2)
    window.init_state(state, owner, "window", owner.weight)
    assert torch.equal(state.get(owner, "window"), torch.zeros(2, 4, 3))
    x = torch.randn(2, 6, 3)
    history = torch.cat([torch.zeros(2, 4, 3), x], dim=1)  # [B, reach + 6, 3]
    for t in range(6):
        assert torch.equal(window.slide(x[:, t : t + 1], state, owner, "window"), history[:, t : t + 5])
        assert torch.equal(state.get(owner, "window"), history[:, t + 1 : t + 5])


class TapSum(WindowedConv):
    """A kernel-only convolution: output i = Σ_m w_m ⊙ x_{i − before + m·l} (depthwise, no bias)."""

    def __init__(self, ctx: BuildContext, kernel: int, dilation: int) -> None:
        super().__init__(ctx.d_in, kernel, dilation, causal=ctx.side is Side.DECODER)
        self.taps = nn.Parameter(torch.randn(kernel, ctx.d_in))  # [k, d]
        self.dilation = dilation
        self.out_dim = ctx.d_in

    def convolve(self, window: Tensor) -> Tensor:
        length = window.size(1) - self.window.reach
        taps = [window[:, m * self.dilation : m * self.dilation + length] for m in range(self.taps.size(0))]
        return sum(w * tap for w, tap in zip(self.taps, taps, strict=True))  # [B, T, d]


@pytest.fixture(scope="module")
def tap_sum() -> Iterator[str]:
    """``tap_sum`` is an ADL layer while this module's tests run."""
    kernel, dilation = Param("kernel", Kind.INT, 3, low=1), Param("dilation", Kind.INT, 1, low=1)
    register("tap_sum", kernel, dilation, example="tap_sum(kernel=2)")(TapSum)
    yield "tap_sum"
    del REGISTRY["tap_sum"]


@pytest.mark.parametrize("args", ["", "(kernel=1)", "(kernel=2)", "(kernel=3, dilation=2)", "(kernel=4, dilation=3)"])
@pytest.mark.parametrize("side", list(Side))
def test_kernel_only_layer_meets_the_contract(tap_sum: str, args: str, side: Side) -> None:
    check_contract(f"res({tap_sum}{args}) -> norm", side)
