"""The simpler simple recurrent unit (Kim, Junczys-Dowmunt, Hassan, Aji, Heafield & Bogoychev, "From Research to
Production and Back: Ludicrously Fast Neural Machine Translation", WNGT 2019): the decoder's replacement for
self-attention in the fast students of the WMT efficiency task.

The recurrence is linear in the cell: with a_t = f_t and b_t = (1 − f_t) ⊙ W x_t, c_t = a_t ⊙ c_{t−1} + b_t, and
pairs (a, b) compose associatively, (a_1, b_1) then (a_2, b_2) = (a_1 a_2, a_2 b_1 + b_2). Training computes every
c_t at once with a Hillis–Steele scan over that composition (⌈log₂ T⌉ element-wise steps on [B, T, d] instead of T
sequential ones) where ``SPEEDUPS.ssru_scan`` says so: by default off the CPU, where a loop is T dependent kernel
launches; on a CPU the loop over positions measured as fast or faster at training batch sizes (benchmarks/NOTES.md).
Incremental decoding keeps c_t as its only state, so a step costs two d × d products however long the prefix.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from adlnmt.adl.registry import DECODER_ONLY, register
from adlnmt.layers.base import Context, Layer
from adlnmt.layers.context import BuildContext
from adlnmt.speedups import SPEEDUPS


def scan(decay: Tensor, update: Tensor) -> Tensor:
    """c_t = decay_t ⊙ c_{t−1} + update_t from c_0 = 0, for every t at once (inclusive Hillis–Steele scan).

    ``decay``, ``update``: [B, T, d] → c: [B, T, d]. After the step with shift s, position t holds the composition of
    positions max(0, t − 2s + 1) .. t, so ⌈log₂ T⌉ steps cover every prefix."""
    shift, length = 1, decay.size(1)
    while shift < length:
        update = torch.cat([update[:, :shift], update[:, shift:] + decay[:, shift:] * update[:, :-shift]], dim=1)
        decay = torch.cat([decay[:, :shift], decay[:, shift:] * decay[:, :-shift]], dim=1)
        shift *= 2
    return update


def loop(decay: Tensor, update: Tensor) -> Tensor:
    """:func:`scan` one position after the other (the recurrence as written)."""
    cell = torch.zeros_like(update[:, 0])  # [B, d]
    cells = []
    for t in range(update.size(1)):
        cell = decay[:, t] * cell + update[:, t]
        cells.append(cell)
    return torch.stack(cells, dim=1)


@register(
    "ssru",
    sides=DECODER_ONLY,
    side_reason="it is a decoder's autoregressive unit (an encoder reads the whole source: use rnn or birnn)",
    example="res_nd(ssru)",
)
class SSRU(Layer):
    """ssru(x_t) = ReLU(c_t), c_t = f_t ⊙ c_{t−1} + (1 − f_t) ⊙ W x_t, f_t = σ(W_f x_t + b_f), c_0 = 0.

    W, W_f ∈ R^{d × d} (W without bias), d the input width, which is also the output width. Kim et al. 2019 put it
    in place of the decoder's self-attention, keeping the residual connection and layer norm around it:
    ``res_d(ssru) -> norm`` (post-norm, as Marian's students) or ``res_nd(ssru)`` (pre-norm). The cell is computed
    in at least fp32 (under bf16 autocast too), so long products of gates stay exact.
    """

    def __init__(self, ctx: BuildContext) -> None:
        super().__init__()
        d = ctx.d_in
        self.W = nn.Linear(d, d, bias=False)
        self.forget = nn.Linear(d, d)  # W_f, b_f
        self.register_buffer("zero", torch.zeros(()), persistent=False)  # device and dtype of the state
        self.out_dim = d

    def gates(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(f_t, (1 − f_t) ⊙ W x_t) for x [B, T, d], in at least fp32."""
        f = torch.sigmoid(self.forget(x))
        dtype = torch.promote_types(f.dtype, torch.float32)
        f = f.to(dtype)
        return f, (1 - f) * self.W(x).to(dtype)

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        # x: [B, T, d]; causal: c_t reads positions ≤ t only, so right padding never reaches a real position
        f, update = self.gates(x)
        mode = SPEEDUPS.ssru_scan
        parallel = mode == "always" or (mode == "accelerator" and x.device.type != "cpu")
        cells = scan(f, update) if parallel else loop(f, update)  # [B, T, d]
        return torch.relu(cells).to(x.dtype)

    def init_state(self, ctx: Context) -> None:
        assert ctx.state is not None
        ctx.state.set(self, "c", self.zero.new_zeros(ctx.state.batch_size, self.out_dim))  # [B, d]

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        # x: [B, 1, d]
        assert ctx.state is not None
        f, update = self.gates(x[:, 0])  # [B, d] each
        cell = f * ctx.state.get(self, "c").to(f.dtype) + update
        ctx.state.set(self, "c", cell)
        return torch.relu(cell).unsqueeze(1).to(x.dtype)  # [B, 1, d]
