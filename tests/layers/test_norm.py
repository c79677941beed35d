"""norm and bnorm: contract, formulas, and batch statistics over real positions only."""

from __future__ import annotations

import pytest
import torch

from adlnmt.adl.errors import ADLError
from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context
from adlnmt.layers.builder import build_chain
from adlnmt.layers.context import ModelOptions
from layer_contract import check_contract, lengths_mask


@pytest.mark.parametrize(
    ("adl", "side"),
    [
        ("norm", Side.ENCODER),
        ("norm", Side.DECODER),
        ("norm(eps=1e-6)", Side.DECODER),
        ("bnorm", Side.ENCODER),
        ("res(ff -> bnorm)", Side.ENCODER),
        ("bnorm(momentum=0.5)", Side.ENCODER),
    ],
)
def test_contract(adl: str, side: Side) -> None:
    check_contract(adl, side)


def test_layer_norm_formula() -> None:
    layer = build_chain("norm", Side.ENCODER, 6).eval()
    x = torch.randn(2, 3, 6)
    mu = x.mean(-1, keepdim=True)
    sigma = x.var(-1, unbiased=False, keepdim=True).add(1e-5).sqrt()
    assert torch.allclose(layer(x, Context()), (x - mu) / sigma, atol=1e-5)


def test_batch_norm_statistics_come_from_real_positions_only() -> None:
    layer = build_chain("bnorm", Side.ENCODER, 4, ModelOptions(d_model=4, heads=1)).train()
    x = torch.randn(3, 5, 4)
    mask = lengths_mask([5, 2, 3], 5)
    x = torch.where(mask.unsqueeze(-1), x, torch.full_like(x, 1000.0))
    out = layer(x, Context(mask=mask))
    real = x[mask]
    expected = (real - real.mean(0)) / (real.var(0, unbiased=False) + 1e-5).sqrt()
    assert torch.allclose(out[mask], expected, atol=1e-4)
    norm = layer.layers[0].norm
    n = real.size(0)
    assert torch.allclose(norm.running_mean, 0.1 * real.mean(0), atol=1e-5)
    assert torch.allclose(norm.running_var, 0.9 + 0.1 * real.var(0, unbiased=False) * n / (n - 1), atol=1e-4)


def test_batch_norm_is_rejected_in_the_decoder_with_the_reason() -> None:
    with pytest.raises(ADLError, match="leak the future"):
        build_chain("res(norm -> bnorm)", Side.DECODER, 8)


def test_batch_norm_keeps_fp32_statistics_under_bf16_autocast() -> None:
    """Under autocast the layer before bnorm gives bf16 (a convolution in COMET's unit); the statistics, the running
    averages and the normalisation stay fp32, as layer norm's do (this failed on the H200 before)."""
    layer = build_chain("linear -> bnorm", Side.ENCODER, 8, ModelOptions(d_model=8, heads=1)).train()
    x = torch.randn(2, 5, 8)
    mask = lengths_mask([5, 3], 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x, Context(mask=mask))
        hidden = layer.layers[0](x, Context(mask=mask))  # the bf16 input bnorm saw
    assert hidden.dtype == torch.bfloat16 and out.dtype == torch.float32
    real = hidden[mask].float()
    expected = (real - real.mean(0)) / (real.var(0, unbiased=False) + 1e-5).sqrt()
    assert torch.allclose(out[mask], expected, atol=1e-4)
    norm = layer.layers[1].norm
    assert norm.running_mean.dtype == torch.float32
    assert torch.allclose(norm.running_mean, 0.1 * real.mean(0), atol=1e-6)
    out.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in layer.parameters())
