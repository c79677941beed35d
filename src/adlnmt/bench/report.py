"""Benchmark output: CSV and JSON files, aligned text tables and the time-vs-length plot."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adlnmt.store.atomic import atomic_write, write_text_atomic

Column = tuple[str, str, Callable[[Any], str]]  # row key, header, formatter of a present value


def _fixed(digits: int) -> Callable[[Any], str]:
    return lambda value: f"{value:,.{digits}f}"


def _millions(value: Any) -> str:
    return f"{value / 1e6:.1f}M"


RATES: list[Column] = [("sentences_per_s", "sent/s", _fixed(2)), ("tokens_per_s", "tok/s", _fixed(0))]
MEMORY: list[Column] = [("peak_mb", "peak MB", _fixed(0)), ("added_mb", "+MB", _fixed(0))]
RATIOS: list[Column] = [("speedup_vs_baseline", "x base", _fixed(2)), ("cache_speedup", "x cache", _fixed(2))]
DECODE_COLUMNS: list[Column] = [
    ("decoder", "decoder", str),
    ("parameters", "params", _millions),
    ("beam", "beam", str),
    ("mode", "mode", str),
    *RATES,
    ("ms_per_sentence", "ms/sent", _fixed(1)),
    *MEMORY,
    *RATIOS,
]
LENGTH_COLUMNS: list[Column] = [
    ("decoder", "decoder", str),
    ("beam", "beam", str),
    ("mode", "mode", str),
    ("length", "length", str),
    ("ms_per_sentence", "ms/sent", _fixed(1)),
    ("tokens_per_s", "tok/s", _fixed(0)),
    *MEMORY,
    *RATIOS,
]
TRAIN_COLUMNS: list[Column] = [
    ("preset", "preset", str),
    ("parameters", "params", _millions),
    ("batch_tokens", "batch tok", str),
    ("updates", "updates", str),
    ("updates_per_s", "upd/s", _fixed(2)),
    ("tokens_per_s", "tgt tok/s", _fixed(0)),
    ("sentences_per_s", "sent/s", _fixed(1)),
    *MEMORY,
    ("loss", "loss", _fixed(3)),
]


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    """Rows as aligned text: text columns left-aligned, numbers right-aligned, a missing value as '-'."""
    cells = [[header for _, header, _ in columns]]
    cells += [["-" if row.get(key) is None else show(row[key]) for key, _, show in columns] for row in rows]
    left = [all(isinstance(row.get(key), str) for row in rows) for key, _, _ in columns]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = [
        "  ".join(c.ljust(w) if lft else c.rjust(w) for c, w, lft in zip(line, widths, left, strict=True)).rstrip()
        for line in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _csv_value(value: Any) -> Any:
    return f"{value:.6g}" if isinstance(value, float) else "" if value is None else value


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """One line per row; the columns are every key in order of first appearance; floats to 6 digits."""
    keys = list(dict.fromkeys(key for row in rows for key in row))

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=keys)
            writer.writeheader()
            writer.writerows({key: _csv_value(row.get(key)) for key in keys} for row in rows)

    atomic_write(path, write)


def write_json(path: Path, record: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")


def _label_2_and_5(value: float, _: int) -> str:
    """Minor log-axis labels only at 2·10^k and 5·10^k (the others stay unlabelled)."""
    mantissa = value / 10 ** math.floor(math.log10(value)) if value > 0 else 0
    return f"{value:g}" if round(mantissa) in (2, 5) else ""


def plot_lengths(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """ms per sentence against output length, log-log: one panel per beam, one colour per decoder, solid lines
    cached, dashed uncached."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullLocator

    beams = sorted({row["beam"] for row in rows})
    decoders = list(dict.fromkeys(row["decoder"] for row in rows))
    lengths = sorted({row["length"] for row in rows})
    palette = colormaps["tab10" if len(decoders) <= 10 else "tab20"]
    figure = Figure(figsize=(5.5 * len(beams), 4.5), layout="constrained")
    for axes, beam in zip(figure.subplots(1, len(beams), squeeze=False)[0], beams, strict=True):
        for number, decoder in enumerate(decoders):
            for mode, style in (("cached", "-"), ("uncached", "--")):
                points = sorted(
                    (row["length"], row["ms_per_sentence"])
                    for row in rows
                    if (row["decoder"], row["mode"], row["beam"]) == (decoder, mode, beam)
                )
                if points:
                    xs, ys = zip(*points, strict=True)
                    axes.plot(xs, ys, style, marker="o", markersize=3, color=palette(number), label=f"{decoder} {mode}")
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xticks(lengths, labels=[str(n) for n in lengths])
        axes.xaxis.set_minor_locator(NullLocator())
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.yaxis.set_minor_formatter(FuncFormatter(_label_2_and_5))
        axes.grid(True, which="both", alpha=0.3)
        axes.set_xlabel("output length (tokens)")
        axes.set_ylabel("ms per sentence")
        axes.set_title("greedy" if beam == 1 else f"beam {beam}")
        axes.legend(fontsize="x-small", handlelength=3)
    figure.suptitle(title, fontsize="small")
    atomic_write(path, lambda tmp: figure.savefig(tmp, format=path.suffix[1:] or "png", dpi=120))
