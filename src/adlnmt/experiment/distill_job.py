"""What a SLURM job of a grid's distillation step runs (:mod:`adlnmt.experiment.distill_runs`): ``adlnmt distill`` in
a subprocess, its output appended to the step's log. Standard library only, as :mod:`adlnmt.experiment.slurm_job`, so
that the job's own process starts without importing torch; a distillation stopped by the warning signal resumes from
its last committed chunk when the job is requeued."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

from adlnmt.experiment.slurm_job import _ignore_warning_signal


class DistillJob:
    """A callable submitit runs with the command line of ``adlnmt distill``; its ``checkpoint`` (submitit's
    ``Checkpointable`` protocol) stops the subprocess on the warning signal and requeues the same command."""

    def __init__(self, threads: int, log: str) -> None:
        self.threads = threads
        self.log = log
        self.process: subprocess.Popen | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"threads": self.threads, "log": self.log, "process": None}

    def __call__(self, command: list[str]) -> int:
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} SLURM job {os.environ.get('SLURM_JOB_ID', '?')} "
                      f"on {os.uname().nodename}: {' '.join(command)}\n")  # fmt: skip
            log.flush()
            # the warning signal is this process's to handle (checkpoint): the subprocess ignores it, as a worker does
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            preexec_fn=_ignore_warning_signal)  # fmt: skip
            while (returncode := self.process.poll()) is None:
                time.sleep(0.2)
        if returncode != 0:
            raise RuntimeError(f"adlnmt distill exited with status {returncode}: see {self.log}")
        return returncode

    def checkpoint(self, command: list[str]) -> Any:
        from submitit.helpers import DelayedSubmission

        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # committed chunks stay; the requeued job resumes after them
            self.process.wait()
        return DelayedSubmission(DistillJob(self.threads, self.log), command)
