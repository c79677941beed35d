"""The layer contract, as checks any test can run on an ADL chain built on one side.

- width: the output has ``out_dim`` units;
- padding invariance: other padding content, or extra padding, leaves real positions unchanged
  (source padding too, for decoder layers reading the encoder);
- causality (decoder): changing later target positions leaves earlier outputs unchanged;
- incremental decoding: step-by-step output equals the full masked forward pass, also after the
  states were reordered as beam search does and after sentences were dropped from the batch;
- gradients reach every parameter;
- low precision: under bf16 autocast, on the bf16 input a preceding layer gives there, training forward and backward
  run, with a finite output and gradients to every parameter (fp32 buffers updated from bf16 values fail here).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from adlnmt.adl.registry import Side
from adlnmt.layers.base import Context, DecoderState, SourceMemory
from adlnmt.layers.builder import build_chain
from adlnmt.layers.context import BlockInfo, ModelOptions

ATOL = 1e-5
VARIABLES = {"FF_NUM_HIDDEN": "64", "NUM_HIDDEN": "16"}


@dataclass
class Setup:
    layer: nn.Module
    side: Side
    d_in: int
    d_src: int
    source_blocks: int


def build(
    adl: str,
    side: Side,
    d: int = 16,
    heads: int = 4,
    d_src: int | None = None,
    source_blocks: int = 3,
    variables: dict[str, str] | None = None,
) -> Setup:
    from adlnmt.adl.parser import parse_assignments

    assignments = [f"{k}={v}" for k, v in {**VARIABLES, **(variables or {})}.items()]
    d_src = d if d_src is None else d_src
    encoder = BlockInfo(expected=source_blocks, widths=[d_src] * source_blocks) if side is Side.DECODER else None
    layer = build_chain(
        adl,
        side,
        d,
        ModelOptions(d_model=d, heads=heads, dropout=0.1, max_len=64),
        parse_assignments(assignments),
        encoder=encoder,
        encoder_width=d_src,
    )
    return Setup(layer, side, d, d_src, source_blocks)


def lengths_mask(lengths: list[int], total: int) -> Tensor:
    return torch.arange(total).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # [B, T]


def make_memory(setup: Setup, batch: int, src_len: int = 7, generator: torch.Generator | None = None) -> SourceMemory:
    src_lengths = [src_len - (i % 3) for i in range(batch)]
    mask = lengths_mask(src_lengths, src_len)
    blocks = [torch.randn(batch, src_len, setup.d_src, generator=generator) for _ in range(setup.source_blocks)]
    return SourceMemory(torch.randn(batch, src_len, setup.d_src, generator=generator), mask, blocks)


def context(setup: Setup, mask: Tensor | None, memory: SourceMemory | None) -> Context:
    return Context(mask=mask, memory=memory if setup.side is Side.DECODER else None, blocks=[])


def without_dropout(module: nn.Module) -> None:
    """Every dropout off: nn.Dropout modules and the attentions' dropout of their weights (``att_dropout``)."""
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if hasattr(m, "att_dropout"):
            m.att_dropout = 0.0


def full(setup: Setup, x: Tensor, mask: Tensor | None, memory: SourceMemory | None) -> Tensor:
    return setup.layer(x, context(setup, mask, memory))


def check_width(setup: Setup) -> None:
    setup.layer.eval()
    x = torch.randn(3, 6, setup.d_in)
    memory = make_memory(setup, 3)
    out = full(setup, x, torch.ones(3, 6, dtype=torch.bool), memory)
    assert out.shape == (3, 6, setup.layer.out_dim)
    assert torch.isfinite(out).all()


def check_padding_invariance(setup: Setup) -> None:
    """Real positions ignore padding content, extra padding and padded source positions."""
    torch.manual_seed(1)
    without_dropout(setup.layer)
    for training in (True, False):
        setup.layer.train(training)
        lengths = [6, 4, 2]
        x = torch.randn(3, 6, setup.d_in)
        mask = lengths_mask(lengths, 6)
        memory = make_memory(setup, 3)
        reference = full(setup, x, mask, memory)
        noisy = torch.where(mask.unsqueeze(-1), x, torch.randn_like(x) * 100)
        longer = torch.cat([noisy, torch.randn(3, 3, setup.d_in)], dim=1)
        for other, other_mask in ((noisy, mask), (longer, lengths_mask(lengths, 9))):
            out = full(setup, other, other_mask, memory)[:, :6]
            assert torch.allclose(out[mask], reference[mask], atol=ATOL), "padding content leaked"
        if setup.side is Side.DECODER:
            src_pad = ~memory.mask
            noisy_memory = SourceMemory(
                memory.final.masked_fill(src_pad.unsqueeze(-1), 55.0),
                memory.mask,
                [b.masked_fill(src_pad.unsqueeze(-1), -33.0) for b in memory.blocks],
            )
            out = full(setup, x, mask, noisy_memory)
            assert torch.allclose(out[mask], reference[mask], atol=ATOL), "source padding leaked"


