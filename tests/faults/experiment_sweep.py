"""Experiment sweep: interrupt `adlnmt experiment` (2 variants × 2 seeds of tiny models) at random moments — kill -9
of the command and its workers, or SIGTERM to the command — re-run it until it finishes, and check that no run is
lost (every run has its result), none is done twice (no attempt after the one that finished it) and every
hypothesis file equals an uninterrupted experiment's. Prints the figures.

    PYTHONPATH=src python tests/faults/experiment_sweep.py --points 10 [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, when run as a script

from faults.harness import environment, write_tiny_grid

RUNS = [(variant, seed) for variant in ("sa", "aan") for seed in (1, 2)]


def write_grid(root: Path, demo: Path) -> Path:
    variants = {"sa": "mh_dot_self_att", "aan": "aan"}
    return write_tiny_grid(root / "grid.yaml", "sweep", demo, variants, beam=2, updates=24, interval=6)


def start(grid: Path, out: Path) -> subprocess.Popen:
    """The experiment command in a process group of its own (with its workers)."""
    command = [sys.executable, "-m", "adlnmt", "experiment", str(grid), "--out", str(out), "--threads", "1"]
    return subprocess.Popen(command, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip


def finish(grid: Path, out: Path) -> int:
    """Re-run until the experiment exits 0; the number of re-runs."""
    for restarts in range(1, 5):
        if start(grid, out).wait(timeout=600) == 0:
            return restarts
    raise AssertionError(f"{out}: the experiment did not finish after 4 re-runs")


def hypotheses(out: Path) -> dict[tuple[str, int], str]:
    return {(v, s): (out / "runs" / v / f"seed-{s}" / "hyp" / "test.txt").read_text(encoding="utf-8") for v, s in RUNS}


def problems(out: Path, reference: dict[tuple[str, int], str]) -> list[str]:
    """What is wrong after the interrupted experiment finished: lost, twice done or different runs."""
    found = []
    for variant, seed in RUNS:
        run = out / "runs" / variant / f"seed-{seed}"
        if not (run / "result.json").is_file():
            found.append(f"{variant}/{seed} lost")
            continue
        log = (run / "log.txt").read_text(encoding="utf-8")
        if log.count("\nfinished\n") > 1 or "\n=== " in log.partition("\nfinished\n")[2]:
            found.append(f"{variant}/{seed} run again after it finished")
    if not found and hypotheses(out) != reference:
        found.append("hypotheses differ from the uninterrupted experiment's")
    return found


def interrupt(grid: Path, out: Path, rng: random.Random) -> str:
    """One interrupted attempt at a random moment."""
    kind = rng.choice(("kill -9", "SIGTERM"))
    delay = rng.uniform(3.0, 40.0)
    process = start(grid, out)
    time.sleep(delay)
    if kind == "kill -9":
        os.killpg(process.pid, signal.SIGKILL)
    else:
        process.send_signal(signal.SIGTERM)
    return f"{kind} at {delay:.1f} s (exit {process.wait(timeout=600)})"


def sweep(demo: Path, points: int, seed: int, work: Path) -> dict[str, int]:
    grid = write_grid(work, demo)
    assert finish(grid, work / "straight") == 1
    reference = hypotheses(work / "straight")
    rng = random.Random(seed)
    figures = {"points": 0, "restarts": 0, "clean": 0}
    for index in range(points):
        out = work / f"point-{index}"
        what = interrupt(grid, out, rng)
        restarts = finish(grid, out)
        found = problems(out, reference)
        figures["points"] += 1
        figures["restarts"] += restarts
        figures["clean"] += not found
        print(f"{index + 1:3d}. {what}: {restarts} re-run(s), {found or 'all runs once, identical'}",
              flush=True)  # fmt: skip
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    from faults.sweep import demo_data

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        demo_data(work)
        figures = sweep(work, args.points, args.seed, work)
    print(f"points tried {figures['points']}, re-runs {figures['restarts']}, "
          f"clean {figures['clean']}/{figures['points']} (none lost or done twice, identical hypotheses)")  # fmt: skip
    return 0 if figures["clean"] == figures["points"] else 1


if __name__ == "__main__":
    sys.exit(main())
