"""Judging a grid's claims on its finished runs: the measurements each claim reads (scores of the rows' runs on its
test set, with their sentence-bootstrap replicates; speeds of seed pairs timed together; per-run values), and the
files ``claims.md`` and ``claims.json``.

Each claim (grid key ``claims``) compares two rows A and B. Its *primary* verdict is on its own test set over every
seed of each row evaluated on it; the grid's other test sets give further verdicts over the seeds evaluated on them
(seed counts shown in each cell). The statistics, the Holm families and the verdict rules are
:mod:`adlnmt.verdicts`'s; a run set apart (:mod:`adlnmt.experiment.arithmetic`) enters no verdict, and whether a run
converged is :func:`adlnmt.experiment.convergence.judge`'s.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from adlnmt.experiment.arithmetic import SET_APART_NOTE, row_result, set_apart
from adlnmt.experiment.convergence import judge as convergence
from adlnmt.experiment.grid import RUN_METRICS, Grid
from adlnmt.experiment.report import mean_std, timed_beside_others, timed_together
from adlnmt.experiment.results import RunResult
from adlnmt.experiment.runner import Run, write_json
from adlnmt.experiment.speed import Measurement, SpeedRecord, run_record
from adlnmt.experiment.speed_spec import ENGINES
from adlnmt.store.atomic import write_text_atomic
from adlnmt.verdicts.claims import (
    Claim,
    Judgement,
    adjusted,
    contrast_weights,
    method,
    record,
    relation,
    table,
    test_parts,
)
from adlnmt.verdicts.ranks import LEVEL, agreement
from adlnmt.verdicts.statistics import (
    CLAIM_RESAMPLES,
    ERROR_RATES,
    LOWER_IS_BETTER,
    MAX_RESAMPLES,
    SEED,
    Estimate,
    RunScores,
    Scorer,
    Tested,
    assess,
    contrast,
    repeat_scores,
    seed_level,
)

VALIDATION = "validation"  # the "test set" of a claim on a per-run metric (valid_ppl)
METRICS = {"bleu": "bleu", "sentbleu": "sentbleu", "meteor": "meteor", "chrf": "chrf", "ter": "ter"}  # paper → ours


class Judge:
    """Judges a grid's claims on its finished runs."""

    def __init__(self, grid: Grid, runs: list[Run], seed: int = SEED) -> None:
        self.grid = grid
        self.seed = seed  # of the bootstrap's random stream
        self.resamples = max(grid.bootstrap_resamples, CLAIM_RESAMPLES)
        self.finished: dict[tuple[str, int], tuple[Path, RunResult]] = {}
        for run in runs:
            if (folder := run.finished_in()) is not None and (result := row_result(run)) is not None:
                self.finished[(run.variant.name, run.seed)] = (folder, result)
        self.claims = grid.claims + (grid.speed.claims if grid.speed else ())
        files = {t.name: (t.src, t.ref) for t in grid.tests}
        for pooled in {claim.test for claim in self.claims if len(test_parts(claim.test)) > 1}:
            files[pooled] = tuple(tuple(files[part][side] for part in test_parts(pooled)) for side in (0, 1))
        self.scorer = Scorer(files, self.resamples, seed)
        self.timed: dict[tuple[str, int], SpeedRecord] = {}  # whole-command timings (the speed section's records)
        for run in runs if grid.speed else ():
            if (run.variant.name, run.seed) in self.finished and (record := run_record(run, grid.speed)) is not None:
                self.timed[(run.variant.name, run.seed)] = record

    def _runs(self, variant: str, test: str, since: datetime | None = None) -> dict[int, tuple[Path, RunResult]]:
        """The row's finished runs evaluated on ``test`` (every finished run for a per-run metric), by seed; with
        ``since``, those evaluated from then on alone."""
        return {seed: found for seed in self.grid.seeds if (found := self.finished.get((variant, seed)))
                and (test == VALIDATION or all(part in found[1].tests for part in test_parts(test)))
                and (since is None or found[1].evaluated >= since)}  # fmt: skip

    def judge(self, claim: Claim, test: str, resamples: int | None = None, since: datetime | None = None) -> Judgement:
        """The claim on ``test`` with ``resamples`` replicates (default: the least, ``CLAIM_RESAMPLES``), on the runs
        evaluated from ``since`` on (default: all), before the family's adjustment (``adjusted_p`` and the verdicts
        unset)."""
        resamples = resamples or self.resamples
        rows = {name: self._runs(name, test, since) for name in claim.rows}
        if claim.kind == "faster" and claim.engine:
            return self._whole_command(claim, test, rows, resamples)
        if claim.kind == "faster":
            return self._speed(claim, test, rows[claim.first], rows[claim.second], resamples)
        lower = claim.metric in LOWER_IS_BETTER
        if claim.metric in RUN_METRICS:
            a = [RUN_METRICS[claim.metric](result) for _, result in rows[claim.first].values()]
            b = [RUN_METRICS[claim.metric](result) for _, result in rows[claim.second].values()]
            estimate = seed_level(a, b, lower, resamples, self.seed) if a and b else None
            means = (mean_std(a)[0], mean_std(b)[0])
        else:
            scored = self.scored(claim, test, resamples, since)
            weights = contrast_weights(claim)
            ready = all(scored[name] for name in claim.rows)
            estimate = (contrast([scored[n] for n in weights], list(weights.values()), lower, self.seed)
                        if ready else None)  # fmt: skip
            mean = {name: mean_std([r.score for r in runs])[0] for name, runs in scored.items()}
            means = (mean[claim.first], mean[claim.second])
            if claim.first_from:  # the two steps' gains
                means = tuple(
                    None if None in (mean[to], mean[start]) else mean[to] - mean[start]
                    for to, start in ((claim.first, claim.first_from), (claim.second, claim.second_from))
                )
        tested = assess(claim.kind, estimate, claim.margin) if estimate else None
        return self._judgement(claim, test, rows, means, tested)

    def scored(self, claim: Claim, test: str, resamples: int | None = None,
               since: datetime | None = None) -> dict[str, list[RunScores]]:  # fmt: skip
        """Each row of the claim: its runs' scores on ``test`` with their sentence-bootstrap replicates (on the
        claim's source-length range), all rows' runs drawn together."""
        words = (claim.min_source_words, claim.max_source_words)
        found = {name: list(self._runs(name, test, since).values()) for name in claim.rows}
        flat = [run for name in claim.rows for run in found[name]]
        hypotheses = [pooled_hypotheses(result, folder, test) for folder, result in flat]
        scores = iter(self.scorer.runs(hypotheses, test, claim.metric, words, resamples or self.resamples))
        return {name: [r for r in [next(scores) for _ in found[name]] if r] for name in claim.rows}

    def _speed(self, claim: Claim, test: str, first: dict, second: dict, resamples: int) -> Judgement:
        """A ``faster`` claim from the speed ratio of each seed pair timed on one processor, close together in time."""
        seeds = [s for s in first if s in second]
        apart = tuple(s for s in seeds if not timed_together(first[s][1], second[s][1]))
        beside = tuple(
            s
            for s in seeds
            if s not in apart and (timed_beside_others(first[s][1], test) or timed_beside_others(second[s][1], test))
        )
        paired = [s for s in seeds if s not in apart and s not in beside]
        speeds = [(first[s][1].tests[test].timing.sentences_per_s, second[s][1].tests[test].timing.sentences_per_s)
                  for s in paired]  # fmt: skip
        estimate: Estimate | None = None
        if speeds:
            estimate = seed_level([math.log(a / b) for a, b in speeds], None, False, resamples, self.seed)
        tested = assess("faster", estimate, ratio=claim.ratio) if estimate else None
        means = (mean_std([a for a, _ in speeds])[0], mean_std([b for _, b in speeds])[0])
        pairs = {claim.first: {s: first[s] for s in paired}, claim.second: {s: second[s] for s in paired}}
        return replace(self._judgement(claim, test, pairs, means, tested), apart=apart, beside=beside)

    def _whole_command(self, claim: Claim, test: str, rows: dict[str, dict[int, tuple[Path, RunResult]]],
                       resamples: int) -> Judgement:  # fmt: skip
        """A speed claim of the grid's ``speed:`` section, from the whole-command timings of its engine and beam:
        per seed timed for both rows on one processor within ``TIMED_TOGETHER_MINUTES`` and neither beside other
        work, the log ratio of the two runs' speeds at their median repeats; its replicates draw each run's repeats
        with replacement (:func:`~adlnmt.verdicts.statistics.repeat_scores`), and the seed level adds the pairs'
        spread beyond that (:func:`~adlnmt.verdicts.statistics.contrast` of the pairs)."""
        measured: dict[str, dict[int, tuple[SpeedRecord, Measurement]]] = {}
        untimed = []
        for name in (claim.first, claim.second):
            measured[name] = {}
            for seed in rows[name]:
                record = self.timed.get((name, seed))
                found = record.find(claim.engine, claim.beam) if record else None
                if record and found and found.seconds:
                    measured[name][seed] = (record, found)
                else:
                    untimed.append(f"{name} seed {seed}" + (f" ({found.skipped})" if found and found.skipped else ""))
        first, second = measured[claim.first], measured[claim.second]
        seeds = [s for s in first if s in second]
        apart = tuple(s for s in seeds if not first[s][0].timed_with(second[s][0]))
        beside = tuple(s for s in seeds if s not in apart and (first[s][1].beside_others or second[s][1].beside_others))
        paired = [s for s in seeds if s not in apart and s not in beside]
        pairs = []
        for seed in paired:
            a, b = (self._repeats(name, seed, runs[seed][1], claim, resamples)
                    for name, runs in ((claim.first, first), (claim.second, second)))  # fmt: skip
            pairs.append(RunScores(a.score - b.score, a.replicates - b.replicates))
        tested = assess("faster", contrast([pairs], [1.0], seed=self.seed), ratio=claim.ratio) if pairs else None
        means = tuple(mean_std([runs[s][1].sentences_per_s for s in paired])[0] for runs in (first, second))
        compared = {name: {s: rows[name][s] for s in paired} for name in (claim.first, claim.second)}
        judgement = self._judgement(claim, test, compared, means, tested)
        return replace(judgement, apart=apart, beside=beside, untimed=tuple(untimed))

    def _repeats(self, name: str, seed: int, timing: Measurement, claim: Claim, resamples: int) -> RunScores:
        """The run's log speed and its timing-level replicates, drawn from a stream of its own (row, seed, engine,
        beam), so that a run drawn for two claims is drawn alike."""
        row = [v.name for v in self.grid.variants].index(name)
        rng = np.random.default_rng([self.seed, row, seed, ENGINES.index(claim.engine), claim.beam])
        return repeat_scores(timing.seconds, timing.sentences, resamples, rng)

    def _judgement(self, claim: Claim, test: str, rows: dict[str, dict[int, tuple[Path, RunResult]]],
                   means: tuple[float | None, ...], tested: Tested | None) -> Judgement:  # fmt: skip
        unconverged = tuple(
            f"{name} seed {seed}" for name, runs in rows.items() for seed, (_, result) in runs.items()
            if not convergence(result, self.grid.variant(name).train).converged
        )  # fmt: skip
        after: list[str] = []
        if claim.registered_at:
            registered = datetime.fromisoformat(claim.registered_at)
            for name, runs in rows.items():
                if seeds := [seed for seed, (_, result) in runs.items() if result.evaluated < registered]:
                    after.append(f"{name} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, sorted(seeds)))}")
        first, second = rows[claim.first], rows[claim.second]
        return Judgement(claim, test, test == claim.test or test == VALIDATION, (tuple(first), tuple(second)),
                         means, tested, unconverged=unconverged, after_results=tuple(after),
                         fewest_seeds=min(len(runs) for runs in rows.values()))  # fmt: skip

    def judge_all(self, other_tests: bool = True) -> list[Judgement]:
        """Every claim on its own test set, then (``other_tests``) on each other test set of the grid where its rows
        have results there; verdicts after Holm's adjustment within each family (:func:`family`: a claim not measured
        yet on a test set counts in that test set's family with p = 1), with more replicates for any verdict that
        Monte Carlo error could still flip (doubling up to ``MAX_RESAMPLES``); then, for claims registered after some
        of their runs' results, the verdict on the later runs alone."""
        judged = []
        for claim in self.claims:
            primary = VALIDATION if claim.metric in RUN_METRICS else claim.test
            judged.append(self.judge(claim, primary))
            # whole commands time one test set; a claim on rows of other sources reads its own test set alone
            if primary != VALIDATION and other_tests and not claim.engine and not claim.own_test_only:
                judged += [self.judge(claim, t.name) for t in self.grid.tests if t.name != primary]
        judged = self._settled([j for j in adjusted(judged) if j.primary or j.tested is not None], {})
        since = {i: datetime.fromisoformat(j.claim.registered_at) for i, j in enumerate(judged)
                 if j.primary and j.after_results and j.claim.registered_at}  # fmt: skip
        if since:
            late = [self.judge(j.claim, j.test, since=since[i]) if i in since else j for i, j in enumerate(judged)]
            alone = self._settled(adjusted([replace(j, adjusted_p=None) for j in late]), since)
            for i in since:
                found = alone[i].verdict if alone[i].tested else self._none_after(judged[i])
                judged[i] = replace(judged[i], post_registration=found)
        return judged

    def _settled(self, judged: list[Judgement], since: dict[int, datetime]) -> list[Judgement]:
        """Adjusted judgements, each verdict that Monte Carlo error could still flip judged again on twice the
        replicates (up to ``MAX_RESAMPLES``) and the families adjusted again; judgement ``i`` on the runs evaluated
        from ``since[i]`` on where given."""
        while shaky := [i for i, j in enumerate(judged) if j.unsettled and j.tested.resamples < MAX_RESAMPLES]:
            for i in shaky:
                more = self.judge(judged[i].claim, judged[i].test, 2 * judged[i].tested.resamples, since.get(i))
                judged[i] = replace(judged[i], tested=more.tested)
            judged = adjusted(judged)
        return judged

    def _none_after(self, judgement: Judgement) -> str:
        """Why a claim has no verdict on the runs evaluated after its registration: the rows with none."""
        since = datetime.fromisoformat(judgement.claim.registered_at)
        rows = [name for name in dict.fromkeys(judgement.claim.rows) if not self._runs(name, judgement.test, since)]
        return f"no run of {' or '.join(rows)} evaluated after it" if rows else "too few runs evaluated after it"


