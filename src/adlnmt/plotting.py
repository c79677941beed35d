"""Matplotlib for every figure adlnmt draws (experiment reports, `adlnmt plot`): the headless backend, one line
style per series, where the legend goes, and saving."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def line_style(index: int, count: int) -> dict[str, Any]:
    """Colour and marker of series ``index`` of ``count``."""
    plt = pyplot()
    colours = plt.get_cmap("tab10" if count <= 10 else "tab20")
    return {"color": colours(index % colours.N), "marker": "os^vDP*Xhp<>"[index % 12], "markersize": 4}


def place_legend(axis: Any, lines: int) -> None:
    """Inside the axes for a few lines; beside them, where it hides no data, for more than 10."""
    if lines <= 10:
        axis.legend(fontsize="small")
    else:
        axis.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def save_figure(figure: Any, path: Path) -> Path:
    """Write ``figure`` to ``path`` (its folder created), legends beside the axes included, and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")  # a legend beside the axes included
    pyplot().close(figure)
    return path
