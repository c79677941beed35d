"""Every architecture of the papers adlnmt implements as a named preset, with the table/row it reproduces.

A preset is an encoder ADL, a decoder ADL and model options at the paper's default size (``d_model``,
``heads``, ``d_ff``, input feeding ...); command-line flags override the options. Rows of the ADL paper
use the published strings of its code (``adlnmt.published``) with the dropout that code gave its layers written
out (``as_run``); several rows share one architecture
(e.g. Table 3 "+ ff" is Table 5 "RNN/RNN"), which is then one preset with aliases.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from adlnmt.errors import UserError
from adlnmt.published import DECODERS, ENCODERS, as_run


@dataclass(frozen=True)
class Preset:
    name: str
    encoder: str
    decoder: str
    source: str  # the paper (``cite``) and its table/row
    description: str
    family: str  # transformer | rnn | cnn | comet | aan | mixed
    options: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields at the paper's size
    aliases: tuple[str, ...] = ()
    data: str = ""  # what `adlnmt prepare` needs for this preset, if anything


PAPERS: dict[str, str] = {
    "adl": "ADL (Domhan 2018)",  # How Much Attention Do You Need? A Granular Analysis of NMT Architectures
    "comet": "COMET (Wang)",  # Improved Transformer Architecture for Sequence to Sequence Translation
    "aan": "AAN (Zhang et al. 2018)",  # Accelerating Neural Transformer via an Average Attention Network
    "notes": "NMT lecture notes",  # 9 Neural MT 3: Other Non-RNN Architectures
    "deep-shallow": "Deep encoder, shallow decoder (Kasai et al. 2021)",  # ICLR 2021, 12-1 students
    "ssru": "SSRU students (Kim et al. 2019)",  # From Research to Production and Back: Ludicrously Fast NMT
}


def cite(paper: str, where: str) -> str:
    """Citation of a place in a paper by its key in ``PAPERS``, e.g. ``cite("aan", "Table 2")``."""
    return f"{PAPERS[paper]} {where}"


ADL_SIZE = {"d_model": 512, "heads": 8, "d_ff": 2048}  # the ADL paper's base size (FF_NUM_HIDDEN = 2048)
COMET_SIZE = {"d_model": 256, "heads": 8, "d_ff": 2048}  # COMET §3: N = 3, d_m = 256, 8 heads, d_ff = 2048
AAN_SIZE = {"d_model": 512, "heads": 8, "d_ff": 2048}  # AAN §5: the Transformer base

# §2.4: t_enc = res_nd(mh_dot_self_att) -> res_nd(ffl); t_dec adds res_nd(mh_dot_src_att).
PRENORM_ENCODER = "pos -> repeat({n}, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
PRENORM_DECODER = "pos -> repeat({n}, res_nd({x}) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
# The original residual structure: x' = norm(x + dropout(sublayer(x))) (Vaswani; AAN §4; COMET §3.4).
POSTNORM_ENCODER = "pos -> repeat({n}, res_d(mh_dot_self_att) -> norm -> res_d({ff}) -> norm)"
POSTNORM_DECODER = "pos -> repeat({n}, res_d({x}) -> norm -> res_d(mh_dot_src_att) -> norm -> res_d({ff}) -> norm)"
RNMT_ENCODER = "dropout -> birnn -> repeat(5, res_d(rnn))"
# With input feeding the first RNN reads [z_(t-1); E y_t] (2d wide), so it cannot be residual.
RNMT_DECODER = "dropout -> rnn -> repeat(5, res_d(rnn)) -> concat(id, mlp_att) -> ff"
COMET_ENCODER = "pos -> repeat(3, res_d(mh_dot_self_att) -> norm -> res(comet_conv{args}) -> norm)"
COMET_FF = "ffl"  # hidden width d_ff (2048 = 8 · d_m at the default size)
COMET_DECODER = POSTNORM_DECODER.format(n=3, x="mh_dot_self_att", ff=COMET_FF)


def _paper_row(
    name: str, enc: str, dec: str, row: str, description: str, family: str, aliases: tuple[str, ...] = ()
) -> Preset:
    source = cite("adl", f"{row} ({enc}/{dec})")
    return Preset(name, as_run(ENCODERS[enc]), as_run(DECODERS[dec]), source, description, family, ADL_SIZE, aliases)


def _comet(name: str, conv_args: str, row: str, description: str, decoder: str = "", data: str = "") -> Preset:
    encoder, source = COMET_ENCODER.format(args=conv_args), cite("comet", row)
    return Preset(name, encoder, decoder or COMET_DECODER, source, description, "comet", COMET_SIZE, data=data)


# AAN §5.1: "attention dropout and residual dropout with a rate of p = 0.1" (the residual dropout is res_d's).
AAN_ATT = "(att_dropout=$DROPOUT)"
AAN_ENCODER = POSTNORM_ENCODER.format(n=6, ff="ffl").replace("mh_dot_self_att", "mh_dot_self_att" + AAN_ATT)


def _aan_decoder(self_attention: str) -> str:
    """The AAN paper's post-norm decoder with ``self_attention`` in its first sub-layer, attention dropout on."""
    decoder = POSTNORM_DECODER.format(n=6, x=self_attention, ff="ffl")
    return decoder.replace("mh_dot_src_att", "mh_dot_src_att" + AAN_ATT)


