"""Do seeds trained on different machines score alike? A check behind the rows that mix them (the grids' seeds ran
on the 2-core VM's changing CPUs and on lent GPUs, all fp32 with TF32 off: the same arithmetic, not the same
rounding); experiments/analysis/README.md.

For one archive (``experiments/results/GRID``) every finished run is a row, a seed, the machine it trained and was
evaluated on (the GPU's name, or the CPU's with its instruction set) and its score on one test set. The machine's
effect is the least-squares coefficient of a model with one mean per row and one shift per machine (the first
machine by evaluation date is the reference): the within-row difference, pooled over the rows that ran on both.
Its p is a permutation test within rows (the machine labels shuffled among each row's runs, the coefficient
refitted; two-sided), so it assumes nothing about the scores' distribution; its interval is the coefficient ± t ×
standard error with the model's residual degrees of freedom. The same for the best validation perplexity, which
needs no decoding: a shift in the score without one in perplexity points at decoding (or chance), not training.
``hyp/ref words``: the mean length of the runs' outputs against the references, in words.

A machine that ran only some seeds confounds machine and seed (the same seed gives every row the same data order):
the table lists each machine's seeds so the reader can see it.

    python experiments/analysis/machine_effect.py experiments/results/adl-table5-cpu \\
        --test test_2016_flickr --metric bleu --ref ../shared/data/multi30k/test_2016_flickr.en.gz
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adlnmt.experiment.results import RunResult
from adlnmt.metrics import read_lines

PERMUTATIONS = 10_000
SEED = 20_261_126


@dataclass(frozen=True)
class Run:
    row: str
    seed: int
    machine: str
    score: float
    valid_ppl: float
    length_ratio: float | None  # hypothesis words / reference words


def read_runs(archive: Path, test: str, metric: str, references: list[str] | None) -> list[Run]:
    """The archive's finished runs scored on ``test`` with ``metric``, in evaluation order."""
    results = [(RunResult.load(path), path.parent) for path in sorted(archive.glob("runs/*/seed-*/result.json"))]
    runs = []
    for result, folder in sorted(results, key=lambda pair: pair[0].evaluated):
        evaluation = result.tests.get(test)
        if evaluation is None or metric not in evaluation.scores:
            continue
        ratio = None if references is None else _words(read_lines(folder / evaluation.hypotheses)) / _words(references)
        runs.append(Run(result.variant, result.seed, result.machine().processor, evaluation.scores[metric],
                        result.best_valid_ppl, ratio))  # fmt: skip
    return runs


def _words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


@dataclass(frozen=True)
class Fit:
    """Least squares of a value on one mean per row and one shift per machine but the first (the reference)."""

    shifts: np.ndarray  # one per machine but the first, in the order given
    errors: np.ndarray  # their standard errors
    dof: int  # residual degrees of freedom
    row_means: dict[str, float]  # each row's mean on the reference machine


def machine_order(runs: list[Run]) -> list[str]:
    """The runs' machines, the reference first: the one evaluated earliest (``read_runs`` order)."""
    return list(dict.fromkeys(run.machine for run in runs))


def fit(rows: list[str], machines: list[str], values: np.ndarray, machine_names: list[str]) -> Fit:
    """The model of :class:`Fit` for ``values``, the first of ``machine_names`` the reference."""
    row_names = sorted(set(rows))
    design = np.array([[float(r == name) for name in row_names] + [float(m == name) for name in machine_names[1:]]
                       for r, m in zip(rows, machines, strict=True)])  # fmt: skip
    coefficients, *_ = np.linalg.lstsq(design, values, rcond=None)
    residuals = values - design @ coefficients
    dof = int(len(values) - np.linalg.matrix_rank(design))
    variance = residuals @ residuals / dof if dof > 0 else np.nan
    errors = np.sqrt(np.diag(variance * np.linalg.pinv(design.T @ design)))
    means = dict(zip(row_names, coefficients[: len(row_names)].tolist(), strict=True))
    return Fit(coefficients[len(row_names) :], errors[len(row_names) :], dof, means)


def permutation_p(rows: list[str], machines: list[str], values: np.ndarray, machine_names: list[str],
                  permutations: int = PERMUTATIONS, seed: int = SEED) -> np.ndarray:  # fmt: skip
    """Two-sided p of each shift: machine labels permuted within each row, (1 + #{|shift*| ≥ |shift|}) / (R + 1)."""
    observed = np.abs(fit(rows, machines, values, machine_names).shifts)
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(np.array(rows) == name) for name in sorted(set(rows))]
    labels = np.array(machines, dtype=object)
    exceed = np.zeros_like(observed)
    for _ in range(permutations):
        shuffled = labels.copy()
        for members in groups:
            shuffled[members] = labels[rng.permutation(members)]
        exceed += np.abs(fit(rows, list(shuffled), values, machine_names).shifts) >= observed - 1e-12
    return (1 + exceed) / (permutations + 1)


