"""Running a grid: prepare its data once, lay out one directory per (variant, seed), and run each pending run
as its own subprocess (``python -m adlnmt.experiment.worker RUN_DIR``), several at once with ``jobs``.

Layout of the output directory (the grid's folder: :mod:`adlnmt.experiment.folders`), every path written into it
absolute::

    data/<key>/                       prepared data (``default``, or one per distinct set of prepare options)
    runs/<variant>/seed-<n>/run.json  what the run does (written by the runner before every start)
                            train.yaml     the training options: ``adlnmt train --config train.yaml`` alone redoes it
                            model/         the model directory (resumable)
                            trained.json   training is complete (so a run stopped by patience is not trained on)
                            hyp/<test>.txt hypotheses
                            result.json    the run is finished: scores, speed, curves (written last, atomically)
                            log.txt        everything the run printed, every attempt appended
                            paused.json    how long other runs' timed decoding kept it stopped (adlnmt.experiment.quiet)

A run is finished when its ``result.json`` carries the fingerprint of the current settings; re-running the
experiment skips it. Otherwise the worker resumes: the trainer continues from its last checkpoint (or does
nothing when ``trained.json`` matches) and translation and scoring are redone. Runs stopped part-way start
before those not begun (``running_order``).

The finished runs (``result.json`` and the hypotheses, no weights) are the archive, meant to be committed: in the
run directories of the grid's folder (its .gitignore keeps the rest out of git), or copied into the results
directory where it is another (``--results``, or the two folders of earlier versions). The fingerprints do not
depend on where the repository or the output directory lies, so a fresh clone treats an archived run whose
fingerprint matches as finished and rebuilds the tables from the archive. A run that another experiment archived
beside this one (``results/../<other>/runs``) with the same fingerprint is the same run (the same model, training,
data, seed and evaluation, e.g. the baseline that ADL Tables 2-5 share): it is copied into this archive, its
``result.json`` naming where it came from (``shared_from``), instead of being trained again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from adlnmt.data.corpus import count_lines
from adlnmt.data.options import PREPARE_DEFAULTS
from adlnmt.errors import UserError
from adlnmt.experiment import quiet
from adlnmt.experiment.folders import absolute, default_results
from adlnmt.experiment.grid import DataSpec, Grid, Variant
from adlnmt.experiment.lock import die_with_parent
from adlnmt.experiment.quiet import DecodeAlone
from adlnmt.experiment.reproduce import RERUN_MARK, report_replaced, rerun_folder
from adlnmt.experiment.results import RESULT_FILE, RunResult, read_result
from adlnmt.jsontext import read_object
from adlnmt.store import ModelDir
from adlnmt.store.atomic import atomic_write, file_sha256
from adlnmt.yamltext import read_yaml_file

# Exit statuses of a worker stopped by a signal after checkpointing its training (128 + the signal's number), and
# of one the signal ended outside training (translation and scoring are redone by the next attempt).
STOPPED = {"SIGTERM": 143, "SIGINT": 130}
ENDED_BY = {-signal.SIGTERM: "SIGTERM", -signal.SIGINT: "SIGINT"}
# Training options that may differ between attempts of one run without changing its result.
NOT_FINGERPRINTED = ("device", "threads", "progress", "log_interval", "tensorboard")  # what a run shows
# train.yaml's options that the runner sets for each run (paths, seed) or that do not change the model
RUN_OPTIONS = {"data", "model", "seed", *NOT_FINGERPRINTED}


def write_json(path: Path, value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def fingerprint(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Run:
    variant: Variant
    seed: int
    dir: Path  # where it trains (model, logs): the output directory
    archive: Path  # where its finished result is kept: the results directory
    train_fingerprint: str  # what changes the trained model
    fingerprint: str  # ... and what changes its evaluation
    earlier: tuple[tuple[str, int], ...] = ()  # (fingerprint, cap) under the scale's earlier update caps

    @property
    def label(self) -> str:
        return f"{self.variant.name} seed {self.seed}"

    @property
    def model_dir(self) -> Path:
        return self.dir / "model"

    @property
    def log(self) -> Path:
        return self.dir / "log.txt"

    @property
    def resumable(self) -> bool:
        """Whether an earlier attempt stopped with a training state to resume from."""
        return bool(ModelDir(self.model_dir).states())

    def other_settings(self) -> str | None:
        """The training settings that keep the run's folder from resuming ("lr, warmup"; its inputs when no option
        differs): it holds a model trained with other settings than the grid gives the run now (``run.json``'s train
        fingerprint; one under an earlier update cap resumes). None when it can resume, or holds no model."""
        stored = read_object(self.dir / "run.json")
        if stored is None or not ModelDir(self.model_dir).exists():
            return None
        if stored.get("train_fingerprint") in (None, self.train_fingerprint):
            return None
        if stored.get("fingerprint") in {old for old, _ in self.earlier}:
            return None
        try:
            before = read_yaml_file(self.dir / "train.yaml") or {}
        except (UserError, OSError):
            before = {}
        now = self.variant.train
        changed = ", ".join(sorted(k for k in {*now, *before} - RUN_OPTIONS if now.get(k) != before.get(k)))
        return changed or "its data or the model it starts from"

    def matches(self, result: RunResult | None) -> bool:
        """Whether ``result`` is this run's: its fingerprint is the current one, or one under an earlier, lower
        update cap that the run never reached (early stopping ended it, so a higher cap changes nothing)."""
        if result is None:
            return False
        key = result.fingerprint
        return key == self.fingerprint or any(key == old and result.updates < cap for old, cap in self.earlier)

    def finished_in(self) -> Path | None:
        """The archive, else the run directory, when it holds a result of the current settings."""
        for folder in (self.archive, self.dir):
            if self.matches(read_result(folder / RESULT_FILE)):
                return folder
        return None

    def result(self) -> RunResult | None:
        """The stored result when the run finished with its current settings."""
        folder = self.finished_in()
        return read_result(folder / RESULT_FILE) if folder is not None else None

    def archive_result(self) -> None:
        """Copy a finished result and its hypotheses from the run directory into the archive (no weights)."""
        result = read_result(self.dir / RESULT_FILE)
        if result is None or not self.matches(result) or self.finished_in() == self.archive:
            return
        self._archive(self.dir, result)

    def compare_rerun(self) -> str | None:
        """Once a rerun has finished: whether it reproduced the result it replaced, recorded in its result
        (:func:`~adlnmt.experiment.reproduce.report_replaced`); None for a run not finished or not trained again."""
        folder = self.finished_in()
        return None if folder is None else report_replaced(self.dir, folder, self.matches)

    def adopt(self, folder: Path, name: str) -> None:
        """Archive the finished run in ``folder`` as this one: another experiment's run (``name``) with this run's
        fingerprint, i.e. the same model, training, data, seed and evaluation, so trained once for both. Its
        ``result.json`` says where it came from (``shared_from``)."""
        result = RunResult.load(folder / RESULT_FILE)
        self._archive(folder, replace(result, shared_from=result.shared_from or name))

    def _archive(self, source: Path, result: RunResult) -> None:
        for test in result.tests.values():
            hypotheses = (source / test.hypotheses).read_text(encoding="utf-8")
            target = self.archive / test.hypotheses
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, lambda tmp, text=hypotheses: tmp.write_text(text, encoding="utf-8"))
        result.save(self.archive / RESULT_FILE)  # last: the archived run is complete
        (self.archive / RERUN_MARK).unlink(missing_ok=True)  # a rerun trained elsewhere has finished


# --- inputs and data -------------------------------------------------------------------------------------------


def check_inputs(grid: Grid) -> None:
    """Every test set exists and its source and reference have the same number of lines, and every contrastive
    suite reads (a run scores them after it has trained)."""
    from adlnmt.analysis.contrastive import read_suite

    for test in grid.tests:
        counts = [count_lines(path) for path in (test.src, test.ref)]
        if counts[0] != counts[1]:
            raise UserError(f"{grid.path}: test set {test.name!r}: {test.src} has {counts[0]} lines but "
                            f"{test.ref} has {counts[1]}")  # fmt: skip
    for suite in grid.contrastive:
        try:
            read_suite(suite.suite)
        except UserError as err:
            raise UserError(f"{grid.path}: contrastive suite {suite.name!r}: {err}") from None


def _vocabulary_digest(folder: Path) -> str:
    """The SHA-256 of the sentencepiece model(s) of a prepared data directory or a model's ``vocab/``."""
    from adlnmt.data.data_dir import MANIFEST, SIDES

    manifest = read_object(folder / MANIFEST) or {}
    spm = manifest.get("spm") if isinstance(manifest.get("spm"), dict) else {}
    if not all(isinstance(spm.get(side), str) for side in SIDES):
        raise UserError(f"{folder / MANIFEST}: missing or damaged (no sentencepiece models named)")
    return fingerprint([file_sha256(folder / spm[side]) for side in SIDES])


