"""A grid's claims judged on several of its test sets at once: would more test sentences settle the claims that more
seeds cannot (experiments/analysis/README.md, "Test sets pooled")?

For each claim on a sentence-level metric (not the speed or validation-perplexity claims), each row's runs scored on
every test set named, each run's sentences of those sets concatenated (its translations against the references, in
the order given; a claim on a source-length range keeps the sentences of that range in each set), then the two-level
bootstrap and the verdict rules of :mod:`adlnmt.verdicts.statistics`, with Holm's adjustment over the table's
claims so judged (a claim the paper scopes elsewhere is shown, not adjusted). An analysis added on 2026-11-27, after
the results: no claim was registered on the pooled sets, and none of its verdicts changes. As in the claims, a row
measured on one run reads *inconclusive: one seed*. The sets differ (Flickr
captions of 2016 and 2017, COCO captions), so a pooled score weighs them by their sizes.

    python experiments/analysis/pooled_tests.py experiments/adl-table5.yaml --scale cpu \\
        --tests test_2016_flickr,test_2017_flickr,test_2017_mscoco
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from adlnmt.experiment.folders import output_folders
from adlnmt.experiment.grid import RUN_METRICS, Grid, load_grid
from adlnmt.experiment.judge import Judge
from adlnmt.experiment.results import RunResult
from adlnmt.experiment.runner import plan_runs
from adlnmt.metrics import read_lines, segment_statistics
from adlnmt.verdicts.claims import Claim, Judgement, contrast_weights, relation, source_range
from adlnmt.verdicts.statistics import (
    LOWER_IS_BETTER,
    MIN_SEEDS,
    ONE_SEED,
    RunScores,
    Tested,
    assess,
    contrast,
    holm,
    run_scores,
    verdict,
)


class Pool:
    """The runs' scores on the named test sets concatenated, computed once per run, metric and source-length range
    (a row is read by several claims)."""

    def __init__(self, grid: Grid, tests: list[str], resamples: int) -> None:
        known = {test.name: test for test in grid.tests}
        if unknown := [name for name in tests if name not in known]:
            raise SystemExit(f"{grid.path}: no test set {unknown[0]!r} (it has {', '.join(known)})")
        self.tests = [known[name] for name in tests]
        self.resamples = resamples
        self._lines: dict[Path, list[str]] = {}
        self._scores: dict[tuple[Path, str, int, int], RunScores] = {}

    def _read(self, path: Path) -> list[str]:
        if path not in self._lines:
            self._lines[path] = read_lines(path)
        return self._lines[path]

    def scored(self, result: RunResult) -> bool:
        """Whether the run was scored on every set of the pool."""
        return all(test.name in result.tests for test in self.tests)

    def scores(self, folder: Path, result: RunResult, claim: Claim) -> RunScores:
        """The run's score on the pooled sentences (of the claim's source-length range) with its replicates."""
        low, high = claim.min_source_words, claim.max_source_words
        key = (folder, claim.metric, low, high)
        if key not in self._scores:
            statistics, keep = [], []
            for test in self.tests:
                hypotheses = self._read(folder / result.tests[test.name].hypotheses)
                statistics.append(np.asarray(segment_statistics(claim.metric, hypotheses, self._read(test.ref))))
                lengths = np.array([len(line.split()) for line in self._read(test.src)])
                keep.append((lengths >= low) & ((lengths <= high) if high else True))
            mask = np.concatenate(keep)
            self._scores[key] = run_scores(claim.metric, np.concatenate(statistics), self.resamples,
                                           subset=None if mask.all() else mask)  # fmt: skip
        return self._scores[key]


def pooled(judge: Judge, pool: Pool, claim: Claim) -> tuple[Tested, tuple[int, ...]] | None:
    """The claim on the pooled sets: its test and the runs of each row it rests on; None where a row has none."""
    weights = contrast_weights(claim)
    rows = {}
    for name in weights:
        runs = [judge.finished[(name, seed)] for seed in judge.grid.seeds if (name, seed) in judge.finished]
        rows[name] = [pool.scores(folder, result, claim) for folder, result in runs if pool.scored(result)]
    if not all(rows.values()):
        return None
    estimate = contrast(list(rows.values()), list(weights.values()), claim.metric in LOWER_IS_BETTER)
    return assess(claim.kind, estimate, claim.margin), tuple(len(runs) for runs in rows.values())


def table(path: Path, scale: str, tests: list[str]) -> str:
    grid = load_grid(path, scale)
    folders = output_folders(grid)
    judge = Judge(grid, plan_runs(grid, folders.work, folders.archive))
    pool = Pool(grid, tests, grid.bootstrap_resamples)
    primary = {j.claim: j for j in judge.judge_all() if j.primary}
    judged: list[tuple[Claim, tuple[Tested, tuple[int, ...]] | None]] = [
        (claim, pooled(judge, pool, claim))
        for claim in grid.claims
        if claim.kind != "faster" and claim.metric not in RUN_METRICS
    ]
    family = [i for i, (claim, found) in enumerate(judged) if found and not claim.out_of_scope]
    adjusted = dict(zip(family, holm([judged[i][1][0].p_value for i in family]), strict=True))
    lines = [
        f"{grid.name} (scale {scale}): {', '.join(tests)} pooled",
        "",
        "| claim tested as | metric | primary: seeds, effect [interval], verdict | pooled: runs a row | pooled: effect "
        "[interval] | p (Holm) | pooled verdict |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for i, (claim, found) in enumerate(judged):
        first = primary.get(claim)
        cells = [f"{relation(claim)}{source_range(claim)}", claim.metric, _primary(first)]
        if found is None:
            cells += ["–", "–", "–", "not run on every set named"]
        else:
            tested, runs = found
            low, high = tested.interval
            p = f"{adjusted[i]:.3f}" if i in adjusted else "– (out of scope)"
            judged_verdict = verdict(tested, adjusted[i]) if i in adjusted else "out of scope at this data size"
            if min(runs) < MIN_SEEDS and i in adjusted:  # as the claims read it: no seed variation to draw from
                judged_verdict = f"{ONE_SEED} (the statistics alone: {judged_verdict})"
            cells += [", ".join(map(str, runs)), f"{tested.effect:+.2f} [{low:+.2f}, {high:+.2f}] "
                      f"({tested.level:.0%})", p, f"**{judged_verdict}**"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _primary(j: Judgement | None) -> str:
    if j is None or j.tested is None:
        return "–"
    low, high = j.tested.interval
    seeds = "/".join(str(len(s)) for s in j.seeds)
    return f"{seeds}: {j.tested.effect:+.2f} [{low:+.2f}, {high:+.2f}], {j.verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grids", nargs="+", type=Path, help="grid files (their committed archives are read)")
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--tests", required=True, help="the test sets to pool, comma-separated")
    args = parser.parse_args()
    for path in args.grids:
        print(table(path, args.scale, args.tests.split(",")) + "\n")


if __name__ == "__main__":
    main()
