"""The rules that turn a claim's measurements into its verdict, and how ``claims.md`` and ``claims.json`` state them.

A claim (:class:`Claim`) compares two rows A and B of a table. Its test, interval, p and verdict words are
:mod:`adlnmt.verdicts.statistics`'s; this module adds what holds across a table's claims:

- **Holm families fixed at registration** (:func:`family`, :func:`adjusted`): the claims registered together (one
  commit) on one test set; a claim of the family not measured yet counts with p = 1, so later rows never grow it;
- **marks** on the measured verdict (:func:`adjusted`): a row measured on fewer than ``MIN_SEEDS`` seeds reads
  *inconclusive: one seed*, a claim reading a run that did not converge *inconclusive: not converged*, a claim the
  paper restricts to other data (``out_of_scope``) *out of scope at this data size* (measured, not judged, left
  out of the adjustment), a speed claim whose rows have no timing *not timed yet*;
- **registration**: each claim names the commit that registered it (``registered``); the seeds whose runs were
  evaluated before that commit are named, and the verdict on the later runs alone is given where it differs.

Gathering the measurements of a grid's runs is :mod:`adlnmt.experiment.judge`'s; the verdicts are computed from the
results every time the report is written, never typed in.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any

from adlnmt.verdicts.statistics import (
    ALPHA,
    CLAIM_RESAMPLES,
    ERROR_RATES,
    LEVELS,
    LOWER_IS_BETTER,
    MAX_RESAMPLES,
    MC_ERRORS,
    MIN_SEEDS,
    MISSING,
    NO_SPREAD,
    NOT_CONVERGED,
    NOT_TIMED,
    ONE_SEED,
    OUT_OF_SCOPE,
    Tested,
    holm,
    reverse_p,
    unsettled,
    verdict,
)

# Two decoding speeds compare as a ratio only when measured on one processor within this many minutes of each other:
# this project's VM runs the same code up to 25 % faster or slower from hour to hour and from session to session.
TIMED_TOGETHER_MINUTES = 60
POOL = " + "  # a claim on several test sets pooled into one corpus: their names joined


def test_parts(test: str) -> tuple[str, ...]:
    """The test sets of a claim's ``test``: one, or the pooled ones ("test_a + test_b")."""
    return tuple(test.split(POOL))


# a claim's registration: the commit that added it in this form and its committer date (ISO 8601)
REGISTERED = re.compile(r"([0-9a-f]{7,40}) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:Z|[+-]\d\d:\d\d))")


@dataclass(frozen=True)
class Claim:
    """A claim of the paper about two rows: ``first`` is better than ``second`` (kind ``better``), at most ``margin``
    points worse (kind ``close``), within ``margin`` points either way (kind ``equivalent``) on ``metric`` of test set
    ``test`` (of its sources of ``min_source_words`` to ``max_source_words`` words, 0: no bound), or decodes ``test``
    at least ``ratio`` times as many sentences per second (kind ``faster``; ``metric`` is then "sentences_per_s"),
    or the step from row ``first_from`` to ``first`` gains more than the step from ``second_from`` to ``second``
    (kind ``larger_gain``, the paper's "the largest gains come from ...").
    ``test`` may pool several test sets into one corpus (their names joined by ``POOL``: the corpus metric of their
    concatenation, the sentences of all drawn together).
    ``registered``: the commit that added the claim in this form and its date (ISO 8601), "" when not recorded;
    ``out_of_scope``: why the paper's claim does not extend to this data (then it is shown, not judged). A ``faster``
    claim with an ``engine`` (a grid's ``speed:`` section) reads the whole-command timings of that engine and
    ``beam``; without one, the speeds the runs measured while translating their test sets."""

    quote: str
    where: str  # e.g. "§4.4"
    kind: str  # better | close | equivalent | faster
    first: str
    second: str
    margin: float
    metric: str
    test: str
    ratio: float = 1.0
    min_source_words: int = 0
    max_source_words: int = 0
    out_of_scope: str = ""
    registered: str = ""
    registered_at: str = ""
    first_from: str = ""  # larger_gain: the rows the two steps start from
    second_from: str = ""
    engine: str = ""  # faster, timed as whole commands: the engine and beam timed
    beam: int = 0
    own_test_only: bool = False  # judged on its own test set alone (e.g. rows that translate different languages)

    def fields(self) -> dict[str, Any]:
        """The claim's keys for ``claims.json``; those of a whole-command timing and ``own_test_only`` only where set
        (archives written before them lack them)."""
        found = {k: v for k, v in asdict(self).items() if k != "own_test_only" or v}
        return found if self.engine else {k: v for k, v in found.items() if k not in ("engine", "beam")}

    @property
    def rows(self) -> tuple[str, ...]:
        """Every row the claim reads: (A, B), or (A, A0, B, B0) for a larger gain."""
        return (
            (self.first, self.first_from, self.second, self.second_from)
            if self.first_from
            else (self.first, self.second)
        )


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
    untimed: tuple[str, ...] = ()  # whole-command speed: "A seed 2 (why)", finished runs without a timing to compare


