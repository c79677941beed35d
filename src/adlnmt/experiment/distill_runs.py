"""Running a grid's distillation step (:mod:`adlnmt.experiment.distill_step`) between its teacher's run and its
students' runs, on either executor.

Local: the runs that need no distilled data (the teacher among them, added when it was not selected) run first; then
``adlnmt distill`` writes ``data/distilled-<teacher>-seed-<n>`` in a subprocess (log beside it, ``<key>.log``), with
every lane's threads, nothing else running; then the students. The teacher's weights are in its run folder, or, for
a run copied from another grid's archive (``shared_from``), in that run's folder on this machine. A teacher that did
not finish, or whose weights are in neither, leaves its students not run (failed, with the reason), the rest of the
grid unharmed; unless the step's data is complete already (:func:`distilled_by`: the data carried to another
machine), which its students train on without the teacher's weights.

Archived: a finished distillation is kept in the grid's archive (``NAME-SCALE/distilled/<key>``: the targets' ids and
the provenance, :mod:`adlnmt.distill.archived`), and a machine without the step's data (a fresh clone, a lent GPU)
makes it from there before anything else: its students train on the targets the archived students trained on, and
no teacher is trained again.

SLURM: the same order as job dependencies. The first runs are one job array; the distillation is one job after the
teacher's (``--dependency=afterok:<teacher job>``, none when the teacher is finished), its id recorded in
``data/<key>.slurm.json`` so that it is not submitted twice while queued or running; the students are a job array
after it (``afterok``, and ``--kill-on-invalid-dep=yes``: a failed distillation cancels them instead of leaving them
queued forever).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from adlnmt.distill.archived import archive, archived_record, restore
from adlnmt.distill.kd import SEARCH_KEYS, distilled_record
from adlnmt.errors import UserError
from adlnmt.experiment import slurm
from adlnmt.experiment.distill_job import DistillJob
from adlnmt.experiment.distill_step import DistillStep
from adlnmt.experiment.grid import Grid
from adlnmt.experiment.lock import die_with_parent
from adlnmt.experiment.reproduce import processor_here
from adlnmt.experiment.runner import STOPPED, Outcome, Run, execute, last_lines, running_order, write_json
from adlnmt.flags import flag_of
from adlnmt.inference.options import SearchOptions
from adlnmt.jsontext import read_object
from adlnmt.store import ModelDir
from adlnmt.train.signals import StopSignals

DISTILLED = "distilled"  # NAME-SCALE/distilled/<key>: a grid archive's distillations
SEARCH_FIELDS = {f.name: f for f in fields(SearchOptions) if f.name in SEARCH_KEYS}
STOPPED_BY_SIGNAL = "stopped by a signal"  # distil_locally's answer when a stop signal ended the distillation


def split(pending: list[Run]) -> tuple[list[Run], dict[DistillStep, list[Run]]]:
    """(the runs that need no distilled data, the students of each step)."""
    first = [run for run in pending if run.variant.data.distill is None]
    taught: dict[DistillStep, list[Run]] = {}
    for run in pending:
        if (step := run.variant.data.distill) is not None:
            taught.setdefault(step, []).append(run)
    return first, taught


def teacher_of(step: DistillStep, runs: list[Run]) -> Run:
    return next(run for run in runs if run.variant.name == step.teacher and run.seed == step.seed)


def with_teachers(first: list[Run], taught: dict[DistillStep, list[Run]], runs: list[Run],
                  write: Callable[[Run], None]) -> list[Run]:  # fmt: skip
    """``first`` and every unfinished teacher of ``taught`` (its spec written by ``write``): students wait for it."""
    added: list[Run] = []
    for teacher in (teacher_of(step, runs) for step in taught):
        if teacher not in first and teacher not in added and teacher.result() is None and not teacher.other_settings():
            added.append(teacher)
    for run in added:
        write(run)
    return first + added


def command(step: DistillStep, teacher: Path, source: Path, target: Path, device: str, threads: int) -> list[str]:
    """The ``adlnmt distill`` command line of ``step``: the ``teacher`` model directory translates ``source``."""
    options = step.options()
    line = [sys.executable, "-m", "adlnmt", "distill", "--data", str(source), "--model", str(teacher),
            "--checkpoint", step.checkpoint, "--out", str(target), "--chunk-size", str(step.chunk_size),
            "--device", device, "--threads", str(threads)]  # fmt: skip
    for name, field in SEARCH_FIELDS.items():
        line += [flag_of(field), str(getattr(options, name))]
    return line


def teachers_added(pending: list[Run], runs: list[Run]) -> list[Run]:
    """The unfinished teachers the pending runs' students need that are not pending themselves: the command trains
    them first (:func:`with_teachers`), selected or not."""
    first, taught = split(pending)
    return [run for run in with_teachers(first, taught, runs, lambda _: None) if run not in first]


def log_of(step: DistillStep, data_dirs: dict[str, Path]) -> Path:
    return data_dirs[step.key].parent / f"{step.key}.log"


def step_differences(record: dict[str, Any], step: DistillStep) -> list[str]:
    """What keeps a distillation's provenance ``record`` from being the step's (one teacher's ``step.checkpoint``
    searched as the step says, in the step's chunks): the ``distill:`` keys that differ."""
    members = record.get("teacher", {}).get("members", [])
    search, ours = record.get("search") or {}, step.identity()["search"]
    differences = [] if len(members) == 1 and members[0].get("checkpoint") == step.checkpoint else ["checkpoint"]
    differences += sorted(key for key in {*search, *ours} if search.get(key) != ours.get(key))
    return differences + ([] if record.get("chunk_size") == step.chunk_size else ["chunk_size"])


def is_step_of(record: dict[str, Any] | None, step: DistillStep) -> bool:
    """Whether a distillation's provenance ``record`` is the step's (:func:`step_differences`)."""
    return record is not None and not step_differences(record, step)


def other_distillation(step: DistillStep, data_dirs: dict[str, Path]) -> str | None:
    """Why the step's data directory cannot be made: it holds a complete distillation of other ``distill:``
    settings, which students may have trained on (None when it holds none, or the step's)."""
    target = data_dirs[step.key]
    record = distilled_record(target)
    if record is None or not (differences := step_differences(record, step)):
        return None
    return (f"{target} holds a distillation made with other distill: settings ({', '.join(differences)}) than the "
            "grid's now; put them back, or delete that folder (and the grid archive's distilled/"
            f"{step.key}) to distil again with these")  # fmt: skip


def distilled_by(step: DistillStep, teacher: Run, data_dirs: dict[str, Path]) -> bool:
    """Whether the finished ``teacher``'s step is done: its data directory holds the step's distillation, complete.
    Its students then need no teacher weights on this machine (a grid's data carried to another, e.g. a lent GPU, one
    restored from the archive, or one distilled by an earlier version)."""
    return teacher.result() is not None and is_step_of(distilled_record(data_dirs[step.key]), step)


def archived_in(step: DistillStep, teacher: Run) -> Path:
    """The grid archive's folder of the step's distillation (:mod:`adlnmt.distill.archived`), beside its runs."""
    return teacher.archive.parents[2] / DISTILLED / step.key


def restore_archived(step: DistillStep, teacher: Run, data_dirs: dict[str, Path],
                     report: Callable[[str], None]) -> None:  # fmt: skip
    """Make the step's data directory from the archive when it has none and the archive holds the step's
    distillation of the finished teacher: its students then train on the very targets the archived ones did."""
    target, folder = data_dirs[step.key], archived_in(step, teacher)
    if teacher.result() is None or not is_step_of(archived_record(folder), step):
        return
    if target.exists() and any(target.iterdir()):  # complete, or a distillation under way: left as it is
        return
    restore(data_dirs[teacher.variant.data.key], folder, target)
    report(f"done   distillation {step.key} restored from {folder} (its teacher's weights are not needed)")


def archive_distilled(step: DistillStep, teacher: Run, data_dirs: dict[str, Path],
                      report: Callable[[str], None]) -> None:  # fmt: skip
    """Keep the step's complete distillation in the grid archive, unless the archive holds that one already."""
    if not distilled_by(step, teacher, data_dirs):
        return
    record, folder = distilled_record(data_dirs[step.key]), archived_in(step, teacher)
    archived = archived_record(folder)
    if archived is None or archived.get("train_tgt_sha256") != record.get("train_tgt_sha256"):
        archive(data_dirs[step.key], folder)
        report(f"       distillation {step.key} archived in {folder} (its targets' ids and provenance, no source)")


def has_weights(model_dir: Path, checkpoint: str) -> bool:
    try:
        return ModelDir(model_dir).resolve(checkpoint).is_file()
    except UserError:  # "last" of a directory without checkpoints
        return False


def retaught(step: DistillStep, teacher: Run, runs: list[Run]) -> str | None:
    """Why the finished ``teacher`` must not make the step's distillation again, None when it may: it was trained
    again (``--rerun``) and either did not reproduce the result it replaced or translates its test sets differently
    now (the search changed), while students of the step finished before students recorded their translations
    (2026-11-29), so nothing would tell the first distillation's students from the new one's in one row. Students
    that recorded theirs are checked by the worker instead."""
    rerun = result.rerun if (result := teacher.result()) is not None else None
    if rerun is None or (rerun.reproduced and rerun.same_hypotheses):
        return None
    unrecorded = [run for run in runs if run.variant.data.distill == step
                  and (finished := run.result()) is not None and finished.provenance.distillation is None]  # fmt: skip
    if not unrecorded:
        return None
    variants = ",".join(dict.fromkeys(run.variant.name for run in unrecorded))
    seeds = ",".join(map(str, sorted({run.seed for run in unrecorded})))
    if not rerun.reproduced:
        what = "did not reproduce the result it replaced"
        other = ("train the teacher again where it reproduces (the processor it was evaluated on: "
                 f"{rerun.replaced_machine.processor})")  # fmt: skip
    else:
        what = "reproduced its training but translates differently now"
        other = ("distil it with code that translates as before (its replaced result: commit "
                 f"{(rerun.replaced_code.git_commit or '?')[:7]})")  # fmt: skip
    return (f"its teacher {teacher.label} was trained again and {what} ({rerun.comparison}), and "
            f"{len(unrecorded)} student run(s) finished on the first distillation, which they did not record "
            f"({', '.join(r.label for r in unrecorded)}): a row would mix students of two distillations. Train those "
            f"again on this teacher (--rerun --variants '{variants}' --seeds {seeds}), or {other}")  # fmt: skip


def teacher_model(step: DistillStep, teacher: Run, runs: list[Run]) -> Path | str:
    """The model directory that holds the finished teacher's weights, else why there is none or why they must not
    teach (:func:`retaught`): its own, or, for a run copied from another grid's archive (``shared_from``), that run's
    on this machine (a grid's folder keeps its weights beside its archive)."""
    if teacher.result() is None:
        return f"its teacher {teacher.label} did not finish"
    if (reason := retaught(step, teacher, runs)) is not None:
        return reason
    candidates = [teacher.model_dir]
    result = teacher.result()
    if result is not None and result.shared_from:
        candidates.append(teacher.archive.parents[3] / result.shared_from / "model")  # results/../NAME/runs/...
    for model_dir in candidates:
        if has_weights(model_dir, step.checkpoint):
            return model_dir
    where = " or ".join(map(str, candidates))
    caveat = ""
    if result is not None and (now := processor_here(result, "auto")) is not None:
        caveat = (f" (it was evaluated on {result.provenance.machine.processor}, this machine is {now}: trained here "
                  "it will likely not reproduce, so its finished students may need training again)")  # fmt: skip
    return (f"the {step.checkpoint} weights of its teacher {teacher.label} are not in {where} (a run archived or "
            f"copied without them): train it here with --rerun --variants '{teacher.variant.name}' --seeds "
            f"{teacher.seed}{caveat}")  # fmt: skip


def step_state(step: DistillStep, teacher: Run, data_dirs: dict[str, Path], runs: list[Run]) -> str:
    """What running the grid will do for the step's data, as ``--dry-run`` says it."""
    if distilled_by(step, teacher, data_dirs):
        return f"complete in {data_dirs[step.key]}"
    if teacher.result() is None:
        return f"distilled once its teacher {teacher.label} has finished"
    folder = archived_in(step, teacher)
    if is_step_of(archived_record(folder), step):
        return f"restored from {folder} (no teacher needed)"
    model = teacher_model(step, teacher, runs)
    if isinstance(model, Path) and (other := other_distillation(step, data_dirs)) is not None:
        return f"cannot be made: {other}"
    return f"distilled by {model}" if isinstance(model, Path) else f"cannot be made: {model}"


def distil_locally(step: DistillStep, teacher: Run, runs: list[Run], data_dirs: dict[str, Path], device: str,
                   threads: int, report: Callable[[str], None]) -> str | None:  # fmt: skip
    """Run the step in a subprocess; None when its data is complete, else why not (:data:`STOPPED_BY_SIGNAL`: a
    stop signal ended it, to resume)."""
    if distilled_by(step, teacher, data_dirs):
        report(f"done   distillation {step.key} (complete; its teacher's weights are not needed)")
        return None
    model = teacher_model(step, teacher, runs)
    if isinstance(model, str):
        return model
    if (other := other_distillation(step, data_dirs)) is not None:
        return other
    log = log_of(step, data_dirs)
    log.parent.mkdir(parents=True, exist_ok=True)
    line = command(step, model, data_dirs[teacher.variant.data.key], data_dirs[step.key], device, threads)
    report(f"distil {step.key}: {teacher.label} translates the training source (log: {log})")
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    started: list[subprocess.Popen] = []

    def forward(number: int) -> None:  # a stop signal reaches the distillation too: it resumes from its last chunk
        for process in started:
            process.send_signal(number)

    with open(log, "a", encoding="utf-8") as handle, StopSignals(announce=False, forward=forward) as stop:
        handle.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(line)}\n")
        handle.flush()
        if stop.received is None:  # it never outlives the grid's command either
            started.append(subprocess.Popen(line, stdout=handle, stderr=subprocess.STDOUT, env=env,
                                            preexec_fn=die_with_parent))  # fmt: skip
            if stop.received is not None:  # arrived while it started
                started[0].send_signal(stop.received)
            returncode = started[0].wait()
    if stop.received is not None:
        return STOPPED_BY_SIGNAL
    if returncode != 0:
        return f"its distillation {step.key} failed (exit status {returncode}); see {log}:\n{last_lines(log)}"
    report(f"done   distillation {step.key}")
    return None


