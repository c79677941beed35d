"""Structural layers: chains, residuals, repetition, concatenation, parallel branches, highway.

They own no state of their own: ``init_state`` reaches their children and ``step`` calls the
children's ``step`` the same way ``forward`` calls their ``forward``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from adlnmt.adl.registry import Kind, Param, Side, register
from adlnmt.adl.syntax import Chain
from adlnmt.layers.base import Context, Layer
from adlnmt.layers.context import MAX_WIDTH, BuildContext
from adlnmt.layers.fast_dropout import FastDropout

CHAIN = Param("l", Kind.CHAIN, doc="the inner layer chain")
BRANCHES = Param("l", Kind.CHAIN, variadic=True, doc="one or more layer chains")


class Sequence(Layer):
    """l_1 -> l_2 -> ... -> l_L: each layer reads the previous one's output."""

    def __init__(self, layers: list[Layer], d_in: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.out_dim = layers[-1].out_dim if layers else d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        for layer in self.layers:
            x = layer(x, ctx)
        return x

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        for layer in self.layers:
            x = layer.step(x, ctx)
        return x


def _inner_same_width(ctx: BuildContext, chain: Chain) -> Layer:
    inner = ctx.build_chain(chain)
    if inner.out_dim != ctx.d_in:
        raise ctx.error(
            f"the inner chain changes the width from {ctx.d_in} to {inner.out_dim}; "
            f"they must be equal (e.g. end it with linear({ctx.d_in}))",
            "l",
        )
    return inner


@register("res", CHAIN, example="res(ff)")
class Res(Layer):
    """res(h, l) = h + l(h)."""

    def __init__(self, ctx: BuildContext, l: Chain) -> None:  # noqa: E741
        super().__init__()
        self.inner = _inner_same_width(ctx, l)
        self.out_dim = ctx.d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return x + self.inner(x, ctx)

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        return x + self.inner.step(x, ctx)


@register("res_d", CHAIN, example="res_d(ffl)")
class ResD(Res):
    """res_d(h, l) = res(h, l -> dropout) = h + dropout(l(h))."""

    def __init__(self, ctx: BuildContext, l: Chain) -> None:  # noqa: E741
        super().__init__(ctx, l)
        self.dropout = FastDropout(ctx.options.dropout)

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return x + self.dropout(self.inner(x, ctx))

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        return x + self.dropout(self.inner.step(x, ctx))


@register("res_nd", CHAIN, example="res_nd(ff)")
class ResND(ResD):
    """res_nd(h, l) = res(h, norm -> l -> dropout) = h + dropout(l(norm(h)))."""

    def __init__(self, ctx: BuildContext, l: Chain) -> None:  # noqa: E741
        super().__init__(ctx, l)
        self.norm = nn.LayerNorm(ctx.d_in)

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return x + self.dropout(self.inner(self.norm(x), ctx))

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        return x + self.dropout(self.inner.step(self.norm(x), ctx))


@register(
    "repeat", Param("n", Kind.INT, low=1, high=1000, doc="number of copies"), CHAIN, example="repeat(2, res_nd(ffl))"
)
class Repeat(Layer):
    """repeat(n, l) = l_1 -> l_2 -> ... -> l_n, each copy with its own weights.

    In the top-level chain of a side every copy is a *block*: the encoder keeps each block's output
    (for ``source=increasing|decreasing``) and decoder source attentions know their block index.
    """

    def __init__(self, ctx: BuildContext, n: int, l: Chain) -> None:  # noqa: E741
        super().__init__()
        self.records_blocks = ctx.depth == 0 and ctx.side is Side.ENCODER
        top_level = ctx.depth == 0
        copies: list[Layer] = []
        d_in = ctx.d_in
        for _ in range(n):
            block = len(ctx.blocks.widths) if top_level else ctx.block
            copy = ctx.nested(block=block).build_chain(l, d_in)
            copies.append(copy)
            d_in = copy.out_dim
            if top_level:
                ctx.blocks.widths.append(d_in)
        self.copies = nn.ModuleList(copies)
        self.out_dim = d_in

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        for copy in self.copies:
            x = copy(x, ctx)
            if self.records_blocks and ctx.blocks is not None:
                ctx.blocks.append(x)
        return x

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        for copy in self.copies:
            x = copy.step(x, ctx)
        return x


class _Branches(Layer):
    """Shared by concat and parallel: run every branch on the same input."""

    def __init__(self, ctx: BuildContext, l: list[Chain]) -> None:  # noqa: E741
        super().__init__()
        self.branches = nn.ModuleList()
        for chain in l:
            self.branches.append(ctx.build_chain(chain))
            self.check_branches(ctx, chain)

    def check_branches(self, ctx: BuildContext, chain: Chain) -> None:
        """Refuse the branches built so far, ``chain`` the last, before the next one is built."""

    def combine(self, outputs: list[Tensor]) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.combine([branch(x, ctx) for branch in self.branches])

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        return self.combine([branch.step(x, ctx) for branch in self.branches])


@register("concat", BRANCHES, example="concat(linear(8), id)")
class Concat(_Branches):
    """concat(h, l_1, ..., l_p) = [l_1(h); ...; l_p(h)] (width = sum of the branch widths, at most 65536)."""

    def __init__(self, ctx: BuildContext, l: list[Chain]) -> None:  # noqa: E741
        super().__init__(ctx, l)
        self.out_dim = sum(branch.out_dim for branch in self.branches)

    def check_branches(self, ctx: BuildContext, chain: Chain) -> None:
        """The sum of the widths is bounded as one width is, at the branch that exceeds it: 200 × linear(65536)
        was accepted and built branch after branch."""
        widths = [branch.out_dim for branch in self.branches]
        if sum(widths) > MAX_WIDTH:
            sum_of = " + ".join(map(str, widths))
            raise ctx.error(
                f"width must be in 1..{MAX_WIDTH}, got {sum(widths)} (the branches' {sum_of})", column=chain.col
            )

    def combine(self, outputs: list[Tensor]) -> Tensor:
        return torch.cat(outputs, dim=-1)


@register("parallel", BRANCHES, example="parallel(linear, ff)")
class Parallel(_Branches):
    """parallel(h, l_1, ..., l_p) = l_1(h) + ... + l_p(h) (branches must have equal widths)."""

    def __init__(self, ctx: BuildContext, l: list[Chain]) -> None:  # noqa: E741
        super().__init__(ctx, l)
        widths = [branch.out_dim for branch in self.branches]
        if len(set(widths)) > 1:
            raise ctx.error(f"branches must have equal widths to be summed, got {widths}", "l")
        self.out_dim = widths[0]

    def combine(self, outputs: list[Tensor]) -> Tensor:
        return torch.stack(outputs).sum(0)


@register("highway", CHAIN, example="highway(ff)")
class Highway(Layer):
    """highway(h, l) = g ⊙ h + (1 − g) ⊙ l(h), with g = σ(W h + b)."""

    def __init__(self, ctx: BuildContext, l: Chain) -> None:  # noqa: E741
        super().__init__()
        self.inner = _inner_same_width(ctx, l)
        self.gate = nn.Linear(ctx.d_in, ctx.d_in)
        self.out_dim = ctx.d_in

    def mix(self, x: Tensor, transformed: Tensor) -> Tensor:
        gate = torch.sigmoid(self.gate(x))
        return gate * x + (1 - gate) * transformed

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.mix(x, self.inner(x, ctx))

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        return self.mix(x, self.inner.step(x, ctx))
