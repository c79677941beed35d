"""The CUDA tests: run on a machine with a GPU (``pytest -m cuda tests``); skipped, with the reason, elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
CUDA = [pytest.mark.cuda, requires_cuda]


@pytest.fixture(autouse=True)
def _cuda_memory() -> None:
    """Each test starts with the caching allocator emptied (a failure's tensors are not carried into the next)."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@pytest.fixture
def strict_fp32() -> Iterator[None]:
    """fp32 as on the CPU: no TF32 in matrix products or cuDNN (convolutions, RNNs) meanwhile. PyTorch lets cuDNN
    use TF32 by default, which rounds products to 10-bit mantissas (differences of ~1e-4 in the logits)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
