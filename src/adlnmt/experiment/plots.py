"""The experiment's figures (PNG, matplotlib's Agg backend), each a mean over the finished seeds of a variant:
training and validation curves against updates (AAN Fig. 5), scores by source length (AAN Fig. 6, and COMET Fig. 4's
difference to the baseline) and decoding time per sentence by source length (AAN Fig. 7)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from adlnmt.experiment.grid import Grid
from adlnmt.experiment.rows import Row
from adlnmt.plotting import line_style, place_legend, pyplot, save_figure

SHORT = {"bleu": "BLEU", "chrf": "chrF", "ter": "TER", "meteor": "METEOR", "sentbleu": "sentBLEU"}


def _mean(values: list[float | None]) -> float:
    found = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(found) if found else math.nan


def _curve(row: Row, key: str) -> tuple[list[int], list[float]]:
    """Mean of ``key`` over the seeds at each checkpoint update (seeds that stopped early drop out)."""
    by_update: dict[int, list[float | None]] = defaultdict(list)
    for result in row.results:
        for point in result.curve:
            by_update[point.update].append(getattr(point, key))
    updates = sorted(by_update)
    return updates, [_mean(by_update[u]) for u in updates]


def _buckets(row: Row, test: str, value: Any) -> tuple[list[str], list[float]]:
    """Bucket labels of ``test`` and the mean of ``value(bucket)`` in each over the seeds evaluated on ``test``
    (a test set added to a grid later is missing from its earlier runs)."""
    per_seed = [timing.buckets for result in row.results if (timing := result.timing(test))]
    labels = [f"{b.label}\n({b.sentences})" for b in per_seed[0]] if per_seed else []
    return labels, [_mean([value(buckets[i]) for buckets in per_seed]) for i in range(len(labels))]


def valid_curves(grid: Grid, rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    panels = [("train_loss", "training loss (label-smoothed, per token)"), ("valid_ppl", "validation perplexity"),
              ("valid_bleu", "validation BLEU (greedy)")]  # fmt: skip
    points = [point for row in rows for result in row.results for point in result.curve]
    present = [(k, t) for k, t in panels if any(getattr(point, k) is not None for point in points)]
    figure, axes = plt.subplots(1, len(present), figsize=(5 * len(present), 4), squeeze=False)
    for index, row in enumerate(rows):
        style = line_style(index, len(rows))
        for axis, (key, _) in zip(axes[0], present, strict=True):
            axis.plot(*_curve(row, key), label=row.name, **style)
            if key == "valid_ppl":  # each run's best checkpoint: the one evaluated
                best = [(r.best_update, r.best_valid_ppl) for r in row.results if r.best_valid_ppl]
                if best:
                    axis.scatter(*zip(*best, strict=True), s=60, facecolors="none", edgecolors=style["color"])
    for axis, (key, title) in zip(axes[0], present, strict=True):
        axis.set_title(title)
        axis.set_xlabel("updates")
        axis.grid(alpha=0.3)
        if key == "valid_ppl":
            from matplotlib.ticker import FuncFormatter

            axis.set_yscale("log")
            for axis_format in (axis.yaxis.set_major_formatter, axis.yaxis.set_minor_formatter):
                axis_format(FuncFormatter(lambda value, _: f"{value:g}"))
    place_legend(axes[0][-1], len(rows))
    figure.suptitle(f"{grid.name}: training curves (mean over seeds; circles: each run's best checkpoint)")
    return save_figure(figure, path)


def length_scores(grid: Grid, rows: list[Row], test: str, path: Path) -> Path:
    plt = pyplot()
    metric = grid.metrics[0]
    base = next((row for row in rows if row.name == grid.baseline), None)
    panels = 2 if base is not None and len(rows) > 1 else 1
    figure, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2), squeeze=False)
    base_values = _buckets(base, test, lambda b: b.scores.get(metric))[1] if panels == 2 else []
    for index, row in enumerate(rows):
        labels, values = _buckets(row, test, lambda b: b.scores.get(metric))
        style = line_style(index, len(rows))
        axes[0][0].plot(labels, values, label=row.name, **style)
        if panels == 2 and row is not base and len(values) == len(base_values):
            axes[0][1].plot(labels, [v - b for v, b in zip(values, base_values, strict=True)], label=row.name, **style)
    axes[0][0].set_ylabel(SHORT[metric])
    axes[0][0].set_title(f"{SHORT[metric]} by source length ({test})")
    if panels == 2:
        axes[0][1].axhline(0, color="black", linewidth=0.8)
        axes[0][1].set_title(f"difference to {grid.baseline}")
    for axis in axes[0]:
        axis.set_xlabel("source length in words (sentences)")
        axis.grid(alpha=0.3)
        place_legend(axis, len(rows))
    return save_figure(figure, path)


def decode_times(grid: Grid, rows: list[Row], test: str, path: Path) -> Path:
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6.5, 4.2))
    # one line per variant and kind of device it was timed on, labelled with the kind where the figure has several
    groups = [(row.name, kind, runs) for row in rows for kind, runs in row.by_device(timed=True)]
    several = len({kind for _, kind, _ in groups}) > 1
    lines = [(f"{name} ({kind})" if several else name, runs) for name, kind, runs in groups]
    for index, (label, runs) in enumerate(lines):
        axis.plot(*_buckets(runs, test, lambda b: b.ms_per_sentence), label=label, **line_style(index, len(lines)))
    t = grid.translate
    axis.set_title(f"decoding time per sentence ({test}, beam {t['beam']}, batch {t['batch_size']})")
    axis.set_xlabel("source length in words (sentences)")
    axis.set_ylabel("ms per sentence")
    axis.grid(alpha=0.3)
    place_legend(axis, len(lines))
    return save_figure(figure, path)


def make_plots(grid: Grid, rows: list[Row], directory: Path) -> list[tuple[str, Path]]:
    """Every figure for the variants with a finished run, as (caption, path)."""
    rows = [row for row in rows if row.results]
    if not rows:
        return []
    figures = [("Training and validation curves", valid_curves(grid, rows, directory / "curves.png"))]
    for test in grid.tests:
        metric = SHORT[grid.metrics[0]]
        scored = scored_on(rows, test.name)
        if not scored:  # a test set added to the grid after every finished run
            continue
        figures.append((f"{metric} by source length, {test.name}",
                        length_scores(grid, scored, test.name, directory / f"length-{test.name}.png")))  # fmt: skip
        figures.append((f"Decoding time by source length, {test.name}",
                        decode_times(grid, scored, test.name, directory / f"speed-{test.name}.png")))  # fmt: skip
    return figures


def scored_on(rows: list[Row], test: str) -> list[Row]:
    """The rows with the runs of theirs that were scored on ``test`` (one added to the grid later is not on all)."""
    found = [Row(row.name, [r for r in row.results if test in r.tests], row.total) for row in rows]
    return [row for row in found if row.results]
