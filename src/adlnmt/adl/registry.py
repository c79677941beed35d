"""The layer registry: ADL names (and aliases) → layer classes with typed parameter signatures.

Each layer class registers itself with ``@register(name, Param(...), ..., example="...")``. Binding
checks the arguments of a :class:`LayerNode` against the signature: unknown, duplicate or misplaced
arguments, wrong types, arity and ranges are :class:`ADLError` s at the column of the offending argument.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from adlnmt.adl.errors import ADLError
from adlnmt.adl.syntax import Argument, Chain, LayerNode, ListValue, Literal, Value, Variable, value_to_text


class Kind(Enum):
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    WORD = "word"
    CHAIN = "layer chain"
    INT_LIST = "list of ints"


class Side(Enum):
    ENCODER = "encoder"
    DECODER = "decoder"


BOTH = frozenset(Side)
ENCODER_ONLY = frozenset({Side.ENCODER})
DECODER_ONLY = frozenset({Side.DECODER})


@dataclass(frozen=True)
class FromOption:
    """A default taken at build time from a model option (``d_model``, ``heads``, ``dropout``) or
    from the layer's input width (``d_in``)."""

    option: str

    def __str__(self) -> str:
        return self.option


REQUIRED = object()


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    default: Any = REQUIRED
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    variadic: bool = False  # takes all remaining positional arguments (concat, parallel)
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe(self) -> str:
        text = f"{self.name}: {self.kind.value}"
        if self.choices:
            text += " in {" + ", ".join(self.choices) + "}"
        if self.variadic:
            text += ", ..."
        elif not self.required:
            text += f" = {_default_text(self.default)}"
        return text


def _default_text(default: Any) -> str:
    """A default as the ADL writes it: ``true``, ``[64, 32, 16]``, ``d_model``; None reads ``auto``."""
    if default is None:
        return "auto"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, (list, tuple)):
        return "[" + ", ".join(_default_text(v) for v in default) + "]"
    return str(default)


@dataclass(frozen=True)
class LayerSpec:
    name: str
    cls: type
    params: tuple[Param, ...]
    example: str  # a small valid chain using the layer on every side it allows (the contract test builds it)
    aliases: tuple[str, ...] = ()
    sides: frozenset[Side] = BOTH
    side_reason: str = ""  # why the layer is not allowed on the missing side
    source_attention: bool = False
    summary: str = ""  # the first paragraph of the class docstring: its formula

    def signature(self) -> str:
        return f"{self.name}(" + ", ".join(p.describe() for p in self.params) + ")"

    def usage(self) -> str:
        """The short signature of the layer table: ``ff(d, act=relu, dropout)``; defaults only where fixed."""
        if not self.params:
            return self.name
        return f"{self.name}(" + ", ".join(_usage(p) for p in self.params) + ")"


def _usage(param: Param) -> str:
    if param.variadic:
        return f"{param.name}, …"
    if param.required or param.default is None or isinstance(param.default, FromOption):
        return param.name
    return f"{param.name}={_default_text(param.default)}"


@dataclass
class BoundArgs:
    """Arguments of one layer after binding: values by parameter name, plus where each came from."""

    values: dict[str, Any]
    columns: dict[str, int] = field(default_factory=dict)


REGISTRY: dict[str, LayerSpec] = {}
ALIASES: dict[str, str] = {}


def register(
    name: str,
    *params: Param,
    example: str,
    aliases: tuple[str, ...] = (),
    sides: frozenset[Side] = BOTH,
    side_reason: str = "",
    source_attention: bool = False,
) -> Callable[[type], type]:
    """Class decorator: make a layer class available in the ADL under ``name`` (and ``aliases``).

    ``example`` is a small chain using the layer, valid on each of its ``sides``: the registry-wide
    contract test builds and checks it, and the layer table of docs/adl.md shows the class docstring's first
    paragraph (its formula)."""

    def decorate(cls: type) -> type:
        for taken in (name, *aliases):
            if taken in REGISTRY or taken in ALIASES:
                raise ValueError(f"ADL layer name {taken!r} registered twice")
        summary = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
        spec = LayerSpec(name, cls, params, example, aliases, sides, side_reason, source_attention, summary)
        REGISTRY[name] = spec
        for alias in aliases:
            ALIASES[alias] = name
        cls.spec = spec
        return cls

    return decorate


def layer_table() -> str:
    """The layer table of docs/adl.md (Markdown): one row per registered layer, by module, then in source order."""
    rows = ["| layer | formula | sides |", "|---|---|---|"]
    for spec in sorted(REGISTRY.values(), key=lambda spec: spec.cls.__module__):
        aliases = "".join(f" (`{alias}`)" for alias in spec.aliases)
        sides = "both" if spec.sides == BOTH else " / ".join(side.value for side in Side if side in spec.sides)
        formula = spec.summary.replace("|", "\\|")
        rows.append(f"| `{spec.usage()}`{aliases} | {formula} | {sides} |")
    return "\n".join(rows) + "\n"


# Layer names of other toolkits that the ADL spells with arguments.
OTHER_NAMES = {
    "lstm": "rnn(cell=lstm)",
    "gru": "rnn(cell=gru)",
    "bilstm": "birnn(cell=lstm)",
    "bigru": "birnn(cell=gru)",
    "layernorm": "norm",
    "layer_norm": "norm",
    "batchnorm": "bnorm",
    "batch_norm": "bnorm",
}


