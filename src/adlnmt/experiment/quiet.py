"""Decoding timed alone: while one run of a grid translates its test sets (timed for the speed columns), the runner
stops every other worker (SIGSTOP) and continues them afterwards (SIGCONT). So ``--jobs 2`` trains two runs side by
side and still measures each run's decoding speed with the machine to itself.

Across grids the same holds on one machine: a worker registers itself while it trains (a file in
:func:`registry`, per user), and a timed decoding — a worker's, or ``--retime``'s — takes the machine's decoding
lock and stops every registered training worker of the other grids (:func:`machine_alone`); a small watchdog
process continues them should the decoding process die before it does. SLURM array jobs sharing a node do the same.

The handshake is two files in the decoding run's directory: the worker creates ``decoding.request`` and waits for
``decoding.granted``, which the runner creates once every other worker is stopped; the worker removes both when it
is done. One run decodes at a time. The time a run spent stopped while training is added up in its ``paused.json``,
and the worker takes it out of the run's training time.

The runner writes ``decoding.granted`` once per grant, never again while the grant lasts: a worker that has just
removed both files (its decoding done) never finds its grant recreated behind it. ``paused.json`` is replaced
atomically; a damaged one counts as no pause, with a warning.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.jsontext import parse_json
from adlnmt.store.atomic import atomic_write

REQUEST, GRANTED, PAUSED = "decoding.request", "decoding.granted", "paused.json"
ENVIRONMENT = "ADLNMT_DECODE_ALONE"  # set by the runner for its workers when several run at once
BESIDE_TRAINING = "ADLNMT_DECODE_BESIDE_TRAINING"  # ... when they decode without stopping any training
REGISTRY = "ADLNMT_TRAINING_REGISTRY"  # the folder of training workers on this machine (tests name their own)
DECODING_LOCK = "decoding.lock"  # in the registry: one timed decoding at a time on the machine
# The watchdog of machine_alone: when its standard input closes with nothing written (the decoding process died
# before continuing them), it continues the processes it was given.
WATCHDOG = """import os, signal, sys
if sys.stdin.buffer.read():
    sys.exit()
for pid in sys.argv[1:]:
    try:
        os.kill(int(pid), signal.SIGCONT)
    except ProcessLookupError:
        pass
"""


def registry() -> Path:
    """Where this user's training workers on this machine register (``$ADLNMT_TRAINING_REGISTRY``, else a folder
    under the system's temporary directory)."""
    named = os.environ.get(REGISTRY)
    return Path(named) if named else Path(tempfile.gettempdir()) / f"adlnmt-{os.getuid()}" / "training"


