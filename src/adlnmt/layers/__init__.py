"""ADL layer families; importing this package registers every layer with the ADL registry.

One module per family: basic (dropout, pos, learn_pos, linear, ff, ffl, act, id), structure (res,
res_d, res_nd, repeat, concat, parallel, highway), norm (norm, bnorm), attention (dot/multi-head
self and source attention, MLP attention), recurrent (rnn, birnn), convolution (cnn), comet (the
COMET gated dilated convolutional unit) and aan (the average attention network).
"""

from adlnmt.layers import aan, attention, basic, comet, convolution, norm, recurrent, structure  # noqa: F401
