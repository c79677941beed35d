"""`adlnmt experiment` under SIGTERM: the running worker checkpoints and stops, no further run starts, the command
exits 0 saying how to resume, `--dry-run` tells where it resumes, and running it again resumes the stopped run and
finishes the rest."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from .harness import environment, write_tiny_grid


def write_grid(root: Path, corpus: Path) -> Path:
    return write_tiny_grid(root / "grid.yaml", "stop", corpus.parent, {"a": "aan"}, beam=1, updates=120, interval=20)


def experiment(grid: Path, out: Path, *options: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "adlnmt", "experiment", str(grid), "--out", str(out), "--threads", "1", *options]
    return subprocess.Popen(command, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_sigterm_stops_the_experiment_and_a_rerun_resumes(demo_data: Path, tmp_path: Path) -> None:
    grid, out = write_grid(tmp_path, demo_data / "corpus"), tmp_path / "out"
    first, second = out / "runs" / "a" / "seed-1", out / "runs" / "a" / "seed-2"
    process = experiment(grid, out)
    deadline = time.monotonic() + 120
    while not (first / "model" / "metrics.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=120)
    assert process.returncode == 0, stdout
    assert "stopped [1/2] a seed 1: checkpointed" in stdout and "re-run the same command to resume" in stdout
    assert "stopped by SIGTERM" in (first / "log.txt").read_text()
    assert not (first / "result.json").exists() and not (first / "trained.json").exists()
    assert not second.exists() or not (second / "log.txt").exists()  # no run starts after the signal
    stdout, _ = experiment(grid, out, "--dry-run").communicate(timeout=60)
    assert re.search(r"seed 1 started \(resumes at update \d+\), seed 2 new", stdout), stdout
    process = experiment(grid, out)
    stdout, _ = process.communicate(timeout=300)
    assert process.returncode == 0, stdout
    assert "2 runs, 0 finished (skipped), 2 to run (1 resumed first)" in stdout
    assert "resuming at update" in (first / "log.txt").read_text()
    assert (first / "result.json").is_file() and (second / "result.json").is_file()