def _aan(name: str, aan: str, row: str, description: str) -> Preset:
    return Preset(name, AAN_ENCODER, _aan_decoder(aan), cite("aan", row), description, "aan", AAN_SIZE)


# Students with a deep encoder and a shallow decoder (Kasai et al. 2021: 12-1 and 6-1 Transformers; Kim et al. 2019:
# SSRU decoders of one or two layers), in the AAN paper's post-norm blocks at its size, so that they sit beside its
# Table 2 Transformer (the teacher of experiments/efficiency.yaml): (encoder, decoder) depths × decoder unit.
STUDENT_DEPTHS = ((12, 1), (10, 2), (6, 1))
STUDENT_DECODERS = {  # name → the decoder's first sub-layer, where the Transformer has self-attention
    "self-att": ("mh_dot_self_att" + AAN_ATT, "transformer", "self-attention"),
    "aan": ("aan", "aan", "average attention network"),
    "ssru": ("ssru", "mixed", "SSRU"),
    "rnn": ("rnn", "mixed", "LSTM"),
}


def _student(encoder_depth: int, decoder_depth: int, unit: str) -> Preset:
    first, family, what = STUDENT_DECODERS[unit]
    decoder = POSTNORM_DECODER.format(n=decoder_depth, x=first, ff="ffl").replace(
        "mh_dot_src_att", "mh_dot_src_att" + AAN_ATT
    )
    depths = f"{encoder_depth}-{decoder_depth}"
    source = cite("ssru", "SSRU decoder") if unit == "ssru" else cite("deep-shallow", depths)
    return Preset(
        f"student-{depths}-{unit}",
        POSTNORM_ENCODER.format(n=encoder_depth, ff="ffl").replace("mh_dot_self_att", "mh_dot_self_att" + AAN_ATT),
        decoder,
        source,
        f"{encoder_depth}-layer encoder, {decoder_depth}-layer {what} decoder (post-norm, AAN Table 2 blocks)",
        family,
        AAN_SIZE,
    )


def _source_variant(mode: str) -> str:
    return as_run(DECODERS["D1"].replace("mh_dot_att", f"mh_dot_att(source={mode})"))


