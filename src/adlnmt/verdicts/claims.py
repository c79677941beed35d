"""The paper's claims about a grid's rows, judged on the finished runs: ``claims.md`` and ``claims.json``.

Each claim (grid key ``claims``) compares two rows A and B. Its *primary* verdict is on its own test set over every
seed of each row evaluated on it; the grid's other test sets give further verdicts over the seeds evaluated on them
(seed counts shown in each cell). The statistics and the verdict rules are :mod:`adlnmt.experiment.statistics`'s;
Holm's adjustment runs over the primary verdicts of the table, and separately over each other test set's. Marks:

- a claim whose measured rows include a run that did not converge (:func:`adlnmt.experiment.convergence.judge`)
  reads *inconclusive: not converged*, with what the runs would give;
- a claim measured on one seed of a row (on a test set added later, say) reads *inconclusive: one seed*: the
  interval then holds the sentences' variation only, not the seeds', which two-level bootstrapping needs;
- a claim the paper restricts to data unlike this (``out_of_scope``: e.g. "except for IWSLT", its small corpus) reads
  *out of scope at this data size*, measured but not judged, and left out of the adjustment;
- each claim names the commit that registered it (``registered``); the seeds whose runs were evaluated before that
  commit are named: for them the claim was written after the results.

The verdicts are computed from the results every time the report is written, never typed in.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from adlnmt.experiment.arithmetic import SET_APART_NOTE, row_result, set_apart
from adlnmt.experiment.convergence import judge as convergence
from adlnmt.experiment.grid import RUN_METRICS, Claim, Grid
from adlnmt.experiment.ranks import rank_agreement
from adlnmt.experiment.report import TIMED_TOGETHER_MINUTES, mean_std, timed_beside_others, timed_together
from adlnmt.experiment.results import RunResult
from adlnmt.experiment.runner import Run, write_json
from adlnmt.experiment.statistics import (
    ALPHA,
    CLAIM_RESAMPLES,
    ERROR_RATES,
    LOWER_IS_BETTER,
    MAX_RESAMPLES,
    MC_ERRORS,
    MIN_SEEDS,
    MISSING,
    NOT_CONVERGED,
    ONE_SEED,
    OUT_OF_SCOPE,
    SEED,
    Estimate,
    RunScores,
    Scorer,
    Tested,
    assess,
    contrast,
    holm,
    seed_level,
    unsettled,
    verdict,
)
from adlnmt.store.atomic import write_text_atomic

VALIDATION = "validation"  # the "test set" of a claim on a per-run metric (valid_ppl)


@dataclass(frozen=True)
class Judgement:
    claim: Claim
    test: str
    primary: bool
    seeds: tuple[tuple[int, ...], tuple[int, ...]]  # the seeds of A and of B measured (for faster: the same pairs)
    means: tuple[float | None, float | None]  # A's and B's mean (faster: mean sentences per second)
    tested: Tested | None
    adjusted_p: float | None = None
    measured: str = MISSING  # the verdict of the statistics alone
    verdict: str = MISSING
    unconverged: tuple[str, ...] = ()  # "A seed 2": measured runs that did not converge
    apart: tuple[int, ...] = ()  # faster: seeds whose pair was not timed together (report.timed_together)
    beside: tuple[int, ...] = ()  # faster: seeds whose pair was timed beside other work (report.timed_beside_others)
    after_results: tuple[str, ...] = ()  # "A seeds 1, 2": runs evaluated before the claim was registered
    fewest_seeds: int = 0  # the fewest runs measured of any row the claim reads
    family: str = ""  # the Holm family: the claims registered together (commit), on this test set
    family_size: int = 0
    unsettled: bool = False  # still within MC_ERRORS Monte Carlo errors of flipping at MAX_RESAMPLES
    post_registration: str = ""  # the verdict on the runs evaluated after the registration alone, where some were not


def relation(claim: Claim) -> str:
    """The claim as a comparison of its two rows."""
    a, b = claim.first, claim.second
    if claim.kind == "better":
        return f"{a} < {b} ({claim.metric}, lower is better)" if claim.metric in LOWER_IS_BETTER else f"{a} > {b}"
    if claim.kind == "close":
        return f"{a} ≥ {b}" + (f" − {claim.margin:g}" if claim.margin else "")
    if claim.kind == "equivalent":
        return f"{a} = {b} ± {claim.margin:g}"
    if claim.kind == "larger_gain":
        return f"({a} − {claim.first_from}) > ({b} − {claim.second_from})"
    return f"{a} ≥ {claim.ratio:g} × {b}"


def source_range(claim: Claim) -> str:
    """The claim's source-length range for a table cell (", sources of 12+ words"), or nothing."""
    low, high = claim.min_source_words, claim.max_source_words
    if not (low or high):
        return ""
    return f", sources of {low}–{high} words" if low and high else f", sources of {low}+ words" if low else \
        f", sources of at most {high} words"  # fmt: skip


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
        self.scorer = Scorer({t.name: (t.src, t.ref) for t in grid.tests}, self.resamples, seed)

    def _runs(self, variant: str, test: str, since: datetime | None = None) -> dict[int, tuple[Path, RunResult]]:
        """The row's finished runs evaluated on ``test`` (every finished run for a per-run metric), by seed; with
        ``since``, those evaluated from then on alone."""
        return {seed: found for seed in self.grid.seeds if (found := self.finished.get((variant, seed)))
                and (test == VALIDATION or test in found[1].tests)
                and (since is None or found[1].evaluated >= since)}  # fmt: skip

    def judge(self, claim: Claim, test: str, resamples: int | None = None, since: datetime | None = None) -> Judgement:
        """The claim on ``test`` with ``resamples`` replicates (default: the least, ``CLAIM_RESAMPLES``), on the runs
        evaluated from ``since`` on (default: all), before the family's adjustment (``adjusted_p`` and the verdicts
        unset)."""
        resamples = resamples or self.resamples
        rows = {name: self._runs(name, test, since) for name in claim.rows}
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
        scores = iter(self.scorer.runs(flat, test, claim.metric, words, resamples or self.resamples))
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
        """Every claim on its own test set, then (``other_tests``) on each other test set of the grid; verdicts after
        Holm's adjustment within each family (:func:`family`), with more replicates for any verdict that Monte Carlo
        error could still flip (doubling up to ``MAX_RESAMPLES``); then, for claims registered after some of their
        runs' results, the verdict on the later runs alone."""
        judged = []
        for claim in self.grid.claims:
            primary = VALIDATION if claim.metric in RUN_METRICS else claim.test
            judged.append(self.judge(claim, primary))
            if primary != VALIDATION and other_tests:
                others = [t.name for t in self.grid.tests if t.name != primary]
                judged += [j for test in others if (j := self.judge(claim, test)).tested is not None]
        judged = adjusted(judged)
        while shaky := [i for i, j in enumerate(judged) if j.unsettled and j.tested.resamples < MAX_RESAMPLES]:
            for i in shaky:
                more = self.judge(judged[i].claim, judged[i].test, 2 * judged[i].tested.resamples)
                judged[i] = replace(judged[i], tested=more.tested)
            judged = adjusted(judged)
        late = {i: self.judge(j.claim, j.test, since=datetime.fromisoformat(j.claim.registered_at))
                for i, j in enumerate(judged) if j.primary and j.after_results and j.claim.registered_at}  # fmt: skip
        if late:
            alone = adjusted([replace(late.get(i, j), adjusted_p=None) for i, j in enumerate(judged)])
            for i in late:
                found = alone[i].verdict if alone[i].tested else "no run evaluated after it"
                judged[i] = replace(judged[i], post_registration=found)
        return judged


