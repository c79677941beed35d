"""Timing finished runs again on this machine: ``adlnmt experiment GRID --retime``.

A run's decoding speed is measured once, when it finishes, on the machine of that session; where the host changes
between sessions (this project's VM does), speeds compare only between runs timed on one processor
(:func:`adlnmt.experiment.report.timed_on`). Retiming translates the test sets of each selected finished run again,
one run after another in this process, with every adlnmt training worker on the machine stopped meanwhile
(:func:`adlnmt.experiment.quiet.machine_alone`; anything else still counts: a run timed while other processes kept
more than ``BUSY_BESIDE_LIMIT`` cores busy is left as it was), with the weights, device, threads and
decoding options the run was evaluated with. The hypotheses must be the archived ones, else the run is left as it
was (other code or weights would be timed); then its speed figures are replaced, and the first timing is kept
under ``retimed.before``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from adlnmt.bench.machine import BUSY_BESIDE_LIMIT
from adlnmt.errors import UserError
from adlnmt.experiment.quiet import machine_alone
from adlnmt.experiment.report import timed_on
from adlnmt.experiment.results import RESULT_FILE, FirstTiming, Machine, Retimed, RunResult, Timing, read_result
from adlnmt.experiment.runner import Run
from adlnmt.experiment.speed import Timed
from adlnmt.jsontext import read_object
from adlnmt.store import ModelDir
from adlnmt.store.atomic import write_text_atomic

if TYPE_CHECKING:
    from adlnmt.inference.translator import Translator


def load_weights(run: Run, result: RunResult) -> Translator | str:
    """The finished run's translator as it was evaluated (its checkpoint, device and threads), or why it cannot be
    loaded on this machine (also for :mod:`adlnmt.experiment.score_added`)."""
    import torch

    from adlnmt.inference.translator import Translator

    if not ModelDir(run.model_dir).exists():
        return f"its model is not on this machine ({run.model_dir})"
    if result.device.startswith("cuda") and not torch.cuda.is_available():
        return f"it ran on {result.device}, and this machine has no GPU"
    torch.set_num_threads(result.threads)
    try:
        return Translator.load(run.model_dir, result.checkpoint, result.device)
    except (UserError, FileNotFoundError) as err:
        return str(err)


def keep(run: Run, result: RunResult, files: dict[str, str] | None = None) -> None:
    """Save ``result`` (and first ``files``: relative path → text, e.g. new hypotheses) wherever the run's result is
    kept: its archive and its run directory, where each holds a result of the run."""
    for place in (run.archive, run.dir):
        if run.matches(read_result(place / RESULT_FILE)):
            for name, text in (files or {}).items():
                write_text_atomic(place / name, text)
            result.save(place / RESULT_FILE)  # last: the files it names are there


def retime(run: Run) -> Timed:
    """Time ``run``'s test sets again and update its results where they are kept: what happened, in one line, and
    whether every test set was timed again with the machine to itself (else the run is left as it was)."""
    from adlnmt.experiment.worker import code_version, evaluate_test

    folder = run.finished_in()
    result = read_result(folder / RESULT_FILE) if folder else None
    spec = read_object(run.dir / "run.json")
    if folder is None or result is None:
        return Timed(f"skipped {run.label}: not finished", alone=False)
    if spec is None:
        return Timed(f"skipped {run.label}: its model is not on this machine ({run.model_dir})", alone=False)
    translator = load_weights(run, result)
    if isinstance(translator, str):
        return Timed(f"skipped {run.label}: {translator}", alone=False)
    timed: dict[str, Timing] = {}
    with tempfile.TemporaryDirectory() as scratch, machine_alone():  # training on the machine stopped meanwhile
        for test in (t for t in spec["tests"] if t["name"] in result.tests):  # not those added after it finished
            found = evaluate_test(translator, test, spec, Path(scratch))
            again = (Path(scratch) / found.hypotheses).read_text(encoding="utf-8")
            if again != (folder / result.tests[test["name"]].hypotheses).read_text(encoding="utf-8"):
                return Timed(
                    f"skipped {run.label}: its {test['name']} translation differs from the archived one (other "
                    "code or weights than the run was evaluated with): its speed would not be comparable",
                    alone=False,
                )
            timed[test["name"]] = found.timing
            if (busy := found.timing.busy_beside or 0.0) > BUSY_BESIDE_LIMIT:
                return Timed(
                    f"skipped {run.label}: other processes kept {busy:.1f} cores busy while its {test['name']} was "
                    "timed: stop them and retime it",
                    alone=False,
                )
    previous = {name: test.timing for name, test in result.tests.items()}
    first = result.retimed.before if result.retimed else FirstTiming(machine=result.provenance.machine, tests=previous)
    retimed = Retimed(machine=Machine.here(result.device), code=code_version(), before=first)
    result = result.with_timings(timed, retimed)
    keep(run, result)
    speeds = ", ".join(f"{name} {previous[name].sentences_per_s:.1f} → {timing.sentences_per_s:.1f}"
                       for name, timing in timed.items())  # fmt: skip
    return Timed(f"retimed {run.label}: sentences/s {speeds} on {timed_on(result)}", alone=True)
