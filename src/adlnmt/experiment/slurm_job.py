"""What a SLURM job of ``adlnmt experiment --executor slurm`` runs (:mod:`adlnmt.experiment.slurm`): the run's worker
in a subprocess, the warning signal passed on to it as SIGTERM. Standard library only, so that the job's own process
(submitit's) starts without importing torch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class RunJob:
    """What a SLURM job runs for one run: the worker in a subprocess. A callable with a ``checkpoint`` method, which
    submitit calls on the warning signal before it requeues the job (its ``Checkpointable`` protocol)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.process: subprocess.Popen | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"threads": self.threads, "process": None}

    def __call__(self, run_dir: str) -> int:
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}
        command = [sys.executable, "-m", "adlnmt.experiment.worker", run_dir]
        job = os.environ.get("SLURM_ARRAY_JOB_ID", "")
        job = f"{job}_{os.environ['SLURM_ARRAY_TASK_ID']}" if job else os.environ.get("SLURM_JOB_ID", "?")
        with open(Path(run_dir) / "log.txt", "a", encoding="utf-8") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} SLURM job {job} on {os.uname().nodename}: "
                      f"{' '.join(command)}\n")  # fmt: skip
            log.flush()
            # SLURM signals every process of the job step: the worker leaves the warning signal to this process,
            # which passes it on as SIGTERM (checkpoint) instead
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            preexec_fn=_ignore_warning_signal)  # fmt: skip
            returncode = self._wait()
        if returncode != 0:
            raise RuntimeError(f"the worker of {run_dir} exited with status {returncode}: see {run_dir}/log.txt")
        return returncode

    def _wait(self) -> int:
        """Poll (no blocking wait: the signal handler polls the same process)."""
        assert self.process is not None
        while (returncode := self.process.poll()) is None:
            time.sleep(0.2)
        return returncode

    def checkpoint(self, run_dir: str) -> Any:
        """On the warning signal: the worker saves at its update and exits; the job is then requeued as is."""
        from submitit.helpers import DelayedSubmission

        if self.process is not None and self.process.poll() is None:
            print(f"warning signal: passing SIGTERM to the worker of {run_dir} (checkpoint, then requeue)", flush=True)
            self.process.send_signal(signal.SIGTERM)
            self._wait()
        return DelayedSubmission(RunJob(self.threads), run_dir)


def _ignore_warning_signal() -> None:
    from submitit.core.job_environment import JobEnvironment

    signal.signal(JobEnvironment._usr_sig(), signal.SIG_IGN)
