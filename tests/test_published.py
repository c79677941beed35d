"""The 29 published strings of the ADL paper's code: parse, build, and honour the layer contract."""

from __future__ import annotations

import pytest

from adlnmt.adl.registry import Side
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.published import DECODERS, ENCODERS
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
