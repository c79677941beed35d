"""Parser and printer: the language as specified, and parse(print(tree)) == tree for any tree."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adlnmt.adl.errors import ADLError
from adlnmt.adl.parser import MAX_DEPTH, parse, parse_assignments, substitute
from adlnmt.adl.syntax import Argument, Chain, LayerNode, ListValue, Literal, Variable, to_text
from adlnmt.layers.builder import canonical


def layer(name: str, *args: Argument) -> LayerNode:
    return LayerNode(name, tuple(args))


def test_chain_with_arrows_unicode_and_free_whitespace() -> None:
    tree = parse("  pos→repeat( 6 ,res_nd( mh_dot_self_att )->res_nd(ffl) )\n -> norm ")
    assert to_text(tree) == "pos -> repeat(6, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"


def test_value_types() -> None:
    tree = parse("x(1, -2, 1e-3, 2.5, TRUE, False, relu, k=[64, 32], c=a -> b(3), v=$V)")
    args = tree.layers[0].args
    assert [a.value for a in args[:7]] == [
        Literal("int", 1),
        Literal("int", -2),
        Literal("float", 1e-3),
        Literal("float", 2.5),
        Literal("bool", True),
        Literal("bool", False),
        Literal("word", "relu"),
    ]
    assert args[7] == Argument("k", ListValue((Literal("int", 64), Literal("int", 32))))
    assert args[8] == Argument("c", Chain((layer("a"), layer("b", Argument(None, Literal("int", 3))))))
    assert args[9] == Argument("v", Variable("V"))
    assert Literal("bool", True) != Literal("int", 1)


def test_empty_parentheses_mean_no_arguments() -> None:
    assert parse("norm()") == parse("norm")


def test_columns_point_into_the_text() -> None:
    tree = parse("pos -> res(norm -> ff(64))")
    res = tree.layers[1]
    assert res.col == 7
    inner = res.args[0].value
    assert inner.layers[1].col == 19
    assert inner.layers[1].args[0].value.col == 22


@pytest.mark.parametrize(("opening", "closing"), [("res(", ")"), ("[", "]"), ("concat([", "])")])
def test_nesting_is_bounded_for_parentheses_and_lists(opening: str, closing: str) -> None:
    """Lists nest like parentheses: 100,000 '[' are one ADL error at the first one too deep, not a RecursionError."""
    inside = "comet_conv(features={}1{})"
    assert parse(inside.format(opening * 30, closing * 30))  # at most 61 levels: parsed
    text = inside.format(opening * 100_000, closing * 100_000)
    with pytest.raises(ADLError, match=f"nesting deeper than {MAX_DEPTH} levels") as info:
        parse(text)
    openings = [col for col, char in enumerate(text) if char in "(["]
    assert info.value.column == openings[MAX_DEPTH]


def test_variables_are_substituted_with_their_types() -> None:
    tree = substitute(parse("ff($FF)->dropout($P)->act($A)"), parse_assignments(["FF=1024", "P=0.3", "A=gelu"]))
    assert to_text(tree) == "ff(1024) -> dropout(0.3) -> act(gelu)"


def test_canonical_form_resolves_aliases_and_names_arguments() -> None:
    text = "pos->repeat(2,res(norm->mh_dot_att(heads=1))->res(cnn(64,3,relu)))->concat(id,mlp_att)->ff"
    assert canonical(text) == (
        "pos -> repeat(2, res(norm -> mh_dot_src_att(heads=1)) -> res(cnn(d=64, kernel=3, act=relu)))"
        " -> concat(id, mlp_src_att) -> ff"
    )
    assert canonical(canonical(text)) == canonical(text)


NAMES = st.sampled_from(["pos", "norm", "res", "repeat", "ff", "cnn", "mh_dot_self_att", "a_1", "X"])
WORDS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda w: w.lower() not in ("true", "false")
)
SCALARS = st.one_of(
    st.integers(-(10**6), 10**6).map(lambda v: Literal("int", v)),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(lambda v: Literal("float", v)),
    st.booleans().map(lambda v: Literal("bool", v)),
    WORDS.map(lambda v: Literal("word", v)),
    WORDS.map(Variable),
)


def chains(values: st.SearchStrategy) -> st.SearchStrategy:
    def node(args: list[Argument]) -> st.SearchStrategy:
        return NAMES.map(lambda name: LayerNode(name, tuple(args)))

    arguments = st.lists(st.tuples(st.one_of(st.none(), WORDS), values), max_size=3).map(
        # positional arguments first, as the grammar requires of a well-formed call
        lambda pairs: sorted((Argument(k, v) for k, v in pairs), key=lambda a: a.key is not None)
    )
    layers = arguments.flatmap(node)
    return st.lists(layers, min_size=1, max_size=3).map(lambda ls: Chain(tuple(ls)))


VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda items: ListValue(tuple(items))),
        # a lone bare layer as a value is written (and read back) as a word, so chains have more
        chains(inner).filter(lambda c: len(c.layers) > 1 or bool(c.layers[0].args)),
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(chains(VALUES))
def test_print_then_parse_is_identity(tree: Chain) -> None:
    assert parse(to_text(tree)) == tree
