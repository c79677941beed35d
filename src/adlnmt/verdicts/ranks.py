"""Rank agreement with the paper: per column of the paper's published scores (a grid row's ``paper``), Spearman's ρ
between the paper's scores and the rows' mean scores here, with a bootstrap interval over seeds (each row's seeds
drawn with replacement). A column names its data set and metric ("IWSLT BLEU", "dev sentBLEU"): the metric is ours of
that name, the test set ours of that name where the grid has one, else the test set of the grid's first claim."""

from __future__ import annotations

from typing import Any

import numpy as np

from adlnmt.experiment.grid import Grid
from adlnmt.experiment.results import RunResult

RESAMPLES = 2000
SEED = 20_261_128
LEVEL = 0.95
METRICS = {"bleu": "bleu", "sentbleu": "sentbleu", "meteor": "meteor", "chrf": "chrf", "ter": "ter"}


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties share their mean rank)."""
    order = np.argsort(values, axis=-1, kind="stable")
    ranks = np.empty_like(values, dtype=np.float64)
    np.put_along_axis(ranks, order, np.arange(values.shape[-1], dtype=np.float64) + 1, axis=-1)
    for index in np.ndindex(values.shape[:-1]):
        row, rank = values[index], ranks[index]
        for value in np.unique(row):
            tied = row == value
            if tied.sum() > 1:
                rank[tied] = rank[tied].mean()
    return ranks


def spearman(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Spearman's ρ between ``first`` (…, n) and ``second`` (n,): Pearson's r of the average ranks; NaN where either
    is constant."""
    a, b = _ranks(np.asarray(first, dtype=np.float64)), _ranks(np.asarray(second, dtype=np.float64)[None])[0]
    a, b = a - a.mean(axis=-1, keepdims=True), b - b.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=-1) / np.sqrt((a * a).sum(axis=-1) * (b * b).sum())


def _column(grid: Grid, column: str) -> tuple[str, str] | None:
    """The (test set, metric) of ours that a paper column compares with, None when we have no such metric."""
    words = column.split()
    metric = METRICS.get(words[-1].lower()) if words else None
    if metric is None or metric not in grid.metrics:
        return None
    names = [t.name for t in grid.tests]
    if words[0] in names:
        return words[0], metric
    primary = next((c.test for c in grid.claims if c.test in names), names[0] if names else None)
    return (primary, metric) if primary else None


def rank_agreement(grid: Grid, finished: dict[tuple[str, int], RunResult]) -> list[dict[str, Any]]:
    """One entry per paper column with at least three rows measured: ρ, its interval over seeds and the rows."""
    found = []
    columns = sorted({column for variant in grid.variants for column in variant.paper})
    for column in columns:
        where = _column(grid, column)
        if where is None:
            continue
        test, metric = where
        rows = []
        for variant in grid.variants:
            scores = [
                result.tests[test].scores[metric]
                for (name, _), result in sorted(finished.items())
                if name == variant.name and test in result.tests and metric in result.tests[test].scores
            ]
            if column in variant.paper and scores:
                rows.append((variant.name, variant.paper[column], np.array(scores, dtype=np.float64)))
        if len(rows) < 3:
            continue
        paper = np.array([published for _, published, _ in rows])
        ours = np.array([scores.mean() for _, _, scores in rows])
        rng = np.random.default_rng([SEED, len(rows)])
        drawn = np.stack([s[rng.integers(0, len(s), size=(RESAMPLES, len(s)))].mean(axis=1) for _, _, s in rows], 1)
        rho = spearman(ours[None], paper)[0]
        replicates = spearman(drawn, paper)
        replicates = replicates[np.isfinite(replicates)]
        low, high = np.quantile(replicates, [(1 - LEVEL) / 2, (1 + LEVEL) / 2]) if len(replicates) else (np.nan,) * 2
        found.append({"column": column, "test": test, "metric": metric, "rows": len(rows),
                      "seeds": sum(len(s) for _, _, s in rows), "rho": float(rho),
                      "interval": [float(low), float(high)], "level": LEVEL})  # fmt: skip
    return found
