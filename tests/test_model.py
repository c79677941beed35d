"""Seq2Seq: teacher-forced logits equal incremental decoding; model-level checks and options."""

from __future__ import annotations

import pytest
import torch

from adlnmt.adl.errors import ADLError
from adlnmt.errors import UserError
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.published import DECODERS, ENCODERS

SIZES = {"FF_NUM_HIDDEN": "64", "NUM_HIDDEN": "16"}
RNMT_ENCODER = "dropout -> birnn -> repeat(1, res_d(rnn))"
RNMT_DECODER = "dropout -> rnn -> repeat(1, res_d(rnn)) -> concat(id, mlp_att) -> ff"

MODELS = {
    "transformer": (ENCODERS["E1"], DECODERS["D1"], False),
    "rnn": (ENCODERS["E5"], DECODERS["D8"], False),
    "cnn": (ENCODERS["E11"], DECODERS["D16"], False),
    "aan": (
        ENCODERS["E1"],
        "pos -> repeat(2, res(aan) -> norm -> res(mh_dot_src_att) -> norm -> res(ffl) -> norm)",
        False,
    ),
    "none": (ENCODERS["E1"], DECODERS["D18"], False),
    "comet": (
        "pos -> repeat(2, res(mh_dot_self_att) -> norm -> res(comet_conv(features=[8, 4, 2])) -> norm)",
        "pos -> repeat(2, res(comet_conv(features=[8, 4, 2], norm=layer)) -> res_nd(mh_dot_src_att))",
        False,
    ),
    "rnmt-input-feeding": (RNMT_ENCODER, RNMT_DECODER, True),
    "rnmt": (RNMT_ENCODER, RNMT_DECODER, False),
}


def model(encoder: str, decoder: str, input_feeding: bool = False, **kwargs) -> Seq2Seq:
    torch.manual_seed(0)
    config = ModelConfig(
        encoder, decoder, 30, 40, d_model=16, heads=4, variables=SIZES, input_feeding=input_feeding, **kwargs
    )
    return Seq2Seq(config)


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 9, 3], [4, 5, 6, 0, 0, 0], [9, 8, 7, 6, 0, 0]])  # 0 = pad
    tgt = torch.tensor([[1, 11, 12, 13, 14, 15, 16], [1, 17, 18, 19, 20, 21, 22], [1, 3, 5, 7, 9, 11, 13]])
    return src, tgt


@pytest.mark.parametrize("name", list(MODELS))
@torch.no_grad()
def test_incremental_decoding_equals_teacher_forcing(name: str) -> None:
    encoder, decoder, feeding = MODELS[name]
    m = model(encoder, decoder, feeding).eval()
    src, tgt = batch()
    full = m(src, tgt)  # [B, T, V]
    memory = m.encode(src)
    state = m.init_state(memory)
    steps = torch.stack([m.decode_step(tgt[:, t], memory, state) for t in range(tgt.size(1))], dim=1)
    assert steps.shape == full.shape == (3, 7, 40)
    assert torch.allclose(steps, full, atol=1e-5), (steps - full).abs().max()


@pytest.mark.parametrize("name", ["transformer", "rnn", "rnmt-input-feeding"])
@torch.no_grad()
def test_source_padding_does_not_change_the_output(name: str) -> None:
    encoder, decoder, feeding = MODELS[name]
    m = model(encoder, decoder, feeding).eval()
    src, tgt = batch()
    wider = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    assert torch.allclose(m(src, tgt), m(wider, tgt), atol=1e-5)


def test_training_step_reaches_every_parameter() -> None:
    m = model(*MODELS["rnmt-input-feeding"][:2], input_feeding=True).train()
    src, tgt = batch()
    logits = m(src, tgt[:, :-1])
    torch.nn.functional.cross_entropy(logits.reshape(-1, 40), tgt[:, 1:].reshape(-1)).backward()
    missing = [n for n, p in m.named_parameters() if p.grad is None and not n.endswith("weight_hh_l0_reverse")]
    assert not missing