def registration_of(text: str) -> tuple[str, str]:
    """The commit and the date of a claim's ``registered`` ("COMMIT DATE"); ("", "") for ""; ValueError when it is
    not of that form."""
    if not text:
        return "", ""
    found = REGISTERED.fullmatch(text)
    if not found:
        raise ValueError(f"expected 'COMMIT DATE' (e.g. 5499228 2026-11-23T16:57:09+00:00: the commit that added the "
                         f"claim and its committer date), got {text!r}")  # fmt: skip
    return found.group(1), found.group(2)


def relation(claim: Claim) -> str:
    """The claim as a comparison of its two rows (on a lower-is-better metric, with its inequalities turned)."""
    a, b = claim.first, claim.second
    lower = claim.metric in LOWER_IS_BETTER
    beats, at_least, worse = ("<", "≤", "+") if lower else (">", "≥", "−")
    note = f" ({claim.metric}, lower is better)" if lower else ""
    if claim.kind == "better":
        return f"{a} {beats} {b}{note}"
    if claim.kind == "close":
        return f"{a} {at_least} {b}" + (f" {worse} {claim.margin:g}" if claim.margin else "") + note
    if claim.kind == "equivalent":
        return f"{a} = {b} ± {claim.margin:g}"
    if claim.kind == "larger_gain":
        return f"({a} − {claim.first_from}) {beats} ({b} − {claim.second_from}){note}"
    timing = f" (whole command, {claim.engine}, beam {claim.beam})" if claim.engine else ""
    return f"{a} ≥ {claim.ratio:g} × {b}{timing}"


def source_range(claim: Claim) -> str:
    """The claim's source-length range for a table cell (", sources of 12+ words"), or nothing."""
    low, high = claim.min_source_words, claim.max_source_words
    if not (low or high):
        return ""
    return f", sources of {low}–{high} words" if low and high else f", sources of {low}+ words" if low else \
        f", sources of at most {high} words"  # fmt: skip


def family(j: Judgement) -> str | None:
    """The Holm family of a judgement, fixed at registration: the claims of the table registered together (the same
    commit), on the same test set (the primary verdicts are one); None for a claim out of scope (not judged)."""
    if j.claim.out_of_scope:
        return None
    commit = j.claim.registered.split()[0] if j.claim.registered else "unregistered"
    return f"{commit}, {'primary' if j.primary else j.test}"


def adjusted(judged: list[Judgement]) -> list[Judgement]:
    """Holm's adjustment within each :func:`family` (every claim registered in it counts, a claim not measured yet
    or whose replicates drew nothing with p = 1, so that later rows do not grow it and a point estimate takes no
    one's place) and the verdicts, with whether Monte Carlo error could flip them."""
    members: dict[str, list[int]] = {}
    for i, j in enumerate(judged):
        if (name := family(j)) is not None:
            members.setdefault(name, []).append(i)
    judged = list(judged)
    for name, indices in members.items():
        tested = [judged[i].tested if judged[i].tested and judged[i].tested.drawn else None for i in indices]
        p_values = [t.p_value if t else 1.0 for t in tested]
        for i, p, t in zip(indices, holm(p_values), tested, strict=True):
            judged[i] = replace(judged[i], adjusted_p=p if t else None, family=name, family_size=len(indices))
    return [_verdict(j) for j in judged]


def contrast_weights(claim: Claim) -> dict[str, float]:
    """The weight of each row in the claim's effect: A − B, or for ``larger_gain`` (A − A0) − (B − B0); a row named
    twice (a chain of steps) is drawn once, its weights summed, and a row whose weights cancel is left out."""
    weights: dict[str, float] = {}
    for name, weight in zip(claim.rows, (1.0, -1.0, -1.0, 1.0) if claim.first_from else (1.0, -1.0), strict=True):
        weights[name] = weights.get(name, 0.0) + weight
    return {name: weight for name, weight in weights.items() if weight}


