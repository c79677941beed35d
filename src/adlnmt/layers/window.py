"""The window of input positions a convolution reads, shared by the convolution layers (cnn, comet_conv).

A convolution with kernel k and dilation l gives output i from the inputs i − before + m·l, m = 0..k−1:
its reach is (k−1)·l positions besides i, ``before`` of them before i. Decoder (causal): before = reach.
Encoder (centred): before = ⌊(k−1)/2⌋·l, so the taps stay on the dilation grid around i (an even
kernel reaches one tap further right than left).

Full pass: padding positions are zeroed, then ``before`` zero vectors go before the sequence and
``reach − before`` after it, so a padded sentence sees exactly the zeros it would see alone and a
valid convolution (no padding of its own) keeps the length. Incremental decoding: the last ``reach``
inputs are a dynamic entry of the :class:`DecoderState` (zeros before the first step) that every step
slides by one position.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from adlnmt.layers.base import Context, DecoderState, Layer, masked_fill_padding


class ConvWindow:
    """Reach, zero padding and incremental window of one convolution over ``width`` input units."""

    def __init__(self, width: int, kernel: int, dilation: int, causal: bool) -> None:
        self.width = width
        self.reach = (kernel - 1) * dilation  # input positions the kernel reads besides the output's own
        self.before = self.reach if causal else (kernel - 1) // 2 * dilation  # how many of them come before

    def pad(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """Full pass: ``x`` [B, T, width] (``mask`` [B, T], True = real) → [B, T + reach, width]."""
        x = masked_fill_padding(x, mask)  # padding content never reaches a real position
        return F.pad(x, (0, 0, self.before, self.reach - self.before))  # pads the time dimension

    def init_state(self, state: DecoderState, owner: nn.Module, name: str, like: Tensor) -> None:
        """Store the zero window [B, reach, width] (``like``'s device and dtype) as ``owner``'s ``name``."""
        window = like.new_zeros(state.batch_size, self.reach, self.width)  # [B, reach, width]
        state.set(owner, name, window)

    def slide(self, x: Tensor, state: DecoderState, owner: nn.Module, name: str) -> Tensor:
        """Causal step: ``x`` [B, 1, width] → the window [B, reach + 1, width] ending at ``x``; the
        stored window moves on by one position."""
        window = torch.cat([state.get(owner, name).to(x.dtype), x], dim=1)  # [B, reach + 1, width]
        state.set(owner, name, window[:, 1:])  # the last reach inputs
        return window


class WindowedConv(Layer):
    """A layer that is one convolution: a subclass writes only ``convolve``, its kernel.

    ``forward``, ``init_state`` and ``step`` hand ``convolve`` the padded sequence [B, T + reach, d_in]
    or a step's window [B, reach + 1, d_in]; it returns [B, T, out_dim] (T = 1 in a step). The zero
    window takes the device and dtype of the layer's first parameter.
    """

    def __init__(self, d_in: int, kernel: int, dilation: int, causal: bool) -> None:
        super().__init__()
        self.window = ConvWindow(d_in, kernel, dilation, causal)

    def convolve(self, window: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.convolve(self.window.pad(x, ctx.mask))  # [B, T, out_dim]

    def init_state(self, ctx: Context) -> None:
        assert ctx.state is not None
        self.window.init_state(ctx.state, self, "window", next(self.parameters()))

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        assert ctx.state is not None
        return self.convolve(self.window.slide(x, ctx.state, self, "window"))  # [B, 1, out_dim]