def check_causality(setup: Setup) -> None:
    """Changing target positions >= t leaves outputs < t unchanged (train and eval mode)."""
    torch.manual_seed(2)
    without_dropout(setup.layer)
    for training in (True, False):
        setup.layer.train(training)
        x = torch.randn(2, 8, setup.d_in)
        mask = torch.ones(2, 8, dtype=torch.bool)
        memory = make_memory(setup, 2)
        reference = full(setup, x, mask, memory)
        for t in (1, 4, 7):
            changed = x.clone()
            changed[:, t:] = torch.randn(2, 8 - t, setup.d_in) * 10
            out = full(setup, changed, mask, memory)
            assert torch.allclose(out[:, :t], reference[:, :t], atol=ATOL), f"future position {t} leaked"


def run_steps(setup: Setup, x: Tensor, ctx: Context, start: int) -> Tensor:
    outputs = []
    for t in range(start, start + x.size(1)):
        ctx.offset = ctx.state.step = t
        outputs.append(setup.layer.step(x[:, t - start : t - start + 1], ctx))  # [B, 1, D_out]
    return torch.cat(outputs, dim=1)


def init(setup: Setup, memory: SourceMemory) -> Context:
    ctx = Context(memory=memory, state=DecoderState(memory.mask.size(0)))
    setup.layer.init_state(ctx)
    return ctx


@torch.no_grad()
def check_incremental(setup: Setup, steps: int = 9) -> None:
    """Step-by-step equals the full pass; also after a beam reorder and after dropping sentences."""
    torch.manual_seed(3)
    setup.layer.eval()
    sentences, beam = 2, 3
    rows = sentences * beam
    base = make_memory(setup, sentences)
    memory = base.select(torch.arange(sentences).repeat_interleave(beam))  # rows of one sentence adjacent
    x = torch.randn(rows, steps, setup.d_in)
    reference = full(setup, x, None, memory)
    ctx = init(setup, memory)
    stepped = run_steps(setup, x, ctx, 0)
    assert stepped.shape == reference.shape
    assert torch.allclose(stepped, reference, atol=ATOL), (stepped - reference).abs().max()

    # Beam reorder after k steps: row i continues the history of row index[i] (same sentence).
    k = 4
    ctx = init(setup, memory)
    run_steps(setup, x[:, :k], ctx, 0)
    index = torch.tensor([2, 0, 0, 4, 5, 3])
    ctx.state.reorder(index)
    future = torch.randn(rows, steps - k, setup.d_in)
    stepped = run_steps(setup, future, ctx, k)
    expected = full(setup, torch.cat([x[index, :k], future], dim=1), None, memory)[:, k:]
    assert torch.allclose(stepped, expected, atol=ATOL), "reordered state differs from re-run history"

    # Dropping the first sentence (all of its hypotheses) from the batch.
    keep = torch.arange(beam, rows)
    ctx = init(setup, memory)
    run_steps(setup, x[:, :k], ctx, 0)
    ctx.state.select(keep)
    ctx.memory = memory.select(keep)
    stepped = run_steps(setup, future[keep], ctx, k)
    expected = full(setup, torch.cat([x[keep, :k], future[keep]], dim=1), None, ctx.memory)[:, k:]
    assert torch.allclose(stepped, expected, atol=ATOL), "selected state differs from re-run history"


def training_pass(setup: Setup, seed: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """One forward and backward pass in training mode on a random ``dtype`` input (bf16: under bf16 autocast, as a
    preceding autocast layer hands it on), with the output weighted at random; (input, output)."""
    torch.manual_seed(seed)
    setup.layer.train()
    x = torch.randn(3, 6, setup.d_in).to(dtype).requires_grad_()
    memory = make_memory(setup, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        out = full(setup, x, lengths_mask([6, 5, 3], 6), memory)
    (out.float() * torch.randn(out.shape)).sum().backward()
    return x, out


def check_gradients(setup: Setup) -> None:
    x, _ = training_pass(setup, seed=4)
    for name, param in setup.layer.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, f"no gradient reaches {name}"
    assert x.grad is not None and x.grad.abs().sum() > 0


def check_low_precision(setup: Setup) -> None:
    _, out = training_pass(setup, seed=5, dtype=torch.bfloat16)
    assert torch.isfinite(out.float()).all(), "non-finite output under bf16 autocast"
    for name, param in setup.layer.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), f"no finite bf16 gradient for {name}"


def check_contract(adl: str, side: Side, **kwargs) -> Setup:
    """Every check that applies to ``adl`` on ``side``."""
    setup = build(adl, side, **kwargs)
    check_width(setup)
    check_padding_invariance(setup)
    check_gradients(setup)
    check_low_precision(setup)
    if side is Side.DECODER:
        check_causality(setup)
        check_incremental(setup)
    return setup
