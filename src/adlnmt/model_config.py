"""What rebuilds a model, without PyTorch: :class:`ModelConfig` (stored with every model and export) and the
weight initialisation schemes. The model itself is :class:`adlnmt.model.Seq2Seq`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adlnmt.layers.context import ModelOptions

# torch: PyTorch's own defaults (nn.Linear: uniform ±1/√fan_in weights and biases);
# fairseq: fairseq's Transformer init for the attention projections and the output bias (see ``fairseq_init``).
INIT_SCHEMES = ("torch", "fairseq")


@dataclass
class ModelConfig:
    """Everything needed to rebuild a model; stored (canonical ADL included) with every model."""

    encoder: str
    decoder: str
    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 512
    heads: int = 8
    dropout: float = 0.1
    ff_factor: int = 4
    max_len: int = 1024
    variables: dict[str, str] = field(default_factory=dict)
    tie_output: bool = False  # target embedding = output projection weights
    tie_source: bool = False  # source embedding = target embedding (joint vocabulary)
    input_feeding: bool = False  # z⁰_t = [z^L_{t−1}; E y_t] (Luong et al.)
    pad_id: int = 0
    init: str = "torch"  # weight initialisation, one of INIT_SCHEMES

    def options(self) -> ModelOptions:
        from adlnmt.layers.context import ModelOptions

        return ModelOptions(self.d_model, self.heads, self.dropout, self.ff_factor, self.max_len)

    def to_dict(self) -> dict:
        return asdict(self)
