"""Malformed ADL: each gets one ADLError with a clear message at the right column."""

from __future__ import annotations

import pytest
import torch

from adlnmt.adl.errors import ADLError
from adlnmt.adl.parser import parse_assignments
from adlnmt.adl.registry import Side
from adlnmt.layers.builder import build_chain
from adlnmt.layers.context import ModelOptions

E, D = Side.ENCODER, Side.DECODER

# (side, ADL text, expected message fragment, expected 0-based column of the caret)
CASES = [
    (E, "", "empty chain", 0),
    (E, "   ", "empty chain", 3),
    (E, "pos ->", "expected a layer name after '->'", 6),
    (E, "pos -> -> norm", "expected a layer name after '->'", 7),
    (E, "pos → → norm", "expected a layer name after '→'", 6),
    (E, "res(norm", "'(' of 'res' is never closed", 3),
    (E, "repeat(2, res(norm -> ffl)", "'(' of 'repeat' is never closed", 6),
    (E, "res(norm))", "unmatched ')'", 9),
    (E, "norm)", "unmatched ')'", 4),
    (E, "res()", "'res' needs 'l'", 0),
    (E, "res(norm -> )", "expected a layer name after '->'", 12),
    (E, "ff(64,)", "expected a layer name before ')'", 6),
    (E, "mh_dot_sef_att", "did you mean 'mh_dot_self_att'", 0),
    (E, "pos -> nrom", "did you mean 'norm'", 7),
    (E, "pos -> zzzz", "unknown layer 'zzzz'", 7),
    (E, "repeat(0, norm)", "must be >= 1", 7),
    (E, "repeat(-2, norm)", "must be >= 1", 7),
    (E, "repeat(norm, norm)", "argument 'n' of 'repeat' must be an int", 7),
    (E, "repeat(2.5, norm)", "must be an int, got 2.5", 7),
    (E, "repeat(6)", "'repeat' needs 'l'", 0),
    (E, "repeat(2, res(norm), norm)", "at most 2 positional arguments", 21),
    (E, "ff(64, relu, 0.1, 5)", "at most 3 positional arguments", 18),
    (E, "ff(width=64)", "unknown argument 'width' for 'ff'", 3),
    (E, "ff(d=64, d=32)", "argument 'd' of 'ff' given twice", 9),
    (E, "ff(64, d=32)", "argument 'd' of 'ff' given twice", 7),
    (E, "ff(d=64, relu)", "positional argument after a keyword argument", 9),
    (E, "ff(act=rleu)", "must be one of relu, gelu", 3),
    (E, "ff(d=0)", "must be >= 1", 3),
    (E, "ff(=3)", "'=' must follow an argument name", 3),
    (E, "ff(d=)", "missing value after 'd='", 5),
    (E, "dropout(p=true)", "must be a number, got true", 8),
    (E, "dropout(p=1.5)", "must be <= 0.99", 8),
    (E, "norm(eps=relu)", "must be a number, got relu", 5),
    (E, "norm(eps=0)", "must be >= 1e-12, got 0", 5),  # a constant vector would divide 0 by 0
    (E, "res(3)", "must be a layer chain, got 3", 4),
    (E, "linear($UNDEFINED)", "undefined variable $UNDEFINED", 7),
    (E, "pos -> $X", "expected a layer name after '->', found '$X'", 7),
    (E, "pos - norm", "expected '->' between layers", 4),
    (E, "pos -> norm@", "unexpected character '@'", 11),
    (E, "pos -> lstm", "unknown layer 'lstm' (write rnn(cell=lstm))", 7),
    (E, "repeat(2, res(GRU))", "unknown layer 'GRU' (write rnn(cell=gru))", 14),
    (E, "pos => norm", "unexpected '=>': layers are chained with '->'", 4),
    (E, "ffl(factor=>2)", "unexpected '=>'", 10),
    (E, "pos,norm", "expected '->' or the end of the chain", 3),
    (E, "[1, 2]", "expected a layer name, found '['", 0),
    (E, "concat()", "'concat' needs at least one layer chain", 0),
    (E, "parallel(id, linear(8))", "equal widths", 9),
    (E, "res(ff(32))", "changes the width from 16 to 32", 4),
    (E, "highway(linear(8))", "changes the width from 16 to 8", 8),
    (E, "act(glu) -> act(glu) -> act(glu) -> act(glu) -> act(glu)", "even width, got 1", 52),
    (E, "cnn(16, 3, relu, dilation=2, kernel=5)", "argument 'kernel' of 'cnn' given twice", 29),
    (E, "learn_pos(max_len=0)", "must be >= 1", 10),
    (E, "mh_dot_src_att", "'mh_dot_src_att' cannot be used in the encoder", 0),
    (E, "pos -> res(norm -> mh_dot_att)", "'mh_dot_att' cannot be used in the encoder", 19),
    (E, "mh_dot_self_att(heads=3)", "heads", 16),
    (E, "ff(1000000)", "width must be in 1..65536, got 1000000", 3),
    (E, "concat(linear(40000), id, linear(30000))", "got 70016 (the branches' 40000 + 16 + 30000)", 26),
    (D, "pos -> birnn", "'birnn' cannot be used in the decoder", 7),
    (D, "res(bnorm)", "'bnorm' cannot be used in the decoder", 4),
    (D, "repeat(2, res(mh_dot_src_att(source=sideways)))", "must be one of top, increasing, decreasing", 29),
]


