"""Checks that report everything they find: every input file a grid reads (``--dry-run`` checks them all before
anything runs), and the stored results a report could not read (listed, never left out silently)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.experiment.grid import VOCAB_FROM, Grid
from adlnmt.experiment.results import RESULT_FILE, ResultError, RunResult
from adlnmt.experiment.runner import Run


def input_problems(grid: Grid) -> list[str]:
    """What is wrong with the files the grid reads: its test sets, the corpora its data is prepared from, the
    prepared data directories it names (one line each, naming the file; the model a vocabulary comes from is checked
    when the grid is read)."""
    from adlnmt.data.data_dir import DataDir

    problems: list[str] = []
    files: dict[Path, str] = {}  # each file, and the grid key that names it first
    for test in grid.tests:
        files.setdefault(test.src, f"test {test.name!r} src")
        files.setdefault(test.ref, f"test {test.name!r} ref")
    for spec in dict.fromkeys(variant.data for variant in grid.variants):
        if spec.prepared is None:
            for key, value in spec.arguments().items():
                if isinstance(value, Path) and key != VOCAB_FROM:
                    files.setdefault(value, f"data.{key}")
            continue
        try:
            DataDir.load(spec.prepared)
        except UserError as err:
            problems.append(str(err))
    for path, key in files.items():
        if not path.is_file():
            problems.append(f"{path} ({key}): not found")
        elif not os.access(path, os.R_OK):
            problems.append(f"{path} ({key}): not readable")
    return problems


def check_speed_machine(grid: Grid) -> None:
    """A UserError when the ``speed:`` section asks for more threads or workers than this machine has cores (its
    timings would fail only once every run has trained)."""
    from adlnmt.devices import check_cpu_count

    if grid.speed is not None:
        for key in ("threads", "workers"):
            check_cpu_count(f"{grid.path}: speed.{key}", getattr(grid.speed, key))


def check_input_files(grid: Grid) -> None:
    """UserError listing every input file of the grid that cannot be read."""
    if problems := input_problems(grid):
        raise UserError(f"{grid.path}: {len(problems)} input(s) cannot be read:\n  " + "\n  ".join(problems))


def unreadable_results(runs: Iterable[Run]) -> list[str]:
    """A line for each ``result.json`` (archived or in a run directory) that exists but cannot be read: damaged
    JSON, or not a result (such a run counts as not finished)."""
    found = []
    for run in runs:
        for path in dict.fromkeys((run.archive / RESULT_FILE, run.dir / RESULT_FILE)):  # may be one place
            try:
                RunResult.load(path)
            except FileNotFoundError:
                continue
            except ResultError as err:
                found.append(f"{run.label}: {err}")
    return found
