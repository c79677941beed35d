"""The paper's claims about a grid's rows, judged on the finished runs: ``claims.md``.

A claim compares two rows A and B on one metric of one test set (grid key ``claims``):

- ``better: [A, B]`` holds when A's mean is higher and every seed pair (the same seed in both rows) is significantly
  better for A by sacreBLEU's paired bootstrap (p < 0.05); it does not hold when every seed pair is significant for
  B; otherwise it is inconclusive at this scale;
- ``close: [A, B]`` with ``tolerance: t`` ("A can replace B with little loss") holds when A's mean is at most t
  below B's; it does not hold when A is more than t below and every seed pair is significant for B; otherwise
  inconclusive;
- ``faster: [A, B]`` with ``ratio: r`` holds when A decoded the test set at least r times as many sentences per
  second as B in every seed pair, does not hold when it did in none, and is inconclusive otherwise (speeds are single
  measurements, each taken with the grid's other runs stopped: :mod:`adlnmt.experiment.quiet`); a seed pair timed on
  two different processors (the machine changed between sessions) is not compared.

The verdicts are computed from the results every time the report is written, never typed in.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from adlnmt.experiment.grid import Claim, Grid
from adlnmt.experiment.report import SIGNIFICANT, mean_std, timed_on
from adlnmt.experiment.runner import Run, fingerprint, read_json, write_json

HOLDS, FAILS, OPEN, MISSING = "holds", "does not hold", "inconclusive at this scale", "not run yet"


@dataclass(frozen=True)
class Judgement:
    claim: Claim
    seeds: tuple[int, ...]  # seeds both rows finished
    first: tuple[float | None, float | None]  # mean, std of A
    second: tuple[float | None, float | None]
    p_values: dict[int, float]  # seed → p of the paired bootstrap (kinds better and close)
    winners: dict[int, str]  # seed → "a" (A better), "b" or "tie"
    verdict: str
    ratios: dict[int, float] = field(default_factory=dict)  # seed → A's speed / B's (kind faster)
    apart: tuple[int, ...] = ()  # seeds whose pair was timed on different processors (kind faster): not compared


def verdict(claim: Claim, difference: float | None, significant_for: set[str]) -> str:
    """The rule of the module docstring; ``significant_for`` holds "a"/"b" when every seed pair is significant."""
    if difference is None:
        return MISSING
    if claim.kind == "better":
        return HOLDS if difference > 0 and "a" in significant_for else FAILS if "b" in significant_for else OPEN
    if difference >= -claim.tolerance:
        return HOLDS
    return FAILS if "b" in significant_for else OPEN


def speed_verdict(claim: Claim, ratios: dict[int, float]) -> str:
    """A ``faster`` claim from A's speed over B's in each seed pair (see the module docstring)."""
    if not ratios:
        return MISSING
    reached = [ratio >= claim.ratio for ratio in ratios.values()]
    return HOLDS if all(reached) else FAILS if not any(reached) else OPEN


class Judge:
    """Judges claims on the finished runs, with paired bootstrap results cached in ``bootstrap.json``."""

    def __init__(self, grid: Grid, runs: list[Run], out: Path) -> None:
        self.grid = grid
        self.finished = {(run.variant.name, run.seed): run for run in runs if run.finished_in() is not None}
        self.cache_path = out / "bootstrap.json"
        self.cache: dict[str, Any] = read_json(self.cache_path) or {}

    def _hypotheses(self, run: Run, test: str) -> list[str]:
        from adlnmt.metrics import read_lines

        folder = run.finished_in()
        result = read_json(folder / "result.json")
        return read_lines(folder / result["tests"][test]["hypotheses"])

    def _bootstrap(self, first: Run, second: Run, claim: Claim) -> dict[str, Any]:
        """sacreBLEU's paired bootstrap with B as the baseline system and A as the system (cached)."""
        from adlnmt.metrics import paired_bootstrap, read_lines

        reference = read_lines(next(t.ref for t in self.grid.tests if t.name == claim.test))
        b, a = self._hypotheses(second, claim.test), self._hypotheses(first, claim.test)
        key = fingerprint([b, a, reference, self.grid.metrics, self.grid.bootstrap_resamples])
        if key not in self.cache:
            tested = paired_bootstrap(b, a, reference, self.grid.metrics, self.grid.bootstrap_resamples)
            self.cache[key] = tested["metrics"]
        return self.cache[key][claim.metric]

    def scores(self, variant: str, claim: Claim, seeds: tuple[int, ...]) -> list[float]:
        tests = [self.finished[(variant, s)].result()["tests"][claim.test] for s in seeds]
        return [test["sentences_per_s"] if claim.kind == "faster" else test["scores"][claim.metric] for test in tests]

    def judge(self, claim: Claim) -> Judgement:
        seeds = tuple(s for s in self.grid.seeds if (claim.first, s) in self.finished and (claim.second, s) in
                      self.finished)  # fmt: skip
        if claim.kind == "faster":
            return self._judge_speed(claim, seeds)
        a, b = self.scores(claim.first, claim, seeds), self.scores(claim.second, claim, seeds)
        first, second = mean_std(a), mean_std(b)
        p_values, winners = {}, {}
        for seed in seeds:
            tested = self._bootstrap(self.finished[(claim.first, seed)], self.finished[(claim.second, seed)], claim)
            p_values[seed] = tested["p_value"]
            winners[seed] = {"b": "a", "a": "b"}.get(tested["better"], "tie")  # the test's "b" is the claim's A
        significant = {w for w in ("a", "b") if seeds and all(winners[s] == w and p_values[s] < SIGNIFICANT
                                                                  for s in seeds)}  # fmt: skip
        difference = first[0] - second[0] if seeds else None
        return Judgement(claim, seeds, first, second, p_values, winners, verdict(claim, difference, significant))

    def _judge_speed(self, claim: Claim, seeds: tuple[int, ...]) -> Judgement:
        def processor(variant: str, seed: int) -> str:
            return timed_on(self.finished[(variant, seed)].result() or {})

        apart = tuple(s for s in seeds if processor(claim.first, s) != processor(claim.second, s))
        seeds = tuple(s for s in seeds if s not in apart)
        a, b = self.scores(claim.first, claim, seeds), self.scores(claim.second, claim, seeds)
        ratios = {seed: x / y for seed, x, y in zip(seeds, a, b, strict=True)}
        found = OPEN if apart and not seeds else speed_verdict(claim, ratios)
        return Judgement(claim, seeds, mean_std(a), mean_std(b), {}, {}, found, ratios, apart)

    def save(self) -> None:
        write_json(self.cache_path, self.cache)


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def relation(claim: Claim) -> str:
    """The claim as a comparison of its two rows."""
    if claim.kind == "better":
        return f"{claim.first} > {claim.second}"
    if claim.kind == "close":
        return f"{claim.first} ≥ {claim.second}" + (f" − {claim.tolerance:g}" if claim.tolerance else "")
    return f"{claim.first} ≥ {claim.ratio:g} × {claim.second}"


