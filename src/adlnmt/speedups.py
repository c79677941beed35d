"""Optimisations that must not change results, each with a switch so that tests can prove it (token-identical
search results, or equal losses and gradients up to float rounding, with the switch off) and benchmarks can
measure it.

``SPEEDUPS`` is read at call time by the search and the layers; :func:`speedups_off` switches some
off for the duration of a ``with`` block.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields


@dataclass
class Speedups:
    # Beam search takes its 2k best continuations from the blocks of ≤ topk_block words with the highest
    # maxima instead of a full top-k over k·V scores (exact: the best 2k lie in the 2k best blocks).
    # 0 = full top-k.
    topk_block: int = 128
    # Key/value caches grow inside preallocated buffers (see layers.growing_tensor.GrowingTensor) instead of by
    # torch.cat, and beam reorders gather into a spare buffer.
    preallocate: bool = True
    # Beam search lays out each sentence's continuations so that every parent's first child keeps the
    # parent's row; with preallocated caches a reorder then copies only the rows that changed.
    rows_in_place: bool = True
    # Training: the output projection and the label-smoothed cross-entropy fused and chunked
    # (train.loss.projected_cross_entropy) instead of full [N, V] logits and F.cross_entropy.
    fused_loss: bool = True
    # The fused loss goes through a batch's rows in chunks of [c, V] fp32 logits: off the CPU as many rows as this many
    # MiB of logits hold (one chunk for a batch of up to 8,388 rows at V = 8,000), on a CPU CHUNK_ROWS (1,024). Each
    # chunk is a Python step of about 25 kernel launches, and a GPU update in bf16/fp16 waits on the host's launches
    # (benchmarks/NOTES.md, issue 71's profile). 0 = CHUNK_ROWS everywhere. Up to float rounding: the chunks' sums
    # are added in another order.
    accelerator_loss_chunk_mib: int = 256
    # Search keeps the active sentences and their length limits in host lists and reads each step's ended
    # hypotheses from the device in a few transfers, instead of one device read per active sentence and per
    # ended hypothesis (on a GPU every read waits for the device: a synchronisation).
    host_bookkeeping: bool = True
    # Where the ssru layer's full-sequence pass (training, scoring) computes its recurrence with a parallel scan in
    # ⌈log₂ T⌉ element-wise steps over [B, T, d] (layers.ssru.scan) instead of a loop over the T positions:
    # "accelerator" (off the CPU, where the loop is T dependent kernel launches; on a CPU the loop measured as fast
    # or faster at training batch sizes: benchmarks/NOTES.md), "always" or "never" (the loop).
    ssru_scan: str = "accelerator"


SPEEDUPS = Speedups()
# each optimisation's "switched off" value
OFF = {
    "topk_block": 0,
    "preallocate": False,
    "rows_in_place": False,
    "fused_loss": False,
    "accelerator_loss_chunk_mib": 0,
    "host_bookkeeping": False,
    "ssru_scan": "never",
}


@contextmanager
def speedups_off(*names: str) -> Iterator[None]:
    """Switch the named optimisations off (all of them when none is named) inside the block."""
    chosen = names or tuple(OFF)
    unknown = set(chosen) - {f.name for f in fields(Speedups)}
    if unknown:
        raise ValueError(f"unknown speedups {sorted(unknown)}; known: {sorted(OFF)}")
    saved = {name: getattr(SPEEDUPS, name) for name in chosen}
    try:
        for name in chosen:
            setattr(SPEEDUPS, name, OFF[name])
        yield
    finally:
        for name, value in saved.items():
            setattr(SPEEDUPS, name, value)
