"""The DOT graph of a model, in the style of the ADL paper's figures (laid out later by Graphviz).

Both sides of a built model are drawn top to bottom as nested blocks: ``repeat(n, …)`` is a frame
marked ×n holding one copy, residuals (``res``, ``res_d``, ``res_nd``, ``highway``) are a bypass arrow
around their inner chain into a ⊕ (highway: a gate), ``concat``/``parallel`` are branches that merge, and every
source attention gets an arrow from the encoder output it reads (the top, or with
``source=increasing|decreasing`` the output of the encoder's blocks, as resolved by the builder).
Boxes show the layer's canonical title and output width; tooltips the full ADL and parameters.

Drawing works on the built layer tree (the one ``adlnmt describe`` prints). Every drawn box stands
for a *group*: the same ADL layer in all copies of the enclosing repeats.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING

from adlnmt.errors import UserError
from adlnmt.layers.base import Layer
from adlnmt.layers.structure import Sequence
from adlnmt.model import Seq2Seq, iter_layers

if TYPE_CHECKING:
    import graphviz

INSTALL_HINT = (
    "drawing diagrams needs Graphviz: install its `dot` program (Debian/Ubuntu: apt-get install graphviz; "
    "`make install` does it as root) and the Python package (pip install 'adlnmt[diagram]')"
)
FONT = "Helvetica,Arial,sans-serif"
# Fill colour of a box by the layer's family (the module that defines it); source attentions stand out.
FAMILY_COLORS = {
    "attention": "#fff2cc",
    "average": "#fce4ec",
    "recurrent": "#d9ead3",
    "ssru": "#d9ead3",  # a recurrent unit too
    "convolution": "#cfe2f3",
    "comet": "#e1d5e7",
}
DEFAULT_COLOR = "#ffffff"
SOURCE_COLOR = "#f9cb9c"
SOURCE_EDGE_COLOR = "#d46a00"
BYPASS_COLOR = "#3c78d8"
FLOW_WEIGHT = "8"


@dataclass(frozen=True)
class Merge:
    """The node where paths come together: a circled symbol, or a labelled shape with the output width."""

    label: str
    shape: str = "circle"


SUM = Merge("+")


@dataclass(frozen=True)
class Bypass:
    """How a residual-like layer is drawn: implicit steps on the inner path, and its merge node."""

    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    merge: Merge = SUM


BYPASSES = {
    "res": Bypass(),
    "res_d": Bypass(after=("dropout",)),
    "res_nd": Bypass(before=("norm",), after=("dropout",)),
    "highway": Bypass(merge=Merge("gate", "ellipse")),
}
MERGES = {"concat": Merge("concat", "box"), "parallel": SUM}
IDENTITY = "id"  # drawn as a plain arrow

Group = list[Layer]  # the same ADL layer in every copy of its enclosing repeats


def _width_text(group: Group) -> str:
    widths = list(dict.fromkeys(layer.out_dim for layer in group))
    return "width " + ", ".join(str(w) for w in widths)


def _label(title: str, detail: str) -> str:
    """An HTML-like Graphviz label: the title over a smaller grey detail line."""
    return f'<{html.escape(title)}<br/><font point-size="9" color="#555555">{html.escape(detail)}</font>>'


def _parameters(layer: Layer) -> int:
    return sum(p.numel() for p in layer.parameters())


class _Drawer:
    """Builds the DOT graph of one model; nodes go into (nested) clusters, edges into the root."""

    def __init__(self, model: Seq2Seq, graphviz_module: ModuleType) -> None:
        self.model = model
        self.gv = graphviz_module
        self.graph = self.gv.Digraph("architecture")
        self.graph.attr(rankdir="TB", newrank="true", nodesep="0.25", ranksep="0.3", fontname=FONT)
        self.graph.attr("node", fontname=FONT, fontsize="11", shape="box", style="rounded,filled", height="0.3")
        self.graph.attr("edge", fontname=FONT, fontsize="9", arrowsize="0.6")
        self.ids = itertools.count()
        self.edges: list[tuple[str, str, dict[str, str]]] = []
        self.next_block = 0  # index of the next encoder block (repetition of a top-level repeat)
        self.block_nodes: dict[int, str] = {}  # encoder block → the node marking its output
        self.read_blocks = {
            layer.block
            for layer in iter_layers(model.decoder)
            if getattr(layer, "block", None) is not None and type(layer).spec.source_attention
        }
        self.draw_layer: dict[str, Callable[[Group, str, graphviz.Digraph], str]] = {
            "repeat": self.repeat,
            IDENTITY: lambda group, incoming, graph: incoming,
            **{name: partial(self.bypass, style=style) for name, style in BYPASSES.items()},
            **{name: partial(self.branches, merge=merge) for name, merge in MERGES.items()},
        }
        self.encoder_output = ""

    # --- primitives -----------------------------------------------------------------------------

    def new_id(self, kind: str) -> str:
        return f"{kind}{next(self.ids)}"

    def node(self, graph: graphviz.Digraph, kind: str, label: str, **attrs: str) -> str:
        name = self.new_id(kind)
        graph.node(name, label, id=name, **attrs)
        return name

    def edge(self, tail: str, head: str, kind: str = "flow", **attrs: str) -> None:
        """Record an edge; the main flow weighs more, so that chains stay straight and bypasses go round them."""
        self.edges.append(
            (tail, head, {"id": self.new_id(kind), "weight": FLOW_WEIGHT if kind == "flow" else "1", **attrs})
        )

    def cluster(self, kind: str, **attrs: str) -> graphviz.Digraph:
        name = self.new_id(kind)
        cluster = self.gv.Digraph(f"cluster_{name}")
        cluster.attr(id=name, fontname=FONT, **attrs)
        return cluster

    # --- ADL constructs -------------------------------------------------------------------------

    def chain(self, group: Group, incoming: str, graph: graphviz.Digraph) -> str:
        for layers in zip(*(sequence.layers for sequence in group), strict=True):
            incoming = self.layer(list(layers), incoming, graph)
        return incoming

    def layer(self, group: Group, incoming: str, graph: graphviz.Digraph) -> str:
        if isinstance(group[0], Sequence):
            return self.chain(group, incoming, graph)
        return self.draw_layer.get(type(group[0]).spec.name, self.leaf)(group, incoming, graph)

    def leaf(self, group: Group, incoming: str, graph: graphviz.Digraph) -> str:
        first = group[0]
        spec = type(first).spec
        family = type(first).__module__.rsplit(".", 1)[-1]
        color = SOURCE_COLOR if spec.source_attention else FAMILY_COLORS.get(family, DEFAULT_COLOR)
        tooltip = f"{first.label}: {_parameters(first):,} parameters" + (" per copy" if len(group) > 1 else "")
        name = self.node(graph, "layer", _label(first.title, _width_text(group)), fillcolor=color, tooltip=tooltip)
        self.edge(incoming, name)
        if spec.source_attention:
            self.source_edges(group, name)
        return name

    def merge(self, graph: graphviz.Digraph, merge: Merge, group: Group) -> str:
        if merge.shape == "circle":
            return self.node(graph, "merge", merge.label, shape="circle", style="", width="0.28", fixedsize="true")
        return self.node(graph, "merge", _label(merge.label, _width_text(group)), shape=merge.shape, style="")

    def implicit(self, graph: graphviz.Digraph, label: str, incoming: str) -> str:
        """A step that a layer's definition implies (res_nd's norm and dropout): small, unframed."""
        name = self.node(
            graph, "implicit", label, shape="plaintext", style="", fontsize="9", fontcolor="#555555", height="0.2"
        )
        self.edge(incoming, name)
        return name

    def repeat(self, group: Group, incoming: str, graph: graphviz.Digraph) -> str:
        count = len(group[0].copies)
        frame = self.cluster("repeat", label=f"×{count}", labeljust="r", style="rounded,dashed", color="#666666")
        entry = self.node(frame, "entry", "", shape="point", width="0.05")
        self.edge(incoming, entry)
        copies = [copy for layer in group for copy in layer.copies]
        outgoing = self.chain(copies, entry, frame)
        if getattr(group[0], "records_blocks", False):
            outgoing = self.encoder_blocks(count, outgoing, frame)
        graph.subgraph(frame)
        return outgoing

    def encoder_blocks(self, count: int, incoming: str, frame: graphviz.Digraph) -> str:
        """Mark the output of a top-level encoder repeat when source attentions read its blocks."""
        blocks = range(self.next_block, self.next_block + count)
        self.next_block += count
        if self.read_blocks.isdisjoint(blocks):
            return incoming
        everything = len(blocks) == len(self.model.encoder.blocks.widths)
        label = "block i" if everything else f"block i ({blocks.start} ≤ i ≤ {blocks.stop - 1})"
        name = self.node(frame, "block", label, shape="ellipse", style="filled", fillcolor=SOURCE_COLOR, fontsize="9")
        self.edge(incoming, name)
        self.block_nodes.update(dict.fromkeys(blocks, name))
        return name

    def bypass(self, group: Group, incoming: str, graph: graphviz.Digraph, style: Bypass) -> str:
        inner = incoming
        for step in style.before:
            inner = self.implicit(graph, step, inner)
        inner = self.chain([layer.inner for layer in group], inner, graph)
        for step in style.after:
            inner = self.implicit(graph, step, inner)
        merge = self.merge(graph, style.merge, group)
        self.edge(inner, merge)
        name = type(group[0]).spec.name
        self.edge(incoming, merge, "bypass", label=name, color=BYPASS_COLOR, fontcolor=BYPASS_COLOR)
        return merge

    def branches(self, group: Group, incoming: str, graph: graphviz.Digraph, merge: Merge) -> str:
        outputs = [
            self.chain([layer.branches[index] for layer in group], incoming, graph)
            for index in range(len(group[0].branches))
        ]
        name = self.merge(graph, merge, group)
        for output in outputs:
            self.edge(output, name)
        return name

    def source_edges(self, group: Group, attention: str) -> None:
        """An arrow from what the attention reads: the encoder output, or the encoder blocks."""
        blocks = [layer.block for layer in group]
        style = {"color": SOURCE_EDGE_COLOR, "fontcolor": SOURCE_EDGE_COLOR, "constraint": "false", "penwidth": "1.4"}
        if blocks[0] is None:
            self.edge(self.encoder_output, attention, "source", **style)
            return
        last = len(self.model.encoder.blocks.widths) - 1
        mapping = "enc i → dec i" if group[0].source == "increasing" else f"enc i → dec {last}−i"
        for tail in dict.fromkeys(self.block_nodes[block] for block in blocks):
            self.edge(tail, attention, "source", label=f"{group[0].source}:\n{mapping}", **style)

    # --- the whole model ------------------------------------------------------------------------

    def side(self, title: str, chain: Sequence, inputs: list[tuple[str, int]]) -> tuple[graphviz.Digraph, str, str]:
        """One side's frame with its input steps, chain and output; returns the frame, last input and output."""
        frame = self.cluster(title, label=title, style="rounded", color="#999999", fontsize="13")
        previous = ""
        for label, width in inputs:
            step = self.node(frame, "input", _label(label, f"width {width}"), fillcolor="#eeeeee")
            if previous:
                self.edge(previous, step)
            previous = step
        outgoing = self.chain([chain], previous, frame)
        end = self.node(frame, "output", _label(f"{title} output", _width_text([chain])), fillcolor="#eeeeee")
        self.edge(outgoing, end)
        return frame, previous, end

    def draw(self) -> graphviz.Digraph:
        config, decoder_chain = self.model.config, self.model.decoder
        decoder_inputs = [("target embedding", config.d_model)]
        if config.input_feeding:
            decoder_inputs.append(("concat [z(t−1); E y(t)]", config.d_model + decoder_chain.out_dim))
        encoder, _, self.encoder_output = self.side(
            "encoder", self.model.encoder, [("source embedding", config.d_model)]
        )
        decoder, decoder_input, decoder_output = self.side("decoder", decoder_chain, decoder_inputs)
        if config.input_feeding:
            self.edge(
                decoder_output, decoder_input, "feeding", label="input feeding", style="dashed", constraint="false"
            )
        self.graph.subgraph(encoder)
        self.graph.subgraph(decoder)
        for tail, head, attrs in self.edges:
            self.graph.edge(tail, head, **attrs)
        return self.graph


def load_graphviz() -> ModuleType:
    """The ``graphviz`` package (an optional dependency), or a :class:`UserError` saying how to install it."""
    try:
        import graphviz
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return graphviz


def model_graph(model: Seq2Seq) -> graphviz.Digraph:
    """The DOT graph of a built model (build it on the meta device: only shapes are read)."""
    return _Drawer(model, load_graphviz()).draw()