def test_decoder_without_source_attention_is_rejected() -> None:
    with pytest.raises(ADLError, match="no source attention"):
        model(ENCODERS["E1"], "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm")


def test_increasing_source_attention_reads_matching_blocks() -> None:
    m = model(
        "pos -> repeat(3, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm",
        "pos -> repeat(3, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att(source=increasing)) -> res_nd(ffl)) -> norm",
    )
    assert m.encoder.blocks.widths == [16, 16, 16]
    with pytest.raises(ADLError, match="3"):
        model(
            "pos -> repeat(3, res_nd(ffl)) -> norm",
            "pos -> repeat(2, res_nd(mh_dot_src_att(source=decreasing))) -> norm",
        )


def test_tying() -> None:
    m = model(*MODELS["transformer"][:2], tie_output=True)
    assert m.output.weight is m.tgt_embed.weight
    with pytest.raises(ADLError, match="joint vocabulary"):
        model(*MODELS["transformer"][:2], tie_source=True)  # 30 vs 40 words
    with pytest.raises(ADLError, match="decoder width"):
        model(ENCODERS["E1"], "res(mh_dot_src_att) -> linear(8)", tie_output=True)


def test_canonical_forms_are_stored() -> None:
    m = model(ENCODERS["E9"], DECODERS["D2"])
    assert m.canonical_encoder == "pos -> repeat(6, res(cnn(d=16, kernel=3, act=relu)))"
    assert m.canonical_decoder.startswith("dropout -> repeat(6, res(rnn -> dropout)) -> res(mh_dot_src_att(heads=1))")


def test_fairseq_init_is_fairseqs_attention_init() -> None:
    """init=fairseq: attention projections Xavier-uniform (each fused q/k/v part on its own with gain 1/√2, the
    output projection with gain 1 and a zero bias), as fairseq 0.12's MultiheadAttention; the FFN and the q/k/v
    biases keep PyTorch's nn.Linear init, as in fairseq; the output bias starts at zero (fairseq has none)."""
    encoder = "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
    d, ff = 16, 64
    m = model(encoder, MODELS["transformer"][1], init="fairseq")
    self_att = next(layer for layer in m.encoder.modules() if type(layer).__name__ == "MhDotSelfAtt")
    src_att = next(layer for layer in m.decoder.modules() if type(layer).__name__ == "MhDotSrcAtt")
    ffn = next(layer for layer in m.encoder.modules() if type(layer).__name__ == "FeedForward")
    qkv_bound, out_bound = 2**-0.5 * (6 / (d + d)) ** 0.5, (6 / (d + d)) ** 0.5
    for weight, bound in (
        *((part, qkv_bound) for part in self_att.qkv.weight.detach().chunk(3)),
        *((part, qkv_bound) for part in src_att.kv.weight.detach().chunk(2)),
        (src_att.query.weight, qkv_bound),
        (self_att.out.weight, out_bound),
        (src_att.out.weight, out_bound),
        (ffn.down.weight, ff**-0.5),  # nn.Linear: uniform ±1/√fan_in
    ):
        assert 0.9 * bound < weight.abs().max() <= bound
    assert self_att.out.bias.eq(0).all() and src_att.out.bias.eq(0).all() and m.output.bias.eq(0).all()
    assert not self_att.qkv.bias.eq(0).any() and not ffn.down.bias.eq(0).any()
    default = model(encoder, MODELS["transformer"][1])
    assert default.encoder.state_dict().keys() == m.encoder.state_dict().keys()
    default_att = next(layer for layer in default.encoder.modules() if type(layer).__name__ == "MhDotSelfAtt")
    assert not default.output.bias.eq(0).any() and not default_att.out.bias.eq(0).any()
    with pytest.raises(UserError, match="unknown init"):
        model(encoder, MODELS["transformer"][1], init="he")
