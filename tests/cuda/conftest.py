"""The CUDA tests: run on a machine with a GPU (``pytest -m cuda tests``); skipped, with the reason, elsewhere."""

from __future__ import annotations

import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
CUDA = [pytest.mark.cuda, requires_cuda]


@pytest.fixture(autouse=True)
def _cuda_memory() -> None:
    """Each test starts with the caching allocator emptied (a failure's tensors are not carried into the next)."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
