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

    results = in_workers(task, [7, 3, 9, 0, 5], workers=2)
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
