"""The statistics of the experiment reports and claims: differences between two rows with bootstrap intervals,
centred p-values, Holm's adjustment and the verdict rules. Documented in experiments/README.md ("Significance").

**The difference of a corpus metric between rows A and B** (each a set of runs with different seeds) is the mean of
A's per-seed corpus scores minus the mean of B's. Its sampling distribution comes from a two-level bootstrap: each of
``RESAMPLES`` replicates draws the test sentences with replacement (one draw for every run of both rows: the systems
are compared on the same sentences, the paired bootstrap of Koehn 2004), recomputes every run's corpus score from
the sum of the drawn sentences' sufficient statistics (sacreBLEU's, vectorised here) and averages each row's runs;
the seed level (the optimizer-instability replicates of Clark et al. 2011: seed variance widens the interval) adds
to each replicate a draw of the rows' seed-mean error, Student's t scaled by the rows' seed variances with
Welch–Satterthwaite degrees of freedom (:func:`seed_deviations`; resampling 3–5 seeds instead under-covers).
METEOR and sentBLEU have no additive statistics beyond the sentence score: their corpus score is the mean of the
sentence scores, and the bootstrap averages the drawn sentences' scores. Values measured once per run (decoding
speed, validation perplexity) have the seed level alone. A speed timed as a whole command ``repeats`` times per run
(a grid's ``speed:`` section) has a timing level in place of the sentences: each replicate draws the run's repeats
with replacement and takes their median (:func:`repeat_scores`).

**Tests.** With the observed effect d and the replicates d*, d* − d estimates the distribution of the estimate
around the truth (the bootstrap is *centred* on d). The two-sided p of "no difference" is (1 + #{|d* − d| ≥ |d|}) /
(R + 1); one-sided p's against a threshold θ are (1 + #{d* − d ≥ d − θ}) / (R + 1) for "the effect exceeds θ" and
(1 + #{d* − d ≤ d − θ}) / (R + 1) for "it falls short of θ". Intervals are percentile intervals of d*.

**Verdicts** (:func:`assess`, :func:`verdict`), the effect counted so that positive favours A (for lower-is-better
metrics, B − A):

- ``better``: holds when the 95 % interval lies above 0, does not hold when it lies below 0 (two-sided test);
  ``larger_gain`` (the step A0 → A gains more than the step B0 → B: (A − A0) − (B − B0) > 0, :func:`contrast`) alike;
- ``close`` (A ≥ B − margin, non-inferiority) and ``faster`` (A ≥ ratio × B, on the log of the speed ratio): holds
  when the 90 % interval lies above the threshold (a one-sided 5 % test), does not hold when it lies below;
- ``equivalent`` (|A − B| ≤ margin, TOST): holds when the 90 % interval lies inside ±margin (two one-sided 5 %
  tests), does not hold when it lies wholly outside;

and in every case only when the Holm-adjusted p (over the table's claims, :func:`holm`) of the test that decides
it is below ``ALPHA``. That test looks the way the effect lies: for a threshold claim, "the effect exceeds θ" when
it does and "it falls short of θ" when it does not; for ``equivalent``, TOST when the effect lies inside the margin
and the one-sided test against the nearer bound when it lies outside. Anything else is inconclusive, with the
interval shown.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

RESAMPLES = 10_000  # the report's tables of differences
CLAIM_RESAMPLES = 100_000  # the least a claim's verdict rests on
MAX_RESAMPLES = 1_600_000  # a verdict still within MC_ERRORS Monte Carlo errors of flipping here says so
MC_ERRORS = 3.0  # how many Monte Carlo standard errors a p or an interval end must lie from its threshold
BLOCK = 10_000  # replicates drawn at a time
SEED = 20_261_126  # fixed: rebuilding a report gives the same numbers
ALPHA = 0.05
POWER = 0.80  # of the minimum detectable effect
SENTENCE_MEANS = frozenset({"meteor", "sentbleu"})  # corpus score = mean of the sentence scores
LOWER_IS_BETTER = frozenset({"ter", "valid_ppl"})
KINDS = ("better", "close", "equivalent", "faster", "larger_gain")

HOLDS, FAILS, OPEN = "holds", "does not hold", "inconclusive"
OUT_OF_SCOPE, NOT_CONVERGED, MISSING = "out of scope at this data size", "inconclusive: not converged", "not run yet"
ONE_SEED = "inconclusive: one seed"
NO_SPREAD = "inconclusive: the seeds gave one value"  # rows of several seeds with no variance to draw from
NOT_TIMED = "not timed yet"  # a speed claim whose rows have finished runs, but no timing to compare
MIN_SEEDS = 2  # per row, for a decided verdict (the seed level of the bootstrap needs variation to draw from)


# --- corpus scores from summed sentence statistics ----------------------------------------------------------------


def corpus_scores(metric: str, sums: np.ndarray) -> np.ndarray:
    """Corpus scores from summed sacreBLEU sufficient statistics (last axis), vectorised over the other axes: the
    values sacreBLEU's ``_compute_score_from_stats`` gives with its default settings."""
    sums = np.asarray(sums, dtype=np.float64)
    if metric in SENTENCE_MEANS:
        return np.divide(sums[..., 0], sums[..., 1], out=np.zeros(sums.shape[:-1]), where=sums[..., 1] > 0)
    if metric == "bleu":
        return _bleu(sums)
    if metric == "chrf":
        return _chrf(sums)
    if metric == "ter":
        edits, length = sums[..., 0], sums[..., 1]
        ratio = np.divide(edits, length, out=np.where(edits > 0, 1.0, 0.0), where=length > 0)
        return 100.0 * ratio
    raise ValueError(f"no corpus score for metric {metric!r}")


