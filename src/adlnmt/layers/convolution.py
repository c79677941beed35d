"""The convolution layer ``cnn``: a small feed-forward network on a sliding window of the input.

Encoder: the window is centred on the output position (zero padding keeps the length; an even kernel
reaches one tap further right than left) and padding positions of the input are zeroed first, so
their content never matters. Decoder: (k−1)·dilation zero vectors on the left make it causal; in
incremental decoding the last (k−1)·dilation inputs are kept as a dynamic state entry.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from adlnmt.adl.registry import Kind, Param, Side, register
from adlnmt.layers.base import Context, Layer, masked_fill_padding
from adlnmt.layers.basic import ACTIVATION_NAMES, ACTIVATIONS, WIDTH, activation_input_width
from adlnmt.layers.context import BuildContext


@register(
    "cnn",
    WIDTH,
    Param("kernel", Kind.INT, 3, low=1, high=64, doc="kernel size k (window of k positions)"),
    Param("act", Kind.WORD, "glu", choices=ACTIVATION_NAMES, doc="non-linearity v (glu: W has 2d rows)"),
    Param("dilation", Kind.INT, 1, low=1, high=64, doc="distance between the window's taps"),
    example="cnn(8, kernel=3, dilation=2)",
)
class CNN(Layer):
    """cnn(H) = v(W[h_{i-⌊k/2⌋}; …; h_{i+⌊k/2⌋}] + b); decoder: v(W[h_{t-k+1}; …; h_t] + b)."""

    def __init__(self, ctx: BuildContext, d: int, kernel: int, act: str, dilation: int) -> None:
        super().__init__()
        width = ctx.check_width(d, "d")
        self.conv = nn.Conv1d(ctx.d_in, activation_input_width(act, width), kernel, dilation=dilation)
        self.act = ACTIVATIONS[act]
        self.out_dim = width
        self.context = (kernel - 1) * dilation  # input positions besides the current one
        if ctx.side is Side.DECODER:
            self.padding = (self.context, 0)
        else:
            left = (kernel - 1) // 2 * dilation  # taps stay on the dilation grid around position i
            self.padding = (left, self.context - left)

    def convolve(self, x: Tensor) -> Tensor:
        """[B, T + (k−1)·dil, d_in] (already padded) → [B, T, d]."""
        pre = self.conv(x.transpose(1, 2))  # [B, d_i, T]
        return self.act(pre.transpose(1, 2))  # [B, T, d]

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        x = masked_fill_padding(x, ctx.mask)  # [B, T, d_in]
        return self.convolve(F.pad(x, (0, 0, *self.padding)))  # pads the time dimension

    def init_state(self, ctx: Context) -> None:
        assert ctx.state is not None
        weight = self.conv.weight
        window = torch.zeros(
            ctx.state.batch_size, self.context, self.conv.in_channels, device=weight.device, dtype=weight.dtype
        )
        ctx.state.set(self, "window", window)  # [B, (k−1)·dil, d_in]: the previous inputs

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        assert ctx.state is not None
        window = torch.cat([ctx.state.get(self, "window").to(x.dtype), x], dim=1)  # [B, (k−1)·dil + 1, d_in]
        ctx.state.set(self, "window", window[:, 1:])  # slide by one position
        return self.convolve(window)  # [B, 1, d]