def run_local(grid: Grid, pending: list[Run], runs: list[Run], data_dirs: dict[str, Path],
              write: Callable[[Run], None], jobs: int, threads: int, device: str, decode_alone: bool,
              report: Callable[[str], None] = print) -> list[Outcome]:  # fmt: skip
    """The pending runs in dependency order: the others (and unfinished teachers), each step, its students."""
    first, taught = split(pending)
    first = with_teachers(first, taught, runs, write)
    outcomes = execute(running_order(first), jobs, threads, report, decode_alone) if first else []
    if any(outcome.stopped for outcome in outcomes):  # a stop signal: no distillation, no student starts
        return outcomes + [Outcome(run, STOPPED["SIGTERM"], 0.0, None) for runs in taught.values() for run in runs]
    ready = []
    for step, students in taught.items():
        teacher = teacher_of(step, runs)
        restore_archived(step, teacher, data_dirs, report)
        reason = distil_locally(step, teacher, runs, data_dirs, device, threads * jobs, report)
        if reason == STOPPED_BY_SIGNAL:  # as for training: no further step or student starts
            report(f"stopped distillation {step.key}: running the experiment again resumes it")
            return outcomes + [Outcome(run, STOPPED["SIGTERM"], 0.0, None) for runs in taught.values() for run in runs]
        if reason is None:
            archive_distilled(step, teacher, data_dirs, report)
            ready += students
            continue
        report(f"FAILED {', '.join(run.label for run in students)}: not run, {reason}")
        outcomes += [Outcome(run, 1, 0.0, None) for run in students]
    return outcomes + (execute(running_order(ready), jobs, threads, report, decode_alone) if ready else [])


