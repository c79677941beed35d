"""How many seeds a row would decide each inconclusive claim, if its effect and variances stayed as measured? A
planning aid for the scarce compute (experiments/analysis/README.md, "Seeds to decide a claim"), not evidence.

A claim's effect is Σ w·(row mean) (adlnmt.verdicts.claims.contrast_weights: A − B, or the difference of two steps'
gains), and its bootstrap (adlnmt.verdicts.statistics.contrast) adds two parts: the test sentences' replicates of
Σ w·(mean of the row's runs' scores), and a seed-level draw, Student's t with Welch–Satterthwaite degrees of freedom
scaled to Σ w²·s²/n (s² a row's seed variance, n its seeds). The projection keeps the effect, the sentence replicates
and every s² as measured, gives every row n seeds, draws the seed level for that n as the bootstrap would, and asks
the verdict rules (statistics.assess) whether the interval is decided; the smallest such n is reported. The sentence
replicates are kept as they are: more seeds also average part of the runs' own sentence noise away, so the
projection errs towards too many seeds. Holm's adjustment over the table is left out (there it errs towards too
few). "none" where even without any seed variation the sentences of the test set leave the claim open.

    python experiments/analysis/seeds_needed.py experiments/adl-table5.yaml experiments/aan-table2.yaml ... --scale cpu
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adlnmt.experiment.folders import output_folders
from adlnmt.experiment.grid import RUN_METRICS, load_grid
from adlnmt.experiment.judge import Judge
from adlnmt.experiment.runner import plan_runs
from adlnmt.verdicts.claims import Claim, Judgement, contrast_weights, relation, source_range
from adlnmt.verdicts.statistics import LOWER_IS_BETTER, OPEN, SEED, Estimate, RunScores, assess

MOST_SEEDS = 100  # the projection's search stops here


@dataclass(frozen=True)
class Projection:
    effect: float
    sentence_sd: float  # of the sentence replicates
    seed_sd: float  # of the seed level at today's seeds (the fewest of the rows)
    seeds_now: int
    seeds_needed: int | None  # None: not within MOST_SEEDS
    sentences_decide: bool  # whether the claim is decided with no seed variation at all


def project(claim: Claim, rows: dict[str, list[RunScores]], lower_is_better: bool = False,
            seed: int = SEED) -> Projection:  # fmt: skip
    """The fewest seeds a row that decide ``claim`` (every row the same number), from its rows' runs' scores."""
    weights = contrast_weights(claim)
    sign = -1.0 if lower_is_better else 1.0
    effect = sign * sum(w * np.mean([r.score for r in rows[name]]) for name, w in weights.items())
    sentences = sign * sum(w * np.mean([r.replicates for r in rows[name]], axis=0) for name, w in weights.items())
    parts = [w**2 * float(np.var([r.score for r in rows[name]], ddof=1)) for name, w in weights.items()]
    spread = sum(parts)  # the seed variance of the effect times n
    shape = spread**2 / sum(part**2 for part in parts) if spread > 0 else 0.0  # Welch's freedom is (n − 1) × this
    normal = np.random.default_rng(seed).standard_normal(len(sentences))  # fixed: a rebuild gives the same table

    def decided(n: int | None) -> bool:
        seed_level = np.zeros(len(sentences))
        if n is not None and spread > 0:
            freedom = (n - 1) * shape
            chi2 = np.random.default_rng([seed, n]).chisquare(freedom, len(sentences))
            seed_level = math.sqrt(spread / n) * normal / np.sqrt(chi2 / freedom)  # Student's t
        tested = assess(claim.kind, Estimate(effect, sentences + seed_level, (n or 0, n or 0)), claim.margin)
        return tested.supports is not None

    now = min(len(rows[name]) for name in weights)
    needed = next((n for n in range(2, MOST_SEEDS + 1) if decided(n)), None)
    return Projection(effect, float(np.std(sentences)), math.sqrt(spread / now), now, needed, decided(None))


def open_claims(judge: Judge, judgements: list[Judgement]) -> list[tuple[Judgement, Projection]]:
    """Each primary, inconclusive claim on a sentence-level metric with two or more seeds a row, projected."""
    found = []
    for j in judgements:
        claim = j.claim
        if not j.primary or j.verdict != OPEN or claim.kind == "faster" or claim.metric in RUN_METRICS:
            continue
        rows = judge.scored(claim, j.test)
        if min(len(runs) for runs in rows.values()) > 1:
            found.append((j, project(claim, rows, claim.metric in LOWER_IS_BETTER)))
    return found


def seeds_cell(p: Projection) -> str:
    if not p.sentences_decide:
        return "none: the sentences alone leave it open"
    if p.seeds_needed is None:
        return f"more than {MOST_SEEDS}"
    return f"{p.seeds_needed}" + (" (no more than today's: Holm's adjustment holds it back)"
                                  if p.seeds_needed <= p.seeds_now else "")  # fmt: skip


def table(grids: list[Path], scale: str) -> str:
    lines = [
        "| grid | claim tested as | metric, test set | seeds a row now | effect | sd: sentences | sd: seeds now "
        "| seeds a row to decide it |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for path in grids:
        grid = load_grid(path, scale)
        folders = output_folders(grid)
        judge = Judge(grid, plan_runs(grid, folders.work, folders.archive))
        for j, p in open_claims(judge, judge.judge_all()):
            claim = j.claim
            lines.append(f"| {grid.name} | {relation(claim)} | {claim.metric}, {j.test}{source_range(claim)} | "
                         f"{p.seeds_now} | {p.effect:+.2f} | {p.sentence_sd:.2f} | "
                         f"{p.seed_sd:.2f} | {seeds_cell(p)} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grids", nargs="+", type=Path, help="grid files (their committed archives are read)")
    parser.add_argument("--scale", default="cpu")
    args = parser.parse_args()
    print(table(args.grids, args.scale))


if __name__ == "__main__":
    main()
