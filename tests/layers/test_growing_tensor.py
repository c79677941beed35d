"""GrowingTensor: appends, beam reorders and batch selections, preallocated or not."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from adlnmt.layers.growing_tensor import GrowingTensor
from adlnmt.speedups import speedups_off


@pytest.mark.parametrize("preallocate", [True, False])
def test_growing_tensor_appends_reorders_and_selects(preallocate: bool) -> None:
    reference = torch.randn(6, 2, 3, 4)  # [B, h, t, d]
    with torch.no_grad(), nullcontext() if preallocate else speedups_off():
        cache = GrowingTensor(reference[:, :, :1], dim=2)
        for t in range(1, 3):
            cache.append(reference[:, :, t : t + 1])
        assert cache.preallocated == preallocate
        torch.testing.assert_close(cache.view, reference)
        index = torch.tensor([1, 0, 0, 3, 5, 5])
        cache.reorder(index, index.ne(torch.arange(6)).nonzero().squeeze(1))  # beam reorder
        torch.testing.assert_close(cache.view, reference[index])
        extra = torch.randn(6, 2, 40, 4)  # grows past the first buffer
        whole = cache.append(extra)
        torch.testing.assert_close(whole, torch.cat([reference[index], extra], dim=2))
        keep = torch.tensor([2, 4])
        cache.select(keep)  # finished sentences leave
        torch.testing.assert_close(cache.view, torch.cat([reference[index], extra], dim=2)[keep])