# fmt: off
_PRESETS = [
    # --- ADL paper §2.4: standard architectures -------------------------------------------------
    Preset(
        "rnmt",
        RNMT_ENCODER,
        RNMT_DECODER,
        cite("adl", "§2.4; Table 3 RNMT"),
        "bi-RNN + residual RNN encoder, Luong decoder concat(id, mlp_att) -> ff, input feeding",
        "rnn",
        {**ADL_SIZE, "input_feeding": True},
        ("t3-rnmt",),
    ),
    Preset(
        "rnmt-no-input-feeding",
        RNMT_ENCODER,
        RNMT_DECODER,
        cite("adl", "§2.4; Table 3 RNMT - input feeding"),
        "RNMT without input feeding",
        "rnn",
        ADL_SIZE,
        ("t3-rnmt-no-input-feeding",),
    ),
    Preset(
        "convs2s",
        "pos -> repeat(6, res(cnn(act=glu) -> dropout))",
        "pos -> repeat(6, res(dropout -> cnn(act=glu) -> dropout -> res(dot_src_att(s=1))))",
        cite("adl", "§2.4 ConvS2S"),
        "GLU convolutions, unscaled single-head dot source attention per block",
        "cnn",
        ADL_SIZE,
    ),
    Preset(
        "transformer",
        PRENORM_ENCODER.format(n=6),
        PRENORM_DECODER.format(n=6, x="mh_dot_self_att"),
        cite("adl", "§2.4 Transformer"),
        "pre-norm residual blocks (tensor2tensor)",
        "transformer",
        ADL_SIZE,
    ),
    Preset(
        "transformer-postnorm",
        AAN_ENCODER,
        _aan_decoder("mh_dot_self_att" + AAN_ATT),
        cite("aan", "Table 2 Transformer") + "; " + cite("adl", "§2.4"),
        "original post-norm residual structure (the AAN paper's baseline)",
        "transformer",
        AAN_SIZE,
    ),
    Preset(
        "transformer-small",
        PRENORM_ENCODER.format(n=3),
        PRENORM_DECODER.format(n=3, x="mh_dot_self_att"),
        "benchmark model",
        "3+3-layer pre-norm Transformer (Multi30k benchmark size)",
        "transformer",
        {"d_model": 256, "heads": 4, "d_ff": 1024},
    ),
    # --- ADL paper Table 2: which encoder block the source attention reads ------------------------
    _paper_row(
        "transformer-acl18",
        "E1",
        "D1",
        "Tables 2 upper, 3 Transformer, 5 self-att/self-att",
        "the acl18 code's Transformer (pre-norm; its layers' dropout written out, see adlnmt.published)",
        "transformer",
        ("t2-upper", "t3-transformer", "t5-self-att-self-att"),
    ),
    Preset(
        "t2-increasing",
        as_run(ENCODERS["E1"]),
        _source_variant("increasing"),
        cite("adl", "Table 2 increasing (E1/D1)"),
        "decoder block i attends to encoder block i",
        "transformer",
        ADL_SIZE,
    ),
    Preset(
        "t2-decreasing",
        as_run(ENCODERS["E1"]),
        _source_variant("decreasing"),
        cite("adl", "Table 2 decreasing (E1/D1)"),
        "decoder block i attends to encoder block n-1-i",
        "transformer",
        ADL_SIZE,
    ),
    # --- ADL paper Table 3: RNN -> Transformer ----------------------------------------------------
    _paper_row("t3-rnn", "E2", "D2", "Table 3 RNN", "residual RNNs, one single-head dot attention", "rnn"),
    _paper_row("t3-mh", "E2", "D3", "Table 3 + mh", "+ multi-head attention", "rnn"),
    _paper_row("t3-pos", "E3", "D4", "Table 3 + pos", "+ positional embeddings", "rnn"),
    _paper_row("t3-norm", "E4", "D5", "Table 3 + norm", "+ layer norm on residual inputs", "rnn"),
    _paper_row(
        "t3-multi-att-1h", "E4", "D6", "Table 3 + multi-att-1h", "+ single-head attention after every RNN", "rnn"
    ),
    _paper_row("t3-multi-att", "E4", "D7", "Table 3 / multi-att", "multi-head attention after every RNN", "rnn"),
    _paper_row(
        "t3-ff", "E5", "D8", "Tables 3 + ff, 5 RNN/RNN", "+ residual feed-forward layers", "rnn", ("t5-rnn-rnn",)
    ),
    # --- ADL paper Table 4: CNN -> Transformer ----------------------------------------------------
    _paper_row("t4-cnn-glu", "E6", "D9", "Table 4 CNN GLU", "residual GLU CNN, single-head attention", "cnn"),
    _paper_row("t4-cnn-glu-norm", "E7", "D10", "Table 4 GLU + norm", "+ layer norm", "cnn"),
    _paper_row("t4-cnn-glu-mh", "E7", "D11", "Table 4 GLU + mh", "+ multi-head attention", "cnn"),
    _paper_row("t4-cnn-glu-ff", "E8", "D12", "Table 4 GLU + ff", "+ residual feed-forward layers", "cnn"),
    _paper_row("t4-cnn-relu", "E9", "D13", "Table 4 CNN ReLU", "residual ReLU CNN, single-head attention", "cnn"),
    _paper_row("t4-cnn-relu-norm", "E10", "D14", "Table 4 ReLU + norm", "+ layer norm", "cnn"),
    _paper_row("t4-cnn-relu-mh", "E10", "D15", "Table 4 ReLU + mh", "+ multi-head attention", "cnn"),
    _paper_row(
        "t4-cnn-relu-ff",
        "E11",
        "D16",
        "Tables 4 ReLU + ff, 5 CNN/CNN",
        "+ residual feed-forward layers",
        "cnn",
        ("t5-cnn-cnn",),
    ),
    # --- ADL paper Table 5: encoder x decoder -----------------------------------------------------
    _paper_row(
        "t5-self-att-rnn", "E1", "D8", "Table 5 self-att/RNN", "self-attention encoder, RNN decoder", "mixed"
    ),
    _paper_row(
        "t5-self-att-cnn", "E1", "D16", "Table 5 self-att/CNN", "self-attention encoder, CNN decoder", "mixed"
    ),
    _paper_row(
        "t5-rnn-self-att", "E5", "D1", "Table 5 RNN/self-att", "RNN encoder, self-attention decoder", "mixed"
    ),
    _paper_row(
        "t5-cnn-self-att", "E11", "D1", "Table 5 CNN/self-att", "CNN encoder, self-attention decoder", "mixed"
    ),
    _paper_row(
        "t5-self-att-combined",
        "E1",
        "D17",
        "Table 5 self-att/combined",
        "decoder blocks of self-attention, RNN and CNN",
        "mixed",
    ),
    _paper_row(
        "t5-self-att-none",
        "E1",
        "D18",
        "Table 5 self-att/none",
        "decoder without self-attention (source attention and ff only)",
        "mixed",
    ),
    # --- COMET Table 1 -----------------------------------------------------------------------------
    _comet("comet", "", "§3, Table 1 COMET", "post-norm self-attention + gated dilated conv unit encoder, N=3"),
    _comet("comet-temporal-conv", "", "§5.2, Table 1 Temporal Convolutions",
           "decoder feed-forward replaced by a causal conv unit (layer norm: batch norm would leak the future)",
           decoder=COMET_DECODER.replace(f"res_d({COMET_FF})", "res(comet_conv(norm=layer))")),
    _comet("comet-ffn1", "(ffn=ffn1)", "§5.3, Table 1 FFN-1", "conv unit with a residual 2-layer FFN on the maps"),
    _comet("comet-ffn2", "(ffn=ffn2)", "§5.3, Table 1 FFN-2", "conv unit output through a 2-layer FFN (d_ff 1024)"),
    _comet("comet-4layer", "(features=[64, 32, 16, 8])", "§5.4, Table 1 4-Layer",
           "4 gated convolutions (F_4: 8 features, dilation 4; the paper gives no width)"),
    _comet("comet-source-markers", "", "§5.4, Table 1 Source EOS/SOS", "COMET on sources wrapped in SOS ... EOS",
           data="prepare --source-markers"),
    Preset("comet-transformer", POSTNORM_ENCODER.format(n=3, ff=COMET_FF), COMET_DECODER,
           cite("comet", "Table 1 Transformer"),
           "the COMET paper's post-norm Transformer baseline, N=3, d_m=256, d_ff=2048", "transformer", COMET_SIZE),
    # --- AAN Table 2 -------------------------------------------------------------------------------
    _aan("transformer-aan", "aan", "§4, Table 2 AAN", "post-norm Transformer, decoder self-attention → AAN"),
    _aan("transformer-aan-noffn", "aan(ffn=false)", "Table 2 AAN w/o FFN", "AAN without its feed-forward network"),
    _aan("transformer-aan-nogate", "aan(gate=false)", "Table 2 AAN w/o gate", "AAN without its input/forget gate"),
    # --- NMT lecture notes §9 ---------------------------------------------------------------------
    Preset(
        "cnn-dilated",
        "pos -> res_nd(cnn(act=relu, dilation=1)) -> res_nd(cnn(act=relu, dilation=2)) "
        "-> res_nd(cnn(act=relu, dilation=4)) -> res_nd(cnn(act=relu, dilation=8)) -> res_nd(ffl) -> norm",
        PRENORM_DECODER.format(n=6, x="mh_dot_self_att"),
        cite("notes", "§9.2 (dilated CNN encoders)"),
        "pure CNN encoder with dilations 1, 2, 4, 8 (receptive field 31), Transformer decoder",
        "cnn",
        ADL_SIZE,
    ),
]
# fmt: on
_PRESETS += [_student(e, d, unit) for e, d in STUDENT_DEPTHS for unit in STUDENT_DECODERS]
PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}
ALIASES: dict[str, str] = {alias: p.name for p in _PRESETS for alias in p.aliases}


