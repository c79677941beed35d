"""Whether each finished run converged, read from its validation curve (the report's "Convergence" table).

A run converged when early stopping ended it: ``patience`` validations after the best checkpoint found no better
one. A run that reached its update cap first converged only if at least ``MIN_AFTER_BEST`` validations followed
its best checkpoint and its last ``patience`` validations lie within ``PLATEAU`` (relative) of the best. A run
whose best checkpoint is its last has not shown convergence, whatever its curve (before 2026-11-26 the plateau test
passed such a run by construction: its best lies among its last validations). Otherwise the row says whether it was
still improving (the best checkpoint was the last one) or past its best (worse validations after it, fewer than
``patience``, beyond the plateau or too few). The curve read is the one the run stopped on (its
``early_stop_metric``): validation perplexity (lower is better) or validation BLEU (higher is better).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adlnmt.experiment.grid import Grid
from adlnmt.experiment.results import RunResult
from adlnmt.experiment.rows import Row
from adlnmt.train.config import TrainConfig

PLATEAU = 0.02  # the last validations within 2 % of the best (perplexity or BLEU)
MIN_AFTER_BEST = 2  # validations after the best that a run stopped by its cap needs to show a plateau


@dataclass(frozen=True)
class Convergence:
    metric: str  # the curve read: "ppl" or "bleu" (the run's early_stop_metric)
    best_update: int
    best: float  # the best checkpoint's validation value
    last_update: int
    after_best: list[float]  # the validation values after the best checkpoint, in order
    stopped_by: str  # "early stop" | "update cap"
    converged: bool

    def shown(self, value: float) -> str:
        """A validation value as the table shows it (BLEU named: the column is perplexity unless it says)."""
        return f"BLEU {value:.2f}" if self.metric == "bleu" else f"{value:.2f}"


def judge(result: RunResult, train: dict[str, Any]) -> Convergence:
    """Convergence of one run from its result and its variant's training options."""
    patience = train.get("patience", TrainConfig.patience)
    metric = train.get("early_stop_metric", TrainConfig.early_stop_metric)
    values = [(point.update, point.valid_bleu if metric == "bleu" else point.valid_ppl) for point in result.curve]
    curve = [(update, value) for update, value in values if value is not None]
    best_update, best = next(point for point in curve if point[0] == result.best_update)  # by early_stop_metric
    after = [value for update, value in curve if update > best_update]
    early_stop = patience > 0 and len(after) >= patience
    tail = [value for _, value in curve[-max(patience, 1) :]]
    within = min(tail) >= best * (1 - PLATEAU) if metric == "bleu" else max(tail) <= best * (1 + PLATEAU)
    plateau = len(after) >= MIN_AFTER_BEST and within
    return Convergence(metric, best_update, best, curve[-1][0], after,
                       "early stop" if early_stop else "update cap", early_stop or plateau)  # fmt: skip


def _relative(c: Convergence, value: float) -> str:
    return f"{c.shown(value)} ({(value / c.best - 1) * 100:+.1f} %)"


def unconverged(c: Convergence) -> str:
    """Why a run stopped by its update cap does not count as converged."""
    if not c.after_best:
        return "**no**: still improving at the cap"
    if len(c.after_best) < MIN_AFTER_BEST:
        return (f"**no**: past its best, but the cap came {len(c.after_best)} validation after it, too few to show "
                "a plateau")  # fmt: skip
    worse = "below" if c.metric == "bleu" else "above"
    return (f"**no**: past its best, but the cap came {len(c.after_best)} validation(s) after it, before early "
            f"stopping, and they are more than {PLATEAU:.0%} {worse} it")  # fmt: skip


def convergence_table(grid: Grid, rows: list[Row]) -> str:
    """One line per finished run: best checkpoint, where and why training stopped, the validations after the best."""
    trains = {variant.name: variant.train for variant in grid.variants}
    lines = [
        "| variant | seed | best update | best validation | stopped at | stopped by | next validation "
        "| last validation | converged |",
        "|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for row in rows:
        for result in row.results:
            c = judge(result, trains[row.name])
            after = [_relative(c, value) for value in c.after_best[:1] + c.after_best[-1:]] or ["–", "–"]
            verdict = "yes" if c.converged else unconverged(c)
            lines.append(f"| {row.name} | {result.seed} | {c.best_update} | {c.shown(c.best)} | {c.last_update} | "
                         f"{c.stopped_by} | {after[0]} | {after[-1]} | {verdict} |")  # fmt: skip
    return "\n".join(lines)


def convergence_note(grid: Grid) -> str:
    patience = {variant.train.get("patience", TrainConfig.patience) for variant in grid.variants}
    metric = TrainConfig.early_stop_metric
    on_bleu = [variant.name for variant in grid.variants if variant.train.get("early_stop_metric", metric) == "bleu"]
    return (
        "Best validation: perplexity, BLEU where named. "
        f"Converged: early stopping ended the run ({'/'.join(map(str, sorted(patience)))} validations after the best "
        "found no lower perplexity"
        + (f", or no higher BLEU for the rows that stop on validation BLEU: {', '.join(on_bleu)}" if on_bleu else "")
        + f"), or at least {MIN_AFTER_BEST} validations followed the best and the last ones "
        f"before the update cap lie within {PLATEAU:.0%} of it; a run whose best checkpoint is its last is not "
        "converged. The best checkpoint is the one evaluated; validations after it show the overfitting that early "
        "stopping cuts off."
    )
