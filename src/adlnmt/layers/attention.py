"""Attention layers: (multi-head) dot self-attention, (multi-head) dot and MLP source attention.

All dot attentions share :func:`attend` (scaled dot product over heads, masks, optional explicit
probabilities) and :func:`split_heads`/:func:`merge_heads`. Shapes: B batch, T queries, S keys,
h heads, d_h = d / h per head.

Incremental decoding: self-attentions cache their keys/values as *growing* state entries (one more
position per step, preallocated; see ``GrowingTensor``); source attentions
project the encoder states once per sentence in ``init_state`` and keep them as *static* entries.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from adlnmt.adl.registry import DECODER_ONLY, FromOption, Kind, Param, Side, register
from adlnmt.layers.base import Context, Layer, Projection
from adlnmt.layers.context import BuildContext

HEADS = Param("heads", Kind.INT, FromOption("heads"), low=1, high=1 << 16, doc="number of attention heads")
SCALE = Param("s", Kind.FLOAT, None, doc="scores are divided by √s (default: the per-head width)")
SOURCE = Param(
    "source",
    Kind.WORD,
    "top",
    choices=("top", "increasing", "decreasing"),
    doc="encoder states attended: the top, the same block (increasing) or the mirrored one (decreasing)",
)
ATT_DROPOUT = Param(
    "att_dropout",
    Kind.FLOAT,
    0.0,
    low=0.0,
    high=0.99,
    doc="dropout on the attention weights while training (the ADL paper's code: the model's dropout)",
)
SOURCE_REASON = "source attention reads the encoder output; there is no source in the encoder"
# fairseq's MultiheadAttention init: Xavier gain of the query/key/value projections (each on its own).
QKV_GAIN = 2**-0.5


# --------------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------------


def split_heads(x: Tensor, heads: int) -> Tensor:
    """[B, T, h·d_h] → [B, h, T, d_h]."""
    batch, length, width = x.shape
    return x.view(batch, length, heads, width // heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """[B, h, T, d_h] → [B, T, h·d_h]."""
    batch, heads, length, width = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * width)


def causal_mask(queries: int, keys: int, device: torch.device) -> Tensor:
    """[T, S] bool, True where query i (at absolute position S − T + i) may see key j ≤ that position."""
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril(keys - queries)


def key_mask(mask: Tensor | None) -> Tensor | None:
    """[B, S] (True = real) → [B, 1, 1, S], broadcastable over heads and queries."""
    return None if mask is None else mask[:, None, None, :]


def nonempty_rows(allowed: Tensor | None) -> Tensor | None:
    """``allowed`` with rows that allow no key (empty sentences) opened up entirely, so that a softmax
    never sees only -inf (NaN); such rows belong to padding and their output is never used."""
    return None if allowed is None else allowed | ~allowed.any(dim=-1, keepdim=True)


def masked_softmax(scores: Tensor, allowed: Tensor | None) -> Tensor:
    """softmax over the last dimension (in float32) with exact zeros where ``allowed`` is False (also
    in rows that allow nothing, which thus sum to 0 instead of being NaN)."""
    safe = nonempty_rows(allowed)
    if safe is not None:
        scores = scores.masked_fill(~safe, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32)
    # The padded keys are already exactly 0; this only zeroes the rows without any allowed key.
    return weights if allowed is None else weights.masked_fill(~allowed, 0.0)


# On CUDA, PyTorch's first choice for bf16/fp16 attention on recent GPUs is cuDNN's, which builds an execution plan
# for every new shape; batches of varying lengths and a growing decoder cache meet new shapes all the time (bf16
# training was many times slower with it on an H100: benchmarks/NOTES.md). The other fused kernels have no such cost.
CUDA_SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def fused_attention(q: Tensor, k: Tensor, v: Tensor, **options: Any) -> Tensor:
    """PyTorch's fused scaled-dot-product attention (on CUDA without cuDNN's, see ``CUDA_SDPA_BACKENDS``); in
    float32 when training in bfloat16 on the CPU, where the bfloat16 backward kernel is much slower than the
    float32 one (figures in benchmarks/NOTES.md)."""
    if q.is_cuda:
        with sdpa_kernel(CUDA_SDPA_BACKENDS):
            return F.scaled_dot_product_attention(q, k, v, **options)
    if q.dtype != torch.bfloat16 or not torch.is_grad_enabled():
        return F.scaled_dot_product_attention(q, k, v, **options)
    with torch.autocast("cpu", enabled=False):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **options).to(torch.bfloat16)


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float,
    allowed: Tensor | None = None,
    causal: bool = False,
    probs: list[Tensor] | None = None,
    dropout: float = 0.0,
) -> Tensor:
    """softmax(q kᵀ · scale) v for every head:
    q [B, h, T, d_h], k [B, h, S, d_h], v [B, h, S, d_v] → [B, h, T, d_v].
    ``dropout``: probability of dropping an attention weight (pass 0 outside training).

    ``allowed``: bool, broadcastable to [B, h, T, S], True = may attend. ``causal``: query i sits at
    position S − T + i and sees keys up to it (the last T of S positions are the queries). When
    ``probs`` is a list the probabilities [B, h, T, S] are computed explicitly and appended to it
    (zero at every masked key). A query row with no allowed key never yields NaN: the fused path
    spreads it over all keys, the explicit one returns zeros (only padding rows can be like that).
    """
    queries, keys = q.size(-2), k.size(-2)
    if causal and queries > 1:
        if allowed is None and probs is None and queries == keys:
            return fused_attention(q, k, v, is_causal=True, scale=scale, dropout_p=dropout)
        tril = causal_mask(queries, keys, q.device)
        allowed = tril if allowed is None else allowed & tril
    if probs is None:
        return fused_attention(q, k, v, attn_mask=nonempty_rows(allowed), scale=scale, dropout_p=dropout)
    weights = masked_softmax(torch.matmul(q, k.transpose(-1, -2)) * scale, allowed)  # [B, h, T, S]
    probs.append(weights)
    return torch.matmul(F.dropout(weights, dropout).to(v.dtype), v)


def _check_heads(ctx: BuildContext, heads: int) -> int:
    if ctx.d_in % heads:
        origin = "" if "heads" in ctx.columns else " (the model's heads option)"
        raise ctx.error(
            f"heads={heads}{origin} must divide the input width {ctx.d_in}; "
            f"choose heads among the divisors of {ctx.d_in}",
            "heads",
        )
    return heads


def _scale(ctx: BuildContext, s: float | None, head_width: int) -> float:
    """The factor 1/√s applied to the scores; s defaults to the per-head width."""
    if s is None:
        return 1.0 / math.sqrt(head_width)
    if not s > 0:
        raise ctx.error(f"the scale s must be > 0, got {s:g}", "s")
    return 1.0 / math.sqrt(s)


# --------------------------------------------------------------------------------------------------
# Self-attention
# --------------------------------------------------------------------------------------------------


@register("mh_dot_self_att", HEADS, SCALE, ATT_DROPOUT, example="res_nd(mh_dot_self_att)")
class MhDotSelfAtt(Layer):
    """mh_dot_self_att(H, h, s) = mh_dot_att(H, H, H, h, s) = [C_1; ...; C_h] W^O (causal in the decoder).

    C_i = softmax(H W_i^Q (H W_i^K)ᵀ / √s) H W_i^V with d/h-wide heads; s defaults to d/h. In the
    encoder padding keys are masked; in the decoder each position sees itself and earlier ones. While
    training, each softmax weight is dropped with probability ``att_dropout``.
    """

    def __init__(self, ctx: BuildContext, heads: int, s: float | None, att_dropout: float) -> None:
        super().__init__()
        width = ctx.d_in
        self.heads = _check_heads(ctx, heads)
        self.scale = _scale(ctx, s, width // self.heads)
        self.att_dropout = att_dropout
        self.causal = ctx.side is Side.DECODER
        self.qkv = Projection(width, width, parts=3, gain=QKV_GAIN)  # fused W^Q, W^K, W^V of all heads
        self.out = Projection(width, width, zero_bias=True)  # W^O
        self.out_dim = width

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """[B, T, d] → queries, keys, values, each [B, h, T, d_h]."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        q, k, v = self.project(x)
        # Targets are right-padded, so in the decoder the causal mask alone keeps real positions off
        # padding, and the fused causal kernel applies.
        allowed = None if self.causal else key_mask(ctx.mask)
        dropout = self.att_dropout if self.training else 0.0
        context = attend(q, k, v, self.scale, allowed, causal=self.causal, dropout=dropout)  # [B, h, T, d_h]
        return self.out(merge_heads(context))

    def init_state(self, ctx: Context) -> None:
        """Nothing to precompute: the first step starts the key/value cache."""

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        assert ctx.state is not None, "step() needs ctx.state (call init_state first)"
        state = ctx.state
        q, k, v = self.project(x)  # [B, h, T_new, d_h]
        k = state.append(self, "k", k, dim=2)  # [B, h, t + T_new, d_h]
        v = state.append(self, "v", v, dim=2)
        context = attend(q, k, v, self.scale, causal=True)  # one new position sees the whole cache
        return self.out(merge_heads(context))


