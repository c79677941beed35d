"""Timing and peak memory of one measured block.

Memory on the CPU is the process's resident set (RSS), sampled from ``/proc/self/statm`` every 5 ms by a background
thread while the block runs; while it has child processes (forked decoding workers) the proportional set sizes
(PSS) of it and them, summed, every 100 ms instead, so that pages shared copy-on-write count once: ``peak_mb`` is
the largest sample (model weights, Python and torch included), ``added_mb`` the peak minus the RSS when the block
started (what the measured work itself needed on top). Freed heap memory is handed back to the OS first (glibc
``malloc_trim``), so that a block does not start with what an earlier one left resident. Where ``/proc`` is absent
the lifetime peak ``ru_maxrss`` stands in (it only ever grows, so ``added_mb`` is then what this block raised it
by). On CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` (tensors only, not the
allocator's cache), and the same difference. PyTorch is imported for CUDA devices only: a device is a
``torch.device`` or its name (``"cpu"`` for a run without PyTorch).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Generic, TypeVar

from adlnmt.bench.machine import BusyBeside
from adlnmt.memory import release_heap

if TYPE_CHECKING:
    import torch

    Device = torch.device | str

T = TypeVar("T")
MB = 1024 * 1024
STATM = Path("/proc/self/statm")
SAMPLE_SECONDS = 0.005
SAMPLE_SECONDS_WITH_WORKERS = 0.1


def on_cuda(device: Device) -> bool:
    return str(device).startswith("cuda")


def _cuda_synchronize(device: Device) -> None:
    import torch

    torch.cuda.synchronize(device)


def memory_method(device: Device) -> str:
    """How ``PeakMemory`` measures on ``device`` (recorded with the results)."""
    if on_cuda(device):
        return "cuda max_memory_allocated (tensors), MB"
    if STATM.is_file():
        return "peak RSS sampled every 5 ms from /proc/self/statm (with workers: PSS summed, every 100 ms), MB"
    return "ru_maxrss (lifetime peak RSS), MB"


def _children() -> list[str]:
    """Process ids of the main thread's children (it forks the decoding workers)."""
    path = Path(f"/proc/self/task/{os.getpid()}/children")
    return path.read_text().split() if path.is_file() else []


def _pss_bytes(pid: str) -> int:
    """Proportional set size: private pages + each shared page divided by its sharers (0 once exited)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _resident_bytes(children: list[str]) -> int:
    """This process's RSS; with children, the PSS summed over it and them (pages shared copy-on-write after the
    fork count once in all)."""
    if children:
        return sum(_pss_bytes(pid) for pid in ["self", *children])
    return int(STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _max_rss_bytes() -> int:
    import resource  # POSIX only

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


class PeakMemory:
    """``with PeakMemory(device) as memory: ...`` then ``memory.peak_mb`` and ``memory.added_mb``."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.cuda = on_cuda(device)
        self.peak_mb = 0.0
        self.added_mb = 0.0
        self._start = 0
        self._peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> int:
        if self.cuda:
            import torch

            return torch.cuda.max_memory_allocated(self.device)
        return _resident_bytes(_children()) if STATM.is_file() else _max_rss_bytes()

    def _watch(self) -> None:
        # Reading smaps_rollup costs milliseconds per process: with workers, sample less often to leave them the CPU.
        while not self._stop.wait(SAMPLE_SECONDS_WITH_WORKERS if _children() else SAMPLE_SECONDS):
            self._peak = max(self._peak, self._sample())

    def __enter__(self) -> PeakMemory:
        if self.cuda:
            import torch

            _cuda_synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
        else:
            release_heap()
            self._start = self._sample()
            if STATM.is_file():
                self._thread = threading.Thread(target=self._watch, daemon=True)
                self._thread.start()
        self._peak = self._start
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.cuda:
            _cuda_synchronize(self.device)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._peak = max(self._peak, self._sample())
        self.peak_mb = self._peak / MB
        self.added_mb = max(0, self._peak - self._start) / MB


@dataclass
class Timing(Generic[T]):
    seconds: float  # wall-clock of the fastest repetition
    peak_mb: float  # largest over the repetitions
    added_mb: float
    result: T  # what the last repetition returned
    busy_beside: float | None  # cores other processes kept busy during the fastest repetition (machine.BusyBeside)


def timed(run: Callable[[], T], device: Device, repeat: int = 1) -> Timing[T]:
    """Run ``run`` ``repeat`` times with Python's cyclic garbage collector paused (as ``timeit`` does); the fastest
    wall-clock time (noise only adds time) and the peak memory over all runs. The caller warms up first."""
    best, peak, added, busy = float("inf"), 0.0, 0.0, None
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(max(1, repeat)):
            with PeakMemory(device) as memory:
                beside = BusyBeside()
                start = time.perf_counter()
                result = run()
                if on_cuda(device):
                    _cuda_synchronize(device)
                seconds, cores = time.perf_counter() - start, beside.cores()
            if seconds < best:
                best, busy = seconds, cores
            peak, added = max(peak, memory.peak_mb), max(added, memory.added_mb)
    finally:
        if collecting:
            gc.enable()
    return Timing(best, peak, added, result, busy)
