"""ADL layer families; importing this package imports every module in it, which registers every layer
with the ADL registry (a new module needs no entry anywhere else).

One module per family: basic (dropout, pos, learn_pos, linear, ff, ffl, act, id), structure (res,
res_d, res_nd, repeat, concat, parallel, highway), norm (norm, bnorm), attention (dot/multi-head
self and source attention, MLP attention), recurrent (rnn, birnn), convolution (cnn), comet (the
COMET gated dilated convolutional unit), aan (the average attention network) and ssru (the simpler
simple recurrent unit). Beside them: base (the layer contract), context (what a constructor knows),
fast_dropout and growing_tensor.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
