"""The runtime pieces every layer shares: fast CPU dropout and growing key/value caches."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from adlnmt.layers.base import FastDropout, GrowingTensor
from adlnmt.speedups import speedups_off


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_fast_dropout_drops_a_fraction_p_and_rescales(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(1000, 1000) + 1.0  # never 0 by itself
    y = FastDropout(p).train()(x)
    dropped = y.eq(0)
    assert abs(dropped.float().mean().item() - p) < 0.003  # 10⁶ units: the std of the fraction is < 0.0005
    torch.testing.assert_close(y[~dropped], x[~dropped] / (1 - p))
    # Rows and columns get independent masks (no repeated 16-bit patterns).
    assert dropped.float().mean(0).std() > 0 and not torch.equal(dropped[0], dropped[1])


def test_fast_dropout_gradient_is_the_mask_over_keep_probability() -> None:
    x = torch.randn(64, 33, requires_grad=True)  # a size that is not a multiple of 4
    y = FastDropout(0.2).train()(x)
    y.sum().backward()
    expected = y.detach().ne(0).float() / 0.8
    torch.testing.assert_close(x.grad, expected)


def test_fast_dropout_is_the_identity_in_eval_mode_and_for_p_zero() -> None:
    x = torch.randn(5, 7)
    assert torch.equal(FastDropout(0.3).eval()(x), x)
    assert torch.equal(FastDropout(0.0).train()(x), x)
    assert FastDropout(1.0).train()(x).eq(0).all()


def test_fast_dropout_follows_the_global_seed() -> None:
    x = torch.ones(100, 100)
    torch.manual_seed(7)
    first = FastDropout(0.5).train()(x)
    torch.manual_seed(7)
    assert torch.equal(FastDropout(0.5).train()(x), first)


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
