"""Scoring finished runs on what ``added_evaluation`` added after them: ``adlnmt experiment GRID --score-added``.

A test set or metric added to a grid (``added_evaluation``) is scored on every run evaluated from then on; runs
finished before lack it, and a claim on pooled test sets counts only the seeds scored on all of them. This command
fills the gap where it can, one selected finished run after another, with the grid's decoding options and the run's
own checkpoint, device and threads:

- a metric added: computed from the run's archived hypotheses (no weights needed), corpus and length buckets;
- a test set added: translated with the run's weights, where they are on this machine, once they have translated
  one of the run's archived test sets to exactly its archived hypotheses again (else other code or weights would be
  scored, and the run is left as it was). Translation runs with every adlnmt training worker on the machine stopped
  (:func:`adlnmt.experiment.quiet.machine_alone`), so its speed is taken as the others' were.

The run's fingerprint and its other scores stay; ``result.json`` records what was added, when, on which machine and
with which code (``scored_later``), in the archive and in the run directory wherever they hold the run's result.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.experiment.grid import Grid, TestSet
from adlnmt.experiment.quiet import machine_alone
from adlnmt.experiment.report import timed_on
from adlnmt.experiment.results import RESULT_FILE, Evaluation, Machine, RunResult, ScoredLater, read_result
from adlnmt.experiment.retime import keep, load_weights
from adlnmt.experiment.runner import Run


def score_added(grid: Grid, run: Run) -> str:
    """Score ``run`` on the grid's test sets and metrics it lacks and update its results; what happened, one line."""
    from adlnmt.experiment.worker import code_version

    folder = run.finished_in()
    result = read_result(folder / RESULT_FILE) if folder else None
    if folder is None or result is None:
        return f"skipped {run.label}: not finished"
    missing_tests = [test for test in grid.tests if test.name not in result.tests]
    archived = [test for test in grid.tests if test.name in result.tests]
    missing_metrics = {
        test.name: metrics
        for test in archived
        if (metrics := [m for m in grid.metrics if m not in result.tests[test.name].scores])
    }
    if not missing_tests and not missing_metrics:
        return f"{run.label}: scored on every test set and metric of the grid already"
    added = {name: with_metrics(grid, result, folder, _test(grid, name), metrics)
             for name, metrics in missing_metrics.items()}  # fmt: skip
    said = [
        f"{', '.join(metrics)} on {name} (from its archived hypotheses)" for name, metrics in missing_metrics.items()
    ]
    translated: dict[str, Evaluation] = {}
    checked_on = None
    skipped = ""
    hypotheses: dict[str, str] = {}
    if missing_tests and not archived:
        skipped = "none of its archived test sets is in the grid, so nothing shows that its weights are the run's"
    elif missing_tests:
        found = translate_added(run, result, folder, archived[0], missing_tests, grid)
        if isinstance(found, str):
            skipped = found
        else:
            checked_on, translated, hypotheses = found
            said += [f"{name} ({scores_text(evaluation)})" for name, evaluation in translated.items()]
    if not added and not translated:
        return f"skipped {run.label}: {skipped}"
    later = ScoredLater(tests=list(translated), metrics=sorted({m for ms in missing_metrics.values() for m in ms}),
                        checked_on=checked_on, machine=Machine.here(result.device), code=code_version())  # fmt: skip
    keep(run, result.with_added({**added, **translated}, later),
         {translated[name].hypotheses: text for name, text in hypotheses.items()})  # fmt: skip
    line = f"scored {run.label} later: {'; '.join(said)}"
    if translated and later.machine.processor != timed_on(result):
        line += f" (timed on {later.machine.processor}, its other speeds on {timed_on(result)}: --retime them together)"
    return line + (f"; not translated: {skipped}" if skipped else "")


def with_metrics(grid: Grid, result: RunResult, folder: Path, test: TestSet, metrics: list[str]) -> Evaluation:
    """The run's evaluation on ``test`` with ``metrics`` computed from its archived hypotheses."""
    from adlnmt.experiment.worker import bucket_scores, length_groups
    from adlnmt.metrics import read_lines, score

    evaluation = result.tests[test.name]
    hypotheses = read_lines(folder / evaluation.hypotheses)
    sources, references = read_lines(test.src), read_lines(test.ref)
    if not len(hypotheses) == len(sources) == len(references):
        raise UserError(
            f"{folder / evaluation.hypotheses} has {len(hypotheses)} lines but {test.src} has "
            f"{len(sources)} and {test.ref} {len(references)}: not the test set the run was scored on"
        )
    found = score(hypotheses, references, metrics, hyp_name=str(folder / evaluation.hypotheses), ref_name=str(test.ref))
    groups = length_groups(sources, list(grid.length_buckets))
    by_bucket = bucket_scores(hypotheses, references, groups, metrics)
    buckets = [replace(bucket, scores={**bucket.scores, **extra})
               for bucket, extra in zip(evaluation.timing.buckets, by_bucket, strict=True)]  # fmt: skip
    return replace(
        evaluation,
        scores={**evaluation.scores, **{m: found[m] for m in metrics}},
        signatures={**evaluation.signatures, **{m: found[f"{m}_signature"] for m in metrics}},
        timing=replace(evaluation.timing, buckets=buckets),
    )


def translate_added(run: Run, result: RunResult, folder: Path, check: TestSet, tests: list[TestSet], grid: Grid
                    ) -> tuple[str, dict[str, Evaluation], dict[str, str]] | str:  # fmt: skip
    """The run's evaluations on ``tests`` and their hypotheses' text, translated with its weights once they have
    translated ``check`` (an archived test set) to its archived hypotheses again (its name comes first); or why
    they were not translated."""
    from adlnmt.experiment.worker import evaluate_test

    translator = load_weights(run, result)
    if isinstance(translator, str):
        return translator
    spec = {"translate": grid.translate, "metrics": list(grid.metrics), "length_buckets": list(grid.length_buckets)}
    evaluations: dict[str, Evaluation] = {}
    with tempfile.TemporaryDirectory() as scratch, machine_alone():
        again = evaluate_test(translator, _spec_test(check), spec, Path(scratch))
        archived = folder / result.tests[check.name].hypotheses
        if (Path(scratch) / again.hypotheses).read_text(encoding="utf-8") != archived.read_text(encoding="utf-8"):
            return (f"its weights here translate {check.name} otherwise than its archived hypotheses (other code or "
                    "weights than the run was evaluated with)")  # fmt: skip
        for test in tests:
            evaluations[test.name] = evaluate_test(translator, _spec_test(test), spec, Path(scratch))
        texts = {name: (Path(scratch) / e.hypotheses).read_text(encoding="utf-8") for name, e in evaluations.items()}
    return check.name, evaluations, texts


def scores_text(evaluation: Evaluation) -> str:
    return ", ".join(f"{metric} {value:.2f}" for metric, value in evaluation.scores.items())


def _test(grid: Grid, name: str) -> TestSet:
    return next(test for test in grid.tests if test.name == name)


def _spec_test(test: TestSet) -> dict[str, str]:
    return {"name": test.name, "src": str(test.src), "ref": str(test.ref)}