def pooled_hypotheses(result: RunResult, folder: Path, test: str) -> Path | tuple[Path, ...] | None:
    """A run's hypotheses file on ``test``, or its files on each pooled test set in order (None where one is
    missing)."""
    found = tuple(result.hypotheses(folder, part) for part in test_parts(test))
    return None if None in found else found[0] if len(found) == 1 else found  # type: ignore[return-value]


def _column(grid: Grid, column: str) -> tuple[str, str] | None:
    """The (test set, metric) of ours that a paper column compares with, None when we have no such metric."""
    words = column.split()
    metric = METRICS.get(words[-1].lower()) if words else None
    if metric is None or metric not in grid.metrics:
        return None
    names = [t.name for t in grid.tests]
    if words[0] in names:
        return words[0], metric
    primary = next((c.test for c in grid.claims if c.test in names), names[0] if names else None)
    return (primary, metric) if primary else None


def rank_agreement(grid: Grid, finished: dict[tuple[str, int], RunResult]) -> list[dict[str, Any]]:
    """Rank agreement with the paper (:mod:`adlnmt.verdicts.ranks`), one entry per column of the paper's published
    scores (the rows' ``paper``) with at least three rows measured: ρ, its interval over seeds and the rows. A column
    names its data set and metric ("IWSLT BLEU", "dev sentBLEU"): the metric is ours of that name, the test set ours
    of that name where the grid has one, else the test set of the grid's first claim."""
    found = []
    columns = sorted({column for variant in grid.variants for column in variant.paper})
    for column in columns:
        where = _column(grid, column)
        if where is None:
            continue
        test, metric = where
        rows = []
        for variant in grid.variants:
            scores = [
                result.tests[test].scores[metric]
                for (name, _), result in sorted(finished.items())
                if name == variant.name and test in result.tests and metric in result.tests[test].scores
            ]
            if column in variant.paper and scores:
                rows.append((variant.name, variant.paper[column], np.array(scores, dtype=np.float64)))
        if len(rows) < 3:
            continue
        rho, interval = agreement([(published, scores) for _, published, scores in rows])
        found.append({"column": column, "test": test, "metric": metric, "rows": len(rows),
                      "seeds": sum(len(s) for _, _, s in rows), "rho": rho,
                      "interval": list(interval) if interval else None,
                      "level": LEVEL})  # fmt: skip
    return found


