"""Seq2Seq: embeddings → encoder chain → decoder chain → output projection, all from two ADL strings.

Incremental decoding: ``encode`` once, ``init_state`` once per batch of hypotheses, then one
``decode_step`` call per target position (a single call on the decoder chain).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor, nn

from adlnmt.adl.errors import ADLError
from adlnmt.adl.parser import parse_assignments
from adlnmt.adl.registry import Side
from adlnmt.adl.syntax import Literal
from adlnmt.errors import UserError
from adlnmt.layers.base import Context, DecoderState, Layer, Projection, SourceMemory
from adlnmt.layers.basic import LearnPos, Pos
from adlnmt.layers.builder import SideChain, build_chain, canonical
from adlnmt.model_config import INIT_SCHEMES, ModelConfig


def fairseq_init(model: nn.Module) -> None:
    """fairseq 0.12's MultiheadAttention initialisation for every attention ``Projection`` inside ``model``:
    Xavier-uniform weights (each fused part on its own, scaled by its gain: 1/√2 for queries, keys and values),
    the output projection's bias zero; the query/key/value biases and every other linear layer (the FFN's
    included) keep PyTorch's nn.Linear initialisation, as in fairseq."""
    for module in model.modules():
        if isinstance(module, Projection):
            for part in module.weight.data.chunk(module.parts):
                nn.init.xavier_uniform_(part, gain=module.gain)
            if module.zero_bias:
                nn.init.zeros_(module.bias)


def iter_layers(layer: nn.Module) -> Iterator[Layer]:
    for module in layer.modules():
        if isinstance(module, Layer):
            yield module


def _table_limit(chain: nn.Module) -> int | None:
    """The rows of the smallest learned position table in ``chain`` (None: it has none)."""
    return min((layer.table.size(0) for layer in iter_layers(chain) if isinstance(layer, LearnPos)), default=None)


