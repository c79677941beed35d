"""What changed in a grid's verdicts since a base commit, and why: issue 38 ("what changed from the two-seed
verdicts, and why"; experiments/analysis/README.md).

For every claim of the grid as it stands, three judgements side by side:

1. the base commit's ``claims.json`` (at ``ec15689``, the two-seed verdicts that issue 38's audit read: the older
   rule, each seed pair's paired bootstrap p < 0.05 in one direction, *close* on the mean);
2. today's statistics (``adlnmt.experiment.judge`` and ``adlnmt.verdicts``: intervals over seeds and sentences,
   Holm) on the committed runs of the base's seeds only;
3. today's statistics on every committed seed: what ``claims.json`` holds now.

What changed is then named from the three, not typed in: the claim restated (``tested as`` differs), a base run
that no longer counts the same (a seed set apart, continued or retimed: its row's mean moved), the rule (1 → 2),
more seeds (2 → 3). A claim of today without a base counterpart was added since (its registration commit shown).
Claims are matched on their two rows (A, B), then metric, test set and source-length slice. Prints Markdown.

    python experiments/analysis/verdict_changes.py experiments/adl-table5.yaml --scale cpu --base ec15689
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from adlnmt.experiment.arithmetic import departure
from adlnmt.experiment.folders import output_folders
from adlnmt.experiment.grid import Grid, load_grid
from adlnmt.experiment.judge import Judge
from adlnmt.experiment.runner import Run, plan_runs
from adlnmt.verdicts.claims import Claim, Judgement, effect, relation, seed_list

TESTED_AS = re.compile(r"^(?P<a>.+?) (?:≥|≤|>|=|<) (?:[\d.]+ × )?(?P<b>.+?)(?: [−+±] [\d.]+)?(?: \(.+\))?$")
MOVED = 0.005  # a row's mean that moved more than this (score points or sentences/s) changed since the base


@dataclass(frozen=True)
class Base:
    """One claim of the base commit's ``claims.json``."""

    first: str
    second: str
    record: dict[str, Any]

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.record["seeds"])


def parse_base(record: dict[str, Any]) -> Base:
    """The rows of an old ``claims.json`` record, read from its ``tested_as`` ("A ≥ B − 0.5", "A ≥ 4 × B")."""
    if not (match := TESTED_AS.match(record["tested_as"])):
        raise ValueError(f"unreadable tested_as: {record['tested_as']!r}")
    return Base(match["a"], match["b"], record)


def base_claims(grid_folder: str, base: str) -> list[Base]:
    """The claims of ``grid_folder``/claims.json at commit ``base`` (none when it had no claims.json)."""
    shown = subprocess.run(["git", "show", f"{base}:{grid_folder}/claims.json"], capture_output=True, text=True)
    if shown.returncode != 0:
        return []
    return [parse_base(record) for record in json.loads(shown.stdout)["claims"]]


def likeness(claim: Claim, record: dict[str, Any]) -> tuple[bool, float]:
    """Same test set first, then how alike the quotes read."""
    return claim.test == record["test"], SequenceMatcher(None, claim.quote, record["quote"]).ratio()


def counterparts(claims: Sequence[Claim], bases: list[Base]) -> dict[int, Base]:
    """Each base claim paired with at most one claim of today (by index): the same two rows, metric and source
    slice; of several, the one on the same test set with the most similar quote."""
    paired: dict[int, Base] = {}
    for base in bases:
        r = base.record
        slice_ = (r.get("min_source_words", 0), r.get("max_source_words", 0))
        candidates = [i for i, c in enumerate(claims) if i not in paired
                      and (c.first, c.second, c.metric) == (base.first, base.second, r["metric"])
                      and (c.min_source_words, c.max_source_words) == slice_]  # fmt: skip
        if candidates:
            paired[max(candidates, key=lambda i: likeness(claims[i], r))] = base
    return paired


