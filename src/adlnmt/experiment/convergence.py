"""Whether each finished run converged, read from its validation curve (the report's "Convergence" table).

A run converged when early stopping ended it: ``patience`` validations after the best checkpoint found no better
one. A run that reached its update cap first converged only if at least ``MIN_AFTER_BEST`` validations followed
its best checkpoint and its last ``patience`` validations lie within ``PLATEAU`` (relative) of the best. A run
whose best checkpoint is its last has not shown convergence, whatever its curve (before 2026-11-26 the plateau test
passed such a run by construction: its best lies among its last validations). Otherwise the row says whether it was
still improving (the best checkpoint was the last one) or past its best (worse validations after it, fewer than
``patience``, beyond the plateau or too few).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adlnmt.experiment.grid import Grid
from adlnmt.experiment.results import RunResult
from adlnmt.experiment.rows import Row
from adlnmt.train.config import TrainConfig

PLATEAU = 0.02  # the last validations within 2 % of the best perplexity
MIN_AFTER_BEST = 2  # validations after the best that a run stopped by its cap needs to show a plateau


@dataclass(frozen=True)
class Convergence:
    best_update: int
    best_ppl: float
    last_update: int
    after_best: list[float]  # validation perplexities after the best checkpoint, in order
    stopped_by: str  # "early stop" | "update cap"
    converged: bool


def judge(result: RunResult, train: dict[str, Any]) -> Convergence:
    """Convergence of one run from its result and its variant's training options."""
    patience = train.get("patience", TrainConfig.patience)
    curve = [(point.update, point.valid_ppl) for point in result.curve if point.valid_ppl is not None]
    best_update, best_ppl = next(point for point in curve if point[0] == result.best_update)  # by early_stop_metric
    after = [ppl for update, ppl in curve if update > best_update]
    early_stop = patience > 0 and len(after) >= patience
    tail = [ppl for _, ppl in curve[-max(patience, 1) :]]
    plateau = len(after) >= MIN_AFTER_BEST and max(tail) <= best_ppl * (1 + PLATEAU)
    return Convergence(best_update, best_ppl, curve[-1][0], after,
                       "early stop" if early_stop else "update cap", early_stop or plateau)  # fmt: skip


def _relative(value: float, best: float) -> str:
    return f"{value:.2f} ({(value / best - 1) * 100:+.1f} %)"


def unconverged(c: Convergence) -> str:
    """Why a run stopped by its update cap does not count as converged."""
    if not c.after_best:
        return "**no**: still improving at the cap"
    if len(c.after_best) < MIN_AFTER_BEST:
        return (f"**no**: past its best, but the cap came {len(c.after_best)} validation after it, too few to show "
                "a plateau")  # fmt: skip
    return (f"**no**: past its best, but the cap came {len(c.after_best)} validation(s) after it, before early "
            f"stopping, and they are more than {PLATEAU:.0%} above it")  # fmt: skip


def convergence_table(grid: Grid, rows: list[Row]) -> str:
    """One line per finished run: best checkpoint, where and why training stopped, the validations after the best."""
    trains = {variant.name: variant.train for variant in grid.variants}
    lines = [
        "| variant | seed | best update | best valid ppl | stopped at | stopped by | next validation | last validation "
        "| converged |",
        "|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for row in rows:
        for result in row.results:
            c = judge(result, trains[row.name])
            after = [_relative(ppl, c.best_ppl) for ppl in c.after_best[:1] + c.after_best[-1:]] or ["–", "–"]
            verdict = "yes" if c.converged else unconverged(c)
            lines.append(f"| {row.name} | {result.seed} | {c.best_update} | {c.best_ppl:.2f} | {c.last_update} | "
                         f"{c.stopped_by} | {after[0]} | {after[-1]} | {verdict} |")  # fmt: skip
    return "\n".join(lines)


def convergence_note(grid: Grid) -> str:
    patience = {variant.train.get("patience", TrainConfig.patience) for variant in grid.variants}
    return (
        f"Converged: early stopping ended the run ({'/'.join(map(str, sorted(patience)))} validations after the best "
        f"found no lower perplexity), or at least {MIN_AFTER_BEST} validations followed the best and the last ones "
        f"before the update cap lie within {PLATEAU:.0%} of it; a run whose best checkpoint is its last is not "
        "converged. The best checkpoint is the one evaluated; validations after it show the overfitting that early "
        "stopping cuts off."
    )