def _usable(folder: Path) -> bool:
    """Make the registry (private to this user) if need be; False, with a warning, where it cannot be made or is not
    this user's alone (another user could otherwise name this user's processes in it, to have them stopped)."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = folder.stat()
    except OSError as err:
        print(f"warning: {folder}: {err.strerror or err}; timed decoding does not stop other grids' training",
              file=sys.stderr)  # fmt: skip
        return False
    if found.st_uid != os.getuid() or found.st_mode & 0o022:
        print(f"warning: {folder} belongs to another user or others may write to it; timed decoding does not stop "
              "other grids' training", file=sys.stderr)  # fmt: skip
        return False
    return True


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, its identity
    (a pid is reused); None when it has exited or there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[19]


@dataclass(frozen=True)
class Training:
    """A registered training worker: its process, its run directory and the runner that started it."""

    pid: int
    run_dir: Path
    runner: int
    started: str


@contextmanager
def registered_training(run_dir: Path) -> Iterator[None]:
    """While the body runs (a worker's training), timed decodings elsewhere on the machine stop this process."""
    folder, started = registry(), _started(os.getpid())
    if started is None or not _usable(folder):  # no /proc: nothing could tell this entry from a reused pid
        yield
        return
    entry = folder / f"{os.getpid()}.json"
    record = {"pid": os.getpid(), "run_dir": str(run_dir.resolve()), "runner": os.getppid(), "started": started}
    try:
        atomic_write(entry, lambda tmp: tmp.write_text(json.dumps(record) + "\n", encoding="utf-8"))
    except UserError as err:  # not registered: other grids' timed decoding will not stop this training
        print(f"warning: {err}; other grids' timed decoding will not stop this training", file=sys.stderr)
    try:
        yield
    finally:
        entry.unlink(missing_ok=True)


def training_workers() -> list[Training]:
    """The registered training workers still running (entries of exited processes are removed)."""
    found = []
    for entry in sorted(registry().glob("*.json")):
        try:
            record = parse_json(entry.read_text(encoding="utf-8"))
            pid, runner, started = int(record["pid"]), int(record["runner"]), str(record["started"])
            worker = Training(pid, Path(record["run_dir"]), runner, started)
        except (OSError, ValueError, TypeError, KeyError):
            continue  # not a registry entry
        if _started(worker.pid) != worker.started:
            entry.unlink(missing_ok=True)  # exited without removing it (killed), or its pid now names another process
            continue
        found.append(worker)
    return found


@contextmanager
def machine_alone(same_grid_runner: int | None = None) -> Iterator[None]:
    """The body runs with every registered training worker on the machine but this process stopped, one such body
    at a time on the machine; the time each was stopped is added to its run's paused.json, except for workers of
    ``same_grid_runner``, whose runner stops them and counts that itself."""
    folder = registry()
    try:
        lock = open(folder / DECODING_LOCK, "a") if _usable(folder) else None  # noqa: SIM115 (closed below)
    except OSError as err:
        print(f"warning: {folder}: no machine-wide decoding lock ({err}); timing beside other grids", file=sys.stderr)
        lock = None
    if lock is None:
        yield
        return
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another timed decoding on this machine to end ({lock.name})", file=sys.stderr,
                  flush=True)  # fmt: skip
            fcntl.flock(lock, fcntl.LOCK_EX)
        others = [worker for worker in training_workers() if worker.pid != os.getpid()]
        # continues them if this process dies before it does: its end of the pipe closes with it
        pids = [str(worker.pid) for worker in others]
        watchdog = subprocess.Popen([sys.executable, "-c", WATCHDOG, *pids], stdin=subprocess.PIPE) if others else None
        start = time.monotonic()
        stopped = [worker for worker in others if _signal(worker.pid, signal.SIGSTOP)]
        try:
            yield
        finally:
            for worker in stopped:
                _signal(worker.pid, signal.SIGCONT)
                if worker.runner != same_grid_runner:
                    add_paused(worker.run_dir, time.monotonic() - start)
            if watchdog and watchdog.stdin:
                watchdog.stdin.write(b"continued")  # done: nothing left for it to do
                watchdog.stdin.close()
                watchdog.wait()


def _signal(pid: int, number: int) -> bool:
    """Send ``number`` to ``pid``; False when it has exited meanwhile."""
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        return False
    return True


def timed_alone() -> bool:
    """Whether this worker's decoding is timed with no adlnmt training beside it (not ``--decode-beside-training``)."""
    return os.environ.get(BESIDE_TRAINING) != "1"


@contextmanager
def decoding_alone(run_dir: Path, poll_seconds: float = 0.05) -> Iterator[None]:
    """Worker side: the body runs while every other worker of the grid is stopped (the runner's grant, where it asked
    for one) and every other grid's training on the machine (:func:`machine_alone`); with
    ``--decode-beside-training`` at once, nothing stopped."""
    if os.environ.get(BESIDE_TRAINING) == "1":
        yield
        return
    if os.environ.get(ENVIRONMENT) != "1":
        with machine_alone():
            yield
        return
    request, granted = run_dir / REQUEST, run_dir / GRANTED
    granted.unlink(missing_ok=True)
    request.touch()
    try:
        while not granted.exists():
            time.sleep(poll_seconds)
        with machine_alone(same_grid_runner=os.getppid()):
            yield
    finally:
        request.unlink(missing_ok=True)
        granted.unlink(missing_ok=True)


def paused_seconds(run_dir: Path) -> float:
    """How long the runner kept this run's worker stopped while it trained (0 when never, or with a warning when
    ``paused.json`` cannot be read)."""
    path = run_dir / PAUSED
    try:
        seconds = float(parse_json(path.read_text(encoding="utf-8"))["seconds"])
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
