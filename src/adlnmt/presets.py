"""Named architectures (the presets issue extends this table to every row of the seeds' tables)."""

from __future__ import annotations

from dataclasses import dataclass

from adlnmt.errors import UserError


@dataclass(frozen=True)
class Preset:
    encoder: str
    decoder: str
    source: str  # seed document and table/row
    description: str


_PRE_ENC = "pos -> repeat({n}, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
_PRE_DEC = "pos -> repeat({n}, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
_POST_ENC = "pos -> repeat({n}, res_d(mh_dot_self_att) -> norm -> res_d(ffl) -> norm)"
_POST_DEC = "pos -> repeat({n}, res_d(mh_dot_self_att) -> norm -> res_d(mh_dot_src_att) -> norm -> res_d(ffl) -> norm)"
_AAN_DEC = "pos -> repeat({n}, res_d(aan) -> norm -> res_d(mh_dot_src_att) -> norm -> res_d(ffl) -> norm)"

PRESETS: dict[str, Preset] = {
    "transformer": Preset(
        _PRE_ENC.format(n=6), _PRE_DEC.format(n=6), "000 §2.4", "Transformer, pre-norm residual blocks (tensor2tensor)"
    ),
    "transformer-small": Preset(
        _PRE_ENC.format(n=3),
        _PRE_DEC.format(n=3),
        "benchmark model",
        "3+3-layer pre-norm Transformer (Multi30k benchmark size)",
    ),
    "transformer-postnorm": Preset(
        _POST_ENC.format(n=6), _POST_DEC.format(n=6), "004 §4, 001 §3.4", "Transformer, original post-norm blocks"
    ),
    "transformer-aan": Preset(
        _POST_ENC.format(n=6), _AAN_DEC.format(n=6), "004 §4", "post-norm Transformer, decoder self-attention → AAN"
    ),
}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise UserError(f"unknown preset '{name}'; available: {', '.join(sorted(PRESETS))}")
    return PRESETS[name]