def _manifest_differences(target: Path, manifest: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    stored = {**manifest.get("options", {}), **manifest.get("inputs", {}), "joint": manifest.get("joint"),
              "model_type": manifest.get("model_type")}  # fmt: skip
    # the manifest records the files prepare() read, links followed
    wanted = {
        **asdict(PREPARE_DEFAULTS),
        "vocab_from": None,
        **{k: str(v.resolve()) if isinstance(v, Path) else v for k, v in arguments.items()},
    }
    if (vocab_from := arguments.get("vocab_from")) is not None:
        del wanted["joint"]  # the model's
    differences = [key for key, value in wanted.items() if stored.get(key) != value]
    same_path = vocab_from is not None and "vocab_from" not in differences
    if same_path and _vocabulary_digest(target) != _vocabulary_digest(vocab_from):
        differences.append("vocab_from (its vocabulary changed since)")
    return differences


def prepare_data(grid: Grid, out: Path, log: Callable[[str], None] = print) -> dict[str, Path]:
    """The data directory of every DataSpec the variants use (key → path), preparing what is missing."""
    from adlnmt.data.data_dir import MANIFEST, DataDir
    from adlnmt.data.prepare import prepare

    specs: dict[str, DataSpec] = {v.data.key: v.data for v in grid.variants}
    dirs = {}
    for key, spec in specs.items():
        if spec.distill is not None:  # written by the distillation step once its teacher has trained
            dirs[key] = out / "data" / key
            continue
        if spec.prepared is not None:
            DataDir.load(spec.prepared)  # a clear error when it is not a prepared directory
            dirs[key] = spec.prepared
            continue
        target = out / "data" / key
        manifest = read_object(target / MANIFEST)
        if manifest is None:
            log(f"preparing {target} ...")
            prepare(out_dir=target, **spec.arguments())
        elif differences := _manifest_differences(target, manifest, spec.arguments()):
            raise UserError(
                f"{target} was prepared with other {', '.join(differences)} than {grid.path} asks for; "
                "the runs trained on it would not match: choose another --out, or delete that directory"
            )
        dirs[key] = target
    return dirs


# --- runs ------------------------------------------------------------------------------------------------------


def _portable(path: Path, grid: Grid) -> str:
    """A path as fingerprints see it: relative to the grid file's folder, the same in every clone. Lexical (symbolic
    links not followed): data reached through a link, e.g. ``../shared`` pointing to another disk, is the same data."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(grid.path.parent))).as_posix()


def _evaluation(grid: Grid) -> dict[str, Any]:
    """What the fingerprints cover of a run's evaluation (not the test sets and metrics added since: grid.py)."""
    return {
        "tests": [
            {"name": t.name, "src": _portable(t.src, grid), "ref": _portable(t.ref, grid)}
            for t in grid.fingerprinted_tests
        ],
        "metrics": list(grid.fingerprinted_metrics),
        "translate": grid.translate,
        "length_buckets": list(grid.length_buckets),
    }


@functools.lru_cache(maxsize=16)
def _model_digest(path: Path, stamps: tuple[tuple[int, int, int], ...]) -> str:
    """The SHA-256 of a model directory's config.json and best checkpoint (``stamps``: their inode, size and
    modification time, so that a file replaced is read again)."""
    from adlnmt.train.init_from import pretrained_digest

    return pretrained_digest(path)


def _pretrained(path: str, grid: Grid) -> dict[str, str]:
    """A pretrained model (``init_from``) as fingerprints see it: where it lies (portably) and what it holds."""
    files = (ModelDir(path).config_file, ModelDir(path).best_weights)
    try:
        stamps = tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in (file.stat() for file in files))
    except OSError as err:
        raise UserError(f"{path}: cannot read the pretrained model ({err.strerror or err})") from None
    return {"path": _portable(Path(path), grid), "sha256": _model_digest(Path(path), stamps)}


