from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from adlnmt.data.vocab import PAD
from adlnmt.speedups import speedups_off
from adlnmt.train.loss import CHUNK_ROWS, chunk_rows_for, projected_cross_entropy


def leaves(*tensors: torch.Tensor | None) -> list[torch.Tensor | None]:
    return [None if t is None else t.clone().requires_grad_() for t in tensors]


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("with_bias", [True, False])
def test_equals_cross_entropy_of_the_projection(smoothing: float, with_bias: bool) -> None:
    """Loss and every gradient equal F.cross_entropy(F.linear(...)) (PAD rows ignored), chunked or not."""
    torch.manual_seed(0)
    hidden, weight, bias = torch.randn(3, 7, 16), torch.randn(50, 16) * 0.3, torch.randn(50) if with_bias else None
    targets = torch.randint(4, 50, (3, 7))
    targets[0, 5:] = PAD
    targets[2, 1] = PAD
    h, w, b = leaves(hidden, weight, bias)
    expected = F.cross_entropy(F.linear(h, w, b).flatten(0, 1), targets.flatten(), ignore_index=PAD,
                               label_smoothing=smoothing, reduction="sum")  # fmt: skip
    (expected * 0.5).backward()
    for chunk_rows in (4, 21, 1024):  # a partial last chunk, exactly one chunk, more rows than needed
        h2, w2, b2 = leaves(hidden, weight, bias)
        got = projected_cross_entropy(h2, w2, b2, targets, smoothing, chunk_rows)
        (got * 0.5).backward()
        assert got.item() == pytest.approx(expected.item(), rel=1e-5)
        assert torch.allclose(h2.grad, h.grad, atol=1e-5)
        assert torch.allclose(w2.grad, w.grad, atol=1e-5)
        assert b is None or torch.allclose(b2.grad, b.grad, atol=1e-5)
        assert h2.grad[0, 5:].abs().sum() == 0  # padding rows get no gradient


def test_under_bf16_autocast_the_products_run_in_bf16() -> None:
    """As the unfused path (F.linear under autocast, then the loss in fp32), also when the hidden states are fp32, as
    they are after a final layer norm (autocast keeps it in fp32): the products were fp32 then (1.8e-5 apart)."""
    torch.manual_seed(3)
    hidden, weight = torch.randn(64, 32), torch.randn(500, 32) * 0.3
    targets = torch.randint(4, 500, (64,))
    h, w = leaves(hidden, weight)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = projected_cross_entropy(h, w, None, targets, 0.1, chunk_rows=16)
        logits = F.linear(hidden, weight)  # [64, 500] bf16
    got.backward()
    reference = F.cross_entropy(logits.float(), targets, label_smoothing=0.1, reduction="sum")
    assert got.dtype == torch.float32 and got.item() == pytest.approx(reference.item(), rel=1e-6)
    assert w.grad.dtype == torch.float32 and h.grad.dtype == torch.float32
    assert torch.isfinite(w.grad).all() and w.grad.abs().sum() > 0


def test_chunks_are_as_large_as_the_budget_off_the_cpu_only() -> None:
    """A CPU keeps 1,024-row chunks; a GPU takes a whole 8k-token batch at V = 8,000 in one chunk (256 MiB of fp32
    logits: 8,388 rows), never fewer rows than on the CPU; switched off, 1,024 rows everywhere."""
    cuda = torch.device("cuda")  # a device object only: nothing runs on it
    assert chunk_rows_for(torch.device("cpu"), 8000) == CHUNK_ROWS == 1024
    assert chunk_rows_for(cuda, 8000) == 8388
    assert chunk_rows_for(cuda, 1_000_000) == CHUNK_ROWS
    with speedups_off("accelerator_loss_chunk_mib"):
        assert chunk_rows_for(cuda, 8000) == CHUNK_ROWS