def verdict_class(verdict: str) -> str:
    """holds / does not hold / inconclusive / out of scope / not run yet (the detail after ':' dropped)."""
    for name in ("holds", "does not hold", "out of scope", "not run yet"):
        if verdict.startswith(name):
            return name
    return "inconclusive"


def primary(judged: list[Judgement], claim: Claim) -> Judgement:
    return next(j for j in judged if j.claim is claim and j.primary)


class RunHistory:
    """How a run of the base commit differs from the committed one, read from both commits' files."""

    def __init__(self, grid: Grid, archive: str, base: str, runs: list[Run]) -> None:
        self.grid, self.archive, self.base = grid, archive, base
        self.top = Path(git("rev-parse", "--show-toplevel"))
        self.apart = {(run.variant.name, run.seed): why for run in runs
                      if (result := run.result()) is not None and (why := departure(result)) is not None}  # fmt: skip

    def gone(self, row: str, seed: int) -> str:
        """Why a base run is in no row now."""
        why = self.apart.get((row, seed))
        return f"seed {seed} set apart ({why})" if why else f"seed {seed} not evaluated on this test set"

    def _files(self, row: str, seed: int, name: str) -> tuple[str | None, str | None]:
        path = f"{self.archive}/runs/{self.grid.variant(row).slug}/seed-{seed}/{name}"
        shown = subprocess.run(["git", "show", f"{self.base}:{path}"], capture_output=True, text=True)
        return (shown.stdout if shown.returncode == 0 else None,
                (self.top / path).read_text(encoding="utf-8") if (self.top / path).exists() else None)  # fmt: skip

    def change(self, row: str, seed: int, test: str, metric: str) -> str | None:
        """Why the run's value on (test, metric) differs from the base's ("trained again on NVIDIA H200"), or
        None where it does not (or the run is not in both commits)."""
        old, new = (json.loads(text) if text else None for text in self._files(row, seed, "result.json"))
        if old is None or new is None:
            return None
        if metric == "sentences_per_s":
            same = old["tests"][test]["sentences_per_s"] == new["tests"].get(test, {}).get("sentences_per_s")
        elif metric == "valid_ppl":
            same = old["best_valid_ppl"] == new["best_valid_ppl"]
        else:
            before, after = self._files(row, seed, f"hyp/{test}.txt")
            same = before == after
        if same:
            return None
        if new["curve"][: len(old["curve"])] != old["curve"]:
            where = new["provenance"]["machine"]
            why = f"trained again on {where['device_name'] if where['device'] != 'cpu' else 'the CPU'}"
        elif len(new["curve"]) > len(old["curve"]):
            why = f"continued to {new['updates']:,} updates"
        else:
            why = "retimed" if metric == "sentences_per_s" else "evaluated again"
        return f"seed {seed} {why}"


def reasons(claim: Claim, base: Base | None, then: Judgement, now: Judgement, history: RunHistory | None) -> str:
    """What changed between the base's verdict, today's statistics on the base's seeds, and today's verdict."""
    if base is None:
        return f"added since the base (registered {claim.registered or 'at an unrecorded commit'})"
    found = []
    if base.record["tested_as"] != relation(claim):
        found.append(f"restated: {base.record['tested_as']} → {relation(claim)}")
    old_means = (base.record["first"][0], base.record["second"][0])
    rows = (claim.first, claim.second)
    for row, old_mean, new_mean, new_seeds in zip(rows, old_means, then.means, then.seeds, strict=True):
        if dropped := sorted(set(base.seeds) - set(new_seeds)):
            gone = (history.gone(row, seed) if history else f"seed {seed} gone" for seed in dropped)
            found.append(f"{row}: {', '.join(gone)}")
        elif new_mean is not None and abs(new_mean - old_mean) > MOVED:
            changes = [
                c for seed in base.seeds if history and (c := history.change(row, seed, claim.test, claim.metric))
            ]
            why = ", ".join(changes) if changes else "no run's output changed"
            found.append(f"{row} on the base's seeds {old_mean:.2f} → {new_mean:.2f} ({why})")
    old, rule, more = verdict_class(base.record["verdict"]), verdict_class(then.verdict), verdict_class(now.verdict)
    if old != rule:
        fewer = then.seeds != (base.seeds, base.seeds)
        found.append(f"statistics: {old} → {rule} on the same seeds" if not fewer else
                     f"statistics and fewer seeds: {old} → {rule}")  # fmt: skip
    if rule != more:
        found.append(f"more seeds: {rule} → {more}")
    return "; ".join(found) or "unchanged"