def t_quantile(dof: int, level: float = 0.975, draws: int = 2_000_000, seed: int = SEED) -> float:
    """Student's t quantile by simulation (numpy has no inverse t; 2 million draws: good to about 0.01)."""
    return float(np.quantile(np.random.default_rng(seed).standard_t(dof, size=draws), level))


def table(runs: list[Run], metric: str, permutations: int = PERMUTATIONS) -> str:
    machine_names = machine_order(runs)
    rows, machines = [run.row for run in runs], [run.machine for run in runs]
    lines = [
        f"{len(runs)} runs of {len(set(rows))} rows; reference machine: {machine_names[0]}.",
        "",
        f"| machine | runs | seeds | {metric} shift [95 %] | p | valid ppl shift [95 %] | p | hyp/ref words |",
        "|---|---:|---|---|---:|---|---:|---:|",
    ]
    shifts = {}
    for name, values in ((metric, np.array([run.score for run in runs])),
                         ("ppl", np.array([run.valid_ppl for run in runs]))):  # fmt: skip
        model = fit(rows, machines, values, machine_names)
        p = permutation_p(rows, machines, values, machine_names, permutations)
        t = t_quantile(model.dof) if model.dof > 0 else np.nan
        shifts[name] = [f"{c:+.2f} [{c - t * e:+.2f}, {c + t * e:+.2f}] | {q:.4f}"
                        for c, e, q in zip(model.shifts, model.errors, p, strict=True)]  # fmt: skip
    for i, machine in enumerate(machine_names):
        mine = [run for run in runs if run.machine == machine]
        seeds = ", ".join(str(s) for s in sorted({run.seed for run in mine}))
        ratios = [run.length_ratio for run in mine if run.length_ratio is not None]
        ratio = f"{np.mean(ratios):.3f}" if ratios else "–"
        cells = ["reference | –", "reference | –"] if i == 0 else [shifts[metric][i - 1], shifts["ppl"][i - 1]]
        lines.append(f"| {machine} | {len(mine)} | {seeds} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def adjusted(runs: list[Run], first: str, second: str) -> tuple[float, float]:
    """``first`` − ``second`` in mean score: as measured, and with each machine's shift taken out (the rows' means
    of the model)."""
    rows = [run.row for run in runs]
    scores = np.array([run.score for run in runs])
    means = fit(rows, [run.machine for run in runs], scores, machine_order(runs)).row_means
    measured = np.mean(scores[np.array(rows) == first]) - np.mean(scores[np.array(rows) == second])
    return float(measured), means[first] - means[second]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path, help="a grid's results folder (experiments/results/GRID)")
    parser.add_argument("--test", required=True, help="the test set's name in the results")
    parser.add_argument("--metric", default="bleu", help="a metric the runs were scored with (default bleu)")
    parser.add_argument("--ref", type=Path, help="the test set's references, for the output length column")
    parser.add_argument("--permutations", type=int, default=PERMUTATIONS)
    parser.add_argument("--contrast", action="append", default=[], metavar="A:B",
                        help="rows A and B: A − B as measured and with the machines' shifts taken out")  # fmt: skip
    args = parser.parse_args(argv)
    runs = read_runs(args.archive, args.test, args.metric, read_lines(args.ref) if args.ref else None)
    if len({run.machine for run in runs}) < 2:
        parser.error(f"{args.archive}: fewer than two machines among the runs scored on {args.test} ({args.metric})")
    known = {run.row for run in runs}
    contrasts = [contrast.split(":") for contrast in args.contrast]
    for contrast, pair in zip(args.contrast, contrasts, strict=True):
        if len(pair) != 2 or not set(pair) <= known:
            parser.error(
                f"--contrast {contrast!r}: expected ROW:ROW of {args.archive}'s rows ({', '.join(sorted(known))})"
            )
    print(table(runs, args.metric, args.permutations) + "\n")
    for first, second in contrasts:
        measured, without = adjusted(runs, first, second)
        print(f"{first} − {second}: {measured:+.2f} as measured, {without:+.2f} with the machines' shifts taken out")


if __name__ == "__main__":
    main()