def family(j: Judgement) -> str | None:
    """The Holm family of a judgement, fixed at registration: the claims of the table registered together (the same
    commit), on the same test set (the primary verdicts are one); None for a claim out of scope (not judged)."""
    if j.claim.out_of_scope:
        return None
    commit = j.claim.registered.split()[0] if j.claim.registered else "unregistered"
    return f"{commit}, {'primary' if j.primary else j.test}"


def adjusted(judged: list[Judgement]) -> list[Judgement]:
    """Holm's adjustment within each :func:`family` (every claim registered in it counts, a claim not measured yet
    with p = 1, so that later rows do not grow it) and the verdicts, with whether Monte Carlo error could flip them."""
    members: dict[str, list[int]] = {}
    for i, j in enumerate(judged):
        if (name := family(j)) is not None:
            members.setdefault(name, []).append(i)
    judged = list(judged)
    for name, indices in members.items():
        p_values = [judged[i].tested.p_value if judged[i].tested else 1.0 for i in indices]
        for i, p in zip(indices, holm(p_values), strict=True):
            judged[i] = replace(judged[i], adjusted_p=p if judged[i].tested else None, family=name,
                                family_size=len(indices))  # fmt: skip
    return [_verdict(j) for j in judged]


def contrast_weights(claim: Claim) -> dict[str, float]:
    """The weight of each row in the claim's effect: A − B, or for ``larger_gain`` (A − A0) − (B − B0); a row named
    twice (a chain of steps) is drawn once, its weights summed, and a row whose weights cancel is left out."""
    weights: dict[str, float] = {}
    for name, weight in zip(claim.rows, (1.0, -1.0, -1.0, 1.0) if claim.first_from else (1.0, -1.0), strict=True):
        weights[name] = weights.get(name, 0.0) + weight
    return {name: weight for name, weight in weights.items() if weight}


