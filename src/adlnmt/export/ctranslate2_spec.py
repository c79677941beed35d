"""CTranslate2 export (PyTorch): models whose ADL is a Transformer, built with CTranslate2's specification API.

What CTranslate2's ``TransformerSpec`` expresses, per side: ``pos`` or ``learn_pos`` (embeddings √d-scaled, unless
``pos(scale=false)``, plus a position table, which is stored explicitly, so ``pos(layout=halves)`` too), one
top-level ``repeat`` of a block, and a final ``norm``. Blocks:

- pre-norm: ``res_nd(mh_dot_self_att) [-> res_nd(mh_dot_src_att)] -> res_nd(ffl)`` (the final norm required);
- post-norm: ``res(mh_dot_self_att) -> norm [-> res(mh_dot_src_att) -> norm] -> res(ffl) -> norm`` (``res_d``
  too; no final norm);

with one head count per side, the default scale 1/√(d/h), ``source=top``, ``ffl(act=relu|gelu|swish)``, any FFN width,
tied or untied embeddings, and no input feeding. Anything else is refused, naming the first layer that breaks
the pattern (the match is :mod:`adlnmt.inference.ctranslate2_shape`: what the ctranslate2 engine runs). The weights
are set from the model's parameters (fused q/k/v and k/v projections map directly).
The engine that runs the export is :mod:`adlnmt.inference.ctranslate2_engine` (no PyTorch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from adlnmt.data.vocab import BOS, EOS, UNK
from adlnmt.errors import UserError
from adlnmt.export.directory import Source
from adlnmt.inference.ctranslate2_shape import ACTIVATION_NAMES, SideShape, Sublayer, activation, match_model, name_of

MODEL_DIR = "ctranslate2"


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


@torch.no_grad()
def build_spec(source: Source) -> Any:
    """The TransformerSpec of ``source``'s model with its weights and vocabularies, one position table per side
    (:attr:`~adlnmt.export.directory.Source.positions`)."""
    import ctranslate2.specs as specs

    model = source.model.eval()
    try:
        encoder, decoder = match_model(model)
    except UserError as refusal:
        raise UserError(f"{refusal}; export it with --format onnx instead") from None
    encoder_spec = specs.TransformerEncoderSpec(**side_options(encoder))
    decoder_spec = specs.TransformerDecoderSpec(**side_options(decoder))
    encoder_spec.scale_embeddings = encoder.position.scale != 1.0  # pos(scale=false): no √d
    decoder_spec.scale_embeddings = decoder.position.scale != 1.0
    encoder_spec.embeddings[0].weight = model.src_embed.weight.detach().numpy().copy()
    decoder_spec.embeddings.weight = model.tgt_embed.weight.detach().numpy().copy()
    set_linear(decoder_spec.projection, model.output)
    for side_spec, shape, positions in zip((encoder_spec, decoder_spec), (encoder, decoder), source.positions,
                                           strict=True):  # fmt: skip
        set_side(side_spec, shape, positions)
    spec = specs.TransformerSpec(encoder_spec, decoder_spec)
    for vocab, register in ((source.data.src_vocab, spec.register_source_vocabulary),
                            (source.data.tgt_vocab, spec.register_target_vocabulary)):  # fmt: skip
        register([vocab.piece(i) for i in range(vocab.size)])
    tgt = source.data.tgt_vocab
    spec.config.unk_token, spec.config.bos_token = tgt.piece(UNK), tgt.piece(BOS)
    spec.config.eos_token, spec.config.decoder_start_token = tgt.piece(EOS), tgt.piece(BOS)
    return spec


def export_ctranslate2(source: Source, out: Path, quantize: str) -> dict[str, Any]:
    """Write the CTranslate2 model to ``out/ctranslate2``; returns the manifest's ``ctranslate2`` section."""
    import ctranslate2

    spec = build_spec(source)
    max_positions, max_target_positions = source.positions
    spec.validate()
    spec.optimize(quantization="int8" if quantize == "int8" else "float32")
    (out / MODEL_DIR).mkdir(parents=True, exist_ok=True)
    spec.save(str(out / MODEL_DIR))
    return {"model": MODEL_DIR, "ctranslate2_version": ctranslate2.__version__, "max_positions": max_positions,
            "max_target_positions": max_target_positions,
            "compute_type": "int8" if quantize == "int8" else "float32"}  # fmt: skip