def after(options: slurm.SlurmOptions, jobs: list[str]) -> slurm.SlurmOptions:
    """``options`` for jobs that start once ``jobs`` ended well (and are cancelled when one failed)."""
    if not jobs:
        return options
    dependency = {"dependency": "afterok:" + ":".join(jobs), "kill-on-invalid-dep": "yes"}
    return replace(options, sbatch={**options.sbatch, **dependency})


def submit_step(grid: Grid, step: DistillStep, teacher: Run, runs: list[Run], out: Path, data_dirs: dict[str, Path],
                options: slurm.SlurmOptions, threads: int, device: str) -> str | None:  # fmt: skip
    """The job id of the step's distillation: one queued or running already, or one submitted after the teacher's;
    None when its data is complete."""
    if distilled_by(step, teacher, data_dirs):
        print(f"distillation {step.key}: complete; not submitted")
        return None
    record_path = data_dirs[step.key].parent / f"{step.key}.{slurm.RECORD}"
    record = read_object(record_path)
    state = slurm.job_states([record]).get(record["job_id"], "") if record else ""
    if record and (state in slurm.WAITING or state in slurm.RUNNING):
        print(f"distillation {step.key}: {'queued' if state in slurm.WAITING else 'running'} as job "
              f"{record['job_id']}; not submitted again")  # fmt: skip
        return str(record["job_id"])
    finished = teacher.result() is not None
    teacher_record = read_object(teacher.dir / slurm.RECORD) if not finished else None
    model = teacher_model(step, teacher, runs) if finished else teacher.model_dir
    assert isinstance(model, Path)
    executor = slurm._executor(out / "slurm", after(options, [teacher_record["job_id"]] if teacher_record else []),
                               f"{grid.name}-distill")  # fmt: skip
    log = log_of(step, data_dirs)
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        line = command(step, model, data_dirs[teacher.variant.data.key], data_dirs[step.key], device, threads)
        job = executor.submit(DistillJob(threads, str(log)), line)
    except RuntimeError as err:
        raise UserError(f"sbatch refused the distillation job: {str(err).strip()}") from None
    write_json(record_path, {"job_id": job.job_id, "submitted": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                             "folder": str(out / "slurm")})  # fmt: skip
    print(
        f"submitted distillation {step.key} as job {job.job_id}"
        + (f", after the teacher's job {teacher_record['job_id']}" if teacher_record else ""),
        flush=True,
    )
    return str(job.job_id)