def _verdict(j: Judgement) -> Judgement:
    """The judgement's measured verdict and its final one, with the marks of the module's docstring."""
    if j.tested is None:
        timed_none = j.untimed or j.apart or j.beside  # finished runs, but no speeds to compare
        return replace(j, measured=NOT_TIMED, verdict=NOT_TIMED) if timed_none else j
    p = j.adjusted_p if j.adjusted_p is not None else j.tested.p_value
    one_seed = j.fewest_seeds < MIN_SEEDS
    point = ONE_SEED if one_seed else NO_SPREAD  # nothing drawn: one seed a row, or seeds that gave one value
    measured = verdict(j.tested, p, max(j.family_size, 1)) if j.tested.drawn else point
    final = (
        OUT_OF_SCOPE if j.claim.out_of_scope else NOT_CONVERGED if j.unconverged else ONE_SEED if one_seed else measured
    )
    return replace(j, measured=measured, verdict=final, unsettled=unsettled(j.tested, p, max(j.family_size, 1)))


# --- claims.md and claims.json -------------------------------------------------------------------------------------


NOTHING_DRAWN = "no interval: one seed a row and nothing below it to draw"
NO_SPREAD_DRAWN = "no interval: every seed gave the same value"


def _signed(value: float, kind: str) -> str:
    return f"×{value:.2f}" if kind == "faster" else f"{value:+.2f}"


def effect(j: Judgement) -> str:
    """The effect and its interval, e.g. "+1.19 [+0.52, +1.86] (95 %)"; for speed, ratios."""
    if j.tested is None:
        return "–"
    t, kind = j.tested, j.claim.kind
    if not t.drawn:
        reason = NOTHING_DRAWN if j.fewest_seeds < MIN_SEEDS else NO_SPREAD_DRAWN
        return f"{_signed(t.effect, kind)} ({reason})"
    low, high = (_signed(v, kind) for v in t.interval)
    return f"{_signed(t.effect, kind)} [{low}, {high}] ({t.level:.0%})".replace("%", " %")


def p_against(j: Judgement) -> float | None:
    """The p that a *does not hold* of a one-sided or equivalence claim rests on (the test against the claim,
    Bonferroni over the family: :func:`~adlnmt.verdicts.statistics.reverse_p`), where its interval lies against the
    claim; None elsewhere (a two-sided claim's is its own p)."""
    t = j.tested
    if t is None or not t.drawn or t.supports is not False or t.level == LEVELS["better"]:
        return None
    return reverse_p(t, t.p_value if j.adjusted_p is None else j.adjusted_p, max(j.family_size, 1))


def p_values(j: Judgement) -> str:
    """The registered test's p with its Monte Carlo error and the replicates it rests on, the adjusted p, and where
    the interval lies against a one-sided or equivalence claim the p against it (:func:`p_against`)."""
    if j.tested is None or not j.tested.drawn:
        return "–"
    t = j.tested
    adjusted = "not adjusted" if j.adjusted_p is None else f"Holm {j.adjusted_p:.3f} of {j.family_size}"
    against = " against" if t.against else ""
    shaky = f"; within {MC_ERRORS:g} MC errors of flipping" if j.unsettled else ""
    if (reverse := p_against(j)) is not None:
        adjusted += f"; against the claim {reverse:.4f}, Bonferroni × {max(j.family_size, 1)}"
    return f"{t.p_value:.4f} ± {t.p_error:.4f}{against} ({adjusted}; {t.resamples:,} replicates{shaky})"


def detectable_effect(j: Judgement) -> str:
    """The minimum detectable effect (80 % power at the kind's α) and, for a margin claim, whether it could be
    decided at this data size (the margin at least the detectable effect). With a row of one seed the replicates
    hold the sentence level alone, so the figure is a lower bound, said as such."""
    if j.tested is None or not j.tested.drawn:
        return "–"
    t, kind = j.tested, j.claim.kind
    one_seed = j.fewest_seeds < MIN_SEEDS
    if kind == "faster":
        text = f"×{t.mde:.2f} above the threshold"
    elif kind == "equivalent":
        decidable = ("not decidable at this size" if t.mde > j.claim.margin
                     else "not known" if one_seed else "decidable")  # fmt: skip
        text = f"margin ≥ {t.mde:.2f} ({decidable}: ±{j.claim.margin:g})"
    elif kind == "close":
        text = f"{t.mde:.2f} above −{j.claim.margin:g}"
    else:
        text = f"±{t.mde:.2f}"
    return f"at least {text} (one seed: sentences only)" if one_seed else text


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


