"""A grid's runs as SLURM jobs (``adlnmt experiment GRID --executor slurm``), submitted through submitit.

Every pending run becomes one task of a job array (one array per invocation). The job runs the same worker as a local
run (``python -m adlnmt.experiment.worker RUN_DIR``, its output appended to the run's ``log.txt``), so it writes the
same ``result.json``; the job's id is recorded beside the run (``slurm.json``), so a second invocation does not submit
a run whose job is still queued or running, and ``--status`` shows each run's state from ``squeue``/``sacct``.

Preemption and time limits: SLURM sends the job its warning signal (``--signal=USR2@S``, ``signal_delay`` seconds
before the end); submitit calls :meth:`RunJob.checkpoint`, which passes it on to the worker as SIGTERM, the trainer's
save-and-exit path (the checkpoint of the update it is at), waits for the worker to exit, and submitit requeues the
job, which resumes from that checkpoint. A job cancelled with ``scancel`` gets SIGTERM directly: the worker saves
the same way, and the next submission of the run resumes from there.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from adlnmt.errors import UserError
from adlnmt.experiment.grid import TOP_KEYS, Grid
from adlnmt.experiment.runner import Outcome, Run, last_lines, summary, write_json
from adlnmt.experiment.schema import Reader, read_yaml
from adlnmt.experiment.slurm_job import RunJob
from adlnmt.jsontext import read_object
from adlnmt.store import ModelDir

RECORD = "slurm.json"  # beside each submitted run: its job id
POLL_SECONDS = 2.0  # how often --wait asks SLURM about the jobs
# --wait: polls in a row in which neither squeue nor sacct reports a job before it counts as ended (a job leaves
# squeue before slurmdbd has recorded it on a busy machine, and a query may time out)
UNKNOWN_POLLS = 30
WAITING = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RESV_DEL_HOLD")
RUNNING = ("RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED")


@dataclass(frozen=True)
class SlurmOptions:
    """What every job of a submission asks SLURM for (the grid file's ``slurm:`` section, overridden by flags)."""

    partition: str | None = None
    time: int = 120  # minutes
    gpus: int = 0  # per run
    cpus: int = 1  # per run: the run's torch threads unless --threads says otherwise
    mem: str | None = None  # e.g. 16G
    account: str | None = None
    qos: str | None = None
    sbatch: dict[str, str | bool] = field(default_factory=dict)  # further #SBATCH options, e.g. {constraint: a100}
    signal_delay: int = 120  # seconds before the time limit at which the job saves and is requeued
    setup: tuple[str, ...] = ()  # shell lines run before the job, e.g. module load cuda


def parse_time(text: str) -> int:
    """A SLURM time limit (``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``) in whole minutes (rounded up)."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if match is None:
        raise ValueError(text)
    days, first, second, third = (int(part) if part else None for part in match.groups())
    if days is not None:  # D-H[:M[:S]]
        seconds = ((days * 24 + first) * 60 + (second or 0)) * 60 + (third or 0)
    elif third is not None:  # H:M:S
        seconds = (first * 60 + second) * 60 + third
    else:  # M[:S]
        seconds = first * 60 + (second or 0)
    if seconds < 1:
        raise ValueError(text)
    return -(-seconds // 60)


def _sbatch_pairs(pairs: Iterable[str]) -> dict[str, str | bool]:
    options = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not key.strip():
            raise UserError(f"--sbatch expects OPTION=VALUE or OPTION (a long sbatch option without --), got {pair!r}")
        name = key.strip().lstrip("-")
        if name in options:  # the last would win, silently
            raise UserError(f"--sbatch {pair!r}: option {name} given more than once; give each sbatch option once")
        options[name] = value.strip() if equals else True
    return options


def slurm_options(grid: Grid, args: argparse.Namespace) -> SlurmOptions:
    """The grid file's ``slurm:`` section, then the flags given on the command line."""
    reader = Reader(grid.path)
    section = reader.mapping(
        read_yaml(grid.path, TOP_KEYS).get("slurm") or {}, "slurm", tuple(f.name for f in fields(SlurmOptions))
    )
    values: dict[str, Any] = {}
    for key, value in section.items():
        where = f"slurm.{key}"
        if key == "time":
            try:
                values[key] = parse_time(str(value))
            except ValueError:
                reader.fail(where, f"expected minutes or a SLURM time such as 2:00:00 or 1-12:00:00, got {value!r}")
        elif key in ("gpus", "cpus", "signal_delay"):
            values[key] = reader.typed(value, int, where)
        elif key == "sbatch":
            values[key] = {str(k): v for k, v in reader.mapping(value, where).items()}
        elif key == "setup":
            if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
                reader.fail(where, f"expected a list of shell lines, got {value!r}")
            values[key] = tuple(value)
        else:
            values[key] = reader.name(str(value), where)
    flags = {key: getattr(args, f"slurm_{key}") for key in ("partition", "gpus", "cpus", "mem", "account", "qos")}
    values.update({key: value for key, value in flags.items() if value is not None})
    if args.slurm_time is not None:
        try:
            values["time"] = parse_time(args.slurm_time)
        except ValueError:
            raise UserError(
                f"--time expects minutes or a SLURM time such as 2:00:00, got {args.slurm_time!r}"
            ) from None
    values["sbatch"] = {**values.get("sbatch", {}), **_sbatch_pairs(args.sbatch or [])}
    options = SlurmOptions(**values)
    if options.cpus < 1 or options.gpus < 0:
        raise UserError(
            f"slurm: cpus must be at least 1 and gpus at least 0 (got cpus {options.cpus}, gpus {options.gpus})"
        )
    return options


# --- submitting -----------------------------------------------------------------------------------------------


def _executor(folder: Path, options: SlurmOptions, name: str) -> Any:
    try:
        import submitit
    except ImportError:
        raise UserError("--executor slurm needs submitit: pip install 'adlnmt[slurm]'") from None
    try:
        executor = submitit.SlurmExecutor(folder=folder)
    except RuntimeError as err:  # no srun
        raise UserError(f"--executor slurm: {err} (run it on a SLURM login node)") from None
    parameters: dict[str, Any] = {
        "job_name": name,
        "time": options.time,
        "cpus_per_task": options.cpus,
        "signal_delay_s": options.signal_delay,
        "additional_parameters": dict(options.sbatch),
        "stderr_to_stdout": True,
    }
    if options.gpus:
        parameters["gpus_per_node"] = options.gpus
    optional = {"partition": options.partition, "mem": options.mem, "account": options.account, "qos": options.qos}
    parameters.update({key: value for key, value in optional.items() if value is not None})
    if options.setup:
        parameters["setup"] = list(options.setup)
    executor.update_parameters(**parameters)
    return executor


def job_log(record: dict[str, Any]) -> Path:
    """Where SLURM wrote the job's own output (submitit's log: the worker's output is in the run's log.txt)."""
    return Path(record["folder"]) / f"{record['job_id']}_0_log.out"


def submit(grid: Grid, runs: list[Run], out: Path, options: SlurmOptions, threads: int) -> list[Run]:
    """Submit the runs whose job is not queued or running already, as one job array; the runs now on SLURM."""
    states = job_states([record for run in runs if (record := read_object(run.dir / RECORD))])
    on_slurm = []
    for run in runs:
        record = read_object(run.dir / RECORD)
        state = states.get(record["job_id"], "") if record else ""
        if state in WAITING or state in RUNNING:
            print(f"{run.label}: {'queued' if state in WAITING else 'running'} as job {record['job_id']}; "
                  "not submitted again")  # fmt: skip
            on_slurm.append(run)
    todo = [run for run in runs if run not in on_slurm]
    if todo:
        folder = out / "slurm"
        executor = _executor(folder, options, grid.name)
        try:
            jobs = executor.map_array(RunJob(threads), [str(run.dir) for run in todo])
        except RuntimeError as err:  # sbatch refused them (submitit's FailedJobError carries its message)
            raise UserError(f"sbatch refused the jobs: {str(err).strip()}") from None
        submitted = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for run, job in zip(todo, jobs, strict=True):
            write_json(run.dir / RECORD, {"job_id": job.job_id, "submitted": submitted, "folder": str(folder)})
        array = jobs[0].job_id.split("_")[0]
        print(f"submitted {len(todo)} run(s) to SLURM as job {array} ({options.cpus} CPU(s), {options.gpus} GPU(s), "
              f"{options.time} min each); adlnmt experiment {grid.path} --status shows them", flush=True)  # fmt: skip
    return on_slurm + todo


# --- states ---------------------------------------------------------------------------------------------------


def _expand(job_id: str) -> list[str]:
    """``12_[0-2,5%4]`` → ``12_0 12_1 12_2 12_5`` (array tasks SLURM lists together); other ids as they are."""
    match = re.fullmatch(r"(\d+)_\[([^\]%]*)(?:%\d+)?\]", job_id)
    if match is None:
        return [job_id]
    tasks = []
    for part in match.group(2).split(","):
        low, _, high = part.partition("-")
        tasks += [f"{match.group(1)}_{i}" for i in range(int(low), int(high or low) + 1)]
    return tasks


def _query(command: list[str]) -> list[list[str]]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.split("|") for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def job_states(records: Iterable[dict[str, Any]]) -> dict[str, str]:
    """The SLURM state of each recorded job (squeue for those in the queue, else sacct), e.g. PENDING, RUNNING,
    COMPLETED, FAILED, CANCELLED; jobs SLURM does not know are left out."""
    wanted = {record["job_id"] for record in records}
    if not wanted:
        return {}
    states: dict[str, str] = {}
    for job_id, state in _query(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(sorted(wanted))]):
        states.update({task: state for task in _expand(job_id) if task in wanted})
    if rest := wanted - states.keys():
        for job_id, state in _query(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(sorted(rest))]):
            states.update({task: state.split()[0] for task in _expand(job_id) if task in rest})
    return states