def brevity_penalty(hypothesis_tokens: ArrayLike, reference_tokens: ArrayLike = 1.0) -> np.ndarray:
    """BLEU's brevity penalty, vectorised: exp(1 − reference/hypothesis tokens) for a shorter output, 1 otherwise, 0
    for an empty one (``reference_tokens`` 1: of length ratios)."""
    hypothesis = np.asarray(hypothesis_tokens, dtype=np.float64)
    reference = np.asarray(reference_tokens, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hypothesis < reference, np.where(hypothesis > 0, np.exp(1 - reference / hypothesis), 0.0), 1.0)


def _bleu(sums: np.ndarray) -> np.ndarray:
    """sacreBLEU's corpus BLEU (4-grams, 'exp' smoothing): statistics [hyp len, ref len, correct 1-4, total 1-4]."""
    hyp_len, ref_len, correct, total = sums[..., 0], sums[..., 1], sums[..., 2:6], sums[..., 6:10]
    with np.errstate(divide="ignore", invalid="ignore"):
        brevity = brevity_penalty(hyp_len, ref_len)
        halvings = np.cumsum(correct == 0, axis=-1)  # 'exp': each order without a match halves the next smoothing
        precision = np.where(correct > 0, 100.0 * correct / total, 100.0 / (2.0**halvings * total))
        log_mean = np.log(precision).mean(axis=-1)
        score = brevity * np.exp(log_mean)
    return np.where((total > 0).all(axis=-1) & (correct > 0).any(axis=-1), score, 0.0)


