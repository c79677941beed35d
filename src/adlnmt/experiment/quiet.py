"""Decoding timed alone: while one run of a grid translates its test sets (timed for the speed columns), the runner
stops every other worker (SIGSTOP) and continues them afterwards (SIGCONT). So ``--jobs 2`` trains two runs side by
side and still measures each run's decoding speed with the machine to itself.

The handshake is two files in the decoding run's directory: the worker creates ``decoding.request`` and waits for
``decoding.granted``, which the runner creates once every other worker is stopped; the worker removes both when it
is done. One run decodes at a time. The time a run spent stopped while training is added up in its ``paused.json``,
and the worker takes it out of the run's training time.

The runner writes ``decoding.granted`` once per grant, never again while the grant lasts: a worker that has just
removed both files (its decoding done) never finds its grant recreated behind it. ``paused.json`` is replaced
atomically; a damaged one counts as no pause, with a warning.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.store.atomic import atomic_write

REQUEST, GRANTED, PAUSED = "decoding.request", "decoding.granted", "paused.json"
ENVIRONMENT = "ADLNMT_DECODE_ALONE"  # set by the runner for its workers when several run at once
BESIDE_TRAINING = "ADLNMT_DECODE_BESIDE_TRAINING"  # ... when they run at once and decode without stopping the others


def timed_alone() -> bool:
    """Whether this worker's decoding is timed with no other worker of the grid training beside it."""
    return os.environ.get(BESIDE_TRAINING) != "1"


@contextmanager
def decoding_alone(run_dir: Path, poll_seconds: float = 0.05) -> Iterator[None]:
    """Worker side: the body runs while every other worker of the grid is stopped (at once where the runner did not
    ask for it, e.g. a worker started by hand)."""
    if os.environ.get(ENVIRONMENT) != "1":
        yield
        return
    request, granted = run_dir / REQUEST, run_dir / GRANTED
    granted.unlink(missing_ok=True)
    request.touch()
    try:
        while not granted.exists():
            time.sleep(poll_seconds)
        yield
    finally:
        request.unlink(missing_ok=True)
        granted.unlink(missing_ok=True)


def paused_seconds(run_dir: Path) -> float:
    """How long the runner kept this run's worker stopped while it trained (0 when never, or with a warning when
    ``paused.json`` cannot be read)."""
    path = run_dir / PAUSED
    try:
        seconds = float(json.loads(path.read_text(encoding="utf-8"))["seconds"])
    except FileNotFoundError:
        return 0.0
    except (OSError, ValueError, TypeError, KeyError) as err:
        print(f"warning: {path}: unreadable ({type(err).__name__}); counted as no pause", file=sys.stderr)
        return 0.0
    if not math.isfinite(seconds) or seconds < 0:  # e.g. 1e999: it would take all of the training time away
        print(f"warning: {path}: {seconds} seconds is no pause; counted as none", file=sys.stderr)
        return 0.0
    return seconds


def add_paused(run_dir: Path, seconds: float) -> None:
    """Add ``seconds`` to the run's ``paused.json`` (replaced atomically); a failed write (e.g. a full disk) is a
    warning, and the file keeps its previous value."""
    total = paused_seconds(run_dir) + seconds
    text = json.dumps({"seconds": total}) + "\n"
    try:
        atomic_write(run_dir / PAUSED, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except UserError as err:
        print(f"warning: {err}", file=sys.stderr)


def clear_handshake(run_dir: Path) -> None:
    """Remove a request or grant left behind by a worker that was killed (before its run starts again)."""
    for name in (REQUEST, GRANTED):
        (run_dir / name).unlink(missing_ok=True)


@dataclass
class Stopped:
    since: float
    waiting_to_decode: bool  # stopped while waiting for its own turn: not training, so not paused training time


class DecodeAlone:
    """Runner side: a thread that grants one decoding request at a time and keeps every other worker stopped while
    it is held. ``running`` and ``lock`` are the runner's table of worker processes by run directory and its lock."""

    def __init__(self, running: dict[Path, subprocess.Popen], lock: threading.Lock, poll_seconds: float = 0.1):
        self.running, self.lock, self.poll_seconds = running, lock, poll_seconds
        self.holder: Path | None = None
        self.stopped: dict[Path, Stopped] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="decode-alone", daemon=True)

    def __enter__(self) -> DecodeAlone:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        with self.lock:
            self.release()

    def _loop(self) -> None:
        while not self.done.wait(self.poll_seconds):
            with self.lock:
                self.step()

    def step(self) -> None:
        """One look at the run directories (call with the lock held): end a finished hold, grant a new one, and
        stop every worker but the holder while it lasts (a worker started meanwhile too)."""
        if self.holder and (self.holder not in self.running or not (self.holder / REQUEST).exists()):
            self.release()
        granting = self.holder is None
        if granting:
            self.holder = next((run_dir for run_dir in self.running if (run_dir / REQUEST).exists()), None)
        if self.holder is None:
            return
        for run_dir, process in self.running.items():
            if run_dir != self.holder and run_dir not in self.stopped:
                waiting = (run_dir / REQUEST).exists()
                process.send_signal(signal.SIGSTOP)  # nothing when it has exited (and been waited for) meanwhile
                self.stopped[run_dir] = Stopped(time.monotonic(), waiting)
        if granting:  # once: the worker removes it when done, and a second touch could come after that
            (self.holder / GRANTED).touch()

    def release(self) -> None:
        """Continue every stopped worker and add the time to the paused training time of those that were training
        (call with the lock held; also before a stop signal is passed on, which a stopped worker would not see)."""
        for run_dir, stopped in self.stopped.items():
            if run_dir in self.running:
                self.running[run_dir].send_signal(signal.SIGCONT)
            if not stopped.waiting_to_decode:
                add_paused(run_dir, time.monotonic() - stopped.since)
        self.stopped.clear()
        self.holder = None