def fingerprints(grid: Grid, variant: Variant, seed: int, **override: Any) -> tuple[str, str]:
    """(training, whole-run) fingerprints: the options (``override`` replacing some; a pretrained model by its
    content too), the data it is prepared from (a model's vocabulary by its content too), the seed, the
    evaluation."""
    data = variant.data
    source = {k: _portable(v, grid) if isinstance(v, Path) else v for k, v in data.arguments().items()}
    if (vocab_from := data.arguments().get("vocab_from")) is not None:
        source["vocab_from"] = {"path": source["vocab_from"], "sha256": _vocabulary_digest(vocab_from)}
    if data.prepared is not None:
        source = {"prepared": _portable(data.prepared, grid)}
    if (step := data.distill) is not None:  # a student: the teacher's translations of that data
        teacher = fingerprints(grid, grid.variant(step.teacher), step.seed)[0]
        source = {**source, "distilled": step.identity(), "teacher": teacher}
    train = {k: v for k, v in {**variant.train, **override}.items() if k not in NOT_FINGERPRINTED}
    if train.get("init_from"):
        train["init_from"] = _pretrained(train["init_from"], grid)
    train_print = fingerprint({**train, "data": source, "seed": seed})
    return train_print, fingerprint([train_print, _evaluation(grid)])


