"""What a layer constructor knows at build time: its side, input width, model options, blocks, and how
to build the chains it takes as arguments (a function the builder provides, so layers never import it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from adlnmt.adl.errors import ADLError
from adlnmt.adl.registry import Side
from adlnmt.adl.syntax import Chain, LayerNode
from adlnmt.layers.base import Layer

MAX_WIDTH = 1 << 16


@dataclass(frozen=True)
class ModelOptions:
    """Model-wide values that layer arguments default to."""

    d_model: int = 512
    heads: int = 8
    dropout: float = 0.1
    ff_factor: int = 4  # ffl: hidden width = ff_factor · d_in
    max_len: int = 1024  # table size of learned positional embeddings

    def __post_init__(self) -> None:
        if not 1 <= self.d_model <= MAX_WIDTH:
            raise ADLError(f"d_model must be in 1..{MAX_WIDTH}, got {self.d_model}")
        if self.heads < 1:
            raise ADLError(f"heads must be >= 1, got {self.heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ADLError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.ff_factor < 1 or self.max_len < 1:
            raise ADLError("ff_factor and max_len must be >= 1")


@dataclass
class BlockInfo:
    """The blocks (repetitions of top-level ``repeat`` s) of one side, shared while building it."""

    expected: int = 0  # counted from the tree before building
    widths: list[int] = field(default_factory=list)  # output width of every block built so far


@dataclass
class BuildContext:
    """What a layer constructor knows: where it is, its input width, model options, error anchor.

    ``chain_builder`` builds a chain in a given context (the builder's chain builder).
    """

    side: Side
    d_in: int
    options: ModelOptions
    chain_builder: Callable[[Chain, BuildContext], Layer]
    text: str = ""
    where: str = ""
    node: LayerNode | None = None
    columns: Mapping[str, int] = field(default_factory=dict)
    depth: int = 0  # 0 = the side's top-level chain
    block: int | None = None  # index of the enclosing top-level repetition (None outside)
    blocks: BlockInfo = field(default_factory=BlockInfo)
    encoder: BlockInfo | None = None  # encoder blocks, for the decoder's source attentions
    encoder_width: int | None = None  # width of the encoder's final output

    def option(self, name: str) -> Any:
        return self.d_in if name == "d_in" else getattr(self.options, name)

    def error(self, message: str, param: str | None = None, column: int | None = None) -> ADLError:
        """An error naming the current layer, with the caret at ``column``, else under ``param`` (or the layer)."""
        col = column if column is not None else self.columns.get(param) if param else None
        if col is None and self.node is not None:
            col = self.node.col
        name = self.node.name if self.node else "?"
        return ADLError(f"{name} in the {self.side.value}: {message}", self.text, col, self.where)

    def nested(self, **changes: Any) -> BuildContext:
        return replace(self, **changes)

    def build_chain(self, chain: Chain, d_in: int | None = None) -> Layer:
        """Build a nested chain (an argument of this layer) on the same side."""
        width = self.d_in if d_in is None else d_in
        return self.chain_builder(chain, self.nested(d_in=width, depth=self.depth + 1, node=None, columns={}))

    def check_width(self, width: int, param: str) -> int:
        if not 1 <= width <= MAX_WIDTH:
            raise self.error(f"width must be in 1..{MAX_WIDTH}, got {width}", param)
        return width
