"""From a checked ADL tree to PyTorch modules: argument defaults, width inference, semantic checks.

``build_chain(text_or_tree, side, d_in, options)`` builds one chain; the model builder
(:mod:`adlnmt.model`) builds the encoder first and hands its block widths to the decoder so source
attentions know what they read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import adlnmt.layers  # noqa: F401  (registers every layer)
from adlnmt.adl.errors import ADLError
from adlnmt.adl.parser import parse, substitute
from adlnmt.adl.registry import ALIASES, REGISTRY, FromOption, Kind, LayerSpec, Side, bind, lookup
from adlnmt.adl.syntax import Argument, Chain, LayerNode, ListValue, Literal, Value, layer_to_text, to_text
from adlnmt.layers.base import Layer
from adlnmt.layers.context import BlockInfo, BuildContext, ModelOptions
from adlnmt.layers.structure import Sequence


class SideChain(Sequence):
    """The top-level chain of one side, with the blocks it built and the (substituted) tree it came from."""

    def __init__(self, layers: list[Layer], d_in: int, blocks: BlockInfo, tree: Chain) -> None:
        super().__init__(layers, d_in)
        self.blocks = blocks
        self.tree = tree


def _resolve(spec: LayerSpec, values: dict[str, Any], ctx: BuildContext) -> dict[str, Any]:
    resolved = dict(values)
    for param in spec.params:
        if param.name not in resolved:
            default = param.default
            resolved[param.name] = ctx.option(default.option) if isinstance(default, FromOption) else default
    return resolved


def build_layer(node: LayerNode, ctx: BuildContext) -> Layer:
    spec = lookup(node, ctx.text)
    if ctx.side not in spec.sides:
        reason = f": {spec.side_reason}" if spec.side_reason else ""
        raise ADLError(f"'{node.name}' cannot be used in the {ctx.side.value}{reason}", ctx.text, node.col, ctx.where)
    bound = bind(node, spec, ctx.text)
    layer_ctx = ctx.nested(node=node, columns=bound.columns)
    layer: Layer = spec.cls(layer_ctx, **_resolve(spec, bound.values, layer_ctx))
    node_canonical = canonical_layer(node)
    layer.side = ctx.side
    layer.label = layer_to_text(node_canonical)
    scalars = tuple(
        a
        for a in node_canonical.args
        if not isinstance(a.value, Chain)
        and not (isinstance(a.value, Literal) and a.value.kind == "word" and a.key is None)
    )
    layer.title = layer_to_text(replace(node_canonical, args=scalars))
    return layer


def _build_layers(chain: Chain, ctx: BuildContext) -> list[Layer]:
    layers = []
    d_in = ctx.d_in
    for node in chain.layers:
        layer = build_layer(node, ctx.nested(d_in=d_in))
        layers.append(layer)
        d_in = layer.out_dim
    return layers


def _build_chain(chain: Chain, ctx: BuildContext) -> Layer:
    return Sequence(_build_layers(chain, ctx), ctx.d_in)


def _located(err: ADLError, text: str, where: str) -> ADLError:
    if err.text and err.where:
        return err
    return ADLError(err.message, err.text or text, err.column, err.where or where)


def prepare(text: str | Chain, variables: Mapping[str, Value] | None = None, where: str = "") -> tuple[Chain, str]:
    """Parse (if needed) and substitute variables; returns the tree and the text errors point into."""
    if isinstance(text, Chain):
        return substitute(text, variables or {}), to_text(text)
    try:
        return substitute(parse(text), variables or {}, text), text
    except ADLError as err:
        raise _located(err, text, where) from None


MAX_LAYERS = 10_000  # layers one side may build, repeats expanded: far beyond any sensible model, and builds fast


def _repeat_count(node: LayerNode) -> int:
    first = node.args[0].value if node.name == "repeat" and node.args else None
    return int(first.value) if isinstance(first, Literal) and first.kind == "int" and first.value > 0 else 1


def _argument_size(value: Value) -> int:
    """The layers an argument builds: a nested chain's, one for a bare layer name (``repeat(6, norm)``), one per
    item of a list (``comet_conv(features=[64, 32, 16])`` builds a convolution for each), else 0."""
    if isinstance(value, Chain):
        return expanded_size(value)
    if isinstance(value, Literal) and value.kind == "word":
        return int(ALIASES.get(str(value.value), str(value.value)) in REGISTRY)
    if isinstance(value, ListValue):
        return len(value.items)
    return 0


def expanded_size(chain: Chain) -> int:
    """The number of layers ``chain`` builds, ``repeat`` s expanded and nested chains included; an ADL error at the
    first layer that would take the side past ``MAX_LAYERS`` (so that ``repeat(1000, repeat(1000, …))`` fails at
    once instead of building a million layers)."""
    total = 0
    for node in chain.layers:
        inner = sum(_argument_size(arg.value) for arg in node.args)
        total += 1 + _repeat_count(node) * inner
        if total > MAX_LAYERS:
            raise ADLError(f"this builds more than {MAX_LAYERS:,} layers (repeats multiplied out)", column=node.col)
    return total


def count_blocks(chain: Chain) -> int:
    """Number of repetitions of the chain's top-level ``repeat`` s (their counts, when given as ints)."""
    total = 0
    for node in chain.layers:
        if node.name == "repeat" and node.args:
            first = node.args[0].value
            if isinstance(first, Literal) and first.kind == "int" and first.value > 0:
                total += int(first.value)
    return total


