"""kill -9 (also between and inside the files of a checkpoint), SIGTERM, SIGINT and a full disk during training:
after re-running the command, the final state, metrics.jsonl and best model equal an uninterrupted run's."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from .harness import differences, outcome, records, run, start

UPDATES = 30


@pytest.fixture(scope="module")
def straight(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    model = tmp_path_factory.mktemp("straight") / "model"
    status, stderr = run(demo_data / "data", model, UPDATES)
    assert status == 0, stderr
    return outcome(model, UPDATES)


@pytest.mark.parametrize(
    "point",
    [
        "update-0000020.state.pt:written",  # inside the state's write: the checkpoint of 20 never committed
        "update-0000020.safetensors:replaced",  # between the weights and the state
        "update-0000020.state.pt:replaced",  # committed, best.safetensors and pruning not done yet
    ],
)
def test_kill_9_inside_a_checkpoint(demo_data: Path, tmp_path: Path, straight: dict, point: str) -> None:
    model = tmp_path / "model"
    status, _ = run(demo_data / "data", model, UPDATES, hook=f"kill@{point}")
    assert status == -signal.SIGKILL
    status, stderr = run(demo_data / "data", model, UPDATES)
    assert status == 0, stderr
    assert "resuming at update" in stderr
    assert differences(straight, outcome(model, UPDATES)) == []


def interrupt_after_first_checkpoint(data: Path, model: Path, number: int) -> tuple[int, str]:
    """Start training, send signal ``number`` once the first checkpoint is recorded; (exit status, stderr)."""
    process = start(data, model, UPDATES)
    deadline = time.monotonic() + 120
    while not records(model) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(number)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


@pytest.mark.parametrize(("number", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_stop_signal_checkpoints_and_the_rerun_ends_identical(
    demo_data: Path, tmp_path: Path, straight: dict, number: int, status: int
) -> None:
    model = tmp_path / "model"
    got, stderr = interrupt_after_first_checkpoint(demo_data / "data", model, number)
    assert got == status, stderr
    name = signal.Signals(number).name
    assert f"{name}: checkpoint of update" in stderr and "run the same command again to resume" in stderr
    stopped = int(stderr.split(f"{name}: checkpoint of update ")[1].split()[0])
    assert 10 <= stopped < UPDATES and (model / "states" / f"update-{stopped:07d}.state.pt").is_file()
    status, stderr = run(demo_data / "data", model, UPDATES)
    assert status == 0, stderr
    assert f"resuming at update {stopped}" in stderr
    assert differences(straight, outcome(model, UPDATES)) == []


def test_a_signal_during_a_checkpoint_stops_right_after_it(demo_data: Path, tmp_path: Path, straight: dict) -> None:
    model = tmp_path / "model"
    status, stderr = run(demo_data / "data", model, UPDATES, hook="term@update-0000010.safetensors:replaced")
    assert status == 0, stderr
    assert "SIGTERM: checkpoint of update 10 written" in stderr
    assert [r["update"] for r in records(model)] == [10]
    assert run(demo_data / "data", model, UPDATES)[0] == 0
    assert differences(straight, outcome(model, UPDATES)) == []


def test_a_full_disk_is_a_clear_error_and_the_rerun_resumes(demo_data: Path, tmp_path: Path, straight: dict) -> None:
    model = tmp_path / "model"
    status, stderr = run(demo_data / "data", model, UPDATES, hook="enospc@update-0000020.state.pt:written")
    assert status == 2, stderr
    message = stderr.strip().splitlines()[-1]
    assert message.startswith("error: ") and message.endswith(
        "update-0000020.state.pt: cannot write (No space left on device); its previous version is intact"
    )
    assert "Traceback" not in stderr
    assert not list(model.glob("states/.*tmp*"))  # no temporary file left
    status, stderr = run(demo_data / "data", model, UPDATES)
    assert status == 0, stderr
    assert "resuming at update 10" in stderr
    assert differences(straight, outcome(model, UPDATES)) == []