def _last_attempt(log: Path, count: int = 5) -> str:
    """The last lines the latest attempt wrote to a run's log (after its ``===`` header)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.split("\n=== ")[-1].splitlines()[1:] if line.strip()]
    return "\n".join(lines[-count:])


def describe(run: Run, record: dict[str, Any] | None, state: str) -> str:
    """One run's state: finished, pending, queued (job id), running, cancelled, or failed with its log's last lines."""
    if (folder := run.finished_in()) is not None:
        return "finished" + (" (archived)" if folder != run.dir else "")
    states = ModelDir(run.model_dir).states()
    at = f"update {states[-1][0]}" if states else ""
    if record is None or not state:
        unknown = f" (job {record['job_id']} unknown to SLURM)" if record else ""
        return "pending" + unknown + (f", resumes at {at}" if at else "")
    job = f"job {record['job_id']}"
    if state in WAITING:
        return f"queued ({job}" + (f", resumes at {at})" if at else ")")
    if state in RUNNING:
        return f"running ({job}" + (f", saved {at})" if at else ")")
    if state == "CANCELLED":
        return f"cancelled ({job}" + (f"; saved {at}: submitting again resumes there)" if at else ")")
    if state == "COMPLETED":  # a finished job whose result no longer matches the grid's settings
        return f"pending ({job} finished under other settings)"
    tail = _last_attempt(run.log) or last_lines(job_log(record), 5)
    lines = [f"failed ({job}: {state}); log {run.log} (job output: {job_log(record)})"]
    return "\n      ".join(lines + [line for line in tail.splitlines()])


def print_status(runs: list[Run]) -> None:
    """Every run's state, one line each (a failed run with its log's last lines)."""
    records = {run.dir: read_object(run.dir / RECORD) for run in runs}
    states = job_states(record for record in records.values() if record)
    for run in runs:
        record = records[run.dir]
        print(f"  {run.label}: {describe(run, record, states.get(record['job_id'], '') if record else '')}")


def wait(runs: list[Run], report: Callable[[str], None] = print) -> list[Outcome]:
    """Block until no run's job is queued or running; each run's outcome (its result archived when it finished)."""
    started = time.monotonic()
    left = {run.dir: run for run in runs}
    unknown = dict.fromkeys(left, 0)  # polls in a row without a state
    outcomes = []
    while left:
        records = {path: read_object(path / RECORD) for path in left}
        states = job_states(record for record in records.values() if record)
        for path, run in list(left.items()):
            state = states.get(records[path]["job_id"], "") if records[path] else ""
            unknown[path] = unknown[path] + 1 if records[path] and not state else 0
            if state in WAITING or state in RUNNING or 0 < unknown[path] < UNKNOWN_POLLS:
                continue
            del left[path]
            run.archive_result()
            result = run.result()
            outcomes.append(Outcome(run, 0 if result else 1, time.monotonic() - started, result))
            where = f"[{len(outcomes)}/{len(runs)}] {run.label}"
            if result:
                report(f"done   {where}: {summary(result)}")
                if (line := run.compare_rerun()) is not None:
                    report(f"       {run.label} trained again: {line}")
            else:
                verdict = "CANCELLED" if state == "CANCELLED" else "FAILED"
                report(f"{verdict} {where}: {describe(run, records[path], state)}")
        if left:
            time.sleep(POLL_SECONDS)
    return outcomes