def _verdict(j: Judgement) -> Judgement:
    if j.tested is None:
        return j
    p = j.adjusted_p if j.adjusted_p is not None else j.tested.p_value
    measured = verdict(j.tested, p, max(j.family_size, 1))
    one_seed = j.fewest_seeds < MIN_SEEDS
    final = (
        OUT_OF_SCOPE if j.claim.out_of_scope else NOT_CONVERGED if j.unconverged else ONE_SEED if one_seed else measured
    )
    return replace(j, measured=measured, verdict=final, unsettled=unsettled(j.tested, p, max(j.family_size, 1)))


# --- claims.md and claims.json -------------------------------------------------------------------------------------


def _signed(value: float, kind: str) -> str:
    return f"×{value:.2f}" if kind == "faster" else f"{value:+.2f}"


def effect(j: Judgement) -> str:
    """The effect and its interval, e.g. "+1.19 [+0.52, +1.86] (95 %)"; for speed, ratios."""
    if j.tested is None:
        return "–"
    t, kind = j.tested, j.claim.kind
    low, high = (_signed(v, kind) for v in t.interval)
    return f"{_signed(t.effect, kind)} [{low}, {high}] ({t.level:.0%})".replace("%", " %")


def p_values(j: Judgement) -> str:
    """The registered test's p with its Monte Carlo error and the replicates it rests on, and the adjusted p."""
    if j.tested is None:
        return "–"
    t = j.tested
    adjusted = "not adjusted" if j.adjusted_p is None else f"Holm {j.adjusted_p:.3f} of {j.family_size}"
    against = " against" if t.against else ""
    shaky = f"; within {MC_ERRORS:g} MC errors of flipping" if j.unsettled else ""
    return f"{t.p_value:.4f} ± {t.p_error:.4f}{against} ({adjusted}; {t.resamples:,} replicates{shaky})"