def also_one_seed(j: Judgement) -> bool:
    """Whether a verdict *not converged* also rests on a row of one seed that its reason would not name otherwise
    (the runs as they are read *one seed* where nothing was drawn)."""
    return j.verdict == NOT_CONVERGED and j.fewest_seeds < MIN_SEEDS and j.measured != ONE_SEED


def verdict_text(j: Judgement) -> str:
    """The verdict with its reason: the runs not converged (and a row of one seed too), the scope, what the
    statistics alone give."""
    text = f"**{j.verdict}**"
    if j.verdict == NOT_CONVERGED:
        also = f"also {ONE_SEED}; " if also_one_seed(j) else ""
        text += f" ({', '.join(j.unconverged)}; {also}the runs as they are: {j.measured})"
    elif j.verdict == OUT_OF_SCOPE:
        text += f" ({j.claim.out_of_scope}; measured: {j.measured})"
    elif j.verdict == ONE_SEED and j.measured != ONE_SEED:
        text += f" (the statistics alone: {j.measured})"
    if j.untimed:
        text += f" (no timing: {'; '.join(j.untimed)})"
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
    """One judgement for ``claims.json`` (which the verdict table of docs/reproductions.md is built from); an
    estimate whose replicates drew nothing keeps its effect alone."""
    t = j.tested
    drawn = t if t is not None and t.drawn else None
    return {
        "test": j.test,
        "seeds": [list(j.seeds[0]), list(j.seeds[1])],
        "means": list(j.means),
        "effect": None if t is None else t.effect,
        "interval": None if drawn is None else list(drawn.interval),
        "level": None if drawn is None else drawn.level,
        "p": None if drawn is None else drawn.p_value,
        "p_against_claim": None if drawn is None else drawn.against,
        "p_holm": j.adjusted_p,
        **({"p_against_claim_bonferroni": reverse} if (reverse := p_against(j)) is not None else {}),
        "p_mc_error": None if drawn is None else drawn.p_error,
        "interval_mc_error": None if drawn is None else list(drawn.interval_error),
        "resamples": None if drawn is None else drawn.resamples,
        "unsettled": j.unsettled,
        "mde": None if drawn is None else drawn.mde,
        "mde_text": detectable_effect(j),
        "family": j.family,
        "family_size": j.family_size,
        "measured": j.measured,
        "post_registration": j.post_registration,
        "registered_before_results": registered_before(j),
        "registration": registration(j),
        "verdict": j.verdict,
        "unconverged": list(j.unconverged),
        **({"also_one_seed": True} if also_one_seed(j) else {}),
        "timed_apart": list(j.apart),
        "timed_beside_other_work": list(j.beside),
        **({"untimed": list(j.untimed)} if j.untimed else {}),
        "after_results": list(j.after_results),
        "summary": effect(j),
        "seed_list": seed_list(j),
    }


def method(whole_command: bool = False) -> str:
    """The paragraph of ``claims.md`` that states the rules its verdicts follow (``whole_command``: with those of
    speed claims timed as whole commands)."""
    timing = (
        " Speed claims timed as whole commands (the grid's speed section; engine and beam in the hypothesis): each "
        "run's sentences per second at the median of its timed repeats; the effect is the geometric mean of A / B "
        f"over the seeds timed for both on one processor within {TIMED_TOGETHER_MINUTES} minutes, none beside other "
        "work, and its interval has a timing level (each run's repeats drawn with replacement, their median) in "
        "place of the sentences, then the seed level over those pairs; the test and the error rate are *faster*'s. "
        "A claim "
        f"whose rows have finished runs but no such timing reads *{NOT_TIMED}*."
        if whole_command
        else ""
    )
    return (
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
        "smallest margin TOST would show; with a row of one seed, a lower bound from the sentences alone). A run "
        "that did not converge makes the claim inconclusive, and so does a row measured on one seed (no seed "
        "variation to draw from); a claim the paper restricts to other data is out of scope (measured, not judged). "
        "Registered: the commit that added the claim in this form; where runs had results before it, the verdict "
        "on the later runs alone is given where it differs."
        + timing
        + " Rules and references: docs/experiments.md, Significance."
    )


def table(judged: list[Judgement]) -> list[str]:
    """The lines of ``claims.md``'s table: one per judgement."""
    return [
        "| claim | hypothesis (A vs B) | metric, test set | seeds | A vs B | effect [interval] | p ± MC error (Holm) "
        "| MDE | verdict | registered |",
        "|---|---|---|---|---|---:|---|---|---|---|",
        *(_line(j) for j in judged),
    ]
