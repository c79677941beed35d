"""How much of BLEU's seed-to-seed variation within a row is output length? experiments/analysis/README.md,
"Output length and seed variance".

Corpus BLEU is a product, BLEU = BP × P, of the brevity penalty BP = exp(min(0, 1 − ref/hyp tokens)) and the
geometric mean P of its four n-gram precisions, so log BLEU = log BP + log P exactly. For each archive
(``experiments/results/GRID``) every run in IEEE fp32 (the runs the rows read: adlnmt.experiment.arithmetic) is
scored on one test set from its archived translations with sacreBLEU's statistics; each value is centred on its
row's mean (rows with two or more runs), which leaves the seed-to-seed variation alone, and

    var(log BLEU) = var(log BP) + var(log P) + 2 cov(log BP, log P).

The slope of log BLEU on log BP says how much of a change of the penalty reaches BLEU (1: all of it; 0: the
precisions make up for it) and R² how much of BLEU's seed variance length accounts for; its 95 % interval comes from
a bootstrap of the centred runs (``RESAMPLES``). The standard deviations are of natural logs, so ×100 reads as a
percentage of BLEU.

    python experiments/analysis/length_variance.py experiments/results/adl-table5-cpu ... \\
        --test test_2016_flickr --ref ../shared/data/multi30k/test_2016_flickr.en.gz
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adlnmt.experiment.arithmetic import departure
from adlnmt.experiment.results import RunResult
from adlnmt.metrics import read_lines, segment_statistics
from adlnmt.verdicts.statistics import brevity_penalty, corpus_scores

RESAMPLES = 10_000
SEED = 20_261_126


@dataclass(frozen=True)
class Run:
    row: str
    seed: int
    log_bleu: float
    log_penalty: float  # log BP
    log_precision: float  # log P, the geometric mean of the n-gram precisions


def score(hypotheses: list[str], references: list[str]) -> tuple[float, float]:
    """(log BLEU, log BP) of the translations against the references, from sacreBLEU's summed statistics."""
    sums = np.asarray(segment_statistics("bleu", hypotheses, references), dtype=np.float64).sum(axis=0)
    return float(np.log(corpus_scores("bleu", sums))), float(np.log(brevity_penalty(sums[0], sums[1])))


def read_runs(archive: Path, test: str, references: list[str]) -> list[Run]:
    """The archive's runs in IEEE fp32 that were scored on ``test``."""
    runs = []
    for path in sorted(archive.glob("runs/*/seed-*/result.json")):
        result = RunResult.load(path)
        evaluation = result.tests.get(test)
        if evaluation is None or departure(result) is not None:
            continue
        log_bleu, log_penalty = score(read_lines(path.parent / evaluation.hypotheses), references)
        runs.append(Run(result.variant, result.seed, log_bleu, log_penalty, log_bleu - log_penalty))
    return runs


@dataclass(frozen=True)
class Decomposition:
    rows: int  # rows with two or more runs
    runs: int  # their runs
    sd_bleu: float  # of log BLEU within rows
    sd_penalty: float
    sd_precision: float
    correlation: float  # of log BP and log P within rows
    slope: float  # of log BLEU on log BP
    r2: float
    r2_interval: tuple[float, float]


def centred(runs: list[Run]) -> tuple[np.ndarray, int]:
    """(log BLEU, log BP, log P) of every run of a row with two or more runs, less its row's mean; and the number of
    such rows."""
    by_row: dict[str, list[Run]] = {}
    for run in runs:
        by_row.setdefault(run.row, []).append(run)
    parts = [values - values.mean(axis=0) for members in by_row.values() if len(members) > 1
             for values in [np.array([(r.log_bleu, r.log_penalty, r.log_precision) for r in members])]]  # fmt: skip
    return (np.concatenate(parts) if parts else np.zeros((0, 3))), len(parts)


def _slope_r2(values: np.ndarray) -> tuple[float, float]:
    bleu, penalty = values[:, 0], values[:, 1]
    covariance, variance = np.mean(bleu * penalty), np.mean(penalty**2)
    if variance == 0 or np.mean(bleu**2) == 0:
        return float("nan"), float("nan")
    return covariance / variance, covariance**2 / (variance * np.mean(bleu**2))


def decompose(runs: list[Run], resamples: int = RESAMPLES, seed: int = SEED) -> Decomposition:
    """The within-row decomposition of :mod:`length_variance` (module docstring) over ``runs``."""
    values, rows = centred(runs)
    if len(values) < 3:
        raise ValueError(f"{len(values)} runs in rows of two or more: too few to decompose")
    slope, r2 = _slope_r2(values)
    rng = np.random.default_rng(seed)
    draws = [_slope_r2(values[rng.integers(0, len(values), len(values))])[1] for _ in range(resamples)]
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    sd = np.sqrt(np.sum(values**2, axis=0) / (len(values) - rows))  # each row's mean took a degree of freedom
    scale = np.sqrt(np.sum(values[:, 1] ** 2) * np.sum(values[:, 2] ** 2))
    correlation = np.sum(values[:, 1] * values[:, 2]) / scale if scale > 0 else float("nan")
    return Decomposition(rows, len(values), *sd.tolist(), float(correlation), slope, r2, (float(low), float(high)))


def table(archives: list[Path], test: str, references: list[str], resamples: int = RESAMPLES) -> str:
    lines = [
        "| archive | rows | runs | sd log BLEU ×100 | sd log BP ×100 | sd log P ×100 | corr(log BP, log P) "
        "| slope of log BLEU on log BP | R² [95 %] |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for archive in archives:
        try:
            d = decompose(read_runs(archive, test, references), resamples)
        except ValueError as err:
            lines.append(f"| {archive.name} | {err} |" + " |" * 7)
            continue
        lines.append(f"| {archive.name} | {d.rows} | {d.runs} | {100 * d.sd_bleu:.2f} | "
                     f"{100 * d.sd_penalty:.2f} | {100 * d.sd_precision:.2f} | {d.correlation:+.2f} | {d.slope:.2f} | "
                     f"{d.r2:.2f} [{d.r2_interval[0]:.2f}, {d.r2_interval[1]:.2f}] |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archives", nargs="+", type=Path, help="experiments/results/GRID folders")
    parser.add_argument("--test", required=True, help="the test set's name in the grids")
    parser.add_argument("--ref", required=True, type=Path, help="its references")
    args = parser.parse_args()
    print(table(args.archives, args.test, read_lines(args.ref)))


if __name__ == "__main__":
    main()
