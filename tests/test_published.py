"""The 29 published strings of the ADL paper's code: parse, build, and honour the layer contract."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adlnmt.adl.parser import parse
from adlnmt.adl.registry import Side
from adlnmt.adl.syntax import to_text
from adlnmt.layers.attention import MhDotSelfAtt, MhDotSrcAtt
from adlnmt.layers.basic import Dropout
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.published import DECODERS, ENCODERS, as_run
from layer_contract import check_contract

SIZES = {"FF_NUM_HIDDEN": "64", "NUM_HIDDEN": "16"}


def test_there_are_29_published_strings() -> None:
    assert len(ENCODERS) == 11 and len(DECODERS) == 18


@pytest.mark.parametrize("name", list(ENCODERS))
def test_encoder_builds_in_a_model_and_honours_the_contract(name: str) -> None:
    Seq2Seq(ModelConfig(ENCODERS[name], DECODERS["D1"], 50, 50, d_model=16, heads=4, variables=SIZES))
    check_contract(ENCODERS[name], Side.ENCODER)


@pytest.mark.parametrize("name", list(DECODERS))
def test_decoder_builds_in_a_model_and_honours_the_contract(name: str) -> None:
    Seq2Seq(ModelConfig(ENCODERS["E1"], DECODERS[name], 50, 50, d_model=16, heads=4, variables=SIZES))
    check_contract(DECODERS[name], Side.DECODER)


def test_as_run_writes_out_the_dropout_the_acl18_code_added() -> None:
    assert as_run(ENCODERS["E1"]) == (
        "pos -> repeat(6, res(norm -> mh_dot_self_att(att_dropout=$DROPOUT) -> dropout) -> "
        "res(norm -> ff($FF_NUM_HIDDEN) -> linear -> dropout)) -> norm"
    )
    assert as_run(ENCODERS["E6"]) == "pos -> repeat(6, res(cnn -> dropout))"  # a bare layer as the argument
    assert as_run(DECODERS["D9"]) == (
        "pos -> repeat(6, res(cnn -> dropout -> res(mh_dot_att(heads=1, att_dropout=$DROPOUT) -> dropout)))"
    )
    assert as_run(ENCODERS["E4"]) == to_text(parse(ENCODERS["E4"]))  # rnn and birnn: their dropout is written


def test_dropout_defaults_to_the_models_rate() -> None:
    config = ModelConfig(as_run(ENCODERS["E1"]), as_run(DECODERS["D1"]), 50, 50, d_model=16, heads=4, dropout=0.3)
    model = Seq2Seq(replace(config, variables=SIZES))
    assert "res(norm -> mh_dot_self_att(att_dropout=0.3) -> dropout)" in model.canonical_encoder
    attentions = [m for m in model.modules() if isinstance(m, MhDotSelfAtt | MhDotSrcAtt)]
    assert len(attentions) == 18 and {m.att_dropout for m in attentions} == {0.3}
    assert {m.dropout.p for m in model.modules() if isinstance(m, Dropout)} == {0.3}


@pytest.mark.parametrize("name", list(ENCODERS) + list(DECODERS))
def test_as_run_strings_honour_the_contract(name: str) -> None:
    side = Side.ENCODER if name.startswith("E") else Side.DECODER
    check_contract(as_run({**ENCODERS, **DECODERS}[name]), side, variables={"DROPOUT": "0.1"})
