"""FastDropout: the fraction dropped, the rescaling, the gradient, eval mode and the global seed."""

from __future__ import annotations

import pytest
import torch

from adlnmt.layers.fast_dropout import FastDropout


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
