"""Human-readable description of a model: canonical ADL, layer tree with widths and parameters."""

from __future__ import annotations

from adlnmt.layers.base import Layer
from adlnmt.layers.structure import Repeat, Sequence, _Branches
from adlnmt.model import Seq2Seq, describe_parameters

NAME_WIDTH = 52


def _rows(layer: Layer, depth: int) -> list[tuple[int, str, int, int, str]]:
    """(depth, title, width, params, note) for ``layer`` and what it contains."""
    if isinstance(layer, Sequence):
        return [row for child in layer.layers for row in _rows(child, depth)]
    total = sum(p.numel() for p in layer.parameters())
    note = ""
    if isinstance(layer, Repeat):
        each = sum(p.numel() for p in layer.copies[0].parameters())
        note = f"{len(layer.copies)} copies × {each:,}; one copy:"
        return [(depth, layer.title, layer.out_dim, total, note), *_rows(layer.copies[0], depth + 1)]
    rows = [(depth, layer.title, layer.out_dim, total, note)]
    if isinstance(layer, _Branches):
        for index, branch in enumerate(layer.branches, 1):
            rows.append(
                (depth + 1, f"branch {index}:", branch.out_dim, sum(p.numel() for p in branch.parameters()), "")
            )
            rows.extend(_rows(branch, depth + 2))
        return rows
    for child in layer.sublayers():
        rows.extend(_rows(child, depth + 1))
    return rows


def layer_tree(chain: Layer) -> str:
    lines = [f"  {'layer':<{NAME_WIDTH}} {'width':>7} {'params':>12}"]
    for depth, title, width, params, note in _rows(chain, 0):
        name = ("  " * depth + title)[:NAME_WIDTH]
        lines.append(f"  {name:<{NAME_WIDTH}} {width:>7} {params:>12,}  {note}".rstrip())
    return "\n".join(lines)


def describe(model: Seq2Seq) -> str:
    config = model.config
    parts = [
        f"encoder: {model.canonical_encoder}",
        f"decoder: {model.canonical_decoder}",
        f"d_model={config.d_model} heads={config.heads} dropout={config.dropout} "
        f"vocab={config.src_vocab_size}/{config.tgt_vocab_size} input_feeding={config.input_feeding} "
        f"tie_output={config.tie_output} tie_source={config.tie_source}",
        "",
        f"encoder (input width {config.d_model}, {len(model.encoder.blocks.widths)} blocks):",
        layer_tree(model.encoder),
        "",
        f"decoder (input width {_decoder_input(model)}):",
        layer_tree(model.decoder),
        "",
        "parameters:",
    ]
    for name, count in describe_parameters(model):
        parts.append(f"  {name:<20} {count:>14,}")
    parts.append(f"  {'total':<20} {model.parameter_count():>14,}")
    return "\n".join(parts)


def _decoder_input(model: Seq2Seq) -> int:
    return model.config.d_model + (model.decoder.out_dim if model.config.input_feeding else 0)