def submit(grid: Grid, pending: list[Run], runs: list[Run], out: Path, data_dirs: dict[str, Path],
           write: Callable[[Run], None], options: slurm.SlurmOptions, threads: int, device: str
           ) -> list[Run]:  # fmt: skip
    """The pending runs as SLURM jobs in dependency order; the runs now on SLURM."""
    first, taught = split(pending)
    for step, students in taught.items():  # before anything is submitted
        teacher = teacher_of(step, runs)
        restore_archived(step, teacher, data_dirs, print)
        archive_distilled(step, teacher, data_dirs, print)  # one a job distilled since the last submission
        if (teacher.result() is not None and not distilled_by(step, teacher, data_dirs)
                and isinstance(reason := teacher_model(step, teacher, runs), str)):  # fmt: skip
            raise UserError(f"{', '.join(run.label for run in students)}: {reason}")
    first = with_teachers(first, taught, runs, write)
    on_slurm = slurm.submit(grid, first, out, options, threads) if first else []
    for step, students in taught.items():
        teacher = teacher_of(step, runs)
        job = submit_step(grid, step, teacher, runs, out, data_dirs, options, threads, device)
        on_slurm += slurm.submit(grid, students, out, after(options, [job] if job else []), threads)
    return on_slurm


def run_in_order(grid: Grid, pending: list[Run], runs: list[Run], out: Path, data_dirs: dict[str, Path],
                 write: Callable[[Run], None], args: argparse.Namespace, options: slurm.SlurmOptions | None,
                 threads: int) -> list[Outcome]:  # fmt: skip
    """``adlnmt experiment``'s runs of a grid with a distillation step, on its executor (``options``: SLURM's, None
    for local worker processes); ``args``: its flags (device, jobs, wait, decode_beside_training)."""
    from adlnmt.train.device import pick_device

    if options is None:  # device auto: this machine's GPU if any
        device = str(pick_device(args.device, 0))
        return run_local(grid, pending, runs, data_dirs, write, args.jobs, threads, device,
                         not args.decode_beside_training)  # fmt: skip
    device = args.device if args.device != "auto" else "cuda" if options.gpus else "cpu"  # a job's node: its GPUs
    on_slurm = submit(grid, pending, runs, out, data_dirs, write, options, threads, device)
    return slurm.wait(on_slurm) if args.wait else []
