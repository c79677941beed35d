"""CTranslate2 export (PyTorch): models whose ADL is a Transformer, built with CTranslate2's specification API.

What CTranslate2's ``TransformerSpec`` expresses, per side: ``pos`` or ``learn_pos`` (√d-scaled embeddings plus a
position table, which is stored explicitly), one top-level ``repeat`` of a block, and a final ``norm``. Blocks:

- pre-norm: ``res_nd(mh_dot_self_att) [-> res_nd(mh_dot_src_att)] -> res_nd(ffl)`` (the final norm required);
- post-norm: ``res(mh_dot_self_att) -> norm [-> res(mh_dot_src_att) -> norm] -> res(ffl) -> norm`` (``res_d``
  too; no final norm);

with one head count per side, the default scale 1/√(d/h), ``source=top``, ``ffl(act=relu|gelu)``, any FFN width,
tied or untied embeddings, and no input feeding. Anything else is refused, naming the first layer that breaks
the pattern. The weights are set from the model's parameters (fused q/k/v and k/v projections map directly).
The engine that runs the export is :mod:`adlnmt.inference.ctranslate2_engine` (no PyTorch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from adlnmt.data.vocab import BOS, EOS, UNK
from adlnmt.errors import UserError
from adlnmt.export.directory import Source
from adlnmt.layers.base import Layer
from adlnmt.layers.basic import ACTIVATIONS
from adlnmt.model import Seq2Seq

MODEL_DIR = "ctranslate2"
POSITIONS = ("pos", "learn_pos")
RESIDUALS = {"res_nd": True, "res": False, "res_d": False}  # wrapper → pre-norm
ACTIVATION_NAMES = {"relu": "RELU", "gelu": "GELU"}  # ffl's act → ctranslate2.specs.Activation
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


def refuse(side: str, layer: Layer, expected: str) -> UserError:
    return UserError(f"CTranslate2's Transformer cannot express {side} layer '{layer.label or name_of(layer)}' "
                     f"(expected {expected}); use --format onnx")  # fmt: skip


def children(layer: Layer) -> list[Layer]:
    return list(layer.sublayers())


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
            raise refuse(side, repeat, f"{wanted}({expected}) at the end of its block")
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
            raise refuse(side, layer, "ffl with act=relu or act=gelu")
    return heads


def activation(ffl: Layer) -> str:
    return next((name for name, function in ACTIVATIONS.items() if function is ffl.net.act), "?")


def match_model(model: Seq2Seq) -> tuple[SideShape, SideShape]:
    """Both sides matched, or the UserError naming the first layer CTranslate2 cannot express."""
    if model.config.input_feeding:
        raise UserError("CTranslate2's Transformer cannot express input feeding; use --format onnx")
    return match_side("encoder", model.encoder), match_side("decoder", model.decoder)


def unsupported_layer(model: Seq2Seq) -> str | None:
    """Why ``model`` cannot be exported to CTranslate2 (the refusal message), or None."""
    try:
        match_model(model)
    except UserError as err:
        return str(err)
    return None


def set_linear(spec: Any, linear: nn.Linear) -> None:
    spec.weight = linear.weight.detach().numpy().copy()
    if linear.bias is not None:
        spec.bias = linear.bias.detach().numpy().copy()


def set_norm(spec: Any, norm: nn.LayerNorm) -> None:
    spec.gamma = norm.weight.detach().numpy().copy()
    spec.beta = norm.bias.detach().numpy().copy()


def set_sublayer(spec: Any, sublayer: Sublayer) -> None:
    """Weights of one attention or FFN sublayer (CTranslate2 fuses q/k/v and k/v as the model does)."""
    layer = sublayer.layer
    set_norm(spec.layer_norm, sublayer.norm)
    projections = {"mh_dot_self_att": ("qkv", "out"), "mh_dot_src_att": ("query", "kv", "out")}
    if name_of(layer) == "ffl":
        set_linear(spec.linear_0, layer.net.up)
        set_linear(spec.linear_1, layer.net.down)
        return
    for linear_spec, name in zip(spec.linear, projections[name_of(layer)], strict=True):
        set_linear(linear_spec, getattr(layer, name))


def set_side(spec: Any, shape: SideShape, max_positions: int) -> None:
    """Positions, blocks and final norm of one side."""
    table = shape.position.embedding(0, max_positions, torch.device("cpu"))  # type: ignore[operator]
    spec.position_encodings.encodings = table.detach().float().numpy().copy()
    if shape.final_norm is not None:
        set_norm(spec.layer_norm, shape.final_norm)
    for layer_spec, block in zip(spec.layer, shape.blocks, strict=True):
        parts = [layer_spec.self_attention, *([layer_spec.attention] if hasattr(layer_spec, "attention") else [])]
        for part, sublayer in zip([*parts, layer_spec.ffn], block, strict=True):
            set_sublayer(part, sublayer)


def side_options(shape: SideShape) -> dict[str, Any]:
    import ctranslate2.specs as specs

    ffl = shape.blocks[0][-1].layer
    return {
        "num_layers": len(shape.blocks),
        "num_heads": shape.heads,
        "pre_norm": shape.pre_norm,
        "no_final_norm": shape.final_norm is None,
        "activation": getattr(specs.Activation, ACTIVATION_NAMES[activation(ffl)]),
    }


def positions_of(model: Seq2Seq, shapes: Sequence[SideShape]) -> int:
    """Positions the tables cover: max_len, or the smallest learned table."""
    tables = [getattr(shape.position, "table", None) for shape in shapes]
    return min([model.config.max_len, *(int(table.size(0)) for table in tables if table is not None)])


@torch.no_grad()
def build_spec(source: Source) -> tuple[Any, int]:
    """The TransformerSpec of ``source``'s model with its weights and vocabularies, and the positions covered."""
    import ctranslate2.specs as specs

    model = source.model.eval()
    encoder, decoder = match_model(model)
    max_positions = positions_of(model, (encoder, decoder))
    encoder_spec = specs.TransformerEncoderSpec(**side_options(encoder))
    decoder_spec = specs.TransformerDecoderSpec(**side_options(decoder))
    encoder_spec.embeddings[0].weight = model.src_embed.weight.detach().numpy().copy()
    decoder_spec.embeddings.weight = model.tgt_embed.weight.detach().numpy().copy()
    set_linear(decoder_spec.projection, model.output)
    set_side(encoder_spec, encoder, max_positions)
    set_side(decoder_spec, decoder, max_positions)
    spec = specs.TransformerSpec(encoder_spec, decoder_spec)
    for vocab, register in ((source.data.src_vocab, spec.register_source_vocabulary),
                            (source.data.tgt_vocab, spec.register_target_vocabulary)):  # fmt: skip
        register([vocab.piece(i) for i in range(vocab.size)])
    tgt = source.data.tgt_vocab
    spec.config.unk_token, spec.config.bos_token = tgt.piece(UNK), tgt.piece(BOS)
    spec.config.eos_token, spec.config.decoder_start_token = tgt.piece(EOS), tgt.piece(BOS)
    return spec, max_positions


def export_ctranslate2(source: Source, out: Path, quantize: str) -> dict[str, Any]:
    """Write the CTranslate2 model to ``out/ctranslate2``; returns the manifest's ``ctranslate2`` section."""
    import ctranslate2

    spec, max_positions = build_spec(source)
    spec.validate()
    spec.optimize(quantization="int8" if quantize == "int8" else "float32")
    (out / MODEL_DIR).mkdir(parents=True, exist_ok=True)
    spec.save(str(out / MODEL_DIR))
    return {"model": MODEL_DIR, "ctranslate2_version": ctranslate2.__version__, "max_positions": max_positions,
            "compute_type": "int8" if quantize == "int8" else "float32"}  # fmt: skip
