"""The report's contrastive section: each row's accuracy on the grid's contrastive suites (``contrastive:``), overall
and by the distance the phenomenon spans, with 95 % intervals from a two-level bootstrap (the suite's items drawn
with replacement, the same draw for every run, then the seed level of :mod:`adlnmt.verdicts.statistics`), and a
plot of accuracy against distance; then the question of Tang et al. (2018) as a test: does a row lose more agreement
over distance than the baseline? Its drop (accuracy on adjacent items, d = 1, minus distant ones, d ≥ 3, over all
suites pooled) minus the baseline's, with a paired interval (the items drawn within each group once for all rows,
then each row's seed level).

Every finished run scored on a suite keeps each item's outcome (``result.json``: ``contrastive.NAME.correct``), so
the rows compare on the same items; runs evaluated before the suite was added lack it and are left out (the table
gives the seeds each row rests on).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adlnmt.analysis.contrastive import DISTANCE_BUCKETS, bucket, read_suite
from adlnmt.experiment.grid import ContrastiveSuite, Grid
from adlnmt.experiment.rows import Row
from adlnmt.verdicts.statistics import seed_deviations

RESAMPLES = 2000
SEED = 20_261_126  # fixed: a rebuilt report gives the same intervals
BUCKETS = [bucket(low) for low, _ in DISTANCE_BUCKETS] + ["none"]
NEAR, FAR = 1, 3  # adjacent (distance 1) against distant (distance 3 and more) items


def accuracy_interval(correct: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    """Mean accuracy of ``correct`` [seeds, items] and its 95 % two-level bootstrap interval (items drawn, then the
    seed level, :func:`adlnmt.verdicts.statistics.seed_deviations`)."""
    items = correct.shape[1]
    item_draws = rng.integers(0, items, size=(RESAMPLES, items))
    items_drawn = correct.mean(axis=0)[item_draws].mean(axis=1)  # the seed mean over the drawn items [RESAMPLES]
    means = items_drawn + seed_deviations([(1.0, correct.mean(axis=1))], RESAMPLES, rng)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(correct.mean()), float(low), float(high)


def outcomes(row: Row, suite: ContrastiveSuite) -> np.ndarray | None:
    """[seeds, items] outcomes of the row's runs scored on ``suite`` (None when none was)."""
    found = [r.contrastive[suite.name].correct for r in row.results if suite.name in r.contrastive]
    return np.asarray(found, dtype=float) if found else None


def cell(values: tuple[float, float, float]) -> str:
    mean, low, high = values
    return f"{100 * mean:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def contrastive_section(grid: Grid, rows: list[Row], plots: Path) -> str:
    """Markdown: per suite, one line per row (accuracy overall and by distance bucket, with intervals) and a plot."""
    parts = ["## Contrastive evaluation", "",
             "Accuracy (%) of each row on the grid's contrastive suites: the reference scored above every wrong "
             "variant by forced decoding. Mean over the row's seeds scored on the suite, with a 95 % two-level "
             "bootstrap interval (items, then seeds); by the distance (tokens) the phenomenon spans.", ""]  # fmt: skip
    for suite in grid.contrastive:
        labels = [bucket(item.distance) for item in read_suite(suite.suite)]
        present = [name for name in BUCKETS if name in labels]
        columns = np.asarray(labels)
        header = ["row", "seeds", "all", *(f"d {name} ({labels.count(name)})" for name in present)]
        rule = "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"
        lines = [f"### {suite.name} ({len(labels)} items, `{suite.suite.name}`)", "", "| " + " | ".join(header) + " |",
                 rule]  # fmt: skip
        curves: dict[str, list[tuple[float, float, float]]] = {}
        for row in rows:
            correct = outcomes(row, suite)
            if correct is None:
                continue
            rng = np.random.default_rng(SEED)
            overall = accuracy_interval(correct, rng)
            curves[row.name] = [accuracy_interval(correct[:, columns == name], rng) for name in present]
            lines.append(f"| {row.name} | {len(correct)} | {cell(overall)} | "
                         + " | ".join(cell(values) for values in curves[row.name]) + " |")  # fmt: skip
        if not curves:
            lines.append("| (no run scored on it yet) | | |")
        parts += [*lines, ""]
        if curves:
            path = plot(suite, present, curves, plots / f"contrastive-{suite.name}.png")
            parts += [f"![accuracy by distance, {suite.name}](plots/{path.name})", ""]
    return "\n".join(parts + distance_drops(grid, rows))