@pytest.mark.parametrize(("side", "text", "fragment", "column"), CASES, ids=[c[1] or "<empty>" for c in CASES])
def test_error_message_and_column(side: Side, text: str, fragment: str, column: int) -> None:
    with pytest.raises(ADLError) as info:
        build_chain(text, side, 16, ModelOptions(d_model=16, heads=4), parse_assignments(["X=1"]))
    err = info.value
    assert fragment in err.message
    assert err.column == column, f"caret at {err.column}, expected {column}:\n{err}"


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 30


def test_rendering_puts_caret_under_the_fault() -> None:
    with pytest.raises(ADLError) as info:
        build_chain("pos -> repeat(6, res_nd(mh_dot_sef_att))", Side.ENCODER, 16, where="encoder")
    lines = str(info.value).splitlines()
    assert lines[0].startswith("ADL error in encoder: unknown layer 'mh_dot_sef_att'")
    assert lines[1] == "  pos -> repeat(6, res_nd(mh_dot_sef_att))"
    assert lines[2] == "  " + " " * 24 + "^"


def test_a_sentence_over_several_lines_names_the_line_and_the_column_within_it() -> None:
    """A grid's encoder written as a YAML block: the column counted from the start of the whole text (26 here)."""
    with pytest.raises(ADLError) as info:
        build_chain("pos\n-> repeat(6, res_nd(mh_dot_sef_att))\n-> norm", Side.ENCODER, 16, where="encoder")
    head, line, caret = str(info.value).splitlines()
    assert head.endswith("(line 2, column 21)") and line == "  -> repeat(6, res_nd(mh_dot_sef_att))"
    assert caret == "  " + " " * 20 + "^"


def test_the_width_of_a_concat_is_bounded_before_its_next_branch_is_built() -> None:
    """Each width was bounded, their sum was not: 200 × linear(65536) was accepted (13,107,200 wide)."""
    text = "concat(" + ", ".join(["linear(65536)"] * 200) + ")"
    with torch.device("meta"), pytest.raises(ADLError) as info:
        build_chain(text, E, 16, ModelOptions(d_model=16, heads=4), where="encoder")
    assert "width must be in 1..65536, got 131072 (the branches' 65536 + 65536)" in info.value.message
    assert info.value.column == text.index("linear", 8)  # the second branch, the first past the bound


def test_bad_variable_values_are_located() -> None:
    with pytest.raises(ADLError, match="--var expects NAME=VALUE"):
        parse_assignments(["FF_NUM_HIDDEN"])
    with pytest.raises(ADLError) as info:
        parse_assignments(["X=(3"])
    assert "in --var X" in info.value.message


def test_nested_repeats_are_capped_before_anything_is_built() -> None:
    with pytest.raises(ADLError) as caught:  # refused from the tree, before a million layers are built
        build_chain("pos -> repeat(1000, repeat(1000, res(ffl)))", Side.ENCODER, 16, ModelOptions(16, 2))
    assert "more than 10,000 layers" in caught.value.message and caught.value.column == 7


def test_bare_layer_names_count_towards_the_layer_cap() -> None:
    """A bare name is a layer too: ``repeat(1000, repeat(1000, norm))`` counted as 1,001 and built a million."""
    with pytest.raises(ADLError, match="more than 10,000 layers"):  # 11,012 layers, counted as 12
        build_chain("concat(" + ", ".join(["repeat(1000, id)"] * 11) + ")", Side.ENCODER, 16, ModelOptions(16, 2))
    with pytest.raises(ADLError) as caught:
        build_chain("repeat(1000, repeat(1000, norm))", Side.ENCODER, 16, ModelOptions(16, 2))
    assert "more than 10,000 layers" in caught.value.message and caught.value.column == 0


@pytest.mark.parametrize(
    ("text", "value", "fragment"),
    [
        ("pos -> res($X)", "norm -> foo", "unknown layer 'foo'"),
        ("pos -> res($X)", "norm -> ff(16, act=rleu)", "must be one of relu"),
        ("pos -> comet_conv(features=$X)", "[64, 0]", "must be >= 1, got 0"),
    ],
)
def test_a_fault_inside_a_variable_value_points_at_the_variable(text: str, value: str, fragment: str) -> None:
    """The value's own columns are into the --var text: the caret goes under the $X it replaced."""
    with pytest.raises(ADLError) as info:
        build_chain(text, E, 16, ModelOptions(d_model=16, heads=4), parse_assignments([f"X={value}"]))
    assert fragment in info.value.message
    assert info.value.column == text.index("$X")


def test_caret_lines_up_under_tabs_and_other_whitespace() -> None:
    """Tabs are kept in the caret's indent; a carriage return or Unicode space shows as one space (a raw \\r would
    send the terminal back to the start of the line)."""
    with pytest.raises(ADLError) as info:
        build_chain("pos\t->\u3000res(\r\tnrom)", Side.ENCODER, 16, where="encoder")
    _, line, caret = str(info.value).splitlines()
    assert line == "  pos\t-> res( \tnrom)"
    assert caret.expandtabs().index("^") == line.expandtabs().index("nrom")


def test_list_items_count_towards_the_layer_cap() -> None:
    """comet_conv builds one convolution per item of ``features``: counted as one layer, repeat(1000, …) of a
    1,000-item list built a million convolutions."""
    features = "[" + ", ".join(["1"] * 1000) + "]"
    with pytest.raises(ADLError) as caught:
        build_chain(f"pos -> repeat(1000, comet_conv(features={features}))", Side.ENCODER, 16, ModelOptions(16, 2))
    assert "more than 10,000 layers" in caught.value.message and caught.value.column == 7