def get_preset(name: str) -> Preset:
    """The architecture named ``name`` or one of its aliases; a UserError, with close names, for an unknown one."""
    name = ALIASES.get(name, name)
    if name not in PRESETS:
        close = difflib.get_close_matches(name, [*PRESETS, *ALIASES], n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise UserError(f"unknown preset '{name}'{hint}; `adlnmt architectures` lists them")
    return PRESETS[name]


# Groups usable wherever presets are named (``--preset @table5 @aan``).
PRESET_GROUPS: dict[str, tuple[str, ...]] = {
    # Every decoder of the ADL paper's Table 5 (encoder/decoder combinations).
    "@table5": (
        "t5-rnn-rnn",
        "t5-cnn-cnn",
        "t5-self-att-self-att",
        "t5-self-att-rnn",
        "t5-self-att-cnn",
        "t5-rnn-self-att",
        "t5-cnn-self-att",
        "t5-self-att-combined",
        "t5-self-att-none",
    ),
    # The AAN paper's decoder variants and the post-norm Transformer whose self-attention they replace.
    "@aan": ("transformer-aan", "transformer-aan-noffn", "transformer-aan-nogate", "transformer-postnorm"),
    # Deep-encoder/shallow-decoder students (depths × decoder units) and the Transformer they are compared with.
    "@students": (
        *(f"student-{e}-{d}-{unit}" for e, d in STUDENT_DEPTHS for unit in STUDENT_DECODERS),
        "transformer-postnorm",
    ),
}
