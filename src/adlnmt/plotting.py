"""Matplotlib for every figure adlnmt draws (experiment reports, `adlnmt plot`): the headless backend, one line
style per series, where the legend goes, and saving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adlnmt.errors import UserError


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


def figure_path(path: str | Path) -> Path:
    """The file a figure asked for as ``path`` is written to, checked before any drawing: its suffix names the format
    (none: ``.png`` is added); a suffix matplotlib cannot write or a directory (existing, or written as one: ``plots/``)
    is a UserError."""
    from matplotlib.backend_bases import FigureCanvasBase

    from adlnmt.store.atomic import names_a_folder

    if names_a_folder(path):
        raise UserError(f"{path}: is a directory; name the figure's file, e.g. {Path(path) / 'curves.png'}")
    path = Path(path)
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in formats:
        raise UserError(f"{path}: cannot draw a figure as '{path.suffix}'; use one of "
                        f"{', '.join('.' + name for name in sorted(formats))}")  # fmt: skip
    return path


def save_figure(figure: Any, path: Path) -> Path:
    """Write ``figure`` atomically to ``path`` (:func:`figure_path`: a .png added where it has no suffix; its folder
    created), legends beside the axes included, close it and return the file written."""
    from adlnmt.store.atomic import atomic_write

    path = figure_path(path)
    figure.tight_layout()
    form = path.suffix[1:].lower()
    try:  # a legend beside the axes included
        atomic_write(path, lambda tmp: figure.savefig(tmp, format=form, dpi=120, bbox_inches="tight"))
    finally:
        pyplot().close(figure)
    return path