class Seq2Seq(nn.Module):
    """p(y_t | y_<t, x) = softmax(W_o z^L_t + b_o), z^L = decoder(E_tgt y, encoder(E_src x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.options = config.options()
        # $DROPOUT (the model's dropout rate, used by adlnmt.published.as_run) unless the configuration sets it
        self.variables = {
            "DROPOUT": Literal("float", float(config.dropout)),
            **parse_assignments([f"{k}={v}" for k, v in config.variables.items()]),
        }
        d = config.d_model
        self.encoder = build_chain(config.encoder, Side.ENCODER, d, self.options, self.variables)
        decoder_in = d + (self._decoder_out_width() if config.input_feeding else 0)
        self.decoder = self._build_decoder(decoder_in)
        if not any(layer.reads_source for layer in iter_layers(self.decoder)):
            raise ADLError(
                "the decoder has no source attention layer, so the translation could not depend on the "
                "source; add one, e.g. res_nd(mh_dot_src_att)",
                config.decoder,
                None,
                "decoder",
            )
        self.canonical_encoder = canonical(config.encoder, self.variables)
        self.canonical_decoder = canonical(config.decoder, self.variables)
        self.src_embed = nn.Embedding(config.src_vocab_size, d, padding_idx=config.pad_id)
        self.tgt_embed = nn.Embedding(config.tgt_vocab_size, d, padding_idx=config.pad_id)
        self.output = nn.Linear(self.decoder.out_dim, config.tgt_vocab_size)
        if config.init not in INIT_SCHEMES:
            raise UserError(f"unknown init {config.init!r}, expected one of {', '.join(INIT_SCHEMES)}")
        if config.init == "fairseq":
            fairseq_init(self.encoder)
            fairseq_init(self.decoder)
            nn.init.normal_(self.output.weight, std=self.decoder.out_dim**-0.5)  # fairseq's untied output
            nn.init.zeros_(self.output.bias)  # fairseq has none
        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, std=d**-0.5)
            with torch.no_grad():
                embedding.weight[config.pad_id].zero_()
        if config.tie_source:
            if config.src_vocab_size != config.tgt_vocab_size:
                raise ADLError("tying source and target embeddings needs one joint vocabulary (equal sizes)")
            self.src_embed.weight = self.tgt_embed.weight
        if config.tie_output:
            if self.decoder.out_dim != d:
                raise ADLError(f"tying the output projection needs decoder width {self.decoder.out_dim} == d_model {d}")
            self.output.weight = self.tgt_embed.weight

    def _build_decoder(self, d_in: int) -> SideChain:
        return build_chain(
            self.config.decoder,
            Side.DECODER,
            d_in,
            self.options,
            self.variables,
            encoder=self.encoder.blocks,
            encoder_width=self.encoder.out_dim,
        )

    def _decoder_out_width(self) -> int:
        """Input feeding makes the decoder's input width d + (its own output width): probe the output
        width on the meta device (no memory) and reject decoders whose output width follows the input."""
        with torch.device("meta"):
            widths = [self._build_decoder(d_in).out_dim for d_in in (self.config.d_model, 2 * self.config.d_model)]
        if widths[0] != widths[1]:
            raise ADLError(
                "input feeding needs a decoder whose output width does not depend on its input width "
                "(end it with a layer that sets the width, like ff or linear)",
                self.config.decoder,
                None,
                "decoder",
            )
        return widths[0]

    # --- length limits ---------------------------------------------------------------------------

    def position_limits(self) -> tuple[int | None, int | None]:
        """The most positions the encoder reads (source tokens, EOS and markers counted) and the decoder reads (BOS
        and the target tokens before EOS): the smallest learned position table (``learn_pos``) of each side; None
        where nothing bounds it (sinusoidal positions). The one home of the model's length limits: training checks
        its data against them, the search stops within them and the translators cut their inputs to them."""
        return _table_limit(self.encoder), _table_limit(self.decoder)

    def cover_positions(self, length: int, device: torch.device) -> None:
        """Fill the sinusoid tables (``pos``) for ``length`` positions on ``device`` now: a table grown inside a
        compiled training step makes torch.compile compile the whole step again."""
        for layer in self.modules():
            if isinstance(layer, Pos):
                layer.cover(length, device)

    @property
    def max_output_len(self) -> int | None:
        """The most tokens (EOS not counted) an output may have: the decoder reads BOS and each of them."""
        decoder = self.position_limits()[1]
        return None if decoder is None else decoder - 1

    # --- encoder ---------------------------------------------------------------------------------

    def encode(self, src: Tensor) -> SourceMemory:
        """src: [B, S] token ids (pad = config.pad_id) → memory with final [B, S, d_enc]."""
        mask = src.ne(self.config.pad_id)  # [B, S]
        ctx = Context(mask=mask, blocks=[])
        final = self.encoder(self.src_embed(src), ctx)
        return SourceMemory(final, mask, ctx.blocks or [])

    # --- teacher-forced training pass ---------------------------------------------------------------

    def forward(self, src: Tensor, tgt_in: Tensor, project: bool = True) -> Tensor:
        """src [B, S], tgt_in [B, T] (bos y_1 … y_{T−1}) → logits [B, T, V_tgt]; with ``project=False`` the
        decoder's output states [B, T, d_out] before the output projection (for a fused loss)."""
        states = self.decoder_states(tgt_in, self.encode(src))
        return self.output(states) if project else states

    def decode_full(self, tgt_in: Tensor, memory: SourceMemory, attention: list[Tensor] | None = None) -> Tensor:
        """The decoder on a whole (teacher-forced or re-fed) prefix: tgt_in [B, T] → logits [B, T, V_tgt]."""
        return self.output(self.decoder_states(tgt_in, memory, attention))

    def decoder_states(self, tgt_in: Tensor, memory: SourceMemory, attention: list[Tensor] | None = None) -> Tensor:
        """tgt_in [B, T] → the decoder chain's output [B, T, d_out]. Input feeding forbids parallelism over time:
        it runs the step protocol (with gradients), and the output projection, which the recurrence does not read,
        comes once afterwards for all positions."""
        if self.config.input_feeding:
            state = self.init_state(memory)
            return torch.cat(
                [self._step_states(tgt_in[:, t], memory, state, attention) for t in range(tgt_in.size(1))], dim=1
            )
        ctx = Context(mask=tgt_in.ne(self.config.pad_id), memory=memory, attention=attention)
        return self.decoder(self.tgt_embed(tgt_in), ctx)

    # --- incremental decoding ---------------------------------------------------------------------

    def init_state(self, memory: SourceMemory) -> DecoderState:
        batch = memory.mask.size(0)
        state = DecoderState(batch)
        self.decoder.init_state(Context(memory=memory, state=state))
        if self.config.input_feeding:
            previous = memory.final.new_zeros(batch, self.decoder.out_dim)  # z^L_0 = 0
            state.set(self, "previous_output", previous)
        return state

    def decode_step(
        self, tokens: Tensor, memory: SourceMemory, state: DecoderState, attention: list[Tensor] | None = None,
        project: bool = True,
    ) -> Tensor:  # fmt: skip
        """tokens [B] (the previous target token) → logits [B, V_tgt]; advances ``state``. With ``attention``
        a list, every source attention appends its probabilities [B, heads, 1, S] to it. With ``project=False``
        the decoder's output states [B, d_out] before the output projection (e.g. for a vocabulary slice)."""
        states = self._step_states(tokens, memory, state, attention).squeeze(1)
        return self.output(states) if project else states

    def _step_states(
        self, tokens: Tensor, memory: SourceMemory, state: DecoderState, attention: list[Tensor] | None
    ) -> Tensor:
        """tokens [B] → the decoder chain's output z [B, 1, d_out] of this step; advances ``state``."""
        x = self.tgt_embed(tokens).unsqueeze(1)  # [B, 1, d]
        if self.config.input_feeding:
            x = torch.cat([state.get(self, "previous_output").unsqueeze(1), x], dim=-1)  # [B, 1, d_out + d]
        ctx = Context(offset=state.step, memory=memory, state=state, attention=attention)
        z = self.decoder.step(x, ctx)  # [B, 1, d_out]
        if self.config.input_feeding:
            state.set(self, "previous_output", z.squeeze(1))
        state.step += 1
        return z

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


def describe_parameters(model: Seq2Seq) -> list[tuple[str, int]]:
    """Parameter counts of the model's parts (tied weights counted once, where they first occur)."""
    seen: set[int] = set()
    parts = []
    for name, module in (
        ("source embedding", model.src_embed),
        ("encoder", model.encoder),
        ("target embedding", model.tgt_embed),
        ("decoder", model.decoder),
        ("output projection", model.output),
    ):
        count = 0
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                count += p.numel()
        parts.append((name, count))
    return parts
