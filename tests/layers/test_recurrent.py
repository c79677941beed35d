"""rnn and birnn: the layer contract, true lengths in the encoder, the cell formulas, argument errors."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from adlnmt.adl.errors import ADLError
from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context, DecoderState
from adlnmt.layers.recurrent import RNN, BiRNN
from layer_contract import build, check_contract, lengths_mask

ENCODER_CHAINS = [
    "rnn",
    "rnn(cell=gru)",
    "rnn(8)",
    "rnn(24, gru)",
    "res(rnn->dropout)",
    "birnn",
    "birnn(cell=gru)",
    "birnn(24)",
    "res(norm->birnn)",
    "birnn(8) -> rnn",
]
DECODER_CHAINS = [
    "rnn",
    "rnn(cell=gru)",
    "rnn(8)",
    "res(rnn->dropout)",
    "repeat(2, res(norm->rnn(cell=gru)))",
]


@pytest.mark.parametrize("adl", ENCODER_CHAINS)
def test_contract_encoder(adl: str) -> None:
    check_contract(adl, Side.ENCODER)


@pytest.mark.parametrize("adl", DECODER_CHAINS)
def test_contract_decoder(adl: str) -> None:
    check_contract(adl, Side.DECODER)


def only(adl: str, side: Side, cls: type, d: int = 16) -> tuple[torch.nn.Module, object]:
    chain = build(adl, side, d=d).layer
    chain.eval()
    layer = next(m for m in chain.modules() if isinstance(m, cls))
    return chain, layer


def lstm_reference(x: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> Tensor:
    """The LSTM equations step by step; x [B, T, d_in] → [B, T, d] from zero states."""
    d = w_hh.size(1)
    h = c = x.new_zeros(x.size(0), d)
    outputs = []
    for t in range(x.size(1)):
        gates = x[:, t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = gates.split(d, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outputs.append(h)
    return torch.stack(outputs, dim=1)


def gru_reference(x: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> Tensor:
    d = w_hh.size(1)
    h = x.new_zeros(x.size(0), d)
    outputs = []
    for t in range(x.size(1)):
        xr, xz, xn = (x[:, t] @ w_ih.T + b_ih).split(d, dim=-1)
        hr, hz, hn = (h @ w_hh.T + b_hh).split(d, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        h = (1 - z) * n + z * h
        outputs.append(h)
    return torch.stack(outputs, dim=1)


REFERENCES = {"lstm": lstm_reference, "gru": gru_reference}


def weights(rnn: torch.nn.Module, suffix: str = "") -> tuple[Tensor, ...]:
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    return tuple(getattr(rnn, f"{name}_l0{suffix}") for name in names)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("side", list(Side))
@torch.no_grad()
def test_rnn_follows_the_cell_equations(cell: str, side: Side) -> None:
    torch.manual_seed(0)
    chain, layer = only(f"rnn(12, cell={cell})", side, RNN)
    x = torch.randn(3, 7, 16)
    expected = REFERENCES[cell](x, *weights(layer.rnn))
    out = chain(x, Context())
    assert out.shape == (3, 7, 12)
    assert torch.allclose(out, expected, atol=1e-5)
    if side is Side.DECODER:  # one step at a time through the decoder state
        ctx = Context(state=DecoderState(3))
        chain.init_state(ctx)
        stepped = []
        for t in range(7):
            ctx.offset = ctx.state.step = t
            stepped.append(chain.step(x[:, t : t + 1], ctx))
        assert torch.allclose(torch.cat(stepped, dim=1), expected, atol=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@torch.no_grad()
def test_birnn_is_a_forward_and_a_reverse_rnn_concatenated(cell: str) -> None:
    torch.manual_seed(0)
    chain, layer = only(f"birnn(12, cell={cell})", Side.ENCODER, BiRNN)
    x = torch.randn(2, 5, 16)
    out = chain(x, Context())
    assert out.shape == (2, 5, 12)
    forward = REFERENCES[cell](x, *weights(layer.rnn))
    backward = REFERENCES[cell](x.flip(1), *weights(layer.rnn, "_reverse")).flip(1)
    assert torch.allclose(out[..., :6], forward, atol=1e-5)
    assert torch.allclose(out[..., 6:], backward, atol=1e-5)


@pytest.mark.parametrize("adl", ["birnn", "birnn(cell=gru)", "rnn", "rnn(cell=gru)"])
@torch.no_grad()
def test_encoder_respects_true_lengths(adl: str) -> None:
    """Each sentence of a padded batch gives what it gives alone, without padding."""
    torch.manual_seed(0)
    chain = build(adl, Side.ENCODER).layer.eval()
    lengths = [6, 3, 1, 5]
    x = torch.randn(4, 6, 16) * 3
    out = chain(x, Context(mask=lengths_mask(lengths, 6)))
    for row, length in enumerate(lengths):
        alone = chain(x[row : row + 1, :length], Context())
        assert torch.allclose(out[row, :length], alone[0], atol=1e-5), f"sentence {row} sees its padding"


@torch.no_grad()
def test_birnn_backward_direction_starts_at_the_last_real_token() -> None:
    torch.manual_seed(0)
    chain, _ = only("birnn", Side.ENCODER, BiRNN)
    x = torch.randn(2, 6, 16)
    out = chain(x, Context(mask=lengths_mask([6, 4], 6)))
    # The backward state at the last real token has read only that token.
    single = chain(x[1:2, 3:4], Context())
    assert torch.allclose(out[1, 3, 8:], single[0, 0, 8:], atol=1e-5)
    # Padding positions are zeros, whatever the input there.
    assert torch.all(out[1, 4:] == 0)


def test_rnn_decoder_state_is_batch_first() -> None:
    chain, layer = only("rnn(12)", Side.DECODER, RNN)
    ctx = Context(state=DecoderState(5))
    chain.init_state(ctx)
    assert ctx.state.get(layer, "h").shape == (5, 12)
    assert ctx.state.get(layer, "c").shape == (5, 12)
    chain, layer = only("rnn(12, gru)", Side.DECODER, RNN)
    ctx = Context(state=DecoderState(5))
    chain.init_state(ctx)
    assert ctx.state.get(layer, "h").shape == (5, 12)
    assert not ctx.state.has(layer, "c")


@pytest.mark.parametrize(("adl", "column"), [("birnn", 0), ("norm -> birnn(8)", 8), ("res(birnn)", 4)])
def test_birnn_is_encoder_only(adl: str, column: int) -> None:
    with pytest.raises(ADLError) as err:
        build(adl, Side.DECODER)
    assert "decoder" in err.value.message
    assert "later target positions" in err.value.message
    assert err.value.column == column


@pytest.mark.parametrize(
    ("adl", "d_model", "column", "words"),
    [
        ("birnn(15)", 16, 6, "even"),
        ("norm -> birnn(d=15)", 16, 14, "even"),
        ("birnn", 15, 0, "even"),
        ("rnn(70000)", 16, 4, "width"),
        ("birnn(70000)", 16, 6, "width"),
        ("rnn(0)", 16, 4, ">= 1"),
        ("rnn(cell=lstmm)", 16, 4, "lstm, gru"),
        ("rnn(16, gru, 3)", 16, 13, "at most 2"),
    ],
)
def test_argument_errors(adl: str, d_model: int, column: int, words: str) -> None:
    with pytest.raises(ADLError) as err:
        build(adl, Side.ENCODER, d=d_model)
    assert words in err.value.message
    assert err.value.column == column
