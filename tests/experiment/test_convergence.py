"""Whether a run converged, from its validation curve: early stopping, a plateau at the cap, or still improving."""

from __future__ import annotations

import pytest

from adlnmt.experiment.convergence import judge, unconverged
from adlnmt.experiment.results import RunResult

from .sample_results import run_result


def result(ppls: list[float]) -> RunResult:
    return run_result(ppls=tuple(ppls))


@pytest.mark.parametrize(
    ("ppls", "stopped_by", "converged"),
    [
        ([9.0, 7.0, 6.0, 6.1, 6.5, 7.0], "early stop", True),  # 3 validations after the best found none better
        ([9.0, 7.0, 6.0, 6.05, 6.1], "update cap", True),  # 2 validations after the best, all within 2 % of it
        ([9.0, 7.0, 6.10, 6.05, 6.0], "update cap", False),  # within 2 %, but the best is the last: not shown
        ([9.0, 7.0, 6.0, 6.05], "update cap", False),  # one validation after the best: too few for a plateau
        ([9.0, 8.0, 7.0, 6.5, 6.0], "update cap", False),  # still falling at the cap
        ([205.0, 140.0, 98.0, 73.0], "update cap", False),  # a 100-update run: best last (it once read converged)
    ],
)
def test_convergence(ppls: list[float], stopped_by: str, converged: bool) -> None:
    judged = judge(result(ppls), {"patience": 3})
    assert (judged.stopped_by, judged.converged) == (stopped_by, converged)
    assert judged.best_ppl == min(ppls) and judged.last_update == 100 * len(ppls)


def test_a_run_capped_after_its_best_is_not_called_still_improving() -> None:
    falling, past = judge(result([9.0, 8.0, 7.0, 6.5, 6.0]), {"patience": 3}), judge(result([9, 6.0, 6.3, 6.4]), {})
    assert "still improving" in unconverged(falling)
    assert not past.converged and "past its best" in unconverged(past) and "2 validation(s)" in unconverged(past)


def test_one_validation_after_the_best_is_too_few() -> None:
    judged = judge(result([9.0, 7.0, 6.0, 6.05]), {"patience": 3})
    assert "too few" in unconverged(judged)