@register("dot_self_att", SCALE, ATT_DROPOUT, example="dot_self_att")
class DotSelfAtt(MhDotSelfAtt):
    """dot_self_att(H, s) = mh_dot_att(H, H, H, 1, s): one projected dot attention head (s defaults to d)."""

    def __init__(self, ctx: BuildContext, s: float | None, att_dropout: float) -> None:
        super().__init__(ctx, 1, s, att_dropout)


# --------------------------------------------------------------------------------------------------
# Source attention
# --------------------------------------------------------------------------------------------------


class SourceAttention(Layer):
    """Shared by the source attentions: which encoder states U they read (``source``) and their width.

    ``top`` reads the encoder's final output; ``increasing`` reads the output of encoder block b in
    decoder block b, ``decreasing`` that of encoder block n − 1 − b (both need as many decoder as
    encoder blocks). Without encoder information at build time ``top`` assumes U is d_model wide.
    Subclasses precompute what depends on U alone in :meth:`precompute`, which ``init_state`` stores as
    static state so that decoding steps never redo it (a step before ``init_state`` does it once).
    """

    STATIC: tuple[str, ...] = ()  # names of the static state entries made by precompute

    def __init__(self, ctx: BuildContext, source: str) -> None:
        super().__init__()
        self.source = source
        self.block: int | None = None  # index into SourceMemory.blocks; None = the final output
        if source == "top":
            self.source_width = ctx.encoder_width if ctx.encoder_width is not None else ctx.options.d_model
            return
        if ctx.block is None:
            raise ctx.error(
                f"source={source} pairs decoder blocks with encoder blocks, so it must be inside the "
                "decoder's top-level repeat",
                "source",
            )
        encoder_blocks = len(ctx.encoder.widths) if ctx.encoder is not None else 0
        if encoder_blocks == 0:
            raise ctx.error(
                f"source={source} reads the encoder's blocks, but the encoder has no top-level repeat",
                "source",
            )
        if ctx.blocks.expected != encoder_blocks:
            raise ctx.error(
                f"source={source} needs as many decoder blocks as encoder blocks, but the decoder has "
                f"{ctx.blocks.expected} and the encoder {encoder_blocks}",
                "source",
            )
        self.block = ctx.block if source == "increasing" else encoder_blocks - 1 - ctx.block
        assert ctx.encoder is not None
        self.source_width = ctx.encoder.widths[self.block]

    def states(self, ctx: Context) -> Tensor:
        """The encoder states U [B, S, d_src] this layer attends to."""
        memory = ctx.memory
        name = self.label or type(self).__name__
        if memory is None:
            raise ValueError(f"{name}: source attention needs ctx.memory")
        if self.block is not None and self.block >= len(memory.blocks):
            raise ValueError(
                f"{name}: reads encoder block {self.block} but the memory holds "
                f"{len(memory.blocks)} blocks (was ctx.blocks collected while encoding?)"
            )
        return memory.block(self.block)

    def source_mask(self, ctx: Context) -> Tensor:
        """[B, 1, 1, S], True at real source tokens."""
        assert ctx.memory is not None
        return ctx.memory.mask[:, None, None, :]

    def precompute(self, states: Tensor) -> tuple[Tensor, ...]:  # pragma: no cover - abstract
        raise NotImplementedError

    def attend_source(self, x: Tensor, pre: tuple[Tensor, ...], ctx: Context) -> Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        return self.attend_source(x, self.precompute(self.states(ctx)), ctx)

    def init_state(self, ctx: Context) -> None:
        assert ctx.state is not None
        for name, value in zip(self.STATIC, self.precompute(self.states(ctx)), strict=True):
            ctx.state.set(self, name, value, static=True)

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        assert ctx.state is not None, "step() needs ctx.state (call init_state first)"
        if not ctx.state.has(self, self.STATIC[0]):
            self.init_state(ctx)
        pre = tuple(ctx.state.get(self, name) for name in self.STATIC)
        return self.attend_source(x, pre, ctx)


