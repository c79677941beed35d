"""Forked single-thread CPU worker processes: ``in_workers(task, jobs, workers)``.

On a CPU, N processes of one thread each decode faster than one process of N threads: the small per-step
matrix products of a decoder scale poorly over threads, and the Python and dispatch overhead of each step runs
on one core anyway. The workers are forked, so they share the parent's model (copy-on-write, read-only) and
need no pickling of it; only job numbers go out and results come back. One thread each, because the OpenMP
runtime of torch's CPU build hangs in a forked child that starts a parallel region of several threads.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from adlnmt.errors import UserError

T = TypeVar("T")

_task: Callable[[int], Any] | None = None  # set in the parent before the fork, inherited by the workers


def _start_worker() -> None:
    """One thread; SIGTERM ends the worker at once, whichever of its threads the signal reaches (the parent's Python
    handler, inherited by the fork, runs only in a main thread free to run it: a worker blocked on the task queue's
    lock never did, and a pool that terminated it waited for ever)."""
    torch.set_num_threads(1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run(job: int) -> bytes:
    assert _task is not None
    # Plain pickle: tensors travel by value, not through torch's shared-memory file descriptors.
    return pickle.dumps(_task(job), protocol=pickle.HIGHEST_PROTOCOL)


def in_workers(task: Callable[[int], T], jobs: Sequence[int], workers: int) -> list[T]:
    """``[task(job) for job in jobs]``, computed by ``workers`` forked processes of one thread each.

    Jobs are handed out one at a time, in the given order, to whichever worker is free (put the longest first
    for an even finish). ``workers <= 1`` (or a single job) runs in this process. An exception in a job is
    raised here."""
    global _task
    if workers <= 1 or len(jobs) <= 1:
        return [task(job) for job in jobs]
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:
        raise UserError("worker processes need the 'fork' start method (Linux or macOS); use 1 worker") from None
    _task = task
    pool = context.Pool(min(workers, len(jobs)), initializer=_start_worker)
    try:
        results = pool.map(_run, jobs, chunksize=1)
        pool.close()  # the workers finish on their own: no signal is sent to a finished pool
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        _task = None
    return [pickle.loads(result) for result in results]
