"""Recurrent layers: a unidirectional RNN (any side) and a bidirectional RNN (encoder only).

Both wrap one single-layer ``nn.LSTM``/``nn.GRU`` (batch first). Sentences are padded on the right
(``ctx.mask`` is True on a prefix of every row), so a forward RNN's real positions never read padding;
the backward direction of ``birnn`` must start at each sentence's true last token, which packing does.
In incremental decoding ``rnn`` keeps its recurrent state s_t (h, and c for the LSTM) as dynamic
entries of the decoder state, each [B, d].
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from adlnmt.adl.registry import ENCODER_ONLY, Kind, Param, register
from adlnmt.layers.base import Context, Layer
from adlnmt.layers.basic import WIDTH
from adlnmt.layers.context import BuildContext

CELLS: dict[str, type[nn.RNNBase]] = {"lstm": nn.LSTM, "gru": nn.GRU}
CELL = Param("cell", Kind.WORD, "lstm", choices=tuple(CELLS), doc="recurrent cell")


def run_packed(rnn: nn.RNNBase, x: Tensor, mask: Tensor | None) -> Tensor:
    """Run ``rnn`` over ``x`` [B, T, d_in] honouring the true lengths of ``mask`` [B, T] (True = real);
    returns [B, T, d_out] with zeros at padding positions."""
    if mask is None or bool(mask.all()):
        return rnn(x)[0]
    lengths = mask.sum(1).clamp(min=1).cpu()  # [B]; a fully padded row still needs one step
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, _ = pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=x.size(1))
    return out


@register("rnn", WIDTH, CELL, example="rnn(8, cell=gru)")
class RNN(Layer):
    """rnn(h_t) = f_o(h_t, s_{t-1}), s_t = f_h(h_t, s_{t-1}), with an LSTM or GRU cell of width d."""

    cudnn = True

    def __init__(self, ctx: BuildContext, d: int, cell: str) -> None:
        super().__init__()
        self.rnn = CELLS[cell](ctx.d_in, ctx.check_width(d, "d"), batch_first=True)
        self.lstm = cell == "lstm"
        self.out_dim = d

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        # Causal: with right padding, real positions only ever read earlier (real) positions.
        return self.rnn(x)[0]  # [B, T, d]

    def init_state(self, ctx: Context) -> None:
        assert ctx.state is not None
        # the weights' device and dtype; a dynamically quantized (int8, CPU-only) RNN has no float weights
        like = next(self.rnn.parameters(), torch.empty(0))
        zeros = torch.zeros(ctx.state.batch_size, self.out_dim, device=like.device, dtype=like.dtype)
        ctx.state.set(self, "h", zeros)  # [B, d]
        if self.lstm:
            ctx.state.set(self, "c", zeros.clone())  # [B, d]

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        assert ctx.state is not None
        h = ctx.state.get(self, "h").unsqueeze(0)  # [1, B, d] (layers × batch × width)
        if self.lstm:
            c = ctx.state.get(self, "c").unsqueeze(0)
            out, (h, c) = self.rnn(x, (h.to(x.dtype), c.to(x.dtype)))
            ctx.state.set(self, "c", c.squeeze(0))
        else:
            out, h = self.rnn(x, h.to(x.dtype))
        ctx.state.set(self, "h", h.squeeze(0))
        return out  # [B, 1, d]


@register(
    "birnn",
    WIDTH,
    CELL,
    sides=ENCODER_ONLY,
    side_reason="its backward direction reads later target positions",
    example="birnn(8)",
)
class BiRNN(Layer):
    """birnn(h_t) = [rnn_fwd(h_t); rnn_bwd(h_t)]: one RNN forward, one in reverse, each of width d/2."""

    cudnn = True

    def __init__(self, ctx: BuildContext, d: int, cell: str) -> None:
        super().__init__()
        if ctx.check_width(d, "d") % 2:
            raise ctx.error(f"the two directions take d/2 units each, which needs an even d, got {d}", "d")
        self.rnn = CELLS[cell](ctx.d_in, d // 2, batch_first=True, bidirectional=True)
        self.out_dim = d

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return run_packed(self.rnn, x, ctx.mask)  # [B, T, d] = [forward d/2; backward d/2]