def plan_run(grid: Grid, variant: Variant, seed: int, out: Path, results: Path) -> Run:
    where = Path("runs") / variant.slug / f"seed-{seed}"
    earlier = tuple((fingerprints(grid, variant, seed, max_updates=cap)[1], cap) for cap in grid.earlier_max_updates)
    return Run(variant, seed, out / where, results / where, *fingerprints(grid, variant, seed), earlier)


def plan_runs(grid: Grid, out: Path, results: Path | None = None) -> list[Run]:
    """Every (variant, seed) of ``grid``, training in ``out`` and archived in ``results`` (default: the grid's
    ``results/NAME-SCALE``), both made absolute."""
    out, results = absolute(out), absolute(results if results is not None else default_results(grid))
    return [plan_run(grid, variant, seed, out, results) for variant in grid.variants for seed in grid.seeds]


def running_order(runs: Iterable[Run]) -> list[Run]:
    """The order to run ``runs`` in: those an earlier attempt stopped with a training state first (they finish rows
    already begun, and in one invocation with the rest they leave no slot idle), then seed by seed in grid order,
    so an interrupted grid has every row at its first seed before any at its second."""
    return sorted(runs, key=lambda run: (not run.resumable, run.seed))


def shared_runs(grid: Grid, runs: Iterable[Run], results: Path) -> list[tuple[Run, Path, str]]:
    """The runs of ``grid`` not finished here that another experiment (a grid of another name; the same grid in
    another output directory is a rerun, not shared) archived beside ``results`` (``results/../*/runs``) with the
    same fingerprint: (run, that archived run's folder, its name relative to ``results/..``). A run being trained
    again (:func:`~adlnmt.experiment.reproduce.rerun_folder`) is not: it resumes."""
    pending = {}
    for run in (run for run in runs if run.finished_in() is None and rerun_folder(run.dir, run.archive) is None):
        pending.update({key: run for key in (run.fingerprint, *(old for old, _ in run.earlier))})
    root = results.resolve().parent
    found: dict[str, tuple[Run, Path, str]] = {}
    for path in sorted(root.glob(f"*/runs/*/seed-*/{RESULT_FILE}")) if pending else []:
        result = read_result(path)
        run = pending.get(result.fingerprint) if result else None
        if run is not None and run.matches(result) and run.fingerprint not in found and result.experiment != grid.name:
            found[run.fingerprint] = (run, path.parent, path.parent.relative_to(root).as_posix())
    return list(found.values())


