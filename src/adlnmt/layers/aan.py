"""The average attention network (Zhang, Xiong & Su, "Accelerating Neural Transformer via an Average
Attention Network", §3): a cumulative average over previous positions instead of self-attention.

Training computes every average at once with a cumulative sum (no T × T mask matrix); incremental
decoding keeps the running sum as its only state (§3.3), so a step costs O(d) however long the prefix.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from adlnmt.adl.registry import FromOption, Kind, Param, register
from adlnmt.layers.base import Context, Layer
from adlnmt.layers.basic import FeedForward
from adlnmt.layers.context import BuildContext


@register(
    "aan",
    Param("ffn", Kind.BOOL, True, doc="apply FFN to the average (Eq. 1)"),
    Param("gate", Kind.BOOL, True, doc="input/forget gating layer (Eq. 2)"),
    Param("d_ff", Kind.INT, None, low=1, doc="hidden width of the FFN (default ff_factor · d_in)"),
    Param("dropout", Kind.FLOAT, FromOption("dropout"), low=0.0, high=0.99, doc="dropout inside the FFN"),
    example="res_nd(aan)",
)
class AAN(Layer):
    """aan(y)_j = i_j ⊙ y_j + f_j ⊙ g_j, [i_j; f_j] = σ(W [y_j; g_j] + b), g_j = FFN((1/j) Σ_{k≤j} y_k).

    FFN(z) = W_2 dropout(relu(W_1 z + b_1)) + b_2 with hidden width d_ff (``ffn=false``: g_j is the
    average itself); ``gate=false`` outputs g_j. The output width is the input width. The residual
    connection and layer norm of the paper's Eq. 3 are not part of the layer: write ``res(aan) -> norm``
    (post-norm, as in the paper) or ``res_nd(aan)`` (pre-norm). In the encoder the average runs left to
    right as well; padding sits at the end of a sentence, so it never enters a real position's average.
    """

    def __init__(self, ctx: BuildContext, ffn: bool, gate: bool, d_ff: int | None, dropout: float) -> None:
        super().__init__()
        d = ctx.d_in
        if not ffn and d_ff is not None:
            raise ctx.error("d_ff is the hidden width of the FFN and needs ffn=true", "d_ff")
        self.ffn: FeedForward | None = None
        if ffn:
            hidden = ctx.check_width(ctx.options.ff_factor * d if d_ff is None else d_ff, "d_ff")
            self.ffn = FeedForward(d, hidden, d, hidden_dropout=dropout)
        self.gate = nn.Linear(2 * d, 2 * d) if gate else None  # W ∈ R^{2d × 2d}: input and forget gates
        self.register_buffer("zero", torch.zeros(()), persistent=False)  # device and dtype of the state
        self.out_dim = d

    def output(self, y: Tensor, average: Tensor) -> Tensor:
        """Eqs. 1–2 from the input y and its cumulative average, both [B, T, d]."""
        g = average if self.ffn is None else self.ffn(average)
        if self.gate is None:
            return g
        i, f = torch.sigmoid(self.gate(torch.cat([y, g], dim=-1))).chunk(2, dim=-1)  # [B, T, d] each
        return i * y + f * g

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        # x: [B, T, d]; ḡ_j = (Σ_{k≤j} y_k) / j
        count = torch.arange(1, x.size(1) + 1, device=x.device, dtype=x.dtype).unsqueeze(-1)  # [T, 1]
        return self.output(x, x.cumsum(dim=1) / count)

    def init_state(self, ctx: Context) -> None:
        assert ctx.state is not None
        ctx.state.set(self, "sum", self.zero.new_zeros(ctx.state.batch_size, self.out_dim))  # [B, d]

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        # x: [B, 1, d] at position j = offset + 1 (Eqs. 5–6)
        assert ctx.state is not None
        total = ctx.state.get(self, "sum") + x[:, 0]  # [B, d]
        ctx.state.set(self, "sum", total)
        return self.output(x, (total / (ctx.offset + 1)).unsqueeze(1))
