"""comet_conv: the layer contract on both sides, widths, parameter count, receptive fields, the decoder's
batch-norm check and batch statistics over real positions only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from adlnmt.adl.errors import ADLError
from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context, DecoderState
from adlnmt.layers.builder import build_chain
from adlnmt.layers.comet import CometConv
from adlnmt.layers.context import ModelOptions
from layer_contract import build, check_contract, lengths_mask

ENCODER = [
    "comet_conv",
    "comet_conv(ffn=ffn1)",
    "comet_conv(ffn=ffn2)",
    "comet_conv(features=[64, 32, 16, 8])",
    "comet_conv(norm=layer)",
    "comet_conv(norm=none)",
    "comet_conv([8, 4, 2])",
    "comet_conv([8, 4, 2], kernel=5, norm=layer, ffn=ffn1, d_ff=16)",
    "comet_conv([8, 4, 2], kernel=2, ffn=ffn2, d_ff=8)",
    "res(comet_conv([8, 4, 2])) -> norm",
]
DECODER = [
    "comet_conv(norm=layer)",
    "comet_conv(norm=none)",
    "comet_conv([8, 4, 2], norm=layer)",
    "comet_conv([8, 4, 2], norm=layer, ffn=ffn1)",
    "comet_conv([8, 4, 2], norm=none, ffn=ffn2, d_ff=16)",
    "comet_conv([8, 4, 2, 2], kernel=2, norm=layer)",
    "comet_conv([8], kernel=1, norm=none)",
    "repeat(2, res(comet_conv([8, 4, 2], norm=layer)) -> norm)",
]


@pytest.mark.parametrize("adl", ENCODER)
def test_contract_encoder(adl: str) -> None:
    check_contract(adl, Side.ENCODER)


@pytest.mark.parametrize("adl", DECODER)
def test_contract_decoder(adl: str) -> None:
    check_contract(adl, Side.DECODER)


def unit(adl: str, side: Side, d: int = 16) -> CometConv:
    layer = build(adl, side, d=d).layer.layers[0]
    assert isinstance(layer, CometConv)
    return layer


@torch.no_grad()
def test_output_formula_against_explicit_dilated_convolutions() -> None:
    torch.manual_seed(0)
    layer = unit("comet_conv(norm=none)", Side.ENCODER).eval()
    x = torch.randn(2, 9, 16)
    maps, h = [], x
    for dilation, conv in enumerate(layer.convs, start=1):
        # g(h) = tanh(k_f *_l h) ⊗ σ(k_σ *_l h), l zeros on both ends (§3.1)
        weight, bias = conv.conv.weight, conv.conv.bias
        pre = F.conv1d(h.transpose(1, 2), weight, bias, padding=dilation, dilation=dilation)
        k_f, k_sigma = pre.transpose(1, 2).chunk(2, dim=-1)
        h = torch.tanh(k_f) * torch.sigmoid(k_sigma)
        maps.append(h)
    assert [m.size(-1) for m in maps] == [64, 32, 16]
    expected = F.leaky_relu(torch.cat([*maps, x], dim=-1) @ layer.out.weight.T + layer.out.bias)
    assert torch.allclose(layer(x, Context()), expected, atol=1e-5)


def test_width_and_parameter_count_d256() -> None:
    chain = build_chain("comet_conv", Side.ENCODER, 256, ModelOptions(d_model=256))
    layer = chain.layers[0]
    x = torch.randn(2, 5, 256)
    assert chain.out_dim == 256
    assert chain(x, Context()).shape == (2, 5, 256)
    assert tuple(layer.out.weight.shape) == (256, 368)  # W ∈ R^{d_m × (d_m + 112)}
    convs = (
        (2 * 64 * 256 * 3 + 2 * 64)  # g_{256,64,1}: k_f and k_σ, 3 taps, with biases
        + (2 * 64)  # batch norm gain and bias of F_1
        + (2 * 32 * 64 * 3 + 2 * 32)  # g_{64,32,2}
        + (2 * 32)
        + (2 * 16 * 32 * 3 + 2 * 16)  # g_{32,16,3}
        + (2 * 16)
    )
    assert convs == 114_112
    expected = convs + 256 * 368 + 256  # FFN_1: W and b
    assert expected == 208_576
    assert sum(p.numel() for p in chain.parameters()) == expected


def test_feed_forward_widths() -> None:
    ffn1 = build_chain("comet_conv(ffn=ffn1)", Side.ENCODER, 256, ModelOptions(d_model=256)).layers[0]
    assert tuple(ffn1.inner.up.weight.shape) == (512, 112)  # FFN_2 on F' with d_ff = 512
    assert tuple(ffn1.inner.down.weight.shape) == (112, 512)
    assert tuple(ffn1.out.weight.shape) == (256, 368)  # FFN_1 on [x'; x]
    ffn2 = build_chain("comet_conv(ffn=ffn2)", Side.ENCODER, 256, ModelOptions(d_model=256)).layers[0]
    assert tuple(ffn2.out.up.weight.shape) == (1024, 368)  # FFN_2 on [F_1; F_2; F_3; x] with d_ff = 1024
    assert tuple(ffn2.out.down.weight.shape) == (256, 1024)
    assert tuple(unit("comet_conv([8, 4], ffn=ffn2, d_ff=24)", Side.ENCODER).out.up.weight.shape) == (24, 28)


def test_four_layer_variant_has_dilations_one_to_four() -> None:
    layer = unit("comet_conv(features=[64, 32, 16, 8])", Side.ENCODER)
    assert [c.conv.dilation[0] for c in layer.convs] == [1, 2, 3, 4]
    assert [c.conv.out_channels // 2 for c in layer.convs] == [64, 32, 16, 8]
    assert tuple(layer.out.weight.shape) == (16, 16 + 120)


def test_decoder_rejects_batch_norm_at_its_argument() -> None:
    text = "res(comet_conv([8, 4], norm=batch)) -> norm"
    with pytest.raises(ADLError) as info:
        build(text, Side.DECODER)
    err = info.value
    assert err.column == text.index("norm=batch")
    assert "decoder" in err.message and "leak the future" in err.message and "norm=layer" in err.message
    build(text, Side.ENCODER)  # the encoder keeps the paper's batch norm


def test_decoder_rejects_the_default_batch_norm_at_the_layer() -> None:
    text = "pos -> comet_conv"
    with pytest.raises(ADLError) as info:
        build(text, Side.DECODER)
    assert info.value.column == text.index("comet_conv")
    assert "norm=layer" in info.value.message


def test_d_ff_needs_a_feed_forward_variant() -> None:
    text = "comet_conv(d_ff=64)"
    with pytest.raises(ADLError) as info:
        build(text, Side.ENCODER)
    assert info.value.column == text.index("d_ff")


def dependencies(forward, x: Tensor) -> list[set[int]]:
    """For every output position i, the input positions j whose change changes output i."""
    reference = forward(x)
    deps: list[set[int]] = [set() for _ in range(x.size(1))]
    for j in range(x.size(1)):
        changed = x.clone()
        changed[:, j] += torch.randn_like(changed[:, j]) * 3
        diff = (forward(changed) - reference).abs().amax(dim=(0, 2))  # [T]
        for i in range(x.size(1)):
            if diff[i] > 1e-6:
                deps[i].add(j)
    return deps


@torch.no_grad()
@pytest.mark.parametrize(
    ("adl", "side", "low", "high"),
    [
        ("comet_conv", Side.ENCODER, -6, 6),  # receptive field 13 = 1 + 2·(1 + 2 + 3)
        ("comet_conv(norm=layer, ffn=ffn1)", Side.ENCODER, -6, 6),
        ("comet_conv([8, 4, 2, 2])", Side.ENCODER, -10, 10),
        ("comet_conv([8, 4], kernel=2)", Side.ENCODER, 0, 3),  # even kernel: taps i, i+1 then i, i+2
        ("comet_conv(norm=layer)", Side.DECODER, -12, 0),  # causal, left reach 2·(1 + 2 + 3)
        ("comet_conv([8, 4, 2], norm=none, kernel=2, ffn=ffn2)", Side.DECODER, -6, 0),
    ],
)
def test_receptive_field(adl: str, side: Side, low: int, high: int) -> None:
    torch.manual_seed(0)
    layer = unit(adl, side).eval()  # eval: batch norm uses running statistics, no mixing over the batch
    deps = dependencies(lambda h: layer(h, Context()), torch.randn(2, 30, 16))
    for i in range(30):
        assert deps[i] == set(range(max(0, i + low), min(29, i + high) + 1)), i


@torch.no_grad()
def test_feature_map_receptive_fields_are_3_7_13() -> None:
    torch.manual_seed(0)
    layer = unit("comet_conv", Side.ENCODER).eval()
    maps: list[Tensor] = []
    for norm in layer.norms:
        norm.register_forward_hook(lambda module, args, out: maps.append(out))
    x = torch.randn(1, 30, 16)

    def feature(n: int):
        def forward(h: Tensor) -> Tensor:
            maps.clear()
            layer(h, Context())
            return maps[n]

        return forward

    for n, reach in enumerate((1, 3, 6)):  # widths 3, 7, 13
        assert dependencies(feature(n), x)[15] == set(range(15 - reach, 15 + reach + 1))


def test_batch_norm_statistics_ignore_padding() -> None:
    torch.manual_seed(0)
    layer = unit("comet_conv([8, 4])", Side.ENCODER).train()
    captured: list[Tensor] = []
    layer.norms[0].register_forward_hook(lambda module, args, out: captured.append(out))
    mask = lengths_mask([7, 3, 5], 7)
    x = torch.randn(3, 7, 16) + 2
    layer(x, Context(mask=mask))
    maps = captured[0].detach()  # F_1 [B, T, 8], gain 1 and bias 0 at initialisation
    real = maps[mask]
    assert torch.allclose(real.mean(0), torch.zeros(8), atol=1e-5)
    assert torch.allclose(real.var(0, unbiased=False), torch.ones(8), atol=1e-3)
    assert maps.reshape(-1, 8).mean(0).abs().max() > 1e-2  # padding positions differ: they were left out
    norm = layer.norms[0]
    assert norm.running_mean.abs().max() > 0  # the running averages were updated from real positions


@torch.no_grad()
def test_decoder_state_keeps_one_window_per_conv() -> None:
    layer = unit("comet_conv([8, 4, 2], kernel=3, norm=layer)", Side.DECODER).eval()
    state = DecoderState(5)
    ctx = Context(state=state)
    layer.init_state(ctx)
    shapes = [tuple(state.get(layer, f"window{i}").shape) for i in range(3)]
    assert shapes == [(5, 2, 16), (5, 4, 8), (5, 6, 4)]  # (k−1)·l previous inputs of each conv's input
    x = torch.randn(5, 1, 16)
    layer.step(x, ctx)
    assert torch.equal(state.get(layer, "window0")[:, -1], x[:, 0])
    assert torch.equal(state.get(layer, "window0")[:, 0], torch.zeros(5, 16))


def test_layer_norm_choice_builds_layer_norms() -> None:
    assert all(isinstance(n, nn.LayerNorm) for n in unit("comet_conv(norm=layer)", Side.DECODER).norms)
    assert all(isinstance(n, nn.Identity) for n in unit("comet_conv(norm=none)", Side.ENCODER).norms)
