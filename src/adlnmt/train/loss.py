"""The training loss: label-smoothed cross-entropy of the output projection, fused and chunked.

``projected_cross_entropy(hidden, weight, bias, targets, smoothing)`` equals
``F.cross_entropy(F.linear(hidden, weight, bias), targets, ignore_index=PAD, label_smoothing=smoothing,
reduction="sum")`` — per non-padding row, (1 − ε)·(−log p_y) + ε·(−Σ_v log p_v) / V — but never holds the
[N, V] logits: rows go through in chunks, and each chunk's gradients (softmax − smoothed one-hot, then the two
matrix products of the projection's backward) are computed right away and kept for ``backward``. That saves
the full-size log-softmax passes and a few hundred MB per batch (on a CPU; off it a chunk is as large as
``SPEEDUPS.accelerator_loss_chunk_mib`` allows, see :func:`chunk_rows_for`); the arithmetic is the same three matrix
products, and each chunk makes four passes over its [c, V] logits (max, sum, softmax, column sums for the bias).
The matrix products run in autocast's dtype where autocast is on (as ``F.linear`` would: also when ``hidden`` is fp32,
as it is after a final layer norm), else in the dtype of ``hidden``; softmax and loss in fp32.
"""

from __future__ import annotations

import torch
from torch import Tensor

from adlnmt.data.vocab import PAD
from adlnmt.speedups import SPEEDUPS

CHUNK_ROWS = 1024  # rows of logits at a time on a CPU: [1024, V] fp32 (32 MB for V = 8k)


def chunk_rows_for(device: torch.device, vocab: int) -> int:
    """Rows of logits per chunk: CHUNK_ROWS on a CPU (or with the speedup off); elsewhere as many as
    ``SPEEDUPS.accelerator_loss_chunk_mib`` of [c, vocab] fp32 logits hold, at least CHUNK_ROWS."""
    budget = SPEEDUPS.accelerator_loss_chunk_mib
    if device.type == "cpu" or budget <= 0:
        return CHUNK_ROWS
    return max(CHUNK_ROWS, budget * 2**20 // (4 * vocab))


class _ProjectedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        hidden: Tensor,  # [N, d]
        weight: Tensor,  # [V, d]
        bias: Tensor | None,  # [V]
        targets: Tensor,  # [N]
        smoothing: float,
        chunk_rows: int,
    ) -> Tensor:
        vocab, device = weight.size(0), hidden.device.type
        compute = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
        with torch.autocast(device, enabled=False):
            w = weight.to(compute)
            w_sum = w.sum(0)  # [d]: Σ_v W_v, for the smoothing term of d loss / d h
            grad_hidden = torch.empty_like(hidden)
            grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
            grad_bias = None if bias is None else torch.zeros(vocab, dtype=torch.float32, device=bias.device)
            total = torch.zeros((), dtype=torch.float32, device=hidden.device)
            for start in range(0, hidden.size(0), chunk_rows):
                y = targets[start : start + chunk_rows].unsqueeze(1)  # [c, 1]
                h = hidden[start : start + chunk_rows].to(compute)  # [c, d]
                logits = (h @ w.T).float()  # [c, V]
                if bias is not None:
                    logits += bias
                # log-sum-exp without a full-size temporary: lse = max − log softmax(max) (softmax(max) ≥ 1 / V).
                top, best = logits.max(dim=-1, keepdim=True)  # [c, 1]
                logit_sum = logits.sum(dim=-1, keepdim=True)
                target_logit = logits.gather(1, y)
                probs = torch.softmax(logits, dim=-1)  # d loss / d logits before the smoothing terms
                del logits
                lse = top - probs.gather(1, best).log()
                keep = y.ne(PAD)  # [c, 1]
                # per row: −(1 − ε)·log p_y − (ε / V)·Σ_v log p_v, with Σ_v log p_v = Σ_v logit_v − V·lse
                rows = (1 - smoothing) * (target_logit - lse) + (smoothing / vocab) * (logit_sum - vocab * lse)
                total -= rows.masked_fill(~keep, 0.0).sum()
                # d loss / d logits = probs − (1 − ε)·onehot(y) − ε / V on kept rows: the two constant terms are
                # applied to the products below (cheap) instead of to the [c, V] matrix.
                # padding rows masked without reading how many there are (on a GPU a read waits for the device)
                probs.masked_fill_(~keep, 0.0)
                hk = h.masked_fill(~keep, 0)  # [c, d]
                grad = probs.to(compute)
                # d loss / d h = probs·W − (1 − ε)·W[y] − (ε / V)·Σ_v W_v
                block = grad_hidden[start : start + chunk_rows]
                if block.dtype == compute:
                    torch.matmul(grad, w, out=block)
                else:  # fp32 hidden under autocast: the product in its dtype, the gradient in the hidden's
                    block.copy_(grad @ w)
                block -= (1 - smoothing) * w[y.squeeze(1)] + (smoothing / vocab) * w_sum
                block.masked_fill_(~keep, 0)
                # d loss / d W = probsᵀ·h − (1 − ε)·Σ_{rows with y = v} h − (ε / V)·Σ_rows h
                grad_weight += (grad.T @ hk).float()
                grad_weight.index_add_(0, y.squeeze(1), hk.float(), alpha=smoothing - 1)
                grad_weight -= (smoothing / vocab) * hk.float().sum(0)
                if grad_bias is not None:
                    grad_bias += probs.sum(0)
                    grad_bias.index_add_(0, y.squeeze(1), keep.squeeze(1).float(), alpha=smoothing - 1)
                    grad_bias -= (smoothing / vocab) * keep.sum()
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        ctx.weight_dtype = weight.dtype
        return total

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_total: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        return (
            grad_hidden * grad_total.to(grad_hidden.dtype),
            (grad_weight * grad_total).to(ctx.weight_dtype),
            None if grad_bias is None else grad_bias * grad_total,
            None,
            None,
            None,
        )


def projected_cross_entropy(
    hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor, smoothing: float = 0.0,
    chunk_rows: int | None = None,
) -> Tensor:  # fmt: skip
    """Summed label-smoothed cross-entropy of ``hidden @ weight.T + bias`` against ``targets`` (PAD rows
    ignored): hidden [..., d], targets [...] → a scalar, in chunks of ``chunk_rows`` rows (None:
    :func:`chunk_rows_for` the device). See the module docstring."""
    rows = chunk_rows or chunk_rows_for(hidden.device, weight.size(0))
    return _ProjectedCrossEntropy.apply(hidden.flatten(0, -2), weight, bias, targets.flatten(), smoothing, rows)
