"""Decoding timed alone: the runner stops the other workers while one run decodes, and continues them after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adlnmt.experiment import quiet
from adlnmt.experiment.quiet import GRANTED, PAUSED, REQUEST, DecodeAlone, decoding_alone, paused_seconds
from adlnmt.experiment.runner import decoding_environment


def state(process: subprocess.Popen) -> str:
    """The process's state letter from /proc (T: stopped)."""
    stat = Path(f"/proc/{process.pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[dict[Path, subprocess.Popen]]:
    """Three sleeping processes standing in for workers, by run directory a, b, c."""
    running = {}
    for name in "abc":
        (tmp_path / name).mkdir()
        running[tmp_path / name] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield running
    for process in running.values():
        process.kill()
        process.wait()


def test_a_request_stops_every_other_worker_until_it_ends(workers: dict[Path, subprocess.Popen]) -> None:
    a, b, c = workers
    alone = DecodeAlone(workers, threading.Lock())
    alone.step()
    assert not (a / GRANTED).exists() and "T" not in {state(p) for p in workers.values()}
    (a / REQUEST).touch()
    alone.step()
    assert (a / GRANTED).exists()
    assert wait_for(lambda: state(workers[b]) == state(workers[c]) == "T")
    assert state(workers[a]) != "T"
    time.sleep(0.2)
    (a / REQUEST).unlink()
    alone.step()
    assert wait_for(lambda: "T" not in {state(p) for p in workers.values()})
    assert paused_seconds(b) >= 0.2 and paused_seconds(c) >= 0.2
    assert paused_seconds(a) == 0.0 and not (a / PAUSED).exists()


def test_one_run_decodes_at_a_time_and_waiting_is_not_paused_training(workers: dict[Path, subprocess.Popen]) -> None:
    a, b, _ = workers
    alone = DecodeAlone(workers, threading.Lock())
    (a / REQUEST).touch()
    (b / REQUEST).touch()  # both ask: a (the first found) decodes, b waits
    alone.step()
    assert (a / GRANTED).exists() and not (b / GRANTED).exists()
    (a / REQUEST).unlink()
    alone.step()  # a is done: b's turn
    assert (b / GRANTED).exists()
    assert wait_for(lambda: state(workers[a]) == "T")
    assert paused_seconds(b) == 0.0  # it was stopped while waiting to decode, not while training
    (b / REQUEST).unlink()
    alone.step()
    assert wait_for(lambda: state(workers[a]) != "T")


def test_a_killed_holder_releases_the_others(workers: dict[Path, subprocess.Popen]) -> None:
    a, b, _ = workers
    alone = DecodeAlone(workers, threading.Lock())
    (a / REQUEST).touch()
    alone.step()
    assert wait_for(lambda: state(workers[b]) == "T")
    workers[a].kill()
    workers[a].wait()
    del workers[a]  # the runner forgets a worker once it has exited
    alone.step()
    assert wait_for(lambda: "T" not in {state(p) for p in workers.values()})
    quiet.clear_handshake(a)
    assert not (a / REQUEST).exists() and not (a / GRANTED).exists()


def test_the_thread_grants_and_leaving_continues_everyone(workers: dict[Path, subprocess.Popen]) -> None:
    a, b, _ = workers
    with DecodeAlone(workers, threading.Lock(), poll_seconds=0.01):
        (a / REQUEST).touch()
        assert wait_for(lambda: (a / GRANTED).exists() and state(workers[b]) == "T")
    assert wait_for(lambda: state(workers[b]) != "T")
    assert json.loads((b / PAUSED).read_text())["seconds"] > 0


def test_the_worker_side_waits_for_the_grant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with decoding_alone(tmp_path):  # not started by a runner that asks for it: at once
        assert not (tmp_path / REQUEST).exists()
    monkeypatch.setenv(quiet.ENVIRONMENT, "1")
    granted_at: list[float] = []

    def grant() -> None:
        assert wait_for(lambda: (tmp_path / REQUEST).exists())
        time.sleep(0.1)
        granted_at.append(time.monotonic())
        (tmp_path / GRANTED).touch()

    granter = threading.Thread(target=grant)
    granter.start()
    with decoding_alone(tmp_path, poll_seconds=0.01):
        entered = time.monotonic()
    granter.join()
    assert entered >= granted_at[0]
    assert not (tmp_path / REQUEST).exists() and not (tmp_path / GRANTED).exists()


def test_a_stop_signal_reaches_stopped_workers(workers: dict[Path, subprocess.Popen]) -> None:
    from adlnmt.experiment.runner import Workers

    runner = Workers(decoding_environment(2, True))
    runner.running.update(workers)
    a, b, _ = workers
    (a / REQUEST).touch()
    runner.decode_alone.step()
    assert wait_for(lambda: state(workers[b]) == "T")
    runner.forward(signal.SIGTERM)  # a stopped process would keep the signal pending: it is continued first
    assert runner.decode_alone.done.is_set()  # and the thread stops no worker again
    for process in workers.values():
        assert process.wait(timeout=10) == -signal.SIGTERM


def test_a_grant_is_never_recreated_behind_a_worker_that_left(workers: dict[Path, subprocess.Popen]) -> None:
    """The race behind a ``decoding.granted`` left in a finished run (seen on a loaded machine): the runner looks
    at the holder's request, the worker then removes its grant and its request, and the runner's next touch of the
    grant recreated it. Here the runner's look comes after the grant's removal, the request still there: the
    runner must not write the grant again while the same hold lasts."""
    a, _, _ = workers
    alone = DecodeAlone(workers, threading.Lock())
    (a / REQUEST).touch()
    alone.step()
    assert (a / GRANTED).exists()
    (a / GRANTED).unlink()  # the worker leaving: its grant removed, its request not yet seen gone
    alone.step()
    assert not (a / GRANTED).exists()
    (a / REQUEST).unlink()
    alone.step()
    assert alone.holder is None and not list(a.glob("decoding.*"))


def test_a_damaged_paused_file_counts_as_no_pause(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for damaged in ("{", '{"seconds": "x"}', "[]", "\xff"):
        (tmp_path / PAUSED).write_text(damaged)
        assert paused_seconds(tmp_path) == 0.0
        assert f"{tmp_path / PAUSED}: unreadable" in capsys.readouterr().err
    for impossible in ("1e999", "-3", "NaN"):
        (tmp_path / PAUSED).write_text(f'{{"seconds": {impossible}}}')
        assert paused_seconds(tmp_path) == 0.0
        assert f"{tmp_path / PAUSED}: {float(impossible)} seconds is no pause" in capsys.readouterr().err


def test_a_failed_paused_write_keeps_the_previous_value(
    workers: dict[Path, subprocess.Popen], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk while the runner adds a pause: paused.json keeps its previous content, the runner goes on."""
    _, b, _ = workers
    (b / PAUSED).write_text(json.dumps({"seconds": 5.0}))
    alone = DecodeAlone(workers, threading.Lock())
    alone.stopped[b] = quiet.Stopped(time.monotonic() - 1, waiting_to_decode=False)

    def full_disk(path: Path, text: str, encoding: str | None = None) -> int:
        with open(path, "w", encoding=encoding) as handle:
            handle.write(text[:3])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    alone.release()
    monkeypatch.undo()
    assert paused_seconds(b) == 5.0
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(path.name for path in b.iterdir()) == [PAUSED]


def register(process: subprocess.Popen, run_dir: Path, runner: int = 1) -> None:
    """Write the registry entry ``registered_training`` writes, for a process started here."""
    quiet.registry().mkdir(parents=True, exist_ok=True)
    entry = {"pid": process.pid, "run_dir": str(run_dir), "runner": runner, "started": quiet._started(process.pid)}
    (quiet.registry() / f"{process.pid}.json").write_text(json.dumps(entry))


def test_training_registers_while_it_runs_and_stale_entries_go(tmp_path: Path) -> None:
    with quiet.registered_training(tmp_path):
        (mine,) = quiet.training_workers()
        assert (mine.pid, mine.run_dir) == (os.getpid(), tmp_path.resolve())
    assert quiet.training_workers() == []
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    register(ended, tmp_path)
    ended.wait()  # exited: its pid may be reused, its entry is stale
    (quiet.registry() / "999999999.json").write_text(
        json.dumps({"pid": 1, "run_dir": "x", "runner": 0, "started": "-1"})
    )  # pid 1 started at another time
    assert quiet.training_workers() == [] and not list(quiet.registry().glob("*.json"))


def test_a_timed_decoding_stops_the_training_of_other_grids(workers: dict[Path, subprocess.Popen]) -> None:
    a, b, c = workers
    register(workers[a], a, runner=7)  # another grid's training
    register(workers[b], b, runner=8)  # the decoding worker's own grid: its runner counts the pause
    with quiet.machine_alone(same_grid_runner=8):
        assert wait_for(lambda: state(workers[a]) == state(workers[b]) == "T")
        assert state(workers[c]) != "T"  # not registered: not training under adlnmt
        time.sleep(0.2)
    assert wait_for(lambda: "T" not in {state(p) for p in workers.values()})
    assert paused_seconds(a) >= 0.2 and paused_seconds(b) == 0.0


def test_the_watchdog_continues_them_when_the_decoding_process_dies(workers: dict[Path, subprocess.Popen]) -> None:
    a, _, _ = workers
    register(workers[a], a)
    holder = subprocess.Popen([sys.executable, "-c", "import time\nfrom adlnmt.experiment.quiet import machine_alone\n"
                               "with machine_alone():\n    time.sleep(60)"])  # fmt: skip
    try:
        assert wait_for(lambda: state(workers[a]) == "T", 60)
        holder.send_signal(signal.SIGKILL)  # no finally runs: the watchdog's pipe closes with it
        assert wait_for(lambda: state(workers[a]) != "T", 60)
    finally:
        holder.kill()
        holder.wait()


def test_decoding_beside_training_stops_nothing(workers: dict[Path, subprocess.Popen], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    a, _, _ = workers
    register(workers[a], a)
    monkeypatch.setenv(quiet.BESIDE_TRAINING, "1")
    with decoding_alone(tmp_path):
        time.sleep(0.1)
        assert state(workers[a]) != "T"


def test_one_timed_decoding_at_a_time_on_the_machine(capfd: pytest.CaptureFixture) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import sys\nfrom adlnmt.experiment.quiet import machine_alone\n"
                               "with machine_alone():\n    print('in', flush=True)\n    sys.stdin.readline()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    entered = threading.Event()

    def second() -> None:
        with quiet.machine_alone():
            entered.set()

    thread = threading.Thread(target=second)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "in\n"
        thread.start()
        said = ""

        def waiting() -> bool:
            nonlocal said
            said += capfd.readouterr().err
            return "waiting for another timed decoding on this machine to end" in said

        assert wait_for(waiting) and not entered.is_set()
        assert holder.stdin is not None
        holder.stdin.write("done\n")  # the holder's body ends, and with it its hold
        holder.stdin.flush()
        assert wait_for(entered.is_set)
    finally:
        holder.kill()
        holder.wait()
        thread.join()


@pytest.mark.parametrize(
    ("jobs", "decode_alone", "told"),
    [
        (2, True, {quiet.ENVIRONMENT: "1"}),
        (1, True, {}),
        (2, False, {quiet.BESIDE_TRAINING: "1"}),
        (1, False, {quiet.BESIDE_TRAINING: "1"}),
    ],
)
def test_what_the_runner_tells_its_workers(jobs: int, decode_alone: bool, told: dict[str, str]) -> None:
    """One run at a time decodes alone machine-wide with no grant to wait for; --decode-beside-training stops no
    training at all, also with one run at a time (other grids may train on the machine)."""
    assert decoding_environment(jobs, decode_alone) == told


def test_a_registry_others_may_write_to_is_not_used(workers: dict[Path, subprocess.Popen],
                                                    capfd: pytest.CaptureFixture) -> None:  # fmt: skip
    """Another user could name this user's processes in it, to have them stopped."""
    a, _, _ = workers
    register(workers[a], a)
    quiet.registry().chmod(0o777)
    try:
        with quiet.machine_alone():
            time.sleep(0.1)  # a stop would have landed by now (it is sent before the body starts)
            assert state(workers[a]) != "T"
        assert "others may write to it" in capfd.readouterr().err
    finally:
        quiet.registry().chmod(0o700)