def table(grid: Grid, bases: list[Base], judge_now: Judge, judge_then: Judge, history: RunHistory) -> str:
    now_all, then_all = judge_now.judge_all(), judge_then.judge_all()
    lines = [
        "| claim | tested as | base: seeds, effect (mean), verdict | today's statistics, base's seeds | now: seeds, "
        "effect [interval], p (Holm) | what changed |",
        "|---|---|---|---|---|---|",
    ]
    paired = counterparts(grid.claims, bases)
    for i, claim in enumerate(grid.claims):
        base = paired.get(i)
        then, now = primary(then_all, claim), primary(now_all, claim)
        old = "–" if base is None else \
            f"{', '.join(map(str, base.seeds))}: {base.record['measured']}, {base.record['verdict']}"  # fmt: skip
        holm = "–" if now.adjusted_p is None else f"{now.adjusted_p:.3f}"
        quote = claim.quote if len(claim.quote) <= 90 else claim.quote[:89] + "…"
        lines.append(
            f"| “{quote}” | {relation(claim)} ({claim.metric}, {claim.test}) | {old} | {seed_list(then)}: "
            f"{effect(then)}, {then.verdict} | {seed_list(now)}: {effect(now)}, {holm}, **{now.verdict}** | "
            f"{reasons(claim, base, then, now, history)} |"
        )
    if unmatched := [b for b in bases if all(b is not found for found in paired.values())]:
        lines += ["", "Base claims with no counterpart now (their rows are compared no longer): "
                  + "; ".join(f"{b.record['tested_as']} ({b.record['verdict']})" for b in unmatched) + "."]  # fmt: skip
    return "\n".join(lines)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()


def section(path: str, scale: str | None, base: str) -> str:
    """One grid's table under its heading."""
    grid = load_grid(path, scale)
    folders = output_folders(grid)
    runs = plan_runs(grid, folders.work, folders.archive)
    archive = str(folders.archive.relative_to(git("rev-parse", "--show-toplevel")))
    bases = base_claims(archive, base)
    base_seeds = tuple(sorted({seed for b in bases for seed in b.seeds})) or grid.seeds
    judge_then = Judge(replace(grid, seeds=base_seeds), runs)
    heading = f"## {grid.name} (scale {grid.scale}): base {base} (seeds {', '.join(map(str, base_seeds))}) → now"
    return f"{heading}\n\n{table(grid, bases, Judge(grid, runs), judge_then, RunHistory(grid, archive, base, runs))}\n"


def page(grids: list[str], scale: str | None, base: str) -> str:
    """The whole Markdown page: a heading, how it was built, then each grid's :func:`section`."""
    head = [
        f"# Verdicts at {base} and now",
        "",
        f"Built by `python experiments/analysis/verdict_changes.py {' '.join(grids)} --scale {scale} --base {base}` "
        "from the committed results; what the columns are: the script's docstring. Effects are A − B in the claim's "
        "metric (speed: the ratio), intervals 95 % for *better*, 90 % for *close*, *equivalent* and *faster*.",
        "",
    ]
    return "\n".join(head + [section(path, scale, base) for path in grids])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grids", nargs="+", help="grid files, e.g. experiments/adl-table5.yaml")
    parser.add_argument("--scale", default=None)
    parser.add_argument("--base", default="ec15689", help="the commit whose claims.json to compare with")
    args = parser.parse_args()
    print(page(args.grids, args.scale, args.base), end="")


if __name__ == "__main__":
    main()
