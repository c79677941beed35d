"""The results of an experiment: one row per variant with mean ± sample standard deviation over the finished seeds
(Markdown and CSV), per-run values (runs.csv), paired bootstrap significance against the baseline, and report.md
with the table and the plots.

Significance: every variant against the baseline, the difference of the means with its 95 % interval and centred
two-sided p from the two-level bootstrap (test sentences, then a Student-t seed level) of
:mod:`adlnmt.verdicts.statistics`; a cell is marked † when the interval excludes 0 and p < 0.05 (one comparison at
a time, unadjusted: the claims carry Holm's adjustment) and both rows have at least ``MIN_SEEDS`` seeds there (a row
of one seed adds no seed variance, which is unknown, so its interval holds the sentences' variation alone).
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from adlnmt.bench.machine import BUSY_BESIDE_LIMIT
from adlnmt.experiment.arithmetic import SET_APART_NOTE, row_result, set_apart
from adlnmt.experiment.contrastive import contrastive_section
from adlnmt.experiment.convergence import convergence_note, convergence_table
from adlnmt.experiment.folders import shown
from adlnmt.experiment.grid import Grid
from adlnmt.experiment.plots import SHORT, make_plots
from adlnmt.experiment.results import RunResult, Timing
from adlnmt.experiment.rows import Row, collect
from adlnmt.experiment.runner import Run, last_lines
from adlnmt.experiment.speed import speed_section
from adlnmt.store.atomic import write_text_atomic
from adlnmt.verdicts.claims import TIMED_TOGETHER_MINUTES
from adlnmt.verdicts.ranks import spearman
from adlnmt.verdicts.statistics import (
    ALPHA,
    LOWER_IS_BETTER,
    MIN_SEEDS,
    RunScores,
    Scorer,
    assess,
    brevity_penalty,
    two_level,
)


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof = 1; None with fewer than two values)."""
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def cell(values: list[float], digits: int = 2, spread: bool = True) -> str:
    """``mean ± std`` (just the mean with one value, or without ``spread``); '–' when there is none."""
    mean, std = mean_std(values)
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None and spread else "")


SPEEDS: dict[str, Callable[[Timing], float | None]] = {  # the speed columns of the CSV files
    "sentences_per_s": lambda timing: timing.sentences_per_s,
    "tokens_per_s": lambda timing: timing.tokens_per_s,
    "decode_seconds": lambda timing: timing.decode_seconds,
}


def score(test: str, metric: str) -> Callable[[RunResult], float | None]:
    """The run's score on ``test`` (None when it was not evaluated on it)."""
    return lambda result: result.score(test, metric)


def speed(test: str, column: str) -> Callable[[RunResult], float | None]:
    """The run's speed figure ``column`` (of :data:`SPEEDS`) on ``test`` (None when it was not evaluated on it)."""

    def value(result: RunResult) -> float | None:
        timing = result.timing(test)
        return SPEEDS[column](timing) if timing else None

    return value


# --- significance ----------------------------------------------------------------------------------------------


Finished = dict[tuple[str, int], tuple[Path, RunResult]]  # (variant, seed) → (run folder, result)


def finished_runs(runs: list[Run]) -> Finished:
    """The runs the rows are made of (:func:`adlnmt.experiment.rows.collect`), with the folders of their hypotheses."""
    return {(run.variant.name, run.seed): (folder, result) for run in runs
            if (folder := run.finished_in()) is not None and (result := row_result(run)) is not None}  # fmt: skip


