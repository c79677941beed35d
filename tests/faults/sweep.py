"""Fault sweep: interrupt a small training run at random points (kill -9 at a random moment, kill -9 between or
inside the files of a random checkpoint, SIGTERM at a random moment), re-run it until it finishes, and compare its
final state, metrics.jsonl and best model with an uninterrupted run's. Prints the figures.

    PYTHONPATH=src python tests/faults/sweep.py --points 20 [--seed 1] [--data DIR]
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for train.conftest when run as a script

from faults.harness import differences, outcome, run, start

UPDATES = 30
STAGES = ("safetensors:written", "safetensors:replaced", "state.pt:written", "state.pt:replaced")


def interrupt(data: Path, model: Path, rng: random.Random, window: float) -> tuple[str, bool]:
    """One interrupted attempt at a random point (moments within the first ``window`` seconds of training); returns
    what was done and whether it interrupted the run (a signal may still land after the run finished)."""
    kind = rng.choice(("kill at a moment", "kill inside a checkpoint", "sigterm at a moment"))
    if kind == "kill inside a checkpoint":
        point = f"update-{rng.choice((10, 20, 30)):07d}.{rng.choice(STAGES)}"
        status, _ = run(data, model, UPDATES, hook=f"kill@{point}")
        return f"{kind} ({point})", status == -signal.SIGKILL
    process = start(data, model, UPDATES)
    started = time.monotonic()
    while not (model / "config.json").exists() and process.poll() is None:  # start-up (imports) is over
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, window))
    process.send_signal(signal.SIGKILL if kind.startswith("kill") else signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    interrupted = process.returncode != 0 or "SIGTERM received" in stderr
    return f"{kind} ({time.monotonic() - started:.1f} s after start, exit {process.returncode})", interrupted


def sweep(data: Path, points: int, seed: int, work: Path) -> dict[str, int]:
    """Run ``points`` interrupted runs; returns the counts (points, restarts, identical finals)."""
    rng = random.Random(seed)
    window = training_seconds(data, work / "straight")
    reference = outcome(work / "straight", UPDATES)
    figures = {"points": 0, "interrupted": 0, "restarts": 0, "identical": 0}
    for index in range(points):
        model = work / f"point-{index}"
        what, interrupted = interrupt(data, model, rng, 0.9 * window)
        figures["interrupted"] += interrupted
        restarts = 1
        while (status := run(data, model, UPDATES))[0] != 0:
            restarts += 1
            assert restarts < 5, status[1]
        found = differences(reference, outcome(model, UPDATES))
        figures["points"] += 1
        figures["restarts"] += restarts
        figures["identical"] += not found
        missed = "" if interrupted else " (the run had finished: not interrupted)"
        print(f"{index + 1:3d}. {what}{missed}: {restarts} restart(s), {'identical' if not found else found[:3]}",
              flush=True)  # fmt: skip
    return figures


def training_seconds(data: Path, model: Path) -> float:
    """Run the uninterrupted reference; returns the seconds from its start-up's end to its exit."""
    process = start(data, model, UPDATES)
    while not (model / "config.json").exists() and process.poll() is None:
        time.sleep(0.05)
    started = time.monotonic()
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, help="a prepared data directory (default: the demo corpus, prepared)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        data = args.data or demo_data(work)
        figures = sweep(data, args.points, args.seed, work)
    print(f"points tried {figures['points']} (interrupted {figures['interrupted']}), restarts {figures['restarts']}, "
          f"identical finals {figures['identical']}/{figures['points']}")  # fmt: skip
    return 0 if figures["identical"] == figures["points"] else 1


def demo_data(work: Path) -> Path:
    from adlnmt.data.demo import write_demo_corpus
    from adlnmt.data.prepare import prepare

    corpus = work / "corpus"
    write_demo_corpus(corpus, size=1200, seed=3)
    prepare(corpus / "train.src", corpus / "train.tgt", corpus / "valid.src", corpus / "valid.tgt", work / "data",
            vocab_size=150)  # fmt: skip
    return work / "data"


if __name__ == "__main__":
    sys.exit(main())
