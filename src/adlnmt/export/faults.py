"""Which ADL layer an export failure comes from: the innermost layer on the failing call stack."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType

from adlnmt.layers.base import Layer


def layer_of_frame(frame: FrameType) -> str | None:
    """The label of the ADL layer whose method runs in ``frame`` (its ``self``), if any."""
    owner = frame.f_locals.get("self")
    if isinstance(owner, Layer):
        return owner.label or owner.title or type(owner).__name__
    return None


def layer_in_traceback(traceback: TracebackType | None) -> str | None:
    """The innermost ADL layer among the frames of ``traceback``."""
    found = None
    while traceback is not None:
        found = layer_of_frame(traceback.tb_frame) or found
        traceback = traceback.tb_next
    return found


def innermost_layer() -> str | None:
    """The innermost ADL layer on the current call stack."""
    for info in inspect.stack()[1:]:
        if (label := layer_of_frame(info.frame)) is not None:
            return label
    return None


@contextmanager
def traced_layers() -> Iterator[list[str]]:
    """Collect the layers that raise tracer warnings (Python control flow on traced values) meanwhile."""
    import torch.jit

    found: list[str] = []

    def record(message: warnings.WarningMessage | Warning | str, category: type[Warning], *args: object) -> None:
        label = innermost_layer()
        if label is not None and label not in found:
            found.append(label)

    with warnings.catch_warnings():
        warnings.simplefilter("always", torch.jit.TracerWarning)
        warnings.showwarning = record  # type: ignore[assignment]
        yield found