def pooled_outcomes(grid: Grid, rows: list[Row]) -> dict[str, np.ndarray]:
    """Row name → [seeds, items] outcomes on all the grid's suites concatenated, of the runs scored on every one."""
    names = [suite.name for suite in grid.contrastive]
    pooled = {}
    for row in rows:
        found = [np.concatenate([r.contrastive[name].correct for name in names]) for r in row.results
                 if all(name in r.contrastive for name in names)]  # fmt: skip
        if found:
            pooled[row.name] = np.asarray(found, dtype=float)
    return pooled


def distance_drops(grid: Grid, rows: list[Row]) -> list[str]:
    """Markdown lines of :func:`drop_lines` for the grid's suites and rows (the runs scored on every suite)."""
    distances = [item.distance for suite in grid.contrastive for item in read_suite(suite.suite)]
    return drop_lines(distances, pooled_outcomes(grid, rows), grid.baseline)


def drop_lines(distances: list[int | None], pooled: dict[str, np.ndarray], baseline: str | None) -> list[str]:
    """Markdown lines: each row's drop from adjacent to distant agreement and, against the baseline, the difference of
    the drops, each with its 95 % interval; ``pooled``: row → [seeds, items] outcomes on the items of ``distances``
    (nothing when the items lack either group or no row has outcomes)."""
    located = np.array([-1 if distance is None else distance for distance in distances])
    near, far = np.flatnonzero(located == NEAR), np.flatnonzero(located >= FAR)
    if not (len(near) and len(far) and pooled):
        return []
    rng = np.random.default_rng(SEED)
    near_draws = near[rng.integers(0, len(near), size=(RESAMPLES, len(near)))]
    far_draws = far[rng.integers(0, len(far), size=(RESAMPLES, len(far)))]
    drops: dict[str, tuple[float, np.ndarray]] = {}
    for name, correct in pooled.items():
        seed_mean = correct.mean(axis=0)  # [items]
        items_drawn = seed_mean[near_draws].mean(axis=1) - seed_mean[far_draws].mean(axis=1)  # [RESAMPLES]
        seed_drops = correct[:, near].mean(axis=1) - correct[:, far].mean(axis=1)
        replicates = items_drawn + seed_deviations([(1.0, seed_drops)], RESAMPLES, rng)
        drops[name] = float(seed_drops.mean()), replicates

    def shown(value: float, replicates: np.ndarray) -> str:
        low, high = np.percentile(replicates, [2.5, 97.5])
        return f"{100 * value:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"

    base = drops.get(baseline or "")
    lines = ["### Agreement over distance, against the baseline", "",
             f"All suites pooled: {len(near)} adjacent items (d = {NEAR}) and {len(far)} distant ones (d ≥ {FAR}). "
             "Drop: accuracy on the adjacent items minus the distant ones (points); against the baseline "
             f"({baseline or 'none named'}): the row's drop minus the baseline's, positive when the row loses "
             "more over distance. 95 % intervals from the two-level bootstrap, paired (the same item draws for "
             "every row); descriptive, not corrected for the number of rows.", "",
             "| row | seeds | d = 1 | d ≥ 3 | drop [95 %] | drop − baseline's [95 %] |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, correct in pooled.items():
        value, replicates = drops[name]
        against = "–" if base is None or name == baseline else shown(value - base[0], replicates - base[1])
        lines.append(f"| {name} | {len(correct)} | {100 * correct[:, near].mean():.1f} | "
                     f"{100 * correct[:, far].mean():.1f} | {shown(value, replicates)} | {against} |")  # fmt: skip
    return [*lines, ""]


def plot(suite: ContrastiveSuite, buckets: list[str], curves: dict[str, list[tuple[float, float, float]]],
         path: Path) -> Path:  # fmt: skip
    """Accuracy against distance bucket, one line per row with its intervals."""
    from adlnmt.plotting import pyplot, save_figure

    figure, axis = pyplot().subplots(figsize=(7, 4))
    positions = np.arange(len(buckets))
    for offset, (name, values) in enumerate(curves.items()):
        mean = np.array([v[0] for v in values]) * 100
        errors = np.array([[v[0] - v[1], v[2] - v[0]] for v in values]).T * 100
        shift = (offset - (len(curves) - 1) / 2) * 0.06
        axis.errorbar(positions + shift, mean, yerr=errors, marker="o", capsize=3, label=name)
    axis.set_xticks(positions, buckets)
    axis.set_xlabel("distance (tokens) the phenomenon spans")
    axis.set_ylabel("accuracy (%)")
    axis.set_title(f"{suite.name}: reference above every contrastive variant")
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return save_figure(figure, path)
