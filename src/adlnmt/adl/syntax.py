"""The ADL syntax tree and its printer.

A chain is ``layer -> layer -> ...``; a layer is ``name`` or ``name(args)``; an argument is a value,
optionally ``key=value``. Values are literals (int, float, bool, bare word), ``$VARIABLES``, lists
``[v, ...]`` and nested chains. Columns (0-based, into the parsed text) are kept for error messages but
are not part of equality, so ``parse(to_text(tree)) == tree`` holds for every tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal as TypingLiteral

LiteralKind = TypingLiteral["int", "float", "bool", "word"]


@dataclass(frozen=True)
class Literal:
    """A scalar: ``kind`` keeps ``True`` and ``1`` (or ``1`` and ``1.0``) apart."""

    kind: LiteralKind
    value: int | float | bool | str
    col: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Variable:
    """``$NAME``, substituted from user-supplied values before building."""

    name: str
    col: int = field(default=0, compare=False)


@dataclass(frozen=True)
class ListValue:
    items: tuple[Value, ...]
    col: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Argument:
    key: str | None
    value: Value
    col: int = field(default=0, compare=False)


@dataclass(frozen=True)
class LayerNode:
    name: str
    args: tuple[Argument, ...] = ()
    col: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Chain:
    layers: tuple[LayerNode, ...]
    col: int = field(default=0, compare=False)


Value = Literal | Variable | ListValue | Chain


def format_float(value: float) -> str:
    """Shortest text that parses back to the same float and never reads as an int."""
    text = repr(float(value))
    return text if any(c in text for c in ".eEn") else text + ".0"


def value_to_text(value: Value) -> str:
    match value:
        case Literal(kind="bool", value=v):
            return "true" if v else "false"
        case Literal(kind="float", value=v):
            return format_float(v)
        case Literal(value=v):
            return str(v)
        case Variable(name=name):
            return f"${name}"
        case ListValue(items=items):
            return "[" + ", ".join(value_to_text(item) for item in items) + "]"
        case Chain():
            return to_text(value)
    raise TypeError(f"not an ADL value: {value!r}")


def layer_to_text(layer: LayerNode) -> str:
    if not layer.args:
        return layer.name
    args = ", ".join((f"{a.key}=" if a.key else "") + value_to_text(a.value) for a in layer.args)
    return f"{layer.name}({args})"


def to_text(chain: Chain) -> str:
    """The printer: ``layer -> layer`` with ``", "`` between arguments."""
    return " -> ".join(layer_to_text(layer) for layer in chain.layers)


def at_column(value: Value, col: int) -> Value:
    """``value`` with every column in it set to ``col``: a value put in place of ``$NAME`` is located at the
    variable (its own columns point into the ``--var`` text, not into the chain)."""
    match value:
        case ListValue(items=items):
            return ListValue(tuple(at_column(item, col) for item in items), col)
        case Chain(layers=layers):
            return Chain(
                tuple(
                    LayerNode(node.name, tuple(Argument(a.key, at_column(a.value, col), col) for a in node.args), col)
                    for node in layers
                ),
                col,
            )
    return replace(value, col=col)


def rename_layers(chain: Chain, names: dict[str, str]) -> Chain:
    """The same tree with layers renamed (``{"pos": "learn_pos"}``), nested chains included."""

    def value(v: Value) -> Value:
        if isinstance(v, Chain):
            return rename_layers(v, names)
        if isinstance(v, Literal) and v.kind == "word" and v.value in names:
            return Literal("word", names[str(v.value)], v.col)  # a bare layer given as an argument
        if isinstance(v, ListValue):
            return ListValue(tuple(value(item) for item in v.items), v.col)
        return v

    layers = tuple(
        LayerNode(
            names.get(node.name, node.name), tuple(Argument(a.key, value(a.value), a.col) for a in node.args), node.col
        )
        for node in chain.layers
    )
    return Chain(layers, chain.col)


def scale_repeats(chain: Chain, factor: float) -> Chain:
    """The same tree with every ``repeat(n, …)`` count scaled to ``max(1, floor(n · factor))`` (6 → 3, 5 → 2 and
    2 → 1 for 0.5): a shallower version of a published architecture, nested chains included."""

    def value(v: Value) -> Value:
        if isinstance(v, Chain):
            return scale_repeats(v, factor)
        if isinstance(v, ListValue):
            return ListValue(tuple(value(item) for item in v.items), v.col)
        return v

    def layer(node: LayerNode) -> LayerNode:
        args = [Argument(a.key, value(a.value), a.col) for a in node.args]
        if node.name == "repeat" and args and isinstance(args[0].value, Literal) and args[0].value.kind == "int":
            count = args[0].value
            args[0] = Argument(
                args[0].key, Literal("int", max(1, int(int(count.value) * factor)), count.col), args[0].col
            )
        return LayerNode(node.name, tuple(args), node.col)

    return Chain(tuple(layer(node) for node in chain.layers), chain.col)
