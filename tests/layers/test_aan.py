"""aan: the layer contract on both sides, the cumulative average against the paper's mask matrix, the
FFN and gating formulas, the running-sum state and the d_ff default."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from adlnmt.adl.errors import ADLError
from adlnmt.adl.registry import Side
from adlnmt.layers.aan import AAN
from adlnmt.layers.base import Context, DecoderState
from adlnmt.layers.builder import build_chain
from adlnmt.layers.context import ModelOptions
from layer_contract import build, check_contract, run_steps

VARIANTS = [f"aan(ffn={ffn}, gate={gate})" for ffn in ("true", "false") for gate in ("true", "false")]
CHAINS = [
    *VARIANTS,
    "aan",
    "res(aan) -> norm",
    "res(aan(ffn=false)) -> norm",
    "res_nd(aan(d_ff=8))",
    "repeat(2, res(aan) -> norm -> res(ffl) -> norm)",
]


@pytest.mark.parametrize("side", [Side.ENCODER, Side.DECODER])
@pytest.mark.parametrize("adl", CHAINS)
def test_contract(adl: str, side: Side) -> None:
    check_contract(adl, side)


def unit(adl: str, side: Side = Side.DECODER, d: int = 16) -> AAN:
    layer = build(adl, side, d=d).layer.layers[0].eval()
    assert isinstance(layer, AAN)
    return layer


def mask_matrix(length: int) -> Tensor:
    """The paper's Figure 3: row j holds 1/j in its first j columns."""
    rows = torch.arange(1, length + 1, dtype=torch.float32).unsqueeze(1)  # [T, 1]
    return torch.tril(torch.ones(length, length)) / rows  # [T, T]


def average(x: Tensor) -> Tensor:
    return mask_matrix(x.size(1)) @ x  # [T, T] @ [B, T, d] → [B, T, d]


@torch.no_grad()
@pytest.mark.parametrize("side", [Side.ENCODER, Side.DECODER])
def test_plain_average_equals_the_mask_matrix_product(side: Side) -> None:
    layer = unit("aan(ffn=false, gate=false)", side)
    x = torch.randn(3, 11, 16)
    expected = average(x)
    assert torch.allclose(expected[:, 2], x[:, :3].mean(1), atol=1e-6)
    assert torch.allclose(layer(x, Context()), expected, atol=1e-5)
    assert sum(p.numel() for p in layer.parameters()) == 0


@torch.no_grad()
def test_ffn_formula() -> None:
    layer = unit("aan(gate=false, d_ff=24)")
    ffn = layer.ffn
    assert ffn is not None
    x = torch.randn(2, 7, 16)
    g = average(x) @ ffn.up.weight.T + ffn.up.bias  # W_1 ḡ_j + b_1
    expected = torch.relu(g) @ ffn.down.weight.T + ffn.down.bias  # W_2 relu(·) + b_2
    assert torch.allclose(layer(x, Context()), expected, atol=1e-5)


@torch.no_grad()
def test_gate_formula_with_set_weights() -> None:
    layer = unit("aan(ffn=false)")
    gate = layer.gate
    assert gate is not None
    gate.weight.zero_()
    gate.bias.copy_(torch.cat([torch.zeros(16), torch.full((16,), math.log(3.0))]))  # i = σ(0), f = σ(ln 3)
    x = torch.randn(2, 7, 16)
    assert torch.allclose(layer(x, Context()), 0.5 * x + 0.75 * average(x), atol=1e-5)

    torch.manual_seed(0)
    gate.weight.copy_(torch.randn(32, 32) * 0.3)
    gate.bias.copy_(torch.randn(32))
    g = average(x)
    i, f = torch.sigmoid(torch.cat([x, g], dim=-1) @ gate.weight.T + gate.bias).split(16, dim=-1)
    assert torch.allclose(layer(x, Context()), i * x + f * g, atol=1e-5)


@torch.no_grad()
def test_state_is_the_running_sum() -> None:
    layer = unit("aan")
    x = torch.randn(4, 6, 16)
    state = DecoderState(4)
    ctx = Context(state=state)
    layer.init_state(ctx)
    assert torch.equal(state.get(layer, "sum"), torch.zeros(4, 16))
    setup = build("aan", Side.DECODER)
    setup.layer = layer
    stepped = run_steps(setup, x, ctx, 0)
    assert torch.allclose(state.get(layer, "sum"), x.sum(1), atol=1e-5)  # g̃_j = g̃_{j−1} + y_j
    assert torch.allclose(stepped, layer(x, Context()), atol=1e-5)


@torch.no_grad()
def test_step_divides_by_the_position_from_the_offset() -> None:
    layer = unit("aan(ffn=false, gate=false)")
    state = DecoderState(1)
    ctx = Context(state=state, offset=4)
    layer.init_state(ctx)
    state.set(layer, "sum", torch.full((1, 16), 10.0))  # the sum of positions 1..4
    y = torch.full((1, 1, 16), 5.0)
    assert torch.allclose(layer.step(y, ctx), torch.full((1, 1, 16), 3.0))  # (10 + 5) / 5


def test_d_ff_defaults_to_ff_factor_times_width() -> None:
    layer = build_chain("aan", Side.DECODER, 16, ModelOptions(d_model=16, ff_factor=3)).layers[0]
    assert tuple(layer.ffn.up.weight.shape) == (48, 16)
    assert tuple(layer.ffn.down.weight.shape) == (16, 48)
    assert tuple(layer.gate.weight.shape) == (32, 32)
    d, d_ff = 16, 48
    ffn = d * d_ff + d_ff + d_ff * d + d  # W_1, b_1, W_2, b_2
    gate = 2 * d * 2 * d + 2 * d  # W ∈ R^{2d × 2d} and b
    assert sum(p.numel() for p in layer.parameters()) == ffn + gate
    assert tuple(unit("aan(d_ff=40)").ffn.up.weight.shape) == (40, 16)


def test_d_ff_needs_the_ffn() -> None:
    text = "res(aan(ffn=false, d_ff=64)) -> norm"
    with pytest.raises(ADLError) as info:
        build(text, Side.DECODER)
    assert info.value.column == text.index("d_ff")


@torch.no_grad()
def test_encoder_real_positions_ignore_trailing_padding() -> None:
    layer = unit("aan", Side.ENCODER)
    x = torch.randn(1, 5, 16)
    padded = torch.cat([x, torch.randn(1, 4, 16) * 100], dim=1)
    mask = torch.tensor([[True] * 5 + [False] * 4])
    assert torch.allclose(layer(padded, Context(mask=mask))[:, :5], layer(x, Context()), atol=1e-5)
