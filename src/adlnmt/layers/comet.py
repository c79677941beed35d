"""The COMET convolutional subunit (Wang, "Improved Transformer Architecture for Sequence to Sequence
Translation", §2.2, §3.1, §5.2–5.4): stacked gated dilated convolutions whose feature maps are
concatenated with the input and mapped back to the input width.

Encoder: every convolution is centred (``dilation·(k−1)/2`` zeros on both ends of the sentence, the
paper's ``l`` zeros for k = 3) and padding positions are zeroed before each convolution, so a sentence
sees exactly the zeros it would see alone; batch norm takes its statistics over real positions only.
Decoder ("temporal convolutions", §5.2): every convolution is causal (``(k−1)·dilation`` zeros on the
left); in incremental mode each convolution keeps the last ``(k−1)·dilation`` inputs it read as a
state entry, so a step processes one position. Each convolution's padding and window is a
:class:`~adlnmt.layers.window.ConvWindow`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from adlnmt.adl.registry import FromOption, Kind, Param, Side, register
from adlnmt.layers.base import Context, Layer
from adlnmt.layers.basic import FeedForward
from adlnmt.layers.context import BuildContext
from adlnmt.layers.fast_dropout import FastDropout
from adlnmt.layers.norm import BATCH_STATS_REASON, MaskedBatchNorm
from adlnmt.layers.window import ConvWindow

DEFAULT_FEATURES = (64, 32, 16)  # §3.1; the §5.4 4-layer variant is [64, 32, 16, 8] (F_4's 8 is our choice)
DEFAULT_D_FF = {"ffn1": 512, "ffn2": 1024}  # §5.3


class GatedConv(nn.Module):
    """g_{c_in,n_f,l}(x) = tanh(k_f *_l x) ⊗ σ(k_σ *_l x), one Conv1d giving both halves (2·n_f outputs)."""

    def __init__(self, c_in: int, n_f: int, kernel: int, dilation: int, causal: bool) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c_in, 2 * n_f, kernel, dilation=dilation)
        self.window = ConvWindow(c_in, kernel, dilation, causal)

    def forward(self, window: Tensor) -> Tensor:
        """[B, T + reach, C_in] (a padded sequence or a step's window) → [B, T, n_f]."""
        h = self.conv(window.transpose(1, 2)).transpose(1, 2)  # [B, T, 2·n_f]
        f, s = h.chunk(2, dim=-1)  # [B, T, n_f] each
        return torch.tanh(f) * torch.sigmoid(s)


@register(
    "comet_conv",
    Param("features", Kind.INT_LIST, DEFAULT_FEATURES, low=1, doc="n_f of conv layer i (dilation i)"),
    Param("kernel", Kind.INT, 3, low=1, high=64, doc="kernel size k of every conv layer"),
    Param("ffn", Kind.WORD, "none", choices=("none", "ffn1", "ffn2"), doc="output network (§3.1 / §5.3)"),
    Param("d_ff", Kind.INT, None, low=1, doc="hidden width of FFN_2 (default 512 for ffn1, 1024 for ffn2)"),
    Param("norm", Kind.WORD, "batch", choices=("batch", "layer", "none"), doc="norm of each feature map"),
    Param("dropout", Kind.FLOAT, FromOption("dropout"), low=0.0, high=0.99, doc="on feed-forward outputs"),
    example="comet_conv(features=[8, 4], norm=layer)",
)
class CometConv(Layer):
    """comet_conv(x) = leaky_relu(W [F_1; …; F_n; x] + b), F_i = Norm(g_{·,n_i,i}(F_{i−1})), F_0 = x.

    Layer i (1-based) is a gated convolution with ``features[i−1]`` outputs, kernel k and dilation i,
    followed by batch norm over real positions (``norm=batch``, the paper's), layer norm per position
    (``norm=layer``) or nothing. The output width is the input width d; the default W ∈ R^{d × (d+112)}.
    ``ffn=ffn1`` (§5.3 FFN-1): F' = [F_1; …; F_n], x' = LayerNorm(F' + FFN_2(F')), y = FFN_1([x'; x]);
    ``ffn=ffn2`` (FFN-2): y = FFN_2([F_1; …; F_n; x]); FFN_2 has hidden width d_ff and ReLU. Dropout
    is applied to the output of every feed-forward net (§5.3 states it for FFN-1).
    In the decoder the convolutions are causal (§5.2) and batch norm is rejected: its statistics
    would mix in later target positions.
    """

    cudnn = True

    def __init__(
        self,
        ctx: BuildContext,
        features: list[int],
        kernel: int,
        ffn: str,
        d_ff: int | None,
        norm: str,
        dropout: float,
    ) -> None:
        super().__init__()
        self.causal = ctx.side is Side.DECODER
        if self.causal and norm == "batch":
            reason = BATCH_STATS_REASON.split(";")[0]  # "batch statistics ... would leak the future"
            raise ctx.error(f"norm=batch is not allowed: {reason}; use norm=layer (or norm=none)", "norm")
        if ffn == "none" and d_ff is not None:
            raise ctx.error("d_ff is the hidden width of FFN_2 and needs ffn=ffn1 or ffn=ffn2", "d_ff")
        d = ctx.d_in
        widths = [ctx.check_width(n, "features") for n in features]
        self.convs = nn.ModuleList(
            GatedConv(c_in, n_f, kernel, dilation, self.causal)
            for dilation, (c_in, n_f) in enumerate(zip([d, *widths[:-1]], widths, strict=True), start=1)
        )
        self.norms = nn.ModuleList(_feature_norm(norm, n_f) for n_f in widths)
        maps = sum(widths)  # width of [F_1; …; F_n]
        self.ffn = ffn
        self.dropout = FastDropout(dropout)
        if ffn == "ffn1":
            hidden = ctx.check_width(DEFAULT_D_FF[ffn] if d_ff is None else d_ff, "d_ff")
            self.inner = FeedForward(maps, hidden, maps, out_dropout=dropout)
            self.inner_norm = nn.LayerNorm(maps)
        if ffn == "ffn2":
            hidden = ctx.check_width(DEFAULT_D_FF[ffn] if d_ff is None else d_ff, "d_ff")
            self.out = FeedForward(maps + d, hidden, d, out_dropout=dropout)
        else:
            self.out = nn.Linear(maps + d, d)  # FFN_1's W ∈ R^{d × (d + Σ n_i)}
        self.out_dim = d

    def normalize(self, i: int, h: Tensor, mask: Tensor | None) -> Tensor:
        norm = self.norms[i]
        return norm(h, mask) if isinstance(norm, MaskedBatchNorm) else norm(h)

    def combine(self, maps: list[Tensor], x: Tensor) -> Tensor:
        """Position-wise output net on the feature maps (each [B, T, n_i]) and the input x [B, T, d]."""
        features = torch.cat(maps, dim=-1)  # [B, T, Σ n_i]
        if self.ffn == "ffn2":
            return self.out(torch.cat([features, x], dim=-1))  # [B, T, d]
        if self.ffn == "ffn1":
            features = self.inner_norm(features + self.inner(features))
        return self.dropout(F.leaky_relu(self.out(torch.cat([features, x], dim=-1))))  # [B, T, d]

    def feature_maps(self, x: Tensor, ctx: Context, incremental: bool) -> list[Tensor]:
        """F_1, …, F_n (each [B, T, n_i]) of the input x [B, T, d]; incremental: T = 1 and each conv
        reads its previous inputs from, and appends its current input to, its state window."""
        maps: list[Tensor] = []
        h = x
        for i, conv in enumerate(self.convs):
            if incremental:
                assert ctx.state is not None
                window = conv.window.slide(h, ctx.state, self, f"window{i}")  # [B, reach + 1, C_in]
            else:
                window = conv.window.pad(h, ctx.mask)  # [B, T + reach, C_in]
            h = self.normalize(i, conv(window), ctx.mask)  # [B, T, n_i]
            maps.append(h)
        return maps

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.combine(self.feature_maps(x, ctx, incremental=False), x)

    def init_state(self, ctx: Context) -> None:
        assert ctx.state is not None
        for i, conv in enumerate(self.convs):
            conv.window.init_state(ctx.state, self, f"window{i}", conv.conv.weight)  # [B, reach, C_in]

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        return self.combine(self.feature_maps(x, ctx, incremental=True), x)  # x: [B, 1, d] → [B, 1, d]


def _feature_norm(kind: str, width: int) -> nn.Module:
    if kind == "batch":
        return MaskedBatchNorm(width)
    return nn.LayerNorm(width) if kind == "layer" else nn.Identity()
