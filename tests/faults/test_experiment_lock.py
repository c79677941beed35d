"""One ``adlnmt experiment`` per output directory (a second one stops at once, naming the first one's process),
and workers that do not outlive their runner (``kill -9`` of the runner: its worker checkpoints and exits)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from adlnmt.cli import main
from adlnmt.experiment.lock import lock_output

from .harness import environment, write_tiny_grid


def test_a_second_experiment_on_the_same_output_stops_naming_the_first(demo_data: Path, tmp_path: Path, capsys) -> None:
    grid = write_tiny_grid(tmp_path / "grid.yaml", "lock", demo_data, {"a": "aan"}, beam=1, updates=20, interval=10)
    out = tmp_path / "out"
    held = lock_output(out)  # the first command, running
    assert main(["experiment", str(grid), "--out", str(out), "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert f"error: {out}: another adlnmt experiment (process {os.getpid()}) is using this output directory" in err
    assert not (out / "runs").exists()  # nothing started, nothing reported as failed
    held.release()
    assert main(["experiment", str(grid), "--out", str(out), "--dry-run"]) == 0  # a dry run takes no lock


def process_state(pid: int) -> str:
    """The state letter of process ``pid`` ("" when it is gone; Z: exited, not reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ""
    return stat[stat.rindex(")") + 2]


def children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]  # fmt: skip


def test_a_worker_dies_with_its_runner(demo_data: Path, tmp_path: Path) -> None:
    grid = write_tiny_grid(tmp_path / "grid.yaml", "orphan", demo_data, {"a": "aan"}, beam=1, updates=100_000,
                           interval=20)  # fmt: skip
    run_dir = tmp_path / "out" / "runs" / "a" / "seed-1"
    command = [sys.executable, "-m", "adlnmt", "experiment", str(grid), "--out", str(tmp_path / "out"), "--threads",
               "1"]  # fmt: skip
    runner = subprocess.Popen(command, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "model" / "metrics.jsonl").exists():  # the worker trains
            assert runner.poll() is None and time.monotonic() < deadline, "the worker never trained"
            time.sleep(0.05)
        workers += children(runner.pid)
        assert len(workers) == 1
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 120
        while process_state(workers[0]) not in ("", "Z", "X"):
            assert time.monotonic() < deadline, "the worker outlived its runner by 120 s"
            time.sleep(0.05)
    finally:
        runner.kill()
        runner.wait()
        for worker in workers:  # an orphan left by a failure of this test
            if process_state(worker) not in ("", "Z", "X"):
                os.kill(worker, signal.SIGKILL)
    assert "stopped by SIGTERM" in (run_dir / "log.txt").read_text()  # it checkpointed on its way out
