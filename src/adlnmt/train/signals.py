"""Graceful stop: the first SIGTERM or SIGINT asks training to stop after the current update with a checkpoint;
a second one stops at once (SIGTERM: killed by the signal; SIGINT: KeyboardInterrupt)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# A launcher forwards the terminal's Ctrl-C to its workers (torchrun does): the same signal again within this many
# seconds is that copy, not a second request.
DUPLICATE_SECONDS = 1.0


class StopSignals:
    """``with StopSignals(announce) as stop:`` ... ``stop.received`` is the first stop signal's number (or None).
    ``forward`` is called with every stop signal received (e.g. to pass it on to worker processes)."""

    def __init__(self, announce: bool, forward: Callable[[int], None] | None = None) -> None:
        self.announce = announce
        self.forward = forward
        self.received: int | None = None
        self._received_at = 0.0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # handlers can only be set there
            self._previous = {number: signal.signal(number, self._handle) for number in STOP_SIGNALS}
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: TracebackType | None) -> None:
        kept = self._previous.pop(self.received, None) if self.received is not None else None
        self._restore()
        if kept is not None:  # copies of the stop signal may still arrive (a launcher's forward, or Linux's
            # parent-death signal, once per thread of a dying parent): absorbed as while running, a later one acts
            # as the handler before
            self._previous = {self.received: kept}

    def _restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.forward is not None:
            self.forward(number)
        now = time.monotonic()
        if self.received is None:
            self.received, self._received_at = number, now
            if self.announce:
                print(f"{signal.Signals(number).name}: stopping after this update with a checkpoint "
                      "(send it again to stop at once)", file=sys.stderr, flush=True)  # fmt: skip
            return
        if number == self.received and now - self._received_at < DUPLICATE_SECONDS:
            return
        self._restore()
        if number == signal.SIGINT:
            raise KeyboardInterrupt
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