def add_significance(grid: Grid, rows: list[Row], finished: Finished, scorer: Scorer) -> None:
    """Every variant against the baseline on every test set and metric: the difference of the means with its 95 %
    interval and centred two-sided p from the two-level bootstrap of :mod:`adlnmt.verdicts.statistics`, over the
    seeds of each row evaluated on the test set; significant only where both rows have ``MIN_SEEDS`` seeds there
    (``one_seed`` otherwise: the interval lacks the unknown seed variance of a row of one seed, as a claim's would)."""
    if grid.baseline is None:
        return

    def scores(variant: str, test: str, metric: str) -> list[RunScores]:
        found = (finished.get((variant, seed)) for seed in grid.seeds)
        return [r for folder, result in filter(None, found)
                if (r := scorer.run(result.hypotheses(folder, test), test, metric))]  # fmt: skip

    for row in rows:
        if row.name == grid.baseline:
            continue
        for test in grid.tests:
            for metric in grid.metrics:
                ours, theirs = scores(row.name, test.name, metric), scores(grid.baseline, test.name, metric)
                if not ours or not theirs:
                    continue
                tested = assess("better", two_level(ours, theirs))  # variant − baseline, two-sided
                one_seed = min(tested.seeds) < MIN_SEEDS
                row.significance[(test.name, metric)] = {
                    "difference": tested.effect, "interval": tested.interval, "p_value": tested.p_value,
                    "seeds": tested.seeds, "one_seed": one_seed,
                    "significant": tested.supports is not None and tested.p_value < ALPHA and not one_seed,
                }  # fmt: skip


def _metric_header(grid: Grid, test: str, metric: str) -> str:
    return SHORT[metric] if len(grid.tests) == 1 else f"{test} {SHORT[metric]}"


def paper_columns(grid: Grid) -> list[str]:
    """The columns of the paper's published scores that the grid's variants give (``paper:``), in order."""
    return list(dict.fromkeys(column for variant in grid.variants for column in variant.paper))


