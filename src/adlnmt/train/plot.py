"""``adlnmt plot MODEL...``: the training curves of one or more runs (their ``metrics.jsonl``) in one PNG: training
loss, validation perplexity and BLEU, and the learning rate against updates, one line per run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from adlnmt.errors import UserError
from adlnmt.store.atomic import path_flag

PANELS = (
    ("train_loss", "training loss (label-smoothed, per token)"),
    ("valid_ppl", "validation perplexity"),
    ("valid_bleu", "validation BLEU (greedy)"),
    ("lr", "learning rate"),
)


def read_curves(model_dir: Path) -> list[dict[str, Any]]:
    """The checkpoint records of a model directory; UserError naming it when it has none."""
    from adlnmt.store import ModelDir

    if not model_dir.is_dir():
        raise UserError(f"{model_dir}: no such model directory")
    files = ModelDir(model_dir)
    records, partial = files.metrics()  # a partial last line (a run being written) is left out
    if not records:
        why = partial or f"{files.metrics_file}: {files.metrics_file.name} is missing or empty"
        raise UserError(f"{model_dir}: no checkpoint record to plot ({why})")
    return records


def plot_runs(model_dirs: list[Path], out: str | Path) -> Path:
    """Draw every run's curves into ``out`` (its suffix names the format; none: .png added) and return the file
    written; circles mark each run's best checkpoint."""
    from adlnmt.plotting import figure_path, line_style, place_legend, pyplot, save_figure

    out = figure_path(out)  # before reading or drawing anything
    runs = [(str(model_dir), read_curves(model_dir)) for model_dir in model_dirs]
    present = [(key, title) for key, title in PANELS if any(key in r for _, records in runs for r in records)]
    plt = pyplot()
    figure, axes = plt.subplots(1, len(present), figsize=(4.5 * len(present), 4), squeeze=False)
    for index, (name, records) in enumerate(runs):
        style = line_style(index, len(runs))
        for axis, (key, _) in zip(axes[0], present, strict=True):
            points = [(r["update"], r[key]) for r in records if r.get(key) is not None]
            if points:
                axis.plot(*zip(*points, strict=True), label=name, **style)
            best = next((r for r in records if r["update"] == records[-1].get("best_update")), None)
            if key == "valid_ppl" and best is not None:
                axis.scatter([best["update"]], [best["valid_ppl"]], s=60, facecolors="none", edgecolors=style["color"])
    for axis, (key, title) in zip(axes[0], present, strict=True):
        axis.set_title(title)
        axis.set_xlabel("updates")
        axis.grid(alpha=0.3)
        if key in ("valid_ppl", "lr"):
            axis.set_yscale("log")
        if key == "valid_ppl":  # 20, 50, 100 rather than 2×10¹ ...
            from matplotlib.ticker import FuncFormatter

            for axis_format in (axis.yaxis.set_major_formatter, axis.yaxis.set_minor_formatter):
                axis_format(FuncFormatter(lambda value, _: f"{value:g}"))
    place_legend(axes[0][-1], len(runs))
    return save_figure(figure, out)


def cmd_plot(args: argparse.Namespace) -> int:
    out = plot_runs([Path(model) for model in args.models], args.out)  # as given: 'plots/' names a folder
    print(f"curves of {len(args.models)} run(s) written to {out}", file=sys.stderr)
    return 0


def add_plot_command(commands: argparse._SubParsersAction) -> None:
    plot = commands.add_parser(
        "plot",
        help="draw the training curves of one or more model directories (metrics.jsonl) to a PNG",
        description="Training loss, validation perplexity and BLEU and the learning rate against updates, one line "
        "per model directory (also while it trains); circles mark each run's best checkpoint.",
    )
    plot.add_argument(
        "models", nargs="+", metavar="MODEL", type=path_flag, help="model directories (adlnmt train --model)"
    )
    plot.add_argument(
        "--out",
        default="curves.png",
        type=path_flag,
        help="figure to write, in the format its suffix names: .png, .pdf, .svg ... (no suffix: .png added; "
        "default: curves.png)",
    )
    plot.set_defaults(func=cmd_plot)
