"""The 29 published ADL configurations of the ADL paper's code (Sockeye acl18 branch), verbatim.

E = encoder, D = decoder; they use $FF_NUM_HIDDEN and $NUM_HIDDEN (set them, e.g. 4·d and d)."""

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
