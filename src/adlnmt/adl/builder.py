"""From a checked ADL tree to PyTorch modules: argument defaults, width inference, semantic checks.

``build_chain(text_or_tree, side, d_in, options)`` builds one chain; the model builder
(:mod:`adlnmt.model`) builds the encoder first and hands its block widths to the decoder so source
attentions know what they read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from adlnmt.adl.errors import ADLError
from adlnmt.adl.parser import parse, substitute
from adlnmt.adl.registry import REGISTRY, FromOption, Kind, LayerSpec, Side, bind, lookup
from adlnmt.adl.syntax import Argument, Chain, LayerNode, Literal, Value, layer_to_text, to_text

MAX_WIDTH = 1 << 16


@dataclass(frozen=True)
class ModelOptions:
    """Model-wide values that layer arguments default to."""

    d_model: int = 512
    heads: int = 8
    dropout: float = 0.1
    ff_factor: int = 4  # ffl: hidden width = ff_factor · d_in
    max_len: int = 1024  # table size of learned positional embeddings

    def __post_init__(self) -> None:
        if not 1 <= self.d_model <= MAX_WIDTH:
            raise ADLError(f"d_model must be in 1..{MAX_WIDTH}, got {self.d_model}")
        if self.heads < 1:
            raise ADLError(f"heads must be >= 1, got {self.heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ADLError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.ff_factor < 1 or self.max_len < 1:
            raise ADLError("ff_factor and max_len must be >= 1")


@dataclass
class BlockInfo:
    """The blocks (repetitions of top-level ``repeat`` s) of one side, shared while building it."""

    expected: int = 0  # counted from the tree before building
    widths: list[int] = field(default_factory=list)  # output width of every block built so far


@dataclass
class BuildContext:
    """What a layer constructor knows: where it is, its input width, model options, error anchor."""

    side: Side
    d_in: int
    options: ModelOptions
    text: str = ""
    where: str = ""
    node: LayerNode | None = None
    columns: Mapping[str, int] = field(default_factory=dict)
    depth: int = 0  # 0 = the side's top-level chain
    block: int | None = None  # index of the enclosing top-level repetition (None outside)
    blocks: BlockInfo = field(default_factory=BlockInfo)
    encoder: BlockInfo | None = None  # encoder blocks, for the decoder's source attentions
    encoder_width: int | None = None  # width of the encoder's final output

    def option(self, name: str) -> Any:
        return self.d_in if name == "d_in" else getattr(self.options, name)

    def error(self, message: str, param: str | None = None) -> ADLError:
        """An error naming the current layer, with the caret under ``param`` (or the layer)."""
        col = self.columns.get(param) if param else None
        if col is None and self.node is not None:
            col = self.node.col
        name = self.node.name if self.node else "?"
        return ADLError(f"{name} in the {self.side.value}: {message}", self.text, col, self.where)

    def nested(self, **changes: Any) -> BuildContext:
        return replace(self, **changes)

    def build_chain(self, chain: Chain, d_in: int | None = None) -> Any:
        """Build a nested chain (an argument of this layer) on the same side."""
        return _build_chain(
            chain, self.nested(d_in=self.d_in if d_in is None else d_in, depth=self.depth + 1, node=None, columns={})
        )

    def check_width(self, width: int, param: str) -> int:
        if not 1 <= width <= MAX_WIDTH:
            raise self.error(f"width must be in 1..{MAX_WIDTH}, got {width}", param)
        return width


def _resolve(spec: LayerSpec, values: dict[str, Any], ctx: BuildContext) -> dict[str, Any]:
    resolved = dict(values)
    for param in spec.params:
        if param.name not in resolved:
            default = param.default
            resolved[param.name] = ctx.option(default.option) if isinstance(default, FromOption) else default
    return resolved


def build_layer(node: LayerNode, ctx: BuildContext) -> Any:
    spec = lookup(node, ctx.text)
    if ctx.side not in spec.sides:
        reason = f": {spec.side_reason}" if spec.side_reason else ""
        raise ADLError(f"'{node.name}' cannot be used in the {ctx.side.value}{reason}", ctx.text, node.col, ctx.where)
    bound = bind(node, spec, ctx.text)
    layer_ctx = ctx.nested(node=node, columns=bound.columns)
    layer = spec.cls(layer_ctx, **_resolve(spec, bound.values, layer_ctx))
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


def _build_chain(chain: Chain, ctx: BuildContext) -> Any:
    from adlnmt.layers.structure import Sequence

    layers = []
    d_in = ctx.d_in
    for node in chain.layers:
        layer = build_layer(node, ctx.nested(d_in=d_in))
        layers.append(layer)
        d_in = layer.out_dim
    return Sequence(layers, ctx.d_in)


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


def count_blocks(chain: Chain) -> int:
    """Number of repetitions of the chain's top-level ``repeat`` s (their counts, when given as ints)."""
    total = 0
    for node in chain.layers:
        if node.name == "repeat" and node.args:
            first = node.args[0].value
            if isinstance(first, Literal) and first.kind == "int" and first.value > 0:
                total += int(first.value)
    return total


def build_chain(
    text: str | Chain,
    side: Side,
    d_in: int,
    options: ModelOptions | None = None,
    variables: Mapping[str, Value] | None = None,
    encoder: BlockInfo | None = None,
    encoder_width: int | None = None,
    where: str = "",
) -> Any:
    """Build the top-level chain of one side; returns a ``Sequence`` layer with ``blocks`` info."""
    import adlnmt.layers  # noqa: F401  (registers every layer family)

    tree, source_text = prepare(text, variables, where or side.value)
    ctx = BuildContext(
        side=side,
        d_in=d_in,
        options=options or ModelOptions(),
        text=source_text,
        where=where or side.value,
        blocks=BlockInfo(expected=count_blocks(tree)),
        encoder=encoder,
        encoder_width=encoder_width,
    )
    try:
        chain = _build_chain(tree, ctx)
    except ADLError as err:
        raise _located(err, source_text, ctx.where) from None
    chain.blocks = ctx.blocks
    chain.tree = tree
    return chain


def canonical_layer(node: LayerNode) -> LayerNode:
    """Alias resolved, scalar arguments as ``key=value``; chain arguments (and what precedes them,
    like ``repeat``'s count) stay positional. Unknown names are kept as written."""
    name = node.name
    spec = REGISTRY.get(name) or REGISTRY.get(_alias(name))
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


def _alias(name: str) -> str:
    from adlnmt.adl.registry import ALIASES

    return ALIASES.get(name, name)


def _canonical_chain_value(chain: Chain) -> Value:
    canonical = canonical_chain(chain)
    only = canonical.layers[0]
    if len(canonical.layers) == 1 and not only.args and only.name.lower() not in ("true", "false"):
        return Literal("word", only.name)
    return canonical


def _to_value(kind: Kind, value: Any) -> Value:
    from adlnmt.adl.syntax import ListValue

    if kind is Kind.INT_LIST:
        return ListValue(tuple(Literal("int", v) for v in value))
    literal_kind = {Kind.INT: "int", Kind.FLOAT: "float", Kind.BOOL: "bool", Kind.WORD: "word"}[kind]
    return Literal(literal_kind, value)


def canonical_chain(chain: Chain) -> Chain:
    return Chain(tuple(canonical_layer(node) for node in chain.layers))


def canonical(text: str | Chain, variables: Mapping[str, Value] | None = None) -> str:
    """The canonical text of an ADL chain: what models store and show."""
    import adlnmt.layers  # noqa: F401

    tree, _ = prepare(text, variables)
    return to_text(canonical_chain(tree))
