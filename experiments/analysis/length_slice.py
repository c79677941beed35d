"""Rows of committed runs compared on a slice of a test set by source length, from their hypothesis files alone (no
weights): issue 38, point 4 (COMET's short-sentence deficit, and whether mixed-length batches remove it;
experiments/analysis/README.md).

Each ``--row NAME=HYP[,HYP...]`` is one row, its hypothesis files one per seed (a grid's ``runs/ROW/seed-N/hyp/
TEST.txt``). For every row: the slice's sentences, mean sentence BLEU (sacreBLEU's add-1 smoothed, as the grids'
``sentbleu``), corpus BLEU and the hypothesis/reference length ratio in words, mean over the seeds; for every row
but the first, its difference to the first (``--row`` order) in sentBLEU and BLEU with a 95 % interval and the
centred two-sided p of the reports' two-level bootstrap (sentences of the slice drawn jointly for all runs, then
each row's seeds: ``adlnmt.verdicts.statistics``). Prints one Markdown table.

    python experiments/analysis/length_slice.py --src ../shared/data/multi30k/val.de.gz \\
        --ref ../shared/data/multi30k/val.en.gz --max-words 7 \\
        --row Transformer=experiments/results/comet-table1-cpu/runs/Transformer/seed-1/hyp/dev.txt,... \\
        --row COMET=...
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adlnmt.metrics import read_lines, segment_statistics
from adlnmt.verdicts.statistics import interval, p_two_sided, run_scores, two_level

METRICS = ("sentbleu", "bleu")


@dataclass(frozen=True)
class Row:
    name: str
    hypotheses: list[list[str]]  # one list of lines per seed


def parse_row(text: str) -> Row:
    name, sep, files = text.partition("=")
    if not sep or not name or not files:
        raise argparse.ArgumentTypeError(f"--row {text!r}: expected NAME=HYP[,HYP...]")
    return Row(name, [read_lines(path) for path in files.split(",")])


def words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


def table(rows: list[Row], sources: list[str], references: list[str], low: int, high: int | None) -> str:
    lengths = np.array([len(line.split()) for line in sources])
    subset = (lengths >= low) & (lengths <= (high if high is not None else lengths.max()))
    chosen = np.flatnonzero(subset)
    scores = {
        (row.name, metric): [run_scores(metric, np.array(segment_statistics(metric, hyps, references)), subset=subset)
                             for hyps in row.hypotheses]
        for row in rows for metric in METRICS
    }  # fmt: skip
    span = f"{low}–{high}" if high is not None else f"{low}+"
    lines = [
        f"Sources of {span} words: {len(chosen)} of {len(sources)} sentences.",
        "",
        "| row | seeds | sentBLEU | BLEU | hyp/ref words | sentBLEU − first [95 %], p | BLEU − first [95 %], p |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    reference_words = words([references[i] for i in chosen])
    for row in rows:
        means = [np.mean([run.score for run in scores[row.name, metric]]) for metric in METRICS]
        ratio = np.mean([words([hyps[i] for i in chosen]) for hyps in row.hypotheses]) / reference_words
        differences = []
        for metric in METRICS:
            if row is rows[0]:
                differences.append("–")
                continue
            estimate = two_level(scores[row.name, metric], scores[rows[0].name, metric])
            lo, hi = interval(estimate, 0.95)
            differences.append(f"{estimate.effect:+.2f} [{lo:+.2f}, {hi:+.2f}], p {p_two_sided(estimate):.4f}")
        cells = [row.name, str(len(row.hypotheses)), f"{means[0]:.2f}", f"{means[1]:.2f}", f"{ratio:.3f}"]
        lines.append("| " + " | ".join(cells + differences) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, required=True, help="the test set's sources")
    parser.add_argument("--ref", type=Path, required=True, help="its references")
    parser.add_argument("--row", type=parse_row, action="append", required=True, help="NAME=HYP[,HYP...]")
    parser.add_argument("--min-words", type=int, default=1, help="the slice's shortest source, in words")
    parser.add_argument("--max-words", type=int, default=None, help="its longest (default: no limit)")
    args = parser.parse_args(argv)
    sources, references = read_lines(args.src), read_lines(args.ref)
    for row in args.row:
        for i, hyps in enumerate(row.hypotheses, 1):
            if len(hyps) != len(sources):
                parser.error(f"row {row.name}, file {i}: {len(hyps)} lines, the sources have {len(sources)}")
    print(table(args.row, sources, references, args.min_words, args.max_words))


if __name__ == "__main__":
    main()
