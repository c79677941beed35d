"""Greedy decoding on the incremental protocol, batched over sentences.

Finished sentences leave the active batch (their decoder state rows are dropped with one gather);
sentences are sorted by length into batches and returned in input order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from adlnmt.data.vocab import BOS, EOS, PAD
from adlnmt.model import Seq2Seq


def pad_batch(sentences: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> Tensor:
    """Right-padded [B, S] LongTensor of token ids."""
    width = max(1, max((len(s) for s in sentences), default=1))
    batch = torch.full((len(sentences), width), PAD, dtype=torch.long)
    for row, sentence in enumerate(sentences):
        batch[row, : len(sentence)] = torch.as_tensor(list(sentence), dtype=torch.long)
    return batch.to(device)


@torch.inference_mode()
def greedy_batch(model: Seq2Seq, src: Tensor, max_len: Tensor) -> list[list[int]]:
    """src [B, S] → the argmax continuation of each sentence (without BOS/EOS), at most
    ``max_len[b]`` tokens for sentence b."""
    batch = src.size(0)
    memory = model.encode(src)
    state = model.init_state(memory)
    alive = torch.arange(batch, device=src.device)  # original row of each active row
    tokens = torch.full((batch,), BOS, dtype=torch.long, device=src.device)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    limit = max_len.to(src.device)
    for step in range(int(limit.max().item()) + 1):
        logits = model.decode_step(tokens, memory, state)  # [B_active, V]
        logits[:, PAD] = float("-inf")
        logits[:, BOS] = float("-inf")
        tokens = logits.argmax(-1)  # [B_active]
        over = limit[alive] <= step
        tokens = torch.where(over, torch.full_like(tokens, EOS), tokens)
        finished = tokens.eq(EOS)
        for row, token in zip(alive[~finished].tolist(), tokens[~finished].tolist(), strict=True):
            outputs[row].append(token)
        if bool(finished.all()):
            break
        if bool(finished.any()):
            keep = (~finished).nonzero().squeeze(1)  # [B_left]
            alive, tokens = alive[keep], tokens[keep]
            state.select(keep)
            memory = memory.select(keep)
    return outputs


def greedy(
    model: Seq2Seq,
    sources: Sequence[Sequence[int]],
    batch_size: int = 64,
    max_len_ratio: float = 2.0,
    max_len_extra: int = 10,
    device: torch.device | str = "cpu",
) -> list[list[int]]:
    """Greedy translations of encoded ``sources`` (each ending with EOS), in input order; each output
    is at most ``max_len_ratio · |source| + max_len_extra`` tokens long."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results: list[list[int]] = [[] for _ in sources]
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            src = pad_batch([sources[i] for i in rows], device)
            lengths = torch.tensor([len(sources[i]) for i in rows])
            max_len = (lengths.float() * max_len_ratio).long() + max_len_extra
            for row, output in zip(rows, greedy_batch(model, src, max_len), strict=True):
                results[row] = output
    finally:
        model.train(was_training)
    return results