def uses_cudnn(text: str | Chain) -> bool:
    """Whether the chain builds a layer that computes with cuDNN on a GPU (``Layer.cudnn``: convolutions, RNNs),
    nested chains included."""

    def in_value(value: Value) -> bool:
        if isinstance(value, Chain):
            return any(in_node(node) for node in value.layers)
        if isinstance(value, ListValue):
            return any(in_value(item) for item in value.items)
        if not isinstance(value, Literal) or value.kind != "word":
            return False
        name = ALIASES.get(str(value.value), str(value.value))  # a bare layer given as an argument
        return name in REGISTRY and REGISTRY[name].cls.cudnn

    def in_node(node: LayerNode) -> bool:
        return lookup(node).cls.cudnn or any(in_value(arg.value) for arg in node.args)

    return in_value(prepare(text)[0])


def build_chain(
    text: str | Chain,
    side: Side,
    d_in: int,
    options: ModelOptions | None = None,
    variables: Mapping[str, Value] | None = None,
    encoder: BlockInfo | None = None,
    encoder_width: int | None = None,
    where: str = "",
) -> SideChain:
    """Build the top-level chain of one side."""
    tree, source_text = prepare(text, variables, where or side.value)
    ctx = BuildContext(
        side=side,
        d_in=d_in,
        options=options or ModelOptions(),
        chain_builder=_build_chain,
        text=source_text,
        where=where or side.value,
        blocks=BlockInfo(expected=count_blocks(tree)),
        encoder=encoder,
        encoder_width=encoder_width,
    )
    try:
        expanded_size(tree)
        layers = _build_layers(tree, ctx)
    except ADLError as err:
        raise _located(err, source_text, ctx.where) from None
    return SideChain(layers, d_in, ctx.blocks, tree)


def canonical_layer(node: LayerNode) -> LayerNode:
    """Alias resolved, scalar arguments as ``key=value``; chain arguments (and what precedes them,
    like ``repeat``'s count) stay positional. Unknown names are kept as written."""
    name = node.name
    spec = REGISTRY.get(ALIASES.get(name, name))
    if spec is None:
        return node
    try:
        bound = bind(node, spec)
    except ADLError:
        return replace(node, name=spec.name)
    chain_index = max((i for i, p in enumerate(spec.params) if p.kind is Kind.CHAIN), default=-1)
    args: list[Argument] = []
    for i, param in enumerate(spec.params):
        if param.name not in bound.values:
            continue
        value = bound.values[param.name]
        if param.kind is Kind.CHAIN:
            chains = value if param.variadic else [value]
            args.extend(Argument(None, _canonical_chain_value(c)) for c in chains)
        else:
            args.append(Argument(None if i < chain_index else param.name, _to_value(param.kind, value)))
    return LayerNode(spec.name, tuple(args))


def _canonical_chain_value(chain: Chain) -> Value:
    canonical = canonical_chain(chain)
    only = canonical.layers[0]
    if len(canonical.layers) == 1 and not only.args and only.name.lower() not in ("true", "false"):
        return Literal("word", only.name)
    return canonical


def _to_value(kind: Kind, value: Any) -> Value:
    if kind is Kind.INT_LIST:
        return ListValue(tuple(Literal("int", v) for v in value))
    literal_kind = {Kind.INT: "int", Kind.FLOAT: "float", Kind.BOOL: "bool", Kind.WORD: "word"}[kind]
    return Literal(literal_kind, value)


def canonical_chain(chain: Chain) -> Chain:
    return Chain(tuple(canonical_layer(node) for node in chain.layers))


def canonical(text: str | Chain, variables: Mapping[str, Value] | None = None) -> str:
    """The canonical text of an ADL chain: what models store and show."""
    tree, _ = prepare(text, variables)
    return to_text(canonical_chain(tree))
