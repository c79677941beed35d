"""The layer contract every ADL layer implements, and the runtime context it reads.

Full (parallel) mode: ``forward(x, ctx)`` with ``x`` of shape [B, T, d_in] → [B, T, out_dim]; padding
positions (``ctx.mask`` False) may hold anything and must not change real positions; in the decoder
no output may depend on later positions.

Incremental mode (decoder only): ``init_state(ctx)`` once per batch of sentences, then
``step(x, ctx)`` with ``x`` of shape [B, 1, d_in] at position ``ctx.offset``; state lives in
``ctx.state`` (a :class:`DecoderState`) so a whole decoder step is one call on the top chain, and
beam search reorders every layer's state with one gather per tensor.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor, nn

from adlnmt.adl.registry import LayerSpec, Side
from adlnmt.layers.growing_tensor import GrowingTensor


class Projection(nn.Linear):
    """An attention projection: an ``nn.Linear`` holding ``parts`` stacked projections of ``d_out`` rows each
    (W^Q, W^K, W^V fused into one product). The fairseq initialisation (``adlnmt.model.fairseq_init``) draws each
    part Xavier-uniform scaled by ``gain`` and zeroes the bias where ``zero_bias``."""

    def __init__(self, d_in: int, d_out: int, parts: int = 1, gain: float = 1.0, zero_bias: bool = False) -> None:
        super().__init__(d_in, parts * d_out)
        self.parts = parts
        self.gain = gain
        self.zero_bias = zero_bias


@dataclass
class SourceMemory:
    """Encoder output for the decoder's source attentions.

    ``final``: [B, S, d_enc] top of the encoder; ``blocks``: the output of every repetition of the
    encoder's top-level ``repeat`` (for ``source=increasing|decreasing``); ``mask``: [B, S], True at
    real source tokens.
    """

    final: Tensor
    mask: Tensor
    blocks: list[Tensor] = field(default_factory=list)

    def block(self, index: int | None) -> Tensor:
        return self.final if index is None else self.blocks[index]

    def select(self, index: Tensor) -> SourceMemory:
        """Keep/repeat sentences along the batch: ``index`` [B'] of batch rows."""
        return SourceMemory(
            self.final.index_select(0, index),
            self.mask.index_select(0, index),
            [b.index_select(0, index) for b in self.blocks],
        )


class DecoderState:
    """All cached tensors of one incremental decode, batch-first, keyed by (layer, name).

    ``dynamic`` entries change every step (RNN states, running sums, conv windows); ``growing`` ones
    gain positions every step (key/value caches); ``static`` ones depend on the source only (projected
    source keys/values). Every tensor has the batch (sentence × hypothesis) as dimension 0.
    """

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.step = 0
        self.dynamic: dict[tuple[int, str], Tensor] = {}
        self.static: dict[tuple[int, str], Tensor] = {}
        self.growing: dict[tuple[int, str], GrowingTensor] = {}

    def append(self, layer: nn.Module, name: str, value: Tensor, dim: int) -> Tensor:
        """Append ``value`` to the growing entry (created by the first append); returns all of it."""
        key = (id(layer), name)
        if key not in self.growing:
            self.growing[key] = GrowingTensor(value, dim)
            return self.growing[key].view
        return self.growing[key].append(value)

    def get(self, layer: nn.Module, name: str) -> Tensor:
        key = (id(layer), name)
        return self.dynamic[key] if key in self.dynamic else self.static[key]

    def has(self, layer: nn.Module, name: str) -> bool:
        key = (id(layer), name)
        return key in self.dynamic or key in self.static

    def set(self, layer: nn.Module, name: str, value: Tensor, static: bool = False) -> None:
        (self.static if static else self.dynamic)[(id(layer), name)] = value

    def reorder(self, index: Tensor) -> None:
        """Beam search: row i becomes old row ``index[i]``; ``index`` must stay within each
        sentence's hypotheses, so static (per-sentence) entries need no gather."""
        self.dynamic = {k: v.index_select(0, index) for k, v in self.dynamic.items()}
        if not self.growing:
            return
        moved = index.ne(torch.arange(index.numel(), device=index.device)).nonzero().squeeze(1)
        for entry in self.growing.values():
            entry.reorder(index, moved)

    def select(self, index: Tensor) -> None:
        """Any change of batch rows (dropping finished sentences, expanding to beams)."""
        self.dynamic = {k: v.index_select(0, index) for k, v in self.dynamic.items()}
        for entry in self.growing.values():
            entry.select(index)
        self.static = {k: v.index_select(0, index) for k, v in self.static.items()}
        self.batch_size = int(index.numel())


@dataclass
class Context:
    """What a layer may read besides its input.

    mask:   [B, T] bool, True at real positions (full mode); None means every position is real.
    offset: absolute position of ``x[:, 0]`` (the step number in incremental mode).
    memory: encoder output (decoder only).
    state:  the decoder state (incremental mode only).
    blocks: the encoder collects the outputs of its top-level repeat here.
    attention: when a list, source attentions append their probabilities [B, heads, T, S] to it
               (alignments; layers then skip fused kernels that hide the probabilities).
    """

    mask: Tensor | None = None
    offset: int = 0
    memory: SourceMemory | None = None
    state: DecoderState | None = None
    blocks: list[Tensor] | None = None
    attention: list[Tensor] | None = None

    @property
    def incremental(self) -> bool:
        return self.state is not None


def masked_fill_padding(x: Tensor, mask: Tensor | None) -> Tensor:
    """Zero the padding positions of ``x`` [B, T, D] (``mask`` [B, T], True = real)."""
    return x if mask is None else x * mask.unsqueeze(-1).to(x.dtype)


class Layer(nn.Module):
    """Base class of every ADL layer. Subclasses set ``out_dim`` and implement ``forward``.

    Position-wise layers need nothing else: their ``step`` is their ``forward`` on one position.
    Layers that mix positions override ``init_state`` and ``step``; composite layers override
    ``step`` to call their children's ``step`` (``init_state`` reaches children by default).
    """

    spec: ClassVar[LayerSpec | None] = None  # set by ``@register``; None for unregistered helpers (Sequence)
    # computes with cuDNN on a GPU (convolutions, RNNs), which uses TF32 there unless torch.backends.cudnn.allow_tf32
    # is off: such a model's GPU runs are IEEE fp32 only when they turned it off (train.device.full_fp32)
    cudnn: ClassVar[bool] = False
    out_dim: int
    side: Side | None = None  # the side it was built for (set by the builder)
    label: str = ""  # canonical ADL of this layer (set by the builder), for describe/errors
    title: str = ""  # the same without its nested chains: ``repeat(6)``, ``mh_dot_self_att(heads=8)``

    @property
    def reads_source(self) -> bool:
        """Whether this layer attends to the encoder output (a decoder needs at least one that does)."""
        return self.spec is not None and self.spec.source_attention

    def forward(self, x: Tensor, ctx: Context) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self, x: Tensor, ctx: Context) -> Tensor:
        return self(x, ctx)

    def init_state(self, ctx: Context) -> None:
        for child in self.sublayers():
            child.init_state(ctx)

    def sublayers(self) -> Iterator[Layer]:
        """The nearest ADL layers inside this one (looking through ModuleLists and other containers)."""

        def walk(module: nn.Module) -> Iterator[Layer]:
            for child in module.children():
                if isinstance(child, Layer):
                    yield child
                else:
                    yield from walk(child)

        return walk(self)