def lookup(node: LayerNode, text: str = "") -> LayerSpec:
    """The spec of a layer name or alias; an unknown name gets a "did you mean" hint."""
    name = ALIASES.get(node.name, node.name)
    if name in REGISTRY:
        return REGISTRY[name]
    if node.name.lower() in OTHER_NAMES:
        raise ADLError(f"unknown layer '{node.name}' (write {OTHER_NAMES[node.name.lower()]})", text, node.col)
    known = sorted([*REGISTRY, *ALIASES])
    close = difflib.get_close_matches(node.name, known, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise ADLError(f"unknown layer '{node.name}'{hint}", text, node.col)


def _value_col(value: Value, fallback: int) -> int:
    return getattr(value, "col", fallback)


def convert(param: Param, value: Value, layer: str, text: str, col: int) -> Any:
    """Check one argument value against its parameter and convert it to a Python value."""
    where = f"argument '{param.name}' of '{layer}'"
    got = value_to_text(value) if not isinstance(value, Chain) else "a layer chain"
    if isinstance(value, Variable):
        raise ADLError(f"{where}: variable ${value.name} was not substituted", text, col)
    kind = param.kind
    if kind is Kind.CHAIN:
        if isinstance(value, Chain):
            return value
        if isinstance(value, Literal) and value.kind == "word":
            return Chain((LayerNode(str(value.value), (), value.col),), value.col)
        raise ADLError(f"{where} must be a layer chain, got {got}", text, col)
    if kind is Kind.INT_LIST:
        if not isinstance(value, ListValue) or not value.items:
            raise ADLError(f"{where} must be a non-empty list of ints like [64, 32, 16], got {got}", text, col)
        return [
            convert(
                Param(param.name, Kind.INT, low=param.low, high=param.high), item, layer, text, _value_col(item, col)
            )
            for item in value.items
        ]
    if not isinstance(value, Literal):
        raise ADLError(f"{where} must be {_article(kind)}, got {got}", text, col)
    if kind is Kind.WORD:
        if value.kind != "word":
            raise ADLError(f"{where} must be one of {', '.join(param.choices)}, got {got}", text, col)
        word = str(value.value).lower()
        if param.choices and word not in param.choices:
            raise ADLError(f"{where} must be one of {', '.join(param.choices)}, got '{value.value}'", text, col)
        return word
    if kind is Kind.BOOL:
        if value.kind != "bool":
            raise ADLError(f"{where} must be true or false, got {got}", text, col)
        return bool(value.value)
    if kind is Kind.INT and value.kind != "int":
        raise ADLError(f"{where} must be an int, got {got}", text, col)
    if kind is Kind.FLOAT and value.kind not in ("int", "float"):
        raise ADLError(f"{where} must be a number, got {got}", text, col)
    number = int(value.value) if kind is Kind.INT else float(value.value)
    if param.low is not None and not number >= param.low:
        raise ADLError(f"{where} must be >= {_num(param.low)}, got {got}", text, col)
    if param.high is not None and not number <= param.high:
        raise ADLError(f"{where} must be <= {_num(param.high)}, got {got}", text, col)
    return number


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _article(kind: Kind) -> str:
    return {"int": "an int", "float": "a number", "bool": "true or false"}.get(kind.value, kind.value)


def bind(node: LayerNode, spec: LayerSpec, text: str = "") -> BoundArgs:
    """Match positional then keyword arguments to the signature; defaults are left to the builder."""
    values: dict[str, Any] = {}
    columns: dict[str, int] = {}
    positional = [p for p in spec.params]
    seen_keyword = False
    index = 0
    for arg in node.args:
        if arg.key is None:
            if seen_keyword:
                raise ADLError(f"positional argument after a keyword argument in '{node.name}'", text, arg.col)
            if index >= len(positional):
                raise ADLError(
                    f"'{node.name}' takes at most {len(positional)} positional argument"
                    f"{'s' if len(positional) != 1 else ''}: {spec.signature()}",
                    text,
                    arg.col,
                )
            param = positional[index]
            if param.variadic:
                values.setdefault(param.name, []).append(convert(param, arg.value, node.name, text, arg.col))
                columns.setdefault(param.name, arg.col)
                continue
            index += 1
            values[param.name] = convert(param, arg.value, node.name, text, arg.col)
            columns[param.name] = arg.col
            continue
        seen_keyword = True
        param = _param_named(spec, arg, node, text)
        if param.name in values:
            raise ADLError(f"argument '{param.name}' of '{node.name}' given twice", text, arg.col)
        converted = convert(param, arg.value, node.name, text, arg.col)
        values[param.name] = [converted] if param.variadic else converted
        columns[param.name] = arg.col
    for param in spec.params:
        if param.required and param.name not in values:
            need = "at least one layer chain" if param.variadic else f"'{param.name}' ({param.kind.value})"
            raise ADLError(f"'{node.name}' needs {need}: {spec.signature()}", text, node.col)
    return BoundArgs(values, columns)


def _param_named(spec: LayerSpec, arg: Argument, node: LayerNode, text: str) -> Param:
    for param in spec.params:
        if param.name == arg.key:
            return param
    names = [p.name for p in spec.params]
    close = difflib.get_close_matches(arg.key or "", names, n=1, cutoff=0.5)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    allowed = ", ".join(names) if names else "none"
    raise ADLError(f"unknown argument '{arg.key}' for '{node.name}'{hint}; it takes: {allowed}", text, arg.col)
