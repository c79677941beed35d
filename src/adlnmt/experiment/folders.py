"""Where ``adlnmt experiment`` writes: one folder per grid and scale, ``--out`` (default ``results/NAME-SCALE/``
next to the grid file)::

    report.md results.md results.csv runs.csv claims.md claims.json plots/   the report
    grid.yaml                  a copy of the grid file the runs were made with
    .gitignore                 keeps the data, weights and logs out of git: the rest is the archive to commit
    data/KEY/                  prepared data
    runs/VARIANT/seed-N/       result.json, hyp/TEST.txt, speed.json (archived), and train.yaml, run.json, log.txt,
                               model/ (weights, TensorBoard events), ... (ignored by git)
    slurm/ experiment.lock     SLURM's job files; the lock of the command at work

Grids run before there was one folder per grid trained in ``runs/NAME-SCALE/`` next to the grid file and archived
their finished runs (result.json and hypotheses) with the report in ``results/NAME-SCALE/`` (two folders, as the
repository's committed archives still are; ``--out`` together with ``--results`` gives them explicitly).
:func:`output_folders` recognises that layout and keeps it, saying so, so that a run in progress resumes where it
is. Every folder is absolute: the configs written into it (train.yaml, run.json, SLURM's job files) work from any
directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from adlnmt.errors import UserError
from adlnmt.experiment.grid import Grid
from adlnmt.experiment.lock import LOCK_FILE
from adlnmt.store.atomic import copy_atomic, write_text_atomic

GRID_COPY = "grid.yaml"
BEFORE_SPEED = f"""\
# Written by adlnmt experiment: the prepared data, weights, logs and locks stay out of git; the rest is the grid's
# archive to commit (report, tables, plots, grid.yaml, every finished run's result.json and hypotheses).
/data/
/slurm/
/{LOCK_FILE}
/runs/*/*/*
!/runs/*/*/result.json
!/runs/*/*/hyp/
"""
GITIGNORE = (  # the archive also keeps the speed: section's timings
    BEFORE_SPEED.replace("result.json and hypotheses).", "result.json, hypotheses and speed.json).")
    + "!/runs/*/*/speed.json\n"
)
EARLIER_GITIGNORES = (BEFORE_SPEED,)  # what earlier versions wrote: replaced by GITIGNORE (a user's own file is kept)


def folder_name(grid: Grid) -> str:
    return f"{grid.name}-{grid.scale}" if grid.scale else grid.name


def default_results(grid: Grid) -> Path:
    """``results/<name>-<scale>`` next to the grid file: the grid's folder (its archive and report)."""
    return grid.path.parent / "results" / folder_name(grid)


def earlier_runs(grid: Grid) -> Path:
    """``runs/<name>-<scale>`` next to the grid file: where the two-folder layout trains the runs."""
    return grid.path.parent / "runs" / folder_name(grid)


def absolute(path: str | Path) -> Path:
    """``path`` made absolute lexically (symbolic links kept, as the grid's own paths: schema.Reader.path_value)."""
    return Path(os.path.abspath(os.path.expanduser(path)))


def shown(path: Path) -> str:
    """A path as reports and messages show it: relative to the current directory when inside it, else absolute."""
    try:
        return Path(path).relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def flag_folder(flag: str, value: str) -> Path:
    """``--out``/``--results`` as an absolute folder; refused when empty (an unset shell variable would make it the
    current directory) or where a file stands in its way."""
    if not value.strip():
        raise UserError(
            f"{flag} {value!r}: an empty folder (an unset shell variable?); leave {flag} out for the default"
        )
    folder = absolute(value)
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    if not existing.is_dir():
        raise UserError(f"{flag} {value}: {existing} is a file, not a folder")
    return folder


@dataclass(frozen=True)
class Folders:
    """Where a grid's runs train (``work``: prepared data, run directories) and where its finished runs are archived
    with the report (``archive``): one folder, unless ``--results`` or the two folders of earlier versions (``note``
    says why) make them two."""

    work: Path
    archive: Path
    note: str = ""

    @property
    def one(self) -> bool:
        return self.work == self.archive


def output_folders(grid: Grid, out: str | None = None, results: str | None = None) -> Folders:
    """The folders of ``grid``: ``--out`` (default: the grid's folder ``results/NAME-SCALE`` next to the grid file)
    for everything, the archive and report in ``--results`` instead where given. Without ``--out``, the two folders
    of earlier versions where they are found: ``runs/NAME-SCALE`` next to the grid file exists, or the grid's folder
    holds archived runs but was never worked in (no grid.yaml, no lock: the repository's committed archives)."""
    given = {
        flag: flag_folder(flag, value) for flag, value in (("--out", out), ("--results", results)) if value is not None
    }
    if "--out" in given:
        return Folders(given["--out"], given.get("--results", given["--out"]))
    folder = absolute(default_results(grid))
    archive = given.get("--results", folder)
    if any((folder / name).exists() for name in (GRID_COPY, LOCK_FILE)):
        return Folders(folder, archive)
    earlier = absolute(earlier_runs(grid))
    if earlier.is_dir():
        found = f"{shown(earlier)} exists"
    elif (folder / "report.md").exists() or any(folder.glob("runs/*/*/result.json")):
        found = f"{shown(folder)} holds archived runs and no {GRID_COPY}"
    else:
        return Folders(folder, archive)
    note = (
        f"two folders, as before one folder per grid ({found}): the runs train in {shown(earlier)}, their results "
        f"and the report are archived in {shown(archive)}; --out {shown(folder)} trains them in the grid's own "
        "folder instead (unfinished runs then start again)"
    )
    return Folders(earlier, archive, note)


def claim(folders: Folders, grid: Grid) -> None:
    """Copy the grid file into the working folder, and give it the .gitignore that leaves its archive to commit
    (unless it has one of its own; one an earlier version wrote is brought up to date)."""
    folders.work.mkdir(parents=True, exist_ok=True)
    copy_atomic(grid.path, folders.work / GRID_COPY)
    ignore = folders.work / ".gitignore"
    if not ignore.exists() or ignore.read_text(encoding="utf-8") in EARLIER_GITIGNORES:
        write_text_atomic(ignore, GITIGNORE)
