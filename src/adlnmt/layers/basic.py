"""Position-wise layers: dropout, positional embeddings, linear, feed-forward, activations, identity.

None of them mixes positions (``pos``/``learn_pos`` read the absolute position from the context), so
their incremental ``step`` is their ``forward`` on one position.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from adlnmt.adl.registry import FromOption, Kind, Param, register
from adlnmt.layers.base import Context, Layer
from adlnmt.layers.context import BuildContext
from adlnmt.layers.fast_dropout import FastDropout

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "leaky_relu": F.leaky_relu,
    "glu": lambda x: F.glu(x, dim=-1),
    "swish": F.silu,
}
ACTIVATION_NAMES = tuple(ACTIVATIONS)


def activation_input_width(act: str, width: int) -> int:
    """Pre-activation width that yields ``width`` outputs (GLU halves its input: d_i = 2d)."""
    return 2 * width if act == "glu" else width


WIDTH = Param("d", Kind.INT, FromOption("d_model"), low=1, doc="output width")
DROPOUT = Param("dropout", Kind.FLOAT, FromOption("dropout"), low=0.0, high=0.99, doc="dropout rate")
ACT = Param("act", Kind.WORD, "relu", choices=ACTIVATION_NAMES, doc="non-linearity")


@register(
    "dropout",
    Param("p", Kind.FLOAT, FromOption("dropout"), low=0.0, high=0.99, doc="drop probability"),
    example="dropout(0.3)",
)
class Dropout(Layer):
    """dropout(h_t): zero each unit with probability p during training (scaled by 1/(1−p))."""

    def __init__(self, ctx: BuildContext, p: float) -> None:
        super().__init__()
        self.dropout = FastDropout(p)
        self.out_dim = ctx.d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.dropout(x)


def sinusoids(pos: Tensor, width: int) -> Tensor:
    """p[t, 2j] = sin(t / 10000^(2j/d)), p[t, 2j+1] = cos(t / 10000^(2j/d)); [T] → [T, d]."""
    j2 = torch.arange(0, width, 2, device=pos.device, dtype=torch.float32)
    angles = pos.float().unsqueeze(1) / torch.pow(10000.0, j2 / width)  # [T, ceil(d/2)]
    table = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # [T, 2·ceil(d/2)]
    return table[:, :width]


def sinusoid_halves(pos: Tensor, width: int) -> Tensor:
    """The same sines and cosines as :func:`sinusoids`, laid out as [sin half | cos half] (Marian, Hugging Face
    MarianMT, CTranslate2): p[t, j] = sin(t / 10000^(2j/d)) for j < ⌈d/2⌉, p[t, ⌈d/2⌉ + j] = cos(t / 10000^(2j/d));
    computed in float64 and rounded once, as MarianMT builds its table; [T] → [T, d]."""
    j2 = torch.arange(0, width, 2, device=pos.device, dtype=torch.float64)
    angles = pos.double().unsqueeze(1) / torch.pow(10000.0, j2 / width)  # [T, ceil(d/2)]
    return torch.cat([angles.sin(), angles[:, : width // 2].cos()], dim=1).float()  # [T, d]


POSITION_LAYOUTS: dict[str, Callable[[Tensor, int], Tensor]] = {"interleaved": sinusoids, "halves": sinusoid_halves}


@register(
    "pos",
    DROPOUT,
    Param(
        "layout",
        Kind.WORD,
        "interleaved",
        choices=tuple(POSITION_LAYOUTS),
        doc="sin/cos columns: alternating (Vaswani et al., tensor2tensor) or [sin half | cos half] (Marian, MarianMT)",
    ),
    Param("scale", Kind.BOOL, True, doc="multiply the embeddings by √d (false: add p_t to them as they are)"),
    example="pos(layout=halves)",
)
class Pos(Layer):
    """pos(h_t) = dropout(√d · h_t + p_t) with fixed sinusoidal p_t (Vaswani et al.); scale=false drops the √d,
    layout=halves puts the sines in the first half of p_t and the cosines in the second."""

    def __init__(self, ctx: BuildContext, dropout: float, layout: str = "interleaved", scale: bool = True) -> None:
        super().__init__()
        self.out_dim = ctx.d_in
        self.scale = math.sqrt(ctx.d_in) if scale else 1.0
        self.table_of = POSITION_LAYOUTS[layout]
        self.dropout = FastDropout(dropout)
        self.cache = torch.empty(0, self.out_dim)  # sinusoids of positions 0 .. len-1, grown on demand

    def cover(self, end: int, device: torch.device) -> None:
        """Grow the sinusoid table on ``device`` to hold p_t for t < end (at least 256 rows, doubling)."""
        if self.cache.size(0) < end or self.cache.device != device:
            positions = torch.arange(max(end, 2 * self.cache.size(0), 256), device=device)
            self.cache = self.table_of(positions, self.out_dim)

    def embedding(self, start: int, length: int, device: torch.device) -> Tensor:
        """p_t for t = start .. start + length − 1: [T, d]."""
        self.cover(start + length, device)
        return self.cache[start : start + length]

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        table = self.embedding(ctx.offset, x.size(1), x.device).to(x.dtype)  # [T, d]
        return self.dropout(self.scale * x + table)


@register(
    "learn_pos",
    DROPOUT,
    Param("max_len", Kind.INT, FromOption("max_len"), low=1, high=1 << 20, doc="positions learned"),
    example="learn_pos(max_len=32)",
)
class LearnPos(Pos):
    """learn_pos(h_t) = dropout(√d · h_t + P[t]) with a learned table P ∈ R^{max_len × d}."""

    def __init__(self, ctx: BuildContext, dropout: float, max_len: int) -> None:
        super().__init__(ctx, dropout)
        self.table = nn.Parameter(torch.randn(max_len, ctx.d_in) * ctx.d_in**-0.5)

    def cover(self, end: int, device: torch.device) -> None:
        """A learned table does not grow (:meth:`embedding` refuses positions beyond it)."""

    def embedding(self, start: int, length: int, device: torch.device) -> Tensor:
        if start + length > self.table.size(0):
            raise ValueError(
                f"learn_pos: position {start + length - 1} is beyond max_len={self.table.size(0)}; "
                "raise learn_pos(max_len=...) or shorten the input"
            )
        return self.table[start : start + length]


@register("linear", WIDTH, example="linear(8)")
class Linear(Layer):
    """linear(h_t, d_o) = W h_t + b, W ∈ R^{d_o × d_in}."""

    def __init__(self, ctx: BuildContext, d: int) -> None:
        super().__init__()
        self.linear = nn.Linear(ctx.d_in, ctx.check_width(d, "d"))
        self.out_dim = d

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.linear(x)


@register("ff", WIDTH, ACT, DROPOUT, example="ff(8, act=gelu)")
class FF(Layer):
    """ff(h_t, d_o) = dropout(act(W h_t + b)); act = ReLU in the paper (GLU doubles W's rows)."""

    def __init__(self, ctx: BuildContext, d: int, act: str, dropout: float) -> None:
        super().__init__()
        self.linear = nn.Linear(ctx.d_in, activation_input_width(act, ctx.check_width(d, "d")))
        self.act = ACTIVATIONS[act]
        self.dropout = FastDropout(dropout)
        self.out_dim = d

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.dropout(self.act(self.linear(x)))


class FeedForward(nn.Module):
    """FFN(x) = W_2 act(W_1 x + b_1) + b_2, W_1 ∈ R^{d_ff × d_in}, W_2 ∈ R^{d_out × d_ff}, with dropout
    on the hidden units (``hidden_dropout``) and/or the output (``out_dropout``). Shared by ffl, the
    COMET unit's FFN_2 and the AAN's FFN."""

    def __init__(
        self,
        d_in: int,
        d_ff: int,
        d_out: int,
        act: str = "relu",
        hidden_dropout: float = 0.0,
        out_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.up = nn.Linear(d_in, activation_input_width(act, d_ff))
        self.act = ACTIVATIONS[act]
        self.down = nn.Linear(d_ff, d_out)
        self.hidden_dropout = FastDropout(hidden_dropout)
        self.out_dropout = FastDropout(out_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.out_dropout(self.down(self.hidden_dropout(self.act(self.up(x)))))


@register(
    "ffl",
    Param("factor", Kind.INT, FromOption("ff_factor"), low=1, high=64, doc="hidden width = factor · d_in"),
    ACT,
    DROPOUT,
    example="ffl(factor=2)",
)
class FFL(Layer):
    """ffl(h_t) = ff(h_t, factor · d_in) -> linear(d_in)  (factor = 4 in the paper)."""

    def __init__(self, ctx: BuildContext, factor: int, act: str, dropout: float) -> None:
        super().__init__()
        hidden = ctx.check_width(factor * ctx.d_in, "factor")
        self.net = FeedForward(ctx.d_in, hidden, ctx.d_in, act, hidden_dropout=dropout)
        self.out_dim = ctx.d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.net(x)


@register(
    "act",
    Param("type", Kind.WORD, "relu", choices=ACTIVATION_NAMES, doc="non-linearity"),
    example="linear(32) -> act(glu)",
)
class Act(Layer):
    """act(h_t) = v(h_t) for v ∈ {relu, gelu, tanh, sigmoid, leaky_relu, glu, swish};
    glu([h_A; h_B]) = h_A ⊗ σ(h_B) halves the width."""

    def __init__(self, ctx: BuildContext, type: str) -> None:
        super().__init__()
        if type == "glu" and ctx.d_in % 2:
            raise ctx.error(f"glu halves its input, which needs an even width, got {ctx.d_in}", "type")
        self.act = ACTIVATIONS[type]
        self.out_dim = ctx.d_in // 2 if type == "glu" else ctx.d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.act(x)


@register("id", example="id")
class Identity(Layer):
    """id(h_t) = h_t."""

    def __init__(self, ctx: BuildContext) -> None:
        super().__init__()
        self.out_dim = ctx.d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return x
