"""Whether a run converged, from its validation curve: early stopping, a plateau at the cap, or still improving."""

from __future__ import annotations

import pytest

from adlnmt.experiment.convergence import judge, unconverged
from adlnmt.experiment.results import CurvePoint, RunResult

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
    assert judged.best == min(ppls) and judged.last_update == 100 * len(ppls)


def test_a_run_capped_after_its_best_is_not_called_still_improving() -> None:
    falling, past = judge(result([9.0, 8.0, 7.0, 6.5, 6.0]), {"patience": 3}), judge(result([9, 6.0, 6.3, 6.4]), {})
    assert "still improving" in unconverged(falling)
    assert not past.converged and "past its best" in unconverged(past) and "2 validation(s)" in unconverged(past)


def test_one_validation_after_the_best_is_too_few() -> None:
    judged = judge(result([9.0, 7.0, 6.0, 6.05]), {"patience": 3})
    assert "too few" in unconverged(judged)


def stopped_on_bleu(bleus: list[float]) -> RunResult:
    """A run that stopped on validation BLEU, its best checkpoint the highest BLEU, while its perplexity kept falling
    (a KD student's reference perplexity need not follow its BLEU)."""
    curve = [CurvePoint(update=100 * (i + 1), valid_ppl=10.0 - i, valid_bleu=bleu) for i, bleu in enumerate(bleus)]
    return run_result(curve=curve, best_update=max(curve, key=lambda point: point.valid_bleu or 0.0).update)


def test_a_run_that_stopped_on_bleu_is_judged_on_its_bleu_curve() -> None:
    train = {"patience": 3, "early_stop_metric": "bleu"}
    stopped = judge(stopped_on_bleu([30.0, 35.0, 38.0, 37.5, 37.0, 36.5]), train)
    assert (stopped.metric, stopped.best, stopped.after_best) == ("bleu", 38.0, [37.5, 37.0, 36.5])
    assert (stopped.stopped_by, stopped.converged) == ("early stop", True) and stopped.shown(38.0) == "BLEU 38.00"
    plateau = judge(stopped_on_bleu([30.0, 38.0, 37.8, 37.6]), train)  # within 2 % below the best: converged
    assert (plateau.stopped_by, plateau.converged) == ("update cap", True)
    falling = judge(stopped_on_bleu([30.0, 38.0, 36.0, 35.0]), train)
    assert not falling.converged and "more than 2% below it" in unconverged(falling)
    # read on its perplexity, the checkpoints after the best would be better than it: the curve must be BLEU's
    misread = judge(stopped_on_bleu([30.0, 38.0, 36.0, 35.0]), {"patience": 3})
    assert (misread.best, misread.after_best) == (9.0, [8.0, 7.0])
