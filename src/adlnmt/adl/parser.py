"""Tokenizer and recursive-descent parser for the ADL, plus ``$VARIABLE`` substitution.

Grammar (whitespace is free everywhere; ``→`` is accepted for ``->``)::

    chain    := layer ( "->" layer )*
    layer    := NAME [ "(" [ argument ( "," argument )* ] ")" ]
    argument := [ NAME "=" ] value
    value    := NUMBER | "$" NAME | "[" [ value ( "," value )* ] "]" | chain

A value that is one bare name is a word (``relu``) or ``true``/``false`` (any case); the registry
decides whether a word names a layer (``res(norm)``) or an option (``cnn(512, 3, relu)``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from adlnmt.adl.errors import ADLError
from adlnmt.adl.syntax import Argument, Chain, LayerNode, ListValue, Literal, Value, Variable, at_column

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<arrow>->|→)
  | (?P<number>[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?![A-Za-z_]))
  | (?P<var>\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[()\[\],=])
    """,
    re.VERBOSE,
)
_INT = re.compile(r"[+-]?\d+")
MAX_DEPTH = 64


@dataclass(frozen=True)
class Token:
    kind: str  # arrow | number | var | name | punct | end
    text: str
    col: int


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        if text.startswith("=>", pos):  # '=' alone is a token (key=value): the arrow of other languages
            raise ADLError("unexpected '=>': layers are chained with '->'", text, pos)
        match = _TOKEN.match(text, pos)
        if match is None:
            char = text[pos]
            if char == "$":
                raise ADLError("'$' must be followed by a variable name like $FF_NUM_HIDDEN", text, pos)
            if char == "-":
                raise ADLError("expected '->' between layers", text, pos)
            raise ADLError(f"unexpected character {char!r}", text, pos)
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append(Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


def _describe(token: Token) -> str:
    return "the end of the text" if token.kind == "end" else repr(token.text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.open_parens: list[Token] = []  # the '(' and '[' not closed yet, innermost last

    @property
    def token(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.token
        self.pos += 1
        return token

    def error(self, message: str, col: int | None = None) -> ADLError:
        return ADLError(message, self.text, self.token.col if col is None else col)

    def is_punct(self, char: str) -> bool:
        return self.token.kind == "punct" and self.token.text == char

    def open(self) -> None:
        """Consume the '(' or '[' at the cursor; more than ``MAX_DEPTH`` open at once is an error at it."""
        if len(self.open_parens) >= MAX_DEPTH:
            raise self.error(f"nesting deeper than {MAX_DEPTH} levels")
        self.open_parens.append(self.advance())

    def parse(self) -> Chain:
        if self.token.kind == "end":
            raise self.error("empty chain: expected at least one layer")
        chain = self.chain()
        if self.token.kind != "end":
            if self.is_punct(")"):
                raise self.error("unmatched ')'")
            raise self.error(f"expected '->' or the end of the chain, found {_describe(self.token)}")
        return chain

    def chain(self) -> Chain:
        start = self.token.col
        layers = [self.layer()]
        while self.token.kind == "arrow":
            arrow = self.advance()
            if self.token.kind != "name":
                raise self.error(f"expected a layer name after '{arrow.text}', found {_describe(self.token)}")
            layers.append(self.layer())
        return Chain(tuple(layers), start)

    def layer(self) -> LayerNode:
        token = self.token
        if token.kind != "name":
            if token.kind == "end":
                raise self.error("empty chain: expected a layer name")
            if self.is_punct(")") or self.is_punct(","):
                raise self.error(f"empty chain: expected a layer name before {token.text!r}")
            raise self.error(f"expected a layer name, found {_describe(token)}")
        self.advance()
        if not self.is_punct("("):
            return LayerNode(token.text, (), token.col)
        self.open()
        args: list[Argument] = []
        if not self.is_punct(")"):
            args.append(self.argument())
            while self.is_punct(","):
                self.advance()
                args.append(self.argument())
        if not self.is_punct(")"):
            opened = self.open_parens[-1]
            if self.token.kind == "end":
                raise self.error(f"unbalanced parentheses: '(' of '{token.text}' is never closed", opened.col)
            raise self.error(f"expected ',' or ')' in the arguments of '{token.text}', found {_describe(self.token)}")
        self.advance()
        self.open_parens.pop()
        return LayerNode(token.text, tuple(args), token.col)

    def argument(self) -> Argument:
        start = self.token.col
        if self.token.kind == "name" and self.peek().kind == "punct" and self.peek().text == "=":
            key = self.advance().text
            self.advance()
            if self.is_punct(",") or self.is_punct(")") or self.token.kind == "end":
                raise self.error(f"missing value after '{key}='")
            return Argument(key, self.value(), start)
        if self.is_punct("="):
            raise self.error("'=' must follow an argument name")
        return Argument(None, self.value(), start)

    def value(self) -> Value:
        token = self.token
        if token.kind == "number":
            self.advance()
            if _INT.fullmatch(token.text):
                return Literal("int", int(token.text), token.col)
            return Literal("float", float(token.text), token.col)
        if token.kind == "var":
            self.advance()
            return Variable(token.text[1:], token.col)
        if self.is_punct("["):
            self.open()
            items: list[Value] = []
            if not self.is_punct("]"):
                items.append(self.value())
                while self.is_punct(","):
                    self.advance()
                    items.append(self.value())
            if not self.is_punct("]"):
                raise self.error(f"expected ',' or ']' in a list, found {_describe(self.token)}")
            self.advance()
            self.open_parens.pop()
            return ListValue(tuple(items), token.col)
        chain = self.chain()
        first = chain.layers[0]
        if len(chain.layers) == 1 and not first.args and self.tokens[self.pos - 1].kind == "name":
            if first.name.lower() in ("true", "false"):
                return Literal("bool", first.name.lower() == "true", first.col)
            return Literal("word", first.name, first.col)
        return chain


def parse(text: str) -> Chain:
    """Parse an ADL chain; raises :class:`ADLError` with the column of the fault."""
    if not isinstance(text, str):
        raise ADLError(f"an ADL chain must be text, got {type(text).__name__}")
    return _Parser(text).parse()


def parse_value(text: str) -> Value:
    """Parse the text of one value (used for ``--var NAME=VALUE``)."""
    parser = _Parser(text)
    if parser.token.kind == "end":
        raise parser.error("empty value")
    value = parser.value()
    if parser.token.kind != "end":
        raise parser.error(f"expected a single value, found {_describe(parser.token)}")
    return value


def parse_assignments(assignments: list[str] | tuple[str, ...]) -> dict[str, Value]:
    """``["FF_NUM_HIDDEN=1024", ...]`` → ``{"FF_NUM_HIDDEN": Literal(int, 1024), ...}``."""
    values: dict[str, Value] = {}
    for item in assignments:
        name, sep, text = item.partition("=")
        name = name.strip().lstrip("$")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ADLError(f"--var expects NAME=VALUE, got {item!r}")
        try:
            values[name] = parse_value(text.strip())
        except ADLError as err:
            raise ADLError(f"in --var {name}: {err.message}", text.strip(), err.column) from None
    return values


def variable_names(chain: Chain) -> set[str]:
    """The names of the variables (``$NAME``) that ``chain`` uses, at any depth."""

    def names(v: Value) -> set[str]:
        match v:
            case Variable(name=name):
                return {name}
            case ListValue(items=items):
                return set().union(*map(names, items))
            case Chain(layers=layers):
                return set().union(*(names(a.value) for layer in layers for a in layer.args))
        return set()

    return names(chain)


def substitute(chain: Chain, variables: Mapping[str, Value], text: str = "") -> Chain:
    """Replace every ``$NAME`` by its value; an undefined variable is an error at its column."""

    def value(v: Value) -> Value:
        match v:
            case Variable(name=name, col=col):
                if name not in variables:
                    known = ", ".join(sorted(variables)) or "none"
                    raise ADLError(
                        f"undefined variable ${name} (set it with --var {name}=VALUE; defined: {known})",
                        text,
                        col,
                    )
                return at_column(variables[name], col)
            case ListValue(items=items):
                return replace(v, items=tuple(value(item) for item in items))
            case Chain():
                return sub_chain(v)
        return v

    def sub_chain(c: Chain) -> Chain:
        layers = tuple(
            replace(layer, args=tuple(replace(a, value=value(a.value)) for a in layer.args)) for layer in c.layers
        )
        return replace(c, layers=layers)

    return sub_chain(chain)
