"""basic: dropout, pos, learn_pos, linear, ff, ffl, act, id — contract and formulas."""

from __future__ import annotations

import math

import pytest
import torch

from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context
from adlnmt.layers.basic import sinusoids
from adlnmt.layers.builder import build_chain
from adlnmt.layers.context import ModelOptions
from layer_contract import check_contract

LAYERS = [
    "dropout",
    "dropout(0.3)",
    "pos",
    "pos(dropout=0.0)",
    "learn_pos",
    "learn_pos(max_len=40)",
    "linear",
    "linear(24)",
    "ff",
    "ff(32, gelu)",
    "ff(d=20, act=glu)",
    "ffl",
    "ffl(factor=2, act=swish)",
    "act",
    "act(tanh)",
    "act(sigmoid)",
    "act(leaky_relu)",
    "act(gelu)",
    "act(swish)",
    "act(glu)",
    "id",
]


@pytest.mark.parametrize("side", list(Side), ids=lambda s: s.value)
@pytest.mark.parametrize("adl", LAYERS)
def test_contract(adl: str, side: Side) -> None:
    check_contract(adl, side)


def build(adl: str, d: int = 8):
    layer = build_chain(adl, Side.ENCODER, d, ModelOptions(d_model=d, heads=2, dropout=0.0))
    return layer.eval()


def test_widths() -> None:
    assert build("linear(24)").out_dim == 24
    assert build("ff(5)").out_dim == 5
    assert build("ffl").out_dim == 8
    assert build("act(glu)").out_dim == 4
    assert build("linear").out_dim == 8  # defaults to d_model


def test_pos_formula() -> None:
    x = torch.randn(1, 5, 8)
    out = build("pos")(x, Context())
    t, j = 3, 1
    p_sin = math.sin(t / 10000 ** (2 * j / 8))
    p_cos = math.cos(t / 10000 ** (2 * j / 8))
    assert out[0, t, 2 * j].item() == pytest.approx(math.sqrt(8) * x[0, t, 2 * j].item() + p_sin, abs=1e-5)
    assert out[0, t, 2 * j + 1].item() == pytest.approx(math.sqrt(8) * x[0, t, 2 * j + 1].item() + p_cos, abs=1e-5)
    assert sinusoids(torch.arange(4), 7).shape == (4, 7)  # odd widths work


def test_pos_uses_the_absolute_offset() -> None:
    x = torch.randn(1, 6, 8)
    layer = build("pos")
    whole = layer(x, Context())
    assert torch.allclose(layer(x[:, 4:], Context(offset=4)), whole[:, 4:], atol=1e-6)


def test_learn_pos_beyond_table_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="max_len=4"):
        build("learn_pos(max_len=4)")(torch.randn(1, 5, 8), Context())


def test_ff_and_ffl_formulas() -> None:
    ff = build("ff(3)")
    x = torch.randn(2, 4, 8)
    linear = ff.layers[0].linear
    assert torch.allclose(ff(x, Context()), torch.relu(linear(x)))
    ffl = build("ffl").layers[0]
    assert ffl.net.up.out_features == 32 and ffl.net.down.out_features == 8
    assert torch.allclose(ffl(x, Context()), ffl.net.down(torch.relu(ffl.net.up(x))))


def test_glu_splits_value_and_gate() -> None:
    x = torch.randn(2, 3, 8)
    out = build("act(glu)")(x, Context())
    assert torch.allclose(out, x[..., :4] * torch.sigmoid(x[..., 4:]))


def test_dropout_is_active_in_training_only() -> None:
    layer = build_chain("dropout(0.5)", Side.ENCODER, 8, ModelOptions(d_model=8, heads=2))
    x = torch.ones(4, 50, 8)
    assert (layer.train()(x, Context()) == 0).any()
    assert torch.equal(layer.eval()(x, Context()), x)