def detectable_effect(j: Judgement) -> str:
    """The minimum detectable effect (80 % power at the kind's α) and, for a margin claim, whether it could be
    decided at this data size (the margin at least the detectable effect)."""
    if j.tested is None:
        return "–"
    t, kind = j.tested, j.claim.kind
    if kind == "faster":
        return f"×{t.mde:.2f} above the threshold"
    if kind == "equivalent":
        decidable = "decidable" if t.mde <= j.claim.margin else "not decidable at this size"
        return f"margin ≥ {t.mde:.2f} ({decidable}: ±{j.claim.margin:g})"
    if kind == "close":
        return f"{t.mde:.2f} above −{j.claim.margin:g}"
    return f"±{t.mde:.2f}"


def seed_list(j: Judgement) -> str:
    """The seeds measured, e.g. "1, 2" (both rows) or "A 1, 2, 3; B 1, 2"."""
    a, b = j.seeds
    if a == b:
        return ", ".join(map(str, a)) or "–"
    return f"A {', '.join(map(str, a)) or '–'}; B {', '.join(map(str, b)) or '–'}"


def registration(j: Judgement) -> str:
    claim = j.claim
    if not claim.registered:
        return "not recorded"
    when = f"{claim.registered} ({claim.registered_at[:10]})"
    if not j.after_results:
        return f"{when}: before the results"
    return f"{when}: after the results of {'; '.join(j.after_results)}"


def registered_before(j: Judgement) -> bool:
    """Whether the claim was registered, in this form, before any result of the runs it reads."""
    return bool(j.claim.registered) and not j.after_results


def verdict_text(j: Judgement) -> str:
    """The verdict with its reason: the runs not converged, the scope, what the statistics alone give."""
    text = f"**{j.verdict}**"
    if j.verdict == NOT_CONVERGED:
        text += f" ({', '.join(j.unconverged)}; the runs as they are: {j.measured})"
    elif j.verdict == OUT_OF_SCOPE:
        text += f" ({j.claim.out_of_scope}; measured: {j.measured})"
    elif j.verdict == ONE_SEED:
        text += f" (the statistics alone: {j.measured})"
    if j.apart:
        text += (f" (not compared: seed {', '.join(map(str, j.apart))}, A and B not timed on one processor within "
                 f"{TIMED_TOGETHER_MINUTES} minutes)")  # fmt: skip
    if j.beside:
        text += f" (not compared: seed {', '.join(map(str, j.beside))}, timed beside other work)"
    if j.post_registration and j.post_registration != j.verdict:
        text += f" (on the runs evaluated after its registration alone: {j.post_registration})"
    return text


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _line(j: Judgement) -> str:
    claim = j.claim
    metric = "sent/s" if claim.kind == "faster" else claim.metric
    scores = f"{_number(j.means[0])} vs {_number(j.means[1])}"
    if j.primary:
        where = f" ({claim.where})" if claim.where else ""
        head = f"“{claim.quote}”{where} | {relation(claim)}"
    else:
        head = "↳ the same | on another test set"
    registered = registration(j) if j.primary else ""
    return (f"| {head} | {metric} {j.test}{source_range(claim)} | {seed_list(j)} | {scores} | {effect(j)} | "
            f"{p_values(j)} | {detectable_effect(j)} | {verdict_text(j)} | {registered} |")  # fmt: skip


def record(j: Judgement) -> dict[str, Any]:
    """One judgement for ``claims.json`` (which the verdict table of docs/reproductions.md is built from)."""
    t = j.tested
    return {
        "test": j.test,
        "seeds": [list(j.seeds[0]), list(j.seeds[1])],
        "means": list(j.means),
        "effect": None if t is None else t.effect,
        "interval": None if t is None else list(t.interval),
        "level": None if t is None else t.level,
        "p": None if t is None else t.p_value,
        "p_against_claim": None if t is None else t.against,
        "p_holm": j.adjusted_p,
        "p_mc_error": None if t is None else t.p_error,
        "interval_mc_error": None if t is None else list(t.interval_error),
        "resamples": None if t is None else t.resamples,
        "unsettled": j.unsettled,
        "mde": None if t is None else t.mde,
        "mde_text": detectable_effect(j),
        "family": j.family,
        "family_size": j.family_size,
        "measured": j.measured,
        "post_registration": j.post_registration,
        "registered_before_results": registered_before(j),
        "registration": registration(j),
        "verdict": j.verdict,
        "unconverged": list(j.unconverged),
        "timed_apart": list(j.apart),
        "timed_beside_other_work": list(j.beside),
        "after_results": list(j.after_results),
        "summary": effect(j),
        "seed_list": seed_list(j),
    }