def distillations(runs: Iterable[Run]) -> dict[str, dict[str, Any]]:
    """Data key → the distillation (:class:`~adlnmt.experiment.results.Distillation`, and ``run``: its label) that the
    first finished student on that data trained on: what every other student of it must train on
    (:func:`adlnmt.experiment.worker.check_distillation`). Absent: no finished student recorded one (none before
    2026-11-29)."""
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        key = run.variant.data.key
        if run.variant.data.distill is None or key in found:
            continue
        result = run.result()
        if result is not None and result.provenance.distillation is not None:
            found[key] = {**result.provenance.distillation.to_dict(), "run": run.label}
    return found


def write_spec(grid: Grid, run: Run, data_dir: Path, device: str, threads: int,
               distillation: dict[str, Any] | None = None) -> None:  # fmt: skip
    """run.json and train.yaml of ``run``, every path in them absolute (``adlnmt train --config RUN/train.yaml`` works
    from any directory); the fingerprints cover everything that changes its result. ``distillation``: for a student,
    the translations its finished siblings trained on (:func:`distillations`)."""
    train = {**run.variant.train, "data": str(absolute(data_dir)), "model": str(run.model_dir), "seed": run.seed}
    spec = {
        "experiment": grid.name,
        "scale": grid.scale,
        "variant": run.variant.name,
        "seed": run.seed,
        "threads": threads,
        "device": device,
        "train_fingerprint": run.train_fingerprint,
        "fingerprint": run.fingerprint,
        **_evaluation(grid),
        "tests": [{"name": t.name, "src": str(t.src), "ref": str(t.ref)} for t in grid.tests],
        "metrics": list(grid.metrics),
        "contrastive": [{"name": c.name, "suite": str(c.suite), "normalize": c.normalize} for c in grid.contrastive],
    }
    if distillation is not None:
        spec["distillation"] = distillation
    run.dir.mkdir(parents=True, exist_ok=True)
    options = {**train, "device": device, "threads": threads, "progress": False}
    text = f"# adlnmt train --config {run.dir / 'train.yaml'}\n" + yaml.safe_dump(options, sort_keys=False)
    atomic_write(run.dir / "train.yaml", lambda tmp: tmp.write_text(text, encoding="utf-8"))
    write_json(run.dir / "run.json", spec)


@dataclass
class Outcome:
    run: Run
    returncode: int
    seconds: float
    result: RunResult | None

    @property
    def ok(self) -> bool:
        """The run finished (a worker that a stop signal ended as it exited may have finished it too)."""
        return self.result is not None

    @property
    def stopped(self) -> bool:
        """A stop signal ended the worker (its training checkpointed) or came before it started: the command stops;
        running it again resumes the run, unless the worker had finished it (``ok``)."""
        return self.returncode in STOPPED.values() or self.returncode in ENDED_BY


def last_lines(path: Path, count: int = 3) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return "\n".join(lines[-count:])


