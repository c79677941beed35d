"""Normalisation layers: layer norm (any side) and batch norm over real positions (encoder only)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from adlnmt.adl.registry import ENCODER_ONLY, Kind, Param, register
from adlnmt.layers.base import Context, Layer
from adlnmt.layers.context import BuildContext

BATCH_STATS_REASON = (
    "batch statistics are taken over every position of the batch, later target positions included, "
    "so it would leak the future; use norm"
)


@register("norm", Param("eps", Kind.FLOAT, 1e-5, low=1e-12, high=1.0, doc="added to the variance"), example="norm")
class Norm(Layer):
    """norm(h_t) = g / σ_t ⊗ (h_t − μ_t) + b, with μ_t, σ_t the mean and deviation over units of h_t."""

    def __init__(self, ctx: BuildContext, eps: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(ctx.d_in, eps=eps)
        self.out_dim = ctx.d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.norm(x)


class MaskedBatchNorm(nn.Module):
    """Batch norm whose statistics come from real (non-padding) positions only.

    Training: y = g ⊗ (h − μ_B) / √(σ²_B + ε) + b, with μ_B, σ²_B over all real positions of the
    batch, and running averages updated with ``momentum``; evaluation uses the running averages. Computed in fp32
    (under bf16/fp16 autocast too, as layer norm is).
    """

    def __init__(self, width: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.eps = eps
        self.momentum = momentum
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))
        self.register_buffer("running_mean", torch.zeros(width))
        self.register_buffer("running_var", torch.ones(width))

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        # x: [B, T, D]; mask: [B, T] True at real positions
        x = x.float()  # no-op in fp32; under autocast the statistics must match the fp32 running averages
        if self.training:
            real = x.reshape(-1, x.size(-1)) if mask is None else x[mask]  # [N, D]
            if real.size(0) > 1:
                mean = real.mean(0)
                var = real.var(0, unbiased=False)
                with torch.no_grad():
                    n = real.size(0)
                    self.running_mean.lerp_(mean.detach(), self.momentum)
                    self.running_var.lerp_(var.detach() * n / (n - 1), self.momentum)
                return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias
        return (x - self.running_mean) * torch.rsqrt(self.running_var + self.eps) * self.weight + self.bias


@register(
    "bnorm",
    Param("eps", Kind.FLOAT, 1e-5, low=1e-12, high=1.0, doc="added to the variance"),
    Param("momentum", Kind.FLOAT, 0.1, low=0.0, high=1.0, doc="running-average update rate"),
    sides=ENCODER_ONLY,
    side_reason=BATCH_STATS_REASON,
    example="bnorm",
)
class BNorm(Layer):
    """bnorm(h_t) = g ⊗ (h_t − μ_B) / √(σ²_B + ε) + b, statistics over the batch's real positions."""

    def __init__(self, ctx: BuildContext, eps: float, momentum: float) -> None:
        super().__init__()
        self.norm = MaskedBatchNorm(ctx.d_in, eps, momentum)
        self.out_dim = ctx.d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.norm(x, ctx.mask)
