"""Keeping a long CPU training run's resident memory flat.

Batches differ in shape, so a run allocates and frees tensors of ever new sizes: glibc keeps much of the freed
heap resident (``release_heap`` hands it back), and in bf16 oneDNN caches one matrix-product primitive per new
shape, up to 1,024 of them (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``). Measured on the Multi30k Transformer in bf16,
the RSS grew with every update without either and stays flat with both (the figures: benchmarks/NOTES.md).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

from adlnmt.errors import UserError

ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
TRAINING_ONEDNN_CACHE = 16  # primitives; shapes rarely repeat, and building a primitive is cheap next to a batch


def _libc_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc
        return None


_MALLOC_TRIM = _libc_malloc_trim()


def release_heap() -> None:
    """Return freed heap memory to the OS (glibc ``malloc_trim``; nothing elsewhere)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def limit_onednn_cache(capacity: int = TRAINING_ONEDNN_CACHE) -> None:
    """Cap oneDNN's primitive cache unless the user set it; effective if no oneDNN primitive exists yet."""
    os.environ.setdefault(ONEDNN_CACHE, str(capacity))


def available_memory(device: str = "cpu") -> int | None:
    """Bytes a new allocation can still take on ``device``: the free memory of a CUDA device, or the kernel's
    ``MemAvailable`` for the CPU; None where it cannot be told (not Linux)."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_bootstrap_memory(resamples: int, items: int, values_per_item: int = 1) -> None:
    """UserError naming ``--resamples`` when a bootstrap over ``items`` would take more than half of the available
    CPU memory: it draws all its resamples at once, [resamples, items] indices and the [resamples, items,
    values_per_item] values they pick (8 bytes each), so that a huge count failed with numpy's MemoryError."""
    need, available = 8 * resamples * items * (1 + values_per_item), available_memory()
    if available is not None and need > available // 2:
        raise UserError(f"--resamples {resamples:,}: the bootstrap over {items:,} items would take about "
                        f"{need / 2**30:,.1f} GiB, more than half of the {available / 2**30:,.1f} GiB available; "
                        "lower --resamples")  # fmt: skip
