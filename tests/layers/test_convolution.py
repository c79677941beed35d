"""cnn: the layer contract, receptive fields (centred / causal, dilated), the formula, argument errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from adlnmt.adl.errors import ADLError
from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context, DecoderState
from adlnmt.layers.convolution import CNN
from layer_contract import build, check_contract, lengths_mask

CHAINS = [
    "cnn",
    "cnn(16, 3, relu)",
    "cnn(act=glu)",
    "cnn(kernel=2)",
    "cnn(8, 5, tanh)",
    "cnn(kernel=5, dilation=2)",
    "cnn(12, 4, glu, 3)",
    "cnn(16, 1)",
    "res(norm->cnn($NUM_HIDDEN,3,relu))",
    "repeat(2, res(norm->cnn(kernel=3, dilation=2)->dropout))",
]


@pytest.mark.parametrize("adl", CHAINS)
@pytest.mark.parametrize("side", list(Side))
def test_contract(adl: str, side: Side) -> None:
    check_contract(adl, side)


def only(adl: str, side: Side, d: int = 16) -> tuple[torch.nn.Module, CNN]:
    chain = build(adl, side, d=d).layer.eval()
    return chain, next(m for m in chain.modules() if isinstance(m, CNN))


def dependencies(chain: torch.nn.Module, t: int, length: int = 20) -> set[int]:
    """Input positions whose change can change output position ``t`` (nonzero gradient)."""
    x = torch.randn(1, length, 16, requires_grad=True)
    chain(x, Context())[0, t].sum().backward()
    assert x.grad is not None
    return {j for j in range(length) if x.grad[0, j].abs().sum() > 0}


@pytest.mark.parametrize(("kernel", "dilation"), [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (4, 3), (3, 4)])
def test_decoder_window_is_causal(kernel: int, dilation: int) -> None:
    """Output t reads exactly the inputs t − m·dil for m = 0..k−1 (those that exist)."""
    torch.manual_seed(0)
    chain, _ = only(f"cnn(16, {kernel}, tanh, {dilation})", Side.DECODER)
    for t in (0, 3, 9, 19):
        expected = {t - m * dilation for m in range(kernel)} & set(range(20))
        assert dependencies(chain, t) == expected, t


@pytest.mark.parametrize(("kernel", "dilation"), [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (4, 3), (3, 4)])
def test_encoder_window_is_centred(kernel: int, dilation: int) -> None:
    """Output i reads i + (m − ⌊(k−1)/2⌋)·dil, m = 0..k−1: from i−⌊(k−1)/2⌋·dil to i+⌊k/2⌋·dil."""
    torch.manual_seed(0)
    chain, _ = only(f"cnn(16, {kernel}, tanh, {dilation})", Side.ENCODER)
    for i in (0, 3, 9, 19):
        expected = {i + (m - (kernel - 1) // 2) * dilation for m in range(kernel)} & set(range(20))
        assert dependencies(chain, i) == expected, i


@torch.no_grad()
def test_encoder_right_edge_of_the_window() -> None:
    """Changing input i+⌊k/2⌋·dil changes output i; changing input i+⌊k/2⌋·dil+1 does not."""
    torch.manual_seed(0)
    for kernel, dilation in ((3, 1), (2, 1), (5, 2)):
        chain, _ = only(f"cnn(16, {kernel}, relu, {dilation})", Side.ENCODER)
        x = torch.randn(2, 16, 16)
        reference = chain(x, Context())
        i, reach = 4, kernel // 2 * dilation
        edge, beyond = x.clone(), x.clone()
        edge[:, i + reach] += 5
        beyond[:, i + reach + 1] += 5
        assert not torch.allclose(chain(edge, Context())[:, i], reference[:, i])
        assert torch.equal(chain(beyond, Context())[:, i], reference[:, i])


@pytest.mark.parametrize("act", ["relu", "glu"])
@torch.no_grad()
def test_encoder_formula(act: str) -> None:
    """cnn(H) = v(W[h_{i-1}; h_i; h_{i+1}] + b) with zero vectors beyond the sentence."""
    torch.manual_seed(0)
    chain, layer = only(f"cnn(8, 3, {act})", Side.ENCODER)
    assert layer.conv.out_channels == (16 if act == "glu" else 8)
    x = torch.randn(2, 5, 16)
    padded = F.pad(x, (0, 0, 1, 1))  # [B, 7, 16]
    weight = layer.conv.weight  # [d_i, d_in, k]
    windows = torch.cat([padded[:, j : j + 5] for j in range(3)], dim=-1)  # [B, 5, 3·d_in]
    flat = weight.permute(0, 2, 1).reshape(weight.size(0), -1)  # [d_i, k·d_in], tap-major like windows
    pre = windows @ flat.T + layer.conv.bias
    expected = F.relu(pre) if act == "relu" else pre[..., :8] * torch.sigmoid(pre[..., 8:])
    out = chain(x, Context())
    assert out.shape == (2, 5, 8)
    assert torch.allclose(out, expected, atol=1e-5)


@torch.no_grad()
def test_encoder_padding_is_zero_padding() -> None:
    """A padded sentence's real positions equal the sentence alone (its end sees zero vectors)."""
    torch.manual_seed(0)
    chain, _ = only("cnn(kernel=5, dilation=2)", Side.ENCODER)
    x = torch.randn(3, 9, 16) * 10
    lengths = [9, 4, 1]
    out = chain(x, Context(mask=lengths_mask(lengths, 9)))
    for row, length in enumerate(lengths):
        alone = chain(x[row : row + 1, :length], Context())
        assert torch.allclose(out[row, :length], alone[0], atol=1e-5)


@pytest.mark.parametrize(("kernel", "dilation", "window"), [(3, 1, 2), (5, 2, 8), (1, 1, 0), (4, 3, 9)])
@torch.no_grad()
def test_decoder_state_window(kernel: int, dilation: int, window: int) -> None:
    torch.manual_seed(0)
    chain, layer = only(f"cnn(8, {kernel}, relu, {dilation})", Side.DECODER)
    ctx = Context(state=DecoderState(4))
    chain.init_state(ctx)
    assert ctx.state.get(layer, "window").shape == (4, window, 16)
    x = torch.randn(4, 12, 16)
    stepped = []
    for t in range(12):
        ctx.offset = ctx.state.step = t
        stepped.append(chain.step(x[:, t : t + 1], ctx))
        assert ctx.state.get(layer, "window").shape == (4, window, 16)
    assert torch.allclose(torch.cat(stepped, dim=1), chain(x, Context()), atol=1e-5)
    if window:
        assert torch.equal(ctx.state.get(layer, "window"), x[:, 12 - window :])


@pytest.mark.parametrize(
    ("adl", "column", "words"),
    [
        ("cnn(0)", 4, ">= 1"),
        ("cnn(70000)", 4, "width"),
        ("norm -> cnn(d=70000)", 12, "width"),
        ("cnn(16, 0)", 8, ">= 1"),
        ("cnn(kernel=65)", 4, "<= 64"),
        ("cnn(16, 3, relu, 0)", 17, ">= 1"),
        ("cnn(dilation=65)", 4, "<= 64"),
        ("cnn(16, 3, foo)", 11, "relu"),
        ("cnn(16, 3, relu, 1, 2)", 20, "at most 4"),
        ("cnn(kernel=2.5)", 4, "int"),
    ],
)
def test_argument_errors(adl: str, column: int, words: str) -> None:
    with pytest.raises(ADLError) as err:
        build(adl, Side.ENCODER)
    assert words in err.value.message
    assert err.value.column == column