def write_claims(grid: Grid, runs: list[Run], out: Path, seed: int = SEED) -> list[Judgement]:
    """Judge every claim of the grid, write ``claims.md`` and ``claims.json`` under ``out`` and return the primary
    judgements (nothing when the grid has no claims)."""
    if not grid.claims:
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
        f"A vs B: the rows' mean scores over the seeds listed. Effect: A − B (B − A where lower is better; for speed "
        f"the geometric mean of A / B over the seed pairs timed on one processor within {TIMED_TOGETHER_MINUTES} "
        "minutes of each other) with its bootstrap interval (two-level: sentences of the test set drawn jointly for "
        "every run, then the rows' seed-mean error, Student's t with Welch–Satterthwaite degrees of freedom, from "
        "each row's seed variance less its seed × sentence interaction, which the sentence level draws already). "
        f"Replicates: at least {CLAIM_RESAMPLES:,}, doubled while the verdict could still flip (a p within "
        f"{MC_ERRORS:g} Monte Carlo errors of {ALPHA}, or an interval end within {MC_ERRORS:g} of its threshold), "
        f"up to {MAX_RESAMPLES:,}. p: the centred bootstrap p of the claim's registered test, its direction fixed "
        "by the paper's wording, ± its Monte Carlo error; *against* marks an effect on the wrong side of 0, the "
        "threshold or the margin. Holm's adjustment runs over the claim's family: the claims registered together "
        "(one commit) for this table on this test set, fixed at registration (a claim not run yet counts with p = "
        "1). Error rates, one per kind: "
        + "; ".join(f"*{kind.replace('_', ' ')}*: {rate}" for kind, rate in ERROR_RATES.items())
        + ". A decided verdict needs the interval on one side and the adjusted p below 0.05 (*does not hold* of a "
        "one-sided or equivalence claim: the test against it, Bonferroni over the family). MDE: the minimum "
        "detectable effect, 80 % power at the kind's α on these seeds and sentences (for *equivalent*: the "
        "smallest margin TOST would show). A run that did not converge makes the claim inconclusive, and so does a "
        "row measured on one seed (no seed variation to draw from); a claim the paper restricts to other data is "
        "out of scope (measured, not judged). Registered: the commit that added the claim in this form; where "
        "runs had results before it, the verdict on the later runs alone is given where it differs. Rules and "
        "references: docs/experiments.md, Significance.",
        "",
        *([f"{SET_APART_NOTE}: {', '.join(apart)}.", ""] if (apart := set_apart(runs)) else []),
        "| claim | hypothesis (A vs B) | metric, test set | seeds | A vs B | effect [interval] | p ± MC error (Holm) "
        "| MDE | verdict | registered |",
        "|---|---|---|---|---|---:|---|---|---|---|",
        *(_line(j) for j in judged),
    ]
    write_text_atomic(out / "claims.md", "\n".join(lines) + "\n")
    claims = []
    for claim in grid.claims:
        mine = [j for j in judged if j.claim is claim]
        claims.append({**asdict(claim), "tested_as": relation(claim), "planned_seeds": len(grid.seeds),
                       **record(mine[0]), "other_tests": [record(j) for j in mine[1:]]})  # fmt: skip
    ranks = rank_agreement(grid, {key: result for key, (_, result) in judge.finished.items()})
    write_json(out / "claims.json", {"grid": grid.name, "scale": grid.scale, "error_rates": ERROR_RATES,
                                     "rank_agreement": ranks, "claims": claims})  # fmt: skip
    return [j for j in judged if j.primary]