def _chrf(sums: np.ndarray, beta: float = 2.0) -> np.ndarray:
    """sacreBLEU's chrF2 (character 6-grams, no word n-grams): statistics [hyp, ref, match] per order."""
    orders = sums.reshape(*sums.shape[:-1], -1, 3)
    hyp, ref, match = orders[..., 0], orders[..., 1], orders[..., 2]
    effective = (hyp > 0) & (ref > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        count = effective.sum(axis=-1)
        precision = np.where(effective, match / hyp, 0.0).sum(axis=-1) / count
        recall = np.where(effective, match / ref, 0.0).sum(axis=-1) / count
        factor = beta**2
        score = 100 * (1 + factor) * precision * recall / (factor * precision + recall)
    return np.where((count > 0) & (precision + recall > 0), score, 0.0)


# --- resampling ----------------------------------------------------------------------------------------------------


@lru_cache(maxsize=48)
def _count_block(sentences: int, block: int, size: int, seed: int) -> np.ndarray:
    """How often each sentence is drawn in the replicates of one block, (size, sentences), as small integers (a
    sentence is drawn at most a few dozen times). Block 0 is the draw of the replicates before blocks existed; each
    later block has its own generator, so a larger number of replicates extends a smaller one (its first replicates
    are the smaller number's)."""
    rng = np.random.default_rng([seed, sentences] if block == 0 else [seed, sentences, block])
    drawn = rng.integers(0, sentences, size=(size, sentences))
    offsets = (np.arange(size) * sentences)[:, None]
    counts = np.bincount((drawn + offsets).ravel(), minlength=size * sentences).reshape(size, sentences)
    counts = counts.astype(np.uint8)
    counts.flags.writeable = False
    return counts


def sentence_counts(sentences: int, resamples: int = RESAMPLES, seed: int = SEED,
                    start: int = 0) -> Iterator[np.ndarray]:  # fmt: skip
    """How often each sentence is drawn in replicates ``start`` to ``resamples`` (blocks of at most ``BLOCK``
    replicates, float): the same draws for every run of a test set of this size, so that the systems compared are
    always compared on the same sentences."""
    for block in range(start // BLOCK, -(-resamples // BLOCK)):
        first, last = max(start, block * BLOCK), min(resamples, (block + 1) * BLOCK)
        counts = _count_block(sentences, block, last - block * BLOCK, seed)
        yield counts[first - block * BLOCK :].astype(np.float64)


@dataclass(frozen=True)
class RunScores:
    """One run's corpus score on a test set and its value in every sentence-bootstrap replicate."""

    score: float
    replicates: np.ndarray  # (resamples,)


def replicate_scores(metric: str, statistics: Sequence[np.ndarray], resamples: int = RESAMPLES, seed: int = SEED,
                     start: int = 0) -> np.ndarray:  # fmt: skip
    """Runs' corpus scores in replicates ``start`` to ``resamples`` of :func:`sentence_counts`, (replicates, runs),
    from each run's sentences' statistics (sentences, k), all drawn from the same counts block by block."""
    stacked = np.concatenate([np.asarray(found, dtype=np.float64) for found in statistics], axis=1)
    whole = bool(np.all(stacked == np.round(stacked))) and float(np.abs(stacked).sum()) < 2.0**40
    runs, parts = len(statistics), []
    for counts in sentence_counts(len(stacked), resamples, seed, start):
        # counts of whole-number statistics sum exactly in any order, so a matrix product (BLAS) gives the same
        # bits on any thread count; sentence scores (floats) go through einsum, whose order does not depend on it
        sums = counts @ stacked if whole else np.einsum("rs,sk->rk", counts, stacked)
        parts.append(corpus_scores(metric, sums.reshape(len(sums), runs, -1)))
    return np.concatenate(parts) if parts else np.zeros((0, runs))


def _masked(statistics: np.ndarray, subset: np.ndarray | None) -> np.ndarray:
    """The statistics with the sentences outside ``subset`` counted as zero (they are still drawn)."""
    statistics = np.asarray(statistics, dtype=np.float64)
    return statistics if subset is None else np.where(np.asarray(subset)[:, None], statistics, 0.0)


def run_scores(metric: str, statistics: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED,
               subset: np.ndarray | None = None) -> RunScores:  # fmt: skip
    """A run's score from its sentences' statistics (sentences, k), optionally on the sentences of ``subset`` (a
    boolean mask) alone, and in each replicate of :func:`sentence_counts`."""
    statistics = _masked(statistics, subset)
    replicates = replicate_scores(metric, [statistics], resamples, seed)[:, 0]
    return RunScores(float(corpus_scores(metric, statistics.sum(axis=0))), replicates)


def repeat_scores(seconds: Sequence[float], sentences: int, resamples: int, rng: np.random.Generator) -> RunScores:
    """A run's decoding speed from the wall seconds of its repeated timings of ``sentences`` sentences: the log of
    the sentences per second at the median repeat, and in each of ``resamples`` replicates at the median of the
    repeats drawn with replacement (the timing level of a speed claim's bootstrap, as the sentences are of a
    score's)."""
    times = np.asarray(seconds, dtype=np.float64)
    drawn = times[rng.integers(0, len(times), size=(resamples, len(times)))]
    return RunScores(math.log(sentences / float(np.median(times))), np.log(sentences / np.median(drawn, axis=1)))


@dataclass(frozen=True)
class Estimate:
    """An effect (positive favours A) and its bootstrap replicates."""

    effect: float
    replicates: np.ndarray
    seeds: tuple[int, int]  # how many runs of A and of B it rests on
    drawn: bool = True  # False: no level could vary (one value a row, or every seed's the same): a point estimate


def seed_deviations(rows: Sequence[tuple[float, Sequence[float]]], resamples: int, rng: np.random.Generator,
                    within: Sequence[float] | None = None) -> np.ndarray:  # fmt: skip
    """The seed level of the bootstrap: draws of the error that the rows' finite seeds put into Σ w·(row mean),
    for rows given as (weight w, the row's per-seed scores). Its variance is Σ w²·s²/n (s² the row's seed variance,
    ddof 1, less the row's ``within`` part, floored at 0; a row of one seed adds nothing: its seed variance is
    unknown), drawn as Student's t with the Welch–Satterthwaite degrees of freedom, Σ(w²s²/n)² / Σ((w²s²/n)² /
    (n − 1)): with 3–5 seeds, resampling the seeds themselves gives too narrow an interval (a discrete draw whose
    variance is (n − 1)/n of the seed mean's, and no t tails), which this corrects (tests/verdicts/
    test_statistics.py measures the coverage of both)."""
    within = within or [0.0] * len(rows)
    parts = [(weight**2 * max(0.0, float(np.var(scores, ddof=1)) - own) / len(scores), len(scores) - 1)
             for (weight, scores), own in zip(rows, within, strict=True) if len(scores) > 1 and weight]  # fmt: skip
    variance = sum(part for part, _ in parts)
    if variance <= 0:
        return np.zeros(resamples)
    freedom = variance**2 / sum(part**2 / df for part, df in parts if part > 0)
    return math.sqrt(variance) * rng.standard_t(freedom, size=resamples)


def interaction(runs: Sequence[RunScores]) -> float:
    """The seed × sentence interaction of a row's runs on one test set: the part of a run's sentence-bootstrap
    variance that the row's other runs do not share (mean variance − mean covariance of their replicates). A run's
    score on a fixed test set varies between seeds by the seed effect *and* by this; the sentence level of
    :func:`contrast` already draws it (each run's replicate carries its own), so the seed level leaves it out."""
    if len(runs) < 2:
        return 0.0
    replicates = np.stack([run.replicates for run in runs])
    variances = replicates.var(axis=1, ddof=1)
    total = float(replicates.sum(axis=0).var(ddof=1))
    covariance = (total - float(variances.sum())) / (len(runs) * (len(runs) - 1))
    return max(0.0, float(variances.mean()) - covariance)


def contrast(rows: Sequence[Sequence[RunScores]], weights: Sequence[float], lower_is_better: bool = False,
             seed: int = SEED) -> Estimate:  # fmt: skip
    """The weighted sum of the rows' mean scores over the two-level bootstrap: sentences drawn once per replicate for
    all runs (in their :class:`RunScores`; each row's replicate is the mean of its runs'), plus each replicate's
    :func:`seed_deviations` of the seed effect alone (each row's seed variance less its :func:`interaction`, which
    the sentence level draws already). Weights (1, −1) give A − B (:func:`two_level`); (1, −1, −1, 1) on rows (A,
    A0, B, B0) the gain of the step A0 → A over that of B0 → B; one row of weight 1 its mean (e.g. of paired
    differences). Negated when lower is better. ``seeds`` counts the runs of the first two rows (of one row: twice)."""
    if len(rows) != len(weights) or not rows or any(not row for row in rows):
        raise ValueError("each row needs at least one run, and a weight")
    rng = np.random.default_rng([seed, *(len(row) for row in rows)])
    weighted = list(zip(weights, rows, strict=True))
    sentences = sum(w * np.mean([run.replicates for run in row], axis=0) for w, row in weighted)
    scores = [(w, [run.score for run in row]) for w, row in weighted]
    within = [interaction(row) for row in rows]
    replicates = sentences + seed_deviations(scores, len(sentences), rng, within)
    effect = float(sum(w * np.mean(row_scores) for w, row_scores in scores))
    sign = -1.0 if lower_is_better else 1.0
    return Estimate(sign * effect, sign * replicates, (len(rows[0]), len(rows[min(1, len(rows) - 1)])))


def two_level(first: Sequence[RunScores], second: Sequence[RunScores], lower_is_better: bool = False,
              seed: int = SEED) -> Estimate:  # fmt: skip
    """The difference of the rows' mean scores (A − B; B − A when lower is better): :func:`contrast` of two rows."""
    return contrast([first, second], [1.0, -1.0], lower_is_better, seed)


def seed_level(first: Sequence[float], second: Sequence[float] | None = None, lower_is_better: bool = False,
               resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:  # fmt: skip
    """Values measured once per run, over seeds alone (:func:`seed_deviations`): the difference of the rows' means
    (A − B), or with ``second`` None the mean of ``first`` (e.g. the log speed ratio of each seed pair). Where no
    row's seeds vary (one value a row, or several identical ones) nothing is drawn: a point estimate, which decides
    nothing (a zero-width interval would otherwise "hold" any claim on its side)."""
    rng = np.random.default_rng([seed, len(first), len(second or ())])
    rows = [(1.0, first)] + ([(-1.0, second)] if second is not None else [])
    effect = float(sum(w * np.mean(values) for w, values in rows))
    replicates = effect + seed_deviations(rows, resamples, rng)
    sign = -1.0 if lower_is_better else 1.0
    drawn = bool(np.ptp(replicates) > 0)
    return Estimate(sign * effect, sign * replicates, (len(first), len(second or first)), drawn)


# --- tests ---------------------------------------------------------------------------------------------------------


def _share(count: int, total: int) -> float:
    return (count + 1) / (total + 1)


def p_two_sided(estimate: Estimate) -> float:
    """The centred two-sided p of "no difference"."""
    deviations = np.abs(estimate.replicates - estimate.effect)
    return _share(int((deviations >= abs(estimate.effect)).sum()), len(deviations))


def p_above(estimate: Estimate, threshold: float) -> float:
    """The centred one-sided p of "the effect exceeds ``threshold``" (against: it is at most the threshold)."""
    deviations = estimate.replicates - estimate.effect
    return _share(int((deviations >= estimate.effect - threshold).sum()), len(deviations))


def p_below(estimate: Estimate, threshold: float) -> float:
    """The centred one-sided p of "the effect falls short of ``threshold``"."""
    deviations = estimate.replicates - estimate.effect
    return _share(int((deviations <= estimate.effect - threshold).sum()), len(deviations))


def interval(estimate: Estimate, level: float) -> tuple[float, float]:
    """The percentile interval of the replicates at ``level`` (e.g. 0.95)."""
    low, high = np.quantile(estimate.replicates, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def p_error(p: float, resamples: int) -> float:
    """The Monte Carlo standard error of a bootstrap p from ``resamples`` replicates: √(p(1 − p)/R)."""
    return math.sqrt(p * (1 - p) / resamples)


def interval_error(estimate: Estimate, level: float) -> tuple[float, float]:
    """The Monte Carlo standard error of each end of :func:`interval`: half the distance between the replicates'
    quantiles one binomial standard error √(q(1 − q)/R) either side of the end's q (the order statistics' spread)."""
    resamples = len(estimate.replicates)
    errors = []
    for q in ((1 - level) / 2, (1 + level) / 2):
        spread = math.sqrt(q * (1 - q) / resamples)
        low, high = np.quantile(estimate.replicates, [max(0.0, q - spread), min(1.0, q + spread)])
        errors.append(float(high - low) / 2)
    return errors[0], errors[1]


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (Holm 1979) of a family of p-values, in their order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


# --- the verdict rules ---------------------------------------------------------------------------------------------

LEVELS = {"better": 0.95, "larger_gain": 0.95, "close": 0.90, "faster": 0.90, "equivalent": 0.90}
ERROR_RATES = {
    "better": "95 % two-sided (2.5 % a side): the centred two-sided p of no difference",
    "larger_gain": "95 % two-sided (2.5 % a side), as *better*",
    "close": "90 % interval, one-sided 5 % in the claim's direction (A above B − margin: non-inferiority; "
    "a *did not increase* claim is the same test, non-superiority of the modification by the margin)",
    "faster": "90 % interval, one-sided 5 % in the claim's direction (the speed ratio above its threshold)",
    "equivalent": "90 % interval, two one-sided 5 % tests (TOST) inside ±margin",
}


def detectable(kind: str, replicates: np.ndarray) -> float:
    """The minimum detectable effect at 80 % power and the kind's α, from the spread of the bootstrap replicates
    (their central intervals' half-widths, which for a normal estimate of standard error sd are z·sd, and which stay
    finite where the seed level's t has heavy tails): for *better* the true |effect| found with 80 % power by the
    two-sided 5 % test, (z₀.₉₇₅ + z₀.₈)·sd; for *close* and *faster* how far beyond its threshold the true effect
    must lie, (z₀.₉₅ + z₀.₈)·sd; for *equivalent* the smallest margin that TOST shows with 80 % power when the rows
    are truly equal, (z₀.₉₅ + z₀.₉)·sd."""
    test_level = 1 - ALPHA if kind in ("better", "larger_gain") else 1 - 2 * ALPHA
    power_level = 2 * POWER - 1 if kind != "equivalent" else POWER
    levels = [(1 - test_level) / 2, (1 + test_level) / 2, (1 - power_level) / 2, (1 + power_level) / 2]
    low, high, power_low, power_high = np.quantile(replicates, levels)
    return float(high - low) / 2 + float(power_high - power_low) / 2


def planned_detectable(kind: str, first: Sequence[RunScores], second: Sequence[RunScores], seeds: tuple[int, int],
                       resamples: int = RESAMPLES, seed: int = SEED) -> float | None:  # fmt: skip
    """The minimum detectable effect (:func:`detectable`) of a claim of ``kind`` planned with ``seeds`` runs of each
    row, were its rows like the pilot rows ``first`` and ``second`` (each at least two runs on the claim's test set,
    drawn on the same sentences): the pilot's difference of row means split into its shared sentence part, each
    row's seed × sentence :func:`interaction` and each row's seed effect; the planned replicates draw the shared part
    as it is, the other two divided by the planned seeds (normal sentence level, Student's t seed level with the
    Welch–Satterthwaite degrees of freedom, as :func:`seed_deviations`). None when a planned row has one seed (its
    seed variance is unknown: such a claim reads *inconclusive: one seed*) or a pilot row has fewer than two runs."""
    if min(seeds) < 2 or len(first) < 2 or len(second) < 2:
        return None
    means = np.mean([run.replicates for run in first], axis=0) - np.mean([run.replicates for run in second], axis=0)
    within = [interaction(first), interaction(second)]
    shared = max(0.0, float(np.var(means, ddof=1)) - within[0] / len(first) - within[1] / len(second))
    seed_parts = [(max(0.0, float(np.var([r.score for r in row], ddof=1)) - own) / n, n - 1)
                  for row, own, n in zip((first, second), within, seeds, strict=True)]  # fmt: skip
    rng = np.random.default_rng([seed, *seeds])
    sentences = math.sqrt(shared + within[0] / seeds[0] + within[1] / seeds[1])
    replicates = sentences * rng.standard_normal(resamples)
    if (variance := sum(part for part, _ in seed_parts)) > 0:
        freedom = variance**2 / sum(part**2 / df for part, df in seed_parts if part > 0)
        replicates += math.sqrt(variance) * rng.standard_t(freedom, size=resamples)
    return detectable(kind, replicates)


@dataclass(frozen=True)
class Tested:
    """A claim's test before the family's adjustment: the effect, its interval, the p of its registered test (the
    claim's direction, fixed by its wording), which way the interval points (True: for the claim, False: against it,
    None: neither), whether the effect lies on the wrong side of its threshold or margin, the p of the test against
    the claim (which a *does not hold* needs, Bonferroni over the family), the Monte Carlo errors of the p and the
    interval's ends, the thresholds the interval is judged against, and the minimum detectable effect."""

    effect: float
    interval: tuple[float, float]
    level: float
    p_value: float
    supports: bool | None
    seeds: tuple[int, int]
    against: bool
    p_reverse: float = 1.0
    resamples: int = 0
    p_error: float = 0.0
    interval_error: tuple[float, float] = (0.0, 0.0)
    thresholds: tuple[float, ...] = (0.0,)
    mde: float = 0.0
    drawn: bool = True  # the estimate's (:class:`Estimate`): False for a point estimate, whose interval is itself


def assess(kind: str, estimate: Estimate, margin: float = 0.0, ratio: float = 1.0) -> Tested:
    """The test of a claim of ``kind`` (see the module docstring) on ``estimate``; for ``faster`` the estimate is of
    the log speed ratio, and its effect, interval, thresholds and detectable effect are returned as ratios."""
    return replace(_assess(kind, estimate, margin, ratio), drawn=estimate.drawn)


def _assess(kind: str, estimate: Estimate, margin: float, ratio: float) -> Tested:
    if kind not in KINDS:
        raise ValueError(f"unknown claim kind {kind!r}")
    effect, resamples, level = estimate.effect, len(estimate.replicates), LEVELS[kind]
    low, high = interval(estimate, level)
    errors = interval_error(estimate, level)
    mde = detectable(kind, estimate.replicates)
    if kind in ("better", "larger_gain"):
        supports = True if low > 0 else False if high < 0 else None
        p = p_two_sided(estimate)
        return Tested(effect, (low, high), level, p, supports, estimate.seeds, effect < 0, p, resamples,
                      p_error(p, resamples), errors, (0.0,), mde)  # fmt: skip
    if kind == "equivalent":
        p = max(p_above(estimate, -margin), p_below(estimate, margin))
        supports = True if -margin < low and high < margin else False if high < -margin or low > margin else None
        reverse = p_below(estimate, -margin) if effect < 0 else p_above(estimate, margin)
        return Tested(effect, (low, high), level, p, supports, estimate.seeds, abs(effect) >= margin, reverse,
                      resamples, p_error(p, resamples), errors, (-margin, margin), mde)  # fmt: skip
    threshold = math.log(ratio) if kind == "faster" else -margin
    supports = True if low > threshold else False if high < threshold else None
    p, reverse = p_above(estimate, threshold), p_below(estimate, threshold)
    tested = Tested(effect, (low, high), level, p, supports, estimate.seeds, effect <= threshold, reverse, resamples,
                    p_error(p, resamples), errors, (threshold,), mde)  # fmt: skip
    if kind == "faster":  # as ratios: exp of the log ratio (its errors scale with it)
        ratios = (math.exp(low), math.exp(high))
        return replace(tested, effect=math.exp(effect), interval=ratios, thresholds=(ratio,), mde=math.exp(mde),
                       interval_error=(ratios[0] * errors[0], ratios[1] * errors[1]))  # fmt: skip
    return tested


def verdict(tested: Tested, adjusted_p: float, family: int = 1) -> str:
    """The verdict of a tested claim given its Holm-adjusted p: *holds* when the interval lies on the claim's side
    and the adjusted p of its registered test is below ``ALPHA``; *does not hold* when the interval lies on the
    other side and the test against the claim rejects too (for *better* the same two-sided p; otherwise its p times
    the ``family``'s size, Bonferroni); else inconclusive."""
    if tested.supports is True and adjusted_p < ALPHA:
        return HOLDS
    if tested.supports is False:
        against = adjusted_p if tested.level == LEVELS["better"] else min(1.0, tested.p_reverse * family)
        if against < ALPHA:
            return FAILS
    return OPEN


def reverse_p(tested: Tested, adjusted_p: float, family: int) -> float:
    """The p that a *does not hold* rests on (see :func:`verdict`)."""
    return adjusted_p if tested.level == LEVELS["better"] else min(1.0, tested.p_reverse * family)


def unsettled(tested: Tested, adjusted_p: float, family: int = 1) -> bool:
    """Whether Monte Carlo error could still flip the verdict: a p that decides it (adjusted: its Monte Carlo error
    scaled alike) or an end of the interval within ``MC_ERRORS`` Monte Carlo errors of its threshold."""
    scale = adjusted_p / tested.p_value if tested.p_value > 0 and adjusted_p < 1 else 1.0
    if adjusted_p < 1 and abs(adjusted_p - ALPHA) <= MC_ERRORS * tested.p_error * scale:
        return True
    against = reverse_p(tested, adjusted_p, family)
    reverse_error = (
        MC_ERRORS
        * p_error(tested.p_reverse, max(tested.resamples, 1))
        * (against / tested.p_reverse if tested.p_reverse else 1)
    )
    if tested.supports is False and against < 1 and abs(against - ALPHA) <= reverse_error:
        return True
    return any(abs(end - threshold) <= MC_ERRORS * error
               for end, error in zip(tested.interval, tested.interval_error, strict=True)
               for threshold in tested.thresholds)  # fmt: skip


# --- evidence from finished runs -----------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _sentence_statistics(metric: str, hypotheses: tuple[str, ...], references: tuple[str, ...],
                         names: tuple[str, str]) -> np.ndarray:  # fmt: skip
    from adlnmt.metrics import segment_statistics

    found = np.asarray(segment_statistics(metric, hypotheses, references, *names), dtype=np.float64)
    found.flags.writeable = False
    return found


def _file_name(path: Path | tuple[Path, ...]) -> str:
    """A file, or the files of a pooled test set ("a + b"), as an error names them."""
    return " + ".join(map(str, path)) if isinstance(path, tuple) else str(path)


class Scorer:
    """Runs' scores on the grid's test sets with their sentence-bootstrap replicates, from their archived hypotheses
    (so a metric the run was not scored on when it finished is computed here alike); computed once per run, test
    set, metric and source-length range."""

    def __init__(self, tests: dict[str, tuple[Any, Any]], resamples: int = RESAMPLES, seed: int = SEED) -> None:
        self.tests = tests  # name → (source, reference): paths, or tuples of paths for a pooled test set
        self.resamples = resamples
        self.seed = seed
        self._lines: dict[Path, tuple[str, ...]] = {}
        self._scores: dict[tuple[Path, str, str, int, int], RunScores] = {}

    def _read(self, path: Path | tuple[Path, ...]) -> tuple[str, ...]:
        """The lines of ``path``, or of several files one after another (a pooled test set)."""
        from adlnmt.metrics import read_lines

        if isinstance(path, tuple):
            return tuple(line for part in path for line in self._read(part))
        if path not in self._lines:
            self._lines[path] = tuple(read_lines(path))
        return self._lines[path]

    def _statistics(self, metric: str, hypotheses: Path | tuple[Path, ...], test: str) -> np.ndarray:
        """The sentence statistics of a run's ``hypotheses`` on ``test``; a file of another length than the
        references (a damaged archive) is an error naming both files."""
        reference = self.tests[test][1]
        names = (_file_name(hypotheses), _file_name(reference))
        return _sentence_statistics(metric, self._read(hypotheses), self._read(reference), names)

    def run(self, hypotheses: Path | None, test: str, metric: str, words: tuple[int, int] = (0, 0),
            resamples: int | None = None) -> RunScores | None:  # fmt: skip
        """The scores on ``test`` (its sources of words[0] to words[1] words, 0: no bound) of a run's ``hypotheses``
        with ``resamples`` replicates (default: the scorer's); None when the run was not evaluated on it (None)."""
        return self.runs([hypotheses], test, metric, words, resamples)[0]

    def runs(self, found: Sequence[Path | tuple[Path, ...] | None], test: str, metric: str,
             words: tuple[int, int] = (0, 0), resamples: int | None = None) -> list[RunScores | None]:  # fmt: skip
        """:meth:`run` of several runs' hypotheses; more replicates than computed before extend them, all at once."""
        resamples = resamples or self.resamples
        short: dict[int, list[tuple[tuple, np.ndarray]]] = {}  # replicates so far → (key, statistics) to extend
        keys: list[tuple | None] = []
        for hypotheses in found:
            key = None if hypotheses is None else (hypotheses, test, metric, *words)
            keys.append(key)
            have = self._scores.get(key) if key else None
            if key and (have is None or len(have.replicates) < resamples):
                statistics = self._statistics(metric, hypotheses, test)
                subset = None
                if any(words):
                    lengths = np.array([len(line.split()) for line in self._read(self.tests[test][0])])
                    subset = (lengths >= words[0]) & ((lengths <= words[1]) if words[1] else True)
                short.setdefault(0 if have is None else len(have.replicates), []).append(
                    (key, _masked(statistics, subset))
                )
        for start, pending in short.items():
            more = replicate_scores(metric, [statistics for _, statistics in pending], resamples, self.seed, start)
            for column, (key, statistics) in enumerate(pending):
                have = self._scores.get(key)
                score = have.score if have else float(corpus_scores(metric, statistics.sum(axis=0)))
                replicates = more[:, column] if have is None else np.concatenate([have.replicates, more[:, column]])
                self._scores[key] = RunScores(score, replicates)
        return [None if key is None else RunScores(self._scores[key].score, self._scores[key].replicates[:resamples])
                for key in keys]  # fmt: skip

    def length_ratio(self, hypotheses: Path | None, test: str) -> float | None:
        """A run's output length on ``test``: sacreBLEU's tokens (13a) of its ``hypotheses`` over the references'
        (from BLEU's statistics, as sacreBLEU's ``ratio``); None when the run was not evaluated on it (None)."""
        if hypotheses is None:
            return None
        statistics = self._statistics("bleu", hypotheses, test)
        hypothesis_tokens, reference_tokens = statistics[:, 0].sum(), statistics[:, 1].sum()
        return float(hypothesis_tokens / reference_tokens) if reference_tokens else None
