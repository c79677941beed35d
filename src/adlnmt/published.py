"""The 29 published ADL configurations of the ADL paper's code (Sockeye acl18 branch), verbatim, and
:func:`as_run`, which writes out the dropout that code added to them.

E = encoder, D = decoder; they use $FF_NUM_HIDDEN and $NUM_HIDDEN (set them, e.g. 4·d and d)."""

from __future__ import annotations

from adlnmt.adl.parser import parse
from adlnmt.adl.syntax import Argument, Chain, LayerNode, ListValue, Literal, Value, Variable, to_text

# The paper's runs passed --custom-seq-dropout 0.1, and the acl18 code gives every layer whose configuration takes a
# `dropout` argument that rate: linear, cnn, mh_dot_self_att and mh_dot_att drop out their output, and the two
# attentions their attention weights as well (dropout_attention defaults to dropout); pos and ff drop out as
# adlnmt's do; rnn and birnn take none, hence the strings' explicit `dropout`s. adlnmt's layers are the paper's
# formulas, without dropout, so :func:`as_run` writes it out.
OUTPUT_DROPOUT = frozenset({"linear", "cnn", "mh_dot_self_att", "mh_dot_att"})
WEIGHT_DROPOUT = frozenset({"mh_dot_self_att", "mh_dot_att"})

ENCODERS = {
    "E1": "pos->repeat(6,res(norm->mh_dot_self_att)->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
    "E2": "dropout->res(birnn->dropout)->repeat(5,res(rnn->dropout))",
    "E3": "pos->res(birnn->dropout)->repeat(5,res(rnn->dropout))",
    "E4": "pos->res(norm->birnn->dropout)->repeat(5,res(norm->rnn->dropout))->norm",
    "E5": "pos->res(norm->birnn->dropout)->res(norm->ff($FF_NUM_HIDDEN)->linear)->repeat(5,res(norm->rnn->dropout)"
    "->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
    "E6": "pos->repeat(6,res(cnn))",
    "E7": "pos->repeat(6,res(norm->cnn))->norm",
    "E8": "pos->repeat(6,res(norm->cnn)->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
    "E9": "pos->repeat(6,res(cnn($NUM_HIDDEN,3,relu)))",
    "E10": "pos->repeat(6,res(norm->cnn($NUM_HIDDEN,3,relu)))->norm",
    "E11": "pos->repeat(6,res(norm->cnn($NUM_HIDDEN,3,relu))->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
}

DECODERS = {
    "D1": "pos->repeat(6,res(norm->mh_dot_self_att)->res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
    "D2": "dropout->repeat(6,res(rnn->dropout))->res(mh_dot_att(heads=1))->res(ff($FF_NUM_HIDDEN)->linear)",
    "D3": "dropout->repeat(6,res(rnn->dropout))->res(mh_dot_att)->res(ff($FF_NUM_HIDDEN)->linear)",
    "D4": "pos->repeat(6,res(rnn->dropout))->res(mh_dot_att)->res(ff($FF_NUM_HIDDEN)->linear)",
    "D5": "pos->repeat(6,res(norm->rnn->dropout))->res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear)->norm",
    "D6": "pos->repeat(6,res(norm->rnn->dropout)->res(norm->mh_dot_att(heads=1)))->res(norm->ff($FF_NUM_HIDDEN)->linear)"
    "->norm",
    "D7": "pos->repeat(6,res(norm->rnn->dropout)->res(norm->mh_dot_att))->res(norm->ff($FF_NUM_HIDDEN)->linear)->norm",
    "D8": "pos->repeat(6,res(norm->rnn->dropout)->res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
    "D9": "pos->repeat(6,res(cnn->res(mh_dot_att(heads=1))))",
    "D10": "pos->repeat(6,res(norm->cnn)->res(norm->mh_dot_att(heads=1)))->norm",
    "D11": "pos->repeat(6,res(norm->cnn)->res(norm->mh_dot_att))->norm",
    "D12": "pos->repeat(6,res(norm->cnn)->res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
    "D13": "pos->repeat(6,res(cnn($NUM_HIDDEN,3,relu))->res(mh_dot_att(heads=1)))",
    "D14": "pos->repeat(6,res(norm->cnn($NUM_HIDDEN,3,relu))->res(norm->mh_dot_att(heads=1)))->norm",
    "D15": "pos->repeat(6,res(norm->cnn($NUM_HIDDEN,3,relu))->res(norm->mh_dot_att))->norm",
    "D16": "pos->repeat(6,res(norm->cnn($NUM_HIDDEN,3,relu))->res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear))"
    "->norm",
    "D17": "pos->repeat(2,res(norm->mh_dot_self_att)->res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear)"
    "->res(norm->rnn->dropout)->res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear)"
    "->res(norm->cnn($NUM_HIDDEN,3,relu))->res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
    "D18": "pos->repeat(6,res(norm->mh_dot_att)->res(norm->ff($FF_NUM_HIDDEN)->linear))->norm",
}


def _with_dropouts(chain: Chain) -> Chain:
    def value(v: Value) -> Value:
        if isinstance(v, Literal) and v.kind == "word" and v.value in OUTPUT_DROPOUT:  # a bare layer: res(cnn)
            v = Chain((LayerNode(str(v.value), (), v.col),), v.col)
        if isinstance(v, Chain):
            return _with_dropouts(v)
        if isinstance(v, ListValue):
            return ListValue(tuple(value(item) for item in v.items), v.col)
        return v

    layers: list[LayerNode] = []
    for node in chain.layers:
        args = tuple(Argument(a.key, value(a.value), a.col) for a in node.args)
        if node.name in WEIGHT_DROPOUT:
            args += (Argument("att_dropout", Variable("DROPOUT")),)
        layers.append(LayerNode(node.name, args, node.col))
        if node.name in OUTPUT_DROPOUT:
            layers.append(LayerNode("dropout"))
    return Chain(tuple(layers), chain.col)


def as_run(text: str) -> str:
    """A published string as the acl18 code ran it (see ``OUTPUT_DROPOUT``): ``-> dropout`` after every linear, cnn
    and dot attention, and ``att_dropout=$DROPOUT`` (the model's dropout rate) on the attentions, e.g.
    ``res(norm->mh_dot_att)`` → ``res(norm -> mh_dot_att(att_dropout=$DROPOUT) -> dropout)``."""
    return to_text(_with_dropouts(parse(text)))
