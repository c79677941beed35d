"""Which models CTranslate2's Transformer expresses: a model's ADL matched, side by side, to the shape of
``ctranslate2.specs.TransformerSpec`` (the pattern is described in :mod:`adlnmt.export.ctranslate2_spec`, which
builds the spec from the match). Here because it is what the ctranslate2 engine can run: ``--engine auto`` reads it
(:func:`adlnmt.inference.engines.auto_note`) without importing the exporter. A refusal names the first layer that
breaks the pattern (inside a ``repeat`` or a chain, the first layer of it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn

from adlnmt.errors import UserError
from adlnmt.layers.base import Layer
from adlnmt.layers.basic import ACTIVATIONS
from adlnmt.model import Seq2Seq

POSITIONS = ("pos", "learn_pos")
RESIDUALS = {"res_nd": True, "res": False, "res_d": False}  # wrapper → pre-norm
ACTIVATION_NAMES = {"relu": "RELU", "gelu": "GELU", "swish": "SWISH"}  # ffl's act → ctranslate2.specs.Activation
SUBLAYERS = {  # per side: the sublayers of a block, in order
    "encoder": ("mh_dot_self_att", "ffl"),
    "decoder": ("mh_dot_self_att", "mh_dot_src_att", "ffl"),
}


@dataclass
class Sublayer:
    """One residual sublayer of a block: its layer and the layer norm that belongs to it."""

    layer: Layer
    norm: nn.LayerNorm


@dataclass
class SideShape:
    """A side matched to CTranslate2's Transformer: position layer, blocks, final norm."""

    position: Layer
    blocks: list[list[Sublayer]]
    pre_norm: bool
    final_norm: nn.LayerNorm | None
    heads: int


def name_of(layer: Layer) -> str:
    return layer.spec.name if layer.spec is not None else type(layer).__name__


def children(layer: Layer) -> list[Layer]:
    return list(layer.sublayers())


def first_layer(layer: Layer) -> Layer:
    """``layer``, or for a ``repeat`` or a chain the first layer inside it (what a refusal names)."""
    while (name_of(layer) == "repeat" or layer.spec is None) and children(layer):
        layer = children(layer)[0]
    return layer


def refuse(side: str, layer: Layer, expected: str) -> UserError:
    named = first_layer(layer)
    return UserError(f"CTranslate2's Transformer cannot express {side} layer '{named.label or name_of(named)}' "
                     f"(expected {expected})")  # fmt: skip


def residual_inner(wrapper: Layer) -> Layer | None:
    """The single layer inside a residual wrapper, or None."""
    if name_of(wrapper) not in RESIDUALS:
        return None
    inner = children(children(wrapper)[0])
    return inner[0] if len(inner) == 1 else None


def match_block(side: str, repeat: Layer, copy: Layer, pre_norm: bool) -> list[Sublayer]:
    """The sublayers of one block (a repeat copy), or a UserError naming the first layer out of pattern."""
    layers = children(copy)
    wanted = "res_nd" if pre_norm else "res"
    sublayers: list[Sublayer] = []
    position = 0
    for expected in SUBLAYERS[side]:
        if position >= len(layers):
            raise refuse(side, layers[-1] if layers else repeat, f"{wanted}({expected}) after it")
        wrapper = layers[position]
        inner = residual_inner(wrapper)
        if RESIDUALS.get(name_of(wrapper)) is not pre_norm or inner is None:
            raise refuse(side, wrapper, f"{wanted}({expected})")
        if name_of(inner) != expected:
            raise refuse(side, inner, f"{wanted}({expected})")
        norm = getattr(wrapper, "norm", None)
        if not pre_norm:
            follower = layers[position + 1] if position + 1 < len(layers) else wrapper
            if name_of(follower) != "norm":
                raise refuse(side, follower, f"norm after {wrapper.label}")
            norm, position = follower.norm, position + 1
        assert isinstance(norm, nn.LayerNorm)
        sublayers.append(Sublayer(inner, norm))
        position += 1
    if position < len(layers):
        raise refuse(side, layers[position], "the end of the block")
    return sublayers


def match_side(side: str, chain: Layer) -> SideShape:
    """Position layer, one repeat of Transformer blocks, final norm (pre-norm only)."""
    layers = children(chain)
    if not layers or name_of(layers[0]) not in POSITIONS:
        raise refuse(side, layers[0] if layers else chain, "pos or learn_pos first")
    if len(layers) < 2 or name_of(layers[1]) != "repeat":
        raise refuse(side, layers[1] if len(layers) > 1 else layers[0], "repeat(n, block) after the positions")
    repeat, rest = layers[1], layers[2:]
    copies = children(repeat)
    first = children(copies[0])
    pre_norm = bool(first) and name_of(first[0]) == "res_nd"
    blocks = [match_block(side, repeat, copy, pre_norm) for copy in copies]
    final = None
    if pre_norm and rest and name_of(rest[0]) == "norm":
        final, rest = rest[0].norm, rest[1:]
    if rest:
        raise refuse(side, rest[0], "the end of the side" + (" (or one final norm)" if pre_norm else ""))
    return SideShape(layers[0], blocks, pre_norm, final, check_attention(side, blocks))


def check_attention(side: str, blocks: list[list[Sublayer]]) -> int:
    """The side's one head count; refuses other scales, per-layer head counts and source≠top."""
    attentions = [sub.layer for block in blocks for sub in block if name_of(sub.layer) != "ffl"]
    heads = attentions[0].heads
    for layer in attentions:
        width = layer.out_dim
        default_scale = 1.0 / math.sqrt(width // layer.heads)
        if layer.heads != heads or not math.isclose(layer.scale, default_scale) or getattr(layer, "block", None):
            raise refuse(side, layer, f"{heads} heads, the default scale and source=top on every attention")
    for layer in (sub.layer for block in blocks for sub in block if name_of(sub.layer) == "ffl"):
        if activation(layer) not in ACTIVATION_NAMES:
            raise refuse(side, layer, "ffl with act=relu, gelu or swish")
    return heads


def activation(ffl: Layer) -> str:
    return next((name for name, function in ACTIVATIONS.items() if function is ffl.net.act), "?")


def match_model(model: Seq2Seq) -> tuple[SideShape, SideShape]:
    """Both sides matched, or the UserError naming the first layer CTranslate2 cannot express."""
    if model.config.input_feeding:
        raise UserError("CTranslate2's Transformer cannot express input feeding")
    return match_side("encoder", model.encoder), match_side("decoder", model.decoder)


def unsupported_layer(model: Seq2Seq) -> str | None:
    """Why the ctranslate2 engine cannot run ``model`` (the refusal message), or None."""
    try:
        match_model(model)
    except UserError as err:
        return str(err)
    return None