def write_claims(grid: Grid, runs: list[Run], out: Path, seed: int = SEED) -> list[Judgement]:
    """Judge every claim of the grid, write ``claims.md`` and ``claims.json`` under ``out`` and return the primary
    judgements (nothing when the grid has no claims)."""
    if not grid.claims and not (grid.speed and grid.speed.claims):
        return []
    judge = Judge(grid, runs, seed)
    judged = judge.judge_all()
    title = grid.name + (f" (scale {grid.scale})" if grid.scale else "")
    lines = [
        f"# {'Claims of the paper' if any(v.paper for v in grid.variants) else 'Claims'}, judged on {title}",
        "",
        grid.description,
        "",
        *([grid.scale_description, ""] if grid.scale_description else []),
        method(any(claim.engine for claim in judge.claims)),
        "",
        *([f"{SET_APART_NOTE}: {', '.join(apart)}.", ""] if (apart := set_apart(runs)) else []),
        *table(judged),
    ]
    write_text_atomic(out / "claims.md", "\n".join(lines) + "\n")
    claims = []
    for claim in judge.claims:
        mine = [j for j in judged if j.claim is claim]
        claims.append({**claim.fields(), "tested_as": relation(claim), "planned_seeds": len(grid.seeds),
                       **record(mine[0]), "other_tests": [record(j) for j in mine[1:]]})  # fmt: skip
    ranks = rank_agreement(grid, {key: result for key, (_, result) in judge.finished.items()})
    write_json(out / "claims.json", {"grid": grid.name, "scale": grid.scale, "error_rates": ERROR_RATES,
                                     "rank_agreement": ranks, "claims": claims})  # fmt: skip
    return [j for j in judged if j.primary]
