"""Rank agreement with the paper: Spearman's ρ between the paper's published scores of a table's rows and the rows'
mean scores here, with a bootstrap interval over seeds (each row's seeds drawn with replacement). Which of our test
sets and metrics a column of the paper compares with is :func:`adlnmt.experiment.judge.rank_agreement`'s."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

RESAMPLES = 2000
SEED = 20_261_128
LEVEL = 0.95


def average_ranks(values: np.ndarray) -> np.ndarray:
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
    a = average_ranks(np.asarray(first, dtype=np.float64))
    b = average_ranks(np.asarray(second, dtype=np.float64)[None])[0]
    a, b = a - a.mean(axis=-1, keepdims=True), b - b.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=-1) / np.sqrt((a * a).sum(axis=-1) * (b * b).sum())


def agreement(rows: Sequence[tuple[float, np.ndarray]]) -> tuple[float, tuple[float, float] | None]:
    """ρ between the paper's scores and the rows' mean scores, rows given as (the paper's score, our per-seed
    scores), and its ``LEVEL`` interval over ``RESAMPLES`` draws of each row's seeds; no interval (None) while a row
    has one seed, whose draws could not vary (or no draw ranks both sides)."""
    paper = np.array([published for published, _ in rows])
    ours = np.array([scores.mean() for _, scores in rows])
    rho = spearman(ours[None], paper)[0]
    if min(len(scores) for _, scores in rows) < 2:
        return float(rho), None
    rng = np.random.default_rng([SEED, len(rows)])
    drawn = np.stack([s[rng.integers(0, len(s), size=(RESAMPLES, len(s)))].mean(axis=1) for _, s in rows], 1)
    replicates = spearman(drawn, paper)
    replicates = replicates[np.isfinite(replicates)]
    if not len(replicates):
        return float(rho), None
    low, high = np.quantile(replicates, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(rho), (float(low), float(high))
