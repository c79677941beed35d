"""Before a grid runs: the smallest effect each of its claims could detect with the grid's seeds on its test set
(80 % power at the claim kind's α: :func:`adlnmt.verdicts.statistics.planned_detectable`), and whether a margin
claim can be decided at this data size at all (``adlnmt experiment GRID --power``).

The spread a claim's test will see is not known before its rows have results, so it is borrowed from *pilot rows*:
the finished runs of other grids scored on the same test set (the same reference file, by content; for a claim on
pooled test sets, on each of them, pooled alike) with the same metric, each pilot grid's baseline against each of
its other rows with at least two runs apiece. The figure is the median over those pilot pairs, with their range:
rows that differ as much as the pilots' do. A claim about rows far more alike (or unlike) than any pilot pair is
planned less well than that; the verdict after the runs reports the detectable effect measured on its own rows
(claims.md, "detectable").
"""

from __future__ import annotations

import functools
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from adlnmt.data.digests import file_digest
from adlnmt.errors import UserError
from adlnmt.experiment.arithmetic import row_result
from adlnmt.experiment.grid import RUN_METRICS, Grid, TestSet, load_grid, scale_names
from adlnmt.experiment.runner import Run, plan_runs
from adlnmt.verdicts.claims import Claim, test_parts
from adlnmt.verdicts.statistics import SEED, RunScores, Scorer, planned_detectable

PILOT_RESAMPLES = 4_000  # a planning figure: its Monte Carlo error is far below the pilots' spread


@dataclass(frozen=True)
class Pilot:
    """One pilot pair: its grid ("aan-table2 (cpu)"), its label ("aan-table2 (cpu): Transformer vs AAN, 3 + 3 runs")
    and its rows' scores."""

    grid: str
    label: str
    first: list[RunScores]
    second: list[RunScores]


@dataclass(frozen=True)
class PilotGrid:
    grid: Grid
    runs: list[Run]


@functools.cache
def _digest(path: Path) -> str:
    """The SHA-256 of a test set's reference file (read once per command)."""
    try:
        return file_digest(path)
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror})") from None


def pilot_grids(grid: Grid, given: list[str] | None) -> list[PilotGrid]:
    """The grids given as ``GRID.yaml[@SCALE]`` (every scale where none is given), or by default every other grid
    file next to ``grid``'s at every scale, each with its planned runs (its default folders: the archive it reads).
    A given grid that does not load is an error; a default one (any other YAML file there) is skipped, saying why."""
    from adlnmt.experiment.folders import output_folders

    if given:
        specs = [(Path(spec.rpartition("@")[0] or spec), spec.rpartition("@")[2] if "@" in spec else None)
                 for spec in given]  # fmt: skip
    else:
        own = Path(grid.path).resolve()
        specs = [(path, None) for path in sorted(own.parent.glob("*.yaml")) if path.resolve() != own]
    found = []
    for path, scale in specs:
        if not path.is_file():
            raise UserError(f"--pilot {path}: no such grid file")
        try:
            for name in [scale] if scale else scale_names(path) or [None]:
                pilot = load_grid(path, name)
                folders = output_folders(pilot)
                found.append(PilotGrid(pilot, plan_runs(pilot, folders.work, folders.archive)))
        except UserError as err:
            if given:
                raise
            print(f"warning: --power: {path} skipped as a pilot (give --pilot to choose them): {err}", file=sys.stderr)
    return found


