"""Every decoder family on CUDA: step-by-step decoding equals the full masked pass; the fused loss equals the
reference loss and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from adlnmt.data.vocab import PAD
from adlnmt.train.loss import projected_cross_entropy
from test_model import MODELS, batch, model

from .conftest import CUDA

pytestmark = CUDA


@pytest.mark.parametrize("name", list(MODELS))
@torch.no_grad()
def test_incremental_decoding_equals_teacher_forcing_on_cuda(name: str, strict_fp32: None) -> None:
    encoder, decoder, feeding = MODELS[name]
    m = model(encoder, decoder, feeding).eval().cuda()
    src, tgt = (t.cuda() for t in batch())
    full = m(src, tgt)  # [B, T, V]
    memory = m.encode(src)
    state = m.init_state(memory)
    steps = torch.stack([m.decode_step(tgt[:, t], memory, state) for t in range(tgt.size(1))], dim=1)
    assert steps.device.type == "cuda" and steps.shape == full.shape == (3, 7, 40)
    assert torch.allclose(steps, full, atol=1e-4), (steps - full).abs().max()
    cpu = model(encoder, decoder, feeding).eval()(*batch())  # the same weights (seeded) on the CPU
    assert torch.allclose(full.cpu(), cpu, atol=1e-4), (full.cpu() - cpu).abs().max()


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_fused_loss_on_cuda_equals_the_reference(smoothing: float) -> None:
    torch.manual_seed(0)
    hidden = torch.randn(4, 9, 32, device="cuda", requires_grad=True)
    weight = (torch.randn(300, 32, device="cuda") * 0.3).requires_grad_()
    bias = torch.randn(300, device="cuda", requires_grad=True)
    targets = torch.randint(4, 300, (4, 9), device="cuda")
    targets[1, 6:] = PAD
    expected = F.cross_entropy(F.linear(hidden, weight, bias).flatten(0, 1), targets.flatten(), ignore_index=PAD,
                               label_smoothing=smoothing, reduction="sum")  # fmt: skip
    grads = torch.autograd.grad(expected, (hidden, weight, bias))
    for chunk_rows in (7, None):  # chunks of 7 rows; the device's default (CUDA: the whole batch in one chunk)
        got = projected_cross_entropy(hidden, weight, bias, targets, smoothing, chunk_rows=chunk_rows)
        got_grads = torch.autograd.grad(got, (hidden, weight, bias))
        assert got.item() == pytest.approx(expected.item(), rel=1e-5)
        for a, b in zip(got_grads, grads, strict=True):
            assert torch.allclose(a, b, atol=1e-4), (a - b).abs().max()
        assert got_grads[0][1, 6:].abs().sum() == 0  # padding rows get no gradient
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("cuda", dtype=dtype):
            low = projected_cross_entropy(hidden, weight, bias, targets, smoothing, chunk_rows=7)
        assert low.dtype == torch.float32 and low.item() == pytest.approx(expected.item(), rel=2e-2)


def test_cuda_attention_does_not_use_cudnn_attention(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN's attention plans every new shape (15× slower bf16 training measured on an H100): excluded on CUDA."""
    from adlnmt.layers import attention

    real = F.scaled_dot_product_attention
    enabled: list[bool] = []

    def recording(*args, **kwargs) -> torch.Tensor:
        enabled.append(torch.backends.cuda.cudnn_sdp_enabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", recording)
    before = torch.backends.cuda.cudnn_sdp_enabled()
    q = torch.randn(2, 4, 5, 16, device="cuda", dtype=torch.bfloat16)
    attention.fused_attention(q, q, q, is_causal=True)
    assert enabled == [False]
    assert torch.backends.cuda.cudnn_sdp_enabled() == before  # the setting is restored after the call
