"""Graceful stop signals: a copy of the first stop signal is not a second request, also once the stop is done."""

from __future__ import annotations

import os
import signal
from types import FrameType

import pytest

from adlnmt.train import signals
from adlnmt.train.signals import StopSignals


def test_a_copy_of_the_stop_signal_after_the_stop_is_absorbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux sends a worker its parent-death signal once per thread of a dying runner: a copy may come after the
    training has stopped, while the worker reports the stop. It must not reach the handler from before (by default:
    death by SIGTERM, and the report lost)."""
    reached: list[int] = []

    def before(number: int, frame: FrameType | None) -> None:
        reached.append(number)

    original, interrupt = signal.signal(signal.SIGTERM, before), signal.getsignal(signal.SIGINT)
    clock = iter([100.0, 100.5])
    monkeypatch.setattr(signals.time, "monotonic", lambda: next(clock))
    try:
        with StopSignals(announce=False) as stop:
            os.kill(os.getpid(), signal.SIGTERM)  # the stop, at 100.0
        assert stop.received == signal.SIGTERM
        assert signal.getsignal(signal.SIGINT) is interrupt  # the other one is restored
        os.kill(os.getpid(), signal.SIGTERM)  # a copy, at 100.5
        assert reached == []
    finally:
        signal.signal(signal.SIGTERM, original)
