"""Architecture diagrams drawn from ADL: SVG, PNG or PDF (laid out by Graphviz's ``dot``) and a page embedding the
SVG.

:mod:`adlnmt.diagram.dot` turns a built model into a DOT graph; this module renders it. Entry points:
``diagram_svg(encoder, decoder, options, variables)`` for two ADL chains, ``model_dir_svg(model_dir)``
for a trained model, ``model_svg(model)`` / ``model_image(model, kind)`` / ``diagram_html(model)`` /
``write_diagram(model, path)``
for a model already built (``adlnmt describe --diagram``).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from adlnmt.diagram.dot import FONT, INSTALL_HINT, load_graphviz, model_graph
from adlnmt.errors import UserError
from adlnmt.layers.builder import ModelOptions
from adlnmt.model import ModelConfig, Seq2Seq
from adlnmt.store import ModelDir
from adlnmt.store.atomic import atomic_write

__all__ = ["diagram_html", "diagram_svg", "model_dir_svg", "model_graph", "model_image", "model_svg", "write_diagram"]
PNG_DPI = 200  # sharp enough for slides and papers (Graphviz's default is 96)


def model_svg(model: Seq2Seq) -> str:
    """The diagram of a built model as SVG text."""
    return _render(model_graph(model), "svg").decode("utf-8")


def model_image(model: Seq2Seq, kind: str) -> bytes:
    """The diagram of a built model as an image Graphviz writes: ``png`` (at PNG_DPI) or ``pdf`` (vector)."""
    graph = model_graph(model)
    if kind == "png":
        graph.graph_attr["dpi"] = str(PNG_DPI)
    return _render(graph, kind)


def _render(graph: Any, kind: str) -> bytes:
    try:
        return graph.pipe(format=kind)
    except load_graphviz().ExecutableNotFound:
        raise UserError(INSTALL_HINT) from None


def _meta_model(config: ModelConfig) -> Seq2Seq:
    """The model on PyTorch's meta device: shapes and parameter counts, no memory."""
    with torch.device("meta"):
        return Seq2Seq(config)


def diagram_svg(
    encoder: str, decoder: str, options: ModelOptions | None = None, variables: Mapping[str, str] | None = None
) -> str:
    """The diagram of two ADL chains (``$NAME`` s from ``variables``) at the given model options, as SVG."""
    config = ModelConfig(encoder, decoder, **asdict(options or ModelOptions()), variables=dict(variables or {}))
    return model_svg(_meta_model(config))


def model_dir_svg(model_dir: str | Path) -> str:
    """The diagram of a trained model from its directory's ``config.json`` (no weights are read)."""
    return model_svg(_meta_model(ModelConfig(**ModelDir(model_dir).config()["model"])))


def diagram_html(model: Seq2Seq) -> str:
    """A self-contained page: the canonical ADL of both sides over the inline SVG diagram."""
    svg = model_svg(model)
    adl = f"encoder: {html.escape(model.canonical_encoder)}\ndecoder: {html.escape(model.canonical_decoder)}"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>adlnmt architecture</title>\n'
        f"<style>body {{ font-family: {FONT}; margin: 1.5em; }} pre {{ white-space: pre-wrap; }}</style>\n"
        f"</head>\n<body>\n<pre>{adl}</pre>\n{svg[svg.index('<svg') :]}</body>\n</html>\n"
    )


WRITERS: dict[str, Callable[[Seq2Seq], bytes]] = {
    ".svg": lambda model: model_svg(model).encode("utf-8"),
    ".html": lambda model: diagram_html(model).encode("utf-8"),
    ".png": lambda model: model_image(model, "png"),
    ".pdf": lambda model: model_image(model, "pdf"),
}


def write_diagram(model: Seq2Seq, path: str | Path) -> None:
    """Write the diagram to ``path`` by its suffix: ``.svg``, ``.html`` (a page embedding the SVG), ``.png`` or
    ``.pdf`` (for papers and slides)."""
    path = Path(path)
    writer = WRITERS.get(path.suffix.lower())
    if writer is None:
        raise UserError(
            f"{path}: a diagram is written as .svg, .html, .png or .pdf, not '{path.suffix or 'no suffix'}'"
        )
    content = writer(model)
    atomic_write(path, lambda tmp: tmp.write_bytes(content))
