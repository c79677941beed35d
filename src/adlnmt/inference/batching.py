"""What every engine's search shares, without PyTorch: sentences sorted by length into batches, and the length limit
of an output.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from adlnmt.inference.options import SearchOptions


def length_batches(lengths: Sequence[Any], batch_size: int) -> list[list[int]]:
    """The indices of ``lengths`` (ints, or tuples such as (source, target) lengths) sorted by length, stably, and
    cut into batches of ``batch_size``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def float32(value: float) -> float:
    """``value`` rounded to the nearest float32."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def length_limit(source_length: int, options: SearchOptions) -> int:
    """The most tokens (EOS not counted) an output may have for a source of ``source_length`` tokens (EOS counted):
    ``max_len_ratio · source_length`` (in float32, as the PyTorch search has always computed it: the product of two
    float32 is exact in float64, so rounding it once gives float32's) truncated, plus ``max_len_extra``."""
    return int(float32(float32(source_length) * float32(options.max_len_ratio))) + options.max_len_extra