@register(
    "mh_dot_src_att",
    HEADS,
    SCALE,
    SOURCE,
    ATT_DROPOUT,
    aliases=("mh_dot_att",),
    sides=DECODER_ONLY,
    side_reason=SOURCE_REASON,
    source_attention=True,
    example="res_nd(mh_dot_src_att)",
)
class MhDotSrcAtt(SourceAttention):
    """mh_dot_src_att(H, U, h, s) = mh_dot_att(H, U, U, h, s) = [C_1; ...; C_h] W^O.

    C_i = softmax(H W_i^Q (U W_i^K)ᵀ / √s) U W_i^V with d/h-wide heads (d = input width, which the
    output keeps); s defaults to d/h. Padded source positions are masked. While training, each softmax
    weight is dropped with probability ``att_dropout``.
    """

    STATIC = ("k", "v")

    def __init__(self, ctx: BuildContext, heads: int, s: float | None, source: str, att_dropout: float) -> None:
        super().__init__(ctx, source)
        width = ctx.d_in
        self.heads = _check_heads(ctx, heads)
        self.scale = _scale(ctx, s, width // self.heads)
        self.att_dropout = att_dropout
        self.query = Projection(width, width, gain=QKV_GAIN)  # W^Q
        self.kv = Projection(self.source_width, width, parts=2, gain=QKV_GAIN)  # fused W^K, W^V
        self.out = Projection(width, width, zero_bias=True)  # W^O
        self.out_dim = width

    def precompute(self, states: Tensor) -> tuple[Tensor, ...]:
        """U [B, S, d_src] → keys, values, each [B, h, S, d_h]."""
        k, v = self.kv(states).chunk(2, dim=-1)
        return split_heads(k, self.heads), split_heads(v, self.heads)

    def attend_source(self, x: Tensor, pre: tuple[Tensor, ...], ctx: Context) -> Tensor:
        k, v = pre
        q = split_heads(self.query(x), self.heads)  # [B, h, T, d_h]
        dropout = self.att_dropout if self.training else 0.0
        context = attend(q, k, v, self.scale, self.source_mask(ctx), probs=ctx.attention, dropout=dropout)
        return self.out(merge_heads(context))


@register(
    "dot_src_att",
    SCALE,
    SOURCE,
    ATT_DROPOUT,
    sides=DECODER_ONLY,
    side_reason=SOURCE_REASON,
    source_attention=True,
    example="dot_src_att",
)
class DotSrcAtt(MhDotSrcAtt):
    """dot_src_att(H, U, s) = mh_dot_att(H, U, U, 1, s): a single projected dot attention head."""

    def __init__(self, ctx: BuildContext, s: float | None, source: str, att_dropout: float) -> None:
        super().__init__(ctx, 1, s, source, att_dropout)


@register(
    "mlp_src_att",
    Param("d", Kind.INT, FromOption("d_model"), low=1, doc="hidden width of the scoring MLP"),
    SOURCE,
    aliases=("mlp_att",),
    sides=DECODER_ONLY,
    side_reason=SOURCE_REASON,
    source_attention=True,
    example="mlp_src_att(8)",
)
class MlpSrcAtt(SourceAttention):
    """mlp_src_att(H, U) = softmax(S) U, S_ij = w_oᵀ tanh(W_q h_i + W_k u_j) (Bahdanau et al.).

    The values are the source states themselves, so the output has the source's width.
    """

    STATIC = ("keys",)

    def __init__(self, ctx: BuildContext, d: int, source: str) -> None:
        super().__init__(ctx, source)
        hidden = ctx.check_width(d, "d")
        self.query = nn.Linear(ctx.d_in, hidden, bias=False)  # W_q
        self.key = nn.Linear(self.source_width, hidden)  # W_k (its bias is the MLP's bias)
        self.score = nn.Linear(hidden, 1, bias=False)  # w_o; a bias would cancel in the softmax
        self.out_dim = self.source_width

    def precompute(self, states: Tensor) -> tuple[Tensor, ...]:
        """U [B, S, d_src] → W_k U [B, S, d]."""
        return (self.key(states),)

    def attend_source(self, x: Tensor, pre: tuple[Tensor, ...], ctx: Context) -> Tensor:
        (keys,) = pre
        hidden = torch.tanh(self.query(x).unsqueeze(2) + keys.unsqueeze(1))  # [B, T, S, d]
        scores = self.score(hidden).squeeze(-1)  # [B, T, S]
        weights = masked_softmax(scores, self.source_mask(ctx)[:, 0])  # mask [B, 1, S] → weights [B, T, S]
        if ctx.attention is not None:
            ctx.attention.append(weights.unsqueeze(1))  # [B, 1, T, S]
        states = self.states(ctx)
        return torch.matmul(weights.to(states.dtype), states)  # [B, T, d_src]