def measured(j: Judgement) -> str:
    """The measured difference: A − B, or for a speed claim the geometric mean of A / B over the seed pairs (each
    timed on one processor; a ratio of the mean speeds would mix timings of different sessions)."""
    if j.claim.kind == "faster":
        return f"×{statistics.geometric_mean(j.ratios.values()):.2f}" if j.ratios else "–"
    a, b = j.first[0], j.second[0]
    return "–" if a is None or b is None else f"{a - b:+.2f}"


def _tests(j: Judgement) -> str:
    if j.claim.kind == "faster":
        return ", ".join(f"×{j.ratios[s]:.2f}" for s in j.seeds) or "–"
    marks = {"a": "A", "b": "B"}
    return ", ".join(f"{j.p_values[s]:.3f} ({marks.get(j.winners[s], '=')})" for s in j.seeds) or "–"


def _line(j: Judgement, planned: int) -> str:
    claim = j.claim
    scores = f"{_number(j.first[0])} ± {_number(j.first[1])} vs {_number(j.second[0])} ± {_number(j.second[1])}"
    where = f" ({claim.where})" if claim.where else ""
    partial = f" ({len(j.seeds)} of {planned} seeds)" if j.seeds and len(j.seeds) < planned else ""
    if j.apart:
        partial += f" (not compared: seed {', '.join(map(str, j.apart))}, A and B timed on different processors)"
    metric = "sent/s" if claim.kind == "faster" else claim.metric
    return (f"| “{claim.quote}”{where} | {relation(claim)} | {metric} {claim.test} | {scores} | {measured(j)} | "
            f"{_tests(j)} | **{j.verdict}**{partial} |")  # fmt: skip


def _record(j: Judgement, planned: int) -> dict[str, Any]:
    """One claim's judgement for ``claims.json`` (which the verdict table of docs/reproductions.md is built from)."""
    return {
        **asdict(j.claim),
        "tested_as": relation(j.claim),
        "seeds": list(j.seeds),
        "timed_apart": list(j.apart),
        "planned_seeds": planned,
        "first": list(j.first),
        "second": list(j.second),
        "measured": measured(j),
        "verdict": j.verdict,
    }


def write_claims(grid: Grid, runs: list[Run], out: Path) -> list[Judgement]:
    """Judge every claim of the grid and write ``claims.md`` under ``out`` (nothing when the grid has none)."""
    if not grid.claims:
        return []
    judge = Judge(grid, runs, out)
    judgements = [judge.judge(claim) for claim in grid.claims]
    judge.save()
    title = grid.name + (f" (scale {grid.scale})" if grid.scale else "")
    lines = [
        f"# Claims of the paper, judged on {title}",
        "",
        grid.description,
        "",
        *([grid.scale_description, ""] if grid.scale_description else []),
        "Scores: mean ± sample standard deviation over the seeds both rows finished; A − B: difference of the means; "
        f"p: sacreBLEU's paired bootstrap ({grid.bootstrap_resamples} resamples) of A against B for each seed, with "
        "the better system in brackets. *better* holds when A is higher and every seed is significant (p < "
        f"{SIGNIFICANT}) for A, and does not hold when every seed is significant for B; *close* (A ≥ B − tolerance) "
        "holds when A's mean is within the tolerance, and does not hold when A is further below with every seed "
        "significant for B; *faster* (A ≥ r × B in sentences per second on the test set) holds when "
        "every seed pair timed on one processor reaches the ratio and does not hold when none does. Anything else: "
        "inconclusive at this scale. A verdict from fewer seeds than planned says so and may change.",
        "",
        "| claim | tested as (A vs B) | metric | A vs B | A − B (speed: geometric mean of A / B) "
        "| p per seed (speed: A / B) | verdict |",
        "|---|---|---|---|---:|---|---|",
        *(_line(j, len(grid.seeds)) for j in judgements),
    ]
    (out / "claims.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    records = {"grid": grid.name, "scale": grid.scale, "claims": [_record(j, len(grid.seeds)) for j in judgements]}
    write_json(out / "claims.json", records)
    return judgements