def pilots(claim: Claim, parts: list[TestSet], candidates: list[PilotGrid]) -> list[Pilot]:
    """The pilot pairs for ``claim`` on the test sets ``parts`` (one, or those it pools): each candidate's baseline
    (its first row without one) against each other row, both with at least two finished runs scored on test sets
    with the references of every part, pooled alike. A pair is counted once: two grid files with one name side by
    side (or a pilot given twice) read the same runs, in their one folder ``results/NAME-SCALE``."""
    words = (claim.min_source_words, claim.max_source_words)
    found = []
    counted: set[tuple[frozenset[tuple[Path, ...]], ...]] = set()  # each pair's hypothesis files
    for candidate in candidates:
        grid = candidate.grid
        same: list[TestSet] = []  # a test set of the pilot's for each part, each used once
        for part in parts:
            reference = _digest(part.ref)
            same += [t for t in grid.tests if t not in same and _digest(t.ref) == reference][:1]
        if len(same) < len(parts):
            continue
        name = " + ".join(t.name for t in same)
        hypotheses: dict[str, list[tuple[Path, ...]]] = {}
        for run in candidate.runs:
            if (
                (folder := run.finished_in())
                and (result := row_result(run))
                and all(t.name in result.tests for t in same)
            ):
                files = tuple(result.hypotheses(folder, t.name) for t in same)
                hypotheses.setdefault(run.variant.name, []).append(files)
        baseline = grid.baseline or grid.variants[0].name
        if len(hypotheses.get(baseline, [])) < 2:
            continue
        scorer = Scorer({name: (tuple(t.src for t in same), tuple(t.ref for t in same))}, PILOT_RESAMPLES, SEED)
        base = [s for s in scorer.runs(hypotheses[baseline], name, claim.metric, words) if s]
        for row, files in hypotheses.items():
            pair = (frozenset(hypotheses[baseline]), frozenset(files))
            if row != baseline and len(files) >= 2 and pair not in counted:
                counted.add(pair)
                other = [s for s in scorer.runs(files, name, claim.metric, words) if s]
                where = f"{grid.name} ({grid.scale or '-'})"
                found.append(
                    Pilot(where, f"{where}: {baseline} vs {row}, {len(base)} + {len(other)} runs", base, other)
                )
    return found


def _why_not(claim: Claim) -> str | None:
    if claim.kind == "faster":
        return "a speed claim: its spread is the timings', which no pilot on another machine gives"
    if claim.metric in RUN_METRICS:
        return f"{claim.metric} is measured once per run: its spread is the seeds' alone, unknown before them"
    if claim.kind == "larger_gain":
        return "a contrast of four rows: no pilot pair plans it"
    return None


def _reading(claim: Claim, mde: float) -> str:
    """What a detectable effect of ``mde`` means for the claim's test."""
    if claim.kind in ("close", "equivalent"):
        kind, sign = ("non-inferiority", "") if claim.kind == "close" else ("equivalence (TOST)", "±")  # one-sided
        if mde <= claim.margin:
            return f"decidable: {kind} within {sign}{claim.margin:g} shows with 80 % power when the rows are equal"
        return f"**not decidable at this size**: the margin {claim.margin:g} is below {mde:.2f}"
    return f"a true difference of {mde:.2f} or more is found with 80 % power"


def power_table(grid: Grid, given: list[str] | None = None) -> str:
    """A Markdown table: each claim of ``grid`` with its planned minimum detectable effect (median and range over
    its pilot pairs) for the grid's seeds, and what that means for its verdict."""
    tests = {t.name: t for t in grid.tests}
    seeds = (len(grid.seeds), len(grid.seeds))
    candidates = pilot_grids(grid, given)
    lines = [
        f"{grid.name} (scale {grid.scale or '-'}): {len(grid.seeds)} seeds a row; the minimum detectable effect at "
        "80 % power and each claim kind's α, planned from pilot rows on the same test set (adlnmt.experiment.power)",
        "",
        "| claim | kind | metric, test | seeds | detectable (median; range over pilots) | at this size | pilots |",
        "|---|---|---|---|---|---|---|",
    ]
    used: dict[str, float] = {}  # a better claim's pilot pairs, listed under the table
    for claim in grid.claims:
        head = f"| “{claim.quote}” | {claim.kind} | {claim.metric} {claim.test} | {seeds[0]} + {seeds[1]} |"
        if (why := _why_not(claim)) or min(seeds) < 2:
            lines.append(f"{head} – | {why or 'one seed a row decides nothing'} | – |")
            continue
        found = pilots(claim, [tests[part] for part in test_parts(claim.test)], candidates)
        planned = [(pilot, planned_detectable(claim.kind, pilot.first, pilot.second, seeds)) for pilot in found]
        values = sorted(mde for _, mde in planned if mde is not None)
        if not values:
            lines.append(f"{head} – | no pilot: no other grid has two runs of two rows on this test set | – |")
            continue
        median = statistics.median(values)
        grids = dict.fromkeys(pilot.grid for pilot, mde in planned if mde is not None)
        lines.append(f"{head} {median:.2f} ({values[0]:.2f}–{values[-1]:.2f}) | {_reading(claim, median)} | "
                     f"{len(values)} pairs of {len(grids)} grids |")  # fmt: skip
        used.update((pilot.label, mde) for pilot, mde in planned if mde is not None and claim.kind == "better")
    if used:
        lines += ["", "The pilot pairs (baseline vs row) and the difference a *better* claim could detect with them:"]
        lines += [f"- {label}: {mde:.2f}" for label, mde in used.items()]
    return "\n".join(lines)
