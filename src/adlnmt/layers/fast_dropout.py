"""Dropout with cheaper CPU masks, used by every layer that drops units."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class FastDropout(nn.Dropout):
    """``nn.Dropout`` whose CPU masks come from 16 random bits per unit (4 units per draw of torch's
    generator): p is rounded to a multiple of 2⁻¹⁶, and the mask costs about a third of ``bernoulli_``,
    which dominated CPU training steps. Other devices use ``nn.Dropout`` unchanged."""

    def forward(self, x: Tensor) -> Tensor:
        if not (self.training and self.p > 0 and x.device.type == "cpu") or self.p >= 1:
            return super().forward(x)
        count = x.numel()
        words = torch.randint(-(2**63), 2**63 - 1, ((count + 3) // 4,), dtype=torch.int64)
        bits = words.view(torch.int16)[:count].view(x.shape)  # uniform over [-2¹⁵, 2¹⁵)
        kept = bits >= round(self.p * 65536) - 32768  # P = 1 − p
        return x * kept.to(x.dtype).mul_(1.0 / (1.0 - self.p))  # a float mask: mul is fast both ways