class Workers:
    """The running worker processes; a stop signal the experiment receives is passed on to each of them (each
    finishes its update, checkpoints and exits), and no new run starts after one."""

    def __init__(self, environment: dict[str, str] | None = None) -> None:
        self.running: dict[Path, subprocess.Popen] = {}
        self.lock = threading.Lock()
        self.stopping = False
        self.environment = environment or {}  # decoding_environment
        self.decode_alone = DecodeAlone(self.running, self.lock) if quiet.ENVIRONMENT in self.environment else None

    def forward(self, number: int) -> None:
        self.stopping = True
        with self.lock:
            if self.decode_alone:  # a stopped worker would not see the signal: continue them all, stop no more
                self.decode_alone.done.set()
                self.decode_alone.release()
            for process in self.running.values():
                process.send_signal(number)

    def attempt(self, run: Run, threads: int) -> Outcome:
        """One worker process for ``run``, its output appended to the run's log."""
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), **self.environment}
        command = [sys.executable, "-m", "adlnmt.experiment.worker", str(run.dir)]
        start = time.monotonic()
        run.dir.mkdir(parents=True, exist_ok=True)
        quiet.clear_handshake(run.dir)
        with open(run.log, "a", encoding="utf-8") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
            log.flush()
            with self.lock:
                if self.stopping:
                    return Outcome(run, STOPPED["SIGTERM"], 0.0, None)
                # a terminal's Ctrl-C reaches it directly too: the forwarded copy counts as the same signal
                process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                           preexec_fn=die_with_parent)  # fmt: skip
                self.running[run.dir] = process
            returncode = process.wait()
            with self.lock:
                del self.running[run.dir]
        return _outcome(run, returncode, time.monotonic() - start)


def decoding_environment(jobs: int, decode_alone: bool) -> dict[str, str]:
    """What the workers are told about their timed decoding (:mod:`adlnmt.experiment.quiet`): to wait for the
    runner's grant (several at once, decoding alone), or to decode beside any training (``decode_alone`` off)."""
    if not decode_alone:
        return {quiet.BESIDE_TRAINING: "1"}
    return {quiet.ENVIRONMENT: "1"} if jobs > 1 else {}


def _outcome(run: Run, returncode: int, seconds: float) -> Outcome:
    """The worker's outcome; one that a stop signal ended after it had written the run's result (while exiting)
    finished the run."""
    finished = returncode == 0 or (returncode in ENDED_BY and run.matches(read_result(run.dir / RESULT_FILE)))
    if finished:
        run.archive_result()
    return Outcome(run, returncode, seconds, run.result() if finished else None)


def execute(runs: Iterable[Run], jobs: int, threads: int, report: Callable[[str], None] = print,
            decode_alone: bool = True) -> list[Outcome]:  # fmt: skip
    """Run every run in a subprocess, ``jobs`` at a time, each translating its test sets with the other workers
    and the machine's other grids' training stopped (:mod:`adlnmt.experiment.quiet`; not with ``decode_alone`` off,
    when the speeds are taken beside any training and recorded as such); a failure is reported and the others go
    on. A SIGTERM or SIGINT stops the running workers with a checkpoint and starts no further run (a second one: at
    once)."""
    from adlnmt.train.signals import StopSignals

    runs = list(runs)
    lock = threading.Lock()
    done: list[Outcome] = []
    workers = Workers(decoding_environment(jobs, decode_alone))

    def one(run: Run) -> Outcome:
        if workers.stopping:
            return Outcome(run, STOPPED["SIGTERM"], 0.0, None)
        with lock:
            report(f"start  {run.label}  (log: {run.log})")
        outcome = workers.attempt(run, threads)
        with lock:
            done.append(outcome)
            where = f"[{len(done)}/{len(runs)}] {run.label}"
            if outcome.result is not None:
                report(f"done   {where} in {outcome.seconds / 60:.1f} min: {summary(outcome.result)}")
                if (line := run.compare_rerun()) is not None:
                    report(f"       {run.label} trained again: {line}")
            elif outcome.stopped:
                report(f"stopped {where}: checkpointed; running the experiment again resumes it")
            else:
                tail = last_lines(run.log).replace("\n", "\n         ")
                report(f"FAILED {where} (exit status {outcome.returncode}); see {run.log}:\n         {tail}")
        return outcome

    with (
        StopSignals(announce=False, forward=workers.forward),
        workers.decode_alone or contextlib.nullcontext(),
        ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
    ):
        return list(pool.map(one, runs))


def summary(result: RunResult) -> str:
    """One line: updates, training minutes and the first test set's scores."""
    parts = [f"{result.updates} updates, {result.train_minutes:.1f} train min"]
    for name, test in list(result.tests.items())[:1]:
        scores = ", ".join(f"{m} {v:.2f}" for m, v in test.scores.items())
        parts.append(f"{name}: {scores}")
    return "; ".join(parts)
