from __future__ import annotations

import os

import pytest
import torch

from adlnmt.inference.workers import in_workers


def test_results_come_back_in_job_order_from_other_processes() -> None:
    parent = os.getpid()
    table = torch.arange(10.0)  # inherited by the forked workers, not sent

    def task(job: int) -> tuple[int, int, torch.Tensor, int]:
        return job, os.getpid(), table[job] * 2, torch.get_num_threads()

    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # as translate --threads 2 sets it: each worker runs on 1 thread all the same
    try:
        results = in_workers(task, [7, 3, 9, 0, 5], workers=2)
    finally:
        torch.set_num_threads(threads)
    assert [r[0] for r in results] == [7, 3, 9, 0, 5]
    assert [float(r[2]) for r in results] == [14.0, 6.0, 18.0, 0.0, 10.0]
    assert all(pid != parent for _, pid, _, _ in results)
    assert all(threads == 1 for *_, threads in results)


def test_one_worker_runs_in_this_process() -> None:
    assert in_workers(lambda job: (job, os.getpid()), [1, 2], workers=1) == [(1, os.getpid()), (2, os.getpid())]


def test_an_error_in_a_job_is_raised_here() -> None:
    def task(job: int) -> int:
        if job == 2:
            raise ValueError(f"job {job} failed")
        return job

    with pytest.raises(ValueError, match="job 2 failed"):
        in_workers(task, [1, 2, 3], workers=2)


def test_a_pool_that_finished_its_jobs_is_closed_not_terminated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool was left by terminate(), which signals its workers and waits for them: a worker blocked on the task
    queue's lock that the signal did not end kept the command waiting for ever (a whole-command timing hung for 8
    minutes, its worker's SIGTERM handler never run). A pool whose jobs are done is closed and its workers finish on
    their own; one whose job failed is still terminated."""
    import multiprocessing.pool

    terminated = []
    terminate = multiprocessing.pool.Pool.terminate
    monkeypatch.setattr(multiprocessing.pool.Pool, "terminate", lambda pool: terminated.append(1) or terminate(pool))
    assert in_workers(lambda job: job * 2, [1, 2, 3], workers=2) == [2, 4, 6] and terminated == []

    def task(job: int) -> int:
        if job == 2:
            raise ValueError("failed")
        return job

    with pytest.raises(ValueError, match="failed"):
        in_workers(task, [1, 2, 3], workers=2)
    assert terminated == [1]


def test_a_worker_ends_at_sigterm_whatever_handler_the_parent_has() -> None:
    import signal

    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        dispositions = in_workers(lambda job: signal.getsignal(signal.SIGTERM), [1, 2], workers=2)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert dispositions == [signal.SIG_DFL, signal.SIG_DFL]
