"""The convolution layer ``cnn``: a small feed-forward network on a sliding window of the input.

Encoder: the window is centred on the output position (an even kernel reaches one tap further right
than left); decoder: causal. Padding, the zero window and its slide in incremental decoding come from
:class:`~adlnmt.layers.window.WindowedConv`.
"""

from __future__ import annotations

from torch import Tensor, nn

from adlnmt.adl.registry import Kind, Param, Side, register
from adlnmt.layers.basic import ACTIVATION_NAMES, ACTIVATIONS, WIDTH, activation_input_width
from adlnmt.layers.context import BuildContext
from adlnmt.layers.window import WindowedConv


@register(
    "cnn",
    WIDTH,
    Param("kernel", Kind.INT, 3, low=1, high=64, doc="kernel size k (window of k positions)"),
    Param("act", Kind.WORD, "glu", choices=ACTIVATION_NAMES, doc="non-linearity v (glu: W has 2d rows)"),
    Param("dilation", Kind.INT, 1, low=1, high=64, doc="distance between the window's taps"),
    example="cnn(8, kernel=3, dilation=2)",
)
class CNN(WindowedConv):
    """cnn(H) = v(W[h_{i-⌊(k-1)/2⌋r}; …; h_{i+⌊k/2⌋r}] + b), taps r = dilation apart;
    decoder: v(W[h_{t-(k-1)r}; …; h_t] + b)."""

    cudnn = True

    def __init__(self, ctx: BuildContext, d: int, kernel: int, act: str, dilation: int) -> None:
        super().__init__(ctx.d_in, kernel, dilation, causal=ctx.side is Side.DECODER)
        width = ctx.check_width(d, "d")
        self.conv = nn.Conv1d(ctx.d_in, activation_input_width(act, width), kernel, dilation=dilation)
        self.act = ACTIVATIONS[act]
        self.out_dim = width

    def convolve(self, window: Tensor) -> Tensor:
        """[B, T + (k−1)·dil, d_in] (padded) → [B, T, d]."""
        pre = self.conv(window.transpose(1, 2))  # [B, d_i, T]
        return self.act(pre.transpose(1, 2))  # [B, T, d]