def markdown_table(grid: Grid, rows: list[Row]) -> str:
    speed_test = grid.tests[0].name
    published = {variant.name: variant.paper for variant in grid.variants}
    header = ["variant", "seeds", "params"]
    header += [_metric_header(grid, t.name, m) for t in grid.tests for m in grid.metrics]
    header += [f"paper: {column}" for column in paper_columns(grid)]
    header += ["valid ppl", "updates", "train min", "sent/s", "tok/s"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    # label times with their device where the table's runs trained (were timed) on more than one kind
    mixed_training, mixed_timing = (len({kind for row in rows for kind, _ in row.by_device(timed)}) > 1
                                    for timed in (False, True))  # fmt: skip
    for row in rows:
        params = row.values(lambda r: r.parameters)
        label = f"{row.name} (baseline)" if row.name == grid.baseline else row.name
        cells = [label, f"{len(row.results)}/{row.total}", _count(params[0]) if params else "–"]
        for test in grid.tests:
            for metric in grid.metrics:
                values = [v for v in row.values(score(test.name, metric)) if v is not None]
                partial = f" ({len(values)} of {len(row.results)} seeds)" if 0 < len(values) < len(row.results) else ""
                mark = row.significance.get((test.name, metric), {})  # from the rescored outputs: a dash has none
                cells.append(cell(values) + (" †" if values and mark.get("significant") else "") + partial)
        cells += [f"{published[row.name][c]:g}" if c in published[row.name] else "–" for c in paper_columns(grid)]
        cells += [
            cell(row.values(lambda r: r.best_valid_ppl)),
            cell(row.values(lambda r: r.updates), 0, spread=False),
            time_cell(row, lambda r: r.train_minutes, 1, timed=False, labelled=mixed_training),
            time_cell(row, speed(speed_test, "sentences_per_s"), 1, timed=True, labelled=mixed_timing),
            time_cell(row, speed(speed_test, "tokens_per_s"), 0, timed=True, labelled=mixed_timing),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def time_cell(
    row: Row, value: Callable[[RunResult], float | None], digits: int, timed: bool, labelled: bool = False
) -> str:
    """The mean time or speed ``value`` over the row's runs; one mean per device kind, each labelled, where the runs
    trained (``timed``: were timed) on more than one, or where the table's rows did (``labelled``)."""
    groups = row.by_device(timed)
    if len(groups) == 0 or (len(groups) == 1 and not labelled):
        return cell(row.values(value), digits, spread=False)
    return " / ".join(f"{cell(runs.values(value), digits, spread=False)} ({kind})" for kind, runs in groups)


def time_mean(row: Row, value: Callable[[RunResult], float | None], timed: bool) -> float | None:
    """The mean time or speed ``value``, or None where the runs span device kinds (no mean across them)."""
    return mean_std(row.values(value))[0] if len(row.by_device(timed)) <= 1 else None


def _count(parameters: int) -> str:
    return f"{parameters / 1e6:.1f}M" if parameters >= 100_000 else f"{parameters / 1e3:.1f}K"


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def csv_table(grid: Grid, rows: list[Row]) -> str:
    """One row per variant: mean and std of every metric, p-values against the baseline, the paper's scores, sizes
    and speeds."""
    published = {variant.name: variant.paper for variant in grid.variants}
    header = ["variant", "seeds_finished", "seeds_total", "parameters"]
    for test in grid.tests:
        for metric in grid.metrics:
            header += [f"{test.name}.{metric}.{k}" for k in ("mean", "std", "p", "significant")]
    header += [f"paper.{column}" for column in paper_columns(grid)]
    header += ["best_valid_ppl.mean", "best_valid_ppl.std", "updates.mean", "train_minutes.mean"]
    for test in grid.tests:
        header += [f"{test.name}.{k}.mean" for k in SPEEDS]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        params = row.values(lambda r: r.parameters)
        line = [row.name, len(row.results), row.total, params[0] if params else ""]
        for test in grid.tests:
            for metric in grid.metrics:
                mark = row.significance.get((test.name, metric), {})
                line += [_number(v) for v in mean_std(row.values(score(test.name, metric)))]
                line += [_number(mark.get("p_value")), mark.get("significant", "")]
        line += [_number(published[row.name].get(column)) for column in paper_columns(grid)]
        line += [_number(v) for v in mean_std(row.values(lambda r: r.best_valid_ppl))]
        line += [_number(mean_std(row.values(lambda r: r.updates))[0])]
        line += [_number(time_mean(row, lambda r: r.train_minutes, False))]
        for test in grid.tests:
            line += [_number(time_mean(row, speed(test.name, column), True)) for column in SPEEDS]
        writer.writerow(line)
    return buffer.getvalue()


def timed_on(result: RunResult) -> str:
    """The processor a run's speed was measured on, last (``--retime``) or when it finished: speeds compare only
    between runs timed on the same one (the VM's host may change between sessions)."""
    return result.machine(timed=True).processor


def timed_together(first: RunResult, second: RunResult) -> bool:
    """Whether the two runs' speeds, as they stand, were measured on one processor within TIMED_TOGETHER_MINUTES."""
    a, b = first.machine(timed=True), second.machine(timed=True)
    apart = abs(datetime.fromisoformat(a.date) - datetime.fromisoformat(b.date))
    return a.processor == b.processor and apart <= timedelta(minutes=TIMED_TOGETHER_MINUTES)


def timed_beside_others(result: RunResult, test: str) -> bool:
    """Whether the run's speed on ``test``, as it stands, was measured beside other work: other runs' training
    (``--decode-beside-training``, and not measured again with ``--retime`` since), or other processes keeping
    more than ``BUSY_BESIDE_LIMIT`` cores busy (measured since 2026-11-27). Not a speed to compare."""
    busy = result.tests[test].timing.busy_beside
    return (result.retimed is None and result.provenance.timed_alone is False) or (busy or 0.0) > BUSY_BESIDE_LIMIT


def scored_later_text(result: RunResult) -> str:
    """What ``--score-added`` added to the run, e.g. 'test_2017_flickr, test_2017_mscoco, checked on test_2016_flickr;
    chrf from its hypotheses'."""
    parts = []
    for later in result.scored_later:
        if later.tests:
            parts.append(f"{', '.join(later.tests)}, checked on {later.checked_on}")
        if later.metrics:
            parts.append(f"{', '.join(later.metrics)} from its hypotheses")
    return "; ".join(parts)


def timing_processors(rows: list[Row]) -> str:
    """Which runs were timed on which processor, when not all on one."""
    timed: dict[str, list[str]] = {}
    for row in rows:
        for r in row.results:
            timed.setdefault(timed_on(r), []).append(f"{row.name} seed {r.seed}")
    if len(timed) < 2:
        return ""
    return (
        "Speeds compare only between runs timed on the same processor (the machine changed between sessions): "
        + "; ".join(f"{processor}: {', '.join(runs)}" for processor, runs in timed.items())
        + "."
    )


def decoding_conditions(rows: list[Row]) -> str:
    """Whether the speed columns were measured with the grid's other runs stopped (recorded since 2026-11-23; since
    2026-11-26 also when they were not: ``--decode-beside-training``) and on a machine without other load (the load
    average when the run started; since 2026-11-27 the cores other processes kept busy while it was timed)."""
    timed = [(f"{row.name} seed {r.seed}", r.provenance) for row in rows for r in row.results if r.retimed is None]
    unknown = [name for name, p in timed if p.paused_minutes is None]
    beside = [name for name, p in timed if p.timed_alone is False]
    loaded = [f"{name} ({load:.1f} on {cores} cores)" for name, p in timed
              if (load := (p.machine.load_average or [0.0])[0]) > (cores := p.machine.usable_cores)]  # fmt: skip
    text = "each run decoding with the grid's other runs stopped"
    if unknown:
        text += (f", except {', '.join(unknown)}: decoded while another run of the grid may have trained beside it "
                 "(before the runner stopped the others)")  # fmt: skip
    if beside:
        text += f"; **decoded beside the others' training** (`--decode-beside-training`): {', '.join(beside)}"
    if loaded:
        text += f"; **on a loaded machine** (load average above the cores when the run started): {', '.join(loaded)}"
    busy = [f"{row.name} seed {r.seed} ({max(found):.1f} cores)" for row in rows for r in row.results
            if (found := [t.timing.busy_beside for t in r.tests.values() if t.timing.busy_beside is not None])
            and max(found) > BUSY_BESIDE_LIMIT]  # fmt: skip
    if busy:
        text += (f"; **timed while other processes kept more than {BUSY_BESIDE_LIMIT} cores busy** (measured; not "
                 f"compared in a speed claim until `--retime` on a quiet machine): {', '.join(busy)}")  # fmt: skip
    return text


def runs_csv(grid: Grid, rows: list[Row]) -> str:
    """Every finished run's own values."""
    header = ["variant", "seed", "parameters", "updates", "best_update", "train_minutes", "best_valid_ppl"]
    header += [f"{t.name}.{m}" for t in grid.tests for m in grid.metrics]
    header += [f"{t.name}.{k}" for t in grid.tests for k in ("sentences_per_s", "tokens_per_s")]
    header += ["trained_on", "timed_on"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        for r in row.results:
            line = [row.name, r.seed, r.parameters, r.updates, r.best_update]
            line += [_number(r.train_minutes), _number(r.best_valid_ppl)]
            # a run may lack a test set added later
            line += [_number(r.score(t.name, m)) for t in grid.tests for m in grid.metrics]
            line += [_number(speed(t.name, k)(r)) for t in grid.tests for k in ("sentences_per_s", "tokens_per_s")]
            line += [r.machine().kind, timed_on(r)]
            writer.writerow(line)
    return buffer.getvalue()


def significance_table(rows: list[Row]) -> str:
    lines = [
        "| variant | test | metric | seeds (variant, baseline) | Δ vs baseline [95 % interval] | p (two-sided) "
        "| significant |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for row in rows:
        for (test, metric), mark in row.significance.items():
            low, high = mark["interval"]
            better = (mark["difference"] > 0) != (metric in LOWER_IS_BETTER)
            verdict = f"yes ({'better' if better else 'worse'})" if mark["significant"] else "no"
            if mark.get("one_seed"):
                verdict = "not tested: one seed (its seed variance is unknown; the interval holds the sentences alone)"
            lines.append(f"| {row.name} | {test} | {SHORT[metric]} | {mark['seeds'][0]}, {mark['seeds'][1]} | "
                         f"{mark['difference']:+.2f} [{low:+.2f}, {high:+.2f}] | {mark['p_value']:.4f} | "
                         f"{verdict} |")  # fmt: skip
    return "\n".join(lines)


def length_table(grid: Grid, rows: list[Row], finished: Finished, scorer: Scorer) -> str:
    """Each row's output length on each test set: the length ratio (sacreBLEU's tokens of the hypotheses over the
    references'), mean ± sample std over the seeds scored there, and BLEU's brevity penalty averaged over them."""
    lines = ["| variant | " + " | ".join(test.name for test in grid.tests) + " |",
             "|---|" + "---:|" * len(grid.tests)]  # fmt: skip
    for row in rows:
        cells = [row.name]
        for test in grid.tests:
            runs = (finished.get((row.name, seed)) for seed in grid.seeds)
            ratios = [
                ratio
                for folder, result in filter(None, runs)
                if (ratio := scorer.length_ratio(result.hypotheses(folder, test.name), test.name)) is not None
            ]
            if not ratios:
                cells.append("–")
                continue
            penalty = statistics.fmean(brevity_penalty(ratios))
            partial = f" ({len(ratios)} of {len(row.results)} seeds)" if len(ratios) < len(row.results) else ""
            cells.append(f"{cell(ratios, 3)} (BP {penalty:.3f}){partial}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


LENGTH_NOTE = (
    "Length ratio: sacreBLEU's tokens (13a) of a run's translations over the reference's, as its `ratio`; mean ± "
    "sample std over the seeds. BP: BLEU's brevity penalty, exp(1 − 1/ratio) below a ratio of 1 and 1 from there, the "
    "factor BLEU multiplies its n-gram precisions by, averaged over the seeds. Shorter translations tend to have "
    "higher precisions, which make up for part of the penalty (experiments/analysis/README.md, Output length and "
    "seed variance)."
)


def paper_agreement(grid: Grid, rows: list[Row]) -> str:
    """Spearman's rank correlation between our first metric on the first test set and each published column, over
    the rows that have both (from three rows on); empty when there is none."""
    test, metric = grid.tests[0].name, grid.metrics[0]
    ours = {row.name: mean_std(row.values(score(test, metric)))[0] for row in rows}
    found = []
    for column in paper_columns(grid):
        named = [v for v in grid.variants if column in v.paper and ours[v.name] is not None]
        a, b = [ours[v.name] for v in named], [v.paper[column] for v in named]
        if len(named) >= 3 and len(set(a)) > 1 and len(set(b)) > 1:
            rho = float(spearman(np.array(a)[None], np.array(b))[0])
            found.append(f"{column} ρ = {rho:+.2f} ({len(named)} rows)")
    if not found:
        return ""
    return (f"Row order against the paper (Spearman's rank correlation of our {SHORT[metric]} on {test} with the "
            f"published column): {'; '.join(found)}.")  # fmt: skip


# --- the report ------------------------------------------------------------------------------------------------


def _notes(grid: Grid, rows: list[Row], apart: list[str]) -> str:
    t = grid.translate
    weights = f"average of the {next(iter(t['average']))} {next(iter(t['average'].values()))}" if t.get("average") \
        else f"{t['checkpoint']} checkpoint"  # fmt: skip
    threads = sorted({r.threads for row in rows for r in row.results})
    devices = sorted({r.device for row in rows for r in row.results})
    lines = [
        "Scores: mean ± sample standard deviation (ddof = 1) over the finished seeds (`seeds` = finished/planned); "
        "sacreBLEU on detokenised text"
        + ("; METEOR is NLTK's (exact + stem, no WordNet)." if "meteor" in grid.metrics else "."),
        f"Decoding: beam {t['beam']}, length penalty α = {t['length_penalty']}, batch {t['batch_size']} sentences, "
        f"{weights}. `valid ppl`: validation perplexity of the best checkpoint.",
        f"`train min`: the trainer's cumulative training time (with periodic validation, without the time the run was "
        f"stopped while another decoded); `sent/s`, `tok/s`: "
        f"decoding speed on {grid.tests[0].name} (target pieces + EOS per second), device {', '.join(devices) or '–'}"
        f", {', '.join(map(str, threads)) or '–'} thread(s), {decoding_conditions(rows)}.",
    ]
    retimed = [f"{row.name} seed {r.seed}" for row in rows for r in row.results if r.retimed is not None]
    if retimed:
        lines.append(f"Speeds measured again after training (`--retime`: one run after another, alone, the first "
                     f"timing kept in result.json): {', '.join(retimed)}.")  # fmt: skip
    scored_later = [f"{row.name} seed {r.seed} ({scored_later_text(r)})" for row in rows for r in row.results
                    if r.scored_later]  # fmt: skip
    if scored_later:
        lines.append(f"Scored after the run had finished (`--score-added`, on what `added_evaluation` added; a test "
                     f"set translated once the weights had translated the named one as archived): "
                     f"{'; '.join(scored_later)}.")  # fmt: skip
    if processors := timing_processors(rows):
        lines.append(processors)
    if apart:
        lines.append(f"{SET_APART_NOTE}: {', '.join(apart)}.")
    if grid.baseline:
        lines.append(
            f"† different from {grid.baseline}: the 95 % interval of the difference excludes 0 and its centred "
            f"two-sided p < {ALPHA} (two-level bootstrap over seeds and test sentences, {grid.bootstrap_resamples} "
            "replicates; one comparison at a time, not adjusted for multiplicity). (n of m seeds): a test set or "
            "metric only some of the row's runs were evaluated on."
        )
    return "\n".join(f"- {line}" for line in lines)


def unfinished_line(run: Run) -> str:
    """The report's line on a run without a result: where it stands, as far as this checkout can tell."""
    if not run.dir.exists():  # e.g. a report rebuilt in a checkout other than the one that trains
        return f"- {run.label}: no run folder here (`{shown(run.dir)}`): not started, or training elsewhere"
    if not run.log.exists():
        return f"- {run.label}: not started in `{shown(run.dir)}`"
    last = last_lines(run.log, 1).replace("`", "'")
    return f"- {run.label}: failed or interrupted; log `{shown(run.log)}` ends with `{last}`"


def _span(result: RunResult) -> tuple[float, float]:
    """The minutes (from the epoch) a run held its device: back from its evaluation's start by its training and
    paused minutes, as if a resumed run had trained in one stretch, then its evaluation."""
    provenance = result.provenance
    evaluated = result.evaluated.timestamp() / 60
    started = evaluated - provenance.train_minutes - (provenance.paused_minutes or 0.0)
    return started, evaluated + provenance.evaluate_minutes


def device_time(spans: list[tuple[float, float]]) -> tuple[float, int]:
    """The minutes covered by the union of ``spans`` (start, end) and the most of them open at once."""
    covered, most, end = 0.0, 0, float("-inf")
    for start, stop in sorted(spans):
        covered += max(0.0, stop - max(start, end))
        end = max(end, stop)
    events = sorted([(start, 1) for start, _ in spans] + [(stop, -1) for _, stop in spans])  # a stop before a start
    open_now = 0
    for _, step in events:
        open_now += step
        most = max(most, open_now)
    return covered, most


def compute_line(results: Iterable[RunResult]) -> str:
    """The wall-clock the runs took to train and evaluate, per device kind (a CPU's hours and a GPU's do not add):
    summed run by run, and the machine's time they held together (runs side by side counted once)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    minutes: dict[str, float] = {}
    for r in results:
        kind = r.machine().kind
        spans.setdefault(kind, []).append(_span(r))
        minutes[kind] = minutes.get(kind, 0.0) + r.provenance.train_minutes + r.provenance.evaluate_minutes
    if not spans:
        return ""

    def duration(m: float) -> str:
        return f"{m / 60:.1f} h" if m >= 60 else f"{m:.0f} min"

    parts = []
    for kind in sorted(spans):
        runs = spans[kind]
        held, most = device_time(runs)
        together = f"; {duration(held)} of the machine's time, up to {most} at once" if most > 1 else ""
        parts.append(f"{duration(minutes[kind])} on {kind} "
                     f"({len(runs)} run{'s' * (len(runs) > 1)}{together})")  # fmt: skip
    return "; their wall-clock, training and evaluation, run by run: " + ", ".join(parts)


def write_report(grid: Grid, runs: list[Run], out: Path) -> str:
    """Write results.md, results.csv, runs.csv, the plots and report.md under ``out``; return the Markdown table."""
    rows = collect(grid, runs)
    archived = finished_runs(runs)
    scorer = Scorer({test.name: (test.src, test.ref) for test in grid.tests}, grid.bootstrap_resamples)
    add_significance(grid, rows, archived, scorer)
    table = markdown_table(grid, rows)
    notes = _notes(grid, rows, set_apart(runs))
    write_text_atomic(out / "results.md", table + "\n\n" + notes + "\n")
    write_text_atomic(out / "results.csv", csv_table(grid, rows))
    write_text_atomic(out / "runs.csv", runs_csv(grid, rows))
    plots = make_plots(grid, rows, out / "plots")
    title = f"{grid.name}" + (f" (scale {grid.scale})" if grid.scale else "")
    finished = sum(len(row.results) for row in rows)
    dates = [r.provenance.machine.date for row in rows for r in row.results]
    latest = f", the latest started evaluating {max(dates)}" if dates else ""
    shared = [f"{row.name} seed {r.seed} (`{r.shared_from}`)" for row in rows for r in row.results if r.shared_from]
    latest += compute_line(r for row in rows for r in row.results if not r.shared_from)
    if shared:
        latest += (f" without the {len(shared)} run(s) trained once for another grid with the same settings: "
                   f"{', '.join(shared)}")  # fmt: skip
    parts = [
        f"# Experiment {title}",
        grid.description,
        grid.scale_description,
        f"Grid `{grid.path.name}`, {finished}/{len(runs)} runs finished{latest}.",
        "## Results",
        table,
        notes,
    ]
    parts.append(paper_agreement(grid, rows))
    if finished:
        parts += ["## Convergence", convergence_table(grid, rows), convergence_note(grid)]
    if any(row.significance for row in rows):
        parts += [f"## Against {grid.baseline}: two-level bootstrap", significance_table(rows)]
    if archived:
        parts += ["## Output length", length_table(grid, rows, archived, scorer), LENGTH_NOTE]
    parts += [f"## {caption}\n\n![{caption}](plots/{path.name})" for caption, path in plots]
    if grid.contrastive:
        parts.append(contrastive_section(grid, rows, out / "plots"))
    parts += speed_section(grid, runs, out)
    unfinished = [unfinished_line(run) for run in runs if run.result() is None]
    if unfinished:
        parts += ["## Unfinished runs", "\n".join(unfinished)]
    write_text_atomic(out / "report.md", "\n\n".join(p for p in parts if p) + "\n")
    return table
