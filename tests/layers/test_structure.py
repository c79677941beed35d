"""Structural layers: res*, repeat, concat, parallel, highway — contract, formulas, width checks."""

from __future__ import annotations

import pytest
import torch

from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context
from adlnmt.layers.builder import build_chain
from adlnmt.layers.context import ModelOptions
from layer_contract import check_contract

LAYERS = [
    "res(ff -> linear)",
    "res_d(ffl)",
    "res_nd(ffl)",
    "repeat(3, res_nd(ffl))",
    "repeat(2, linear(12) -> ff(8))",
    "concat(id, linear(4))",
    "concat(id, ff(8), ffl) -> linear",
    "parallel(id, ffl, linear)",
    "highway(ffl)",
    "repeat(2, repeat(2, res(norm -> ffl)))",
    "res(parallel(pos, highway(ff)))",
]


@pytest.mark.parametrize("side", list(Side), ids=lambda s: s.value)
@pytest.mark.parametrize("adl", LAYERS)
def test_contract(adl: str, side: Side) -> None:
    check_contract(adl, side)


def build(adl: str, d: int = 8):
    return build_chain(adl, Side.ENCODER, d, ModelOptions(d_model=d, heads=2, dropout=0.0)).eval()


def test_residual_formulas() -> None:
    x = torch.randn(2, 3, 8)
    res = build("res(linear)")
    assert torch.allclose(res(x, Context()), x + res.layers[0].inner(x, Context()))
    res_nd = build("res_nd(linear)").layers[0]
    assert torch.allclose(res_nd(x, Context()), x + res_nd.inner(res_nd.norm(x), Context()))


def test_repeat_makes_separate_weights() -> None:
    layer = build("repeat(3, linear)").layers[0]
    weights = [copy.layers[0].linear.weight for copy in layer.copies]
    assert len({w.data_ptr() for w in weights}) == 3
    assert sum(p.numel() for p in layer.parameters()) == 3 * (8 * 8 + 8)


def test_top_level_repeat_records_encoder_blocks() -> None:
    layer = build("pos -> repeat(3, res_nd(ffl)) -> repeat(2, linear(8)) -> norm")
    ctx = Context(blocks=[])
    layer(torch.randn(1, 4, 8), ctx)
    assert len(ctx.blocks) == 5
    assert layer.blocks.widths == [8] * 5


def test_nested_repeat_is_not_a_block() -> None:
    layer = build("repeat(2, repeat(3, linear))")
    assert layer.blocks.widths == [8, 8]


def test_concat_parallel_highway_formulas() -> None:
    x = torch.randn(2, 3, 8)
    concat = build("concat(id, linear(4))")
    assert concat.out_dim == 12
    out = concat(x, Context())
    assert torch.equal(out[..., :8], x)
    parallel = build("parallel(id, linear)")
    lin = parallel.layers[0].branches[1].layers[0].linear
    assert torch.allclose(parallel(x, Context()), x + lin(x), atol=1e-6)
    highway = build("highway(linear)").layers[0]
    g = torch.sigmoid(highway.gate(x))
    inner = highway.inner(x, Context())
    assert torch.allclose(highway(x, Context()), g * x + (1 - g) * inner, atol=1e-6)
